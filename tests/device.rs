//! Tests against a real verbs device (soft-RoCE in CI): `scripts/test` runs
//! them inside `scripts/softroce run` with `--ignored`. They are ignored in a
//! plain `cargo test` because the host has no device, and each one FAILS,
//! never skips, when `RDMA_BENCH_DEVICE` names no usable device.

mod common;

// Device tests grouped by topic live in tests/device/<topic>.rs, one line each
// below; they reach this file's helpers (device(), latency(), ...) as `super::`.
// (topic modules: keep this list sorted)
#[path = "device/bidir_combos.rs"]
mod bidir_combos;
#[path = "device/bidir_srq.rs"]
mod bidir_srq;
#[path = "device/cm.rs"]
mod cm;
#[path = "device/cpu_intervals.rs"]
mod cpu_intervals;
#[path = "device/echo_many_qps.rs"]
mod echo_many_qps;
#[path = "device/events_echo_bidir.rs"]
mod events_echo_bidir;
#[path = "device/events_post_api.rs"]
mod events_post_api;
#[path = "device/events_tput_serve.rs"]
mod events_tput_serve;
#[path = "device/expect.rs"]
mod expect;
#[path = "device/latency_verbs.rs"]
mod latency_verbs;
#[path = "device/latency_warmup.rs"]
mod latency_warmup;
#[path = "device/memory_layout.rs"]
mod memory_layout;
#[path = "device/mpi_and_receives.rs"]
mod mpi_and_receives;
#[path = "device/output_figures.rs"]
mod output_figures;
#[path = "device/package.rs"]
mod package;
#[path = "device/path_options.rs"]
mod path_options;
#[path = "device/peer_death.rs"]
mod peer_death;
#[path = "device/perftest.rs"]
mod perftest;
#[path = "device/profile.rs"]
mod profile;
#[path = "device/rate_load.rs"]
mod rate_load;
#[path = "device/rss_many_qps.rs"]
mod rss_many_qps;
#[path = "device/serve_descriptors.rs"]
mod serve_descriptors;
#[path = "device/serve_hostile.rs"]
mod serve_hostile;
#[path = "device/sge_and_zero.rs"]
mod sge_and_zero;
#[path = "device/tput_sweeps.rs"]
mod tput_sweeps;
#[path = "device/two_processes.rs"]
mod two_processes;
#[path = "device/validate_latency.rs"]
mod validate_latency;
#[path = "device/validate_tput.rs"]
mod validate_tput;
#[path = "device/vs_perftest.rs"]
mod vs_perftest;
#[path = "device/window_mid_pass.rs"]
mod window_mid_pass;
#[path = "device/witness_counters.rs"]
mod witness_counters;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, read_json, run, scratch, text};
use rdma_bench::results::ResultsDoc;
use rdma_bench::verbs::{Context, PortState};

/// The device under test; a missing one is a failure, loudly.
fn device() -> String {
    match std::env::var("RDMA_BENCH_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!(
            "RDMA_BENCH_DEVICE is not set: device tests must run under `scripts/softroce run` (or on a host with an RDMA NIC)"
        ),
    }
}

fn ipv4() -> String {
    std::env::var("RDMA_BENCH_IPV4").expect("RDMA_BENCH_IPV4 names the device's IPv4 address")
}

/// The longest one measuring run may take before it counts as hung: far
/// beyond any run here (the longest take tens of seconds under TCG).
const RUN_DEADLINE_S: u64 = 600;

/// Runs a latency test and returns its parsed JSON results (and CSV text).
fn latency(name: &str, args: &[&str]) -> (ResultsDoc, String) {
    let dir = scratch(name);
    let json = dir.join("r.json");
    let csv = dir.join("r.csv");
    let dev = device();
    let mut all: Vec<&str> = args.to_vec();
    // Latency points warm up for 100 iterations, not the default 1000: in a
    // TCG guest on a busy host an iteration can take milliseconds, and
    // warm-up is not what these tests check (those that do pass --warmup).
    let latency_verb = ["read", "write", "send", "echo", "atomic"].contains(&args[0]);
    let sets_warmup = args
        .iter()
        .any(|a| a.starts_with("--warmup") || *a == "--tput" || *a == "--under-load");
    if latency_verb && !sets_warmup {
        all.extend_from_slice(&["--warmup", "100"]);
    }
    all.extend_from_slice(&[
        "-d",
        &dev,
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    // A deadline per run: a hang fails this test, not the whole suite.
    let out = common::run_within(&all, RUN_DEADLINE_S);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{args:?} failed ({:?}): {stderr}{stdout}",
        out.status
    );
    let doc: ResultsDoc =
        serde_json::from_value(read_json(&json)).expect("results match the schema");
    let csv_text = std::fs::read_to_string(&csv).expect("CSV written");
    (doc, csv_text)
}

/// Common checks: one record per size, in order, all measured, sane figures.
fn check_points(doc: &ResultsDoc, csv: &str, sizes: &[u32], iters: u64) {
    assert_eq!(doc.schema_version, rdma_bench::results::SCHEMA_VERSION);
    assert_eq!(doc.device.name, device());
    // The measuring threads were pinned, and the file says where.
    let affinity = doc.affinity.as_deref().unwrap_or_default();
    assert!(affinity.starts_with("client "), "affinity: {affinity:?}");
    let got: Vec<u32> = doc.latency().map(|r| r.size).collect();
    assert_eq!(got, sizes, "one record per size");
    assert_eq!(doc.results.len(), sizes.len(), "only latency records");
    for r in doc.latency() {
        assert_eq!(r.iters, iters, "{r:?}");
        assert_eq!(r.stats.samples, iters);
        assert!(r.stats.min_ns > 0.0 && r.stats.min_ns <= r.stats.p50_ns);
        assert!(r.stats.p50_ns <= r.stats.p99_ns && r.stats.p99_ns <= r.stats.max_ns);
        assert_eq!(r.verify_failures, 0, "{r:?}");
        if let Some(seen) = r.server_received {
            assert_eq!(seen, r.sent, "server saw every message: {r:?}");
        }
        let hist_total: u64 = r.histogram.iter().map(|b| b.1).sum();
        assert_eq!(hist_total, iters, "histogram holds every sample");
    }
    // Header plus one row per record.
    assert_eq!(csv.lines().count(), sizes.len() + 1, "{csv}");
}

fn pow2(lo: u32, hi: u32) -> Vec<u32> {
    (0..32)
        .map(|i| 1u32 << i)
        .filter(|v| *v >= lo && *v <= hi)
        .collect()
}

const ITERS: u64 = 300;
const ITERS_S: &str = "300";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(port: u16) -> Server {
    start_server_with(port, &[])
}

/// `serve` on the device's address and `port`, with `extra` options; its
/// standard output discarded.
fn serve_command(port: u16, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "-d", &device(), "--bind", &ipv4()])
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null());
    cmd
}

/// `serve` on the device's address and `port`, with `extra` options (such as
/// `--cm-port`), once it listens; killed when the guard drops.
fn start_server_with(port: u16, extra: &[&str]) -> Server {
    let child = serve_command(port, extra)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("serve starts");
    // Wait until it listens.
    let start = Instant::now();
    while std::net::TcpStream::connect((ipv4().as_str(), port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "serve never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Server(child)
}

// ---------------------------------------------------------------------------
// Throughput
// ---------------------------------------------------------------------------

/// The sweep issue #4 asks every verb to survive.
const SWEEP: &[&str] = &[
    "-S",
    "1,64",
    "-q",
    "1,16",
    "--postlist",
    "1,4",
    "--warmup-time",
    "0.05",
];

/// Points of SWEEP per transport: 2 S × 2 qps × 2 postlists, minus S=1 with
/// postlist 4 (a postlist longer than S is contradictory and skipped).
const SWEEP_POINTS: usize = 6;

fn tput(name: &str, args: &[&str]) -> ResultsDoc {
    let mut all = args.to_vec();
    all.extend_from_slice(SWEEP);
    // A 0.1 s window unless the test asks for another.
    if !args.contains(&"-D") {
        all.extend_from_slice(&["-D", "0.1"]);
    }
    let (doc, csv) = latency(name, &all);
    assert!(!doc.results.is_empty());
    assert_eq!(
        doc.throughput().count(),
        doc.results.len(),
        "only throughput records"
    );
    assert_eq!(
        csv.lines().count(),
        doc.results.len() + 1,
        "one CSV row per record"
    );
    for r in doc.throughput() {
        assert!(r.mops > 0.0, "{name}: zero Mops at {r:?}");
        assert!(r.ops > 0 && r.elapsed_s > 0.0);
        assert_eq!(r.per_qp_ops.len() as u32, r.qps * r.threads);
        assert_eq!(r.per_qp_ops.iter().sum::<u64>(), r.ops);
        assert!(
            r.signal_period >= r.postlist,
            "contradictory points are skipped"
        );
    }
    doc
}

// ---------------------------------------------------------------------------
// Hardening: dying peers, garbage, interrupted sweeps
// ---------------------------------------------------------------------------

/// A 64 B latency client of the server at `target` (`verb`: the verb and
/// its options), measuring until a signal stops it, with an interval line
/// every 0.2 s to wait for; its results go to the scratch file `name`.
fn measuring_until_stopped(name: &str, verb: &[&str], target: &str) -> common::Live {
    let dev = device();
    let mut args = verb.to_vec();
    args.extend_from_slice(&["-s", "64", "--forever", "--interval", "0.2"]);
    args.extend_from_slice(&["--connect", target, "-d", &dev]);
    common::Live::start(name, &args)
}

fn kill(child: &Child, signal: &str) {
    kill_pid(child.id(), signal);
}

fn kill_pid(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal}");
}

// ---------------------------------------------------------------------------
// Witnesses: the device's own counters, the receiver's counts and the
// target's atomic words, none of which share rdma-bench's counting code.
//
// On rxe in loopback both sides' packets land on the one device, so a point
// counts, per op: WRITE/SEND/atomic over RC a request and its ACK (2), over
// UC/UD the request only (1), READ a request and its response (2); every
// payload here fits one MTU, so one packet per message. Measured on rxe0 in
// the qemu guest these were exact (e.g. 2000 RC WRITEs: sent_pkts 4000).
//
// The kernel caches a port's hw_counters for `lifespan` ms (10 by default):
// two reads closer than that return the same values. rdma-bench waits that
// out between its reads (src/bench/counters.rs), so a window of any length,
// on a machine of any speed, is witnessed.
// ---------------------------------------------------------------------------

/// A measuring run like `latency`, with extra environment and any exit
/// status: the status, the parsed results and stderr.
fn measure_env(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::ExitStatus, ResultsDoc, String) {
    let dir = scratch(name);
    let json = dir.join("r.json");
    let dev = device();
    let out = Command::new(bin())
        .args(args)
        .args(["-d", &dev, "--quiet", "--json", json.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .expect("the rdma-bench binary runs");
    let (stdout, stderr) = text(&out);
    assert!(
        json.exists(),
        "{args:?} wrote no results ({:?}): {stderr}{stdout}",
        out.status
    );
    let doc: ResultsDoc =
        serde_json::from_value(read_json(&json)).expect("results match the schema");
    (out.status, doc, stderr)
}

/// How long the kernel serves cached hw_counters (ms), from sysfs.
fn counter_lifespan_ms() -> f64 {
    let path = format!(
        "/sys/class/infiniband/{}/ports/1/hw_counters/lifespan",
        device()
    );
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(10.0)
}

/// How late a throughput window's edge (its end, or an interval boundary)
/// may be on this machine: `floor` seconds, or 500 of the run's own posts,
/// whichever is longer. The loops read the clock every 16 posts, so an edge
/// is late by those posts and by the odd slow one (a single post_send on rxe
/// under TCG sometimes takes 9-13 ms, about 400 ordinary posts): on a slower
/// machine both grow with the time a post takes, which the record gives.
fn edge_slack(r: &rdma_bench::results::TputRecord, floor: f64) -> f64 {
    let posts = (r.sent as f64 / f64::from(r.postlist.max(1))).max(1.0);
    floor.max(500.0 * r.elapsed_s / posts)
}

/// `elapsed_s` is at least the window asked for (it closes at the first
/// clock reading past its end) and late by no more than `edge_slack`.
fn assert_window_lasts(what: &str, r: &rdma_bench::results::TputRecord, asked: f64) {
    let slack = edge_slack(r, 0.1 * asked);
    assert!(
        r.elapsed_s >= asked * 0.9999 && r.elapsed_s <= asked + slack,
        "{what}: elapsed_s {} is not within [{asked}, {asked} + {slack:.4}] s",
        r.elapsed_s
    );
}

/// One device counter of a record; a missing map or counter is a failure.
fn counter(dc: Option<&std::collections::BTreeMap<String, u64>>, name: &str, what: &str) -> u64 {
    let dc = dc.unwrap_or_else(|| panic!("{what}: no device_counters recorded"));
    *dc.get(name)
        .unwrap_or_else(|| panic!("{what}: device_counters has no {name}: {dc:?}"))
}

/// The device's packets against `ops` operations that send `per_op` packets
/// each in loopback: at least that many (less one op's packets straddling a
/// window edge) and under 1.5× (room for a retry), so a count off by 2× in
/// either direction fails.
fn assert_packets(
    what: &str,
    dc: Option<&std::collections::BTreeMap<String, u64>>,
    ops: u64,
    per_op: u64,
) {
    assert!(ops > 0, "{what}: no ops");
    for name in ["sent_pkts", "rcvd_pkts"] {
        let got = counter(dc, name, what);
        eprintln!(
            "MEASURED: {what}: {name} {got} for {ops} ops = {:.3} per op (expected {per_op})",
            got as f64 / ops as f64
        );
        let lo = per_op * ops - per_op;
        let hi = per_op * ops * 3 / 2;
        assert!(
            (lo..hi).contains(&got),
            "{what}: {name} {got} outside [{lo}, {hi}) for {ops} ops × {per_op} packets: {dc:?}"
        );
    }
}

/// A count the device keeps per message (`rdma_sends`, `rdma_recvs`) against
/// what rdma-bench counted: equal, give or take a message at the edges.
fn assert_messages(
    what: &str,
    dc: Option<&std::collections::BTreeMap<String, u64>>,
    name: &str,
    want: u64,
) {
    let got = counter(dc, name, what);
    eprintln!("MEASURED: {what}: {name} {got}, rdma-bench counted {want}");
    assert!(
        got + 2 >= want && got <= want + want / 20 + 2,
        "{what}: device {name} {got} vs rdma-bench's {want}: {dc:?}"
    );
}

// ---------------------------------------------------------------------------
// Scatter-gather and header-only ops (issue 14 item 8)
// ---------------------------------------------------------------------------

/// At least one packet per op went out: a 0-byte op still crosses the wire.
fn assert_at_least_a_packet_per_op(
    what: &str,
    r_dc: Option<&std::collections::BTreeMap<String, u64>>,
    ops: u64,
) {
    let sent = counter(r_dc, "sent_pkts", what);
    eprintln!(
        "MEASURED: {what}: sent_pkts {sent} for {ops} ops = {:.3} per op",
        sent as f64 / ops as f64
    );
    assert!(sent >= ops, "{what}: sent_pkts {sent} < {ops} ops");
}

/// The active MTU of the device's port 1, as the device reports it.
fn active_mtu() -> u32 {
    Context::open(&device())
        .expect("device opens")
        .query_port(1)
        .expect("port 1")
        .active_mtu
}
