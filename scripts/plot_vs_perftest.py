#!/usr/bin/env python3
"""Plots rdma-bench against perftest, pair by pair, from the JSON that
scripts/vs-perftest writes: one bar per test and size, the ratio
rdma-bench / perftest of the medians, with the repetitions' spread as an
error bar. Left panel: latency (lower is better: < 1 means rdma-bench is
faster); right panel: message rate (higher is better)."""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise rr.Unusable(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise rr.Unusable(f"{path}: not JSON ({e.msg})")
    if not isinstance(doc, dict) or not doc.get("pairs"):
        raise rr.Unusable(f"{path}: not a scripts/vs-perftest results file (no 'pairs')")
    return doc


def main():
    p = rr.parser(__doc__, "vs-perftest.png", labels=False)
    a = p.parse_args()
    doc = load(a.files[0])
    fig, axes = rr.plt.subplots(1, 2, figsize=(12, 5.2))
    for ax, metric, what in ((axes[0], "latency_us", "latency: rdma-bench p50 / perftest t_typical"),
                             (axes[1], "msg_rate_mops", "message rate: rdma-bench Mops / perftest MsgRate")):
        rows = [r for r in doc["pairs"] if r["metric"] == metric]
        labels = [f"{r['test'].replace('ib_', '')}\n{r['size']} B" for r in rows]
        ratios = [r["ratio"] for r in rows]
        # Error bars: the extreme ratios the repetitions allow.
        lo = [r["ratio"] - r["rdma_bench_spread"][0] / r["perftest_spread"][1] for r in rows]
        hi = [r["rdma_bench_spread"][1] / r["perftest_spread"][0] - r["ratio"] for r in rows]
        better = [(x <= 1.0) if metric == "latency_us" else (x >= 1.0) for x in ratios]
        colors = [rr.COLORS[2] if b else rr.COLORS[3] for b in better]
        ax.bar(range(len(rows)), ratios, color=colors, yerr=[lo, hi], capsize=3)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
        ax.set_ylabel("ratio (rdma-bench / perftest)")
        ax.set_title(what, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    env = f" — {doc['environment']}" if doc.get("environment") else ""
    fig.suptitle(f"rdma-bench vs perftest on {doc['device']}, {doc['date_utc'][:10]}, "
                 f"median of {doc['reps']} alternating runs{env}", fontsize=11)
    rr.save(fig, a.output)


if __name__ == "__main__":
    rr.run_main(main)
