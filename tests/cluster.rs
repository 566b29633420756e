//! Two-host tests on the soft-RoCE cluster (`scripts/softroce cluster`, as
//! `scripts/test` starts it): this binary runs on h1, and `serve`, the device
//! counters and the faults it checks against are on h2, reached through
//! `scripts/softroce on`. Each host has its own rxe0 on its own NIC, so what
//! h1 sends and what h2 receives are two different counters. Every test is
//! `#[ignore]`d: outside a cluster host it fails loudly, it never skips.
//!
//! The test that powers h2 off runs last, on its own (scripts/test).

#[path = "common/mod.rs"]
mod common;

#[path = "cluster/hosts.rs"]
mod hosts;

#[path = "cluster/witness.rs"]
mod witness;

#[path = "cluster/serve_modes.rs"]
mod serve_modes;

#[path = "cluster/mtu.rs"]
mod mtu;

#[path = "cluster/experiments.rs"]
mod experiments;

#[path = "cluster/fabric.rs"]
mod fabric;

#[path = "cluster/profile.rs"]
mod profile;

#[path = "cluster/faults.rs"]
mod faults;

#[path = "cluster/slurm.rs"]
mod slurm;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

use common::{read_json, run_within, scratch, text};
use hosts::{delta, my_counters, Peer};
use rdma_bench::results::ResultsDoc;

/// What grew on both hosts' own counters (read by this test, not by
/// rdma-bench), and the frames the wire dropped to each host, over a run or
/// a series of them.
pub struct Grown {
    pub mine: BTreeMap<String, u64>,
    pub theirs: BTreeMap<String, u64>,
    pub wire_drops: BTreeMap<String, u64>,
}

impl Grown {
    /// The counter `name` of this host or the peer.
    pub fn c(&self, theirs: bool, name: &str) -> u64 {
        let m = if theirs { &self.theirs } else { &self.mine };
        *m.get(name)
            .unwrap_or_else(|| panic!("no counter {name} in {m:?}"))
    }

    /// The two hosts' counters agree: what each sent is what the other
    /// received, packet for packet, unless the wire dropped some (then by
    /// at most that many).
    pub fn assert_wire_agrees(&self, what: &str, peer: &Peer) {
        let me = hosts::me();
        for (from_me, to) in [(true, &peer.name), (false, &me)] {
            let sent = self.c(!from_me, "sent_pkts");
            let got = self.c(from_me, "rcvd_pkts");
            let dropped = self.wire_drops.get(to.as_str()).copied().unwrap_or(0);
            eprintln!(
                "MEASURED: {what}: {} sent {sent} packets, {to} received {got} (wire dropped {dropped} frames to it)",
                if from_me { me.as_str() } else { peer.name.as_str() }
            );
            assert!(
                got <= sent && sent - got <= dropped,
                "{what}: sent {sent} packets to {to}, which received {got}; the wire dropped {dropped}: {:?} vs {:?}",
                self.mine,
                self.theirs
            );
        }
    }
}

/// What one client run did: its exit, output and results, and both hosts'
/// counters over the whole run.
pub struct Counted {
    pub out: Output,
    pub doc: Option<ResultsDoc>,
    pub grown: Grown,
    /// How long the rdma-bench process ran.
    pub elapsed: std::time::Duration,
}

impl Counted {
    pub fn stderr(&self) -> String {
        text(&self.out).1
    }

    pub fn stdout(&self) -> String {
        text(&self.out).0
    }

    /// The results of a run that had to succeed.
    pub fn ok(&self, what: &str) -> &ResultsDoc {
        let (stdout, stderr) = text(&self.out);
        assert!(
            self.out.status.success(),
            "{what} failed ({:?}): {stderr}{stdout}",
            self.out.status
        );
        self.doc
            .as_ref()
            .expect("a successful run wrote its results")
    }

    pub fn c(&self, theirs: bool, name: &str) -> u64 {
        self.grown.c(theirs, name)
    }

    pub fn assert_wire_agrees(&self, what: &str, peer: &Peer) {
        self.grown.assert_wire_agrees(what, peer)
    }
}

/// The wire's per-host drop counts so far (`scripts/softroce-wire`).
fn wire_drops() -> BTreeMap<String, u64> {
    let path =
        PathBuf::from(std::env::var("SOFTROCE_CLUSTER_DIR").unwrap_or_default()).join("wire-stats");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f.get(i)?.parse::<u64>().ok();
            Some((f.first()?.to_string(), n(3)? + n(4)?))
        })
        .collect()
}

/// Both hosts' counters and the wire's drops as they were when it started,
/// to check one run or a series of runs against.
pub struct WireCheck {
    mine: BTreeMap<String, u64>,
    theirs: BTreeMap<String, u64>,
    drops: BTreeMap<String, u64>,
}

impl WireCheck {
    pub fn start(peer: &Peer) -> WireCheck {
        WireCheck {
            mine: my_counters(),
            theirs: peer.counters(),
            drops: wire_drops(),
        }
    }

    /// What grew since `start`.
    pub fn grown(self, peer: &Peer) -> Grown {
        Grown {
            mine: delta(&self.mine, &my_counters()),
            theirs: delta(&self.theirs, &peer.counters()),
            wire_drops: delta(&self.drops, &wire_drops()),
        }
    }
}

/// Runs `rdma-bench ARGS --connect PEER` (with this host's device, a
/// results file and `--timeout 20` unless ARGS has one): its output, its
/// results if it wrote them, and how long it ran.
pub fn client(
    name: &str,
    peer: &Peer,
    port: u16,
    args: &[&str],
) -> (Output, Option<ResultsDoc>, std::time::Duration) {
    let dir = scratch(name);
    let json = dir.join("r.json");
    let connect = format!("{}:{port}", peer.addr);
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["-d", "rxe0", "--connect", &connect, "--json"]);
    let json_s = json.to_str().unwrap().to_string();
    all.push(&json_s);
    if !args.contains(&"--timeout") {
        all.extend_from_slice(&["--timeout", "20"]);
    }
    let began = std::time::Instant::now();
    let out = run_within(&all, 600);
    let elapsed = began.elapsed();
    let doc = json
        .exists()
        .then(|| serde_json::from_value(read_json(&json)).expect("results match the schema"));
    (out, doc, elapsed)
}

/// `client`, with both hosts' counters read around it; the run may fail
/// (see `Counted::ok`).
pub fn counted(name: &str, peer: &Peer, port: u16, args: &[&str]) -> Counted {
    let check = WireCheck::start(peer);
    let (out, doc, elapsed) = client(name, peer, port, args);
    Counted {
        out,
        doc,
        grown: check.grown(peer),
        elapsed,
    }
}

/// Runs the experiment file `toml` (written to a scratch directory)
/// against `serve` on the peer at `port`: one process, a session per
/// series, one results file. The run must succeed.
pub fn run_experiment(name: &str, peer: &Peer, port: u16, toml: &str) -> ResultsDoc {
    let dir = scratch(name);
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, toml).unwrap();
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let connect = format!("{}:{port}", peer.addr);
    let (config, out_s) = (config.to_str().unwrap(), out_dir.to_str().unwrap());
    let args = [
        "run",
        config,
        "--connect",
        &connect,
        "-d",
        "rxe0",
        "--quiet",
        "--out",
        out_s,
    ];
    let out = run_within(&args, 900);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{name}: {args:?} failed ({:?}): {stderr}{stdout}",
        out.status
    );
    let json = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("run wrote a results file");
    let doc: ResultsDoc =
        serde_json::from_value(read_json(&json)).expect("results match the schema");
    assert_eq!(doc.peer.host.as_deref(), Some(peer.name.as_str()), "{name}");
    doc
}

/// Packets a message of `size` bytes takes at `mtu` (a 0-byte one still takes one).
pub fn packets(size: u32, mtu: u32) -> u64 {
    u64::from(size.div_ceil(mtu).max(1))
}

/// `got` packets for `ops` operations of `per_op` packets each: at least
/// that many (less one op straddling a window edge) and under 1.5 times
/// it (room for retransmissions), so a wrong MTU or a double count fails.
pub fn assert_packets(what: &str, got: u64, ops: u64, per_op: u64) {
    eprintln!(
        "MEASURED: {what}: {got} packets for {ops} ops = {:.3} per op (expected {per_op})",
        got as f64 / ops.max(1) as f64
    );
    assert!(ops > 0, "{what}: no ops");
    let (lo, hi) = (per_op * ops - per_op, per_op * ops * 3 / 2 + per_op);
    assert!(
        (lo..=hi).contains(&got),
        "{what}: {got} packets outside [{lo}, {hi}] for {ops} ops of {per_op} packets"
    );
}
