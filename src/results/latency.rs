//! A latency point's record, the background load of a latency-under-load
//! point, and the CSV columns of latency records.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::fields::columns;
use super::{
    CheckFields, CpuUtil, LiveFields, MemoryFields, PathFields, PostingFields, LIVE_AND_CPU_COLUMNS,
};
use crate::report::CounterDeltas;
use crate::stats::LatencyStats;

/// One latency point. Field names carry units; `metric` says what was timed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LatencyRecord {
    /// The experiment series this point belongs to (`rdma-bench run`).
    #[serde(default)]
    pub series: Option<String>,
    pub verb: String,
    /// `half_rtt` (ping-pong, half of each round trip) or `completion`
    /// (post of a signaled WR to its completion polled from the CQ).
    pub metric: String,
    pub transport: String,
    pub size: u32,
    /// `inline` to `post_api` (see `PostingFields`).
    #[serde(flatten)]
    pub posting: PostingFields,
    /// `--events`: completion-channel wake-ups of the client over the
    /// measured iterations (a witness that it slept); absent without events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_wakeups: Option<u64>,
    /// `tclass`, `sl`, `flow_label`, `mtu` (see `PathFields`).
    #[serde(flatten)]
    pub path: PathFields,
    /// `--bidirectional` and `--srq` are throughput options: a latency
    /// point is always neither (recorded so every record carries them).
    #[serde(default)]
    pub bidirectional: bool,
    #[serde(default)]
    pub srq: bool,
    /// `hugepages`, `mr_per_qp`, `region`, `offsets` (see `MemoryFields`).
    #[serde(flatten)]
    pub memory: MemoryFields,
    /// How the QPs were connected: "gid" (GIDs and QP numbers over the
    /// control channel) or "cm" (rdma_cm, `--cm`); files before it: "gid".
    #[serde(default = "crate::spec::gid_connection")]
    pub connection: String,
    /// The MTU the QPs ran with: `--mtu`, else the smaller of the two
    /// ports' active MTUs (each side's handshake says its own, and both set
    /// the same); also a UD payload's limit. Absent in files before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u32>,
    /// Samples recorded (iterations after warm-up).
    pub iters: u64,
    /// Warm-up iterations run first and dropped.
    pub warmup_dropped: u64,
    /// Wall time of the measured iterations.
    pub elapsed_s: f64,
    #[serde(flatten)]
    pub stats: LatencyStats,
    /// Ping-pong only: the full round trip (what was actually timed).
    pub rtt_p50_ns: Option<f64>,
    pub rtt_mean_ns: Option<f64>,
    /// Messages the client sent that the server had to see (warm-up included).
    pub sent: u64,
    /// Messages the server counted; `null` where the server is passive.
    pub server_received: Option<u64>,
    /// Atomics: returned values that were not the expected ones.
    pub verify_failures: u64,
    /// The measuring time asked for per size (`-D`); `null` in an --iters
    /// run (files before this field: an --iters run, the default).
    #[serde(default)]
    pub requested_s: Option<f64>,
    /// The device's own counters over the measured iterations (in loopback
    /// both sides' packets count on the one device); absent where the
    /// device has none.
    #[serde(default)]
    pub device_counters: Option<CounterDeltas>,
    /// The raw distribution of `metric`: [value_ns, count] per non-empty
    /// HdrHistogram bucket, to recompute percentiles or draw a CDF.
    pub histogram: Vec<(f64, u64)>,
    /// CPU use over the measured iterations (files before it: absent).
    #[serde(default)]
    pub cpu_util: Option<CpuUtil>,
    /// `interval_s` to `to_stop` (see `LiveFields`).
    #[serde(flatten)]
    pub live: LiveFields,
    /// `expectations` and `validation` (see `CheckFields`).
    #[serde(flatten)]
    pub checks: CheckFields,
    /// `--under-load`: the load as asked (`10%`, `0.5` Mops, `max`),
    /// what `compare` matches on; absent in an unloaded run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    /// Under load: the Mops the background was offered (absent at `max`)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_mops: Option<f64>,
    /// ...and achieved over its window, which spans the probe's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_mops: Option<f64>,
    /// Under load: the background's unlimited rate, measured first (when a
    /// load is a percentage of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated_mops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<BackgroundLoad>,
    /// Never in a file: where `analysis::passes` folded a point's passes
    /// into this record, the pass records it was made from (their spread
    /// is part of its interval); empty for a record as measured.
    #[serde(skip)]
    #[schemars(skip)]
    pub passes: Vec<super::Record>,
}

/// The background load of a latency-under-load point (`--under-load`):
/// inbound issuers of the same verb (echo: WRITE) on their own QPs and
/// threads, on the probe's device, whose window spans the probe's run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BackgroundLoad {
    pub verb: String,
    pub direction: String,
    pub size: u32,
    pub qps: u32,
    pub threads: u32,
    pub window: u32,
    pub postlist: u32,
    pub signal_period: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// WRs the background posted in its window, and the window's length.
    pub ops: u64,
    pub elapsed_s: f64,
    pub per_qp_ops: Vec<u64>,
    /// The device's counters over the background's window (both sides'
    /// packets, the probe's included).
    #[serde(default)]
    pub device_counters: Option<CounterDeltas>,
    /// How long the probe's thread waited, runnable, for its CPU while other
    /// threads held it (the kernel's run delay, `/proc/thread-self/schedstat`),
    /// over `probe_span_s`, the probe's run from its setup to its last sample.
    /// Where the background shares the probe's CPU this is the time it took
    /// from the probe; a stall of the whole host while the probe runs counts
    /// as the probe's run time, not as waiting. `null` where unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_run_delay_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_span_s: Option<f64>,
}

/// CSV columns of latency records, in their stable order (`histogram` stays
/// JSON-only), built as `TPUT_CSV_COLUMNS` is.
pub const CSV_COLUMNS: &[&str] = columns!(
    &["series", "verb", "metric", "transport", "size"],
    PostingFields::COLUMNS,
    &["event_wakeups"],
    PathFields::COLUMNS,
    &["bidirectional", "srq"],
    MemoryFields::COLUMNS,
    &[
        "connection",
        "path_mtu",
        "iters",
        "warmup_dropped",
        "elapsed_s",
        "samples",
        "min_ns",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p999_ns",
        "p9999_ns",
        "max_ns",
        "mean_ns",
        "stdev_ns",
        "clamped",
        "rtt_p50_ns",
        "rtt_mean_ns",
        "sent",
        "server_received",
        "verify_failures",
    ],
    LIVE_AND_CPU_COLUMNS,
    &["load", "offered_mops", "achieved_mops", "saturated_mops",],
    CheckFields::CSV_COLUMNS,
);
