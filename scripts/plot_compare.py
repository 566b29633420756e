#!/usr/bin/env python3
"""Overlays several results files (e.g. two NIC generations, or two hosts):
latency p50 (µs) vs payload size for latency records, or throughput (Mops,
or Gb/s with --metric gbps) vs payload size for throughput records, both on
a log2 size axis. One colour per run ("device @ hostname, date"; files of
the same device, host and date share it), one line style per series.

The kind is chosen from the records (--kind to force it when files hold
both). --label TEXT (once per file, in order) overrides the run names.

    python3 scripts/plot_compare.py cx3/lat-write.json cx6/lat-write.json
"""

import os
import sys
from collections import OrderedDict

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402


def main():
    p = rr.parser(__doc__, "compare.png")
    p.add_argument("--kind", choices=["latency", "throughput"],
                   help="which records to compare (default: the only kind present)")
    p.add_argument("--metric", choices=["mops", "gbps"], default="mops",
                   help="throughput y axis: Mops (default) or Gb/s of payload")
    y = p.add_mutually_exclusive_group()
    y.add_argument("--logy", action="store_true",
                   help="log y axis (default: log only when the highest value is over 20x the lowest)")
    y.add_argument("--linear", action="store_true", help="linear y axis")
    a = p.parse_args()

    runs = rr.load_runs(a.files, a.label)  # a --label is the run's tag
    kind = a.kind
    if kind is None:
        kinds = {r.get("kind") for run in runs for r in run.records} & {"latency", "throughput"}
        if not kinds:
            raise rr.Unusable("no latency or throughput records in " + ", ".join(a.files))
        if len(kinds) > 1:
            raise rr.Unusable("files hold both latency and throughput records: choose with --kind")
        kind = kinds.pop()
    if kind == "latency":
        items = rr.select(runs, "latency", ("size", "p50_ns"))
        y_fn = lambda r: r["p50_ns"] / 1000  # noqa: E731
        ylabel = "latency p50 (µs)"
        vary = ("iters",)
    else:
        items = rr.select(runs, "throughput", ("size",) + rr.tput_needs(a.metric))
        y_fn = lambda r: rr.tput_value(r, a.metric)  # noqa: E731
        ylabel = rr.tput_ylabel(a.metric, items)
        vary = ("signal_period", "qps", "threads", "postlist", "window", "group_clients")

    # Colour per run: files with the same device, host and date share one,
    # unless they hold the same series (then every file gets its own).
    def color_key(run):
        return run.tag if a.label else run.label
    series_runs = {}
    for run, rec in items:
        series_runs.setdefault((color_key(run), rr.series_label(rec)), set()).add(id(run))
    if not a.label and any(len(v) > 1 for v in series_runs.values()):
        color_key = lambda run: run.tag  # noqa: E731,F811

    colors = OrderedDict()
    for run, _ in items:
        colors.setdefault(color_key(run), rr.COLORS[len(colors) % len(rr.COLORS)])
    styles = OrderedDict()
    fig, ax = rr.new_figure()
    ys_all, xs_all = [], []
    for key in colors:
        mine = [(run, rec) for run, rec in items if color_key(run) == key]
        for s in rr.group_series(mine, lambda r: r["size"], vary_keys=vary, tag_runs=False):
            if s.base not in styles:
                styles[s.base] = len(styles)
            j = styles[s.base]
            ys = s.ys(y_fn)
            ys_all += ys
            xs_all += s.xs
            ax.plot(s.xs, ys, color=colors[key], ls=rr.LINESTYLES[j % len(rr.LINESTYLES)],
                    marker=rr.MARKERS[j % len(rr.MARKERS)], ms=4.5, lw=1.6)

    rr.size_axis(ax, xs_all)
    positive = min(ys_all) > 0
    logy = positive and (a.logy or (not a.linear and max(ys_all) > 20 * min(ys_all)))
    if a.logy and not positive:
        rr.warn("--logy ignored: some value is 0")
    if logy:
        rr.log_y(ax, min(ys_all), max(ys_all))
    else:
        ax.set_ylim(bottom=0, top=max(ys_all) * 1.1 if max(ys_all) > 0 else 1)
    ax.set_ylabel(ylabel + (", log scale" if logy else ""))
    what = "Latency (p50) vs payload size" if kind == "latency" else "Throughput vs payload size"
    rr.title(fig, ax, what + ": comparison", runs, show_runs=False)
    run_handles = [Line2D([], [], color=c, lw=3) for c in colors.values()]
    rr.legend(ax, title="run (colour)", handles=run_handles, labels=list(colors))
    style_handles = [Line2D([], [], color="0.3", ls=rr.LINESTYLES[j % len(rr.LINESTYLES)],
                            marker=rr.MARKERS[j % len(rr.MARKERS)], ms=4.5, lw=1.6)
                     for j in styles.values()]
    rr.legend(ax, title="series (line style)", handles=style_handles, labels=list(styles),
              bbox_to_anchor=(1.01, 0.0), loc="lower left")
    rr.save(fig, a.output)


if __name__ == "__main__":
    rr.run_main(main)
