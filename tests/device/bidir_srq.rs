//! `--bidirectional` and `--srq` (issue 14 items 4 and 5) on the device.
//!
//! Witnesses: each record's own per-direction figures, the receivers' counts,
//! and rxe0's port counters read by this test around the whole run (in
//! loopback, and with a `serve` on the same device, both sides' packets count
//! on rxe0; nothing else uses the device meanwhile).

use std::time::Duration;

use rdma_bench::results::TputRecord;
use rdma_bench::verbs::Context;

use super::common::refused;
use super::{device, ipv4, latency, start_server};

/// One port counter of the device under test, read after its cache expired.
pub(super) fn port_counter(name: &str) -> u64 {
    let path = format!(
        "/sys/class/infiniband/{}/ports/1/hw_counters/{name}",
        device()
    );
    // The kernel serves cached values for `lifespan` ms: wait them out.
    std::thread::sleep(Duration::from_millis(
        2 * super::counter_lifespan_ms() as u64 + 5,
    ));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Counters that grow when a receiver had no receive posted (RNR NAKs sent
/// and received) or a sender went back to resend (NAKed PSNs, timeouts).
const RETRY_COUNTERS: [&str; 5] = [
    "rcvd_rnr_err",
    "send_rnr_err",
    "retry_rnr_exceeded_err",
    "rcvd_seq_err",
    "completer_retry_err",
];

pub(super) fn retry_counters() -> Vec<u64> {
    RETRY_COUNTERS.iter().map(|c| port_counter(c)).collect()
}

/// The port's sent_pkts growth over a run, and how many of them resends may
/// account for: each time a requester went back (a NAKed PSN or a
/// timeout, as the device counted them), it resent at most a window of
/// WRs, each a request and its ACK.
#[derive(Debug, Clone, Copy)]
pub(super) struct Packets {
    pub sent: u64,
    pub resend_room: u64,
}

/// Runs `args` with the port's packet and receive counters read around it;
/// returns the only throughput record and the counters' growth
/// (sent_pkts, rdma_recvs). Every receive must have been posted in time:
/// no RNR NAK was sent or received meanwhile.
pub(super) fn counted_run(name: &str, args: &[&str]) -> (TputRecord, Packets, u64) {
    let (p0, r0) = (port_counter("sent_pkts"), port_counter("rdma_recvs"));
    let e0 = retry_counters();
    let (doc, csv) = latency(name, args);
    let (p1, r1) = (port_counter("sent_pkts"), port_counter("rdma_recvs"));
    let e1 = retry_counters();
    let grew: Vec<String> = RETRY_COUNTERS
        .iter()
        .zip(e0.iter().zip(&e1))
        .map(|(c, (a, b))| format!("{c} +{}", b - a))
        .collect();
    eprintln!("MEASURED: {name}: {}", grew.join(", "));
    for (i, c) in RETRY_COUNTERS.iter().enumerate().take(3) {
        assert_eq!(
            e1[i] - e0[i],
            0,
            "{name}: {c} grew: a receiver ran out of posted receives ({grew:?})"
        );
    }
    assert_eq!(doc.throughput().count(), 1, "{name}: one point");
    let r = doc.throughput().next().unwrap().clone();
    // The CSV carries both knobs.
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    for (knob, want) in [("bidirectional", r.bidirectional), ("srq", r.srq)] {
        let at = header.iter().position(|c| *c == knob).expect(knob);
        assert_eq!(row[at], want.to_string(), "{name}: CSV {knob}");
    }
    eprintln!(
        "MEASURED: {name}: {:.4} Mops, sent {}, received {:?}; port sent_pkts +{}, rdma_recvs +{}",
        r.mops,
        r.sent,
        r.received,
        p1 - p0,
        r1 - r0
    );
    let pkts = Packets::grown(p1 - p0, &e0, &e1, r.window);
    (r, pkts, r1 - r0)
}

impl Packets {
    /// `sent` packets, with the go-backs between two `retry_counters()`
    /// readings (rcvd_seq_err, completer_retry_err) of a `window`-deep run.
    pub(super) fn grown(sent: u64, before: &[u64], after: &[u64], window: u32) -> Packets {
        let went_back = (after[3] - before[3]) + (after[4] - before[4]);
        Packets {
            sent,
            resend_room: went_back * 2 * u64::from(window),
        }
    }
}

/// A bidirectional record: two directions, client first, each having issued
/// exactly `per_side` WRs (an --iters run), and totals that are their sums.
pub(super) fn check_directions(what: &str, r: &TputRecord, per_side: u64) {
    assert!(r.bidirectional, "{what}: {r:?}");
    assert_eq!(r.issued_by.as_deref(), Some("both"), "{what}");
    let d = r.directions.as_ref().expect("directions recorded");
    assert_eq!(d.len(), 2, "{what}: {d:?}");
    assert_eq!(
        (d[0].issued_by.as_str(), d[1].issued_by.as_str()),
        ("client", "server")
    );
    for x in d {
        assert!(x.mops > 0.0 && x.elapsed_s > 0.0, "{what}: {x:?}");
        assert_eq!(x.sent, per_side, "{what}: each side posts -n per QP: {x:?}");
        assert_eq!(
            x.ops, per_side,
            "{what}: an --iters run counts every WR: {x:?}"
        );
    }
    let mops: f64 = d.iter().map(|x| x.mops).sum();
    assert!(
        (r.mops - mops).abs() < 1e-9 * mops.max(1.0),
        "{what}: {r:?}"
    );
    assert_eq!(r.ops, d[0].ops + d[1].ops, "{what}");
    assert_eq!(r.sent, d[0].sent + d[1].sent, "{what}");
    assert_eq!(
        r.per_thread.len() as u32,
        2 * r.threads,
        "{what}: both sides' threads"
    );
    assert_eq!(r.per_qp_ops.iter().sum::<u64>(), r.ops, "{what}");
}

/// A WRITE or SEND of 64 B over RC costs two packets on the device in
/// loopback (request and ACK, both counted on rxe0): at least that many,
/// under 10% more, plus what the device says the requesters resent (a
/// stalled guest times RC WRs out and resends them).
pub(super) fn check_packets(what: &str, wrs: u64, pkts: Packets) {
    let most = 2 * wrs + wrs / 10 + 16 + pkts.resend_room;
    assert!(
        pkts.sent >= 2 * wrs && pkts.sent <= most,
        "{what}: port sent_pkts grew {} for {wrs} WRs (2 each expected, at most {most} with resends)",
        pkts.sent
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn bidirectional_write_and_send_in_loopback() {
    let (r, pkts, recvs) = counted_run(
        "bwrite",
        &["write", "--tput", "outbound", "-b", "-n", "1500", "-q", "2"],
    );
    check_directions("bidirectional WRITE", &r, 3000);
    assert_eq!(r.received, None, "WRITE targets count nothing: {r:?}");
    check_packets("bidirectional WRITE", r.sent, pkts);
    assert_eq!(recvs, 0, "WRITEs consume no receives");

    let (r, pkts, recvs) = counted_run(
        "bsend",
        &[
            "send",
            "--tput",
            "outbound",
            "--bidirectional",
            "-n",
            "800",
            "-q",
            "2",
        ],
    );
    check_directions("bidirectional SEND", &r, 1600);
    for d in r.directions.as_ref().unwrap() {
        assert_eq!(
            d.received,
            Some(d.sent),
            "each side's sink saw the other's SENDs: {d:?}"
        );
    }
    assert_eq!(r.received, Some(r.sent), "{r:?}");
    assert_eq!(recvs, r.sent, "rdma_recvs counts both sinks' receives");
    check_packets("bidirectional SEND", r.sent, pkts);

    // A timed point: both sides measure their own window; the sum is reported.
    let (doc, _) = latency(
        "btimed",
        &["write", "--tput", "outbound", "-b", "-D", "0.2"],
    );
    let r = doc.throughput().next().unwrap();
    let d = r.directions.as_ref().unwrap();
    assert!(d.iter().all(|x| x.mops > 0.0 && x.ops > 0), "{d:?}");
    assert!((r.mops - d[0].mops - d[1].mops).abs() < 1e-9, "{r:?}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn bidirectional_write_and_send_through_serve() {
    let _server = start_server(18751);
    let target = format!("{}:18751", ipv4());
    let (r, pkts, _) = counted_run(
        "bsrvwrite",
        &[
            "write",
            "--tput",
            "outbound",
            "-b",
            "-n",
            "1000",
            "--connect",
            &target,
        ],
    );
    check_directions("bidirectional WRITE via serve", &r, 1000);
    check_packets("bidirectional WRITE via serve", r.sent, pkts);
    // The server's figure crossed the wire: it issued as many as the client.
    let (r, pkts, recvs) = counted_run(
        "bsrvsend",
        &[
            "send",
            "--tput",
            "outbound",
            "-b",
            "--srq",
            "-n",
            "500",
            "-q",
            "2",
            "--connect",
            &target,
        ],
    );
    check_directions("bidirectional SEND --srq via serve", &r, 1000);
    assert!(r.srq);
    for d in r.directions.as_ref().unwrap() {
        assert_eq!(d.received, Some(d.sent), "{d:?}");
    }
    assert_eq!(recvs, r.sent, "rdma_recvs counts both sides' receives");
    check_packets("bidirectional SEND --srq via serve", r.sent, pkts);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn srq_send_inbound_multi_qp_and_echo() {
    // Eight QPs over two threads draw from one shared receive queue.
    let (r, pkts, recvs) = counted_run(
        "srqin",
        &[
            "send",
            "--tput",
            "inbound",
            "--srq",
            "-n",
            "400",
            "-q",
            "4",
            "--threads",
            "2",
        ],
    );
    assert!(r.srq && !r.bidirectional, "{r:?}");
    assert_eq!(r.sent, 400 * 8, "{r:?}");
    assert_eq!(
        r.received,
        Some(r.sent),
        "the receiver counted every SEND: {r:?}"
    );
    assert_eq!(
        recvs, r.sent,
        "rdma_recvs == receiver's count == sender's count"
    );
    check_packets("SEND inbound --srq", r.sent, pkts);

    // Outbound: the client's sink draws from its SRQ (perftest's spelling).
    let (r, _, recvs) = counted_run(
        "srqout",
        &[
            "send",
            "--tput",
            "outbound",
            "--use-srq",
            "-n",
            "300",
            "-q",
            "4",
        ],
    );
    assert!(r.srq);
    assert_eq!(r.received, Some(300 * 4), "{r:?}");
    assert_eq!(recvs, 300 * 4);

    // Echo: the server's SEND requests arrive through its SRQ.
    let (r, _, recvs) = counted_run(
        "srqecho",
        &[
            "echo", "--tput", "--req", "send", "--resp", "send", "-c", "ud", "--srq", "-n", "200",
            "-q", "2",
        ],
    );
    assert!(r.srq);
    assert_eq!(r.ops, 400, "{r:?}");
    assert_eq!(
        r.received,
        Some(r.sent),
        "the server saw every request: {r:?}"
    );
    assert_eq!(r.responses, Some(r.sent), "{r:?}");
    // Requests (server receives) and responses (client receives) are both SENDs.
    assert_eq!(recvs, r.sent + r.responses.unwrap(), "{r:?}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn srq_above_the_devices_max_srq_wr_is_refused_with_both_numbers() {
    let dev = device();
    let attr = Context::open(&dev)
        .expect("device opens")
        .query_device()
        .expect("device attributes");
    assert!(attr.max_srq > 0, "{dev} offers SRQs");
    // 1024 QPs x a window of 2048 need an SRQ of 2 Mi receives (rxe: 1 Mi).
    let need = 1024u64 * 2048 + 64;
    assert!(need > u64::from(attr.max_srq_wr), "{}", attr.max_srq_wr);
    refused(
        &[
            "send", "--tput", "inbound", "--srq", "-q", "1024", "--window", "2048", "-S", "2048",
            "-d", &dev, "-n", "10", "--quiet",
        ],
        &[
            "--srq",
            &format!("an SRQ of {need} receives"),
            &format!("max_srq_wr of {dev} ({})", attr.max_srq_wr),
        ],
    );
}
