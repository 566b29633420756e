//! What a throughput point measured, as plain serde data. The same types
//! cross the control channel (the driving side reports to the other) and land
//! in the results file, so they live below both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A device counter's name → how much it grew over a window. Counters that
/// could not be read at both edges are absent (never reported as 0).
pub type CounterDeltas = BTreeMap<String, u64>;

/// Who the other side of a run is, as its handshake said (loopback: this
/// host and device).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PeerInfo {
    pub host: String,
    pub device: String,
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
