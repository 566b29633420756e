//! `--bidirectional` with `--cm`, `--post-api ex`, `--mr-per-qp` and
//! `--region`/`--offsets` on the device.
//!
//! Witnesses: rxe0's port counters around each run (in loopback and with a
//! `serve` on the same device both sides' packets count on rxe0), each
//! side's own count of its peer's SENDs, and the target memory itself (the
//! slots the peer's WRITEs reached, read back by each side's target).

use std::process::Command;

use rdma_bench::results::{ResultsDoc, TputRecord};

use super::bidir_srq::{
    check_directions, check_packets, counted_run, port_counter, retry_counters, Packets,
};
use super::common::{bin, read_json, scratch, text};
use super::{device, ipv4, start_server};

/// rdma_cm's own connection messages (MADs on QP1: REQ, REP, RTU, then
/// DREQ, DREP, perhaps one resent) count on rxe0 as SENDs and receives too:
/// `extra` must be some of them, at most six per QP pair connected.
fn cm_mads(what: &str, extra: u64, pairs: u64) {
    assert!(
        extra > 0 && extra <= 6 * pairs,
        "{what}: {extra} messages beyond the run's own for {pairs} rdma_cm connections"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn bidirectional_over_rdma_cm_in_loopback_and_through_serve() {
    // Each side dials (client) or answers (server) its targets' and its
    // issuers' QPs alike; every WRITE is one request and one ACK.
    let (r, pkts, recvs) = counted_run(
        "bcmwrite",
        &[
            "write", "--tput", "outbound", "-b", "--cm", "-n", "1000", "-q", "2",
        ],
    );
    assert_eq!(r.connection, "cm", "{r:?}");
    check_directions("bidirectional WRITE --cm", &r, 2000);
    check_packets("bidirectional WRITE --cm", r.sent, pkts);
    // WRITEs consume no receives: what rdma_recvs counted is the cm's
    // messages for 4 pairs (each side's 2 issuer QPs with the other's targets).
    cm_mads("bidirectional WRITE --cm", recvs, 4);

    // SENDs: each side's sink counts the other's, and the device agrees.
    let s0 = port_counter("rdma_sends");
    let (r, pkts, recvs) = counted_run(
        "bcmsend",
        &[
            "send", "--tput", "outbound", "-b", "-R", "-n", "500", "-q", "2",
        ],
    );
    let sends = port_counter("rdma_sends") - s0;
    assert_eq!(r.connection, "cm", "{r:?}");
    check_directions("bidirectional SEND --cm", &r, 1000);
    for d in r.directions.as_ref().unwrap() {
        assert_eq!(d.received, Some(d.sent), "{d:?}");
    }
    cm_mads(
        "bidirectional SEND --cm: rdma_sends",
        sends.saturating_sub(r.sent),
        4,
    );
    cm_mads(
        "bidirectional SEND --cm: rdma_recvs",
        recvs.saturating_sub(r.sent),
        4,
    );
    check_packets("bidirectional SEND --cm", r.sent, pkts);

    // Through serve: the server answers both its targets' and its issuers' requests.
    let _server = start_server(18761);
    let target = format!("{}:18761", ipv4());
    let (r, pkts, recvs) = counted_run(
        "bcmsrv",
        &[
            "send",
            "--tput",
            "outbound",
            "-b",
            "--cm",
            "--srq",
            "-n",
            "500",
            "-q",
            "2",
            "--connect",
            &target,
        ],
    );
    assert_eq!(r.connection, "cm", "{r:?}");
    assert!(r.srq);
    check_directions("bidirectional SEND --cm via serve", &r, 1000);
    for d in r.directions.as_ref().unwrap() {
        assert_eq!(d.received, Some(d.sent), "{d:?}");
    }
    cm_mads(
        "bidirectional SEND --cm via serve",
        recvs.saturating_sub(r.sent),
        4,
    );
    check_packets("bidirectional SEND --cm via serve", r.sent, pkts);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn bidirectional_with_the_extended_post_api() {
    let s0 = port_counter("rdma_sends");
    let (r, pkts, recvs) = counted_run(
        "bexsend",
        &[
            "send",
            "--tput",
            "outbound",
            "-b",
            "--post-api",
            "ex",
            "-n",
            "800",
            "-q",
            "2",
        ],
    );
    let sends = port_counter("rdma_sends") - s0;
    assert_eq!(r.posting.post_api, rdma_bench::spec::PostApi::Ex, "{r:?}");
    check_directions("bidirectional SEND --post-api ex", &r, 1600);
    for d in r.directions.as_ref().unwrap() {
        assert_eq!(d.received, Some(d.sent), "{d:?}");
    }
    assert_eq!(sends, r.sent, "rdma_sends == both sides' counted SENDs");
    assert_eq!(recvs, r.sent, "rdma_recvs == both sinks' counts");
    check_packets("bidirectional SEND --post-api ex", r.sent, pkts);

    let (r, pkts, _) = counted_run(
        "bexwrite",
        &[
            "write",
            "--tput",
            "outbound",
            "-b",
            "--post-api",
            "ex",
            "-n",
            "1000",
            "-q",
            "2",
        ],
    );
    assert_eq!(r.posting.post_api, rdma_bench::spec::PostApi::Ex, "{r:?}");
    check_directions("bidirectional WRITE --post-api ex", &r, 2000);
    check_packets("bidirectional WRITE --post-api ex", r.sent, pkts);
}

/// Runs rdma-bench with the target-slots test hook on; returns the only
/// throughput record, the hook's lines (one per side's target: per QP,
/// slots written, and slots in the region) and the growth of sent_pkts.
fn hooked_run(name: &str, args: &[&str]) -> (TputRecord, Vec<(Vec<usize>, usize)>, Packets) {
    let json = scratch(name).join("r.json");
    let dev = device();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["-d", &dev, "--quiet", "--json", json.to_str().unwrap()]);
    let (p0, e0) = (port_counter("sent_pkts"), retry_counters());
    let out = Command::new(bin())
        .args(&all)
        .env("RDMA_BENCH_TEST_SLOTS", "1")
        .output()
        .expect("rdma-bench runs");
    let (p1, e1) = (port_counter("sent_pkts"), retry_counters());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{args:?}: {stderr}{stdout}");
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("results parse");
    let r = doc.throughput().next().expect("one record").clone();
    let lines = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("test hook: WRITE slots written per target QP: "))
        .map(|l| {
            let (list, of) = l.split_once(" of ").unwrap();
            let counts = list
                .trim_matches(['[', ']'])
                .split(',')
                .map(|n| n.trim().parse().unwrap())
                .collect();
            (counts, of.trim().parse().unwrap())
        })
        .collect();
    eprintln!(
        "MEASURED: {name}: sent {}, sent_pkts +{}, {stderr}",
        r.sent,
        p1 - p0
    );
    let pkts = Packets::grown(p1 - p0, &e0, &e1, r.window);
    (r, lines, pkts)
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn bidirectional_memory_layouts_reach_each_sides_own_slots() {
    // 64 KiB regions of 1024 64-byte slots, one registration per QP:
    // 1500 sequential WRITEs per QP wrap its region once, so each side's
    // target finds every slot of each of its QPs written.
    let (r, lines, pkts) = hooked_run(
        "bmemseq",
        &[
            "write",
            "--tput",
            "outbound",
            "-b",
            "--mr-per-qp",
            "--region",
            "64k",
            "--offsets",
            "sequential",
            "-s",
            "64",
            "-n",
            "1500",
            "-q",
            "2",
        ],
    );
    assert!(
        r.memory.mr_per_qp && r.memory.region == Some(65536) && r.memory.offsets == "sequential"
    );
    check_directions("bidirectional WRITE sequential", &r, 3000);
    check_packets("bidirectional WRITE sequential", r.sent, pkts);
    assert_eq!(
        lines,
        vec![(vec![1024, 1024], 1024); 2],
        "both sides' targets, every slot of every QP"
    );

    // Fixed offsets (with a region): each QP's WRITEs all land on slot 0.
    let (r, lines, pkts) = hooked_run(
        "bmemfixed",
        &[
            "write", "--tput", "outbound", "-b", "--region", "64k", "-s", "64", "-n", "500", "-q",
            "2",
        ],
    );
    assert!(!r.memory.mr_per_qp && r.memory.offsets == "fixed");
    check_directions("bidirectional WRITE fixed", &r, 1000);
    check_packets("bidirectional WRITE fixed", r.sent, pkts);
    assert_eq!(lines, vec![(vec![1, 1], 1024); 2]);

    // Random offsets: 500 draws per QP over 1024 slots reach ~400 distinct
    // ones (1024 * (1 - e^(-500/1024))); at least 300, at most 500.
    let (r, lines, _) = hooked_run(
        "bmemrand",
        &[
            "write",
            "--tput",
            "outbound",
            "-b",
            "--mr-per-qp",
            "--region",
            "64k",
            "--offsets",
            "random",
            "-s",
            "64",
            "-n",
            "500",
            "-q",
            "2",
        ],
    );
    check_directions("bidirectional WRITE random", &r, 1000);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (counts, slots) in &lines {
        assert_eq!(*slots, 1024);
        assert!(
            counts.len() == 2 && counts.iter().all(|&n| (300..=500).contains(&n)),
            "{lines:?}"
        );
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn echo_server_on_an_srq_with_the_extended_post_api() {
    // The server's extended UD QP takes its SEND requests from its SRQ and
    // answers through ibv_wr_*; both kinds of SEND count on rxe0.
    let s0 = port_counter("rdma_sends");
    let (r, pkts, recvs) = counted_run(
        "srqexecho",
        &[
            "echo",
            "--tput",
            "--req",
            "send",
            "--resp",
            "send",
            "-c",
            "ud",
            "--srq",
            "--post-api",
            "ex",
            "-n",
            "200",
            "-q",
            "2",
        ],
    );
    let sends = port_counter("rdma_sends") - s0;
    assert!(
        r.srq && r.posting.post_api == rdma_bench::spec::PostApi::Ex,
        "{r:?}"
    );
    assert_eq!(r.ops, 400, "{r:?}");
    assert_eq!(
        r.received,
        Some(r.sent),
        "the server saw every request: {r:?}"
    );
    assert_eq!(r.responses, Some(r.sent), "{r:?}");
    // Requests (server receives) and responses (client receives): UD, one
    // packet each, no ACKs.
    assert_eq!(recvs, 2 * r.sent, "{r:?}");
    assert_eq!(sends, 2 * r.sent, "{r:?}");
    assert_eq!(pkts.sent, 2 * r.sent, "{r:?}");
}
