//! What ranks and rank 0 say to each other, as frames of the control
//! channel's framing (`TcpChannel::send_value`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A rank → rank 0, once: who it is and what it can measure with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Join {
    pub rank: u32,
    pub ranks: u32,
    pub host: String,
    pub tool_version: String,
    /// The tests this rank would run, as their command lines: every rank
    /// must run the same ones.
    pub tests: Vec<String>,
    pub endpoints: Vec<JoinedEndpoint>,
    /// Why this rank cannot take part (no device, a port in use); it
    /// still joins, so rank 0 can name it.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JoinedEndpoint {
    pub device: String,
    pub port: u8,
    pub gid: String,
    pub active_mtu: u32,
    /// The TCP port its serve listens on.
    pub serve_port: u16,
}

/// Rank 0 → a rank.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Order {
    /// Run every test from local endpoint `device` (index into this rank's
    /// endpoints) against the serve at `serve`, and report entry `entry`.
    Measure {
        entry: u32,
        device: u32,
        serve: String,
        peer_host: String,
    },
    /// The run is over: stop serving and exit.
    Done,
}

/// A rank → rank 0: what one entry measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Measured {
    pub entry: u32,
    pub metrics: BTreeMap<String, f64>,
    pub counters: BTreeMap<String, u64>,
    /// The first test that failed, and why.
    pub error: Option<String>,
    pub elapsed_s: f64,
}
