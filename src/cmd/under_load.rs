//! `--under-load LOADS`: latency while the device carries background
//! traffic. For each offered load, inbound issuers of the same verb (echo:
//! WRITE, its request) on `-q`/`--threads` QPs of their own run, paced by
//! the token bucket, while one probe QP on its own thread measures latency
//! exactly as the verb's latency test does. The background's window opens
//! before the probe starts and is held open until the probe is done, so the
//! load spans the whole probe measurement and achieved Mops is the rate
//! beside it. A percentage load is of the saturated rate: what the
//! background achieves without a limit beside the probe (the `max` point,
//! measured first).
//! In loopback both sides of the background and of the probe run in this
//! process on the one device; with `--connect` the background and the probe
//! are two ordinary client sessions of `rdma-bench serve` (a throughput
//! session whose window is held open, and a latency session), so the server
//! needs nothing it does not already do for two clients at once.

use std::time::{Duration, Instant};

use crate::abort::{abort_all, aborted};
use crate::bench::{run_client, run_tput_client_held, LoadHold, Port, TputOutcome};
use crate::cli::TestArgs;
use crate::clock::Clock;
use crate::connect::Control;
use crate::cpu_use::thread_run_delay;
use crate::error::{Error, Result};
use crate::report::PeerInfo;
use crate::results::{BackgroundLoad, LatencyRecord, Record};
use crate::spec::{parse_loads, LatencySpec, Load, RateLimit, TputSpec, VerbKind};

/// The window a rate is checked against (a refill must come within it);
/// the background's real window spans the probe's run, whatever its length.
pub const SATURATION_WINDOW_S: f64 = 1.0;

#[derive(Debug, Clone)]
pub struct UnderLoadSpec {
    /// The probe: one size, as the verb's latency test.
    pub probe: LatencySpec,
    /// The background: one inbound point, without a rate (each load sets it).
    pub background: TputSpec,
    pub loads: Vec<Load>,
    /// `--burst` of the background's token buckets.
    pub burst: Option<u32>,
}

/// Builds the run from arguments, refusing bad input (exit 2) before any
/// verbs object exists.
pub fn spec_from_args(verb: VerbKind, a: &TestArgs, text: &str) -> Result<UnderLoadSpec> {
    for id in &a.given {
        if let Some(why) = crate::cli::inapplicable_under_load(id, verb) {
            return Err(Error::usage(format!(
                "--{} does not apply to --under-load: {why}",
                id.replace('_', "-")
            )));
        }
    }
    let loads = parse_loads(text)?;
    let probe = super::latency::spec_from_args(verb, a)?;
    let [size] = probe.sizes[..] else {
        return Err(Error::usage(format!(
            "--size: --under-load measures one size, not {}",
            probe.sizes.len()
        )));
    };
    let mut b = a.clone();
    b.tput = Some("inbound".into());
    b.size = Some(size.to_string());
    b.completion = false;
    b.iters = None;
    b.duration = Some(SATURATION_WINDOW_S);
    b.rate = None;
    b.burst = None;
    // --events is the probe's: the background issuers busy-poll, so the load
    // they offer is the same with and without it.
    b.events = false;
    b.imm = a.imm && verb == VerbKind::Send;
    let bg_verb = if verb == VerbKind::Echo {
        VerbKind::Write
    } else {
        verb
    };
    let (background, _) = super::tput::spec_from_args(bg_verb, &b).map_err(|e| match e {
        // Echo's background is a WRITE stream: say so, or a refusal that
        // names "write" puzzles a user who asked for echo.
        Error::Usage(msg) if bg_verb != verb => Error::usage(format!(
            "{msg} (the --under-load background of {} is a WRITE stream)",
            verb.name()
        )),
        e => e,
    })?;
    if background.points.len() != 1 {
        return Err(Error::usage(format!(
            "--under-load: the background is one point, but -c/-q/--threads/-S/--postlist/--window give {}",
            background.points.len()
        )));
    }
    let spec = UnderLoadSpec {
        probe,
        background,
        loads,
        burst: a.burst,
    };
    // --burst alone (percentages are checked once the saturated rate is known).
    let p = &spec.background.points[0];
    let any = RateLimit {
        mops: crate::spec::MAX_RATE_MOPS,
        per_qp: false,
        burst: a.burst,
    };
    any.validate()?;
    any.validate_point(
        p.window,
        p.postlist,
        p.total_qps(),
        SATURATION_WINDOW_S,
        "--under-load",
        "lower --burst",
    )?;
    for load in &spec.loads {
        if let Load::Mops(m) = load {
            spec.loaded(Some(*m), &format!("--under-load {}", load.label()))?;
        }
    }
    Ok(spec)
}

impl UnderLoadSpec {
    /// The background spec at an offered rate (`None`: unlimited), checked;
    /// `who` names the load the rate comes from, as the user gave it (the
    /// user typed no `--rate`, and the background's window is fixed, so
    /// only the load can be raised).
    fn loaded(&self, offered: Option<f64>, who: &str) -> Result<TputSpec> {
        let mut bg = self.background.clone();
        bg.validate()?;
        bg.rate = offered.map(|mops| RateLimit {
            mops,
            per_qp: false,
            burst: self.burst,
        });
        if let Some(r) = &bg.rate {
            r.validate_as(who)?;
            let p = &bg.points[0];
            r.validate_point(
                p.window,
                bg.wrs_per_post(p),
                p.total_qps(),
                bg.duration_s,
                who,
                "raise the load",
            )?;
        }
        Ok(bg)
    }

    /// Whether a fractional load makes the run measure the background's
    /// saturated rate first.
    pub fn needs_saturation(&self) -> bool {
        self.loads.iter().any(|l| matches!(l, Load::Fraction(_)))
    }

    /// Whether the saturated rate costs a point of its own, measured before
    /// the first load and not recorded: a fractional load needs it, and a
    /// planned `max` load is that same measurement, reused.
    pub fn saturation_point_apart(&self) -> bool {
        self.needs_saturation() && !self.loads.contains(&Load::Max)
    }

    /// The measuring threads: (client side, server side) in loopback.
    pub fn threads(&self) -> (usize, usize) {
        (self.background.points[0].threads as usize + 1, 2)
    }

    /// Runs every load, in loopback or against `serve` at `connect`;
    /// `on_record` sees each point as it is measured.
    pub fn execute(
        &self,
        port: &Port,
        clock: &Clock,
        connect: Option<&str>,
        series: Option<&str>,
        on_record: &mut dyn FnMut(Record, &PeerInfo) -> Result<()>,
    ) -> Result<()> {
        let at = Peer {
            port,
            clock,
            connect,
        };
        // The saturated rate is what the unlimited background achieves
        // beside the probe (the `max` point, measured first): percentages
        // are of what the background can do while latency is measured.
        let mut at_max = None;
        let saturated = if self.needs_saturation() {
            let bg = self.loaded(None, "--under-load max")?;
            let point = self.point(&bg, &at)?;
            let mops = point.0.report.mops;
            at_max = Some((bg, point));
            Some(mops)
        } else {
            None
        };
        for load in &self.loads {
            let (bg, (bg_out, mut rec, peer, waited)) = match (load, at_max.take()) {
                (Load::Max, Some(measured)) => measured,
                (_, kept) => {
                    at_max = kept;
                    let offered = load.offered_mops(saturated);
                    let who = match (offered, saturated) {
                        (Some(m), Some(s)) if matches!(load, Load::Fraction(_)) => format!(
                            "--under-load {} ({m:.6} Mops of the saturated {s:.6})",
                            load.label()
                        ),
                        _ => format!("--under-load {}", load.label()),
                    };
                    let bg = self.loaded(offered, &who)?;
                    let point = self.point(&bg, &at)?;
                    (bg, point)
                }
            };
            let p = &bg.points[0];
            rec.series = series.map(str::to_string);
            if connect.is_none() {
                // The probe's server was this process: no peer CPU figures.
                rec.cpu_util = rec.cpu_util.take().map(|c| c.without_peer());
            }
            rec.load = Some(load.label());
            rec.offered_mops = bg.rate.map(|r| r.offered_mops(p.total_qps()));
            rec.achieved_mops = Some(bg_out.report.mops);
            rec.saturated_mops = saturated;
            let r = &bg_out.report;
            rec.background = Some(BackgroundLoad {
                verb: bg.verb.name().into(),
                direction: bg.direction.name().into(),
                size: p.size,
                qps: p.qps,
                threads: p.threads,
                window: p.window,
                postlist: p.postlist,
                signal_period: p.signal_period,
                burst: bg.rate.map(|r| r.burst_for(p.postlist)),
                ops: r.ops,
                elapsed_s: r.elapsed_s,
                per_qp_ops: r.per_qp_ops.clone(),
                device_counters: (!r.device_counters.is_empty()).then(|| r.device_counters.clone()),
                probe_run_delay_s: waited.run_delay.map(|d| d.as_secs_f64()),
                probe_span_s: waited.run_delay.map(|_| waited.span.as_secs_f64()),
            });
            on_record(Record::Latency(rec), &peer)?;
        }
        Ok(())
    }

    /// One loaded point: the background on its own threads, held open
    /// while the probe measures on this one.
    fn point(
        &self,
        bg: &TputSpec,
        at: &Peer<'_>,
    ) -> Result<(TputOutcome, LatencyRecord, PeerInfo, ProbeWait)> {
        let hold = LoadHold::default();
        let threads = bg.points[0].threads;
        std::thread::scope(|s| {
            let bg_thread = std::thread::Builder::new()
                .spawn_scoped(s, || {
                    let r = background(bg, at, Some(&hold));
                    if r.is_err() && at.connect.is_some() {
                        // Stop the probe now (loopback's server thread does this itself).
                        abort_all();
                    }
                    r
                })
                .map_err(|e| Error::io("starting the --under-load background's thread", e))?;
            // The probe's client pins past the issuers (this thread's pins only).
            crate::affinity::shift_pins(threads as usize);
            let probed = wait_open(&hold, threads, bg.timeout_s, || bg_thread.is_finished())
                .and_then(|()| {
                    let (started, delay0) = (Instant::now(), thread_run_delay());
                    let out = probe(&self.probe, at)?;
                    let waited = ProbeWait {
                        span: started.elapsed(),
                        run_delay: delay0
                            .zip(thread_run_delay())
                            .map(|(a, b)| b.saturating_sub(a)),
                    };
                    Ok((out, waited))
                });
            crate::affinity::shift_pins(0);
            hold.release();
            let loaded = bg_thread.join().unwrap_or(Err(Error::Interrupted));
            match (probed, loaded) {
                (Ok(((rec, peer), waited)), Ok(out)) => Ok((out, rec, peer, waited)),
                // The probe stopped because the background failed: its error says why.
                (Err(Error::Interrupted), Err(e)) => Err(e),
                (Err(e), _) | (Ok(_), Err(e)) => Err(e),
            }
        })
    }
}

/// Waits (outside any measurement) until all `threads` background issuers
/// have opened their windows.
fn wait_open(
    hold: &LoadHold,
    threads: u32,
    timeout_s: f64,
    finished: impl Fn() -> bool,
) -> Result<()> {
    let start = Instant::now();
    let limit = Duration::from_secs_f64(timeout_s);
    while hold.open_threads() < threads {
        if aborted() || finished() {
            return Err(Error::Interrupted);
        }
        if start.elapsed() > limit {
            return Err(Error::Timeout {
                what: "the background load's window to open".into(),
                secs: timeout_s,
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// How long the probe's thread waited for its CPU over the probe's run.
struct ProbeWait {
    span: Duration,
    /// `None` where the kernel keeps no run delay.
    run_delay: Option<Duration>,
}

/// Where the background and the probe find their server.
struct Peer<'a> {
    port: &'a Port,
    clock: &'a Clock,
    /// `serve` at this address, or a server thread of this process.
    connect: Option<&'a str>,
}

impl Peer<'_> {
    /// Runs `client` over a control channel of its own to its server.
    fn session(
        &self,
        timeout_s: f64,
        client: impl FnOnce(&mut dyn Control) -> Result<()>,
    ) -> Result<()> {
        match self.connect {
            Some(target) => {
                let mut ctl = super::setup::connect_to(target, timeout_s)?;
                client(&mut ctl)
            }
            None => super::loopback(self.port, self.clock, timeout_s, client),
        }
    }
}

/// The background: one inbound throughput point.
fn background(bg: &TputSpec, at: &Peer<'_>, hold: Option<&LoadHold>) -> Result<TputOutcome> {
    let (port, clock) = (at.port, at.clock);
    let mut out = None;
    at.session(bg.timeout_s, |ctl| {
        run_tput_client_held(bg, port, ctl, clock, hold, |o| {
            out = Some(o);
            Ok(())
        })
    })?;
    out.ok_or(Error::Interrupted)
}

/// The probe: the verb's latency test, one size.
fn probe(spec: &LatencySpec, at: &Peer<'_>) -> Result<(LatencyRecord, PeerInfo)> {
    let (port, clock) = (at.port, at.clock);
    let mut out = None;
    at.session(spec.timeout_s, |ctl| {
        run_client(spec, port, ctl, clock, |p| {
            out = Some((super::latency::record(spec, &p), p.peer.clone()));
            Ok(())
        })
    })?;
    out.ok_or(Error::Interrupted)
}
