//! A whole latency run over one connection: the handshake, then one point per
//! size with a barrier before and after each, for the client and the server.

use std::time::Duration;

use crate::clock::Clock;
use crate::connect::{check_version, Control, Message, PROTOCOL_VERSION};
use crate::error::{Error, Result};
use crate::spec::{LatencySpec, TestSpec, VerbKind};
use crate::stats::LatencyRecorder;
use crate::verbs::{probe_max_inline, CompletionQueue};

use super::latency::{self, client_point, needs_receives, server_point, ClientPoint};
use super::side::{Port, Role, Side};

/// One measured point, as the client hands it to the caller (to print and save).
pub struct PointOutcome<'a> {
    pub index: u32,
    pub size: u32,
    pub client: ClientPoint,
    /// Messages the server counted (SEND and ping-pong); `None` where the server is passive.
    pub server_received: Option<u64>,
    pub samples: &'a LatencyRecorder,
}

/// Checks `spec` against the device behind `port`; returns the inline room
/// a QP must be created with.
pub fn check_against_device(spec: &LatencySpec, port: &Port) -> Result<u32> {
    let attr = port.ctx.query_device()?;
    let wants_inline = spec.inline || spec.verb == VerbKind::Echo;
    let max_inline = if wants_inline {
        let cq = CompletionQueue::new(&port.ctx, 4)?;
        probe_max_inline(&port.pd, &cq, spec.transport)
    } else {
        0
    };
    spec.validate_device(
        port.ctx.name(),
        max_inline,
        port.mtu,
        attr.atomic_cap != crate::verbs::AtomicCap::None,
    )?;
    Ok(if spec.inline {
        spec.max_size()
    } else if spec.verb == VerbKind::Echo {
        spec.max_size().min(max_inline)
    } else {
        0
    })
}

fn handshake_timeout(spec: &LatencySpec) -> Duration {
    Duration::from_secs_f64(spec.timeout_s)
}

/// Runs every point of `spec` as the client. `on_point` sees each point as
/// soon as it is measured (so it can be written out before the next starts).
pub fn run_client(
    spec: &LatencySpec,
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    mut on_point: impl FnMut(PointOutcome<'_>) -> Result<()>,
) -> Result<()> {
    let inline_room = check_against_device(spec, port)?;
    let mut side = Side::new(port, spec, Role::Client, inline_room)?;
    let remote = hello(
        ctl,
        TestSpec::Latency(spec.clone()),
        Some(side.endpoint()),
        handshake_timeout(spec),
    )?
    .ok_or_else(|| Error::Peer {
        peer: ctl.peer(),
        what: "accepted a latency test without an endpoint".into(),
    })?;
    side.connect(&remote)?;
    let mut recvs = latency::recv_list(&side);
    if needs_receives(spec, false) {
        latency::post_receives(&mut side, &mut recvs)?;
    }
    let mut rec = LatencyRecorder::new();
    let server_counts = latency::server_part(spec) != latency::ServerPart::Passive;
    for (i, &size) in spec.sizes.iter().enumerate() {
        let index = i as u32;
        side.mr.fill(side.recv_offset(), side.slot, 0);
        side.mr.fill(side.send_offset(), side.slot, 0);
        ctl.send(&Message::Prepare { index, size })?;
        match ctl.recv(handshake_timeout(spec))? {
            Message::Ready { index: r } if r == index => {}
            Message::Refuse { reason } => {
                return Err(Error::Peer {
                    peer: ctl.peer(),
                    what: reason,
                })
            }
            other => return Err(latency::unexpected(ctl, "ready", &other)),
        }
        let client = client_point(&mut side, spec, size, &remote, clock, &mut rec, &mut recvs)?;
        ctl.send(&Message::Finish { index })?;
        let received = match ctl.recv(handshake_timeout(spec) + Duration::from_secs(5))? {
            Message::Finished { index: r, received } if r == index => received,
            other => return Err(latency::unexpected(ctl, "finished", &other)),
        };
        on_point(PointOutcome {
            index,
            size,
            client,
            server_received: server_counts.then_some(received),
            samples: &rec,
        })?;
    }
    ctl.send(&Message::Bye)?;
    Ok(())
}

/// Sends the `Hello` and waits for `Accept`; returns the server's endpoint (latency).
pub fn hello(
    ctl: &mut dyn Control,
    spec: TestSpec,
    endpoint: Option<crate::verbs::Endpoint>,
    timeout: Duration,
) -> Result<Option<crate::verbs::Endpoint>> {
    ctl.send(&Message::Hello {
        version: PROTOCOL_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        spec,
        endpoint,
    })?;
    match ctl.recv(timeout)? {
        Message::Accept {
            version, endpoint, ..
        } => {
            check_version(&ctl.peer(), version).map_err(Error::usage)?;
            Ok(endpoint)
        }
        Message::Refuse { reason } => Err(Error::Peer {
            peer: ctl.peer(),
            what: format!("refused the test: {reason}"),
        }),
        other => Err(latency::unexpected(ctl, "accept", &other)),
    }
}

/// Sends a refusal for `e` to the client and returns `e`.
pub fn refuse(ctl: &mut dyn Control, e: Error) -> Error {
    let _ = ctl.send(&Message::Refuse {
        reason: e.to_string(),
    });
    e
}

/// Serves one client whose `Hello` has been read: checks the spec, connects,
/// and answers points until `Bye`. Refusals go back to the client as well.
pub fn serve_client(
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    hello: Message,
    groups: &super::group::Rendezvous,
) -> Result<()> {
    let Message::Hello {
        version,
        spec,
        endpoint,
        ..
    } = hello
    else {
        return Err(latency::unexpected(ctl, "hello", &hello));
    };
    if let Err(e) = check_version(&ctl.peer(), version) {
        return Err(refuse(ctl, Error::usage(e)));
    }
    let spec = match spec {
        TestSpec::Tput(t) => return super::tput_session::serve_tput(port, ctl, clock, t, groups),
        TestSpec::Latency(l) => l,
    };
    let Some(endpoint) = endpoint else {
        return Err(refuse(
            ctl,
            Error::usage("a latency hello needs an endpoint"),
        ));
    };
    let inline_room = match spec
        .validate()
        .and_then(|_| check_against_device(&spec, port))
    {
        Ok(room) => room,
        Err(e) => return Err(refuse(ctl, e)),
    };
    let mut side = Side::new(port, &spec, Role::Server, inline_room)?;
    side.connect(&endpoint)?;
    let mut recvs = latency::recv_list(&side);
    if needs_receives(&spec, true) {
        latency::post_receives(&mut side, &mut recvs)?;
    }
    ctl.send(&Message::Accept {
        version: PROTOCOL_VERSION,
        endpoint: Some(side.endpoint()),
        device: port.ctx.name().to_string(),
    })?;
    loop {
        // Between points the client may think (write files, print): allow long gaps.
        match ctl.recv(Duration::from_secs_f64(spec.timeout_s * 4.0 + 600.0))? {
            Message::Prepare { index, size } => {
                if !spec.sizes.contains(&size) {
                    let reason = format!("size {size} was not in the agreed sizes");
                    ctl.send(&Message::Refuse {
                        reason: reason.clone(),
                    })?;
                    return Err(Error::Peer {
                        peer: ctl.peer(),
                        what: reason,
                    });
                }
                side.mr.fill(side.recv_offset(), side.slot, 0);
                side.mr.fill(side.send_offset(), side.slot, 0);
                ctl.send(&Message::Ready { index })?;
                let received = server_point(
                    &mut side, &spec, size, index, &endpoint, clock, ctl, &mut recvs,
                )?;
                ctl.send(&Message::Finished { index, received })?;
            }
            Message::Bye => return Ok(()),
            other => return Err(latency::unexpected(ctl, "prepare or bye", &other)),
        }
    }
}
