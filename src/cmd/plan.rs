//! A measurement ready to run: a latency spec or a throughput sweep, built and
//! validated from arguments, then executed in loopback or against `serve`,
//! handing each measured point to the caller as a results record.

use crate::bench::ops::posts_inline;
use crate::bench::{run_client_live, run_tput_client_live, PointOutcome, Port, TputOutcome};
use crate::cli::TestArgs;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::export::SamplesFile;
use crate::output::Console;
use crate::report::{IntervalFigure, PeerInfo};
use crate::results::Record;
use crate::spec::{Direction, LatencySpec, PathEnds, TputPoint, TputSpec, VerbKind};
use crate::verbs::Transport;

use super::setup::connect_to;

/// Identifies a point within an experiment, both before it runs (from a
/// plan) and after (from its record), so `--resume` can skip what is done.
pub fn record_id(r: &Record) -> String {
    match r {
        Record::Latency(l) => match &l.load {
            Some(load) => load_id(l.series.as_deref(), l.size, load),
            None => latency_id(l.series.as_deref(), l.size),
        },
        Record::Throughput(t) => tput_id(
            t.series.as_deref(),
            &TputPoint {
                transport: match t.transport.as_str() {
                    "uc" => Transport::Uc,
                    "ud" => Transport::Ud,
                    _ => Transport::Rc,
                },
                size: t.size,
                signal_period: t.signal_period,
                qps: t.qps,
                postlist: t.postlist,
                window: t.window,
                threads: t.threads,
            },
        ),
    }
}

fn latency_id(series: Option<&str>, size: u32) -> String {
    format!("{}|latency|{size}", series.unwrap_or(""))
}

fn load_id(series: Option<&str>, size: u32, load: &str) -> String {
    format!("{}|load {load}", latency_id(series, size))
}

fn tput_id(series: Option<&str>, p: &TputPoint) -> String {
    format!(
        "{}|tput|{}|{}|{}|{}|{}|{}|{}",
        series.unwrap_or(""),
        p.transport,
        p.size,
        p.signal_period,
        p.qps,
        p.postlist,
        p.window,
        p.threads
    )
}

pub enum Plan {
    Latency(LatencySpec),
    /// With the notes the plan prints first (points skipped, windows lowered).
    Tput(TputSpec, Vec<String>),
    /// Latency under background loads (`--under-load`).
    UnderLoad(super::under_load::UnderLoadSpec),
}

impl Plan {
    /// `-a` capped by the device, as perftest caps it: UD sizes above the UD
    /// MTU (the port's active MTU, or `--mtu`) are left out rather than refused.
    /// Returns what was left out, to say above the table.
    pub fn cap_ud_sizes(&mut self, ends: &PathEnds) -> Option<String> {
        let (limit, why) = match self {
            Plan::Latency(s) if s.transport == Transport::Ud => s.path.ud_limit(ends),
            Plan::Tput(s, _) if s.points.iter().any(|p| p.transport == Transport::Ud) => {
                s.path.ud_limit(ends)
            }
            _ => return None,
        };
        let dropped = match self {
            Plan::Latency(s) => {
                let before = s.sizes.len();
                s.sizes.retain(|&z| z <= limit);
                before - s.sizes.len()
            }
            Plan::Tput(s, _) => {
                let before = s.points.len();
                s.points
                    .retain(|p| p.transport != Transport::Ud || p.size <= limit);
                before - s.points.len()
            }
            // Not reached: the first match returned for anything but UD latency or throughput.
            Plan::UnderLoad(_) => 0,
        };
        (dropped > 0).then(|| format!("-a: {dropped} UD points above {why} left out"))
    }

    /// Validates the arguments (exit 2 on bad input) before anything is
    /// opened, `--connect`'s name resolution included.
    pub fn from_args(verb: VerbKind, args: &TestArgs) -> Result<Plan> {
        let plan = Self::from_args_unresolved(verb, args)?;
        // Last: the only check that may wait (on name resolution).
        if let Some(target) = &args.connect {
            super::setup::resolve(target)?;
        }
        Ok(plan)
    }

    /// `from_args` without resolving `--connect`: an experiment checks each
    /// series against the run's target, which `run` resolves once.
    pub fn from_args_unresolved(verb: VerbKind, args: &TestArgs) -> Result<Plan> {
        super::script_output::check(args)?;
        if let Some(loads) = &args.under_load {
            if args.interval.is_some() || args.forever {
                return Err(Error::usage(format!(
                    "--{}: not with --under-load, whose points are the probe's (an interval of a probe point is not implemented)",
                    if args.forever { "forever" } else { "interval" }
                )));
            }
            // Its own rules for which options apply (the probe's and the background's).
            let spec = super::under_load::spec_from_args(verb, args, loads)?;
            return Ok(Plan::UnderLoad(spec));
        }
        let tput = args.tput.is_some();
        for id in &args.given {
            if let Some(scope) = crate::cli::inapplicable(id, verb, tput) {
                return Err(Error::usage(format!(
                    "--{} applies only {scope}",
                    id.replace('_', "-")
                )));
            }
        }
        let plan = if tput {
            let (spec, skipped) = super::tput::spec_from_args(verb, args)?;
            Plan::Tput(spec, skipped)
        } else {
            Plan::Latency(super::latency::spec_from_args(verb, args)?)
        };
        Ok(plan)
    }

    /// The same plan without the points whose ids are in `done`.
    pub fn without(&self, series: Option<&str>, done: &std::collections::HashSet<String>) -> Plan {
        match self {
            Plan::Latency(s) => {
                let mut s = s.clone();
                s.sizes
                    .retain(|&size| !done.contains(&latency_id(series, size)));
                Plan::Latency(s)
            }
            Plan::Tput(s, skipped) => {
                let mut s = s.clone();
                s.points.retain(|p| !done.contains(&tput_id(series, p)));
                Plan::Tput(s, skipped.clone())
            }
            Plan::UnderLoad(s) => {
                let mut s = s.clone();
                let size = s.probe.sizes[0];
                s.loads
                    .retain(|l| !done.contains(&load_id(series, size, &l.label())));
                Plan::UnderLoad(s)
            }
        }
    }

    pub fn points(&self) -> usize {
        match self {
            Plan::Latency(s) => s.sizes.len(),
            Plan::Tput(s, _) => s.points.len(),
            Plan::UnderLoad(s) => s.loads.len(),
        }
    }

    /// The measuring threads this process runs for the plan: (client side,
    /// server side); the server side only in loopback.
    pub fn threads(&self, loopback: bool) -> (usize, usize) {
        let (client, server) = match self {
            Plan::Latency(_) => (1, 1),
            Plan::Tput(s, _) => {
                let most = s.points.iter().map(|p| p.threads).max().unwrap_or(1) as usize;
                match s.direction {
                    // Each side: its issuer threads, then its serving thread.
                    _ if s.bidirectional => (most + 1, most + 1),
                    Direction::Outbound => (1, most),
                    Direction::Inbound | Direction::Echo => (most, 1),
                }
            }
            Plan::UnderLoad(s) => s.threads(),
        };
        (client, if loopback { server } else { 0 })
    }

    fn timeout_s(&self) -> f64 {
        match self {
            Plan::Latency(s) => s.timeout_s,
            Plan::Tput(s, _) => s.timeout_s,
            Plan::UnderLoad(s) => s.probe.timeout_s,
        }
    }

    /// Prints what the coming table means (and which points were skipped).
    pub fn announce(&self, console: &Console, device: &str) {
        match self {
            Plan::Latency(s) => console.header(s, device),
            Plan::Tput(s, notes) => {
                for note in notes {
                    console.note(note);
                }
                let mut clamped: Vec<(u32, u32)> = s
                    .points
                    .iter()
                    .filter(|p| s.direction != Direction::Echo && p.signal_period > p.window)
                    .map(|p| (p.signal_period, p.window))
                    .collect();
                clamped.sort_unstable();
                clamped.dedup();
                for (sp, w) in clamped {
                    console.note(&format!(
                        "-S {sp} exceeds --window {w}: an issuer signals at least once per window, so these points run with S={w} (recorded as effective_signal_period)"
                    ));
                }
                console.tput_header(s, device);
                if s.bidirectional && s.live.interval_s.is_some() {
                    console.note("--bidirectional: the live interval lines (and a --forever point's in-progress record) count this side's, the client's, WRs only; the record's intervals add the server's, index by index, when the point ends");
                }
            }
            Plan::UnderLoad(s) => {
                let p = &s.background.points[0];
                let loads: Vec<String> = s.loads.iter().map(|l| l.label()).collect();
                console.note(&format!(
                    "under load {}: background {} inbound on {} thread(s) x {} QP(s), window {}; one probe QP measures latency (offered/achieved Mops in the results file)",
                    loads.join(","),
                    s.background.verb.name(),
                    p.threads,
                    p.qps,
                    p.window
                ));
                console.header(&s.probe, device);
            }
        }
    }

    /// Runs every point; `on_record` sees each as soon as it is measured.
    pub fn execute(
        &self,
        port: &Port,
        clock: &Clock,
        connect: Option<&str>,
        series: Option<&str>,
        on_record: &mut dyn FnMut(Record, &PeerInfo) -> Result<()>,
    ) -> Result<()> {
        self.execute_live(port, clock, connect, series, &|_, _| {}, None, on_record)
    }

    /// `execute`, with every `--interval` handed to `on_interval` (point
    /// index, interval) as it ends, from a watcher thread, and each latency
    /// point's raw samples added to `samples` (`-H`/`-U`) before its record
    /// goes to `on_record`.
    #[allow(clippy::too_many_arguments)]
    pub fn execute_live(
        &self,
        port: &Port,
        clock: &Clock,
        connect: Option<&str>,
        series: Option<&str>,
        on_interval: &(dyn Fn(u32, &IntervalFigure) + Sync),
        samples: Option<&SamplesFile>,
        on_record: &mut dyn FnMut(Record, &PeerInfo) -> Result<()>,
    ) -> Result<()> {
        let label = series.map(str::to_string);
        // In loopback the peer is this very process: no peer CPU figures.
        let loopback = connect.is_none();
        let own = |cpu: &mut Option<crate::results::CpuUtil>| {
            if loopback {
                *cpu = cpu.take().map(|c| c.without_peer());
            }
        };
        match self {
            Plan::Latency(spec) => {
                let mut on_point = |p: PointOutcome<'_>| {
                    let mut r = super::latency::record(spec, &p);
                    r.series = label.clone();
                    own(&mut r.cpu_util);
                    // The samples first (a closed stdout ends the run in
                    // on_record); the record is kept even if they fail.
                    let dumped = match (samples, p.samples.raw()) {
                        (Some(file), Some((raw, left_out))) => file.add_point(&r, raw, left_out),
                        _ => Ok(()),
                    };
                    on_record(Record::Latency(r), p.peer)?;
                    dumped
                };
                self.drive(port, clock, connect, &mut |ctl| {
                    run_client_live(spec, port, ctl, clock, on_interval, &mut on_point)
                })
            }
            Plan::Tput(spec, _) => {
                let mut on_point = |mut o: TputOutcome| {
                    if loopback && spec.direction == Direction::Outbound {
                        // The server thread drove the point in this process:
                        // its window is the measured one.
                        o.cpu_local = o.cpu_peer;
                    }
                    let mut r = super::tput::record(spec, &o);
                    r.series = label.clone();
                    own(&mut r.cpu_util);
                    on_record(Record::Throughput(r), &o.peer)
                };
                self.drive(port, clock, connect, &mut |ctl| {
                    run_tput_client_live(spec, port, ctl, clock, on_interval, &mut on_point)
                })
            }
            Plan::UnderLoad(spec) => spec.execute(port, clock, connect, series, on_record),
        }
    }

    /// `--forever`: one point runs until a signal ends it.
    pub fn forever(&self) -> bool {
        match self {
            Plan::Latency(s) => s.live.forever,
            Plan::Tput(s, _) => s.live.forever,
            Plan::UnderLoad(_) => false,
        }
    }

    /// Whether the table shows latency percentiles per interval.
    pub fn is_latency(&self) -> bool {
        matches!(self, Plan::Latency(_))
    }

    /// What a `--forever` point has measured so far, as a record marked
    /// `in_progress`: the whole intervals summed (counts only the end knows,
    /// such as `sent` or the percentiles, are 0).
    pub fn provisional(
        &self,
        series: Option<&str>,
        intervals: &[IntervalFigure],
    ) -> Option<Record> {
        let ops: u64 = intervals.iter().map(|f| f.ops).sum();
        let elapsed_s: f64 = intervals.iter().map(|f| f.elapsed_s).sum();
        let label = series.map(str::to_string);
        match self {
            Plan::Latency(spec) => {
                let size = *spec.sizes.first()?;
                let samples = crate::stats::LatencyRecorder::new();
                let peer = PeerInfo::default();
                let p = PointOutcome {
                    index: 0,
                    size,
                    client: crate::bench::latency::ClientPoint {
                        measured: ops,
                        warmup: spec.warmup,
                        verify_failures: 0,
                        inline: posts_inline(spec.verb, spec.inline, size, u32::MAX),
                        elapsed_ns: (elapsed_s * 1e9) as u64,
                        device_counters: None,
                        event_wakeups: None,
                        cpu: None,
                        to_stop: None,
                    },
                    server_received: None,
                    samples: &samples,
                    peer: &peer,
                    intervals: intervals.to_vec(),
                    cpu_peer: None,
                    path_mtu: 0,
                    validation: None,
                };
                let mut r = super::latency::record(spec, &p);
                r.series = label;
                r.live.in_progress = Some(true);
                Some(Record::Latency(r))
            }
            Plan::Tput(spec, _) => {
                let point = *spec.points.first()?;
                let o = TputOutcome {
                    index: 0,
                    point,
                    report: crate::report::DriverReport {
                        ops,
                        elapsed_s,
                        mops: intervals.iter().map(|f| f.mops * f.elapsed_s).sum::<f64>()
                            / elapsed_s.max(f64::MIN_POSITIVE),
                        intervals: intervals.to_vec(),
                        ..Default::default()
                    },
                    received: Vec::new(),
                    group: Vec::new(),
                    verify_failures: None,
                    inline: posts_inline(spec.verb, spec.inline, point.size, u32::MAX),
                    peer: PeerInfo::default(),
                    path_mtu: 0,
                    reverse: None,
                    cpu_local: None,
                    cpu_peer: None,
                    validation: None,
                    setup_s: None,
                };
                let mut r = super::tput::record(spec, &o);
                r.series = label;
                r.live.in_progress = Some(true);
                Some(Record::Throughput(r))
            }
            Plan::UnderLoad(_) => None,
        }
    }

    /// Runs `client` against `serve` at `connect`, or against a loopback server thread.
    fn drive(
        &self,
        port: &Port,
        clock: &Clock,
        connect: Option<&str>,
        client: &mut dyn FnMut(&mut dyn crate::connect::Control) -> Result<()>,
    ) -> Result<()> {
        match connect {
            Some(target) => {
                let mut ctl = connect_to(target, self.timeout_s())?;
                client(&mut ctl)
            }
            None => super::loopback(port, clock, self.timeout_s(), client),
        }
    }
}
