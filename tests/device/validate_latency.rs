//! `--validate` on every latency test: each verb and transport checks the
//! payloads it says it checks, counted against the record's own sent and
//! received counts (which the checks do not keep), with none corrupt; and
//! with the payload-byte fault hook the one byte the run says it flipped is
//! the one corrupt WR its record names, and the run exits 1 after writing
//! its file. One case runs against `serve`, so the server's counts cross the
//! wire.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{
    assert_validated_clean as assert_clean, bin, latency_validation_witness as witness, scratch,
};
use rdma_bench::results::ResultsDoc;

const FAULT: (&str, &str) = ("RDMA_BENCH_TEST_FAULT", "payload-byte");

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_latency_every_verb_and_transport_is_clean() {
    // Each verb and transport once (the passive WRITE target, the UD SEND
    // sink and fetch-add run in the fault test below).
    let cases: &[&[&str]] = &[
        &["write", "-s", "2,4096"],
        &["write", "-c", "uc", "--inline", "-s", "2,64"],
        &["write", "--completion", "--imm", "-s", "2,4096"],
        &["send", "-s", "2,4096"],
        &["send", "-c", "uc", "-s", "4096"],
        &["send", "-c", "ud", "-s", "2,1024"],
        &["send", "--completion", "-s", "2,4096"],
        &["echo", "-s", "2,4096"],
        &["read", "-s", "2,4096"],
        &["atomic", "--op", "cas"],
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut args = case.to_vec();
        args.extend(["--validate", "-D", "0.2", "--warmup", "20"]);
        let (doc, csv) = super::latency(&format!("vlat{i}"), &args);
        assert_clean(&case.join(" "), &doc);
        assert!(csv.contains("validation.validated_wrs"), "{csv}");
    }
}

/// The WR and byte the fault hook's one stderr line names.
fn flipped(stderr: &str) -> (u64, u32) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("test fault payload-byte: "))
        .collect();
    assert_eq!(lines.len(), 1, "one flip, said once: {stderr}");
    let words: Vec<&str> = lines[0].split(' ').collect();
    // "test fault payload-byte: flipped byte B of WR W on QP 0 (where)"
    assert_eq!(&words[3..5], ["flipped", "byte"], "{}", lines[0]);
    assert_eq!(&words[9..12], ["on", "QP", "0"], "{}", lines[0]);
    (words[8].parse().unwrap(), words[5].parse().unwrap())
}

/// The record's one corrupt WR is the flipped one, exactly.
fn assert_one_flip(what: &str, doc: &ResultsDoc, stderr: &str) {
    let (wr, byte) = flipped(stderr);
    let r = doc.latency().next().expect("the point is written");
    let v = r.checks.validation.as_ref().expect("validation recorded");
    assert_eq!((v.corrupt_wrs, v.corrupt_bytes), (1, 1), "{what}: {v:?}");
    let c = v.first_corrupt.as_ref().expect("the corrupt WR is named");
    assert_eq!((c.qp, c.wr, c.offset), (0, wr, byte), "{what}: {v:?}");
    assert_eq!(c.expected ^ c.found, 0xff, "{what}: {v:?}");
    // The damaged WR still counts as checked.
    assert_eq!(v.validated_wrs, witness(r), "{what}: {v:?}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_latency_a_flipped_byte_is_the_one_corrupt_wr_and_exits_1() {
    // Each receiver the hook can reach: the server's request buffer (WRITE,
    // SEND and UD), the SEND sink's ring, the WRITE target checked after the
    // point, and the client's echo response, READ landing area and atomic result.
    let cases: &[&[&str]] = &[
        &["write", "-s", "64"],
        &["send", "-c", "ud", "-s", "64"],
        &["send", "--completion", "-c", "ud", "-s", "64"],
        &["write", "--completion", "-s", "64"],
        &["echo", "-s", "64"],
        &["read", "-s", "64"],
        &["atomic", "--op", "fadd"],
    ];
    for (i, case) in cases.iter().enumerate() {
        // -n: the flipped iteration is there however slow the device.
        let mut args = case.to_vec();
        args.extend(["--validate", "-n", "40", "--warmup", "20"]);
        let what = case.join(" ");
        let (status, doc, stderr) = super::measure_env(&format!("vlatf{i}"), &args, &[FAULT]);
        assert_one_flip(&what, &doc, &stderr);
        let (wr, byte) = flipped(&stderr);
        let r = doc.latency().next().unwrap();
        // The 11th measured iteration (the last WR for a WRITE target), byte 3.
        let expected_wr = if r.metric == "completion" && r.verb == "write" {
            r.sent - 1
        } else {
            r.warmup_dropped + 10
        };
        assert_eq!((wr, byte), (expected_wr, 3), "{what}: {stderr}");
        assert_eq!(status.code(), Some(1), "{what}: {stderr}");
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn validate_latency_over_serve_reports_the_servers_checks() {
    let port = 18801;
    let dir = scratch("vlatserved");
    let log = dir.join("serve.stderr");
    let child = Command::new(bin())
        .args(["serve", "-d", &super::device(), "--bind", &super::ipv4()])
        .args(["--port", &port.to_string()])
        .env(FAULT.0, FAULT.1)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("serve starts");
    let _server = super::Server(child);
    let start = Instant::now();
    while std::net::TcpStream::connect((super::ipv4().as_str(), port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "serve never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server flips a byte of a request it received: only its report
    // can name it. The client runs without the hook.
    let target = format!("{}:{port}", super::ipv4());
    let args = [
        "write",
        "--connect",
        &target,
        "-s",
        "64",
        "--validate",
        "-n",
        "40",
        "--warmup",
        "20",
    ];
    let (status, doc, stderr) = super::measure_env("vlatserve", &args, &[]);
    let served = std::fs::read_to_string(&log).unwrap();
    // Its count and its corrupt WR came back from the server.
    assert_one_flip("write over serve", &doc, &served);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        !stderr.contains("test fault"),
        "the client flipped nothing: {stderr}"
    );
}
