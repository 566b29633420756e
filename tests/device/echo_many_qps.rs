//! Echo with SEND requests and SEND responses over 1024 QPs. A client
//! thread's request QPs share one receive CQ for their responses, and the
//! server's one UD QP one receive CQ for every request; rxe0 offers 32767
//! entries per CQ (max_cqe). At `-q 1024 -t 128`
//! 131072 responses could wait in the client's CQ: it overflowed, rxe moved
//! the request QP whose response did not fit to the error state, and the run
//! died on a flushed receive with no other failed completion behind it. Such
//! a run is now refused before any QP is made, naming --qps and --window and
//! both numbers; the largest window that fits (31) runs.
//!
//! Witnesses: the server's count of requests received and answered, and
//! rxe0's message counters (rdma_sends, rdma_recvs) over an --iters run.

use super::common::{run, text};
use super::{assert_messages, device, latency};

/// 1024 QPs x 31 requests in flight + 64 receives of slack at the server:
/// 31808 receives, the most under rxe0's 32767-entry CQs.
const MANY: &[&str] = &[
    "echo", "--tput", "--req", "send", "--resp", "send", "-c", "ud", "-q", "1024", "-t", "31",
];

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn echo_send_send_over_1024_qps_runs_at_the_largest_window_that_fits() {
    let args = [MANY, &["-D", "0.5"]].concat();
    let (doc, _) = latency("echoq1024", &args);
    let r = doc.throughput().next().unwrap();
    eprintln!(
        "MEASURED: echo send/send -q 1024 -t 31 -D 0.5: ops {}, elapsed_s {:.3}, sent {}, received {:?}, responses {:?}, lost {:?}",
        r.ops, r.elapsed_s, r.sent, r.received, r.responses, r.lost
    );
    assert_eq!((r.qps, r.window), (1024, 31), "{r:?}");
    assert!(r.ops > 0, "{r:?}");
    // No receive queue ran dry and no CQ overflowed: the server received
    // every request and the client got every response back (the drain
    // after the window waits for them).
    assert_eq!(r.received, Some(r.sent), "{r:?}");
    assert_eq!(r.responses, Some(r.sent), "{r:?}");
    assert!(r.ops <= r.sent, "{r:?}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn echo_send_send_over_1024_qps_counts_what_the_device_counts() {
    // Two windows' worth per QP, so every QP's window fills. The 31744
    // requests in flight queue at the server for seconds in a TCG guest
    // (5.6 s here), longer than half of an 8 s --timeout: that must not be
    // taken for a loss (a slot given up on and reused while its answer was
    // still coming overflowed the client's receive CQ and failed the run).
    let args = [MANY, &["-n", "62", "--timeout", "8"]].concat();
    let (doc, _) = latency("echoq1024n", &args);
    let r = doc.throughput().next().unwrap();
    let what = "echo send/send -q 1024 -t 31 -n 62";
    let want = 1024 * 62;
    assert_eq!(r.ops, want, "{what}: N round trips per QP: {r:?}");
    assert!(r.per_qp_ops.iter().all(|&o| o == 62), "{what}: {r:?}");
    assert_eq!(
        r.received,
        Some(want),
        "{what}: the server saw each request"
    );
    assert_eq!(r.responses, Some(want), "{what}: each got its response");
    // In loopback both sides count on rxe0: a request and a response per round trip.
    let dc = r.device_counters.as_ref();
    assert_messages(what, dc, "rdma_sends", 2 * want);
    assert_messages(what, dc, "rdma_recvs", 2 * want);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn echo_send_send_over_1024_qps_is_refused_above_max_cqe() {
    let dev = device();
    let args = [
        "echo", "--tput", "--req", "send", "--resp", "send", "-c", "ud", "-q", "1024", "-t", "128",
        "-D", "0.5", "-d", &dev,
    ];
    let out = run(&args);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("--qps 1024 x --window 128: 131072 SEND responses")
            && stderr.contains(&format!("max_cqe of {dev} (32767)")),
        "{stderr}"
    );
    // Each response fits the client's CQ (1023 x 32 = 32736), but not the
    // receives the server keeps posted for the requests.
    let args = [
        "echo", "--tput", "--req", "send", "--resp", "send", "-c", "ud", "-q", "1023", "-t", "32",
        "-D", "0.5", "-d", &dev,
    ];
    let out = run(&args);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(
            "--qps 1023 x --threads 1 x --window 32: the echo server keeps 32800 receives"
        ) && stderr.contains(&format!("max_cqe of {dev} (32767)")),
        "{stderr}"
    );
}
