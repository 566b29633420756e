#!/usr/bin/env python3
"""Heatmaps of a fabric run (rdma-bench fabric's fabric.json): one per
figure in tests[].metrics, rows the driving endpoint ("from", host/device),
columns the serving one ("to"). Failed entries are hatched and marked
"failed", pairs the schedule did not measure are blank, and pairs the
verdicts call slow for that figure are outlined in red.

    python3 scripts/plot_fabric.py fabric.json -o plots/
writes plots/fabric-<metric>.png for each figure.
"""

import argparse
import json
import math
import os
import sys
import textwrap

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402


LABELS = []  # the document's endpoint labels, by index (HOST#RANK/DEVICE where ranks share a host)


def name(ref):
    if "label" in ref:
        return ref["label"]
    i = ref.get("endpoint")
    if isinstance(i, int) and 0 <= i < len(LABELS):
        return LABELS[i]
    return f"{ref.get('host', '?')}/{ref.get('device', '?')}"


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise rr.Unusable(f"{path}: {e}")
    if not isinstance(doc, dict) or "entries" not in doc or "tests" not in doc:
        raise rr.Unusable(f"{path}: not a fabric document (no tests/entries)")
    return doc


def draw(doc, metric, out_dir):
    LABELS[:] = [e.get("label") or f"{e.get('host', '?')}/{e.get('device', '?')}" for e in doc.get("endpoints", [])]
    eps = list(LABELS)
    for e in doc["entries"]:  # endpoints named only by entries still get a row
        for side in (e.get("from", {}), e.get("to", {})):
            if name(side) not in eps:
                eps.append(name(side))
    index = {n: i for i, n in enumerate(eps)}
    n = len(eps)
    values = [[math.nan] * n for _ in range(n)]
    failed = []
    for e in doc["entries"]:
        i, j = index[name(e.get("from", {}))], index[name(e.get("to", {}))]
        if e.get("state") != "ok":
            failed.append((i, j))
        elif metric["name"] in e.get("metrics", {}):
            values[i][j] = e["metrics"][metric["name"]]
    slow = [(index[s["from"]], index[s["to"]]) for s in doc.get("verdicts", {}).get("slow", [])
            if s.get("metric") == metric["name"] and s.get("from") in index and s.get("to") in index]

    side = max(5.0, min(22.0, 2.5 + 0.28 * n))
    fig, ax = rr.new_figure(width=side + 2.0, height=side)
    import numpy as np
    data = np.ma.masked_invalid(np.array(values, dtype=float))
    cmap = rr.plt.get_cmap("viridis_r" if metric.get("better") == "lower" else "viridis").copy()
    cmap.set_bad("white")
    im = ax.imshow(data, cmap=cmap, interpolation="nearest", aspect="equal")
    bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label(f"{metric['name']} ({metric.get('better', '?')} is better)")
    small = n <= 16
    for i, j in failed:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="xxx", color="0.4", lw=0))
        if small:
            ax.text(j, i, "failed", ha="center", va="center", fontsize=7, color="black")
    for i, j in slow:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=2.2 if small else 1.2))
    if small:
        for i in range(n):
            for j in range(n):
                v = values[i][j]
                if not math.isnan(v):
                    ax.text(j, i, rr.plain_number(v), ha="center", va="center", fontsize=7,
                            color="white" if data.count() and im.norm(v) > 0.5 else "black")
    fs = 8 if n <= 32 else max(5.5, 8 - 0.04 * n)
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(eps, rotation=90, fontsize=fs)
    ax.set_yticklabels(eps, fontsize=fs)
    ax.set_xlabel("to (serves)")
    ax.set_ylabel("from (drives)")
    env = doc.get("environment") or ""
    sub = [doc.get("covers", ""), doc.get("started_utc", "")]
    if slow or failed:
        sub.append(f"red outline: slow ({len(slow)}); hatched: failed ({len(failed)})")
    fig.suptitle(textwrap.fill(metric.get("what") or metric["name"], 90), fontsize=12, fontweight="bold")
    title = "\n".join(textwrap.fill(s, 95) for s in sub if s)
    if env:
        note = "soft-RoCE in a guest, not hardware" if "soft" in env.lower() or "rxe" in env.lower() else env
        title += "\n" + textwrap.fill("environment: " + note, 95)
    ax.set_title(title, fontsize=9, color="firebrick" if env else "black")
    rr.save(fig, os.path.join(out_dir, f"fabric-{metric['name']}.png"))


def main():
    p = argparse.ArgumentParser(description=__doc__.strip(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FABRIC.json", help="rdma-bench fabric's results document")
    p.add_argument("-o", "--output", metavar="DIR", default="plots",
                   help="directory for fabric-<metric>.png (default: plots)")
    a = p.parse_args()
    doc = load(a.file)
    metrics = [m for t in doc["tests"] for m in t.get("metrics", [])]
    if not metrics:
        raise rr.Unusable(f"{a.file}: no tests[].metrics to draw")
    seen = set()
    for m in metrics:
        if m.get("name") and m["name"] not in seen:
            seen.add(m["name"])
            draw(doc, m, a.output)


if __name__ == "__main__":
    rr.run_main(main)
