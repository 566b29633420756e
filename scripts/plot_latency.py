#!/usr/bin/env python3
"""Plots latency (µs) against payload size (bytes, log2 axis), as in HERD's
Figure 2: one line per series at the median (p50), with a shaded band from
p50 up to a tail percentile (--band, default p99).

Each latency record is one point; a line is one series (the record's
`series`, else a label derived from verb, inline, metric and transport).
Half-RTT (ping-pong) and completion metrics can share the plot; derived
labels of completion records say "(completion)".

    python3 scripts/plot_latency.py lat-write.json lat-read.json lat-echo.json
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402

BANDS = {"p90": "p90_ns", "p99": "p99_ns", "p999": "p999_ns"}
BAND_NAMES = {"p90": "p90", "p99": "p99", "p999": "p99.9"}


def main():
    p = rr.parser(__doc__, "latency.png")
    p.add_argument("--band", choices=["p90", "p99", "p999", "none"], default="p99",
                   help="upper edge of the shaded band above p50 (default p99; none: no band)")
    y = p.add_mutually_exclusive_group()
    y.add_argument("--logy", action="store_true",
                   help="log latency axis (default: log only when the band reaches 10x the lowest p50)")
    y.add_argument("--linear", action="store_true", help="linear latency axis")
    a = p.parse_args()

    runs = rr.load_runs(a.files, a.label)
    band_key = BANDS.get(a.band)
    needs = ("size", "p50_ns") + ((band_key,) if band_key else ())
    items = rr.select(runs, "latency", needs)
    # What was asked splits a line: -n's count, or -D's window (a timed
    # point's iteration count is what it measured, not a knob).
    for _, r in items:
        r["iters_asked"] = None if r.get("requested_s") is not None else r.get("iters")
    series = rr.group_series(items, lambda r: r["size"], vary_keys=("iters_asked", "requested_s"))

    fig, ax = rr.new_figure()
    lows, highs, handles, labels = [], [], [], []
    for i, s in enumerate(series):
        color, marker = rr.style(i)
        xs = s.xs
        p50 = [v / 1000 for v in s.ys(lambda r: r["p50_ns"])]
        line, = ax.plot(xs, p50, color=color, marker=marker, ms=4.5, lw=1.6, zorder=3)
        lows += p50
        highs += p50
        handle = line
        if band_key:
            top = [v / 1000 for v in s.ys(lambda r: r[band_key])]
            patch = ax.fill_between(xs, p50, top, color=color, alpha=0.15, lw=0, zorder=1)
            if len(xs) == 1:  # a band needs two points: show a lone one as a bar
                ax.vlines(xs, p50, top, color=color, alpha=0.35, lw=6, zorder=1)
            ax.plot(xs, top, color=color, lw=0.7, alpha=0.6, ls=":", zorder=2)
            highs += top
            handle = (patch, line)
        handles.append(handle)
        labels.append(s.label)

    logy = a.logy or (not a.linear and min(lows) > 0 and max(highs) > 10 * min(lows))
    if logy:
        rr.log_y(ax, min(lows), max(highs))
    else:
        ax.set_ylim(bottom=0)
    rr.size_axis(ax, [x for s in series for x in s.xs])
    ax.set_ylabel("latency (µs)" + (", log scale" if logy else ""))
    rr.title(fig, ax, "Latency vs payload size", runs)
    band = f"band: p50 to {BAND_NAMES[a.band]}" if band_key else None
    rr.legend(ax, title="line: p50" + (f"\n{band}" if band else ""), handles=handles,
              labels=labels, handler_map={tuple: rr.HandlerTuple(ndivide=None, pad=0)})
    rr.save(fig, a.output)


if __name__ == "__main__":
    rr.run_main(main)
