//! `--events` in echo throughput (client and server each sleep on one
//! completion channel serving their UD QP's send and receive CQs) and with
//! `--bidirectional` (each side's issuer sleeps on its send CQ's channel).
//!
//! Witnesses: rxe0's port counters read around each run (in loopback and
//! with a `serve` on the same device both sides' packets count on rxe0), the
//! server's count of requests, and the channel's event count.

use rdma_bench::results::TputRecord;

use super::bidir_srq::{check_directions, check_packets, counted_run};
use super::events_tput_serve::assert_woken;
use super::{ipv4, start_server};

/// An echo SEND/SEND --iters run with --events: every round trip counted,
/// the server saw each request, and the device counted two UD SENDs (one
/// packet, one receive each) per round trip.
fn check_echo(what: &str, r: &TputRecord, pkts: super::bidir_srq::Packets, recvs: u64, ops: u64) {
    // UD requests and responses: nothing is ever resent.
    let pkts = pkts.sent;
    assert_eq!(r.req.as_deref(), Some("send"), "{what}");
    assert_eq!(r.ops, ops, "{what}: every round trip: {r:?}");
    assert_eq!(r.received, Some(r.ops), "{what}: the server's count");
    assert_eq!(r.responses, Some(r.ops), "{what}: each response");
    // The client's events come from its signaled requests' completions (the
    // record's `completions`) and its responses' receives (one per round
    // trip): some, and no more than those.
    assert!(r.posting.events, "{what}: record says events: {r:?}");
    let woke = r
        .event_wakeups
        .expect("event_wakeups recorded with --events");
    eprintln!(
        "MEASURED: {what}: {} round trips, {} send completions, {woke} events taken, {:.4} Mops",
        r.ops, r.completions, r.mops
    );
    assert!(
        woke > 0 && woke <= r.completions + r.ops,
        "{what}: {woke} events for {} send completions and {} responses",
        r.completions,
        r.ops
    );
    // UD: no ACKs; a few stray packets (none expected) allowed.
    assert!(
        pkts >= 2 * ops && pkts <= 2 * ops + ops / 20 + 4,
        "{what}: port sent_pkts grew {pkts} for {ops} round trips (2 each)"
    );
    assert!(
        recvs >= 2 * ops && recvs <= 2 * ops + ops / 20 + 4,
        "{what}: port rdma_recvs grew {recvs} for {ops} round trips (2 each)"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn events_in_echo_throughput_loopback_and_through_serve() {
    let echo = [
        "echo", "--tput", "--req", "send", "--resp", "send", "-c", "ud", "-s", "64", "-e",
    ];
    let mut args = echo.to_vec();
    args.extend_from_slice(&["-n", "400", "-q", "2"]);
    let (r, pkts, recvs) = counted_run("evecho0", &args);
    check_echo("echo send/send -e", &r, pkts, recvs, 800);

    // A window of one: the client has one request in flight and sleeps for
    // each response.
    let mut args = echo.to_vec();
    args.extend_from_slice(&["-n", "300", "-t", "1"]);
    let (r, pkts, recvs) = counted_run("evecho1", &args);
    check_echo("echo send/send -t 1 -e", &r, pkts, recvs, 300);
    // Each response is found on a poll or slept for: which one is a race
    // between client and server whose odds depend on the machine's speed;
    // that the client sleeps for some does not.
    assert!(
        r.event_wakeups.unwrap() >= 1,
        "echo -t 1 -e: one request in flight, and never slept for a response: {r:?}"
    );

    // Through serve: the server process sleeps on its channel too (its
    // events are not recorded; its count of requests is).
    let _server = start_server(18681);
    let target = format!("{}:18681", ipv4());
    let mut args = echo.to_vec();
    args.extend_from_slice(&["-n", "400", "--connect", target.as_str()]);
    let (r, pkts, recvs) = counted_run("evecho2", &args);
    check_echo("echo send/send -e via serve", &r, pkts, recvs, 400);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn events_with_bidirectional_write_and_send() {
    let (r, pkts, _) = counted_run(
        "evbw",
        &[
            "write", "--tput", "outbound", "-b", "-e", "-n", "1000", "-q", "2", "-s", "64",
        ],
    );
    let what = "bidirectional WRITE -e";
    check_directions(what, &r, 2000);
    check_packets(what, r.sent, pkts);
    assert_woken(what, &r);

    let (r, pkts, recvs) = counted_run(
        "evbs",
        &[
            "send", "--tput", "outbound", "-b", "-e", "-n", "600", "-q", "2", "-s", "64",
        ],
    );
    let what = "bidirectional SEND -e";
    check_directions(what, &r, 1200);
    check_packets(what, r.sent, pkts);
    assert_woken(what, &r);
    // Each side's sink counted every SEND of the other's, and so did rxe0.
    let d = r.directions.as_ref().unwrap();
    for x in d {
        assert_eq!(x.received, Some(x.sent), "{what}: {x:?}");
    }
    assert!(
        recvs >= r.sent && recvs <= r.sent + r.sent / 20 + 4,
        "{what}: port rdma_recvs grew {recvs} for {} SENDs",
        r.sent
    );
}
