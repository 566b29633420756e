//! `profile --connect` across two hosts: a small set under a budget, run
//! against `serve` on the other host, measures every point of its plan over
//! the wire and records whom it measured against; what it says it sent is
//! what the other host's own device counted coming in; and `report` refuses
//! to lay it over a loopback profile unless told `--force`, naming the
//! condition that differs.

use std::path::Path;
use std::time::Instant;

use super::common::{profile_results_in, read_json, run_within, scratch, text};
use super::hosts::peer;
use super::WireCheck;
use rdma_bench::results::{Record, ResultsDoc};

/// Three figures, four points, each WR one packet at rxe's 1024-B MTU.
const SET: &str = r#"
name = "profile"
passes = 1
[[series]]
label = "WRITE"
verb = "write"
size = "8,64"

[[series]]
label = "WRITE inbound"
verb = "write"
metric = "throughput"
direction = "inbound"
size = 64
qps = 2

[[series]]
label = "SEND inbound"
verb = "send"
metric = "throughput"
direction = "inbound"
size = 1024
qps = 2
"#;

const POINTS: usize = 4;

#[test]
#[ignore = "needs the soft-RoCE cluster: run via scripts/test"]
fn profile_connects_to_the_other_host_and_its_counters_saw_every_wr() {
    let b = peer();
    let _serve = b.serve(18750, &[]);
    let dir = scratch("profile-two-host");
    let set = dir.join("set.toml");
    std::fs::write(&set, SET).unwrap();
    let out = dir.join("out");
    let connect = format!("{}:18750", b.addr);
    let args = [
        "profile",
        "-d",
        "rxe0",
        "--connect",
        &connect,
        "--set",
        set.to_str().unwrap(),
        "--budget",
        "6s",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let check = WireCheck::start(&b);
    let began = Instant::now();
    let o = run_within(&args, 600);
    let took = began.elapsed();
    let grown = check.grown(&b);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{args:?}: {stderr}{stdout}");
    assert!(
        out.join("profile-plan.toml").exists(),
        "the plan is written"
    );

    let plan = read_json(&out.join("profile-plan.json"));
    let passes = plan["passes"].as_u64().expect("the plan says its passes") as usize;
    let doc: ResultsDoc = serde_json::from_value(read_json(
        &profile_results_in(&out).expect("profile wrote a results file"),
    ))
    .unwrap();
    assert_eq!(doc.peer.mode, "tcp");
    assert_eq!(doc.peer.host.as_deref(), Some(b.name.as_str()));
    assert_eq!(
        doc.results.len(),
        POINTS * passes,
        "every pass of every point measured ({passes} passes)"
    );

    // Every WR of this set is one packet from here to the peer (the client
    // issues inbound): the peer's own device counted at least as many in as
    // rdma-bench says it posted, warm-ups included.
    let posted: u64 = doc
        .results
        .iter()
        .map(|r| match r {
            Record::Latency(l) => l.sent,
            Record::Throughput(t) => t.sent,
        })
        .sum();
    let got = grown.c(true, "rcvd_pkts");
    eprintln!(
        "MEASURED: profile --connect --budget 6s took {:.1} s: rdma-bench posted {posted} WRs to {}, whose rxe0 received {got} packets",
        took.as_secs_f64(),
        b.name
    );
    assert!(
        posted > 0 && got >= posted,
        "{posted} WRs posted, {got} packets received"
    );
    grown.assert_wire_agrees("profile --connect", &b);

    // Beside the committed loopback profile: refused, the field named.
    let loopback = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/profile-rxe0-loopback");
    let html = dir.join("report.html");
    let began = Instant::now();
    let o = run_within(
        &[
            "report",
            loopback.to_str().unwrap(),
            out.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ],
        120,
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}{stdout}");
    assert!(
        stderr.contains("peer mode") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(!html.exists(), "a refused report writes no page");
    eprintln!(
        "MEASURED: report refused in {:.1} s",
        began.elapsed().as_secs_f64()
    );
}
