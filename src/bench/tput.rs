//! Throughput: inbound, outbound and echo (HERD §3), one point at a time.
//!
//! An *issuer* owns `threads` threads of `qps` QPs each and keeps up to
//! `window` WRs outstanding per QP, posting `postlist` WRs per doorbell and
//! signaling one WR in `signal_period` (plus the one a full window needs, so
//! it can always make progress). A signaled completion for WR #n of a QP
//! retires every earlier WR of that QP. Ops are the WRs posted inside the
//! measured window, timed until the last of them has completed. A *target* owns one QP
//! per issuer QP and either stays passive (READ/WRITE/atomics: its CPU does
//! nothing) or consumes SENDs, reposting receives in batches and counting them.
//! Echo clients keep `window` requests in flight per QP; the echo server
//! answers each request it finds.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::connect::{Control, Message};
use crate::error::{Error, Result};
use crate::spec::{Direction, EchoVerb, TputPoint, TputSpec, VerbKind};
use crate::verbs::{
    Access, AddressHandle, CompletionQueue, Endpoint, MemoryRegion, QueuePair, RecvList, SendList,
    SendOp, Transport, WorkCompletion, UD_QKEY,
};

use super::latency::marker;
use super::side::{access_for, send_op, Port, Role, GRH_BYTES};
use super::wait::{aborted, Patience};

/// wr_id layout: QP index above SEQ_BITS, the WR's sequence number below
/// (48 bits: no wrap in any run a person would wait for).
const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// Receives reposted per batch on a sink or echo receiver.
const RECV_BATCH: u32 = 32;
/// Completions polled per `ibv_poll_cq`.
const POLL_BATCH: usize = 32;

/// What this process does in a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Issuer,
    Target,
    EchoClient,
    EchoServer,
}

pub fn part(spec: &TputSpec, is_client: bool) -> Part {
    match (spec.direction, is_client) {
        (Direction::Inbound, true) | (Direction::Outbound, false) => Part::Issuer,
        (Direction::Inbound, false) | (Direction::Outbound, true) => Part::Target,
        (Direction::Echo, true) => Part::EchoClient,
        (Direction::Echo, false) => Part::EchoServer,
    }
}

/// Figures of one issuing thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ThreadFigure {
    pub thread: u32,
    pub ops: u64,
    pub elapsed_s: f64,
    pub mops: f64,
}

/// One client's figure in a group run (several clients started together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClientFigure {
    pub client: String,
    pub ops: u64,
    pub elapsed_s: f64,
    pub mops: f64,
}

/// What the side that drove a point measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DriverReport {
    /// Operations completed inside the measured window (echo: round trips).
    pub ops: u64,
    /// Sum over threads of ops / their measured time, in Mops.
    pub mops: f64,
    pub elapsed_s: f64,
    pub per_thread: Vec<ThreadFigure>,
    pub per_qp_ops: Vec<u64>,
    /// Every WR (echo: request) posted, warm-up and drain included.
    pub sent: u64,
    /// Echo: responses received, warm-up and drain included.
    pub responses: u64,
    /// Send completions polled (signaled WRs), warm-up and drain included.
    pub completions: u64,
}

/// What one driving thread hands back.
struct ThreadResult {
    figure: ThreadFigure,
    per_qp: Vec<u64>,
    sent: u64,
    responses: u64,
    completions: u64,
}

impl ThreadResult {
    fn new(
        thread: u32,
        per_qp: Vec<u64>,
        elapsed_s: f64,
        sent: u64,
        responses: u64,
        completions: u64,
    ) -> Self {
        let ops: u64 = per_qp.iter().sum();
        let mops = if elapsed_s > 0.0 {
            ops as f64 / elapsed_s / 1e6
        } else {
            0.0
        };
        ThreadResult {
            figure: ThreadFigure {
                thread,
                ops,
                elapsed_s,
                mops,
            },
            per_qp,
            sent,
            responses,
            completions,
        }
    }
}

/// Runs `work` on one scoped thread per set, started together; sums what they measured.
fn run_threads<S: Send>(
    sets: &mut [S],
    work: impl Fn(u32, &mut S, &Barrier) -> Result<ThreadResult> + Sync,
) -> Result<DriverReport> {
    let barrier = Barrier::new(sets.len());
    let results: Vec<Result<ThreadResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sets
            .iter_mut()
            .enumerate()
            .map(|(t, set)| {
                let (barrier, work) = (&barrier, &work);
                scope.spawn(move || work(t as u32, set, barrier))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::Interrupted)))
            .collect()
    });
    let mut report = DriverReport::default();
    for r in results {
        let r = r?;
        report.ops += r.figure.ops;
        report.mops += r.figure.mops;
        report.elapsed_s = report.elapsed_s.max(r.figure.elapsed_s);
        report.per_thread.push(r.figure);
        report.per_qp_ops.extend(r.per_qp);
        report.sent += r.sent;
        report.responses += r.responses;
        report.completions += r.completions;
    }
    Ok(report)
}

/// One set of QPs with their CQs and a buffer of `region` bytes per QP.
pub struct QpSet {
    pub qps: Vec<QueuePair>,
    pub psns: Vec<u32>,
    pub send_cq: Arc<CompletionQueue>,
    pub recv_cq: Arc<CompletionQueue>,
    pub mr: Arc<MemoryRegion>,
    pub region: usize,
    pub ahs: Vec<Option<Arc<AddressHandle>>>,
    lid: u16,
    gid: crate::verbs::Gid,
    config: crate::verbs::PortConfig,
    pd: Arc<crate::verbs::ProtectionDomain>,
}

/// Shape of a QP set.
pub struct QpShape {
    pub transport: Transport,
    pub count: u32,
    pub sq_depth: u32,
    pub rq_depth: u32,
    pub inline: u32,
    pub region: usize,
    pub access: Access,
}

const MAX_CQE: u32 = 32_767;

impl QpSet {
    pub fn new(port: &Port, shape: &QpShape) -> Result<QpSet> {
        let n = shape.count.max(1);
        let send_cq = CompletionQueue::new(&port.ctx, (n * shape.sq_depth + 16).min(MAX_CQE))?;
        let recv_cq = CompletionQueue::new(&port.ctx, (n * shape.rq_depth + 16).min(MAX_CQE))?;
        let mr = MemoryRegion::new(&port.pd, shape.region * n as usize, shape.access)?;
        let mut qps = Vec::with_capacity(n as usize);
        for _ in 0..shape.count {
            let qp = QueuePair::builder(&port.pd, shape.transport, &send_cq, &recv_cq)
                .max_send_wr(shape.sq_depth)
                .max_recv_wr(shape.rq_depth.max(1))
                .max_inline(shape.inline)
                .build()?;
            qp.to_init(&port.config, shape.access)?;
            qps.push(qp);
        }
        let psns = (0..shape.count)
            .map(|i| (i * 7919 + 1) & 0xff_ffff)
            .collect();
        Ok(QpSet {
            ahs: (0..shape.count).map(|_| None).collect(),
            qps,
            psns,
            send_cq,
            recv_cq,
            mr,
            region: shape.region,
            lid: port.lid,
            gid: port.gid,
            config: port.config,
            pd: port.pd.clone(),
        })
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.qps
            .iter()
            .enumerate()
            .map(|(i, qp)| Endpoint {
                addr: self.mr.addr() + (i * self.region) as u64,
                rkey: self.mr.rkey(),
                len: self.region as u64,
                ..qp.endpoint(self.lid, self.gid, self.psns[i])
            })
            .collect()
    }

    /// Connects QP i to `remotes[i]` (UD: makes an address handle to it).
    pub fn connect(&mut self, remotes: &[Endpoint]) -> Result<()> {
        if remotes.len() != self.qps.len() {
            return Err(Error::Peer {
                peer: "peer".into(),
                what: format!(
                    "sent {} endpoints for {} QPs",
                    remotes.len(),
                    self.qps.len()
                ),
            });
        }
        for (i, qp) in self.qps.iter().enumerate() {
            qp.to_rts(&self.config, self.psns[i], &remotes[i])?;
            if qp.transport() == Transport::Ud {
                self.ahs[i] = Some(AddressHandle::new(&self.pd, &self.config, &remotes[i])?);
            }
        }
        Ok(())
    }

    /// Address handles to arbitrary UD peers (the echo server's response QP).
    pub fn address(&self, remote: &Endpoint) -> Result<Arc<AddressHandle>> {
        Ok(AddressHandle::new(&self.pd, &self.config, remote)?)
    }

    pub fn offset(&self, qp: usize) -> usize {
        qp * self.region
    }
}

/// Bytes per message slot: payload plus the GRH a UD receive carries, cache-line rounded.
pub fn slot_bytes(size: u32) -> usize {
    (size as usize + GRH_BYTES).div_ceil(64) * 64
}

fn verb_op(spec: &TputSpec, remote: &Endpoint, offset: u64) -> SendOp {
    send_op(
        spec.verb,
        spec.op,
        spec.imm,
        remote.addr + offset,
        remote.rkey,
    )
}

fn verb_label(spec: &TputSpec) -> &'static str {
    spec.verb.wc_label(spec.op)
}

/// The resources of one side for one point.
pub enum PointSide {
    Issuer(Vec<QpSet>),
    Target(Box<QpSet>),
    EchoClient(Vec<EchoClientSet>),
    EchoServer(Box<EchoServerSet>),
}

/// Sizes the sides of a point and creates their QPs.
pub fn build_side(
    port: &Port,
    spec: &TputSpec,
    p: &TputPoint,
    is_client: bool,
    inline_ok: u32,
) -> Result<PointSide> {
    let inline = if spec.inline { p.size } else { 0 };
    let slot = slot_bytes(p.size);
    let sends = spec.verb == VerbKind::Send;
    match part(spec, is_client) {
        Part::Issuer => {
            // An issuer exposes nothing: READ results and atomic replies land locally.
            let access = Access::LOCAL;
            let shape = QpShape {
                transport: p.transport,
                count: p.qps,
                sq_depth: p.sq_depth(),
                rq_depth: 1,
                inline,
                region: slot,
                access,
            };
            let sets = (0..p.threads)
                .map(|_| QpSet::new(port, &shape))
                .collect::<Result<Vec<_>>>()?;
            Ok(PointSide::Issuer(sets))
        }
        Part::Target => {
            let access = access_for(spec.verb, Role::Server);
            let rq_depth = if sends { sink_rq_depth(p) } else { 1 };
            let shape = QpShape {
                transport: p.transport,
                count: p.total_qps(),
                sq_depth: 1,
                rq_depth,
                inline: 0,
                region: if sends {
                    slot * RECV_BATCH as usize
                } else {
                    slot
                },
                access,
            };
            Ok(PointSide::Target(Box::new(QpSet::new(port, &shape)?)))
        }
        Part::EchoClient => {
            let sets = (0..p.threads)
                .map(|_| EchoClientSet::new(port, spec, p, inline_ok))
                .collect::<Result<Vec<_>>>()?;
            Ok(PointSide::EchoClient(sets))
        }
        Part::EchoServer => Ok(PointSide::EchoServer(Box::new(EchoServerSet::new(
            port, spec, p, inline_ok,
        )?))),
    }
}

fn sink_rq_depth(p: &TputPoint) -> u32 {
    // Room for two full windows plus a batch being reposted, and at least
    // perftest's 512, so a sender is not slowed by RNR NAKs while the sink
    // thread catches up; whole batches.
    (2 * p.window + RECV_BATCH).max(512).div_ceil(RECV_BATCH) * RECV_BATCH
}

impl PointSide {
    pub fn endpoints(&self) -> Vec<Endpoint> {
        match self {
            PointSide::Issuer(sets) => sets.iter().flat_map(|s| s.endpoints()).collect(),
            PointSide::Target(set) => set.endpoints(),
            PointSide::EchoClient(sets) => {
                let mut reqs: Vec<Endpoint> = sets.iter().flat_map(|s| s.req.endpoints()).collect();
                reqs.extend(sets.iter().flat_map(|s| s.resp_endpoints()));
                reqs
            }
            PointSide::EchoServer(s) => s.endpoints(),
        }
    }

    /// Connects to the peer's endpoints (in the peer's order).
    pub fn connect(&mut self, remotes: &[Endpoint]) -> Result<()> {
        match self {
            PointSide::Issuer(sets) => {
                let mut at = 0;
                for s in sets.iter_mut() {
                    let n = s.qps.len();
                    let slice = remotes
                        .get(at..at + n)
                        .ok_or_else(|| short(remotes.len()))?;
                    s.connect(slice)?;
                    at += n;
                }
                Ok(())
            }
            PointSide::Target(set) => set.connect(remotes),
            PointSide::EchoClient(sets) => {
                let server_eps = remotes;
                let total: usize = sets.iter().map(|s| s.req.qps.len()).sum();
                let mut at = 0;
                for s in sets.iter_mut() {
                    s.connect(server_eps, at, total)?;
                    at += s.req.qps.len();
                }
                Ok(())
            }
            PointSide::EchoServer(s) => s.connect(remotes),
        }
    }
}

fn short(got: usize) -> Error {
    Error::Peer {
        peer: "peer".into(),
        what: format!("sent too few endpoints ({got})"),
    }
}

/// Where the measured window starts and ends, shared by all threads of a point.
#[derive(Clone, Copy)]
pub struct Window {
    pub warmup: u64,
    pub duration: u64,
    pub iters: Option<u64>,
}

impl Window {
    pub fn new(clock: &Clock, spec: &TputSpec) -> Self {
        Window {
            warmup: clock.ticks(Duration::from_secs_f64(spec.warmup_s)),
            duration: clock.ticks(Duration::from_secs_f64(spec.duration_s)),
            iters: spec.iters,
        }
    }
}

/// Runs the issuing threads of a point; returns what they measured.
pub fn run_issuer(
    sets: &mut [QpSet],
    remotes: &[Endpoint],
    spec: &TputSpec,
    p: &TputPoint,
    clock: &Clock,
) -> Result<DriverReport> {
    let window = Window::new(clock, spec);
    // Thread t drives QPs [starts[t], starts[t] + its count) of the peer's list.
    let starts: Vec<usize> = sets
        .iter()
        .scan(0, |at, s| {
            let start = *at;
            *at += s.qps.len();
            Some(start)
        })
        .collect();
    run_threads(sets, |t, set, barrier| {
        let mine = &remotes[starts[t as usize]..starts[t as usize] + set.qps.len()];
        issue_thread(t, set, mine, spec, p, clock, window, barrier)
    })
}

#[allow(clippy::too_many_arguments)]
fn issue_thread(
    thread: u32,
    set: &mut QpSet,
    remotes: &[Endpoint],
    spec: &TputSpec,
    p: &TputPoint,
    clock: &Clock,
    window: Window,
    barrier: &Barrier,
) -> Result<ThreadResult> {
    let n = set.qps.len();
    let pl = p.postlist as usize;
    let (s, w) = (p.signal_period as u64, p.window as u64);
    // Pre-build every QP's postlist (outside the measured loop).
    let mut lists: Vec<SendList> = (0..n)
        .map(|q| {
            let mut list = SendList::new(pl);
            for j in 0..pl {
                list.set(
                    j,
                    verb_op(spec, &remotes[q], 0),
                    &set.mr,
                    set.offset(q),
                    p.size,
                );
                list.set_inline(j, spec.inline);
                if let Some(ah) = &set.ahs[q] {
                    list.set_ud_dest(j, ah, remotes[q].qpn, UD_QKEY);
                }
            }
            list
        })
        .collect();
    let mut posted = vec![0u64; n];
    let mut completed = vec![0u64; n];
    let mut last_signaled = vec![0u64; n];
    let mut base = vec![0u64; n];
    let mut wcs = [WorkCompletion::default(); POLL_BATCH];
    let verb = verb_label(spec);
    let patience = Patience::new(*clock, spec.timeout_s);
    // An --iters run posts whole postlists: round the count up to one.
    let limit = window
        .iters
        .map(|n| n.div_ceil(pl as u64) * pl as u64)
        .unwrap_or(u64::MAX);

    barrier.wait();
    let t0 = clock.now();
    let warm_end = t0
        + if window.iters.is_some() {
            0
        } else {
            window.warmup
        };
    let end = warm_end + window.duration;
    let mut measuring = window.warmup == 0 || window.iters.is_some();
    let mut t_measure = t0;
    let mut last_progress = t0;
    let mut completions = 0u64;
    loop {
        let now = clock.now();
        // The window ends no earlier than one full loop after it began, so a
        // slow loop (many QPs on a slow machine) still measures something.
        if window.iters.is_none() && measuring && now >= end && now > t_measure {
            break;
        }
        if !measuring && now >= warm_end {
            base.copy_from_slice(&posted);
            t_measure = now;
            measuring = true;
        }
        if window.iters.is_some() && completed.iter().all(|&c| c >= limit) {
            break;
        }
        let mut progress = false;
        for q in 0..n {
            // Fill this QP's window (as perftest does), then poll once.
            loop {
                let out = posted[q] - completed[q];
                if out + pl as u64 > w || posted[q] >= limit {
                    break;
                }
                let list = &mut lists[q];
                for j in 0..pl {
                    let seq = posted[q] + j as u64 + 1;
                    // Signal every S-th WR, the last WR of an --iters run, and the
                    // WR after which the window would be full -- but only if the
                    // newest signaled WR, once complete, would not free room for
                    // another postlist (else the window could stall).
                    let last_of_batch = j + 1 == pl;
                    let after = posted[q] + pl as u64;
                    let signaled = seq % s == 0
                        || seq == limit
                        || (last_of_batch
                            && out + 2 * pl as u64 > w
                            && after - last_signaled[q] > w - pl as u64);
                    if signaled {
                        last_signaled[q] = seq;
                    }
                    list.set_signaled(j, signaled);
                    list.set_wr_id(j, ((q as u64) << SEQ_BITS) | seq);
                }
                set.qps[q].post_send(list)?;
                posted[q] += pl as u64;
                progress = true;
            }
        }
        let k = set.send_cq.poll(&mut wcs)?;
        for wc in &wcs[..k] {
            wc.check(verb)?;
            let q = (wc.wr_id() >> SEQ_BITS) as usize;
            completed[q] = wc.wr_id() & SEQ_MASK;
        }
        completions += k as u64;
        if k > 0 || progress {
            last_progress = now;
        } else {
            let qpn = set.qps[0].qpn();
            patience.check_stall(last_progress, now, || {
                format!("any completion on thread {thread}'s QPs (QP {qpn}…): the peer stopped answering")
            })?;
        }
    }
    // Ops are the WRs posted in the window; the window closes when the last
    // of them has completed (so no count waits on a signaling period).
    let per_qp: Vec<u64> = posted.iter().zip(&base).map(|(p, b)| p - b).collect();
    let in_window = posted.clone();
    let qpn = set.qps[0].qpn();
    let mut retire = |set: &mut QpSet, completed: &mut [u64], target: &[u64]| {
        patience.wait(
            || format!("the last completions of thread {thread} (QP {qpn}…)"),
            || {
                let k = set.send_cq.poll(&mut wcs)?;
                completions += k as u64;
                for wc in &wcs[..k] {
                    wc.check(verb)?;
                    let q = (wc.wr_id() >> SEQ_BITS) as usize;
                    completed[q] = wc.wr_id() & SEQ_MASK;
                }
                Ok(completed
                    .iter()
                    .zip(target)
                    .all(|(c, t)| c >= t)
                    .then_some(()))
            },
        )
    };
    // Make the last WR of every QP signaled, so everything posted retires.
    for q in 0..n {
        if completed[q] < posted[q] && window.iters.is_none() {
            let list = &mut lists[q];
            for j in 0..pl {
                let seq = posted[q] + j as u64 + 1;
                list.set_signaled(j, j + 1 == pl);
                list.set_wr_id(j, ((q as u64) << SEQ_BITS) | seq);
            }
            set.qps[q].post_send(list)?;
            posted[q] += pl as u64;
        }
    }
    retire(set, &mut completed, &in_window)?;
    let t_end = clock.now();
    // The drain batch too, so the target has seen everything before counts are compared.
    retire(set, &mut completed, &posted)?;
    let elapsed_s = clock.to_ns(t_end.wrapping_sub(t_measure)) as f64 / 1e9;
    Ok(ThreadResult::new(
        thread,
        per_qp,
        elapsed_s,
        posted.iter().sum(),
        0,
        completions,
    ))
}

/// Target side: passive, or consuming SENDs until the driver says stop.
/// Returns per-QP receive counts (empty when passive).
pub fn run_target(
    set: &mut QpSet,
    spec: &TputSpec,
    p: &TputPoint,
    index: u32,
    ctl: &mut dyn Control,
    go: &mut dyn FnMut(&mut dyn Control) -> Result<()>,
) -> Result<(Vec<u64>, DriverReport)> {
    if spec.verb != VerbKind::Send {
        go(ctl)?;
        let report = wait_stop(ctl, index, spec)?;
        return Ok((Vec::new(), report));
    }
    let slot = slot_bytes(p.size) as u32;
    let n = set.qps.len();
    let mut lists: Vec<RecvList> = (0..n)
        .map(|q| {
            RecvList::new(
                &set.mr,
                set.offset(q),
                slot,
                RECV_BATCH as usize,
                (q as u64) << SEQ_BITS,
            )
        })
        .collect();
    for (q, list) in lists.iter_mut().enumerate() {
        for _ in 0..sink_rq_depth(p) / RECV_BATCH {
            set.qps[q].post_recv(list)?;
        }
    }
    let mut received = vec![0u64; n];
    let mut consumed = vec![0u32; n];
    let mut wcs = [WorkCompletion::default(); POLL_BATCH];
    // Tell the driver receives are posted only now (it waits for this).
    go(ctl)?;
    let mut idle = 0u32;
    let mut drain = |set: &mut QpSet, received: &mut [u64]| -> Result<usize> {
        let k = set.recv_cq.poll(&mut wcs)?;
        for wc in &wcs[..k] {
            wc.check("RECV")?;
            let q = (wc.wr_id() >> SEQ_BITS) as usize;
            received[q] += 1;
            consumed[q] += 1;
            if consumed[q] == RECV_BATCH {
                consumed[q] = 0;
                set.qps[q].post_recv(&mut lists[q])?;
            }
        }
        Ok(k)
    };
    loop {
        if drain(set, &mut received)? > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle % 4096 == 0 {
            if let Some(report) = poll_stop(ctl, index)? {
                // Count what is still queued: the driver has seen it all complete.
                while drain(set, &mut received)? > 0 {}
                return Ok((received, report));
            }
        }
    }
}

/// Asks the control channel, without really waiting, whether the driver has
/// said Stop. Called only when idle, so it costs the measured side nothing.
fn poll_stop(ctl: &mut dyn Control, index: u32) -> Result<Option<DriverReport>> {
    match ctl.poll()? {
        Some(Message::Stop { index: i, report }) if i == index => Ok(Some(report)),
        Some(other) => Err(super::latency::unexpected(ctl, "stop", &other)),
        None => Ok(None),
    }
}

/// Waits for the driver's Stop (bounded: a point cannot last longer than this).
pub fn wait_stop(ctl: &mut dyn Control, index: u32, spec: &TputSpec) -> Result<DriverReport> {
    let longest = spec.warmup_s + spec.duration_s + spec.timeout_s * 4.0 + 3600.0;
    match ctl.recv(Duration::from_secs_f64(longest))? {
        Message::Stop { index: i, report } if i == index => Ok(report),
        other => Err(super::latency::unexpected(ctl, "stop", &other)),
    }
}

// ---------------------------------------------------------------------------
// Echo
// ---------------------------------------------------------------------------

/// One echo client thread: request QPs, and (responses by SEND over UD, with
/// WRITE requests) one UD QP per request QP to receive responses on.
pub struct EchoClientSet {
    pub req: QpSet,
    pub resp: Option<QpSet>,
    /// Per QP: request payload slots [0, W) then response slots [W, 2W).
    window: u32,
    slot: usize,
    req_verb: EchoVerb,
    resp_verb: EchoVerb,
    server_req: Vec<Endpoint>,
    server_ud: Option<Endpoint>,
    first_global: u32,
}

impl EchoClientSet {
    fn new(port: &Port, spec: &TputSpec, p: &TputPoint, inline_ok: u32) -> Result<Self> {
        let slot = slot_bytes(p.size);
        let mut access = Access::LOCAL;
        if spec.resp == EchoVerb::Write {
            access.remote_write = true;
        }
        let inline = if p.size <= inline_ok { p.size } else { 0 };
        let rq = if spec.req == EchoVerb::Send && spec.resp == EchoVerb::Send {
            (p.window + RECV_BATCH) * 2
        } else {
            1
        };
        let req = QpSet::new(
            port,
            &QpShape {
                transport: p.transport,
                count: p.qps,
                sq_depth: p.sq_depth().max(p.window + 2 * p.signal_period),
                rq_depth: rq,
                inline,
                region: 2 * p.window as usize * slot,
                access,
            },
        )?;
        let resp = if spec.req == EchoVerb::Write && spec.resp == EchoVerb::Send {
            Some(QpSet::new(
                port,
                &QpShape {
                    transport: Transport::Ud,
                    count: p.qps,
                    sq_depth: 1,
                    rq_depth: (p.window + RECV_BATCH) * 2,
                    inline: 0,
                    region: p.window as usize * slot,
                    access: Access::LOCAL,
                },
            )?)
        } else {
            None
        };
        Ok(EchoClientSet {
            req,
            resp,
            window: p.window,
            slot,
            req_verb: spec.req,
            resp_verb: spec.resp,
            server_req: Vec::new(),
            server_ud: None,
            first_global: 0,
        })
    }

    fn resp_endpoints(&self) -> Vec<Endpoint> {
        self.resp
            .as_ref()
            .map(|r| r.endpoints())
            .unwrap_or_default()
    }

    /// `server` = the server's endpoints: one per client request QP for
    /// WRITE requests, then (SEND responses or requests) its one UD QP.
    fn connect(&mut self, server: &[Endpoint], first: usize, total: usize) -> Result<()> {
        let n = self.req.qps.len();
        self.first_global = first as u32;
        let ud = match self.req_verb {
            EchoVerb::Write => {
                let mine = server
                    .get(first..first + n)
                    .ok_or_else(|| short(server.len()))?;
                self.req.connect(mine)?;
                self.server_req = mine.to_vec();
                server.get(total).copied()
            }
            EchoVerb::Send => server.first().copied(),
        };
        if let Some(resp) = &mut self.resp {
            let ud = ud.ok_or_else(|| short(server.len()))?;
            resp.connect(&vec![ud; n])?;
        }
        if self.req_verb == EchoVerb::Send {
            let ud = ud.ok_or_else(|| short(server.len()))?;
            self.req.connect(&vec![ud; n])?;
            self.server_ud = Some(ud);
        }
        Ok(())
    }
}

/// The echo server: one QP per client QP for WRITE requests (answered on
/// that QP for WRITE responses), and one UD QP for SEND requests/responses.
pub struct EchoServerSet {
    pub conn: Option<QpSet>,
    pub ud: Option<QpSet>,
    window: u32,
    slot: usize,
    req_verb: EchoVerb,
    resp_verb: EchoVerb,
    clients: Vec<Endpoint>,
    client_ahs: Vec<Arc<AddressHandle>>,
    total: usize,
}

impl EchoServerSet {
    fn new(port: &Port, spec: &TputSpec, p: &TputPoint, inline_ok: u32) -> Result<Self> {
        let slot = slot_bytes(p.size);
        let n = p.total_qps();
        let inline = if p.size <= inline_ok { p.size } else { 0 };
        let conn = if spec.req == EchoVerb::Write {
            let mut access = Access::LOCAL;
            access.remote_write = true;
            Some(QpSet::new(
                port,
                &QpShape {
                    transport: p.transport,
                    count: n,
                    sq_depth: p.window + 2 * p.signal_period,
                    rq_depth: 1,
                    inline,
                    region: p.window as usize * slot,
                    access,
                },
            )?)
        } else {
            None
        };
        let ud = if spec.resp == EchoVerb::Send {
            let rq = if spec.req == EchoVerb::Send {
                ((n * p.window + RECV_BATCH) * 2).min(16_384)
            } else {
                1
            };
            Some(QpSet::new(
                port,
                &QpShape {
                    transport: Transport::Ud,
                    count: 1,
                    sq_depth: (4 * p.signal_period).max(256),
                    rq_depth: rq,
                    inline,
                    region: rq as usize * slot,
                    access: Access::LOCAL,
                },
            )?)
        } else {
            None
        };
        Ok(EchoServerSet {
            conn,
            ud,
            window: p.window,
            slot,
            req_verb: spec.req,
            resp_verb: spec.resp,
            clients: Vec::new(),
            client_ahs: Vec::new(),
            total: n as usize,
        })
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        let mut eps = self
            .conn
            .as_ref()
            .map(|c| c.endpoints())
            .unwrap_or_default();
        if let Some(ud) = &self.ud {
            eps.extend(ud.endpoints());
        }
        eps
    }

    /// `clients` = the client's request endpoints, then its response UD endpoints.
    fn connect(&mut self, clients: &[Endpoint]) -> Result<()> {
        let n = self.total;
        if let Some(conn) = &mut self.conn {
            conn.connect(clients.get(..n).ok_or_else(|| short(clients.len()))?)?;
        }
        // Where responses go: the response UD QPs (write/send) or the request UD QPs (send/send).
        let resp_eps = match (self.req_verb, self.resp_verb) {
            (EchoVerb::Write, EchoVerb::Send) => clients.get(n..2 * n),
            _ => clients.get(..n),
        }
        .ok_or_else(|| short(clients.len()))?
        .to_vec();
        if let Some(ud) = &mut self.ud {
            // UD needs no peer to reach RTS; use the first client as a formality.
            ud.connect(&resp_eps[..1])?;
            self.client_ahs = resp_eps
                .iter()
                .map(|e| ud.address(e))
                .collect::<Result<Vec<_>>>()?;
        }
        self.clients = resp_eps;
        Ok(())
    }
}

/// Runs the echo client threads; every completed round trip is one op.
pub fn run_echo_client(
    sets: &mut [EchoClientSet],
    spec: &TputSpec,
    p: &TputPoint,
    clock: &Clock,
) -> Result<DriverReport> {
    let window = Window::new(clock, spec);
    run_threads(sets, |t, set, barrier| {
        echo_client_thread(t, set, spec, p, clock, window, barrier)
    })
}

#[allow(clippy::too_many_arguments)]
fn echo_client_thread(
    thread: u32,
    set: &mut EchoClientSet,
    spec: &TputSpec,
    p: &TputPoint,
    clock: &Clock,
    window: Window,
    barrier: &Barrier,
) -> Result<ThreadResult> {
    let n = set.req.qps.len();
    let w = set.window as usize;
    let slot = set.slot;
    let size = p.size as usize;
    let s = p.signal_period as u64;
    let inline = p.size <= set.req.qps[0].max_inline();
    // One prebuilt request WR per (QP, slot).
    let mut reqs: Vec<SendList> = Vec::with_capacity(n * w);
    for q in 0..n {
        for k in 0..w {
            let mut l = SendList::new(1);
            let local = set.req.offset(q) + k * slot;
            let (op, imm_dest) = match set.req_verb {
                EchoVerb::Write => (
                    SendOp::Write {
                        remote_addr: set.server_req[q].addr + (k * slot) as u64,
                        rkey: set.server_req[q].rkey,
                    },
                    false,
                ),
                EchoVerb::Send => (
                    SendOp::SendImm {
                        imm: ((set.first_global + q as u32) << 16) | k as u32,
                    },
                    true,
                ),
            };
            l.set(0, op, &set.req.mr, local, p.size);
            l.set_inline(0, inline);
            if imm_dest {
                let ud = set.server_ud.expect("connected");
                let ah = set.req.ahs[q]
                    .as_ref()
                    .expect("UD request QPs have an address handle");
                l.set_ud_dest(0, ah, ud.qpn, UD_QKEY);
            }
            reqs.push(l);
        }
    }
    // Receives for SEND responses: on the response UD QPs, or the request UD QPs.
    let resp_set_is_req = set.resp.is_none();
    let mut recv_lists: Vec<RecvList> = Vec::new();
    if set.resp_verb == EchoVerb::Send {
        let rs = set.resp.as_mut().unwrap_or(&mut set.req);
        for q in 0..n {
            let base = if resp_set_is_req {
                rs.offset(q) + w * slot
            } else {
                rs.offset(q)
            };
            let batch = (w as u32).min(RECV_BATCH) as usize;
            let mut l = RecvList::new(&rs.mr, base, slot as u32, batch, (q as u64) << SEQ_BITS);
            for _ in 0..(2 * (w + RECV_BATCH as usize)).div_ceil(batch) {
                rs.qps[q].post_recv(&mut l)?;
            }
            recv_lists.push(l);
        }
    }
    let recv_batch = (w as u32).min(RECV_BATCH);
    let mut consumed = vec![0u32; n];
    let mut busy = vec![false; n * w];
    let mut gen = vec![0u64; n * w];
    let mut posted = vec![0u64; n];
    let mut completed = vec![0u64; n];
    let mut done_q = vec![0u64; n];
    let mut base = vec![0u64; n];
    let mut sent = 0u64;
    let mut wcs = [WorkCompletion::default(); POLL_BATCH];
    let patience = Patience::new(*clock, spec.timeout_s);
    let sq_room = set.req.qps[0].max_send_wr() as u64 - 1;

    barrier.wait();
    let t0 = clock.now();
    let warm_end = t0 + window.warmup;
    let end = warm_end + window.duration;
    let mut measuring = window.warmup == 0;
    let mut t_measure = t0;
    let mut last_progress = t0;
    let mut stopping = false;
    let mut at_end = vec![0u64; n];
    let mut stopped_at = t0;
    let mut completions = 0u64;
    let mut in_flight = 0usize;
    let drain_limit = clock.ticks(Duration::from_secs_f64(spec.timeout_s.min(2.0)));
    loop {
        let now = clock.now();
        // As for issuers: the window ends no earlier than one loop after it began.
        if !stopping && measuring && now >= end && now > t_measure {
            // Stop issuing; round trips still in flight are drained, not counted.
            stopping = true;
            at_end.copy_from_slice(&done_q);
            stopped_at = now;
        }
        if !measuring && now >= warm_end {
            base.copy_from_slice(&done_q);
            t_measure = now;
            measuring = true;
        }
        // Drain what is in flight, but not forever: over UD a lost request
        // or response never comes back; it is counted (sent - responses), not waited for.
        if stopping && (in_flight == 0 || now.wrapping_sub(stopped_at) > drain_limit) {
            break;
        }
        let mut progress = false;
        if !stopping {
            for q in 0..n {
                for k in 0..w {
                    let i = q * w + k;
                    if busy[i] || posted[q] - completed[q] >= sq_room {
                        continue;
                    }
                    let m = marker(gen[i]);
                    set.req
                        .mr
                        .write_u8(set.req.offset(q) + k * slot + size - 1, m);
                    let seq = posted[q] + 1;
                    let l = &mut reqs[i];
                    l.set_signaled(0, seq % s == 0);
                    l.set_wr_id(0, ((q as u64) << SEQ_BITS) | seq);
                    set.req.qps[q].post_send(l)?;
                    posted[q] = seq;
                    busy[i] = true;
                    in_flight += 1;
                    sent += 1;
                    progress = true;
                }
            }
        }
        // Responses.
        match set.resp_verb {
            EchoVerb::Send => {
                let rs = set.resp.as_mut().unwrap_or(&mut set.req);
                let k = rs.recv_cq.poll(&mut wcs)?;
                for wc in &wcs[..k] {
                    wc.check("RECV")?;
                    let q = (wc.wr_id() >> SEQ_BITS) as usize;
                    let slot_i = wc.imm().unwrap_or(0) as usize & 0xffff;
                    let i = q * w + slot_i.min(w - 1);
                    // A response for a slot not in flight (a duplicate) is ignored.
                    if busy[i] {
                        busy[i] = false;
                        in_flight -= 1;
                        gen[i] += 1;
                        done_q[q] += 1;
                    }
                    consumed[q] += 1;
                    if consumed[q] == recv_batch {
                        consumed[q] = 0;
                        rs.qps[q].post_recv(&mut recv_lists[q])?;
                    }
                    progress = true;
                }
            }
            EchoVerb::Write => {
                for (q, done) in done_q.iter_mut().enumerate() {
                    let responses = set.req.offset(q) + w * slot + size - 1;
                    for k in 0..w {
                        let i = q * w + k;
                        if busy[i] && set.req.mr.read_u8(responses + k * slot) == marker(gen[i]) {
                            busy[i] = false;
                            in_flight -= 1;
                            gen[i] += 1;
                            *done += 1;
                            progress = true;
                        }
                    }
                }
            }
        }
        let k = set.req.send_cq.poll(&mut wcs)?;
        completions += k as u64;
        for wc in &wcs[..k] {
            wc.check(match set.req_verb {
                EchoVerb::Write => "RDMA_WRITE",
                EchoVerb::Send => "SEND",
            })?;
            let q = (wc.wr_id() >> SEQ_BITS) as usize;
            completed[q] = wc.wr_id() & SEQ_MASK;
        }
        if progress || k > 0 {
            last_progress = now;
        } else {
            let qpn = set.req.qps[0].qpn();
            patience.check_stall(last_progress, now, || {
                format!("echo responses on thread {thread}'s QPs (QP {qpn}…): the server stopped answering")
            })?;
        }
    }
    // Round trips completed by the end of the window; the drain after it is not counted.
    let per_qp: Vec<u64> = at_end.iter().zip(&base).map(|(d, b)| d - b).collect();
    let elapsed_s = clock.to_ns(stopped_at.saturating_sub(t_measure)) as f64 / 1e9;
    Ok(ThreadResult::new(
        thread,
        per_qp,
        elapsed_s,
        sent,
        done_q.iter().sum(),
        completions,
    ))
}

/// The echo server's answering state: prebuilt responses and send-queue accounting.
struct Responder {
    resps: Vec<SendList>,
    /// Per response QP (one UD QP, or one per client QP): posted and completed sends.
    posted: Vec<u64>,
    completed: Vec<u64>,
    room: u64,
    signal_period: u64,
    seen: Vec<u64>,
    window: usize,
    wcs: [WorkCompletion; POLL_BATCH],
}

impl Responder {
    fn new(s: &EchoServerSet, p: &TputPoint) -> Self {
        let (n, w, slot) = (s.total, s.window as usize, s.slot);
        let mut resps = Vec::with_capacity(n * w);
        for q in 0..n {
            for k in 0..w {
                let mut l = SendList::new(1);
                match (s.resp_verb, &s.conn, &s.ud) {
                    (EchoVerb::Write, Some(conn), _) => {
                        // Echo from where the request landed into the client's response slot k.
                        let client = &s.clients[q];
                        let op = SendOp::Write {
                            remote_addr: client.addr + ((w + k) * slot) as u64,
                            rkey: client.rkey,
                        };
                        l.set(0, op, &conn.mr, conn.offset(q) + k * slot, p.size);
                        l.set_inline(0, p.size <= conn.qps[q].max_inline());
                    }
                    (_, conn, Some(ud)) => {
                        // The payload: the request's slot (WRITE requests) or a scratch slot.
                        let (mr, off) = match conn {
                            Some(c) => (&c.mr, c.offset(q) + k * slot),
                            None => (&ud.mr, 0),
                        };
                        l.set(0, SendOp::SendImm { imm: k as u32 }, mr, off, p.size);
                        l.set_inline(0, p.size <= ud.qps[0].max_inline());
                        l.set_ud_dest(0, &s.client_ahs[q], s.clients[q].qpn, UD_QKEY);
                    }
                    _ => unreachable!("validated: responses have a QP"),
                }
                resps.push(l);
            }
        }
        let resp_qps = if s.resp_verb == EchoVerb::Send { 1 } else { n };
        let room = match (&s.ud, &s.conn) {
            (Some(ud), _) if s.resp_verb == EchoVerb::Send => ud.qps[0].max_send_wr(),
            (_, Some(c)) => c.qps[0].max_send_wr(),
            _ => 2,
        } as u64
            - 1;
        Responder {
            resps,
            posted: vec![0; resp_qps],
            completed: vec![0; resp_qps],
            room,
            signal_period: p.signal_period as u64,
            seen: vec![0; n],
            window: w,
            wcs: [WorkCompletion::default(); POLL_BATCH],
        }
    }

    fn send_cq(s: &EchoServerSet) -> &Arc<CompletionQueue> {
        match (s.resp_verb, &s.ud, &s.conn) {
            (EchoVerb::Send, Some(ud), _) => &ud.send_cq,
            (_, _, Some(c)) => &c.send_cq,
            _ => unreachable!("validated: responses have a QP"),
        }
    }

    fn reap(&mut self, s: &EchoServerSet) -> Result<usize> {
        let k = Self::send_cq(s).poll(&mut self.wcs)?;
        for wc in &self.wcs[..k] {
            wc.check("response")?;
            let r = (wc.wr_id() >> SEQ_BITS) as usize;
            self.completed[r] = wc.wr_id() & SEQ_MASK;
        }
        Ok(k)
    }

    /// Answers request slot `k` of client QP `q`.
    fn respond(&mut self, s: &mut EchoServerSet, q: usize, k: usize) -> Result<()> {
        let r = if s.resp_verb == EchoVerb::Send { 0 } else { q };
        while self.posted[r] - self.completed[r] >= self.room {
            self.reap(s)?;
            if aborted() {
                return Err(Error::Interrupted);
            }
        }
        let seq = self.posted[r] + 1;
        let l = &mut self.resps[q * self.window + k];
        l.set_signaled(0, seq % self.signal_period == 0);
        l.set_wr_id(0, ((r as u64) << SEQ_BITS) | seq);
        match (s.resp_verb, &mut s.ud, &mut s.conn) {
            (EchoVerb::Send, Some(ud), _) => ud.qps[0].post_send(l)?,
            (_, _, Some(conn)) => conn.qps[q].post_send(l)?,
            _ => unreachable!("validated: responses have a QP"),
        }
        self.posted[r] = seq;
        self.seen[q] += 1;
        Ok(())
    }
}

/// Runs the echo server until the client says stop; returns requests seen per client QP.
pub fn run_echo_server(
    s: &mut EchoServerSet,
    p: &TputPoint,
    index: u32,
    ctl: &mut dyn Control,
    go: &mut dyn FnMut(&mut dyn Control) -> Result<()>,
) -> Result<(Vec<u64>, DriverReport)> {
    let (n, w, slot) = (s.total, s.window as usize, s.slot);
    let last_byte = p.size as usize - 1;
    let mut gen = vec![0u64; n * w];
    let mut resp = Responder::new(s, p);
    let mut rwcs = [WorkCompletion::default(); POLL_BATCH];
    let mut recv_list = None;
    if let (EchoVerb::Send, Some(ud)) = (s.req_verb, &mut s.ud) {
        let depth = ud.qps[0].max_recv_wr().min(16_384) as usize;
        let mut l = RecvList::new(&ud.mr, 0, slot as u32, RECV_BATCH as usize, 0);
        for _ in 0..depth / RECV_BATCH as usize {
            ud.qps[0].post_recv(&mut l)?;
        }
        recv_list = Some(l);
    }
    let mut consumed = 0u32;
    go(ctl)?;
    let mut idle = 0u32;
    loop {
        let mut progress = false;
        match s.req_verb {
            EchoVerb::Write => {
                for q in 0..n {
                    for k in 0..w {
                        let i = q * w + k;
                        let hit = match &s.conn {
                            Some(c) => {
                                c.mr.read_u8(c.offset(q) + k * slot + last_byte) == marker(gen[i])
                            }
                            None => false,
                        };
                        if hit {
                            gen[i] += 1;
                            resp.respond(s, q, k)?;
                            progress = true;
                        }
                    }
                }
            }
            EchoVerb::Send => {
                let k = match &s.ud {
                    Some(ud) => ud.recv_cq.poll(&mut rwcs)?,
                    None => 0,
                };
                for wc in &rwcs[..k] {
                    wc.check("RECV")?;
                    // The immediate says who asked: (client QP << 16) | slot.
                    let imm = wc.imm().unwrap_or(0);
                    let (q, slot_k) = ((imm >> 16) as usize, (imm & 0xffff) as usize);
                    if q < n && slot_k < w {
                        resp.respond(s, q, slot_k)?;
                    }
                    consumed += 1;
                    if consumed == RECV_BATCH {
                        consumed = 0;
                        if let (Some(ud), Some(l)) = (&mut s.ud, &mut recv_list) {
                            ud.qps[0].post_recv(l)?;
                        }
                    }
                    progress = true;
                }
            }
        }
        let k = resp.reap(s)?;
        if progress || k > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle % 4096 == 0 {
            if let Some(report) = poll_stop(ctl, index)? {
                return Ok((resp.seen, report));
            }
        }
    }
}
