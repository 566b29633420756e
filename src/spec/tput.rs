//! A throughput sweep: its points and their knobs (`validate.rs`: the host-side
//! checks of a spec; `device.rs`: its checks against what a device offers).

use serde::{Deserialize, Serialize};

use super::*;
use crate::error::{Error, Result};
use crate::verbs::Transport;

mod device;
mod validate;

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

/// `--window` when not given: per QP, and over all of a thread's QPs.
pub const DEFAULT_WINDOW: u32 = 128;
pub const DEFAULT_THREAD_OUTSTANDING: u32 = 16384;

/// The window a point runs without `--window`: `DEFAULT_WINDOW` per QP while
/// the thread's QPs hold at most `DEFAULT_THREAD_OUTSTANDING` WRs, fewer per
/// QP beyond, and never less than one postlist.
pub fn default_window(qps: u32, postlist: u32) -> u32 {
    (DEFAULT_THREAD_OUTSTANDING / qps.max(1))
        .clamp(1, DEFAULT_WINDOW)
        .max(postlist)
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
    /// signaling periods of unreaped WRs, and no more: the drain at the end
    /// of a point waits for room like every post. rxe rounds a queue of N
    /// WRs up to the power of two above N slots, so one WR more can double
    /// what every send queue maps (docs/vs-perftest.md, memory at 1024 QPs).
    pub fn sq_depth(&self) -> u32 {
        self.window
            .max(2 * self.effective_signal_period())
            .max(self.postlist)
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

    /// WRs one post puts on an issuing QP at point `p`: its postlist, or
    /// (echo) one request. A `--rate` refill is this many unless `--burst`.
    pub fn wrs_per_post(&self, p: &TputPoint) -> u32 {
        if self.direction == Direction::Echo {
            1
        } else {
            p.postlist
        }
    }

    /// This spec with the path MTU both sides agreed on.
    pub fn with_path_mtu(&self, mtu: u32) -> TputSpec {
        let mut s = self.clone();
        s.path.path_mtu = Some(mtu);
        s
    }
}

#[cfg(test)]
mod tests {
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

    pub(super) fn spec(verb: VerbKind, direction: Direction) -> TputSpec {
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

    pub(super) fn with(mut s: TputSpec, f: impl FnOnce(&mut TputPoint)) -> TputSpec {
        f(&mut s.points[0]);
        s
    }
}
