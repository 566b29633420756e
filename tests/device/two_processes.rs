//! A client and `serve` as two processes (and a second client after the
//! first), the results naming the server's host and device.

use super::*;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn two_processes_and_a_second_client() {
    let _server = start_server(18601);
    let target = format!("{}:18601", ipv4());
    let (doc, csv) = latency(
        "remote1",
        &[
            "write",
            "--connect",
            &target,
            "-s",
            "2,64,1024",
            "-n",
            ITERS_S,
        ],
    );
    check_points(&doc, &csv, &[2, 64, 1024], ITERS);
    // Provenance of both sides: the server's handshake named its host and device.
    assert_eq!(doc.peer.mode, "tcp");
    assert_eq!(doc.peer.address.as_deref(), Some(target.as_str()));
    assert_eq!(doc.peer.device.as_deref(), Some(device().as_str()));
    assert_eq!(doc.peer.host.as_deref(), Some(doc.host.hostname.as_str()));
    // The server keeps serving: a second client, another verb.
    let (doc, csv) = latency(
        "remote2",
        &["send", "--connect", &target, "-s", "64", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &[64], ITERS);
    let (doc, csv) = latency(
        "remote3",
        &[
            "atomic",
            "--op",
            "fadd",
            "--connect",
            &target,
            "-n",
            ITERS_S,
        ],
    );
    check_points(&doc, &csv, &[8], ITERS);
}
