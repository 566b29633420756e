//! The target side of inbound and outbound points: one QP per issuer QP,
//! passive for READ/WRITE/atomics (the NIC serves them; this CPU waits for
//! the driver's Stop), or a sink that consumes SENDs and counts them.

use crate::connect::{expect, unexpected, Control, Deadlines, Message};
use crate::error::Result;
use crate::report::DriverReport;
use crate::spec::{TputPoint, TputSpec, VerbKind};
use crate::verbs::{Access, Endpoint, RecvList};

use super::super::footprint::Buffers;
use super::super::ops::{test_fault, Fault};
use super::super::port::Port;
use super::super::qpset::{slot_bytes, QpSet, QpShape};
use super::super::slots::slot_stride;
use super::super::wait::IdleWatch;
use super::completions::{ArrivalBuf, RecvRing, WrId, RECV_BATCH};
use super::issuer::PAYLOAD;

/// What a target's set registers (what `TargetSet::new` builds it from):
/// one region per issuer QP.
pub fn buffers(spec: &TputSpec, p: &TputPoint) -> Buffers {
    let slot = slot_bytes(p.size);
    Buffers {
        region: if spec.verb == VerbKind::Send {
            slot * RECV_BATCH as usize
        } else {
            // --region: the issuer QP's WRs target slots of this many bytes.
            spec.memory.region.map_or(slot, |r| r as usize).max(slot)
        },
        qps: p.total_qps(),
        memory: spec.memory,
    }
}

pub struct TargetSet {
    pub set: QpSet,
    /// Atomics: each QP's region starts with the word its issuer QP works on.
    atomic: bool,
    /// SEND targets: the receives kept posted (built once connected).
    sink: Option<RecvRing>,
    /// `--srq`: the receives its shared receive queue was made for.
    srq_depth: u32,
}

impl TargetSet {
    pub fn new(port: &Port, spec: &TputSpec, p: &TputPoint, access: Access) -> Result<Self> {
        let sends = spec.verb == VerbKind::Send;
        let srq_depth = p.sink_srq_depth(port.attr.max_srq_wr) as u32;
        let b = buffers(spec, p);
        let shape = QpShape {
            transport: p.transport,
            count: b.qps,
            sq_depth: 1,
            // With an SRQ this sizes the receive CQ only (n QPs x rq_depth):
            // room for every receive the SRQ holds.
            rq_depth: match (sends, spec.srq) {
                (false, _) => 1,
                (true, false) => p.sink_rq_depth(),
                (true, true) => p.sink_rq_depth().max(srq_depth.div_ceil(p.total_qps())),
            },
            inline: 0,
            sge: 1,
            region: b.region,
            access,
            path: spec.path,
            // A target posts no sends; the issuer sleeps on events.
            events: false,
            ex_ops: None,
            memory: b.memory,
        };
        // --srq: one shared receive queue for this side's sink QPs (validated
        // against max_srq_wr before any device object exists).
        let set = if sends && spec.srq {
            QpSet::with_srq(port, &shape, srq_depth)?
        } else {
            QpSet::new(port, &shape)?
        };
        Ok(TargetSet {
            set,
            atomic: spec.verb == VerbKind::Atomic,
            sink: sends.then(|| RecvRing::new(Vec::new())),
            srq_depth,
        })
    }

    /// Connects QP i to `remotes[i]`; a sink posts its receives now, before
    /// it tells the driver to start.
    pub fn connect(&mut self, remotes: &[Endpoint], p: &TputPoint) -> Result<()> {
        self.set.connect(remotes)?;
        if self.atomic && test_fault(Fault::AtomicWord) {
            // Test hook: every word starts at 1<<63 (its top byte 0x80), which
            // no fetch-add count or CAS chain from 0 reaches.
            for q in 0..self.set.qps.len() {
                self.set.mr_of(q).fill(self.set.offset(q) + 7, 1, 0x80);
            }
        }
        if self.sink.is_some() {
            let slot = slot_bytes(p.size) as u32;
            let set = &mut self.set;
            let batch = RECV_BATCH as usize;
            let mut ring = match &set.srq {
                // Every receive lands in QP 0's region: a sink never reads them.
                Some(srq) => {
                    let list = RecvList::new(set.mr_of(0), 0, slot, batch, WrId::pack(0, 0));
                    RecvRing::shared(srq.clone(), list)
                }
                None => RecvRing::new(
                    (0..set.qps.len())
                        .map(|q| {
                            let first = WrId::pack(q, 0);
                            RecvList::new(set.mr_of(q), set.offset(q), slot, batch, first)
                        })
                        .collect(),
                ),
            };
            let depth = match &set.srq {
                Some(_) => self.srq_depth,
                None => p.sink_rq_depth(),
            };
            ring.fill(&mut set.qps, depth / RECV_BATCH)?;
            self.sink = Some(ring);
        }
        Ok(())
    }

    /// Whether this target consumes SENDs (else the NIC serves it alone).
    pub fn is_sink(&self) -> bool {
        self.sink.is_some()
    }

    /// Scratch space for `drain`: with an SRQ, arrivals are attributed to
    /// their QP by qp_num.
    pub fn arrivals(&self) -> ArrivalBuf {
        match &self.set.srq {
            Some(_) => ArrivalBuf::by_qp_num(&self.set.qp_nums()),
            None => ArrivalBuf::new(),
        }
    }

    /// A SEND sink's one pass: polls the receive CQ once, counts each
    /// arrival on its QP in `received` and reposts consumed receives.
    #[inline(always)]
    pub fn drain(&mut self, received: &mut [u64], buf: &mut ArrivalBuf) -> Result<usize> {
        let (Some(ring), set) = (&mut self.sink, &mut self.set) else {
            return Ok(0);
        };
        let k = buf.poll(&set.recv_cq)?;
        for a in &buf.got[..k] {
            received[a.qp] += 1;
            ring.consumed(a.qp, &mut set.qps[a.qp])?;
        }
        Ok(k)
    }
}

impl TargetSet {
    /// Atomics: the final value of each QP's word, read once the driver's
    /// last WR has completed (empty for other verbs).
    pub fn atomic_words(&self) -> Vec<u64> {
        if !self.atomic {
            return Vec::new();
        }
        (0..self.set.qps.len())
            .map(|q| self.set.mr_of(q).read_u64(self.set.offset(q)))
            .collect()
    }

    /// Per QP, how many slots of its region start with the issuer's WRITE
    /// payload byte: a witness of `--offsets` read from memory, independent
    /// of the issuer's address sequence (test hook, after the point).
    pub fn written_slots(&self, size: u32) -> Vec<usize> {
        let stride = slot_stride(size) as usize;
        (0..self.set.qps.len())
            .map(|q| {
                let (mr, at) = (self.set.mr_of(q), self.set.offset(q));
                (0..self.set.region / stride)
                    .filter(|k| mr.read_u8(at + k * stride) == PAYLOAD)
                    .count()
            })
            .collect()
    }
}

impl TargetSet {
    /// `RDMA_BENCH_TEST_SLOTS=1` (WRITE only): prints which of its slots
    /// the peer's WRITEs reached, once they all have.
    pub fn hook_written_slots(&self, spec: &TputSpec, index: u32) {
        if spec.verb == VerbKind::Write && test_hook_slots() {
            let size = spec.points.get(index as usize).map_or(1, |p| p.size);
            eprintln!(
                "test hook: WRITE slots written per target QP: {:?} of {}",
                self.written_slots(size),
                self.set.region / slot_stride(size) as usize
            );
        }
    }
}

/// Target side of a point until the driver says stop. `go` tells the driver
/// (or, in a group, the other clients' server threads) this side is ready.
/// Returns per-QP receive counts (empty when passive) and the driver's report.
pub fn run_target(
    s: &mut TargetSet,
    spec: &TputSpec,
    index: u32,
    ctl: &mut dyn Control,
    go: &mut dyn FnMut(&mut dyn Control) -> Result<()>,
) -> Result<(Vec<u64>, DriverReport)> {
    if !s.is_sink() {
        go(ctl)?;
        let d = Deadlines::new(
            spec.timeout_s,
            spec.live.point_s(spec.warmup_s + spec.duration_s),
        );
        let report = expect(ctl, "stop", d.passive(), |m| match m {
            Message::Stop { index: i, report } if *i == index => Some(std::mem::take(report)),
            _ => None,
        })?;
        s.hook_written_slots(spec, index);
        return Ok((Vec::new(), report));
    }
    let mut received = vec![0u64; s.set.qps.len()];
    let mut buf = s.arrivals();
    go(ctl)?;
    let mut drain = |received: &mut [u64]| s.drain(received, &mut buf);
    let d = Deadlines::new(
        spec.timeout_s,
        spec.live.point_s(spec.warmup_s + spec.duration_s),
    );
    let mut watch = IdleWatch::new(d.passive(), "SENDs or the driver's stop (driver gone?)");
    loop {
        if drain(&mut received)? > 0 {
            watch.busy();
            continue;
        }
        if watch.idle()? {
            if let Some(report) = poll_stop(ctl, index)? {
                // Count what is still queued: the driver has seen it all complete.
                while drain(&mut received)? > 0 {}
                return Ok((received, report));
            }
        }
    }
}

/// `RDMA_BENCH_TEST_SLOTS=1`: the target prints which of its slots WRITEs
/// reached after each point (the device tests' witness of `--offsets`).
fn test_hook_slots() -> bool {
    std::env::var_os("RDMA_BENCH_TEST_SLOTS").is_some()
}

/// Asks the control channel, without really waiting, whether the driver has
/// said Stop. Called only when idle, so it costs the measured side nothing.
pub fn poll_stop(ctl: &mut dyn Control, index: u32) -> Result<Option<DriverReport>> {
    match ctl.poll()? {
        Some(Message::Stop { index: i, report }) if i == index => Ok(Some(report)),
        Some(other) => Err(unexpected(ctl, "stop", &other)),
        None => Ok(None),
    }
}
