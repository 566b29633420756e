//! A throughput run over one control connection: the handshake, then for each
//! point both sides build their QPs, exchange endpoints, start together, and
//! the driving side reports what it measured while the other reports what it
//! received.

use std::time::Duration;

use crate::clock::Clock;
use crate::connect::{Control, Message, PROTOCOL_VERSION};
use crate::error::{Error, Result};
use crate::spec::{DeviceLimits, TestSpec, TputPoint, TputSpec, VerbKind};
use crate::verbs::{probe_max_inline, AtomicCap, CompletionQueue};

use super::group::Rendezvous;
use super::latency::unexpected;
use super::session::{hello, refuse};
use super::side::Port;
use super::tput::{
    build_side, run_echo_client, run_echo_server, run_issuer, run_target, ClientFigure,
    DriverReport, PointSide,
};

/// One measured throughput point, as the client hands it to the caller.
pub struct TputOutcome {
    pub index: u32,
    pub point: TputPoint,
    pub report: DriverReport,
    /// Per-QP counts of the receiving side (SEND targets, echo server); empty otherwise.
    pub received: Vec<u64>,
    /// Every client's figure when several ran together (`--group`).
    pub group: Vec<ClientFigure>,
}

/// Device limits for validation; probes the inline limit only when needed.
pub fn device_limits(spec: &TputSpec, port: &Port) -> Result<DeviceLimits> {
    let attr = port.ctx.query_device()?;
    let wants_inline = spec.inline || spec.verb == VerbKind::Echo;
    let max_inline = if wants_inline {
        let cq = CompletionQueue::new(&port.ctx, 4)?;
        let transport = spec
            .points
            .first()
            .map(|p| p.transport)
            .unwrap_or(crate::verbs::Transport::Rc);
        probe_max_inline(&port.pd, &cq, transport)
    } else {
        0
    };
    Ok(DeviceLimits {
        name: port.ctx.name().to_string(),
        max_inline,
        mtu: port.mtu,
        max_qp_wr: attr.max_qp_wr,
        max_qp: attr.max_qp,
        atomics: attr.atomic_cap != AtomicCap::None,
    })
}

fn control_timeout(spec: &TputSpec) -> Duration {
    Duration::from_secs_f64(spec.timeout_s)
}

/// Longest a side may wait while the other measures a point.
fn point_timeout(spec: &TputSpec) -> Duration {
    Duration::from_secs_f64(spec.warmup_s + spec.duration_s + spec.timeout_s * 2.0 + 60.0)
}

fn expect_go(ctl: &mut dyn Control, index: u32, timeout: Duration) -> Result<()> {
    match ctl.recv(timeout)? {
        Message::Go { index: i } if i == index => Ok(()),
        Message::Refuse { reason } => Err(Error::Peer {
            peer: ctl.peer(),
            what: reason,
        }),
        other => Err(unexpected(ctl, "go", &other)),
    }
}

/// Runs every point of `spec` as the client.
pub fn run_tput_client(
    spec: &TputSpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    mut on_point: impl FnMut(TputOutcome) -> Result<()>,
) -> Result<()> {
    let limits = device_limits(spec, port)?;
    spec.validate_device(&limits)?;
    hello(
        ctl,
        TestSpec::Tput(spec.clone()),
        None,
        control_timeout(spec),
    )?;
    for (i, p) in spec.points.iter().enumerate() {
        let index = i as u32;
        let mut side = build_side(port, spec, p, true, limits.max_inline)?;
        ctl.send(&Message::TputPrepare {
            index,
            point: *p,
            endpoints: side.endpoints(),
        })?;
        let remotes = match ctl.recv(control_timeout(spec) + Duration::from_secs(30))? {
            Message::TputReady {
                index: r,
                endpoints,
            } if r == index => endpoints,
            Message::Refuse { reason } => {
                return Err(Error::Peer {
                    peer: ctl.peer(),
                    what: reason,
                })
            }
            other => return Err(unexpected(ctl, "tput_ready", &other)),
        };
        side.connect(&remotes)?;
        let (report, received, group) = match &mut side {
            PointSide::Issuer(sets) => {
                expect_go(ctl, index, point_timeout(spec))?;
                let report = run_issuer(sets, &remotes, spec, p, clock)?;
                finish_as_driver(ctl, index, report, spec)?
            }
            PointSide::EchoClient(sets) => {
                expect_go(ctl, index, point_timeout(spec))?;
                let report = run_echo_client(sets, spec, p, clock)?;
                finish_as_driver(ctl, index, report, spec)?
            }
            PointSide::Target(set) => {
                let mut go = |c: &mut dyn Control| c.send(&Message::Go { index });
                let (received, report) = run_target(set, spec, p, index, ctl, &mut go)?;
                ctl.send(&Message::Stopped {
                    index,
                    received: received.clone(),
                    group: Vec::new(),
                })?;
                (report, received, Vec::new())
            }
            PointSide::EchoServer(_) => unreachable!("the client never answers echo"),
        };
        drop(side);
        on_point(TputOutcome {
            index,
            point: *p,
            report,
            received,
            group,
        })?;
    }
    ctl.send(&Message::Bye)?;
    Ok(())
}

type Finished = (DriverReport, Vec<u64>, Vec<ClientFigure>);

fn finish_as_driver(
    ctl: &mut dyn Control,
    index: u32,
    report: DriverReport,
    spec: &TputSpec,
) -> Result<Finished> {
    ctl.send(&Message::Stop {
        index,
        report: report.clone(),
    })?;
    match ctl.recv(point_timeout(spec))? {
        Message::Stopped {
            index: r,
            received,
            group,
        } if r == index => Ok((report, received, group)),
        other => Err(unexpected(ctl, "stopped", &other)),
    }
}

/// Serves a throughput client until `Bye`.
pub fn serve_tput(
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    spec: TputSpec,
    groups: &Rendezvous,
) -> Result<()> {
    let limits = match spec
        .validate()
        .and_then(|_| device_limits(&spec, port))
        .and_then(|l| spec.validate_device(&l).map(|_| l))
    {
        Ok(l) => l,
        Err(e) => return Err(refuse(ctl, e)),
    };
    ctl.send(&Message::Accept {
        version: PROTOCOL_VERSION,
        endpoint: None,
        device: port.ctx.name().to_string(),
    })?;
    // Clients of one group run the same spec: its text names their meeting rooms.
    let spec_key = serde_json::to_string(&spec).expect("specs serialise");
    let me = ctl.peer();
    let expected = spec.group as usize;
    loop {
        let msg = ctl.recv(Duration::from_secs_f64(spec.timeout_s * 4.0 + 600.0))?;
        let (index, p, client_eps) = match msg {
            Message::TputPrepare {
                index,
                point,
                endpoints,
            } => (index, point, endpoints),
            Message::Bye => return Ok(()),
            other => return Err(unexpected(ctl, "tput_prepare or bye", &other)),
        };
        if !spec.points.contains(&p) {
            return Err(refuse(
                ctl,
                Error::usage(format!("point {index} was not in the agreed test")),
            ));
        }
        let mut side = build_side(port, &spec, &p, false, limits.max_inline)?;
        side.connect(&client_eps)?;
        ctl.send(&Message::TputReady {
            index,
            endpoints: side.endpoints(),
        })?;
        let start_key = format!("{spec_key}#{index}#start");
        let stop_key = format!("{spec_key}#{index}#stop");
        let wait = point_timeout(&spec);
        let mut go = |c: &mut dyn Control| -> Result<()> {
            groups.meet(&start_key, expected, me.clone(), wait)?;
            c.send(&Message::Go { index })
        };
        match &mut side {
            PointSide::Target(set) => {
                let (received, report) = run_target(set, &spec, &p, index, ctl, &mut go)?;
                let group = stop_together(groups, &stop_key, expected, &me, &report, wait)?;
                ctl.send(&Message::Stopped {
                    index,
                    received,
                    group,
                })?;
            }
            PointSide::EchoServer(s) => {
                let (seen, report) = run_echo_server(s, &p, index, ctl, &mut go)?;
                let group = stop_together(groups, &stop_key, expected, &me, &report, wait)?;
                ctl.send(&Message::Stopped {
                    index,
                    received: seen,
                    group,
                })?;
            }
            PointSide::Issuer(sets) => {
                // Outbound: the client's target posts its receives, then says go.
                expect_go(ctl, index, wait)?;
                let report = run_issuer(sets, &client_eps, &spec, &p, clock)?;
                ctl.send(&Message::Stop { index, report })?;
                match ctl.recv(wait)? {
                    Message::Stopped { index: r, .. } if r == index => {}
                    other => return Err(unexpected(ctl, "stopped", &other)),
                }
            }
            PointSide::EchoClient(_) => unreachable!("the server never drives echo"),
        }
    }
}

/// Meets the other clients of the group after a point; returns every figure.
fn stop_together(
    groups: &Rendezvous,
    key: &str,
    expected: usize,
    me: &str,
    report: &DriverReport,
    wait: Duration,
) -> Result<Vec<ClientFigure>> {
    let mine = ClientFigure {
        client: me.to_string(),
        ops: report.ops,
        elapsed_s: report.elapsed_s,
        mops: report.mops,
    };
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
