#!/usr/bin/env python3
"""Plots throughput (Mops) against the number of QPs (qps x threads, log2
axis unless --linear-x), as in HERD's Figure 4: one line per series.

Records sharing a series label and every other parameter (payload size, S,
postlist, window) form one line; if one of those varies, each value gets
its own line. With --group runs the group's sum (aggregate_mops) is plotted
unless --per-client.

    python3 scripts/plot_tput_qps.py tput-write-qps.json tput-read-qps.json
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def total_qps(r):
    qps, threads = r.get("qps"), r.get("threads") or 1
    return qps * threads if isinstance(qps, int) and isinstance(threads, int) else None


def qps_axis(linear):
    def draw(ax, xs):
        if linear:
            ax.set_xlim(left=0, right=max(xs) * 1.05)
        else:
            rr.log2_axis(ax, xs, "x")
        ax.set_xlabel("number of QPs (QPs per thread x threads)")
    return draw


def main():
    p = rr.parser(__doc__, "tput_qps.png")
    rr.tput_options(p)
    p.add_argument("--linear-x", action="store_true", help="linear QP axis instead of log2")
    a = p.parse_args()
    rr.plot_tput(a, "Throughput vs number of QPs", total_qps, "number of QPs",
                 ("size", "signal_period", "postlist", "window", "group_clients"),
                 qps_axis(a.linear_x), metric=a.metric)


if __name__ == "__main__":
    rr.run_main(main)
