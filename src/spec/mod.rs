//! What a run measures, independent of how it was asked for: the verbs and
//! their facts, the latency spec (`latency.rs`), the throughput sweep
//! (`tput.rs`) and the QPs' path (`path.rs`). Both sides of a run hold the
//! same spec (it crosses the wire in the handshake), and `validate` refuses
//! impossible combinations before any verbs object exists; the one range
//! check and the limits live here.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::verbs::Transport;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerbKind {
    Read,
    Write,
    Send,
    Echo,
    Atomic,
}

impl VerbKind {
    pub const ALL: [VerbKind; 5] = [
        VerbKind::Read,
        VerbKind::Write,
        VerbKind::Send,
        VerbKind::Echo,
        VerbKind::Atomic,
    ];

    pub fn from_name(name: &str) -> Option<VerbKind> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }

    /// Verbs that only have a completion latency (no ping-pong): the
    /// answer comes back in the completion itself.
    pub fn completion_only(self) -> bool {
        matches!(self, VerbKind::Read | VerbKind::Atomic)
    }

    /// The payload size when `--size` is not given: atomics work on one
    /// 8-byte word; latency defaults to 2 B (as perftest), throughput to 64 B.
    pub fn default_size(self, tput: bool) -> u32 {
        match (self, tput) {
            (VerbKind::Atomic, _) => ATOMIC_SIZE,
            (_, false) => 2,
            (_, true) => 64,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            VerbKind::Read => "read",
            VerbKind::Write => "write",
            VerbKind::Send => "send",
            VerbKind::Echo => "echo",
            VerbKind::Atomic => "atomic",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AtomicOp {
    /// Fetch-and-add 1 on the remote word.
    Fadd,
    /// Compare-and-swap the remote word from k to k+1.
    Cas,
}

/// How a latency sample is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyMode {
    /// A sends, B answers when it sees the data; a sample is half the round trip.
    PingPong,
    /// From `ibv_post_send` of a signaled WR to its completion polled from the CQ.
    Completion,
}

impl LatencyMode {
    /// The metric name used in results files.
    pub fn metric(self) -> &'static str {
        match self {
            LatencyMode::PingPong => "half_rtt",
            LatencyMode::Completion => "completion",
        }
    }
}

mod inline;
mod latency;
mod memory;
mod path;
mod posting;
mod rate;
mod tput;

pub use inline::InlineRequest;
pub use latency::LatencySpec;
pub use memory::{check_hugepages, parse_bytes, parse_region, MemorySpec, Offsets};
pub use path::{Connection, MtuEnd, PathEnds, PathSpec, MAX_FLOW_LABEL, MAX_SL, MTUS};
pub use posting::{check_latency_events, check_post_api, check_tput_events, PostApi};
pub use rate::{parse_loads, Load, RateLimit, MAX_RATE_MOPS};
pub use tput::{
    default_window, Direction, EchoVerb, TputPoint, TputSpec, DEFAULT_THREAD_OUTSTANDING,
    DEFAULT_WINDOW, MAX_QPS, MAX_THREADS, MAX_WINDOW,
};

/// The one range check every numeric option goes through: refuses `value`
/// outside `lo..=hi` (NaN included) with `--option value: must be lo..=hi`,
/// as bad input (exit 2). `unit` follows the range, e.g. " seconds".
pub fn check_range<T: PartialOrd + std::fmt::Debug>(
    option: &str,
    value: T,
    lo: T,
    hi: T,
    unit: &str,
) -> Result<()> {
    if value >= lo && value <= hi {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "{option} {value:?}: must be {lo:?}..={hi:?}{unit}"
        )))
    }
}

/// How a point reports while it runs (`--interval`, `--forever`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LiveSpec {
    /// Cut each point into intervals this long, printed and recorded as they end.
    pub interval_s: Option<f64>,
    /// One point runs until a signal ends it at an interval boundary.
    pub forever: bool,
}

/// The shortest and longest `--interval`.
pub const MIN_INTERVAL_S: f64 = 0.05;
pub const MAX_INTERVAL_S: f64 = 3600.0;
/// `--forever` without `--interval` reports every second (as perftest does).
pub const FOREVER_INTERVAL_S: f64 = 1.0;

impl LiveSpec {
    /// Range checks; `points`: how many points the run has.
    pub fn validate(&self, points: usize) -> Result<()> {
        if let Some(i) = self.interval_s {
            if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&i) {
                return Err(Error::usage(format!(
                    "--interval {i}: between {MIN_INTERVAL_S} and {MAX_INTERVAL_S} seconds"
                )));
            }
        }
        if self.forever {
            if self.interval_s.is_none() {
                return Err(Error::usage("--forever needs an interval (--interval)"));
            }
            if points > 1 {
                return Err(Error::usage(format!(
                    "--forever: runs one point until stopped, and this run has {points} (give one size and one value per swept option)"
                )));
            }
        }
        Ok(())
    }

    /// How long one point may last, for the peer's deadlines: `--forever`
    /// has no end, so its deadlines are those of a very long point.
    pub fn point_s(&self, asked_s: f64) -> f64 {
        if self.forever {
            1e9
        } else {
            asked_s
        }
    }
}

/// Longest iteration count, warm-up count or WR count per QP.
pub const MAX_ITERS: u64 = 1_000_000_000;
/// Longest measured time per point, and longest wait on a peer (a day).
pub const MAX_SECONDS: f64 = 86_400.0;
/// Shortest measured time per point: below a millisecond nothing is measured.
pub const MIN_DURATION: f64 = 0.001;
/// Longest throughput warm-up before a point's measured window.
pub const MAX_WARMUP_SECONDS: f64 = 3600.0;
/// Most client processes in one `--group`.
pub const MAX_GROUP: u32 = 256;

/// `--timeout`: long enough to be meaningful, short enough to be a bound.
pub fn check_timeout(seconds: f64) -> Result<()> {
    check_range("--timeout", seconds, 0.1, MAX_SECONDS, " seconds")
}

/// Payload bytes that a ping-pong needs at least: the last byte carries the marker.
/// Completion latency and throughput of WRITE and SEND also take 0 (a header-only op).
pub const MIN_SIZE: u32 = 1;
/// Most SGEs per WR the tool accepts (devices allow fewer; checked separately).
pub const MAX_SGE: u32 = 1024;

/// `--sge` for the serde default of files written before it existed.
/// What a record from before `--cm` was connected by.
pub fn gid_connection() -> String {
    "gid".to_string()
}

pub fn one_sge() -> u32 {
    1
}

/// Host-side checks of `--sge n` against the verb and each payload size:
/// every SGE carries at least one byte, a 0-byte WR gathers none.
pub fn check_sge(n: u32, verb: VerbKind, sizes: impl IntoIterator<Item = u32>) -> Result<()> {
    check_range("--sge", n, 1, MAX_SGE, "")?;
    if n == 1 {
        return Ok(());
    }
    match verb {
        VerbKind::Atomic => {
            return Err(Error::usage(format!(
                "--sge {n}: an atomic gathers one 8-byte word (one SGE)"
            )))
        }
        VerbKind::Echo => {
            return Err(Error::usage(format!(
                "--sge {n}: echo answers from where the request landed (one SGE); use write or send"
            )))
        }
        _ => {}
    }
    for s in sizes {
        if n > s {
            return Err(Error::usage(format!(
                "--sge {n} --size {s}: each SGE carries at least one byte (a 0-byte WR gathers none)"
            )));
        }
    }
    Ok(())
}

/// Size 0 (a header-only WRITE, SEND or WRITE-with-immediate): refused where
/// the run needs payload bytes, with the reason.
pub fn check_size_zero(verb: VerbKind, ping_pong: bool) -> Result<()> {
    let why = match verb {
        VerbKind::Read => "a READ of 0 bytes fetches nothing to measure",
        VerbKind::Atomic => "atomics always move 8 bytes",
        VerbKind::Echo => "echo detects each request by the payload's last byte",
        _ if ping_pong => {
            "a ping-pong detects arrival by the payload's last byte (use --completion or --tput)"
        }
        _ => return Ok(()),
    };
    Err(Error::usage(format!("--size 0: {why}")))
}
/// The largest payload a latency run allows (the buffer is registered once for it).
pub const MAX_SIZE: u32 = 1 << 30;
/// Atomics always move 8 bytes.
pub const ATOMIC_SIZE: u32 = 8;

/// The device facts validation needs.
#[derive(Debug, Clone)]
pub struct DeviceLimits {
    pub name: String,
    /// The port the run uses (named in refusals).
    pub port: u8,
    /// The inline limit granted on RC, UC and UD QPs (they differ on some
    /// devices), 0 where not probed because the run does not inline.
    pub max_inline: [u32; 3],
    /// The ports whose active MTUs bound the path (this one's, and the
    /// peer's once known).
    pub path: PathEnds,
    pub max_qp_wr: u32,
    pub max_qp: u32,
    /// Entries a CQ may have (capped at what rdma-bench ever asks for).
    pub max_cqe: u32,
    pub atomics: bool,
    /// SGEs a send WR may gather (`max_sge`).
    pub max_sge: u32,
    /// Shared receive queues the device offers (`max_srq`, 0: none) and the
    /// receives each may hold (`max_srq_wr`).
    pub max_srq: u32,
    pub max_srq_wr: u32,
}

/// `--sge n` against the device's `max_sge`.
pub fn check_device_sge(n: u32, device: &str, max_sge: u32) -> Result<()> {
    if n > max_sge {
        return Err(Error::usage(format!(
            "--sge {n}: exceeds the max_sge of {device} ({max_sge})"
        )));
    }
    Ok(())
}

impl DeviceLimits {
    pub fn max_inline(&self, t: Transport) -> u32 {
        self.max_inline[t as usize]
    }
}

/// What a client asks a server to run: a latency or a throughput test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TestSpec {
    Latency(LatencySpec),
    Tput(TputSpec),
}

impl TestSpec {
    /// How the test's QPs are addressed and connected.
    pub fn path(&self) -> &PathSpec {
        match self {
            TestSpec::Latency(l) => &l.path,
            TestSpec::Tput(t) => &t.path,
        }
    }
}

#[cfg(test)]
mod range_tests {
    use super::check_range;

    #[test]
    fn one_range_check_names_option_value_and_limits() {
        check_range("--qps", 4u32, 1, 4096, "").unwrap();
        let e = check_range("--qps", 0u32, 1, 4096, "").unwrap_err();
        assert_eq!(e.to_string(), "--qps 0: must be 1..=4096");
        assert_eq!(e.exit_code(), 2);
        let e = check_range("--duration", f64::NAN, 0.001, 86_400.0, " seconds").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--duration NaN: must be 0.001..="),
            "{e}"
        );
        let e = check_range("--duration", 1e-300, 0.001, 86_400.0, " seconds").unwrap_err();
        assert!(e.to_string().starts_with("--duration 1e-300:"), "{e}");
    }
}
