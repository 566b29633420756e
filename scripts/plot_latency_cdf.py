#!/usr/bin/env python3
"""Plots latency CDFs from the records' HdrHistogram buckets: x = latency
(µs, log axis), y = cumulative fraction of samples; one line per
(series, payload size). Colour tells series apart, line style sizes.

--size N (repeatable) picks sizes; by default the smallest and the largest
size present. --ccdf plots 1 - CDF on a log axis instead, to show the tail.

    python3 scripts/plot_latency_cdf.py lat-write.json lat-read.json --size 64
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def cdf(histogram):
    """(latencies µs, cumulative fractions) from [[value_ns, count], ...]."""
    buckets = sorted((float(v), int(c)) for v, c in histogram if c and c > 0)
    total = sum(c for _, c in buckets)
    xs, ys, seen = [], [], 0
    for value, count in buckets:
        seen += count
        xs.append(value / 1000)
        ys.append(seen / total)
    return xs, ys


def usable(rec):
    h = rec.get("histogram")
    try:
        return bool(h) and sum(int(c) for _, c in h) > 0 and all(float(v) > 0 for v, _ in h)
    except (TypeError, ValueError):
        return False


def main():
    p = rr.parser(__doc__, "latency_cdf.png")
    p.add_argument("--size", type=int, action="append", metavar="N",
                   help="payload size in bytes to plot (repeatable; default: smallest and largest present)")
    p.add_argument("--ccdf", action="store_true",
                   help="plot 1 - CDF (fraction of samples above x) on a log axis to show the tail")
    a = p.parse_args()

    runs = rr.load_runs(a.files, a.label)
    items = [(run, r) for run, r in rr.select(runs, "latency", ("size",)) if usable(r)]
    if not items:
        raise rr.Unusable("no latency records with a histogram in " + ", ".join(a.files))
    present = sorted({r["size"] for _, r in items})
    if a.size:
        missing = sorted(set(a.size) - set(present))
        if missing:
            rr.warn(f"no records of size {', '.join(map(str, missing))} B "
                    f"(sizes present: {', '.join(map(str, present))})")
        sizes = sorted(set(a.size) & set(present))
        if not sizes:
            raise rr.Unusable("none of the --size values is present "
                              f"(sizes present: {', '.join(map(str, present))})")
    else:
        sizes = sorted({present[0], present[-1]})
    items = [(run, r) for run, r in items if r["size"] in sizes]

    # One line per (series, size): series come from group_series keyed on size.
    series = rr.group_series(items, lambda r: r["size"], vary_keys=("iters",))
    fig, ax = rr.new_figure()
    lo = 1.0
    for i, s in enumerate(series):
        color, _ = rr.style(i)
        for x, _run, rec in s.points:
            ls = rr.LINESTYLES[sizes.index(x) % len(rr.LINESTYLES)]
            xs, ys = cdf(rec["histogram"])
            if a.ccdf:
                # Fraction strictly above each bucket; drop the final 0.
                xs, ys = xs[:-1], [1 - y for y in ys[:-1]]
                if not xs:
                    continue
                lo = min(lo, min(ys))
            else:
                xs, ys = [xs[0]] + xs, [0.0] + ys
            ax.step(xs, ys, where="post", color=color, ls=ls, lw=1.5,
                    label=f"{s.label}, {x} B")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(rr.FuncFormatter(rr.plain_number))
    ax.xaxis.set_minor_formatter(rr.FuncFormatter(lambda v, _p: ""))
    ax.set_xlabel("latency (µs, log scale)")
    ax.grid(True, which="minor", axis="x", alpha=0.12)
    if a.ccdf:
        ax.set_yscale("log")
        ax.set_ylim(bottom=max(lo / 2, 1e-7), top=1.05)
        ax.set_ylabel("fraction of samples above latency (1 - CDF, log scale)")
    else:
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("cumulative fraction of samples")
    what = "Latency tail (1 - CDF)" if a.ccdf else "Latency CDF"
    rr.title(fig, ax, what, runs)
    rr.legend(ax, title="series, payload size")
    rr.save(fig, a.output)


if __name__ == "__main__":
    rr.run_main(main)
