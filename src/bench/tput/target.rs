//! The target side of inbound and outbound points: one QP per issuer QP,
//! passive for READ/WRITE/atomics (the NIC serves them; this CPU waits for
//! the driver's Stop), or a sink that consumes SENDs and counts them.

use crate::connect::{expect, unexpected, Control, Deadlines, Message};
use crate::error::Result;
use crate::report::{DriverReport, Validation};
use crate::spec::{Offsets, TputPoint, TputSpec, VerbKind};
use crate::verbs::{Access, Endpoint, RecvList, Transport};

use super::super::footprint::Buffers;
use super::super::ops::{test_fault, Fault};
use super::super::pattern;
use super::super::port::Port;
use super::super::qpset::{slot_bytes, QpSet, QpShape, GRH_BYTES};
use super::super::slots::slot_stride;
use super::super::wait::IdleWatch;
use super::completions::{ArrivalBuf, RecvRing, WrId, RECV_BATCH};
use super::issuer::PAYLOAD;
use super::validate::{self, Checker, FAULT_WR};

/// What a target's set registers (what `TargetSet::new` builds it from):
/// one region per issuer QP.
pub fn buffers(spec: &TputSpec, p: &TputPoint) -> Buffers {
    let slot = slot_bytes(p.size);
    Buffers {
        region: if spec.verb == VerbKind::Send {
            // --validate: a buffer per receive the QP keeps posted (an SRQ's
            // lists spread over the QPs' regions, never more per QP).
            slot * sink_batches(spec, p) * RECV_BATCH as usize
        } else {
            // --region: the issuer QP's WRs target slots of this many bytes.
            spec.memory.region.map_or(slot, |r| r as usize).max(slot)
        },
        qps: p.total_qps(),
        memory: spec.memory,
    }
}

/// Receive batches with buffers of their own per sink QP: one without
/// `--validate` (every batch reposts the same buffers, which no one reads).
fn sink_batches(spec: &TputSpec, p: &TputPoint) -> usize {
    match spec.validate {
        true => (p.sink_rq_depth() / RECV_BATCH) as usize,
        false => 1,
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
    /// `--validate`: what this target checks (SEND: each arrival in its
    /// loop; WRITE: its memory after the point).
    check: Option<TargetCheck>,
    /// READ under `--validate`: the regions carry the pattern the issuer checks.
    read_pattern: bool,
}

/// A target's `--validate` state.
struct TargetCheck {
    checker: Checker,
    verb: VerbKind,
    size: u32,
    /// The issuer's source slots per QP (`validate::ring_slots`).
    ring: usize,
    /// SEND: the pattern sequence each QP's next arrival should carry.
    next: Vec<u64>,
    /// UC/UD lose messages without an error: a payload that is another
    /// WR of the ring's resyncs the expected sequence instead of failing.
    lossy: bool,
    /// UD: the payload follows the 40-byte GRH.
    grh: usize,
    slot: usize,
    /// WRITE: the issuer moves its remote slots (`--offsets`), so every
    /// written slot is checked against its QP's ring, not the last WR.
    moving: bool,
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
        let check =
            (spec.validate && matches!(spec.verb, VerbKind::Send | VerbKind::Write)).then(|| {
                let send = spec.verb == VerbKind::Send;
                let lossy = p.transport != Transport::Rc;
                let how = match (send, lossy) {
                    (true, false) => SEND_HOW.to_string(),
                    (true, true) => format!("{SEND_HOW}; {LOSSY_HOW}"),
                    (false, _) => WRITE_HOW.to_string(),
                };
                let fault_from = if send { FAULT_WR } else { 0 };
                TargetCheck {
                    checker: Checker::new(p.size, how, fault_from, "target"),
                    verb: spec.verb,
                    size: p.size,
                    ring: validate::ring_slots(p),
                    next: vec![0; p.total_qps() as usize],
                    lossy,
                    grh: if p.transport == Transport::Ud {
                        GRH_BYTES
                    } else {
                        0
                    },
                    slot: slot_bytes(p.size),
                    moving: spec.memory.offsets != Offsets::Fixed || lossy,
                }
            });
        Ok(TargetSet {
            set,
            atomic: spec.verb == VerbKind::Atomic,
            sink: sends.then(|| RecvRing::new(Vec::new())),
            srq_depth,
            check,
            read_pattern: spec.validate && spec.verb == VerbKind::Read,
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
        if self.read_pattern && p.size > 0 {
            // READ under --validate: every slot of each QP's region holds
            // its QP's pattern (sequence 0), which the issuer checks.
            let stride = slot_stride(p.size) as usize;
            for q in 0..self.set.qps.len() {
                let (mr, at) = (self.set.mr_of(q), self.set.offset(q));
                for k in 0..(self.set.region / stride).max(1) {
                    pattern::fill_region(mr, at + k * stride, p.size as usize, q as u32, 0);
                }
            }
        }
        if self.sink.is_some() {
            let slot = slot_bytes(p.size) as u32;
            let set = &mut self.set;
            let batch = RECV_BATCH as usize;
            let depth = match &set.srq {
                Some(_) => self.srq_depth,
                None => p.sink_rq_depth(),
            };
            let validating = self.check.is_some();
            // A receive's wr_id names the region its buffer is in and the
            // buffer's index there (its QP's, or with an SRQ the region it
            // was spread to).
            let list_at = |q: usize, b: usize| {
                let (first, at) = (b * batch, set.offset(q) + b * batch * slot as usize);
                RecvList::new(set.mr_of(q), at, slot, batch, WrId::pack(q, first as u64))
            };
            let n = set.qps.len();
            let mut ring = match (&set.srq, validating) {
                // Every receive lands in QP 0's region: a sink never reads them.
                (Some(srq), false) => RecvRing::shared(srq.clone(), list_at(0, 0)),
                // --validate: every receive the SRQ holds has its own
                // buffer, list b in QP (b mod n)'s region.
                (Some(srq), true) => {
                    let lists = (0..(depth / RECV_BATCH) as usize)
                        .map(|b| list_at(b % n, b / n))
                        .collect();
                    RecvRing::shared_rotating(srq.clone(), lists)
                }
                (None, false) => RecvRing::new((0..n).map(|q| list_at(q, 0)).collect()),
                (None, true) => {
                    let per = (depth / RECV_BATCH) as usize;
                    let lists = (0..n * per).map(|i| list_at(i / per, i % per)).collect();
                    RecvRing::rotating(lists, per)
                }
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

/// What `validation.how` says of each target's check.
const SEND_HOW: &str = "SEND: every received buffer (UD: after its 40-byte GRH) checked against the pattern of its QP's next WR, in the target's loop before its receive is reposted: the check costs the target's rate, not the issuer's window";
const LOSSY_HOW: &str = "UC/UD: a payload that is another WR of its QP's ring (a message lost on the way) resyncs the expected sequence";
const WRITE_HOW: &str = "WRITE: the target's memory after the point, each QP's slot against the pattern of the last WR its issuer posted (UC or moving --offsets: every written slot against its QP's ring); the check runs after the window, at no cost to the figures";

impl TargetCheck {
    /// Checks arrival `wr` (1-based) of QP `q`, whose buffer is `index` in
    /// the region of QP `owner`.
    #[inline]
    fn arrival(&mut self, set: &QpSet, owner: usize, index: usize, q: usize, wr: u64) {
        let at = set.offset(owner) + index * self.slot + self.grh;
        let want = self.next[q];
        let alternatives = if self.lossy { self.ring as u64 } else { 1 };
        let mr = set.mr_of(owner);
        let got = self
            .checker
            .check(mr, at, q as u32, wr, want, alternatives, self.ring as u64);
        self.next[q] = (got.unwrap_or(want) + 1) % self.ring as u64;
    }

    /// WRITE: each QP's memory once every WR of the driver has completed.
    fn written(&mut self, set: &QpSet, driver: &DriverReport) {
        if self.verb != VerbKind::Write || self.size == 0 {
            return;
        }
        let ring = self.ring as u64;
        let stride = slot_stride(self.size) as usize;
        for q in 0..set.qps.len() {
            let (mr, at) = (set.mr_of(q), set.offset(q));
            let sent = driver.per_qp_sent.get(q).copied().unwrap_or(0);
            if !self.moving {
                if sent > 0 {
                    let seq = validate::slot_of(sent, self.ring);
                    self.checker.check(mr, at, q as u32, sent, seq, 1, ring);
                }
                continue;
            }
            // Which WR wrote a slot last is not known here (wr 0).
            for k in 0..(set.region / stride).max(1) {
                if !self.checker.is_blank(mr, at + k * stride) {
                    self.checker
                        .check(mr, at + k * stride, q as u32, 0, 0, ring, ring);
                }
            }
        }
    }
}

impl TargetSet {
    /// A SEND sink's pass under `--validate`: `drain`, checking each
    /// arrival's buffer before its receive is reposted.
    #[inline(always)]
    pub fn drain_checked(&mut self, received: &mut [u64], buf: &mut ArrivalBuf) -> Result<usize> {
        let (Some(ring), Some(check), set) = (&mut self.sink, &mut self.check, &mut self.set)
        else {
            return Ok(0);
        };
        let k = buf.poll(&set.recv_cq)?;
        for i in 0..k {
            let q = buf.got[i].qp;
            let id = buf.wr_id(i);
            received[q] += 1;
            check.arrival(set, WrId::qp(id), WrId::seq(id) as usize, q, received[q]);
            ring.consumed(q, &mut set.qps[q])?;
        }
        Ok(k)
    }

    /// One pass of the sink, checking or not as `--validate` says.
    #[inline(always)]
    pub fn drain_any(&mut self, received: &mut [u64], buf: &mut ArrivalBuf) -> Result<usize> {
        match self.check.is_some() {
            true => self.drain_checked(received, buf),
            false => self.drain(received, buf),
        }
    }

    /// `--validate`: what this target checked, once the driver's report
    /// (`driver`: what it posted per QP) is in; `None` when it checks
    /// nothing (READ: the issuer does; atomics: `verify_failures`).
    pub fn validation(&mut self, driver: &DriverReport) -> Option<Validation> {
        let mut check = self.check.take()?;
        check.written(&self.set, driver);
        Some(check.checker.finish())
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
    let mut drain = |received: &mut [u64]| s.drain_any(received, &mut buf);
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
