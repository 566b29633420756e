//! Everything a person sees: the explanation above a table, the table's rows,
//! and the progress bar (stderr, only on a terminal, never with --quiet;
//! elsewhere `cmd::progress` writes a plain line as each point starts).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

mod figure;
pub use figure::OutputFigure;

use crate::clock::ClockInfo;
use crate::error::{Error, Result};
use crate::report::IntervalFigure;
use crate::results::{CpuUtil, LatencyRecord, Record, TputRecord};
use crate::spec::{Direction, EchoVerb, LatencyMode, LatencySpec, PostApi, TputSpec, VerbKind};

/// What the numbers mean, printed above the table and stored in results.
pub fn describe_measurement(spec: &LatencySpec, device: &str) -> String {
    let verb = spec.verb.name().to_uppercase();
    let how = match (spec.mode, spec.verb) {
        (LatencyMode::PingPong, VerbKind::Echo) => {
            "ECHO: client WRITEs the request (unsignaled, inline when it fits); the server polls its memory and WRITEs the same payload back; clock from ibv_post_send to the echoed last byte seen in client memory; latency = RTT/2".to_string()
        }
        (LatencyMode::PingPong, VerbKind::Send) => {
            "SEND ping-pong: clock from ibv_post_send to the answer's receive completion polled from the CQ; latency = half of each round trip".to_string()
        }
        (LatencyMode::PingPong, _) => format!(
            "{verb} ping-pong: clock from ibv_post_send to the peer's answer seen in memory (last byte polled); latency = half of each round trip"
        ),
        (LatencyMode::Completion, _) => format!(
            "{verb} completion latency: clock from ibv_post_send of a signaled WR to its completion polled from the CQ"
        ),
    };
    format!(
        "{how}; {} over {} on {device}; the first {} iterations of each size{} are warm-up and dropped{}",
        match (spec.verb, spec.inline.limit()) {
            (VerbKind::Echo, None) => "inline whenever the payload fits the QP's max_inline".into(),
            (VerbKind::Echo, Some(n)) => format!(
                "inline whenever the payload fits the QP's max_inline and is at most {n} B (-I {n}; see each row)"
            ),
            _ => spec.inline.describe(),
        },
        spec.transport.name().to_uppercase(),
        spec.warmup,
        match spec.duration_s {
            Some(d) if !spec.live.forever => format!(
                " (or fewer: those of its first {} s, a fifth of -D; see warmup_dropped)",
                d / crate::bench::latency::WARMUP_SHARE_OF_WINDOW as f64
            ),
            _ => String::new(),
        },
        posting_note(spec.events, spec.post_api, true)
    )
}

/// `--events` and `--post-api ex`, said where they change what is measured.
fn posting_note(events: bool, api: PostApi, latency: bool) -> String {
    let mut note = String::new();
    if events {
        if latency {
            note.push_str("; --events: each wait polls the CQ once, then arms it and sleeps on a completion channel, so a sample includes the wake-up whenever its completion was not already there (event_wakeups counts the sleeps)");
        } else {
            note.push_str("; --events: an issuer whose every window is full takes an event from its armed send CQ's completion channel (sleeping until one is raised), re-arms the CQ and polls it empty, as perftest's -e does; echo's client and server do the same over their send and receive CQs (event_wakeups counts the events taken)");
        }
    }
    if api == PostApi::Ex {
        note.push_str("; posted with ibv_wr_* on extended QPs (--post-api ex)");
    }
    note
}

/// What a throughput table's numbers are.
pub fn describe_tput(spec: &TputSpec, device: &str) -> String {
    let verb = spec.verb.name().to_uppercase();
    let how = match spec.direction {
        Direction::Inbound => format!(
            "inbound {verb}: client threads issue at one server{}",
            if spec.verb == VerbKind::Send {
                ", which posts receives in batches and counts arrivals"
            } else {
                " whose CPU stays passive"
            }
        ),
        Direction::Outbound => format!("outbound {verb}: the server issues to every client QP, round-robin"),
        Direction::Echo => format!(
            "echo: clients keep --window requests in flight per QP ({} requests, inline when they fit, signaled once every S; {} responses); the server answers each; ops = completed round trips",
            match spec.req {
                EchoVerb::Write => "WRITE",
                EchoVerb::Send => "SEND",
            },
            match spec.resp {
                EchoVerb::Write => "WRITE",
                EchoVerb::Send => "UD SEND",
            }
        ),
    };
    let how = match (spec.bidirectional, spec.srq) {
        (false, false) => how,
        (true, srq) => format!(
            "bidirectional {verb}: client and server threads issue to each other at once, each side measured in its own window; Mops = the sum of both directions (each shown after the row){}",
            if srq { "; receivers post to one shared receive queue per side" } else { "" }
        ),
        (false, true) => format!("{how}; receivers post to one shared receive queue per side"),
    };
    let window = match spec.iters {
        Some(n) => format!("{n} WRs per QP, timed from start to last completion"),
        None => format!(
            "{:.2} s measured per point after {:.2} s warm-up; ops = WRs posted (echo: round trips completed) in that window; WRs in flight at its end are drained outside it",
            spec.duration_s, spec.warmup_s
        ),
    };
    let inline = match spec.inline.limit() {
        // -I: which rows were inline differs by size; each such row says so.
        Some(n) => format!(
            "; payloads of at most {n} B posted inline (-I {n}), marked 'inline' after the row"
        ),
        None => String::new(),
    };
    format!(
        "{how}; {window}; on {device}{inline}{}",
        posting_note(spec.events, spec.post_api, false)
    )
}

/// What a stdout write error says (`Error::Io`'s `what`).
pub const STDOUT: &str = "writing to stdout";

/// Writes one line to stdout. A failure is `Error::Io` with `what` =
/// `STDOUT`: `main` ends quietly with exit 0 when stdout is a closed pipe
/// (`| head`), and reports any other failure (a full disk) in one line.
pub fn print_line(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{s}")
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(STDOUT, e))
}

/// Whether `e` is stdout having been closed by its reader.
pub fn is_closed_stdout(e: &Error) -> bool {
    matches!(e, Error::Io { what, source } if what == STDOUT && source.kind() == std::io::ErrorKind::BrokenPipe)
}

pub struct Console {
    quiet: bool,
    /// `--output`: stdout carries this figure of each point only, and
    /// every other line goes to stderr.
    figure: Option<OutputFigure>,
    bar: Option<ProgressBar>,
    /// The first stdout write error; later lines are dropped, `check` reports it.
    failed: Mutex<Option<(std::io::ErrorKind, String)>>,
    clock_warned: AtomicBool,
}

impl Console {
    pub fn new(quiet: bool, points: u64) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(points);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} points, ETA {eta} {msg}")
                    .expect("static progress template"),
            );
            bar
        });
        Self {
            quiet,
            figure: None,
            bar,
            failed: Mutex::new(None),
            clock_warned: AtomicBool::new(false),
        }
    }

    /// `--output`: stdout gets `figure` of each point and nothing else.
    pub fn with_figure(mut self, figure: Option<OutputFigure>) -> Self {
        self.figure = figure;
        self
    }

    /// Prints through the bar (if any) so lines and bar do not tangle.
    /// After a stdout write error nothing more is printed (see `check`).
    fn line(&self, s: &str) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.is_some() {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(s),
            None if self.figure.is_some() => {
                // Best effort, as main's own error line: stderr may be closed too.
                let _ = writeln!(std::io::stderr().lock(), "{s}");
            }
            None => self.stdout(s, &mut failed),
        }
    }

    /// One line on stdout; its failure is kept for `check`.
    fn stdout(&self, s: &str, failed: &mut Option<(std::io::ErrorKind, String)>) {
        if let Err(Error::Io { source, .. }) = print_line(s) {
            *failed = Some((source.kind(), source.to_string()));
        }
    }

    /// `--output`: the point's one number on stdout (whatever `--quiet`
    /// says: it is what the script asked for).
    fn figure(&self, r: &Record) {
        let Some(text) = self.figure.and_then(|f| f.of(r)) else {
            return;
        };
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.is_none() {
            match &self.bar {
                // The bar draws on stderr; suspend it so the two never tangle.
                Some(bar) => bar.suspend(|| self.stdout(&text, &mut failed)),
                None => self.stdout(&text, &mut failed),
            }
        }
    }

    /// The first error writing the table to stdout, if any: a measuring run
    /// calls this after saving each point, so a closed pipe ends it there.
    pub fn check(&self) -> Result<()> {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        match &*failed {
            None => Ok(()),
            Some((kind, msg)) => Err(Error::io(STDOUT, std::io::Error::new(*kind, msg.clone()))),
        }
    }

    pub fn header(&self, spec: &LatencySpec, device: &str) {
        if self.quiet {
            return;
        }
        self.line(&format!("# {}", describe_measurement(spec, device)));
        if let Some(m) = spec.memory.describe() {
            self.line(&format!("# memory: {m}"));
        }
        let ping = spec.mode == LatencyMode::PingPong;
        self.line(&format!(
            "{:>10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10} {:>10}{}",
            "size[B]",
            "inline",
            "iters",
            "min[us]",
            "p50[us]",
            "p90[us]",
            "p99[us]",
            "p99.9[us]",
            "max[us]",
            "mean[us]",
            "stdev[us]",
            if ping { "  rtt_p50[us]" } else { "" }
        ));
        self.line(CPU_LEGEND);
    }

    pub fn row(&self, r: &LatencyRecord) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        if self.quiet {
            return;
        }
        let us = |ns: f64| ns / 1000.0;
        let s = &r.stats;
        let mut line = format!(
            "{:>10} {:>6} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>11.2} {:>10.2} {:>10.2} {:>10.2}",
            r.size,
            if r.posting.inline { "yes" } else { "no" },
            r.iters,
            us(s.min_ns),
            us(s.p50_ns),
            us(s.p90_ns),
            us(s.p99_ns),
            us(s.p999_ns),
            us(s.max_ns),
            us(s.mean_ns),
            us(s.stdev_ns)
        );
        if let Some(rtt) = r.rtt_p50_ns {
            line.push_str(&format!("  {:>11.2}", us(rtt)));
        }
        line.push_str(&cpu_cells(r.cpu_util.as_ref(), false));
        if r.verify_failures > 0 {
            line.push_str(&format!("  VERIFY FAILURES: {}", r.verify_failures));
        }
        if let Some(got) = r.server_received {
            if got != r.sent {
                line.push_str(&format!("  server saw {got} of {} messages", r.sent));
            }
        }
        self.line(&line);
    }

    pub fn record(&self, r: &Record) {
        let stop = match r {
            Record::Latency(l) => {
                self.row(l);
                l.live
                    .to_stop
                    .map(|t| (t, l.live.intervals.len(), l.elapsed_s, l.iters))
            }
            Record::Throughput(t) => {
                self.tput_row(t);
                t.live
                    .to_stop
                    .map(|s| (s, t.live.intervals.len(), t.elapsed_s, t.ops))
            }
        };
        self.figure(r);
        self.interval_extremes(r);
        if let Some((t, n, kept_s, kept_ops)) = stop {
            self.note(&format!(
                "stopped: {n} whole intervals kept ({kept_s:.3} s, {kept_ops} ops); the interval in progress ({:.3} s, {} ops) was dropped; device counters and CPU use cover the window up to the stop ({:.3} s)",
                (t.window_s - kept_s).max(0.0),
                t.ops.saturating_sub(kept_ops),
                t.window_s
            ));
        }
    }

    /// `--interval`: after the row, what its intervals spanned (the
    /// record's `min_interval_*`/`max_interval_*` or `*_interval_p99_ns`).
    fn interval_extremes(&self, r: &Record) {
        let line = match r {
            Record::Latency(l) => match (l.live.worst_interval_p99_ns, l.live.best_interval_p99_ns) {
                (Some(worst), Some(best)) => format!(
                    "{} intervals: p99 worst {:.2} us, best {:.2} us (worst_interval_p99_ns, best_interval_p99_ns)",
                    l.live.intervals.len(),
                    worst / 1000.0,
                    best / 1000.0
                ),
                _ => return,
            },
            Record::Throughput(t) => {
                let v = &t.live;
                match (v.min_interval_mops, v.max_interval_mops, v.min_interval_gbps, v.max_interval_gbps) {
                    (Some(lo), Some(hi), Some(glo), Some(ghi)) => format!(
                        "{} intervals: {lo:.4} to {hi:.4} Mops, {glo:.3} to {ghi:.3} Gb/s (min_interval_*, max_interval_*)",
                        v.intervals.len()
                    ),
                    _ => return,
                }
            }
        };
        self.note(&line);
    }

    /// Under a point's row: an `--expect` it missed (`verdict`'s words).
    pub fn expectation_failed(&self, what: &str) {
        if !self.quiet {
            self.line(&format!("  expectation failed: {what}"));
        }
    }

    /// Under a latency row, once: a warning when reading `clock` costs more
    /// than 1% of the smallest latency measured (`ClockInfo::warning`).
    pub fn clock_note(&self, r: &Record, clock: &ClockInfo) {
        if let Record::Latency(l) = r {
            if !self.clock_warned.load(Ordering::Relaxed) {
                if let Some(w) = clock.warning(l.stats.min_ns) {
                    self.clock_warned.store(true, Ordering::Relaxed);
                    self.note(&w);
                }
            }
        }
    }

    /// One `--interval` line while a point runs (from the interval watcher
    /// thread; through the bar, so the two never tangle).
    pub fn interval(&self, f: &IntervalFigure) {
        if self.quiet {
            return;
        }
        let mut line = format!(
            "# interval {:>4}: {:>9.3} to {:>9.3} s {:>12} ops {:>10.4} Mops",
            f.index,
            f.start_s,
            f.start_s + f.elapsed_s,
            f.ops,
            f.mops
        );
        if let (Some(p50), Some(p99)) = (f.p50_ns, f.p99_ns) {
            line.push_str(&format!(
                "  p50 {:.2} us  p99 {:.2} us",
                p50 / 1000.0,
                p99 / 1000.0
            ));
        }
        self.line(&line);
    }

    /// A one-line remark above the table (skipped points and the like).
    pub fn note(&self, s: &str) {
        if !self.quiet {
            self.line(&format!("# note: {s}"));
        }
    }

    pub fn tput_header(&self, spec: &TputSpec, device: &str) {
        if self.quiet {
            return;
        }
        self.line(&format!("# {}", describe_tput(spec, device)));
        self.line("# setup: seconds from creating a point's QPs to both sides connected, before its warm-up (and per QP)");
        if let Some(m) = spec.memory.describe() {
            self.line(&format!("# memory: {m}"));
        }
        self.line(&format!(
            "{:>4} {:>8} {:>6} {:>5} {:>8} {:>7} {:>7} {:>10} {:>9} {:>12} {:>12} {:>8}",
            "tr",
            "size[B]",
            "S",
            "qps",
            "postlist",
            "window",
            "threads",
            "Mops",
            "Gb/s",
            "sent",
            "received",
            "lost"
        ));
        self.line(CPU_LEGEND);
    }

    pub fn tput_row(&self, r: &TputRecord) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        if self.quiet {
            return;
        }
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        let mut line = format!(
            "{:>4} {:>8} {:>6} {:>5} {:>8} {:>7} {:>7} {:>10.4} {:>9.3} {:>12} {:>12} {:>8}",
            r.transport,
            r.size,
            r.signal_period,
            r.qps,
            r.postlist,
            r.window,
            r.threads,
            r.mops,
            r.gbps,
            r.sent,
            opt(r.received),
            opt(r.lost)
        );
        if r.posting.inline_size.is_some() && r.posting.inline {
            line.push_str("  inline");
        }
        if let Some(dirs) = &r.directions {
            for d in dirs {
                line.push_str(&format!("  {}-issued {:.4} Mops", d.issued_by, d.mops));
            }
        }
        // More than the one refill per QP a bucket may hold at the close.
        let refills = u64::from(r.burst.unwrap_or(1)) * u64::from(r.qps * r.threads);
        if let Some(m) = r.rate_missed.filter(|&m| m > refills) {
            line.push_str(&format!("  behind the rate: {m} offered WRs not posted"));
        }
        line.push_str(&cpu_cells(r.cpu_util.as_ref(), true));
        if let (Some(s), Some(per_qp)) = (r.setup_s, r.setup_per_qp_ms) {
            line.push_str(&format!("  setup {s:.2} s ({per_qp:.2} ms/QP)"));
        }
        if let Some(agg) = r.aggregate_mops {
            line.push_str(&format!("  group of {}: {:.4} Mops", r.group_clients, agg));
        }
        self.line(&line);
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// What the CPU cells at the end of each row mean.
const CPU_LEGEND: &str = "# cpu: this process's CPU time in % of ONE CPU (proc%), and the share of ALL this host's CPUs busy (host%), over the measured window; peer: the same on the serve side; throughput adds CPU-seconds per million ops (cpu-s/Mop)";

/// The CPU cells of a row: ` cpu proc 98% host 52%[ peer proc .. host ..][ 1.2 cpu-s/Mop]`.
fn cpu_cells(c: Option<&CpuUtil>, per_mop: bool) -> String {
    let Some(c) = c else {
        return String::new();
    };
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}%"));
    let mut s = format!(
        "  cpu proc {} host {}",
        pct(c.local_process_pct),
        pct(c.local_pct)
    );
    if c.peer_process_pct.is_some() || c.peer_pct.is_some() {
        s.push_str(&format!(
            " peer proc {} host {}",
            pct(c.peer_process_pct),
            pct(c.peer_pct)
        ));
    }
    if per_mop {
        if let Some(v) = c.local_cpu_s_per_mop {
            s.push_str(&format!(" {v:.3} cpu-s/Mop"));
        }
    }
    s
}
