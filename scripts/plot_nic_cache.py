#!/usr/bin/env python3
"""Plots the "NIC cache miss" experiment (bench-configs/nic-cache.toml):
left, throughput against the size of the remote region each QP's WRs land
in (--region, log2 axis), one line per --offsets (and per run); right, throughput
against the number of QPs for the series whose QP count varies, one line
per series (e.g. one MR per QP vs one per thread).

Records without a region are left out. On soft-RoCE (rxe) there are no NIC
caches to miss, so the figure says that it shows the plumbing, not the
effect.

    python3 scripts/plot_nic_cache.py results/nic-cache-*.json -o plots/nic-cache.png
"""

import os
import sys
from collections import OrderedDict

sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdma_results as rr  # noqa: E402


def total_qps(r):
    qps, threads = r.get("qps"), r.get("threads") or 1
    return qps * threads if isinstance(qps, int) and isinstance(threads, int) else None


def layout(r):
    """The memory layout of a record, for the right panel's legend."""
    parts = [f"{r.get('offsets') or 'fixed'} offsets"]
    if isinstance(r.get("region"), int):
        parts.append(f"{rr.human_bytes(r['region'])} region per QP")
    parts.append("one MR per QP" if r.get("mr_per_qp") else "one MR per thread")
    if r.get("hugepages"):
        parts.append("huge pages")
    return ", ".join(parts)


def software_device(runs):
    """True when every run is on a software device (rxe, siw) or says so."""
    def soft(run):
        dev = run.doc.get("device") or {}
        name = str(dev.get("name") or "")
        env = str(run.environment or "")
        return name.startswith(("rxe", "siw")) or "soft-RoCE" in env
    return all(soft(r) for r in runs)


def main():
    p = rr.parser(__doc__, "nic-cache.png")
    a = p.parse_args()
    runs = rr.load_runs(a.files, a.label)
    items = [(run, r) for run, r in rr.select(runs, "throughput", ("mops",))
             if isinstance(r.get("region"), int)]
    if not items:
        raise rr.Unusable("no throughput records with a --region in " + ", ".join(a.files))
    # A series whose QP count varies goes right; every other record goes left.
    qps_of = OrderedDict()
    for _, r in items:
        qps_of.setdefault(rr.series_label(r), set()).add(total_qps(r))
    right = [(run, r) for run, r in items if len(qps_of[rr.series_label(r)]) > 1]
    left = [(run, r) for run, r in items if len(qps_of[rr.series_label(r)]) <= 1]

    fig, axes = rr.plt.subplots(1, 2, figsize=(14, 6.2))
    ys_all = []
    ax = axes[0]
    # One line per --offsets, and per run: group_series splits the runs
    # (profiles) as every figure does, so two profiles' points are not one line.
    by_offsets = rr.group_series(left, lambda r: r["region"],
                                 key_fn=lambda r: f"{r.get('offsets') or 'fixed'} offsets")
    for i, s in enumerate(by_offsets):
        color, marker = rr.style(i)
        ys = s.ys(lambda r: r["mops"])
        ax.plot(s.xs, ys, color=color, marker=marker, ms=5, lw=1.6, label=s.label)
        ys_all += ys
    if left:
        xs = sorted({r["region"] for _, r in left})
        rr.log2_axis(ax, xs, "x", fmt=rr.human_bytes)
        q = sorted({total_qps(r) for _, r in left})
        ax.set_title(f"vs remote region size ({', '.join(map(str, q))} QP)", fontsize=10)
        rr.legend(ax, outside=False, loc="best")
    ax.set_xlabel("remote region per QP (--region)")
    ax.set_ylabel(rr.tput_ylabel("mops", items))

    ax = axes[1]
    series = rr.group_series(right, total_qps, vary_keys=("size", "region", "offsets"))
    for i, s in enumerate(series):
        color, marker = rr.style(i)
        ys = s.ys(lambda r: r["mops"])
        ys_all += ys
        ax.plot(s.xs, ys, color=color, marker=marker, ms=5, lw=1.6, label=s.label)
    if series:
        rr.log2_axis(ax, [x for s in series for x in s.xs], "x")
        ax.set_title("vs number of QPs (" + layout(right[0][1]).split(", one MR")[0] + ")",
                     fontsize=10)
        rr.legend(ax, outside=False, loc="best")
    ax.set_xlabel("number of QPs (QPs per thread x threads)")
    ax.set_ylabel(rr.tput_ylabel("mops", items))
    top = max(ys_all) * 1.15 if ys_all and max(ys_all) > 0 else 1
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
        ax.set_ylim(bottom=0, top=top)

    sizes = sorted({r.get("size") for _, r in items})
    verbs = sorted({f"{str(r.get('verb')).upper()} {r.get('direction')}" for _, r in items})
    what = f"NIC cache experiment: {', '.join(verbs)}, {', '.join(map(str, sizes))} B"
    experiments = ", ".join(OrderedDict((r.experiment, None) for r in runs if r.experiment))
    head = what + (f" \u2014 {experiments}" if experiments else "")
    lines = ["; ".join(OrderedDict((r.label, None) for r in runs))]
    env = rr.environment_text(runs)
    if env:
        lines.append(env)
    if software_device(runs):
        lines.append("soft-RoCE, not hardware: rxe has no NIC caches, so this shows the "
                     "plumbing (regions, offsets, MRs per QP), not the cache-miss effect")
    fig.suptitle(head, fontsize=12.5, fontweight="bold")
    fig.text(0.5, 0.945, "\n".join(lines), ha="center", va="top", fontsize=9,
             color="firebrick", style="italic")
    # Not rr.save: its tight_layout() would pull the axes up under these lines.
    fig.tight_layout(rect=(0, 0, 1, 0.95 - 0.03 * len(lines)))
    directory = os.path.dirname(a.output)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(a.output, dpi=150, bbox_inches="tight")
    rr.plt.close(fig)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    rr.run_main(main)
