"""Shared helpers for the plot_*.py scripts: load rdma-bench results files,
name devices and series, group records into lines, draw titles, save PNGs.

Not a script itself: the plot_*.py scripts put their own directory on
sys.path and import this module.
"""

import argparse
import json
import math
import os
import sys
import textwrap
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (must follow matplotlib.use)
from matplotlib.legend_handler import HandlerTuple  # noqa: E402,F401  (used by scripts)
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator  # noqa: E402

SCHEMA_VERSION = 2

COLORS = plt.get_cmap("tab10").colors
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 3))]


# --------------------------------------------------------------------------
# Errors


class Unusable(Exception):
    """A problem with the inputs, reported as one line and a non-zero exit."""


def fail(message):
    prog = os.path.basename(sys.argv[0]) or "plot"
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(1)


def warn(message):
    prog = os.path.basename(sys.argv[0]) or "plot"
    print(f"{prog}: note: {message}", file=sys.stderr)


def run_main(main):
    """Runs a script's main(), turning Unusable into a one-line error."""
    try:
        main()
    except Unusable as e:
        fail(str(e))


# --------------------------------------------------------------------------
# Devices

def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def device_human_name(device):
    """A readable device name that keeps the raw ids, e.g.
    "ConnectX-6 (0x2c9:4123)" (vendor id in hex, part id in decimal, as
    ibv_devinfo prints them). The model is the one rdma-bench recorded in the
    file (`device.model`, from src/device_name.rs, the only NIC table); files
    written before it was recorded, or of unknown NICs, show the raw device
    name instead, e.g. "mlx5_0 (0x2c9:4123)"."""
    device = device or {}
    name = str(device.get("name") or "?")
    model = device.get("model")
    shown = model.strip() if isinstance(model, str) and model.strip() else name
    vendor = _int(device.get("vendor_id"))
    part = _int(device.get("vendor_part_id"))
    ids = f"{vendor:#x}:{part}" if vendor is not None and part is not None else "ids unknown"
    return f"{shown} ({ids})"


# --------------------------------------------------------------------------
# Loading


class Run:
    """One results file: its document-level facts and its records."""

    def __init__(self, path, doc):
        self.path = path
        self.doc = doc
        self.records = [r for r in doc["results"] if isinstance(r, dict)]
        self.device = device_human_name(doc.get("device"))
        host = (doc.get("host") or {}).get("hostname") or ""
        # "(none)" is what an unset kernel hostname reads as: not worth showing.
        self.hostname = "" if host in ("(none)", "localhost") else str(host)
        started = str(doc.get("started_utc") or "")
        self.started = started
        self.date = started[:10] if len(started) >= 10 else "date unknown"
        self.time = started[11:19] if len(started) >= 19 else ""
        self.experiment = doc.get("experiment") or None
        self.environment = doc.get("environment") or None
        self.name = None  # the --label given for this file, if any
        self.tag = self.label  # made unique across runs by load_runs

    @property
    def label(self):
        """ "device @ hostname, date" (hostname left out when unset)."""
        at = f" @ {self.hostname}" if self.hostname else ""
        return f"{self.device}{at}, {self.date}"

    @property
    def basename(self):
        return os.path.basename(self.path)


def load_runs(paths, names=None):
    """Reads every file; any unreadable one stops the script with one line.
    `names` (the --label options, one per file) name the runs in legends:
    files given one name are one run (e.g. the files of one profile)."""
    if names and len(names) != len(paths):
        raise Unusable(f"{len(names)} --label for {len(paths)} files: give one per file")
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            raise Unusable(f"{path}: no such file")
        except IsADirectoryError:
            raise Unusable(f"{path}: is a directory, not a results file")
        except OSError as e:
            raise Unusable(f"{path}: cannot read: {e.strerror or e}")
        except UnicodeDecodeError:
            raise Unusable(f"{path}: not a JSON results file (not UTF-8 text)")
        except json.JSONDecodeError as e:
            raise Unusable(f"{path}: not a JSON results file ({e.msg} at line {e.lineno})")
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
            raise Unusable(f"{path}: not an rdma-bench results document (no 'results' list)")
        version = doc.get("schema_version")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            warn(f"{path}: schema_version {version} is newer than {SCHEMA_VERSION}; plotting anyway")
        runs.append(Run(path, doc))
    if names:
        for run, name in zip(runs, names):
            run.name = run.tag = name
    else:
        _unique_tags(runs)
    return runs


def _unique_tags(runs):
    """Gives each run a tag that tells it apart from the others: its label,
    then with the start time, then with the file name."""
    for run in runs:
        run.tag = run.label
    for extend in (lambda r: f"{r.tag} {r.time}Z" if r.time else r.tag,
                   lambda r: f"{r.tag} [{r.basename}]",
                   lambda r: f"{r.tag} [{r.path}]"):
        counts = {}
        for run in runs:
            counts[run.tag] = counts.get(run.tag, 0) + 1
        if all(n == 1 for n in counts.values()):
            return
        for run in runs:
            if counts[run.tag] > 1:
                run.tag = extend(run)


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def select(runs, kind, needs=()):
    """(run, record) pairs of one kind whose `needs` fields are all numbers.
    None at all is an error; a file without any gets a note."""
    items, empty = [], []
    for run in runs:
        mine = [(run, r) for r in run.records
                if r.get("kind") == kind and all(_number(r.get(k)) for k in needs)]
        if not mine:
            kinds = sorted({str(r.get("kind")) for r in run.records})
            empty.append(f"{run.path} (record kinds: {', '.join(kinds) or 'none, results is empty'})")
        items.extend(mine)
    if not items:
        raise Unusable(f"no usable {kind} records in " + "; ".join(empty))
    for what in empty:
        warn(f"skipping {what}: no usable {kind} records")
    return items


# --------------------------------------------------------------------------
# Series labels and grouping


def _upper(value):
    return str(value).upper() if value not in (None, "") else ""


def series_label(rec):
    """The record's `series` if the experiment gave one, else one derived from
    the parameters that tell configurations apart."""
    given = rec.get("series")
    if isinstance(given, str) and given.strip():
        return given.strip()
    verb = _upper(rec.get("verb")) or "?"
    echo = rec.get("verb") == "echo"
    label = verb
    # ECHO inlines automatically whenever the payload fits the device's limit,
    # so its inline flag is not a configuration and would split one line in two.
    if rec.get("inline") and not echo:
        label += "-INLINE"
    if rec.get("imm"):
        label += "+IMM"
    if rec.get("op"):
        label += " " + _upper(rec["op"])
    transport = _upper(rec.get("transport"))
    if rec.get("kind") == "latency":
        if rec.get("metric") == "completion":
            label += " (completion)"
        if transport and transport != "RC":
            label += " " + transport
    else:
        direction = rec.get("direction")
        if direction and direction != "echo":
            label += " " + str(direction)
        if echo and (rec.get("req") or rec.get("resp")):
            label += f" {_upper(rec.get('req')) or '?'}\u2192{_upper(rec.get('resp')) or '?'}"
        if transport:
            label += " " + transport
    return label


# Short names of the parameters appended to a label when they vary inside it.
PARAM_NAMES = {
    "size": ("size", " B"),
    "signal_period": ("S", ""),
    "qps": ("QPs", ""),
    "threads": ("threads", ""),
    "postlist": ("postlist", ""),
    "window": ("window", ""),
    "group_clients": ("clients", ""),
    "iters_asked": ("iters", ""),
    "requested_s": ("window", " s"),
    "metric": ("", ""),
}


def _param(key, value):
    name, unit = PARAM_NAMES.get(key, (key, ""))
    return f"{name}={value}{unit}" if name else str(value)


class Series:
    def __init__(self, label, base, runs):
        self.label = label  # unique, shown in the legend
        self.base = base  # the series label without run tag
        self.points = []  # (x, run, record), sorted by x
        self.runs = runs

    @property
    def xs(self):
        return [p[0] for p in self.points]

    def ys(self, fn):
        return [fn(p[2]) for p in self.points]


def group_series(items, x_fn, vary_keys=(), tag_runs=True, by_run=False, key_fn=series_label):
    """Splits (run, record) pairs into lines.

    A line is the records sharing a key (by default the series label). If
    one of `vary_keys` (parameters other than x) takes several values inside
    a key, the label gets " key=value" so each line holds one configuration.
    Unless tag_runs is false (the caller then separates runs itself), a
    line's records are split by run, each part's label ending in " — "
    and the run's tag: always when the runs have several --label names (so
    each profile has its own lines, named; files of one name stay one
    line); when files would put two points at one x; and with by_run, by
    device @ host, date, for a measured x (achieved Mops) that two runs'
    points never share."""
    by_key = OrderedDict()
    for run, rec in items:
        by_key.setdefault(key_fn(rec), []).append((run, rec))
    lines = OrderedDict()
    for base, members in by_key.items():
        varying = [k for k in vary_keys
                   if len({json.dumps(r.get(k), sort_keys=True) for _, r in members}) > 1]
        for run, rec in members:
            label = base
            if varying:
                label += ", " + ", ".join(_param(k, rec.get(k)) for k in varying)
            lines.setdefault(label, []).append((run, rec))
    named = len({run.name for run, _ in items if run.name}) > 1
    out = OrderedDict()
    for label, members in lines.items():
        if not tag_runs:
            _add_series(out, label, label, members, x_fn)
            continue
        if named or _clash(members, x_fn):
            parts = _split(members, lambda run: run.tag)
        elif by_run:
            parts = _split(members, lambda run: run.label)
        else:
            parts = {None: members}
        if len(parts) == 1 and not named:
            _add_series(out, label, label, members, x_fn)
            continue
        for tag, mine in parts.items():
            if _clash(mine, x_fn):
                # Files of one name that meet at an x: one line per file.
                for _, theirs in _split(mine, lambda run: run.path).items():
                    run = theirs[0][0]
                    _add_series(out, f"{label} — {tag} [{run.basename}]", label, theirs, x_fn)
            else:
                _add_series(out, f"{label} — {tag}", label, mine, x_fn)
    return list(out.values())


def _split(members, key):
    parts = OrderedDict()
    for run, rec in members:
        parts.setdefault(key(run), []).append((run, rec))
    return parts


def _clash(members, x_fn):
    """True when records of more than one file put two points at one x."""
    xs = [x_fn(rec) for _, rec in members]
    return len({id(run) for run, _ in members}) > 1 and len(set(xs)) < len(xs)


def _add_series(out, label, base, members, x_fn):
    s = Series(label, base, list(OrderedDict((id(r), r) for r, _ in members).values()))
    s.points = sorted(((x_fn(rec), run, rec) for run, rec in members), key=lambda p: p[0])
    out[label] = s


def note_single_x(series, what):
    xs = {x for s in series for x in s.xs}
    if len(xs) == 1:
        warn(f"every record has the same {what} ({xs.pop()}): one point per line")


# --------------------------------------------------------------------------
# Throughput values


def tput_value(rec, metric="mops", per_client=False):
    """Mops or Gb/s of one record; with --group runs, the sum over all
    clients (aggregate_mops) unless per_client."""
    mops = rec.get("mops")
    agg = rec.get("aggregate_mops")
    use_agg = not per_client and _number(agg)
    if metric == "mops":
        return agg if use_agg else mops
    gbps = rec.get("gbps")
    if use_agg and _number(mops) and mops > 0 and _number(gbps):
        return gbps * agg / mops
    return gbps


def tput_needs(metric):
    return ("mops", "gbps") if metric == "gbps" else ("mops",)


def tput_ylabel(metric, items, per_client=False):
    grouped = not per_client and any(_number(r.get("aggregate_mops")) for _, r in items)
    extra = ", all clients of a group summed" if grouped else ""
    if metric == "gbps":
        return f"throughput (Gb/s of payload{extra})"
    return f"throughput (Mops{extra})"


# --------------------------------------------------------------------------
# Axes and figure


def human_bytes(n):
    n = int(n)
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def log2_axis(ax, values, axis="x", fmt=str, max_ticks=12):
    """A base-2 log axis with a tick at each power of two in range (every
    other one, or sparser, when there are too many) labelled by fmt."""
    values = sorted({v for v in values if v and v > 0})
    if not values:
        return
    lo, hi = values[0], values[-1]
    powers = [2.0 ** e for e in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
    powers = [q for q in powers if lo / 1.5 <= q <= hi * 1.5] or values
    step = 1
    while len(powers[::step]) > max_ticks:
        step += 1
    ticks = powers[::step]
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: fmt(int(round(v)))))
    target.set_minor_locator(NullLocator())
    pad = 2 ** 0.25
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo / pad, hi * pad)


def size_axis(ax, sizes):
    log2_axis(ax, sizes, "x", human_bytes)
    ax.set_xlabel("payload size (bytes; K = 1024)" if max(sizes) >= 1024 else "payload size (bytes)")


def plain_number(v, _pos=None):
    if v == 0:
        return "0"
    if abs(v) >= 1:
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:g}"
    return f"{v:.3g}"


def style(i):
    """Colour, marker for the i-th line."""
    return COLORS[i % len(COLORS)], MARKERS[i % len(MARKERS)]


def new_figure(width=10, height=5.2):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def _unique(values):
    return list(OrderedDict((v, None) for v in values if v))


def environment_text(runs):
    """The environment line(s): one if every run says the same, else one per
    run that has one (so that a hardware run is not labelled as a VM)."""
    envs = _unique(r.environment for r in runs)
    if not envs:
        return ""
    if len(envs) == 1 and all(r.environment == envs[0] for r in runs):
        return textwrap.fill("environment: " + envs[0], 100)
    per_run = OrderedDict()
    for r in runs:
        if r.environment:
            per_run.setdefault(r.tag, r.environment)
    return "\n".join(textwrap.fill(f"environment of {tag}: {env}", 110)
                     for tag, env in per_run.items())


def title(fig, ax, what, runs, show_runs=True):
    """Title: what is plotted (and the experiment names), then the device(s)
    and date(s), then the environment in red so that software devices or
    virtual machines are not mistaken for hardware numbers."""
    experiments = _unique(r.experiment for r in runs)
    head = what + (f" \u2014 {', '.join(experiments)}" if experiments else "")
    lines = []
    if show_runs:
        labels = _unique(r.label for r in runs)
        if len(labels) > 3:
            labels = labels[:3] + [f"and {len(labels) - 3} more"]
        lines.append("; ".join(labels))
    sub = "\n".join(textwrap.fill(l, 95) for l in lines)
    env = environment_text(runs)
    n_env = env.count("\n") + 1 if env else 0
    ax.set_title(sub, fontsize=9.5, loc="center", pad=6 + 13 * n_env)
    if env:
        ax.annotate(env, xy=(0.5, 1.0), xycoords="axes fraction",
                    xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                    fontsize=9, color="firebrick", style="italic")
    fig.suptitle(head, fontsize=12.5, fontweight="bold")


_EXTRA = {}


def legend(ax, title=None, handles=None, labels=None, outside=True, **kw):
    """The legend, by default outside the axes on the right so that it never
    hides a line or a band."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    kw.setdefault("fontsize", 8.5)
    kw.setdefault("title_fontsize", 8.5)
    kw.setdefault("framealpha", 0.9)
    kw.setdefault("alignment", "left")
    if kw.get("loc") is None:
        kw.pop("loc", None)
    if outside:
        kw.setdefault("loc", "upper left")
        kw.setdefault("bbox_to_anchor", (1.01, 1.0))
        kw.setdefault("borderaxespad", 0)
    previous = ax.get_legend()
    labels = [textwrap.fill(str(l), 48, subsequent_indent="  ") for l in labels]
    leg = ax.legend(handles, labels, title=title, **kw)
    if previous is not None:
        # A second legend replaces the first as the axes' legend: keep the
        # first as a plain artist, and in the saved area.
        ax.add_artist(previous)
        _EXTRA.setdefault(id(ax.figure), []).append(previous)
    if title:
        leg.get_title().set_multialignment("left")
    return leg


def log_y(ax, lo, hi):
    """A log10 value axis with plain-number labels; with at most three
    decades 2x and 5x get labels too, within one decade every digit."""
    ax.set_yscale("log")
    ratio = hi / lo if lo > 0 else float("inf")
    subs = (tuple(float(k) for k in range(1, 10)) if ratio < 10
            else (1.0, 2.0, 5.0) if ratio <= 1000 else (1.0,))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(plain_number))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p: ""))


def save(fig, out):
    directory = os.path.dirname(out)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.tight_layout()
    extra = fig.get_default_bbox_extra_artists() + _EXTRA.pop(id(fig), [])
    fig.savefig(out, dpi=150, bbox_inches="tight", bbox_extra_artists=extra)
    plt.close(fig)
    print(f"wrote {out}")


# --------------------------------------------------------------------------
# Command line


def parser(doc, default_name, labels=True):
    """An ArgumentParser with the positional files, -o and (unless labels is
    false, for a script that draws no runs) --label; the script's docstring
    is its description."""
    p = argparse.ArgumentParser(description=doc.strip() if doc else None,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE.json",
                   help="rdma-bench results file(s) (--json output)")
    p.add_argument("-o", "--output", metavar="FILE", default=os.path.join("plots", default_name),
                   help=f"PNG to write (default: plots/{default_name}, relative to the current directory)")
    if labels:
        # `rdma-bench report` names each profile's files so: its legends then
        # say which profile a line is, by the name the page gives it.
        p.add_argument("--label", action="append", metavar="TEXT",
                       help="name of a run in the legend, once per file in the order given "
                            "(files given one name are one run, each line of it named so); "
                            "default: the device @ host, date each file records")
    return p


# --------------------------------------------------------------------------
# Throughput plots (plot_tput_size, plot_tput_qps, plot_tput_signal)


def tput_options(p, metric=True):
    if metric:
        p.add_argument("--metric", choices=["mops", "gbps"], default="mops",
                       help="y axis: million operations/s (default) or Gb/s of payload")
    p.add_argument("--per-client", action="store_true",
                   help="with --group runs, plot this client's own figure instead of the "
                        "group's sum (aggregate_mops)")
    p.add_argument("--logy", action="store_true", help="log throughput axis")


def plot_tput(a, what, x_fn, x_name, vary_keys, x_axis, metric="mops"):
    """One throughput figure: y = Mops (or Gb/s) of each record, x = x_fn(record),
    one line per series; x_axis(ax, xs) draws the x axis."""
    runs = load_runs(a.files, a.label)
    items = select(runs, "throughput", tput_needs(metric))
    items = [(run, r) for run, r in items if x_fn(r) is not None]
    if not items:
        raise Unusable(f"no throughput records with a {x_name} in {', '.join(a.files)}")
    series = group_series(items, x_fn, vary_keys=vary_keys)
    note_single_x(series, x_name)
    fig, ax = new_figure()
    ys_all = []
    for i, s in enumerate(series):
        color, marker = style(i)
        ys = s.ys(lambda r: tput_value(r, metric, a.per_client))
        ys_all += ys
        ax.plot(s.xs, ys, color=color, marker=marker, ms=5, lw=1.6, label=s.label)
    x_axis(ax, [x for s in series for x in s.xs])
    if a.logy and min(ys_all) > 0:
        log_y(ax, min(ys_all), max(ys_all))
    else:
        if a.logy:
            warn("--logy ignored: some throughput is 0")
        ax.set_ylim(bottom=0, top=max(ys_all) * 1.1 if max(ys_all) > 0 else 1)
    ax.set_ylabel(tput_ylabel(metric, items, a.per_client))
    title(fig, ax, what, runs)
    legend(ax, outside=len(series) > 6, loc="best" if len(series) <= 6 else None)
    save(fig, a.output)
