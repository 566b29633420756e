//! What a throughput point measured, as plain serde data. The same types
//! cross the control channel (the driving side reports to the other) and land
//! in the results file, so they live below both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpu_use::CpuUse;

/// A device counter's name → how much it grew over a window. Counters that
/// could not be read at both edges are absent (never reported as 0).
pub type CounterDeltas = BTreeMap<String, u64>;

/// Who one side of a run is, as its handshake says (loopback: this host
/// and device): the host, the device and port, and that port's active MTU
/// at the time, which bounds the path MTU both sides agree on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PeerInfo {
    pub host: String,
    pub device: String,
    /// The device port (0: not said).
    #[serde(default)]
    pub port: u8,
    /// That port's active MTU in bytes (0: not said).
    #[serde(default)]
    pub active_mtu: u32,
    /// The GID the run's QPs use on that port ("" where not said).
    #[serde(default)]
    pub gid: String,
}

impl PeerInfo {
    /// This side as one end of the run's path, where it said its MTU.
    pub fn mtu_end(&self) -> Option<crate::spec::MtuEnd> {
        (self.active_mtu > 0).then(|| crate::spec::MtuEnd {
            device: self.device.clone(),
            port: self.port,
            host: (!self.host.is_empty()).then(|| self.host.clone()),
            active: self.active_mtu,
        })
    }
}

/// Figures of one issuing thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct ThreadFigure {
    pub thread: u32,
    pub ops: u64,
    pub elapsed_s: f64,
    pub mops: f64,
}

/// One client's figure in a group run (several clients started together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
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
    /// `sent` per QP, in the same order as `per_qp_ops`.
    #[serde(default)]
    pub per_qp_sent: Vec<u64>,
    /// Echo: responses received, warm-up and drain included.
    pub responses: u64,
    /// Send completions polled (signaled WRs), warm-up and drain included.
    pub completions: u64,
    /// The issuing side's device counters over its first thread's window
    /// (outbound: the server's NIC; `issued_by` in the record says which).
    #[serde(default)]
    pub device_counters: CounterDeltas,
    /// The driving process's CPU use over its first thread's window.
    #[serde(default)]
    pub cpu: Option<CpuUse>,
    /// `--interval`: the window cut into intervals, in order (empty without it).
    #[serde(default)]
    pub intervals: Vec<IntervalFigure>,
    /// `--forever`: the window up to the stop, which `device_counters` and
    /// `cpu` cover; `ops` and `elapsed_s` cover the kept intervals only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_stop: Option<ToStop>,
    /// `--events`: completion-channel events the issuing threads took inside
    /// their windows (each one a sleep or an event already pending);
    /// `None` without events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_wakeups: Option<u64>,
    /// `--validate`, where the driving side checks (READ: the data read
    /// back), summed over its threads; `None` where it checks nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// `--rate`: tokens the issuing threads' buckets were given inside their
    /// windows and did not hand out (forfeited to a full bucket, or left in
    /// it at the close: the issuer fell behind); `None` without a rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_missed: Option<u64>,
}

/// `--forever`: what a stopped point's window did from its opening to the
/// stop, the dropped interval in progress included. Device counters and CPU
/// times are read at the window's edges only, so they cover this span, not
/// just the kept intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct ToStop {
    /// Wall time from the window's opening to the stop (first thread).
    pub window_s: f64,
    /// Operations in it, all threads (latency: iterations).
    pub ops: u64,
}

/// One interval of a point (`--interval`): what the driving side measured
/// between two interval boundaries read from the loop's own clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct IntervalFigure {
    /// 0-based position in the point.
    pub index: u32,
    /// When it started, seconds after the window opened (first thread's clock).
    pub start_s: f64,
    /// Its length (first thread's clock). The last interval of a finite point
    /// may be shorter: the window's end cuts it.
    pub elapsed_s: f64,
    /// Operations in it (latency: samples; echo: round trips), all threads.
    pub ops: u64,
    /// Sum over threads of their ops / their interval's length, in Mops.
    pub mops: f64,
    /// Latency points: the interval's own percentiles (ping-pong: half RTT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<f64>,
}

impl DriverReport {
    /// This report as one client's entry in a group run.
    pub fn figure(&self, client: &str) -> ClientFigure {
        ClientFigure {
            client: client.to_string(),
            ops: self.ops,
            elapsed_s: self.elapsed_s,
            mops: self.mops,
        }
    }
}

/// `--validate`: what the receiving side (or, for READ and echo, the
/// issuer reading back) checked of the point's payloads, and what it found.
/// Each WR's payload carries `bench::pattern`'s bytes for its QP, sequence
/// and offset, so a stale or misplaced payload fails as a flipped byte does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct Validation {
    /// WRs (echo: responses) whose payload was checked, and their bytes.
    pub validated_wrs: u64,
    pub validated_bytes: u64,
    /// Of those, the WRs with at least one wrong byte, and the wrong bytes.
    pub corrupt_wrs: u64,
    pub corrupt_bytes: u64,
    /// The first corrupt WR found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_corrupt: Option<CorruptWr>,
    /// What was checked, where and when (e.g. "every received buffer, in the
    /// target's loop"), and what the check costs the figures.
    #[serde(default)]
    pub how: String,
}

/// One corrupt WR: where it was and its first wrong byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct CorruptWr {
    /// The QP's index within the run (issuer's numbering) and the WR's
    /// sequence number on it, as the pattern encodes them.
    pub qp: u32,
    pub wr: u64,
    /// The first wrong byte's offset in the payload, and its two values.
    pub offset: u32,
    pub expected: u8,
    pub found: u8,
}

impl Validation {
    /// Adds `other`'s counts (another thread's or side's); the first
    /// corrupt WR stays the one already kept, if any.
    pub fn absorb(&mut self, other: &Validation) {
        self.validated_wrs += other.validated_wrs;
        self.validated_bytes += other.validated_bytes;
        self.corrupt_wrs += other.corrupt_wrs;
        self.corrupt_bytes += other.corrupt_bytes;
        if self.first_corrupt.is_none() {
            self.first_corrupt = other.first_corrupt.clone();
        }
        if self.how.is_empty() {
            self.how = other.how.clone();
        }
    }
}

/// `--expect`: one expectation as a point was held to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct ExpectationResult {
    /// The expression as given, e.g. `p99<=20us`.
    pub expr: String,
    /// The record field it reads (e.g. `p99_ns`) and the value found there,
    /// in the field's own unit; `null` when the point does not have it.
    pub field: String,
    pub measured: Option<f64>,
    /// The limit in the field's unit.
    pub limit: f64,
    /// Whether the point met it.
    pub pass: bool,
}
