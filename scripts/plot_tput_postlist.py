#!/usr/bin/env python3
"""Plots throughput (Mops) against postlist, the number of WRs posted with
one doorbell (log2 axis): one line per series, as in Kalia et al. (ATC
2016) on doorbell batching.

If payload size, QPs, threads, S or window vary inside a series, each value
gets its own line. With --group runs the group's sum (aggregate_mops) is
plotted unless --per-client.

    python3 scripts/plot_tput_postlist.py tput-write-postlist.json
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def postlist_axis(ax, xs):
    rr.log2_axis(ax, xs, "x")
    ax.set_xlabel("postlist (WRs posted per doorbell)")


def main():
    p = rr.parser(__doc__, "tput_postlist.png")
    rr.tput_options(p)
    a = p.parse_args()
    rr.plot_tput(a, "Throughput vs postlist", lambda r: r.get("postlist"),
                 "postlist", ("size", "signal_period", "qps", "threads", "window", "group_clients"),
                 postlist_axis, metric=a.metric)


if __name__ == "__main__":
    rr.run_main(main)
