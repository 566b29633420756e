//! The target side of inbound and outbound points: one QP per issuer QP,
//! passive for READ/WRITE/atomics (the NIC serves them; this CPU waits for
//! the driver's Stop), or a sink that consumes SENDs and counts them.

use crate::connect::{expect, unexpected, Control, Deadlines, Message};
use crate::error::Result;
use crate::report::DriverReport;
use crate::spec::{TputPoint, TputSpec, VerbKind};
use crate::verbs::{Access, Endpoint, RecvList};

use super::super::ops::{test_fault, Fault};
use super::super::port::Port;
use super::super::qpset::{slot_bytes, QpSet, QpShape};
use super::super::wait::IdleWatch;
use super::completions::{ArrivalBuf, RecvRing, WrId, RECV_BATCH};

pub struct TargetSet {
    pub set: QpSet,
    /// Atomics: each QP's region starts with the word its issuer QP works on.
    atomic: bool,
    /// SEND targets: the receives kept posted (built once connected).
    sink: Option<RecvRing>,
}

impl TargetSet {
    pub fn new(port: &Port, spec: &TputSpec, p: &TputPoint, access: Access) -> Result<Self> {
        let sends = spec.verb == VerbKind::Send;
        let slot = slot_bytes(p.size);
        let set = QpSet::new(
            port,
            &QpShape {
                transport: p.transport,
                count: p.total_qps(),
                sq_depth: 1,
                rq_depth: if sends { sink_rq_depth(p) } else { 1 },
                inline: 0,
                sge: 1,
                region: if sends {
                    slot * RECV_BATCH as usize
                } else {
                    slot
                },
                access,
                path: spec.path,
                // A target posts no sends; the issuer sleeps on events.
                events: false,
                ex_ops: None,
            },
        )?;
        Ok(TargetSet {
            set,
            atomic: spec.verb == VerbKind::Atomic,
            sink: sends.then(|| RecvRing::new(Vec::new())),
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
                self.set.mr.fill(self.set.offset(q) + 7, 1, 0x80);
            }
        }
        if self.sink.is_some() {
            let slot = slot_bytes(p.size) as u32;
            let set = &mut self.set;
            let lists = (0..set.qps.len())
                .map(|q| {
                    let first = WrId::pack(q, 0);
                    RecvList::new(&set.mr, set.offset(q), slot, RECV_BATCH as usize, first)
                })
                .collect();
            let mut ring = RecvRing::new(lists);
            ring.fill(&mut set.qps, sink_rq_depth(p) / RECV_BATCH)?;
            self.sink = Some(ring);
        }
        Ok(())
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
            .map(|q| self.set.mr.read_u64(self.set.offset(q)))
            .collect()
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
    let Some(ring) = &mut s.sink else {
        go(ctl)?;
        let d = Deadlines::new(spec.timeout_s, spec.warmup_s + spec.duration_s);
        let report = expect(ctl, "stop", d.passive(), |m| match m {
            Message::Stop { index: i, report } if *i == index => Some(std::mem::take(report)),
            _ => None,
        })?;
        return Ok((Vec::new(), report));
    };
    let set = &mut s.set;
    let mut received = vec![0u64; set.qps.len()];
    let mut buf = ArrivalBuf::new();
    go(ctl)?;
    let mut drain = |received: &mut [u64]| -> Result<usize> {
        let k = buf.poll(&set.recv_cq)?;
        for a in &buf.got[..k] {
            received[a.qp] += 1;
            ring.consumed(a.qp, &mut set.qps[a.qp])?;
        }
        Ok(k)
    };
    let d = Deadlines::new(spec.timeout_s, spec.warmup_s + spec.duration_s);
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

/// Asks the control channel, without really waiting, whether the driver has
/// said Stop. Called only when idle, so it costs the measured side nothing.
pub fn poll_stop(ctl: &mut dyn Control, index: u32) -> Result<Option<DriverReport>> {
    match ctl.poll()? {
        Some(Message::Stop { index: i, report }) if i == index => Ok(Some(report)),
        Some(other) => Err(unexpected(ctl, "stop", &other)),
        None => Ok(None),
    }
}

/// Receive-queue depth of a SEND sink QP: room for two full windows plus a
/// batch being reposted, and at least perftest's 512, so a sender is not
/// slowed by RNR NAKs while the sink thread catches up; whole batches.
fn sink_rq_depth(p: &TputPoint) -> u32 {
    (2 * p.window + RECV_BATCH).max(512).div_ceil(RECV_BATCH) * RECV_BATCH
}
