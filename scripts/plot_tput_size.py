#!/usr/bin/env python3
"""Plots throughput (Mops, or Gb/s with --metric gbps) against payload size
(bytes, log2 axis), as in HERD's Figure 3: one line per series.

A line is one series (the record's `series`, else verb, inline, direction
and transport); if S, QPs, threads, postlist or window vary inside a series,
each value gets its own line. With --group runs the group's sum
(aggregate_mops) is plotted unless --per-client.

    python3 scripts/plot_tput_size.py tput-write-in.json tput-read-in.json
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def main():
    p = rr.parser(__doc__, "tput_size.png")
    rr.tput_options(p)
    a = p.parse_args()
    rr.plot_tput(a, "Throughput vs payload size", lambda r: r.get("size"), "payload size",
                 ("signal_period", "qps", "threads", "postlist", "window", "group_clients"),
                 rr.size_axis, metric=a.metric)


if __name__ == "__main__":
    rr.run_main(main)
