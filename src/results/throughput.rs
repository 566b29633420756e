//! A throughput point's record, the figures of each direction of a
//! bidirectional one, and the CSV columns of throughput records.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::fields::columns;
use super::{
    CheckFields, CpuUtil, LiveFields, MemoryFields, PathFields, PostingFields, LIVE_AND_CPU_COLUMNS,
};
use crate::report::{ClientFigure, CounterDeltas, ThreadFigure};

/// One throughput point. Ops are the WRs posted inside the measured window
/// (warm-up excluded), over a window of the requested length; an --iters
/// run counts every WR, timed until the last has completed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TputRecord {
    /// The experiment series this point belongs to (`rdma-bench run`).
    #[serde(default)]
    pub series: Option<String>,
    pub verb: String,
    /// `inbound`, `outbound` or `echo`.
    pub direction: String,
    pub transport: String,
    pub size: u32,
    /// `inline` to `post_api` (see `PostingFields`).
    #[serde(flatten)]
    pub posting: PostingFields,
    /// `--events`: completion-channel events the issuing threads took over
    /// the measured window (a witness that they slept on the channel rather
    /// than spinning); absent without events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_wakeups: Option<u64>,
    /// Echo only: request and response verbs.
    pub req: Option<String>,
    pub resp: Option<String>,
    /// `tclass`, `sl`, `flow_label`, `mtu` (see `PathFields`).
    #[serde(flatten)]
    pub path: PathFields,
    /// `--bidirectional`: both sides issued at once; `ops`, `mops`, `sent`,
    /// `received` and `completions` are then the sums of `directions`
    /// (files before it: false).
    #[serde(default)]
    pub bidirectional: bool,
    /// `--srq`: receivers posted to a shared receive queue (files before it: false).
    #[serde(default)]
    pub srq: bool,
    /// Bidirectional only: what each side issued, the client's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directions: Option<Vec<DirectionFigure>>,
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
    /// The signaling period asked for (`-S`).
    pub signal_period: u32,
    /// The period the point ran with: issuers signal at least once per
    /// window, so S above `--window` runs as `--window` (files before this
    /// field: absent).
    #[serde(default)]
    pub effective_signal_period: Option<u32>,
    pub qps: u32,
    pub postlist: u32,
    pub window: u32,
    pub threads: u32,
    /// Warm-up run before the window (0 in an --iters run, which has none).
    pub warmup_s: f64,
    /// Seconds the point took to set up before its warm-up, on the client's
    /// clock: creating and registering its QPs and buffers, the server
    /// preparing its side, and connecting both (through RDMA CM with
    /// `--cm`). Absent in files from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_s: Option<f64>,
    /// `setup_s` per QP of the point (all threads' QPs), in milliseconds:
    /// what one more QP costs before a window opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_per_qp_ms: Option<f64>,
    /// The window asked for (`-D`); `null` in an --iters run.
    #[serde(default)]
    pub requested_s: Option<f64>,
    /// WRs (echo: round trips) asked for per QP (`-n`); `null` in a timed run.
    #[serde(default)]
    pub iters: Option<u64>,
    /// Which side posted the WRs and read the clock: `client` (inbound,
    /// echo) or `server` (outbound).
    #[serde(default)]
    pub issued_by: Option<String>,
    /// Operations (echo: round trips) completed in the measured window.
    pub ops: u64,
    pub elapsed_s: f64,
    /// Million operations per second: the sum of each thread's ops / its window.
    pub mops: f64,
    /// Payload rate (echo: request payload once per round trip).
    pub gbps: f64,
    pub mib_s: f64,
    /// WRs (echo: requests) posted, warm-up and drain included.
    pub sent: u64,
    /// Messages the receiving side counted (SEND, echo); `null` where it is passive.
    pub received: Option<u64>,
    /// `sent - received` where a receiver counts (UD may drop; RC/UC should not).
    pub lost: Option<u64>,
    /// Echo: responses the client received.
    pub responses: Option<u64>,
    /// Send completions the driver polled (1 per signaled WR): shows S at work.
    pub completions: u64,
    pub per_thread: Vec<ThreadFigure>,
    pub per_qp_ops: Vec<u64>,
    /// With `--group N`: every client's figure and their sum.
    pub group_clients: u32,
    pub aggregate_mops: Option<f64>,
    pub clients: Vec<ClientFigure>,
    /// Atomics: operations the target's words do not account for (0 when
    /// each QP's word ended at the atomics its issuer QP executed).
    #[serde(default)]
    pub verify_failures: Option<u64>,
    /// The issuing device's own counters over the first thread's window
    /// (in loopback both sides' packets count on the one device); absent
    /// where the device has none.
    #[serde(default)]
    pub device_counters: Option<CounterDeltas>,
    /// CPU use over the measured window (files before it: absent).
    #[serde(default)]
    pub cpu_util: Option<CpuUtil>,
    /// `interval_s` to `to_stop` (see `LiveFields`).
    #[serde(flatten)]
    pub live: LiveFields,
    /// `expectations` and `validation` (see `CheckFields`).
    #[serde(flatten)]
    pub checks: CheckFields,
    /// `--rate`: the Mops the issuing process was offered in all (its QPs'
    /// token buckets together); absent when unlimited. `mops` is what it achieved.
    /// With `--bidirectional` each side is offered the rate, and this is
    /// both sides together, as `mops` is (`directions` has each side's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_mops: Option<f64>,
    /// `--rate-per-qp`: the rate was asked per QP (absent: per process).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rate_per_qp: bool,
    /// `--burst`: WRs per token refill; absent: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// `--rate`: WRs the offered rate gave inside the measured window that
    /// were not posted in it: forfeited because a bucket was already full
    /// (the issuer stalled, or its window stayed full, for longer than a
    /// window's worth of tokens), or still in a bucket at the close.
    /// `ops + rate_missed` is what was offered, but for echo, whose `ops`
    /// are round trips completed: its requests still unanswered at the
    /// close (at most `window` per QP) are in neither. Absent when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_missed: Option<u64>,
    /// Never in a file: where `analysis::passes` folded a point's passes
    /// into this record, the pass records it was made from (their spread
    /// is part of its interval); empty for a record as measured.
    #[serde(skip)]
    #[schemars(skip)]
    pub passes: Vec<super::Record>,
}

/// One direction of a bidirectional point: what one side issued towards the
/// other, measured in its own window, and what the other side received.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DirectionFigure {
    /// `client` (client to server) or `server` (server to client).
    pub issued_by: String,
    /// WRs posted inside the issuing side's measured window.
    pub ops: u64,
    pub elapsed_s: f64,
    pub mops: f64,
    /// WRs posted, warm-up and drain included.
    pub sent: u64,
    /// SENDs the other side's receivers counted; `null` where it is passive.
    pub received: Option<u64>,
    /// Send completions the issuing side polled.
    pub completions: u64,
    /// Atomics: operations the other side's words do not account for.
    pub verify_failures: Option<u64>,
    /// `--rate`: the Mops this side's issuers were offered (each side is
    /// offered the whole `--rate`); absent when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_mops: Option<f64>,
    /// `--rate`: WRs of this side's offered rate its issuers did not post.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_missed: Option<u64>,
}

/// CSV columns of throughput records, in their stable order (lists stay
/// JSON-only): the record's fields in order, the shared runs' names
/// spliced in from their `COLUMNS`.
pub const TPUT_CSV_COLUMNS: &[&str] = columns!(
    &["series", "verb", "direction", "transport", "size"],
    PostingFields::COLUMNS,
    &["event_wakeups", "req", "resp"],
    PathFields::COLUMNS,
    &["bidirectional", "srq"],
    MemoryFields::COLUMNS,
    &[
        "connection",
        "path_mtu",
        "signal_period",
        "effective_signal_period",
        "qps",
        "postlist",
        "window",
        "threads",
        "warmup_s",
        "setup_s",
        "setup_per_qp_ms",
        "requested_s",
        "iters",
        "issued_by",
        "ops",
        "elapsed_s",
        "mops",
        "gbps",
        "mib_s",
        "sent",
        "received",
        "lost",
        "responses",
        "completions",
        "group_clients",
        "aggregate_mops",
        "verify_failures",
    ],
    LIVE_AND_CPU_COLUMNS,
    &[
        "cpu_util.local_cpu_s_per_mop",
        "cpu_util.peer_cpu_s_per_mop",
        "offered_mops",
        "rate_per_qp",
        "burst",
        "rate_missed",
    ],
    CheckFields::CSV_COLUMNS,
);
