//! perftest's spellings on a device: -Q is -S (the CQEs polled say so), -t
//! and -l set the window and postlist, -I inlines only payloads up to SIZE,
//! -a runs 2 B to 8 MiB (UD: up to the MTU), -F and --report_gbits are accepted and say so
//! once; --markdown writes one row per point.

use std::process::{Command, Output};

use super::common::{bin, run, scratch, text};
use super::{device, latency, measure_env};

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn perftest_spellings_measure_what_they_name() {
    // -Q 64 -t 16 -l 4: S=64 runs as the window's 16 (the effective period),
    // one CQE per 16 WRs; postlist 4.
    let (doc, _) = latency(
        "perftest-q",
        &[
            "write", "--tput", "inbound", "-s", "64", "-n", "2048", "-Q", "64", "-t", "16", "-l",
            "4",
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert_eq!(
        (r.signal_period, r.window, r.postlist),
        (64, 16, 4),
        "{r:?}"
    );
    assert_eq!(r.effective_signal_period, Some(16), "{r:?}");
    assert_eq!(r.sent, 2048);
    assert!(
        (r.sent / 16..=r.sent / 16 + 1).contains(&r.completions),
        "{r:?}"
    );
    eprintln!(
        "MEASURED: -Q 64 -t 16 -l 4: {} WRs, {} CQEs polled",
        r.sent, r.completions
    );

    // -I 32: 16 and 32 B go inline; -I 8: 16 B does not.
    let (doc, _) = latency(
        "perftest-i",
        &["send", "-s", "16,32", "-I", "32", "-n", "200"],
    );
    assert!(doc.latency().all(|r| r.posting.inline), "{:?}", doc.results);
    let (doc, _) = latency("perftest-i8", &["send", "-s", "16", "-I", "8", "-n", "200"]);
    assert!(
        doc.latency().all(|r| !r.posting.inline),
        "{:?}",
        doc.results
    );

    // -a: every power of two from 2 B to 8 MiB, one READ each.
    let (doc, _) = latency("perftest-a", &["read", "-a", "-n", "3", "--warmup", "1"]);
    let sizes: Vec<u32> = doc.latency().map(|r| r.size).collect();
    assert_eq!(sizes, (1..=23).map(|i| 1u32 << i).collect::<Vec<_>>());
    // -a over UD stops at the UD MTU, as perftest's does.
    let (doc, _) = latency(
        "perftest-a-ud",
        &["send", "-c", "ud", "-a", "-n", "3", "--warmup", "1"],
    );
    let mtu = doc.device.active_mtu;
    let sizes: Vec<u32> = doc.latency().map(|r| r.size).collect();
    let expected: Vec<u32> = (1..=23).map(|i| 1u32 << i).filter(|&s| s <= mtu).collect();
    assert!(expected.len() >= 8, "active MTU {mtu}");
    assert_eq!(sizes, expected, "UD sizes up to the MTU {mtu}");

    // -F and --report_gbits: accepted, said once above the table; --markdown
    // holds one row per point, in Gb/s.
    let dir = scratch("perftest-notes");
    let md = dir.join("t.md");
    let dev = device();
    let out = run(&[
        "write",
        "-d",
        &dev,
        "--tput",
        "inbound",
        "-s",
        "64,128",
        "-D",
        "0.1",
        "--warmup-time",
        "0.05",
        "-F",
        "--report_gbits",
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}{stdout}");
    assert_eq!(stdout.matches("# note: -F").count(), 1, "{stdout}");
    assert_eq!(
        stdout.matches("# note: --report_gbits").count(),
        1,
        "{stdout}"
    );
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.contains("Gb/s [10^9 bit/s]"), "{table}");
    let rows = table
        .lines()
        .filter(|l| l.starts_with("| - | write | inbound |"))
        .count();
    assert_eq!(rows, 2, "{table}");
}

/// Runs rdma-bench on the device with `env` set, writing JSON to `json`.
fn run_env(args: &[&str], json: &std::path::Path, env: &[(&str, &str)]) -> Output {
    Command::new(bin())
        .args(args)
        .args(["-d", &device(), "--quiet", "--json", json.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .expect("the rdma-bench binary runs")
}

/// (size, inline, inline_size) of every record, in order.
fn inline_by_size(doc: &rdma_bench::results::ResultsDoc) -> Vec<(u32, bool, Option<u32>)> {
    doc.results
        .iter()
        .map(|r| match r {
            rdma_bench::results::Record::Latency(l) => {
                (l.size, l.posting.inline, l.posting.inline_size)
            }
            rdma_bench::results::Record::Throughput(t) => {
                (t.size, t.posting.inline, t.posting.inline_size)
            }
        })
        .collect()
}

const SPOILED: (&str, &str) = ("RDMA_BENCH_TEST_FAULT", "send-lkey");
const FAILED_WRITE: &str = "RDMA_WRITE work completion failed";

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn inline_size_decides_each_point() {
    let mixed = vec![(16, true, Some(64)), (256, false, Some(64))];
    // Latency: -I 64 over 16 and 256 B inlines the first point only, and each
    // record says so; every ping-pong iteration waited for its last byte.
    let (doc, csv) = latency(
        "perftest-i-mixed",
        &[
            "write", "-s", "16,256", "-I", "64", "-n", "300", "--warmup", "50",
        ],
    );
    assert_eq!(inline_by_size(&doc), mixed, "{:?}", doc.results);
    for r in doc.latency() {
        assert_eq!(r.iters, 300, "{r:?}");
        assert_eq!(r.server_received, Some(r.sent), "{r:?}");
    }
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|c| *c == "inline_size").unwrap();
    assert!(
        csv.lines()
            .skip(1)
            .all(|l| l.split(',').nth(col) == Some("64")),
        "{csv}"
    );
    // Echo inlines what fits its QP (256 B does on rxe), but with -I only up to it.
    let (doc, _) = latency(
        "perftest-i-echo",
        &[
            "echo", "-s", "16,256", "-I", "64", "-n", "200", "--warmup", "50",
        ],
    );
    assert_eq!(inline_by_size(&doc), mixed, "{:?}", doc.results);

    // Throughput: the same per point, and the target's memory holds each
    // point's WRITE payload (the test hook reads its first byte).
    let args = [
        "write", "--tput", "inbound", "-s", "16,256", "-I", "64", "-n", "500",
    ];
    let (status, doc, stderr) =
        measure_env("perftest-i-tput", &args, &[("RDMA_BENCH_TEST_SLOTS", "1")]);
    assert!(status.success(), "{stderr}");
    assert_eq!(inline_by_size(&doc), mixed, "{:?}", doc.results);
    assert!(doc.throughput().all(|r| r.sent == 500), "{:?}", doc.results);
    let hooks: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("test hook: WRITE slots written per target QP: "))
        .collect();
    assert_eq!(hooks.len(), 2, "{stderr}");
    assert!(hooks.iter().all(|h| h.starts_with("[1] of ")), "{stderr}");

    // The device's witness: with every send SGE's lkey spoiled, a WR the
    // device gathers through its lkey fails (the error names the verb, QP and
    // the provider's status), and one inlined (copied by the
    // provider at post time) does not. First, the fault bites a 16 B WRITE
    // posted without -I...
    let dir = scratch("perftest-i-witness");
    let json = dir.join("plain.json");
    let completion = ["write", "--completion", "-n", "100", "--warmup", "10"];
    let out = run_env(
        &[&completion[..], &["-s", "16"]].concat(),
        &json,
        &[SPOILED],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // rxe reports it as a local QP operation error (status 2).
    assert!(stderr.contains(FAILED_WRITE), "{stderr}");
    // ...while under -I 64 the 16 B point completes every WR and the 256 B
    // point, not inlined, fails the same way.
    let json = dir.join("mixed.json");
    let mixed_args = [&completion[..], &["-s", "16,256", "-I", "64"]].concat();
    let out = run_env(&mixed_args, &json, &[SPOILED]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(FAILED_WRITE), "{stderr}");
    let doc: rdma_bench::results::ResultsDoc =
        serde_json::from_value(super::common::read_json(&json)).unwrap();
    assert_eq!(inline_by_size(&doc), vec![(16, true, Some(64))]);
    assert_eq!(doc.latency().next().unwrap().iters, 100);
    // Throughput issuers likewise: 16 B under -I 64 runs, 256 B fails.
    let tput = ["write", "--tput", "inbound", "-I", "64", "-n", "300"];
    let json = dir.join("tput16.json");
    let out = run_env(&[&tput[..], &["-s", "16"]].concat(), &json, &[SPOILED]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let doc: rdma_bench::results::ResultsDoc =
        serde_json::from_value(super::common::read_json(&json)).unwrap();
    assert_eq!(doc.throughput().next().unwrap().sent, 300);
    let json = dir.join("tput256.json");
    let out = run_env(&[&tput[..], &["-s", "256"]].concat(), &json, &[SPOILED]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(FAILED_WRITE), "{stderr}");
    eprintln!(
        "MEASURED: send-lkey fault: plain 16 B fails, -I 64 runs 16 B (100 WRs, 300 tput WRs) and fails 256 B"
    );

    // -I above the device's max_inline is refused for a size it would
    // inline, with both numbers; sizes above -I run uninlined.
    let limit: u32 = doc.device.max_inline;
    let over = (limit + 256).to_string();
    let between = (limit + 128).to_string();
    let out = run(&["write", "-s", &between, "-I", &over, "-d", &device()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--inline-size {over} --size {between}"))
            && stderr.contains(&format!("({limit})")),
        "{stderr}"
    );
}
