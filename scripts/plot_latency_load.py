#!/usr/bin/env python3
"""Plots latency under load (`--under-load`): the probe's p50, p99 and p99.9
(µs, log axis) against the Mops the background achieved beside it, one colour
per series (verb) and run, one marker line per percentile: the "hockey stick".

Each latency record with an `achieved_mops` is one point; records without
one (unloaded runs) are skipped.

    python3 scripts/plot_latency_load.py results/latency-under-load-*.json -o plots/latency-under-load.png
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402

PERCENTILES = (("p50_ns", "p50", "-"), ("p99_ns", "p99", "--"), ("p999_ns", "p99.9", ":"))


def main():
    p = rr.parser(__doc__, "latency-under-load.png")
    a = p.parse_args()
    runs = rr.load_runs(a.files, a.label)
    items = rr.select(runs, "latency", ("achieved_mops", "p50_ns", "p99_ns", "p999_ns"))
    # x is measured, so two runs' points never meet at one: by_run keeps each
    # run (profile) a line of its own instead of one line through both.
    series = rr.group_series(items, lambda r: r["achieved_mops"], vary_keys=("size",), by_run=True)

    fig, ax = rr.new_figure()
    lows, highs = [], []
    for i, s in enumerate(series):
        color, marker = rr.style(i)
        xs = s.xs
        for key, name, ls in PERCENTILES:
            ys = [v / 1000 for v in s.ys(lambda r, k=key: r[k])]
            ax.plot(xs, ys, color=color, marker=marker, ms=4.5, lw=1.6 if name == "p50" else 1.1,
                    ls=ls, label=f"{s.label} {name}", zorder=3)
            lows += ys
            highs += ys
        # The load as asked, at each point of the p50 line.
        for x, rec in zip(xs, (pt[2] for pt in s.points)):
            if rec.get("load"):
                ax.annotate(str(rec["load"]), (x, rec["p50_ns"] / 1000), xytext=(0, -12),
                            textcoords="offset points", ha="center", fontsize=7, color=color)
    rr.log_y(ax, min(lows), max(highs))
    ax.set_xlim(left=0)
    ax.set_xlabel("background Mops achieved beside the probe")
    ax.set_ylabel("probe latency (µs), log scale")
    rr.title(fig, ax, "Latency under load", runs)
    rr.legend(ax, title="solid p50, dashed p99, dotted p99.9\nlabels: offered load")
    rr.save(fig, a.output)


if __name__ == "__main__":
    rr.run_main(main)
