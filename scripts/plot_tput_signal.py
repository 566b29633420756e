#!/usr/bin/env python3
"""Plots throughput (Mops) against the signal period S (one signaled WR
every S; log2 axis): one line per series.

If payload size, QPs, threads, postlist or window vary inside a series,
each value gets its own line. With --group runs the group's sum
(aggregate_mops) is plotted unless --per-client.

    python3 scripts/plot_tput_signal.py tput-write-s.json
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def signal_axis(ax, xs):
    rr.log2_axis(ax, xs, "x")
    ax.set_xlabel("signal period S (WRs per signaled WR; 1 = every WR signaled)")


def main():
    p = rr.parser(__doc__, "tput_signal.png")
    rr.tput_options(p)
    a = p.parse_args()
    rr.plot_tput(a, "Throughput vs signal period", lambda r: r.get("signal_period"),
                 "signal period S", ("size", "qps", "threads", "postlist", "window", "group_clients"),
                 signal_axis, metric=a.metric)


if __name__ == "__main__":
    rr.run_main(main)
