//! A timed latency point's warm-up ends at a fifth of its window even when
//! far more iterations were asked (here ten million for a 0.25 s point, more
//! than any link runs in 50 ms), so a link with long round trips cannot
//! stretch a point far past its window. The record says how many iterations
//! were dropped, and rxe0's own packet counters, read around the whole
//! process, saw those and the measured ones and no more: 4 packets per RC
//! WRITE ping-pong iteration in loopback (each side's WRITE and its ACK).

use super::bidir_srq::port_counter;
use super::latency;

const ASKED: u64 = 10_000_000;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_timed_latency_warmup_stops_at_a_fifth_of_the_window() {
    let asked = ASKED.to_string();
    let before = port_counter("sent_pkts");
    let (doc, _) = latency(
        "warmup-cap",
        &["write", "-s", "64", "-D", "0.25", "--warmup", &asked],
    );
    let after = port_counter("sent_pkts");
    let r = doc.latency().next().expect("one point");
    eprintln!(
        "MEASURED: -D 0.25 --warmup {ASKED}: {} warm-up iterations dropped, {} measured",
        r.warmup_dropped, r.iters
    );
    assert!(
        r.warmup_dropped > 0 && r.warmup_dropped < ASKED,
        "{}",
        r.warmup_dropped
    );
    assert!(r.iters > 0);
    assert_eq!(r.sent, r.warmup_dropped + r.iters);
    let got = after - before;
    let expected = 4 * r.sent;
    eprintln!(
        "MEASURED: rxe0 sent {got} packets for {} iterations (4 each: {expected})",
        r.sent
    );
    assert!(
        (expected - 4..=expected * 3 / 2 + 4).contains(&got),
        "{got} packets for {} iterations of 4",
        r.sent
    );
}
