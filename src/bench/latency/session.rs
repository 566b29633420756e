//! A whole latency run over one connection: the handshake, then one point per
//! size with a barrier before and after each, for the client and the server.

use crate::affinity::{self, Side};
use crate::clock::Clock;
use crate::connect::{accept, expect, fail, hello, refuse, Control, Deadlines, Message, PeerWatch};
use crate::cpu_use::{CpuSnapshot, CpuUse};
use crate::error::{Error, Result};
use crate::report::{IntervalFigure, PeerInfo, Validation};
use crate::spec::{Connection, LatencySpec, PathEnds, TestSpec};
use crate::stats::LatencyRecorder;
use crate::verbs::Endpoint;

use super::super::cm::{self, Listener};
use super::super::footprint::MemoryBudget;
use super::super::intervals::{watch, IntervalBoard};
use super::super::ops::{inline_room, needs_inline_limit, Role};
use super::super::port::Port;
use super::engine::{client_point, server_point, ClientPoint};
use super::{server_part, ServerPart, UnconnectedSide};

/// One measured point, as the client hands it to the caller (to print and save).
pub struct PointOutcome<'a> {
    pub index: u32,
    pub size: u32,
    pub client: ClientPoint,
    /// Messages the server counted (SEND and ping-pong); `None` where the server is passive.
    pub server_received: Option<u64>,
    pub samples: &'a LatencyRecorder,
    /// The server's host and device, as its handshake said.
    pub peer: &'a PeerInfo,
    /// `--interval`: the point cut into intervals (empty without it).
    pub intervals: Vec<IntervalFigure>,
    /// The server's CPU use from ready to finish, as it reported.
    pub cpu_peer: Option<CpuUse>,
    /// The path MTU both sides' QPs ran with (RC/UC; UD's payload limit).
    pub path_mtu: u32,
    /// `--validate`: the payloads both sides checked (the server's counts
    /// absorbed into the client's).
    pub validation: Option<Validation>,
}

/// Checks `spec` against the device behind `port` and the path's ends;
/// returns the inline room a QP must be created with.
fn check_against_device(spec: &LatencySpec, port: &Port, ends: &PathEnds) -> Result<u32> {
    let max_inline = if needs_inline_limit(spec.verb, spec.inline) {
        port.max_inline(spec.transport)?
    } else {
        0
    };
    let limits = port.limits(&[])?;
    spec.validate_device(
        &limits.name,
        max_inline,
        ends,
        limits.atomics,
        limits.max_sge,
    )?;
    Ok(inline_room(
        spec.verb,
        spec.inline,
        spec.sizes.iter().copied(),
        max_inline,
    ))
}

fn deadlines(spec: &LatencySpec) -> Deadlines {
    Deadlines::new(
        spec.timeout_s,
        spec.live.point_s(spec.duration_s.unwrap_or(0.0)),
    )
}

/// Runs every point of `spec` as the client. `on_point` sees each point as
/// soon as it is measured (so it can be written out before the next starts).
pub fn run_client(
    spec: &LatencySpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    on_point: impl FnMut(PointOutcome<'_>) -> Result<()>,
) -> Result<()> {
    run_client_live(spec, port, ctl, clock, &|_, _| {}, on_point)
}

/// `run_client`, with each `--interval` handed to `on_interval` (point
/// index, interval) from a watcher thread as it ends.
pub fn run_client_live(
    spec: &LatencySpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    on_interval: &(dyn Fn(u32, &IntervalFigure) + Sync),
    on_point: impl FnMut(PointOutcome<'_>) -> Result<()>,
) -> Result<()> {
    let r = client_session(spec, port, &mut *ctl, clock, on_interval, on_point);
    // The server says why its side ended too; tell it why ours did.
    if let Err(e) = &r {
        fail(ctl, e);
    }
    r
}

fn client_session(
    spec: &LatencySpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    on_interval: &(dyn Fn(u32, &IntervalFigure) + Sync),
    mut on_point: impl FnMut(PointOutcome<'_>) -> Result<()>,
) -> Result<()> {
    let d = deadlines(spec);
    let room = check_against_device(spec, port, &port.path_ends())?;
    affinity::pin(Side::Client, 0);
    let unconnected = UnconnectedSide::new(port, spec, Role::Client, room)?;
    let me = port.describe();
    let accepted = hello(
        ctl,
        TestSpec::Latency(spec.clone()),
        Some(unconnected.endpoint()),
        &me,
        d.reply(),
    )?;
    // Both sides run at the MTU both ports carry (the server has refused
    // an --mtu or a UD size either cannot).
    let path_mtu = spec
        .path
        .negotiate_mtu(&Port::path_to(&me, &accepted.peer))?;
    let spec = &spec.with_path_mtu(path_mtu);
    let remote = accepted.endpoint.ok_or_else(|| Error::Peer {
        peer: ctl.peer(),
        what: "accepted a latency test without an endpoint".into(),
    })?;
    let cm_to = cm::target(
        spec.path.connection,
        accepted.cm_port,
        ctl.peer_ip(),
        &port.gid,
    )?;
    let mut side = unconnected.connect(remote, spec)?;
    if let Some(to) = cm_to {
        let config = *side.set.config();
        let name = port.ctx.name();
        let (tos, wait) = (spec.path.tclass, d.setup());
        let mut qps: Vec<_> = side.set.qps.iter_mut().collect();
        cm::dial(to, &mut qps, &[remote.qpn], &config, name, tos, 0, wait)?;
    }
    // -H/-U: the raw samples' buffer is allocated here, before any point.
    let mut rec = LatencyRecorder::keeping_raw(spec.keep_samples);
    let server_counts = server_part(spec) != ServerPart::Passive;
    for (i, &size) in spec.sizes.iter().enumerate() {
        let index = i as u32;
        side.reset();
        ctl.send(&Message::Prepare { index, size })?;
        expect(ctl, "ready", d.reply(), |m| match m {
            Message::Ready { index: r } if *r == index => Some(()),
            _ => None,
        })?;
        let board = IntervalBoard::new(clock, spec.live.interval_s, spec.live.forever, 1);
        let shown = |f: &IntervalFigure| on_interval(index, f);
        // The peer's host or the wire to it may go mid-point: the watch
        // ends the loop then and says why.
        let ((client, mut validation), intervals) = PeerWatch::during(ctl, |_| {
            let (client, intervals) = watch(board.as_ref(), &shown, || {
                client_point(
                    &mut side,
                    spec,
                    size,
                    clock,
                    &mut rec,
                    &port.counters,
                    board.as_ref(),
                )
            });
            client.map(|c| (c, intervals))
        })?;
        // Every WR the loop posted, warm-up and the --forever tail included.
        let sent = client.to_stop.map_or(client.measured, |t| t.ops) + client.warmup;
        ctl.send(&Message::Finish { index, sent })?;
        let (received, cpu_peer, checked) = expect(ctl, "finished", d.setup(), |m| match m {
            Message::Finished {
                index: r,
                received,
                cpu,
                validation,
            } if *r == index => Some((*received, *cpu, validation.clone())),
            _ => None,
        })?;
        if let (Some(v), Some(server)) = (validation.as_mut(), checked) {
            v.absorb(&server);
        }
        on_point(PointOutcome {
            index,
            size,
            client,
            server_received: server_counts.then_some(received),
            samples: &rec,
            peer: &accepted.peer,
            intervals,
            cpu_peer,
            path_mtu,
            validation,
        })?;
    }
    ctl.send(&Message::Bye)?;
    Ok(())
}

/// Serves one latency client whose `Hello` has been read: checks the spec,
/// connects, and answers points until `Bye`. Refusals go back to the client.
pub fn serve_latency(
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    spec: LatencySpec,
    client: Option<Endpoint>,
    client_side: &PeerInfo,
    budget: &MemoryBudget,
) -> Result<()> {
    let Some(client) = client else {
        return Err(refuse(
            ctl,
            Error::usage("a latency hello needs an endpoint"),
        ));
    };
    let me = port.describe();
    let ends = Port::path_to(&me, client_side);
    // What the session would pin is refused against --max-memory before the
    // device is asked anything.
    let checked = spec.validate().and_then(|_| {
        let need = super::footprint(&spec)?;
        budget.check(&need)?;
        let room = check_against_device(&spec, port, &ends)?;
        Ok((need, room, spec.path.negotiate_mtu(&ends)?))
    });
    let (need, room, spec) = match checked {
        Ok((need, room, mtu)) => (need, room, spec.with_path_mtu(mtu)),
        Err(e) => return Err(refuse(ctl, e)),
    };
    // Held until this function returns, after the session's set is gone.
    let _held = budget.admit(ctl, &need)?;
    affinity::pin(Side::Server, 0);
    let listener = match spec.path.connection {
        Connection::Cm => Some(
            Listener::open(cm::listen_ip(port, ctl.local_ip()), port.cm_port)
                .map_err(|e| refuse(ctl, e))?,
        ),
        Connection::Gid => None,
    };
    let unconnected = UnconnectedSide::new(port, &spec, Role::Server, room)?;
    let endpoint = unconnected.endpoint();
    let mut side = unconnected.connect(client, &spec)?;
    accept(ctl, Some(endpoint), &me, listener.as_ref().map(|l| l.port))?;
    let d = deadlines(&spec);
    if let Some(l) = &listener {
        let config = *side.set.config();
        let mut qps: Vec<_> = side.set.qps.iter_mut().collect();
        cm::answer(l, &mut qps, &config, port.ctx.name(), 0, d.setup())?;
    }
    loop {
        let size = expect(ctl, "prepare or bye", d.between_points(), |m| match m {
            Message::Prepare { index, size } => Some(Some((*index, *size))),
            Message::Bye => Some(None),
            _ => None,
        })?;
        let Some((index, size)) = size else {
            return Ok(());
        };
        if !spec.sizes.contains(&size) {
            return Err(refuse(
                ctl,
                Error::usage(format!("size {size} was not in the agreed sizes")),
            ));
        }
        side.reset();
        side.plant_faults(&spec);
        side.plant_pattern(&spec, size);
        ctl.send(&Message::Ready { index })?;
        let before = CpuSnapshot::take();
        let point = server_point(&mut side, &spec, size, index, clock, ctl)?;
        let cpu = Some(CpuSnapshot::take().since(&before));
        ctl.send(&Message::Finished {
            index,
            received: point.received,
            cpu,
            validation: point.validation,
        })?;
    }
}
