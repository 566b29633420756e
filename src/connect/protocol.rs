//! The conversation on top of `Message`s: the handshake, one way to wait for
//! a particular reply (a `Refuse` or anything unexpected becomes an error
//! naming the peer), one way to refuse, and every control-channel deadline.

use std::time::Duration;

use super::{Control, Message, PROTOCOL_VERSION};
use crate::error::{Error, Result};
use crate::report::PeerInfo;
use crate::spec::TestSpec;
use crate::verbs::Endpoint;

/// How long each kind of control wait may last. All of them derive from the
/// run's `--timeout` and the length of one point, so a dead peer is noticed
/// and a slow but live one is not mistaken for dead.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    timeout_s: f64,
    point_s: f64,
}

impl Deadlines {
    /// `point_s`: how long one point is asked to measure (warm-up included).
    pub fn new(timeout_s: f64, point_s: f64) -> Self {
        Deadlines { timeout_s, point_s }
    }

    /// A reply the peer sends at once (handshake, ready).
    pub fn reply(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s)
    }

    /// A reply the peer sends after building or tearing down QPs (thousands
    /// of them take a while on a slow host).
    pub fn setup(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s + 30.0)
    }

    /// While the other side measures a point and reports.
    pub fn point(&self) -> Duration {
        Duration::from_secs_f64(self.point_s + self.timeout_s * 2.0 + 60.0)
    }

    /// A passive side waiting out the driver's whole point: filling many
    /// queues can outlast the window, so this is generous but not endless.
    pub fn passive(&self) -> Duration {
        Duration::from_secs_f64(self.point_s + self.timeout_s * 4.0 + 3600.0)
    }

    /// Between points, where the client writes files and prints.
    pub fn between_points(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s * 4.0 + 600.0)
    }
}

/// Waits for a message `pick` accepts (it may take fields out of it); a
/// `Refuse` becomes the peer's reason, anything else a protocol error.
pub fn expect<T>(
    ctl: &mut dyn Control,
    wanted: &str,
    timeout: Duration,
    pick: impl FnOnce(&mut Message) -> Option<T>,
) -> Result<T> {
    let mut msg = ctl.recv(timeout)?;
    if let Some(v) = pick(&mut msg) {
        return Ok(v);
    }
    Err(peer_error(ctl, &msg).unwrap_or_else(|| unexpected(ctl, wanted, &msg)))
}

/// A `Refuse` or `Failed` from the peer as the error it carries: the
/// user's to fix (exit 2) where the peer said so.
pub fn peer_error(ctl: &dyn Control, msg: &Message) -> Option<Error> {
    match msg {
        Message::Refuse {
            reason,
            usage: true,
        } => Some(Error::usage(format!(
            "peer {}: refused: {reason}",
            ctl.peer()
        ))),
        Message::Refuse { reason, .. } => Some(Error::Peer {
            peer: ctl.peer(),
            what: format!("refused: {reason}"),
        }),
        Message::Failed { reason } => Some(Error::Peer {
            peer: ctl.peer(),
            what: format!("failed: {reason}"),
        }),
        _ => None,
    }
}

/// The error for a message that arrived where `wanted` was due.
pub fn unexpected(ctl: &dyn Control, wanted: &str, got: &Message) -> Error {
    Error::Peer {
        peer: ctl.peer(),
        what: format!("protocol error: expected '{wanted}', got '{}'", got.name()),
    }
}

/// Tells the peer why this side cannot go on, and returns the reason as the
/// local error. The send is best effort: the peer may already be gone.
pub fn refuse(ctl: &mut dyn Control, e: Error) -> Error {
    let _ = ctl.send(&Message::Refuse {
        reason: e.to_string(),
        usage: e.exit_code() == 2,
    });
    e
}

/// Tells the peer that what this side was running failed, and why (best
/// effort: the peer may be the reason). A failure of the connection itself
/// is not worth sending over it.
pub fn fail(ctl: &mut dyn Control, e: &Error) {
    if !matches!(e, Error::Peer { .. }) {
        let _ = ctl.send(&Message::Failed {
            reason: e.to_string(),
        });
    }
}

/// Checks that the peer speaks our protocol version.
pub fn check_version(peer: &str, theirs: u32) -> Result<()> {
    if theirs != PROTOCOL_VERSION {
        return Err(Error::usage(format!(
            "protocol version mismatch: {peer} speaks v{theirs}, this rdma-bench speaks v{PROTOCOL_VERSION} (run the same rdma-bench version on both sides)"
        )));
    }
    Ok(())
}

/// What the server said when it accepted a test.
pub struct Accepted {
    /// The server's QP and buffer (latency tests).
    pub endpoint: Option<Endpoint>,
    pub peer: PeerInfo,
    /// `--cm`: the port of the server's rdma_cm listener for this session.
    pub cm_port: Option<u16>,
}

/// Client side of the handshake: sends the `Hello` (`me`: this side's
/// host, device and port) and waits for `Accept`.
pub fn hello(
    ctl: &mut dyn Control,
    spec: TestSpec,
    endpoint: Option<Endpoint>,
    me: &PeerInfo,
    timeout: Duration,
) -> Result<Accepted> {
    ctl.send(&Message::Hello {
        version: PROTOCOL_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        spec,
        endpoint,
        client: me.clone(),
    })?;
    let (version, accepted) = expect(ctl, "accept", timeout, |m| match m {
        Message::Accept {
            version,
            endpoint,
            device,
            host,
            cm_port,
            port,
            active_mtu,
            gid,
        } => Some((
            *version,
            Accepted {
                endpoint: *endpoint,
                cm_port: *cm_port,
                peer: PeerInfo {
                    host: std::mem::take(host),
                    device: std::mem::take(device),
                    port: *port,
                    active_mtu: *active_mtu,
                    gid: std::mem::take(gid),
                },
            },
        )),
        _ => None,
    })?;
    check_version(&ctl.peer(), version)?;
    ctl.name_peer(&accepted.peer.host);
    Ok(accepted)
}

/// Server side of the handshake: accepts the test (`me`: this side's host,
/// device and port; `cm_port`: the session's rdma_cm listener, for `--cm`
/// tests).
pub fn accept(
    ctl: &mut dyn Control,
    endpoint: Option<Endpoint>,
    me: &PeerInfo,
    cm_port: Option<u16>,
) -> Result<()> {
    ctl.send(&Message::Accept {
        version: PROTOCOL_VERSION,
        endpoint,
        device: me.device.clone(),
        host: me.host.clone(),
        cm_port,
        port: me.port,
        active_mtu: me.active_mtu,
        gid: me.gid.clone(),
    })
}

/// This host's name, as the kernel has it.
pub fn local_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
