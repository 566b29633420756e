//! Latency: one QP per side, one WR in flight, one sample per iteration.
//! `engine` holds the measured loops, `session` the handshake and the
//! per-point barriers around them.

mod engine;
mod session;
mod validate;

pub use engine::{marker, ClientPoint, WARMUP_SHARE_OF_WINDOW};
pub use session::{run_client, run_client_live, serve_latency, PointOutcome};

use crate::error::Result;
use crate::spec::{LatencyMode, LatencySpec, VerbKind};
use crate::verbs::{Endpoint, QueuePair, RecvList};

use super::footprint::{self, Buffers, Footprint};
use super::ops::{access_for, ex_send_ops, test_fault, Fault, Role};
use super::port::Port;
use super::qpset::{slot_bytes, QpSet, QpShape};

/// Send-queue depth of latency QPs; one WR in `SIGNAL_EVERY` is signaled so the
/// queue never fills with unreaped WRs.
const SQ_DEPTH: u32 = 128;
const SIGNAL_EVERY: u64 = 64;
/// Receives kept posted on a ping-pong/sink QP.
const RQ_DEPTH: u32 = 128;

/// How the server takes part in a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPart {
    /// Answers each message (write/echo/send ping-pong).
    Answer,
    /// Consumes messages that need receives (send, or write with immediate).
    Sink,
    /// Does nothing: the NIC serves READs, WRITEs and atomics on its own.
    Passive,
}

pub fn server_part(spec: &LatencySpec) -> ServerPart {
    match spec.mode {
        LatencyMode::PingPong => ServerPart::Answer,
        LatencyMode::Completion if spec.verb == VerbKind::Send || spec.imm => ServerPart::Sink,
        LatencyMode::Completion => ServerPart::Passive,
    }
}

/// Whether this side keeps receives posted.
fn needs_receives(spec: &LatencySpec, role: Role) -> bool {
    match server_part(spec) {
        ServerPart::Answer => spec.verb == VerbKind::Send,
        ServerPart::Sink => role == Role::Server,
        ServerPart::Passive => false,
    }
}

/// What one side's set registers: one QP, a slot of the largest size for
/// sending and one for receiving (`--validate`: several, see
/// `validate::recv_slots`).
pub fn buffers(spec: &LatencySpec) -> Buffers {
    let slot = slot_bytes(spec.max_size());
    Buffers {
        region: (1 + validate::recv_slots(spec, slot)) * slot,
        qps: 1,
        memory: spec.memory,
    }
}

/// What one side pins for the whole session (every size uses the one set).
pub fn footprint(spec: &LatencySpec) -> Result<Footprint> {
    footprint::session("sizes", &spec.sizes, |_| Footprint::default())
        .map(|_| Footprint::of(&[buffers(spec)]))
}

/// One side's QP and buffer before the peer is known. The buffer is laid out
/// as [send area | receive area], one slot each (`--validate`: the receive
/// area has `recv_slots`); the peer targets the receive area.
pub struct UnconnectedSide {
    set: QpSet,
    slot: usize,
    recv_slots: usize,
    role: Role,
}

impl UnconnectedSide {
    /// Creates the QP and buffer for `spec` with the access rights `role` needs.
    pub fn new(port: &Port, spec: &LatencySpec, role: Role, inline_room: u32) -> Result<Self> {
        let slot = slot_bytes(spec.max_size());
        let b = buffers(spec);
        let set = QpSet::new(
            port,
            &QpShape {
                transport: spec.transport,
                count: b.qps,
                sq_depth: SQ_DEPTH,
                rq_depth: RQ_DEPTH,
                inline: inline_room,
                sge: spec.sge,
                region: b.region,
                access: access_for(spec.verb, role),
                path: spec.path,
                events: spec.events,
                ex_ops: ex_send_ops(spec.post_api, spec.verb, spec.op, spec.imm),
                memory: b.memory,
            },
        )?;
        let recv_slots = validate::recv_slots(spec, slot);
        Ok(UnconnectedSide {
            set,
            slot,
            recv_slots,
            role,
        })
    }

    /// What the peer needs: our QP, and our receive area as the RDMA target.
    pub fn endpoint(&self) -> Endpoint {
        let e = self.set.endpoints()[0];
        Endpoint {
            addr: e.addr + self.slot as u64,
            len: (self.recv_slots * self.slot) as u64,
            ..e
        }
    }

    /// Brings the QP to RTS towards `remote` and posts the receives `spec` needs.
    pub fn connect(mut self, remote: Endpoint, spec: &LatencySpec) -> Result<Side> {
        // The QP was made before the handshake agreed on the path MTU.
        if let Some(mtu) = spec.path.path_mtu {
            self.set.run_at_mtu(mtu);
        }
        self.set.connect(&[remote])?;
        // One receive WR into the receive area, reposted after every message.
        let mut recvs = RecvList::new(&self.set.mr, self.slot, self.slot as u32, 1, 0);
        // --validate's SEND server: one receive per buffer of its ring,
        // each reposted once its payload is checked.
        let mut ring = Vec::new();
        if self.role == Role::Server && validate::recv_ring(spec) {
            for i in 0..self.recv_slots {
                let at = self.slot * (1 + i);
                let mut r = RecvList::new(&self.set.mr, at, self.slot as u32, 1, i as u64);
                self.set.qps[0].post_recv(&mut r)?;
                ring.push(r);
            }
        } else if needs_receives(spec, self.role) {
            for _ in 0..RQ_DEPTH {
                self.set.qps[0].post_recv(&mut recvs)?;
            }
        }
        Ok(Side {
            set: self.set,
            slot: self.slot,
            recv_slots: self.recv_slots,
            remote,
            recvs,
            ring,
            next_recv: 0,
        })
    }
}

/// One side of a connected latency run, reused for every size of a sweep.
pub struct Side {
    set: QpSet,
    slot: usize,
    /// Receive slots in the receive area (1 unless `--validate`).
    recv_slots: usize,
    remote: Endpoint,
    recvs: RecvList,
    /// `--validate`'s SEND server: the receive of each ring buffer, and the
    /// one the next message lands in (kept across points, as the posted
    /// receives are).
    ring: Vec<RecvList>,
    next_recv: usize,
}

impl Side {
    const SEND_AREA: usize = 0;

    fn recv_area(&self) -> usize {
        self.slot
    }

    fn qp(&self) -> &QueuePair {
        &self.set.qps[0]
    }

    /// Zeroes both areas so no marker from the previous point is seen.
    fn reset(&self) {
        self.set.mr.fill(0, (1 + self.recv_slots) * self.slot, 0);
    }

    /// `--validate` READ: the server's buffer holds the pattern of WR 0,
    /// which every READ of the point must bring back.
    fn plant_pattern(&self, spec: &LatencySpec, size: u32) {
        if spec.validate && spec.verb == VerbKind::Read {
            validate::fill(&self.set.mr, self.recv_area(), size as usize, 0);
        }
    }

    /// Test hook (`RDMA_BENCH_TEST_FAULT=atomic-word`): the atomic target
    /// word starts at 1<<63 (top byte 0x80), so every returned value must
    /// fail verification.
    fn plant_faults(&self, spec: &LatencySpec) {
        if spec.verb == VerbKind::Atomic && test_fault(Fault::AtomicWord) {
            self.set.mr.fill(self.recv_area() + 7, 1, 0x80);
        }
    }
}
