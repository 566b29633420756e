//! What a run measures, independent of how it was asked for: the verbs and
//! their facts, the latency spec (`latency.rs`) and the throughput sweep
//! (`tput.rs`). Both sides of a run hold the same spec (it crosses the wire
//! in the handshake), and `validate` refuses impossible combinations before
//! any verbs object exists; the one range check and the limits live here.

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
mod posting;
mod rate;
mod tput;

pub use inline::InlineRequest;
pub use latency::LatencySpec;
pub use memory::{check_hugepages, parse_bytes, parse_region, MemorySpec, Offsets};
pub use posting::{check_latency_events, check_post_api, check_tput_events, PostApi};
pub use rate::{parse_loads, Load, RateLimit, MAX_RATE_MOPS};
pub use tput::{Direction, EchoVerb, TputPoint, TputSpec, MAX_QPS, MAX_THREADS, MAX_WINDOW};

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

/// The MTUs `--mtu` accepts (the IB path MTUs).
pub const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];
/// Largest service level (4 bits).
pub const MAX_SL: u8 = 15;
/// Largest GRH flow label (20 bits).
pub const MAX_FLOW_LABEL: u32 = 0xF_FFFF;

/// How a run's QPs are connected: by GIDs and QP numbers exchanged over the
/// control channel (the default), or by rdma_cm (`--cm`: address and route
/// resolution, connect/accept), which iWARP needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Connection {
    #[default]
    Gid,
    Cm,
}

impl Connection {
    pub fn name(self) -> &'static str {
        match self {
            Connection::Gid => "gid",
            Connection::Cm => "cm",
        }
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

/// QoS and path of every QP a run connects (`--tclass`, `--sl`,
/// `--flow-label`, `--mtu`): `None` where not given (traffic class, SL and
/// flow label 0, the port's active MTU), and how the QPs are connected
/// (`--cm`). Both sides apply the client's values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct PathSpec {
    pub tclass: Option<u8>,
    pub sl: Option<u8>,
    pub flow_label: Option<u32>,
    pub mtu: Option<u32>,
    pub connection: Connection,
    /// The path MTU both ends agreed on in the handshake
    /// ([`PathSpec::negotiate_mtu`]); each side sets it for itself, so it
    /// never crosses the wire.
    #[serde(skip)]
    pub path_mtu: Option<u32>,
}

impl PathSpec {
    /// Builds the path from the options as given (any integer), refusing
    /// values outside their ranges.
    pub fn from_options(
        tclass: Option<i64>,
        sl: Option<i64>,
        flow_label: Option<i64>,
        mtu: Option<i64>,
    ) -> Result<PathSpec> {
        if let Some(v) = tclass {
            check_range("--tclass", v, 0, 255, "")?;
        }
        if let Some(v) = sl {
            check_range("--sl", v, 0, i64::from(MAX_SL), "")?;
        }
        if let Some(v) = flow_label {
            check_range("--flow-label", v, 0, i64::from(MAX_FLOW_LABEL), "")?;
        }
        if let Some(v) = mtu {
            check_mtu(v)?;
        }
        let path = PathSpec {
            tclass: tclass.map(|v| v as u8),
            sl: sl.map(|v| v as u8),
            flow_label: flow_label.map(|v| v as u32),
            mtu: mtu.map(|v| v as u32),
            connection: Connection::Gid,
            path_mtu: None,
        };
        path.validate()?;
        Ok(path)
    }

    /// Host-side checks (a spec from the wire goes through them too).
    pub fn validate(&self) -> Result<()> {
        if let Some(v) = self.sl {
            check_range("--sl", v, 0, MAX_SL, "")?;
        }
        if let Some(v) = self.flow_label {
            check_range("--flow-label", v, 0, MAX_FLOW_LABEL, "")?;
        }
        if let Some(v) = self.mtu {
            check_mtu(i64::from(v))?;
        }
        Ok(())
    }

    /// Refuses `--cm` with a transport rdma_cm cannot connect here.
    pub fn check_transport(&self, t: Transport) -> Result<()> {
        match (self.connection, t) {
            (Connection::Cm, Transport::Uc) => Err(Error::usage(
                "--cm -c uc: librdmacm has no UC (rdma_cm connects RC and UD QPs only); use -c rc, or drop --cm",
            )),
            (Connection::Cm, Transport::Ud) => Err(Error::usage(
                "--cm -c ud: rdma-bench connects only RC QPs through rdma_cm (UD over RDMA_PS_UDP is not wired); use -c rc, or drop --cm",
            )),
            _ => Ok(()),
        }
    }

    /// The MTU QPs run with: the one both ends agreed on, else the
    /// requested one, else the port's active MTU.
    pub fn effective_mtu(&self, active: u32) -> u32 {
        self.path_mtu
            .unwrap_or_else(|| self.mtu.map_or(active, |m| m.min(active)))
    }

    /// The MTU a run's QPs can use on the path between `ends`: `--mtu` when
    /// every end's port carries it, else the smallest active MTU. Each side
    /// computes it from the same two ports' facts (exchanged in the
    /// handshake), so both set the same path MTU.
    pub fn negotiate_mtu(&self, ends: &PathEnds) -> Result<u32> {
        self.check_device(ends)?;
        Ok(self.mtu.unwrap_or_else(|| ends.active()))
    }

    /// Refuses an `--mtu` above the active MTU of either end's port.
    pub fn check_device(&self, ends: &PathEnds) -> Result<()> {
        let (narrow, other) = ends.narrowest();
        match self.mtu {
            Some(m) if m > narrow.active => Err(Error::usage(match other {
                None => format!(
                    "--mtu {m} exceeds the active MTU of {} ({})",
                    narrow.name(),
                    narrow.active
                ),
                Some(o) => format!(
                    "--mtu {m} exceeds the active MTU of {} ({}; {} has {})",
                    narrow.name(),
                    narrow.active,
                    o.name(),
                    o.active
                ),
            })),
            _ => Ok(()),
        }
    }

    /// The UD payload limit and where it comes from, for refusals:
    /// "the UD MTU of rxe0 (512, from --mtu 512)", or for two hosts "the UD
    /// MTU of the path (512: rxe0 port 1 on h2 has 512, rxe0 port 1 on h1 has 1024)".
    pub fn ud_limit(&self, ends: &PathEnds) -> (u32, String) {
        let active = ends.active();
        let mtu = self.effective_mtu(active);
        let from = match self.mtu {
            Some(m) if m < active => format!(", from --mtu {m}"),
            _ => String::new(),
        };
        let why = match ends.narrowest() {
            (n, None) => format!("the UD MTU of {} ({mtu}{from})", n.device),
            (n, Some(o)) => format!(
                "the UD MTU of the path ({mtu}{from}: {} has {}, {} has {})",
                n.name(),
                n.active,
                o.name(),
                o.active
            ),
        };
        (mtu, why)
    }
}

/// One end of a run's path: a device port, the host it is on where the
/// other end is on another, and its active MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtuEnd {
    pub device: String,
    pub port: u8,
    pub host: Option<String>,
    pub active: u32,
}

impl MtuEnd {
    /// "rxe0 port 1", or "rxe0 port 1 on h2".
    pub fn name(&self) -> String {
        match &self.host {
            Some(h) => format!("{} port {} on {h}", self.device, self.port),
            None => format!("{} port {}", self.device, self.port),
        }
    }
}

/// The ports whose active MTUs bound a run's path: this side's, and the
/// peer's once its handshake said, where that is another port (another
/// host, or `serve` on another device of this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEnds {
    pub local: MtuEnd,
    pub peer: Option<MtuEnd>,
}

impl PathEnds {
    /// One port is both ends (loopback, or before the handshake).
    pub fn single(device: &str, port: u8, active: u32) -> Self {
        PathEnds {
            local: MtuEnd {
                device: device.to_string(),
                port,
                host: None,
                active,
            },
            peer: None,
        }
    }

    /// This port and the peer's: `peer` is left out when it is this very
    /// port. Hosts are named only when they differ.
    pub fn between(local: MtuEnd, peer: MtuEnd) -> Self {
        let same_host = local.host == peer.host;
        if same_host && local.device == peer.device && local.port == peer.port {
            return PathEnds { local, peer: None };
        }
        let keep = |mut e: MtuEnd| {
            if same_host {
                e.host = None;
            }
            e
        };
        PathEnds {
            local: keep(local),
            peer: Some(keep(peer)),
        }
    }

    /// The largest MTU every end carries.
    pub fn active(&self) -> u32 {
        self.peer
            .as_ref()
            .map_or(self.local.active, |p| p.active.min(self.local.active))
    }

    /// The end with the smaller active MTU (the peer's on a tie), and the other.
    fn narrowest(&self) -> (&MtuEnd, Option<&MtuEnd>) {
        match &self.peer {
            Some(p) if p.active <= self.local.active => (p, Some(&self.local)),
            Some(p) => (&self.local, Some(p)),
            None => (&self.local, None),
        }
    }
}

fn check_mtu(v: i64) -> Result<()> {
    if MTUS.iter().any(|&m| i64::from(m) == v) {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "--mtu {v}: must be one of 256, 512, 1024, 2048, 4096"
        )))
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

#[cfg(test)]
mod range_tests {
    use super::{check_range, MtuEnd, PathEnds, PathSpec};

    #[test]
    fn path_options_are_range_checked_with_the_option_and_limit() {
        let p = PathSpec::from_options(Some(32), Some(1), Some(7), Some(512)).unwrap();
        assert_eq!(
            p,
            PathSpec {
                tclass: Some(32),
                sl: Some(1),
                flow_label: Some(7),
                mtu: Some(512),
                connection: super::Connection::Gid,
                path_mtu: None,
            }
        );
        assert_eq!(
            PathSpec::default(),
            PathSpec::from_options(None, None, None, None).unwrap()
        );
        for (args, msg) in [
            (
                (Some(256), None, None, None),
                "--tclass 256: must be 0..=255",
            ),
            ((Some(-1), None, None, None), "--tclass -1: must be 0..=255"),
            ((None, Some(16), None, None), "--sl 16: must be 0..=15"),
            (
                (None, None, Some(1 << 20), None),
                "--flow-label 1048576: must be 0..=1048575",
            ),
            (
                (None, None, None, Some(3000)),
                "--mtu 3000: must be one of 256, 512, 1024, 2048, 4096",
            ),
        ] {
            let e = PathSpec::from_options(args.0, args.1, args.2, args.3).unwrap_err();
            assert_eq!(e.to_string(), msg);
            assert_eq!(e.exit_code(), 2);
        }
        let wire = PathSpec {
            sl: Some(16),
            ..PathSpec::default()
        };
        assert!(wire.validate().is_err());
    }

    #[test]
    fn mtu_above_the_active_one_is_refused_with_both_numbers() {
        let p = PathSpec {
            mtu: Some(4096),
            ..PathSpec::default()
        };
        let one = PathEnds::single("rxe0", 1, 1024);
        let e = p.check_device(&one).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mtu 4096 exceeds the active MTU of rxe0 port 1 (1024)"
        );
        assert_eq!(e.exit_code(), 2);
        let p = PathSpec {
            mtu: Some(512),
            ..PathSpec::default()
        };
        p.check_device(&one).unwrap();
        assert_eq!(p.effective_mtu(1024), 512);
        assert_eq!(PathSpec::default().effective_mtu(1024), 1024);
        assert_eq!(
            p.ud_limit(&one).1,
            "the UD MTU of rxe0 (512, from --mtu 512)"
        );
    }

    fn end(host: &str, active: u32) -> MtuEnd {
        MtuEnd {
            device: "rxe0".into(),
            port: 1,
            host: Some(host.into()),
            active,
        }
    }

    #[test]
    fn two_hosts_run_at_the_smaller_active_mtu_or_are_refused_naming_both() {
        let ends = PathEnds::between(end("h1", 1024), end("h2", 512));
        assert_eq!(PathSpec::default().negotiate_mtu(&ends).unwrap(), 512);
        let asked = |m| PathSpec {
            mtu: Some(m),
            ..PathSpec::default()
        };
        assert_eq!(asked(256).negotiate_mtu(&ends).unwrap(), 256);
        let e = asked(1024).negotiate_mtu(&ends).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mtu 1024 exceeds the active MTU of rxe0 port 1 on h2 (512; rxe0 port 1 on h1 has 1024)"
        );
        assert_eq!(e.exit_code(), 2);
        // Whichever side computes it, the narrower end is named first.
        let theirs = PathEnds::between(end("h2", 512), end("h1", 1024));
        assert_eq!(
            asked(1024).negotiate_mtu(&theirs).unwrap_err().to_string(),
            e.to_string()
        );
        assert_eq!(
            PathSpec::default().ud_limit(&ends),
            (
                512,
                "the UD MTU of the path (512: rxe0 port 1 on h2 has 512, rxe0 port 1 on h1 has 1024)"
                    .into()
            )
        );
        // The negotiated MTU is what QPs run with.
        let agreed = PathSpec {
            path_mtu: Some(512),
            ..PathSpec::default()
        };
        assert_eq!(agreed.effective_mtu(1024), 512);
        // One port at both ends (loopback, serve on the same device) is one end.
        let same = PathEnds::between(end("h1", 1024), end("h1", 1024));
        assert_eq!(same.peer, None);
        assert_eq!(
            PathSpec::default().ud_limit(&same).1,
            "the UD MTU of rxe0 (1024)"
        );
    }

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
