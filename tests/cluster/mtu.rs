//! Hosts that differ: the other host's NIC MTU below this one's, so their
//! ports' active MTUs differ (1000 bytes gives rxe 512, 1500 gives 1024).
//! RC/UC run at the smaller one (the record says so, and this host's own
//! packet count proves it), `--mtu` runs when both ports carry it and is
//! refused naming both when one does not, and a UD size above the narrower
//! port's MTU is refused with both numbers. Nothing waits for a timeout.

use std::time::{Duration, Instant};

use super::common::text;
use super::hosts::{delta, my_counters, peer, Peer};
use super::{assert_packets, client, packets, WireCheck};

/// The results of a client run that had to succeed.
fn ok(
    (out, doc, _): (
        std::process::Output,
        Option<rdma_bench::results::ResultsDoc>,
        Duration,
    ),
) -> rdma_bench::results::ResultsDoc {
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "failed ({:?}): {stderr}{stdout}",
        out.status
    );
    doc.expect("a successful run wrote its results")
}

/// The peer's NIC at `mtu` bytes until dropped (then back at 1500), once its
/// port reports `active`.
struct NarrowNic(Peer);

impl NarrowNic {
    fn set(b: &Peer, mtu: u32, active: u32) {
        let mtu = mtu.to_string();
        let out = b.run(&["ip", "link", "set", "eth0", "mtu", &mtu]);
        assert!(
            out.status.success(),
            "ip link set eth0 mtu {mtu} on {}",
            b.name
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.active_mtu() != active {
            assert!(
                Instant::now() < deadline,
                "rxe0 on {} never took MTU {active}",
                b.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for NarrowNic {
    fn drop(&mut self) {
        NarrowNic::set(&self.0, 1500, 1024);
    }
}

#[test]
#[ignore = "needs the soft-RoCE cluster: run via scripts/test"]
fn hosts_with_different_mtus_run_at_the_smaller_one_or_are_refused_naming_both() {
    let b = peer();
    let serve = b.serve(18720, &[]);
    NarrowNic::set(&b, 1000, 512);
    let _restore = NarrowNic(b.clone());

    // Latency and throughput at 4 KiB: 8 packets of 512 bytes per message
    // (4 would mean this side ran at its own 1024).
    let wire = WireCheck::start(&b);
    let lat = ok(client(
        "mtu_lat",
        &b,
        18720,
        &["write", "-s", "4096", "-n", "100", "--warmup", "10"],
    ));
    let r = lat.latency().next().unwrap();
    assert_eq!(r.path_mtu, Some(512), "{r:?}");
    let sent = r.device_counters.as_ref().unwrap()["sent_pkts"];
    assert_packets(
        "4 KiB WRITE ping-pong at 512",
        sent,
        r.iters,
        packets(4096, 512) + 1,
    );

    // Throughput: over the whole run, every WR posted (warm-up included)
    // costs 8 packets (a window's edges cut through the WRs in flight, up to
    // 128 x 8 packets here, as many as the window holds on this slow wire).
    let before = my_counters();
    let tput = ok(client(
        "mtu_tput",
        &b,
        18720,
        &["write", "--tput", "inbound", "-s", "4096", "-D", "0.3"],
    ));
    let sent = delta(&before, &my_counters())["sent_pkts"];
    let r = tput.throughput().next().unwrap();
    assert_eq!(r.path_mtu, Some(512));
    assert_packets(
        "4 KiB WRITE inbound at 512",
        sent,
        r.sent,
        packets(4096, 512),
    );

    // --mtu both carry runs; one the narrower port cannot carry is refused,
    // at once and naming both ports, before any QP is made.
    let small = ok(client(
        "mtu256",
        &b,
        18720,
        &[
            "write", "-s", "4096", "-n", "50", "--warmup", "5", "--mtu", "256",
        ],
    ));
    let r = small.latency().next().unwrap();
    assert_eq!((r.path.mtu, r.path_mtu), (Some(256), Some(256)));
    assert_packets(
        "4 KiB at --mtu 256",
        r.device_counters.as_ref().unwrap()["sent_pkts"],
        r.iters,
        16 + 1,
    );
    wire.grown(&b)
        .assert_wire_agrees("runs at path MTU 512 and 256", &b);
    for (args, needles) in [
        (
            &["write", "-s", "4096", "-n", "50", "--mtu", "1024"][..],
            &["--mtu 1024", "on h2 (512", "on h1 has 1024"][..],
        ),
        (
            &["send", "-c", "ud", "-s", "1024", "-n", "50"][..],
            &[
                "--size 1024",
                "UD MTU of the path (512",
                "on h2 has 512",
                "on h1 has 1024",
            ][..],
        ),
    ] {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--timeout", "30"]);
        let before = my_counters();
        let (out, _, elapsed) = client("mtu_refused", &b, 18720, &args);
        let sent = delta(&before, &my_counters())["sent_pkts"];
        let stderr = text(&out).1;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: one line: {stderr}"
        );
        for n in needles {
            let n = n.replace("h2", &b.name).replace("h1", &super::hosts::me());
            assert!(stderr.contains(&n), "{args:?}: '{stderr}' lacks '{n}'");
        }
        // Refused in the handshake: nothing waited out --timeout.
        assert!(
            elapsed < Duration::from_secs(30),
            "{args:?} took {elapsed:?}"
        );
        assert_eq!(sent, 0, "{args:?}: refused before any packet");
    }
    assert!(serve.running(), "serve lives on: {}", serve.stderr());
}
