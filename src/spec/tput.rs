//! A throughput sweep: its points, their knobs and how they are validated.

use serde::{Deserialize, Serialize};

use super::*;
use crate::error::{Error, Result};
use crate::verbs::Transport;

/// Which way throughput flows (HERD's three experiments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Clients issue the verb at one server.
    Inbound,
    /// The server issues the verb to every client QP, round-robin.
    Outbound,
    /// Clients send requests, the server answers each.
    Echo,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
            Direction::Echo => "echo",
        }
    }
}

/// Request or response verb of an echo throughput run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum EchoVerb {
    Write,
    Send,
}

/// One point of a throughput sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TputPoint {
    pub transport: Transport,
    pub size: u32,
    /// One signaled WR every `signal_period` (1 = all signaled).
    pub signal_period: u32,
    /// QPs per issuing thread.
    pub qps: u32,
    /// WRs chained per `ibv_post_send` (doorbell batching).
    pub postlist: u32,
    /// Outstanding WRs (echo: requests) per QP.
    pub window: u32,
    pub threads: u32,
}

impl TputPoint {
    /// The signaling period an issuing QP really runs with: it never has
    /// more than `window` WRs outstanding, so it must signal at least once
    /// per window (perftest clamps `cq_mod` to the TX depth the same way).
    /// Echo requests and responses keep S: their send queues are sized for it.
    pub fn effective_signal_period(&self) -> u32 {
        self.signal_period.min(self.window)
    }

    /// Send-queue depth an issuing QP needs: room for the window and for two
    /// signaling periods of unreaped WRs.
    pub fn sq_depth(&self) -> u32 {
        // + postlist: the drain at the end of a point posts one more postlist
        // onto a window that may be full.
        self.window
            .max(2 * self.effective_signal_period())
            .max(self.postlist)
            + self.postlist
    }

    /// Send-queue depth of an echo request QP (client) and of a WRITE
    /// response QP (server): the window plus two signaling periods of
    /// unreaped requests (echo keeps S, unclamped).
    pub fn echo_request_sq_depth(&self) -> u32 {
        self.sq_depth().max(
            self.window
                .saturating_add(self.signal_period.saturating_mul(2)),
        )
    }

    /// Send-queue depth of the echo server's one UD response QP.
    pub fn echo_response_sq_depth(&self) -> u32 {
        self.signal_period.saturating_mul(4).max(256)
    }

    /// Send completions one echo QP set may have to hold at once: each QP
    /// keeps up to its send queue's room (depth - 1) of requests or WRITE
    /// responses unreaped, one signaled in every S, over `qps` QPs (a client
    /// thread's request QPs; the WRITE/WRITE server's QPs, one per client QP).
    pub fn echo_send_cq_entries(&self, qps: u32) -> u64 {
        let room = u64::from(self.echo_request_sq_depth()) - 1;
        u64::from(qps) * (room / u64::from(self.signal_period.max(1)) + 1)
    }

    /// SEND responses that may wait at once in an echo client thread's
    /// receive CQ: a slot takes a new request only once its response has
    /// been polled, so one per (QP, slot).
    pub fn echo_response_cq_entries(&self) -> u64 {
        u64::from(self.qps) * u64::from(self.window)
    }

    /// Completions an issuing thread's send CQ may have to hold at once: per
    /// QP, one per signaling period of its window, plus the WR that a full
    /// window forces signaled and the drain's last WR.
    pub fn issuer_cq_entries(&self) -> u64 {
        let per_qp = u64::from(self.window.div_ceil(self.effective_signal_period())) + 2;
        u64::from(self.qps) * per_qp
    }

    pub fn total_qps(&self) -> u32 {
        self.qps * self.threads
    }

    /// Receives one side's shared receive queue must hold (`--srq`), and
    /// the echo server's UD QP keeps posted for SEND requests: every
    /// receiving QP's window at once, plus two reposting batches of slack,
    /// at least perftest's 512, in whole batches of 32. Below this the
    /// senders would certainly run it dry; above the device's max_srq_wr
    /// the run is refused.
    pub fn srq_depth(&self) -> u64 {
        let need = u64::from(self.total_qps()) * u64::from(self.window) + 64;
        need.max(512).div_ceil(32) * 32
    }

    /// Receive-queue depth of a SEND sink QP: room for two full windows
    /// plus a batch being reposted, and at least perftest's 512; with few
    /// QPs, an even share of `SINK_RECEIVES` (up to 4096 each). A sender's
    /// window reopens when its receive is consumed, not when the sink thread
    /// reposts it, so the depth is how long the sink may be descheduled
    /// before senders take RNR NAKs: 512 receives are a few ms at soft-RoCE
    /// rates and were run dry by a busy host. Whole batches of 32.
    pub fn sink_rq_depth(&self) -> u32 {
        let share = (SINK_RECEIVES / self.total_qps().max(1)).min(4096);
        (2 * self.window + 32).max(512).max(share).div_ceil(32) * 32
    }

    /// The receives a SEND sink's shared receive queue is given: as many as
    /// the receive queues it replaces would hold (`sink_rq_depth` per QP),
    /// as far as the device's `max_srq_wr` allows, never fewer than
    /// `srq_depth`. A sender's window reopens when its receive is consumed,
    /// not when the sink thread has polled and reposted it, so whatever the
    /// queue holds beyond the windows is how far the sink may fall behind
    /// before senders take RNR NAKs; with only `srq_depth` (two batches of
    /// slack) a sink starting or scheduled a few ms late ran it dry.
    pub fn sink_srq_depth(&self, max_srq_wr: u32) -> u64 {
        let own = u64::from(self.total_qps()) * u64::from(self.sink_rq_depth());
        own.min(u64::from(max_srq_wr) / 32 * 32)
            .max(self.srq_depth())
    }

    /// Knob values that are fine alone but not together (a sweep skips these points).
    pub fn combination_conflict(&self) -> Option<String> {
        if self.postlist > self.signal_period {
            return Some(format!(
                "--postlist {} exceeds --signal-period {}",
                self.postlist, self.signal_period
            ));
        }
        if self.window < self.postlist {
            return Some(format!(
                "--window {} is smaller than --postlist {}",
                self.window, self.postlist
            ));
        }
        None
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TputSpec {
    pub verb: VerbKind,
    pub direction: Direction,
    /// Which payloads to post inline (`--inline`, `-I SIZE`), decided per point.
    pub inline: InlineRequest,
    pub imm: bool,
    pub op: Option<AtomicOp>,
    /// Echo only: request and response verbs.
    pub req: EchoVerb,
    pub resp: EchoVerb,
    pub points: Vec<TputPoint>,
    /// Measure this long per point (after `warmup_s`)...
    pub duration_s: f64,
    /// ...or, when set, post exactly this many WRs per QP.
    pub iters: Option<u64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    /// Client processes expected to start together at one `serve` (1 = just this one).
    pub group: u32,
    /// SGEs each issued WR's payload is split over (`--sge`).
    #[serde(default = "one_sge")]
    pub sge: u32,
    /// Traffic class, SL, flow label and MTU of every QP's path.
    #[serde(default)]
    pub path: PathSpec,
    /// Both sides issue at once (`--bidirectional`, with `--tput outbound`):
    /// the client towards the server's targets and the server towards the client's.
    #[serde(default)]
    pub bidirectional: bool,
    /// Receivers of SENDs (sinks, the echo server) post to one shared
    /// receive queue per side instead of each QP's own (`--srq`).
    #[serde(default)]
    pub srq: bool,
    /// The issuer sleeps on a completion channel instead of busy polling (`--events`).
    #[serde(default)]
    pub events: bool,
    /// `ibv_post_send` or `ibv_wr_*` on an extended QP (`--post-api`).
    #[serde(default)]
    pub post_api: PostApi,
    /// `--interval`, `--forever`.
    #[serde(default)]
    pub live: LiveSpec,
    /// `--validate`: every payload carries `bench::pattern`'s bytes and is
    /// checked where it lands (both sides need it, so it crosses the wire).
    #[serde(default)]
    pub validate: bool,
    /// Huge pages, registrations per QP, the remote region and its offsets.
    #[serde(default)]
    pub memory: MemorySpec,
    /// Issuers' token-bucket limit (`--rate`); `None`: as fast as they can.
    #[serde(default)]
    pub rate: Option<RateLimit>,
}

/// Largest QP count, thread count, window and period the tool accepts
/// (devices may allow less; they are checked separately).
pub const MAX_QPS: u32 = 4096;
/// Receives a SEND sink keeps posted over all its QPs when few QPs share
/// them (`TputPoint::sink_rq_depth`).
const SINK_RECEIVES: u32 = 16384;
pub const MAX_THREADS: u32 = 64;
pub const MAX_WINDOW: u32 = 16384;

impl TputSpec {
    /// Whether a payload on transport `t` crosses a UD QP, so must fit one
    /// MTU: UD itself, and echo's SEND responses (HERD: from one UD QP,
    /// whatever carries the requests).
    fn over_ud(&self, t: Transport) -> bool {
        t == Transport::Ud || (self.direction == Direction::Echo && self.resp == EchoVerb::Send)
    }

    fn ud_note(&self, t: Transport) -> &'static str {
        if t == Transport::Ud {
            ""
        } else {
            " (echo's SEND responses go over UD)"
        }
    }

    pub fn max_size(&self) -> u32 {
        self.points.iter().map(|p| p.size).max().unwrap_or(0)
    }

    /// Host-side checks of every point, before any verbs object exists.
    pub fn validate(&self) -> Result<()> {
        let verb = self.verb.name();
        if self.points.is_empty() {
            return Err(Error::usage("no points to measure"));
        }
        // A spec from the wire is bounded as the command line's is.
        if self.points.len() as u64 > crate::sweep::MAX_POINTS {
            return Err(Error::usage(format!(
                "{} points exceed the limit of {} per run",
                self.points.len(),
                crate::sweep::MAX_POINTS
            )));
        }
        self.live.validate(self.points.len())?;
        if self.live.forever && self.direction == Direction::Outbound && !self.bidirectional {
            return Err(Error::usage(
                "--forever: outbound points are driven by the server, which cannot report live to this client; use inbound or echo",
            ));
        }
        if self.live.forever && self.group > 1 {
            return Err(Error::usage(format!(
                "--forever: a --group {} run starts and stops its clients together, and a forever point has no set end",
                self.group
            )));
        }
        if self.direction == Direction::Echo {
            if self.verb != VerbKind::Echo {
                return Err(Error::usage(format!(
                    "--tput echo: use `rdma-bench echo --tput`, not {verb}"
                )));
            }
        } else if self.verb == VerbKind::Echo {
            return Err(Error::usage(
                "--tput: echo throughput takes no direction (`echo --tput`)",
            ));
        }
        if self.inline.is_asked() && matches!(self.verb, VerbKind::Read | VerbKind::Atomic) {
            return Err(Error::usage(format!(
                "{}: {verb} carries no outbound payload to inline",
                self.inline.option()
            )));
        }
        if self.imm && self.verb != VerbKind::Send {
            return Err(Error::usage(format!(
                "--imm: throughput runs take --imm with send only, not {verb}"
            )));
        }
        if self.op.is_some() != (self.verb == VerbKind::Atomic) {
            return Err(Error::usage(if self.verb == VerbKind::Atomic {
                "atomic needs --op fadd|cas".to_string()
            } else {
                format!("--op: only atomic takes an operation, not {verb}")
            }));
        }
        check_range(
            "--duration",
            self.duration_s,
            MIN_DURATION,
            MAX_SECONDS,
            " seconds",
        )?;
        check_range(
            "--warmup-time",
            self.warmup_s,
            0.0,
            MAX_WARMUP_SECONDS,
            " seconds",
        )?;
        if let Some(n) = self.iters {
            check_range("--iters", n, 1, MAX_ITERS, "")?;
        }
        check_timeout(self.timeout_s)?;
        check_range("--group", self.group, 1, MAX_GROUP, "")?;
        self.path.validate()?;
        if self.path.connection == Connection::Cm && self.direction == Direction::Echo {
            return Err(Error::usage(
                "--cm: echo throughput answers through UD QPs and a server QP shared by its clients; --cm connects RC QP pairs only (use write/read/send/atomic --tput, or drop --cm)",
            ));
        }
        for p in &self.points {
            self.path.check_transport(p.transport)?;
            self.validate_point(p)?;
        }
        if let Some(r) = &self.rate {
            self.validate_rate(r)?;
        }
        check_sge(self.sge, self.verb, self.points.iter().map(|p| p.size))?;
        let inlines = self.points.iter().any(|p| self.inline.wants(p.size));
        check_post_api(self.post_api, inlines, self.sge)?;
        if self.events {
            check_tput_events(self.direction, self.req, self.resp)?;
        }
        self.memory
            .validate_tput(self.verb, self.direction, self.max_size())?;
        self.validate_bidir_srq()
    }

    /// `--bidirectional` and `--srq` against the verb and direction.
    fn validate_bidir_srq(&self) -> Result<()> {
        let verb = self.verb.name();
        if self.bidirectional {
            match self.direction {
                Direction::Echo => {
                    return Err(Error::usage(
                        "--bidirectional: echo already runs both ways (requests and responses)",
                    ))
                }
                Direction::Inbound => {
                    return Err(Error::usage(
                        "--bidirectional: each side issues outbound to the other; use --tput outbound -b",
                    ))
                }
                Direction::Outbound => {}
            }
            if self.group > 1 {
                return Err(Error::usage(format!(
                    "--group {}: --bidirectional runs one client against one serve",
                    self.group
                )));
            }
        }
        if self.srq {
            let receives = match self.direction {
                Direction::Echo => self.req == EchoVerb::Send,
                _ => self.verb == VerbKind::Send,
            };
            if !receives {
                return Err(Error::usage(if self.direction == Direction::Echo {
                    "--srq: the echo server receives only SEND requests (--req send --resp send -c ud); WRITE requests land in memory".to_string()
                } else {
                    format!("--srq: {verb} posts no receives (only send has a receiver)")
                }));
            }
            if self.memory.mr_per_qp {
                return Err(Error::usage(
                    "--srq: not with --mr-per-qp (every receive of the shared queue lands in one registration)",
                ));
            }
        }
        Ok(())
    }

    /// `-a` with a UD `--mtu`: the UD points above it are left out (as
    /// perftest caps them), not refused. Returns the note to print, if any.
    pub fn drop_ud_points_over_mtu(&mut self) -> Option<String> {
        let m = self.path.mtu?;
        let before = self.points.len();
        self.points
            .retain(|p| p.transport != Transport::Ud || p.size <= m);
        let dropped = before - self.points.len();
        (dropped > 0).then(|| format!("-a: {dropped} UD points above the --mtu of {m} left out"))
    }

    fn validate_point(&self, p: &TputPoint) -> Result<()> {
        let verb = self.verb.name();
        let t = p.transport;
        match (self.verb, t) {
            (VerbKind::Read | VerbKind::Atomic, Transport::Uc | Transport::Ud) => {
                return Err(Error::usage(format!(
                    "--transport {t}: {verb} needs RC (READ and atomics exist only on reliable connections)"
                )))
            }
            (VerbKind::Write, Transport::Ud) => {
                return Err(Error::usage("--transport ud: write needs RC or UC (UD carries only SEND)"))
            }
            _ => {}
        }
        if self.direction == Direction::Echo {
            match (self.req, self.resp, t) {
                (EchoVerb::Send, EchoVerb::Send, Transport::Ud) => {}
                (EchoVerb::Send, _, _) | (_, _, Transport::Ud) => {
                    return Err(Error::usage(format!(
                        "--req {:?} --resp {:?} -c {t}: echo supports write/send (requests over RC or UC, responses over UD), write/write over RC or UC, and send/send over UD",
                        self.req, self.resp
                    ).to_lowercase()))
                }
                _ => {}
            }
        }
        if self.verb == VerbKind::Atomic && p.size != ATOMIC_SIZE {
            return Err(Error::usage(format!(
                "--size {}: atomics always move {ATOMIC_SIZE} bytes (leave --size out)",
                p.size
            )));
        }
        if p.size == 0 {
            check_size_zero(self.verb, false)?;
        }
        check_range("--size", p.size, 0, MAX_SIZE, "")?;
        if let Some(m) = self.path.mtu.filter(|_| self.over_ud(t)) {
            if p.size > m {
                return Err(Error::usage(format!(
                    "--size {} exceeds the UD MTU of {m} given by --mtu{}",
                    p.size,
                    self.ud_note(t)
                )));
            }
        }
        check_range("--qps", p.qps, 1, MAX_QPS, "")?;
        check_range("--threads", p.threads, 1, MAX_THREADS, "")?;
        if p.total_qps() > MAX_QPS {
            return Err(Error::usage(format!(
                "--qps {} x --threads {}: {} QPs exceed the limit of {MAX_QPS}",
                p.qps,
                p.threads,
                p.total_qps()
            )));
        }
        check_range("--signal-period", p.signal_period, 1, MAX_WINDOW, "")?;
        check_range("--postlist", p.postlist, 1, MAX_WINDOW, "")?;
        check_range("--window", p.window, 1, MAX_WINDOW, "")?;
        if let Some(why) = p.combination_conflict() {
            return Err(Error::usage(why));
        }
        Ok(())
    }

    /// WRs one post puts on an issuing QP at point `p`: its postlist, or
    /// (echo) one request. A `--rate` refill is this many unless `--burst`.
    pub fn wrs_per_post(&self, p: &TputPoint) -> u32 {
        if self.direction == Direction::Echo {
            1
        } else {
            p.postlist
        }
    }

    fn validate_rate(&self, r: &RateLimit) -> Result<()> {
        r.validate()?;
        for p in &self.points {
            // An --iters run ends when its WRs are done; only its refills must fit.
            let window_s = if self.iters.is_some() {
                f64::INFINITY
            } else {
                self.duration_s
            };
            r.validate_point(
                p.window,
                self.wrs_per_post(p),
                p.total_qps(),
                window_s,
                &format!("--rate {}", r.mops),
                "raise --rate or --duration",
            )?;
        }
        Ok(())
    }

    /// This spec with the path MTU both sides agreed on.
    pub fn with_path_mtu(&self, mtu: u32) -> TputSpec {
        let mut s = self.clone();
        s.path.path_mtu = Some(mtu);
        s
    }

    /// Checks each point against what the device offers.
    pub fn validate_device(&self, dev: &DeviceLimits) -> Result<()> {
        check_device_sge(self.sge, &dev.name, dev.max_sge)?;
        self.path.check_device(&dev.path)?;
        let (ud_mtu, ud_why) = self.path.ud_limit(&dev.path);
        for p in &self.points {
            let name = &dev.name;
            let max_inline = dev.max_inline(p.transport);
            if self.inline.wants(p.size) && p.size > max_inline {
                let on = format!(" ({})", p.transport);
                return Err(self.inline.exceeds_device(p.size, &on, name, max_inline));
            }
            if self.over_ud(p.transport) && p.size > ud_mtu {
                return Err(Error::usage(format!(
                    "--size {} exceeds {ud_why}{}",
                    p.size,
                    self.ud_note(p.transport)
                )));
            }
            if p.sq_depth() > dev.max_qp_wr {
                return Err(Error::usage(format!(
                    "--window {} / --signal-period {}: a send queue of {} WRs exceeds max_qp_wr of {name} ({})",
                    p.window,
                    p.signal_period,
                    p.sq_depth(),
                    dev.max_qp_wr
                )));
            }
            if self.direction != Direction::Echo && p.issuer_cq_entries() > dev.max_cqe.into() {
                return Err(Error::usage(format!(
                    "--qps {} --window {} --signal-period {}: a thread's send CQ may need {} entries, more than {name} allows ({}); raise --signal-period or lower --qps/--window",
                    p.qps,
                    p.window,
                    p.signal_period,
                    p.issuer_cq_entries(),
                    dev.max_cqe
                )));
            }
            if self.direction == Direction::Echo {
                let depth = p.echo_request_sq_depth().max(p.echo_response_sq_depth());
                if depth > dev.max_qp_wr {
                    return Err(Error::usage(format!(
                        "--window {} / --signal-period {}: echo needs send queues of {depth} WRs, more than max_qp_wr of {name} ({})",
                        p.window, p.signal_period, dev.max_qp_wr
                    )));
                }
            }
            if self.direction == Direction::Echo {
                check_device_echo_cqs(p, dev, (self.req, self.resp))?;
            }
            // Both sides of a loopback run live on the device: 2 QPs per pair, plus UD helpers.
            if 2 * p.total_qps() + 2 > dev.max_qp {
                return Err(Error::usage(format!(
                    "--qps {} x --threads {}: needs {} QPs, more than max_qp of {name} ({})",
                    p.qps,
                    p.threads,
                    2 * p.total_qps() + 2,
                    dev.max_qp
                )));
            }
            if self.srq {
                check_device_srq(p, dev, self.bidirectional)?;
            }
            if self.verb == VerbKind::Atomic && !dev.atomics {
                return Err(Error::usage(format!(
                    "atomic: {name} reports no atomic capability (atomic_cap NONE)"
                )));
            }
        }
        Ok(())
    }
}

/// Echo's completion queues against the device's max_cqe: a CQ that
/// overflows loses completions, and rxe then moves the QP whose completion
/// did not fit to the error state (every WR left on it is flushed).
fn check_device_echo_cqs(
    p: &TputPoint,
    dev: &DeviceLimits,
    (req, resp): (EchoVerb, EchoVerb),
) -> Result<()> {
    let (name, max_cqe) = (&dev.name, u64::from(dev.max_cqe));
    let responses = p.echo_response_cq_entries();
    if resp == EchoVerb::Send && responses > max_cqe {
        return Err(Error::usage(format!(
            "--qps {} x --window {}: {responses} SEND responses may wait in a client thread's receive CQ, more than max_cqe of {name} ({max_cqe}); lower --qps or --window",
            p.qps, p.window
        )));
    }
    // SEND requests: the server's receive CQ holds a receive per request in flight.
    let requests = p.srq_depth();
    if req == EchoVerb::Send && requests > max_cqe {
        return Err(Error::usage(format!(
            "--qps {} x --threads {} x --window {}: the echo server keeps {requests} receives posted for SEND requests, more than max_cqe of {name} ({max_cqe}) for its receive CQ; lower --qps, --threads or --window",
            p.qps, p.threads, p.window
        )));
    }
    // WRITE responses: the server's QPs (one per client QP, all threads) share one send CQ.
    let qps = match resp {
        EchoVerb::Write => p.total_qps(),
        EchoVerb::Send => p.qps,
    };
    let sends = p.echo_send_cq_entries(qps);
    if sends > max_cqe {
        return Err(Error::usage(format!(
            "--qps {} --window {} --signal-period {}: {sends} signaled completions may wait in one echo send CQ, more than max_cqe of {name} ({max_cqe}); raise --signal-period or lower --qps/--window",
            p.qps, p.window, p.signal_period
        )));
    }
    Ok(())
}

/// `--srq` against the device: it must offer SRQs (two when both sides of
/// a loopback run receive), each holding the receives one side needs.
fn check_device_srq(p: &TputPoint, dev: &DeviceLimits, bidirectional: bool) -> Result<()> {
    let name = &dev.name;
    let need = if bidirectional { 2 } else { 1 };
    if dev.max_srq < need {
        return Err(Error::usage(format!(
            "--srq: needs {need} shared receive queue(s), {name} offers {} (max_srq)",
            dev.max_srq
        )));
    }
    if p.srq_depth() > u64::from(dev.max_srq_wr) {
        return Err(Error::usage(format!(
            "--srq --qps {} x --threads {} --window {}: an SRQ of {} receives exceeds max_srq_wr of {name} ({})",
            p.qps,
            p.threads,
            p.window,
            p.srq_depth(),
            dev.max_srq_wr
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tput_tests {
    use super::*;

    fn point() -> TputPoint {
        TputPoint {
            transport: Transport::Rc,
            size: 64,
            signal_period: 16,
            qps: 1,
            postlist: 1,
            window: 64,
            threads: 1,
        }
    }

    fn spec(verb: VerbKind, direction: Direction) -> TputSpec {
        TputSpec {
            verb,
            direction,
            inline: InlineRequest::Never,
            imm: false,
            op: (verb == VerbKind::Atomic).then_some(AtomicOp::Fadd),
            req: EchoVerb::Write,
            resp: EchoVerb::Send,
            points: vec![TputPoint {
                size: if verb == VerbKind::Atomic { 8 } else { 64 },
                ..point()
            }],
            duration_s: 1.0,
            iters: None,
            warmup_s: 0.2,
            timeout_s: 5.0,
            group: 1,
            sge: 1,
            events: false,
            post_api: PostApi::Classic,
            path: PathSpec::default(),
            bidirectional: false,
            srq: false,
            live: Default::default(),
            validate: false,
            memory: MemorySpec::default(),
            rate: None,
        }
    }

    fn refused(s: &TputSpec, needle: &str) {
        let e = s.validate().expect_err("should be refused");
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(needle), "'{e}' lacks '{needle}'");
    }

    fn with(mut s: TputSpec, f: impl FnOnce(&mut TputPoint)) -> TputSpec {
        f(&mut s.points[0]);
        s
    }

    #[test]
    fn valid_tput_specs_pass() {
        for v in [
            VerbKind::Read,
            VerbKind::Write,
            VerbKind::Send,
            VerbKind::Atomic,
        ] {
            spec(v, Direction::Inbound).validate().unwrap();
            spec(v, Direction::Outbound).validate().unwrap();
        }
        let mut echo = spec(VerbKind::Echo, Direction::Echo);
        echo.points[0].transport = Transport::Uc;
        echo.validate().unwrap();
    }

    #[test]
    fn tput_sge_and_size_zero() {
        for v in [VerbKind::Write, VerbKind::Send] {
            for d in [Direction::Inbound, Direction::Outbound] {
                with(spec(v, d), |p| p.size = 0).validate().unwrap();
            }
        }
        let s = with(spec(VerbKind::Read, Direction::Inbound), |p| p.size = 0);
        refused(&s, "--size 0: a READ");
        let mut s = spec(VerbKind::Write, Direction::Inbound);
        s.sge = 4;
        s.validate().unwrap();
        refused(&with(s.clone(), |p| p.size = 2), "--sge 4 --size 2");
        s.sge = 0;
        refused(&s, "--sge 0");
    }

    #[test]
    fn bidirectional_and_srq_combinations() {
        let mut b = spec(VerbKind::Write, Direction::Outbound);
        b.bidirectional = true;
        b.validate().unwrap();
        let mut i = spec(VerbKind::Send, Direction::Inbound);
        i.bidirectional = true;
        refused(&i, "--bidirectional: each side issues outbound");
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.bidirectional = true;
        refused(&e, "--bidirectional: echo");
        let mut s = spec(VerbKind::Send, Direction::Inbound);
        s.srq = true;
        s.validate().unwrap();
        let mut r = spec(VerbKind::Read, Direction::Outbound);
        r.srq = true;
        refused(&r, "--srq: read posts no receives");
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.srq = true;
        refused(&e, "--srq: the echo server receives only SEND");
        e.req = EchoVerb::Send;
        e.points[0].transport = Transport::Ud;
        e.validate().unwrap();
    }

    /// rxe0's limits as the guest reports them, but for a small max_qp_wr
    /// and max_qp and no SRQs (each test widens what it needs).
    fn rxe0() -> DeviceLimits {
        DeviceLimits {
            name: "rxe0".into(),
            port: 1,
            max_inline: [512; 3],
            path: PathEnds::single("rxe0", 1, 1024),
            max_qp_wr: 1024,
            max_qp: 64,
            max_cqe: 32_767,
            atomics: true,
            max_sge: 32,
            max_srq: 0,
            max_srq_wr: 0,
        }
    }

    #[test]
    fn srq_depth_is_refused_above_max_srq_wr_with_both_numbers() {
        let dev = DeviceLimits {
            max_qp_wr: 1 << 20,
            max_qp: 1 << 16,
            max_srq: 2,
            max_srq_wr: 4096,
            ..rxe0()
        };
        let mut s = spec(VerbKind::Send, Direction::Inbound);
        s.srq = true;
        assert_eq!(s.points[0].srq_depth(), 512);
        s.validate_device(&dev).unwrap();
        // A sink's SRQ holds what its QPs' own queues would as far as the
        // device allows, and never less than the windows need.
        assert_eq!(s.points[0].sink_rq_depth(), 4096);
        assert_eq!(s.points[0].sink_srq_depth(4096), 4096);
        assert_eq!(s.points[0].sink_srq_depth(1024), 1024);
        s.points[0].qps = 4;
        assert_eq!(s.points[0].sink_srq_depth(1 << 20), 16384);
        s.points[0].qps = 64; // 16384 / 64 is below perftest's 512
        assert_eq!(s.points[0].sink_rq_depth(), 512);
        s.points[0].qps = 16;
        assert_eq!(s.points[0].sink_srq_depth(4100), 4096);
        s.validate_device(&dev).unwrap();
        s.points[0].qps = 64; // 64 x 64 + 64 receives
        assert_eq!(s.points[0].sink_srq_depth(4096), 4160);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--srq --qps 64 x --threads 1 --window 64: an SRQ of 4160 receives exceeds max_srq_wr of rxe0 (4096)"
        );
        let none = DeviceLimits { max_srq: 0, ..dev };
        s.points[0].qps = 1;
        let e = s.validate_device(&none).unwrap_err().to_string();
        assert!(e.contains("rxe0 offers 0 (max_srq)"), "{e}");
    }

    #[test]
    fn echo_cqs_are_refused_above_max_cqe_with_both_numbers() {
        let dev = DeviceLimits {
            max_qp_wr: 1 << 20,
            max_qp: 1 << 16,
            max_srq: 2,
            max_srq_wr: 1 << 20,
            ..rxe0()
        };
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        (e.req, e.resp) = (EchoVerb::Send, EchoVerb::Send);
        e.points[0] = TputPoint {
            transport: Transport::Ud,
            qps: 1024,
            window: 31,
            signal_period: 64,
            ..e.points[0]
        };
        // 1024 x 31 + 64 receives at the server: the largest window that fits.
        e.validate_device(&dev).unwrap();
        e.points[0].window = 128;
        assert_eq!(
            e.validate_device(&dev).unwrap_err().to_string(),
            "--qps 1024 x --window 128: 131072 SEND responses may wait in a client thread's receive CQ, more than max_cqe of rxe0 (32767); lower --qps or --window"
        );
        // Spread over threads, each client CQ fits but the server's does not.
        e.points[0] = TputPoint {
            qps: 512,
            threads: 2,
            window: 32,
            ..e.points[0]
        };
        let err = e.validate_device(&dev).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "--qps 512 x --threads 2 x --window 32: the echo server keeps 32832 receives"
            ) && err.contains("max_cqe of rxe0 (32767)"),
            "{err}"
        );
        // WRITE/WRITE: every signaled response of 1024 server QPs in one send CQ.
        (e.req, e.resp) = (EchoVerb::Write, EchoVerb::Write);
        e.points[0] = TputPoint {
            transport: Transport::Rc,
            qps: 1024,
            threads: 1,
            window: 128,
            signal_period: 1,
            ..e.points[0]
        };
        let err = e.validate_device(&dev).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "--qps 1024 --window 128 --signal-period 1: 133120 signaled completions"
            ) && err.contains("(32767)"),
            "{err}"
        );
        e.points[0].signal_period = 64;
        e.validate_device(&dev).unwrap();
    }

    #[test]
    fn tput_combinations_are_refused_naming_the_option() {
        let s = spec(VerbKind::Write, Direction::Inbound);
        refused(&with(s.clone(), |p| p.postlist = 32), "--postlist 32");
        refused(&with(s.clone(), |p| p.window = 0), "--window 0");
        refused(
            &with(s.clone(), |p| {
                p.postlist = 8;
                p.window = 4
            }),
            "--window 4",
        );
        refused(&with(s.clone(), |p| p.qps = 0), "--qps 0");
        refused(&with(s.clone(), |p| p.threads = 100), "--threads 100");
        refused(
            &with(s.clone(), |p| p.signal_period = 0),
            "--signal-period 0",
        );
        refused(
            &with(s.clone(), |p| p.transport = Transport::Ud),
            "--transport ud",
        );
        refused(
            &with(spec(VerbKind::Read, Direction::Inbound), |p| {
                p.transport = Transport::Uc
            }),
            "--transport uc",
        );
        refused(
            &with(spec(VerbKind::Atomic, Direction::Outbound), |p| p.size = 16),
            "--size 16",
        );
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.req = EchoVerb::Send;
        refused(&e, "--req send");
        let mut w = spec(VerbKind::Write, Direction::Inbound);
        w.imm = true;
        refused(&w, "--imm");
        let mut d = spec(VerbKind::Write, Direction::Inbound);
        d.duration_s = 0.0;
        refused(&d, "--duration");
        let echo_dir = spec(VerbKind::Write, Direction::Echo);
        refused(&echo_dir, "--tput echo");
    }

    #[test]
    fn device_limits_refuse_with_device_and_limit() {
        let dev = rxe0();
        let mut s = spec(VerbKind::Send, Direction::Inbound);
        s.points[0].transport = Transport::Ud;
        s.points[0].size = 2048;
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--size 2048 exceeds the UD MTU of rxe0 (1024)"
        );
        s.points[0].size = 1024;
        s.path.mtu = Some(512);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--size 1024 exceeds the UD MTU of rxe0 (512, from --mtu 512)"
        );
        s.path.mtu = Some(2048);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--mtu 2048 exceeds the active MTU of rxe0 port 1 (1024)"
        );
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| {
            p.window = 2048
        });
        assert!(s
            .validate_device(&dev)
            .unwrap_err()
            .to_string()
            .contains("max_qp_wr of rxe0 (1024)"));
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| p.qps = 40);
        assert!(s
            .validate_device(&dev)
            .unwrap_err()
            .to_string()
            .contains("max_qp of rxe0 (64)"));
        let mut s = spec(VerbKind::Write, Direction::Inbound);
        s.inline = InlineRequest::Always;
        s.points[0].size = 1024;
        assert!(s
            .validate_device(&dev)
            .unwrap_err()
            .to_string()
            .contains("max_inline of rxe0 (512)"));
        // -I inlines only the points up to its size: 1024 B above -I 512 runs.
        s.inline = InlineRequest::UpTo(512);
        s.validate_device(&dev).unwrap();
        s.inline = InlineRequest::UpTo(2048);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--inline-size 2048 --size 1024 (rc): a payload of at most 2048 B is inlined, and 1024 B exceeds the max_inline of rxe0 (512); use -I 512 or less"
        );
        // -S 1 on 512 QPs: up to 65 536 signaled WRs in one thread's CQ.
        let big = DeviceLimits {
            max_qp: 1 << 20,
            max_qp_wr: 1 << 20,
            ..dev.clone()
        };
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| {
            p.qps = 512;
            p.window = 128;
            p.signal_period = 1;
            p.postlist = 1;
        });
        let e = s.validate_device(&big).unwrap_err().to_string();
        assert!(
            e.contains("--signal-period 1") && e.contains("(32767)"),
            "{e}"
        );
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| {
            p.qps = 512;
            p.window = 128;
            p.signal_period = 64;
        });
        assert!(s.validate_device(&big).is_ok());
        // Echo keeps S: its send queues must fit max_qp_wr.
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.points[0].signal_period = 8192;
        let err = e.validate_device(&dev).unwrap_err().to_string();
        assert!(err.contains("echo needs send queues of 32768 WRs"), "{err}");
    }
}
