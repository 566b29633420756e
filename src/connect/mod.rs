//! The out-of-band control channel: a versioned handshake that carries the
//! test parameters and the QP/buffer endpoints, then per-point barriers.
//! Loopback runs use an in-process channel, remote runs length-prefixed JSON
//! frames over TCP; both speak the same `Message`s.

mod local;
pub mod protocol;
mod tcp;
mod watch;

pub use local::{local_pair, local_pair_named, LocalChannel};
pub use protocol::{
    accept, check_version, expect, fail, hello, refuse, unexpected, Accepted, Deadlines,
};
pub use tcp::{TcpChannel, MAX_FRAME};
pub use watch::PeerWatch;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpu_use::CpuUse;
use crate::error::Result;
use crate::report::{ClientFigure, DriverReport, PeerInfo, Validation};
use crate::spec::{TestSpec, TputPoint};
use crate::verbs::Endpoint;

/// Longest a blocking control wait goes without checking for an interrupt.
pub const SLICE: std::time::Duration = std::time::Duration::from_millis(200);

/// Bumped whenever a `Message` changes shape or meaning.
pub const PROTOCOL_VERSION: u32 = 7;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client → server: what to run, and (latency) where the client's QP is.
    Hello {
        version: u32,
        tool_version: String,
        spec: TestSpec,
        endpoint: Option<Endpoint>,
        /// The client's host, device, port and active MTU.
        #[serde(default)]
        client: PeerInfo,
    },
    /// Server → client: accepted; (latency) where the server's QP and buffer are.
    Accept {
        version: u32,
        endpoint: Option<Endpoint>,
        device: String,
        /// The server's host name, so results name both sides.
        #[serde(default)]
        host: String,
        /// `--cm` tests: the port of the rdma_cm listener this session
        /// opened (the client connects to it at the control peer's address).
        #[serde(default)]
        cm_port: Option<u16>,
        /// The server's device port, its active MTU and the GID its QPs use.
        #[serde(default)]
        port: u8,
        #[serde(default)]
        active_mtu: u32,
        #[serde(default)]
        gid: String,
    },
    /// Either side: cannot run this; `reason` says which parameter and why,
    /// and `usage` whether it is the user's input to fix (the other side
    /// then exits 2, as for bad input of its own).
    Refuse {
        reason: String,
        #[serde(default)]
        usage: bool,
    },
    /// Either side: what it was running failed (a work completion's error,
    /// a timeout); `reason` is its error, sent before it closes the
    /// connection so the other side can say what went wrong over there.
    Failed { reason: String },
    /// Client → server: get ready for point `index` (size `size`).
    Prepare { index: u32, size: u32 },
    /// Server → client: buffers reset, receives posted, ready for `index`.
    Ready { index: u32 },
    /// Client → server: point `index` is over on the client's side, after
    /// `sent` WRs (warm-up included; `--validate` WRITE: the last one's
    /// payload is what the server's target must hold).
    Finish {
        index: u32,
        #[serde(default)]
        sent: u64,
    },
    /// Server → client: what the server counted during point `index`, its
    /// CPU use from `ready` to `finish`, and (`--validate`) the payloads it
    /// checked.
    Finished {
        index: u32,
        received: u64,
        #[serde(default)]
        cpu: Option<CpuUse>,
        #[serde(default)]
        validation: Option<Validation>,
    },
    /// Client → server: build your side of throughput point `index`; here are my QPs.
    TputPrepare {
        index: u32,
        point: TputPoint,
        endpoints: Vec<Endpoint>,
    },
    /// Server → client: my side of point `index` is connected; here are my QPs.
    TputReady {
        index: u32,
        endpoints: Vec<Endpoint>,
    },
    /// The passive or answering side is ready (receives posted, group assembled): start.
    Go { index: u32 },
    /// The driving side is done with point `index`; what it measured.
    Stop { index: u32, report: DriverReport },
    /// The other side's counts for point `index` (per QP), and, when several
    /// clients ran together, every client's figure.
    Stopped {
        index: u32,
        received: Vec<u64>,
        group: Vec<ClientFigure>,
        /// Atomics: the final value of each target QP's word, the witness
        /// the driver's counts are checked against.
        #[serde(default)]
        words: Vec<u64>,
        /// This side's CPU use from `go` to `stop`.
        #[serde(default)]
        cpu: Option<CpuUse>,
        /// `--validate`: what this side's targets checked of the driver's
        /// payloads (SEND, WRITE); `None` where they check nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        validation: Option<crate::report::Validation>,
    },
    /// Client → server: no more points.
    Bye,
}

impl Message {
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Accept { .. } => "accept",
            Message::Refuse { .. } => "refuse",
            Message::Failed { .. } => "failed",
            Message::Prepare { .. } => "prepare",
            Message::Ready { .. } => "ready",
            Message::Finish { .. } => "finish",
            Message::Finished { .. } => "finished",
            Message::TputPrepare { .. } => "tput_prepare",
            Message::TputReady { .. } => "tput_ready",
            Message::Go { .. } => "go",
            Message::Stop { .. } => "stop",
            Message::Stopped { .. } => "stopped",
            Message::Bye => "bye",
        }
    }
}

/// A control channel to the peer. `recv` gives up after `timeout` so a dead
/// or stalled peer is an error, never a hang.
pub trait Control {
    fn send(&mut self, msg: &Message) -> Result<()>;
    fn recv(&mut self, timeout: Duration) -> Result<Message>;
    /// A message if one has already arrived, without waiting: idle receivers
    /// call this while the peer measures, so it must not block.
    fn poll(&mut self) -> Result<Option<Message>> {
        match self.recv(Duration::from_millis(1)) {
            Ok(m) => Ok(Some(m)),
            Err(crate::error::Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
    /// Who the peer is, for error messages.
    fn peer(&self) -> String;
    /// The peer's IP address where the channel runs over IP (`--cm`
    /// connects there); `None` in loopback.
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        None
    }
    /// This side's IP address of the channel (where the peer reached it);
    /// `None` in loopback.
    fn local_ip(&self) -> Option<std::net::IpAddr> {
        None
    }
    /// Adds the peer's host name, once its handshake said it, to the name
    /// errors give it.
    fn name_peer(&mut self, _host: &str) {}
    /// The socket a [`PeerWatch`] polls for the connection's end while the
    /// measured loops run; `None` where no connection can vanish (loopback).
    fn hangup_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}
