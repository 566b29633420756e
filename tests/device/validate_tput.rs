//! `--validate` on throughput points (issue 24): every verb, transport and
//! direction there is, one bidirectional and one `--srq` point, with no
//! corrupt payload; and the `payload-byte` fault hook, whose one flipped
//! byte must be the one corrupt WR recorded.
//!
//! Witnesses that do not share the checking code: the receivers' own
//! counts (`received`), what the issuers posted (`sent`, `per_qp_ops`),
//! the QP count, and the fault hook's stderr line.

use rdma_bench::report::Validation;
use rdma_bench::results::TputRecord;

use super::{latency, measure_env};

/// The short window every point here runs.
const SHORT: [&str; 6] = ["-D", "0.2", "--warmup-time", "0.05", "--validate", "-q"];

fn args<'a>(head: &[&'a str], qps: &'a str) -> Vec<&'a str> {
    let mut a = head.to_vec();
    a.extend_from_slice(&SHORT);
    a.push(qps);
    a
}

fn checked(what: &str, r: &TputRecord) -> Validation {
    let v = r
        .checks
        .validation
        .clone()
        .unwrap_or_else(|| panic!("{what}: no validation recorded: {r:?}"));
    eprintln!(
        "MEASURED: {what} {}: validated {} WRs ({} B), corrupt {}; sent {}, received {:?}",
        r.transport, v.validated_wrs, v.validated_bytes, v.corrupt_wrs, r.sent, r.received
    );
    assert_eq!(v.corrupt_wrs, 0, "{what}: {v:?}");
    assert_eq!(v.corrupt_bytes, 0, "{what}: {v:?}");
    assert!(v.first_corrupt.is_none(), "{what}: {v:?}");
    assert!(!v.how.is_empty(), "{what}: {v:?}");
    v
}

/// Runs `head` with --validate; returns each point's record and validation.
fn points(name: &str, head: &[&str], qps: &str) -> Vec<(TputRecord, Validation)> {
    let (doc, _) = latency(name, &args(head, qps));
    let recs: Vec<TputRecord> = doc.throughput().cloned().collect();
    assert!(!recs.is_empty(), "{name}: no points");
    recs.into_iter()
        .map(|r| {
            let v = checked(name, &r);
            (r, v)
        })
        .collect()
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_tput_send_every_transport_and_direction() {
    for dir in ["inbound", "outbound"] {
        let head = ["send", "--tput", dir, "-c", "rc,uc,ud", "-s", "100"];
        for (r, v) in points(&format!("vsend{dir}"), &head, "2") {
            // Every receive the target counted is a buffer it checked.
            let got = r.received.expect("a sink counts its receives");
            assert_eq!(v.validated_wrs, got, "send {dir} {}: {v:?}", r.transport);
            assert_eq!(v.validated_bytes, got * 100, "send {dir} {}", r.transport);
            assert!(
                got > 0 && got <= r.sent,
                "send {dir} {}: {r:?}",
                r.transport
            );
            if r.transport == "rc" {
                assert_eq!(got, r.sent, "send {dir} rc: nothing lost");
            }
        }
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_tput_write_read_atomic() {
    for dir in ["inbound", "outbound"] {
        // WRITE: each QP's one slot, after the point.
        let head = ["write", "--tput", dir, "-c", "rc,uc", "-s", "256"];
        for (r, v) in points(&format!("vwrite{dir}"), &head, "3") {
            assert_eq!(
                v.validated_wrs, 3,
                "write {dir} {}: one slot per QP",
                r.transport
            );
            assert!(r.per_qp_ops.iter().all(|&o| o > 0), "{r:?}");
        }
        // READ: every landing slot of each QP's ring (min(window, 16) of
        // them), posted as postlists of 4 (two per ring).
        let head = [
            "read",
            "--tput",
            dir,
            "-s",
            "256",
            "--window",
            "8",
            "--postlist",
            "4",
        ];
        for (r, v) in points(&format!("vread{dir}"), &head, "2") {
            assert!(r.per_qp_ops.iter().all(|&o| o >= 8), "{r:?}");
            assert_eq!(v.validated_wrs, 2 * 8, "read {dir}: {v:?}");
        }
    }
    // Atomics: verify_failures is their check.
    let head = ["atomic", "--op", "fadd", "--tput", "inbound"];
    for (r, v) in points("vatomic", &head, "2") {
        assert_eq!(v.validated_wrs, r.sent, "{v:?}");
        assert_eq!(r.verify_failures, Some(0));
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_tput_bidirectional_with_srq() {
    // Both sides' sinks draw from a shared receive queue and check each
    // other's SENDs; the record sums both directions.
    let head = ["send", "--tput", "outbound", "-b", "--srq", "-s", "64"];
    for (r, v) in points("vbidirsrq", &head, "3") {
        let got = r.received.expect("both sinks count");
        assert_eq!(v.validated_wrs, got, "bidirectional: {v:?}");
        assert_eq!(got, r.sent, "RC: both directions' SENDs all arrived");
        let d = r.directions.as_ref().expect("two directions");
        assert!(d.iter().all(|x| x.received.is_some_and(|g| g > 0)), "{d:?}");
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_tput_echo_responses() {
    // Every response slot of every QP, after the loop, against its request.
    let head = [
        "echo", "--tput", "--req", "write", "--resp", "write", "-c", "rc,uc", "-s", "64",
        "--window", "4",
    ];
    for (r, v) in points("vecho", &head, "2") {
        let responses = r.responses.expect("echo counts responses");
        assert!(responses >= 8, "{r:?}");
        assert_eq!(v.validated_wrs, 2 * 4, "echo {}: {v:?}", r.transport);
    }
    // SEND responses (echo's default): every response as it is polled, so
    // as many as the client counted.
    for (name, head) in [(
        "vechosend",
        &["echo", "--tput", "-c", "rc,uc", "-s", "64"][..],
    )] {
        for (r, v) in points(name, head, "2") {
            let responses = r.responses.expect("echo counts responses");
            eprintln!(
                "MEASURED: {name} {}: {} responses, {v:?}",
                r.transport, responses
            );
            assert!(responses > 0, "{r:?}");
            assert_eq!(v.validated_wrs, responses, "{name} {}: {v:?}", r.transport);
            assert_eq!(
                v.validated_bytes,
                responses * u64::from(r.size),
                "{name}: {v:?}"
            );
        }
    }
}

/// The fault hook's line on stderr: (QP, WR, byte).
fn flipped(stderr: &str) -> (u32, u64, u32) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("test fault payload-byte: flipped byte "))
        .collect();
    assert_eq!(lines.len(), 1, "exactly one flip: {stderr}");
    let w: Vec<&str> = lines[0].split_whitespace().collect();
    // "test fault payload-byte: flipped byte B of WR W on QP Q (side)"
    (
        w[11].parse().unwrap(),
        w[8].parse().unwrap(),
        w[5].parse().unwrap(),
    )
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_tput_fault_hook_names_the_one_corrupt_wr() {
    let fault = [("RDMA_BENCH_TEST_FAULT", "payload-byte")];
    for (name, head) in [
        ("vfsend", &["send", "--tput", "inbound", "-s", "64"][..]),
        ("vfwrite", &["write", "--tput", "inbound", "-s", "64"][..]),
        ("vfread", &["read", "--tput", "outbound", "-s", "64"][..]),
        ("vfecho", &["echo", "--tput", "-s", "64"][..]),
    ] {
        let (status, doc, stderr) = measure_env(name, &args(head, "2"), &fault);
        assert_eq!(status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("arrived corrupt"), "{name}: {stderr}");
        let r = doc.throughput().next().expect("the point is written first");
        let v = r.checks.validation.clone().expect("validation recorded");
        let (qp, wr, byte) = flipped(&stderr);
        eprintln!("MEASURED: {name}: flipped byte {byte} of WR {wr} on QP {qp}; {v:?}");
        assert_eq!((v.corrupt_wrs, v.corrupt_bytes), (1, 1), "{name}: {v:?}");
        let c = v.first_corrupt.clone().expect("the corrupt WR is named");
        assert_eq!((c.qp, c.wr, c.offset), (qp, wr, byte), "{name}: {c:?}");
        assert_eq!(c.expected ^ c.found, 0x01, "{name}: one bit flipped: {c:?}");
        assert!(v.validated_wrs > 1, "{name}: {v:?}");
    }
}
