//! A throughput run over one control connection: the handshake, then for each
//! point both sides build their QPs, exchange endpoints, start together, and
//! the driving side reports what it measured while the other reports what it
//! received.

use crate::affinity::{self, Side};
use crate::clock::Clock;
use crate::connect::{accept, expect, fail, hello, refuse, Control, Deadlines, Message, PeerWatch};
use crate::cpu_use::{CpuSnapshot, CpuUse};
use crate::error::{Error, Result};
use crate::report::{ClientFigure, DriverReport, IntervalFigure, PeerInfo, Validation};
use crate::spec::{Connection, DeviceLimits, TestSpec, TputPoint, TputSpec, VerbKind};
use crate::verbs::Transport;

use super::super::cm::{self, Listener};
use super::super::footprint::MemoryBudget;
use super::super::group::Rendezvous;
use super::super::intervals::IntervalBoard;
use super::super::ops::{atomic_mismatch, needs_inline_limit, posts_inline};
use super::super::port::Port;
use super::bidir::run_bidir;
use super::echo_client::run_echo_client;
use super::echo_server::run_echo_server;
use super::hold::LoadHold;
use super::issuer::run_issuer;
use super::target::run_target;
use super::threads::drive;
use super::validate;
use super::window::PointCtx;
use super::{EchoClients, EchoServer, PointSide};

/// One measured throughput point, as the client hands it to the caller.
pub struct TputOutcome {
    pub index: u32,
    pub point: TputPoint,
    pub report: DriverReport,
    /// Per-QP counts of the receiving side (SEND targets, echo server); empty otherwise.
    pub received: Vec<u64>,
    /// Every client's figure when several ran together (`--group`).
    pub group: Vec<ClientFigure>,
    /// Atomics: operations the target's words do not account for (0 when
    /// every one is); `None` for other verbs.
    pub verify_failures: Option<u64>,
    /// Whether the client's WRs were posted inline (echo: as the client's
    /// request QPs decided; otherwise as asked for this point's size).
    pub inline: bool,
    /// The server's host and device, as its handshake said.
    pub peer: PeerInfo,
    /// The path MTU both sides' QPs ran with (RC/UC; UD's payload limit).
    pub path_mtu: u32,
    /// `--bidirectional`: the server-to-client direction (`report` and
    /// `received` above are then the client-to-server one).
    pub reverse: Option<Reverse>,
    /// This process's CPU use over its window (driving: the first thread's
    /// window; otherwise from go to stop), and the peer's as it reported.
    pub cpu_local: Option<CpuUse>,
    pub cpu_peer: Option<CpuUse>,
    /// `--validate`: every check of the point's payloads, both sides' and
    /// both directions' summed; `None` without it.
    pub validation: Option<Validation>,
    /// Seconds from building this side's QPs to both sides connected.
    pub setup_s: Option<f64>,
}

/// What the server issued in a bidirectional point, and what the client's
/// targets made of it.
pub struct Reverse {
    pub report: DriverReport,
    /// Per QP, the server's SENDs the client's sink received (empty when passive).
    pub received: Vec<u64>,
    /// Atomics: operations the client's words do not account for.
    pub verify_failures: Option<u64>,
}

/// The device limits `spec` is checked against: inline limits are probed
/// for every transport the sweep uses (they may differ), and only when it
/// inlines.
fn device_limits(spec: &TputSpec, port: &Port) -> Result<DeviceLimits> {
    let mut transports: Vec<Transport> = Vec::new();
    if needs_inline_limit(spec.verb, spec.inline) {
        for p in &spec.points {
            if !transports.contains(&p.transport) {
                transports.push(p.transport);
            }
        }
    }
    port.limits(&transports)
}

fn deadlines(spec: &TputSpec) -> Deadlines {
    Deadlines::new(
        spec.timeout_s,
        spec.live.point_s(spec.warmup_s + spec.duration_s),
    )
}

fn expect_go(ctl: &mut dyn Control, index: u32, d: &Deadlines) -> Result<()> {
    expect(ctl, "go", d.point(), |m| match m {
        Message::Go { index: i } if *i == index => Some(()),
        _ => None,
    })
}

/// What the non-driving side of a point counted: its receives per QP, every
/// group client's figure, and (atomics) its words' final values.
#[derive(Default, Clone)]
struct Counted {
    received: Vec<u64>,
    group: Vec<ClientFigure>,
    words: Vec<u64>,
    cpu: Option<CpuUse>,
    validation: Option<Validation>,
}

impl Counted {
    fn message(self, index: u32) -> Message {
        Message::Stopped {
            index,
            received: self.received,
            group: self.group,
            words: self.words,
            cpu: self.cpu,
            validation: self.validation,
        }
    }
}

/// Tells the other side the driver is done and what it measured; waits for
/// what that side counted.
fn finish_as_driver(
    ctl: &mut dyn Control,
    index: u32,
    report: DriverReport,
    d: &Deadlines,
) -> Result<(DriverReport, Counted)> {
    ctl.send(&Message::Stop {
        index,
        report: report.clone(),
    })?;
    let counted = expect(ctl, "stopped", d.point(), |m| match m {
        Message::Stopped {
            index: r,
            received,
            group,
            words,
            cpu,
            validation,
        } if *r == index => Some(Counted {
            received: std::mem::take(received),
            group: std::mem::take(group),
            words: std::mem::take(words),
            cpu: *cpu,
            validation: validation.take(),
        }),
        _ => None,
    })?;
    Ok((report, counted))
}

/// Runs every point of `spec` as the client.
pub fn run_tput_client(
    spec: &TputSpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    on_point: impl FnMut(TputOutcome) -> Result<()>,
) -> Result<()> {
    run_tput_client_with(spec, port, ctl, clock, None, &|_, _| {}, on_point)
}

/// `run_tput_client`, with the client's issuers' windows held open by
/// `hold` (the background load of a latency-under-load point).
pub fn run_tput_client_held(
    spec: &TputSpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    hold: Option<&LoadHold>,
    on_point: impl FnMut(TputOutcome) -> Result<()>,
) -> Result<()> {
    run_tput_client_with(spec, port, ctl, clock, hold, &|_, _| {}, on_point)
}

/// `run_tput_client`; with `--interval`, each interval the client drives
/// goes to `on_interval` (point index, interval) from a watcher thread as
/// it ends.
pub fn run_tput_client_live(
    spec: &TputSpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    on_interval: &(dyn Fn(u32, &IntervalFigure) + Sync),
    on_point: impl FnMut(TputOutcome) -> Result<()>,
) -> Result<()> {
    run_tput_client_with(spec, port, ctl, clock, None, on_interval, on_point)
}

/// Runs every point of `spec` as the client, with an optional `hold` and
/// an `--interval` callback.
fn run_tput_client_with(
    spec: &TputSpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    hold: Option<&LoadHold>,
    on_interval: &(dyn Fn(u32, &IntervalFigure) + Sync),
    on_point: impl FnMut(TputOutcome) -> Result<()>,
) -> Result<()> {
    let r = tput_client_session(spec, port, &mut *ctl, clock, hold, on_interval, on_point);
    // The server says why its side ended too; tell it why ours did.
    if let Err(e) = &r {
        fail(ctl, e);
    }
    r
}

fn tput_client_session(
    spec: &TputSpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    hold: Option<&LoadHold>,
    on_interval: &(dyn Fn(u32, &IntervalFigure) + Sync),
    mut on_point: impl FnMut(TputOutcome) -> Result<()>,
) -> Result<()> {
    spec.validate_device(&device_limits(spec, port)?)?;
    // This thread drives the client's target (outbound) and its barriers.
    affinity::pin(Side::Client, 0);
    let d = deadlines(spec);
    let me = port.describe();
    let accepted = hello(ctl, TestSpec::Tput(spec.clone()), None, &me, d.reply())?;
    // Both sides run at the MTU both ports carry (the server has refused
    // an --mtu or a UD size either cannot).
    let path_mtu = spec
        .path
        .negotiate_mtu(&Port::path_to(&me, &accepted.peer))?;
    let spec = &spec.with_path_mtu(path_mtu);
    let peer = accepted.peer;
    let cm_to = cm::target(
        spec.path.connection,
        accepted.cm_port,
        ctl.peer_ip(),
        &port.gid,
    )?;
    for (i, p) in spec.points.iter().enumerate() {
        let index = i as u32;
        let board = IntervalBoard::new(clock, spec.live.interval_s, spec.live.forever, p.threads);
        let mut ctx = PointCtx::new(spec, p, clock, &port.counters, Side::Client).held_by(hold);
        ctx.intervals = board.as_ref();
        let shown = |f: &IntervalFigure| on_interval(index, f);
        // Setup is timed with the system clock: it is not a measurement
        // loop, and the point's own clock starts with its warm-up.
        let setup_began = std::time::Instant::now();
        let mut side = PointSide::<EchoClients>::build(port, spec, p)?;
        ctl.send(&Message::TputPrepare {
            index,
            point: *p,
            endpoints: side.endpoints(),
        })?;
        let remotes = expect(ctl, "tput_ready", d.setup(), |m| match m {
            Message::TputReady {
                index: r,
                endpoints,
            } if *r == index => Some(std::mem::take(endpoints)),
            _ => None,
        })?;
        side.connect(&remotes, &ctx)?;
        if let Some(to) = cm_to {
            let server_qpns: Vec<u32> = remotes.iter().map(|e| e.qpn).collect();
            let (mut qps, config) = side.qps_mut();
            if let Some(config) = config {
                let name = port.ctx.name();
                let tos = spec.path.tclass;
                let wait = d.setup();
                cm::dial(to, &mut qps, &server_qpns, &config, name, tos, index, wait)?;
            }
        }
        let setup_s = setup_began.elapsed().as_secs_f64();
        // The peer's host or the wire to it may go while the loops run;
        // the watch ends them then, and says why.
        let (report, counted, reverse, checked) = PeerWatch::during(ctl, |ctl| {
            measure_client_point(&mut side, spec, &ctx, &board, index, ctl, &d, &shown)
        })?;
        // The driver's CPU came in its report, the other side's with its counts.
        let (cpu_local, cpu_peer) = match &side {
            PointSide::Target(_) => (counted.cpu, report.cpu),
            _ => (report.cpu, counted.cpu),
        };
        let verify_failures = atomic_mismatch(&counted.words, &report.per_qp_sent);
        let validation = spec.validate.then(|| {
            let atomics = (spec.verb == VerbKind::Atomic).then(|| {
                let rev = reverse.as_ref();
                atomic_validation(
                    report.sent + rev.map_or(0, |r| r.report.sent),
                    verify_failures.unwrap_or(0) + rev.and_then(|r| r.verify_failures).unwrap_or(0),
                )
            });
            let parts = [&report.validation, &counted.validation, &checked, &atomics];
            validate::merge(parts).unwrap_or_default()
        });
        let inline = match &side {
            PointSide::Echo(sets) => sets.iter().all(|s| s.posts_inline()),
            // Issuers (the server's, outbound) decide by the same rule.
            _ => posts_inline(spec.verb, spec.inline, p.size, 0),
        };
        drop(side);
        on_point(TputOutcome {
            index,
            point: *p,
            report,
            received: counted.received,
            group: counted.group,
            verify_failures,
            inline,
            peer: peer.clone(),
            path_mtu,
            reverse,
            cpu_local,
            cpu_peer,
            validation,
            setup_s: Some(setup_s),
        })?;
    }
    ctl.send(&Message::Bye)?;
    Ok(())
}

/// What `validation.how` says of an atomic point.
const ATOMIC_HOW: &str = "atomics: the target words' final values against the driver's counts after the point, reported as verify_failures (validated_wrs: atomic WRs posted; corrupt_wrs: verify_failures)";

/// Atomics under `--validate`: their check is `verify_failures`.
fn atomic_validation(sent: u64, failures: u64) -> Validation {
    Validation {
        validated_wrs: sent,
        validated_bytes: sent * 8,
        corrupt_wrs: failures,
        corrupt_bytes: 0,
        first_corrupt: None,
        how: ATOMIC_HOW.into(),
    }
}

/// What a point's measured part hands back: the driver's report, what the
/// other side counted, the peer's direction (bidirectional), and what this
/// side's own checks found beyond those (the client's targets, the peer's
/// issuers' READ checks bidirectionally).
type Measured = (DriverReport, Counted, Option<Reverse>, Option<Validation>);

/// One point's measured part on the client: go, the loops, and both
/// sides' figures (the peer's direction too, bidirectionally).
#[allow(clippy::too_many_arguments)]
fn measure_client_point(
    side: &mut PointSide<EchoClients>,
    spec: &TputSpec,
    ctx: &PointCtx<'_>,
    board: &Option<IntervalBoard>,
    index: u32,
    ctl: &mut dyn Control,
    d: &Deadlines,
    shown: &(dyn Fn(&IntervalFigure) + Sync),
) -> Result<Measured> {
    let mut reverse = None;
    let mut checked = None;
    let (report, counted) = match side {
        PointSide::Both { issuers, target } => {
            // The server's receives were posted before it said ready, ours just now.
            ctl.send(&Message::Go { index })?;
            let b = run_bidir(issuers, target, ctx, index, ctl, d, shown)?;
            // Each side's CPU comes in its issuers' report.
            let peer_cpu = b.peer.cpu;
            checked = validate::merge([&b.peer.validation, &b.validation]);
            reverse = Some(Reverse {
                verify_failures: atomic_mismatch(&b.words, &b.peer.per_qp_sent),
                report: b.peer,
                received: b.received,
            });
            let counted = Counted {
                received: b.peer_received,
                group: Vec::new(),
                words: b.peer_words,
                cpu: peer_cpu,
                validation: b.peer_validation,
            };
            (b.mine, counted)
        }
        PointSide::Issuer(sets) => {
            expect_go(ctl, index, d)?;
            let report = drive(board.as_ref(), shown, || run_issuer(sets, ctx))?;
            finish_as_driver(ctl, index, report, d)?
        }
        PointSide::Echo(sets) => {
            expect_go(ctl, index, d)?;
            let report = drive(board.as_ref(), shown, || run_echo_client(sets, ctx))?;
            finish_as_driver(ctl, index, report, d)?
        }
        PointSide::Target(set) => {
            let mut go = |c: &mut dyn Control| c.send(&Message::Go { index });
            let before = CpuSnapshot::take();
            let (received, report) = run_target(set, spec, index, ctl, &mut go)?;
            let counted = Counted {
                received,
                group: Vec::new(),
                words: set.atomic_words(),
                cpu: Some(CpuSnapshot::take().since(&before)),
                validation: set.validation(&report),
            };
            ctl.send(&counted.clone().message(index))?;
            (report, counted)
        }
    };
    Ok((report, counted, reverse, checked))
}

/// Serves a throughput client (`client`: its side of the handshake) until `Bye`.
pub fn serve_tput(
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    spec: TputSpec,
    groups: &Rendezvous,
    client: &PeerInfo,
    budget: &MemoryBudget,
) -> Result<()> {
    let me = port.describe();
    let ends = Port::path_to(&me, client);
    // What the session would pin at its largest point is refused against
    // --max-memory before the device is asked anything.
    let checked = spec.validate().and_then(|_| {
        let need = PointSide::<EchoServer>::footprint(&spec)?;
        budget.check(&need)?;
        let mut limits = device_limits(&spec, port)?;
        limits.path = ends.clone();
        spec.validate_device(&limits)?;
        Ok((need, spec.path.negotiate_mtu(&ends)?))
    });
    let (need, spec) = match checked {
        Ok((need, mtu)) => (need, spec.with_path_mtu(mtu)),
        Err(e) => return Err(refuse(ctl, e)),
    };
    // Held until this function returns, after every point's sets are gone.
    let _held = budget.admit(ctl, &need)?;
    let listener = match spec.path.connection {
        Connection::Cm => Some(
            Listener::open(cm::listen_ip(port, ctl.local_ip()), port.cm_port)
                .map_err(|e| refuse(ctl, e))?,
        ),
        Connection::Gid => None,
    };
    accept(ctl, None, &me, listener.as_ref().map(|l| l.port))?;
    // This thread runs the server's target or echo loop.
    affinity::pin(Side::Server, 0);
    let d = deadlines(&spec);
    // Clients of one group run the same spec: its text names their meeting rooms.
    let spec_key = serde_json::to_string(&spec).expect("specs serialise");
    let me = ctl.peer();
    let expected = spec.group as usize;
    loop {
        let next = expect(
            ctl,
            "tput_prepare or bye",
            d.between_points(),
            |m| match m {
                Message::TputPrepare {
                    index,
                    point,
                    endpoints,
                } => Some(Some((*index, *point, std::mem::take(endpoints)))),
                Message::Bye => Some(None),
                _ => None,
            },
        )?;
        let Some((index, p, client_eps)) = next else {
            return Ok(());
        };
        if !spec.points.contains(&p) {
            return Err(refuse(
                ctl,
                Error::usage(format!("point {index} was not in the agreed test")),
            ));
        }
        let board = IntervalBoard::new(clock, spec.live.interval_s, spec.live.forever, p.threads);
        let mut ctx = PointCtx::new(&spec, &p, clock, &port.counters, Side::Server);
        ctx.intervals = board.as_ref();
        let mut side = PointSide::<EchoServer>::build(port, &spec, &p)?;
        side.connect(&client_eps, &ctx)?;
        ctl.send(&Message::TputReady {
            index,
            endpoints: side.endpoints(),
        })?;
        if let Some(l) = &listener {
            let (mut qps, config) = side.qps_mut();
            if let Some(config) = config {
                cm::answer(l, &mut qps, &config, port.ctx.name(), index, d.setup())?;
            }
        }
        let start_key = format!("{spec_key}#{index}#start");
        let stop_key = format!("{spec_key}#{index}#stop");
        let wait = d.point();
        let mut go = |c: &mut dyn Control| -> Result<()> {
            groups.meet(&start_key, expected, me.clone(), wait)?;
            c.send(&Message::Go { index })
        };
        let before = CpuSnapshot::take();
        let (received, words, report, validation) = match &mut side {
            PointSide::Both { issuers, target } => {
                // The client posts its receives, then says go; both issue at once.
                expect_go(ctl, index, &d)?;
                // Its intervals travel in its Stop report. The issuers do
                // not read the control connection: the watch ends them if
                // the client goes.
                PeerWatch::during(ctl, |ctl| {
                    run_bidir(issuers, target, &ctx, index, ctl, &d, &|_| {})
                })?;
                continue;
            }
            PointSide::Target(set) => {
                let (received, report) = run_target(set, &spec, index, ctl, &mut go)?;
                let validation = set.validation(&report);
                (received, set.atomic_words(), report, validation)
            }
            PointSide::Echo(s) => {
                let (seen, report) = run_echo_server(s, index, ctl, &mut go, d.passive())?;
                (seen, Vec::new(), report, None)
            }
            PointSide::Issuer(sets) => {
                // Outbound: the client's target posts its receives, then says go.
                expect_go(ctl, index, &d)?;
                // Intervals travel in the report (no live lines over the wire).
                // The issuers do not read the control connection: the watch
                // ends them if the client goes.
                let report = PeerWatch::during(ctl, |_| {
                    drive(board.as_ref(), &|_| {}, || run_issuer(sets, &ctx))
                })?;
                ctl.send(&Message::Stop { index, report })?;
                expect(ctl, "stopped", wait, |m| match m {
                    Message::Stopped { index: r, .. } if *r == index => Some(()),
                    _ => None,
                })?;
                continue;
            }
        };
        let cpu = Some(CpuSnapshot::take().since(&before));
        let group = stop_together(groups, &stop_key, expected, &me, &report, wait)?;
        let counted = Counted {
            received,
            group,
            words,
            cpu,
            validation,
        };
        ctl.send(&counted.message(index))?;
    }
}

/// Meets the other clients of the group after a point; returns every figure.
fn stop_together(
    groups: &Rendezvous,
    key: &str,
    expected: usize,
    me: &str,
    report: &DriverReport,
    wait: std::time::Duration,
) -> Result<Vec<ClientFigure>> {
    let mine = report.figure(me);
    if expected <= 1 {
        return Ok(vec![mine]);
    }
    let item = serde_json::to_string(&mine).expect("figures serialise");
    let all = groups.meet(key, expected, item, wait)?;
    let mut figs: Vec<ClientFigure> = all
        .iter()
        .filter_map(|s| serde_json::from_str(s).ok())
        .collect();
    figs.sort_by(|a, b| a.client.cmp(&b.client));
    Ok(figs)
}
