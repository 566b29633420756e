//! `--events` in throughput (the inbound and outbound issuers take events
//! from their send CQ's completion channel instead of spinning on it), and
//! `--events` and `--post-api ex` through `serve`/`--connect`, where the
//! knob crosses the wire and, outbound, acts in the server's issuer. The
//! witnesses: the channel's event count, the device's packet and message
//! counters against the ops rdma-bench counted, the receiver's count, and
//! the process's CPU time against a busy-polling run of the same point.

use rdma_bench::results::TputRecord;
use rdma_bench::spec::PostApi;

use super::{assert_messages, assert_packets, ipv4, latency, start_server};

/// Events taken over the window: some (the issuer went through the channel)
/// and no more than the completions polled (each event needs a completion
/// after the arm that precedes it).
pub(super) fn assert_woken(what: &str, r: &TputRecord) -> u64 {
    assert!(r.posting.events, "{what}: record says events: {r:?}");
    let woke = r
        .event_wakeups
        .unwrap_or_else(|| panic!("{what}: no event_wakeups recorded with --events: {r:?}"));
    eprintln!(
        "MEASURED: {what}: {} ops, {} completions, {woke} events taken, {:.4} Mops",
        r.ops, r.completions, r.mops
    );
    assert!(
        woke > 0 && woke <= r.completions,
        "{what}: {woke} events for {} completions",
        r.completions
    );
    woke
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn events_throughput_issuers_take_channel_events_and_the_device_counts_every_op() {
    // (name, args, ops, packets per op in loopback)
    type Run<'a> = (&'a str, &'a [&'a str], u64, u64);
    let runs: &[Run] = &[
        // Every WR signaled, a window of one: one event per WR at most.
        (
            "evtw",
            &[
                "write", "--tput", "inbound", "-S", "1", "-t", "1", "-n", "1500",
            ],
            1500,
            2,
        ),
        // Outbound: the server's issuer sleeps, over two QPs.
        (
            "evtr",
            &["read", "--tput", "outbound", "-q", "2", "-n", "800"],
            1600,
            2,
        ),
        (
            "evts",
            &["send", "--tput", "inbound", "-n", "1500"],
            1500,
            2,
        ),
    ];
    for (name, args, ops, per_op) in runs {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-s", "64", "-e"]);
        let (doc, csv) = latency(name, &all);
        let r = doc.throughput().next().unwrap();
        let what = format!("{args:?} -e");
        assert_eq!((r.ops, r.sent), (*ops, *ops), "{what}: {r:?}");
        assert!(
            csv.lines().next().unwrap().contains("event_wakeups"),
            "{csv}"
        );
        let woke = assert_woken(&what, r);
        if r.signal_period == 1 && r.window == 1 {
            // One WR in flight: at most one event per WR.
            assert!(woke <= r.ops, "{what}: {woke} events for {} WRs", r.ops);
        }
        assert_packets(&what, r.device_counters.as_ref(), r.ops, *per_op);
        if r.verb == "send" {
            assert_eq!(r.received, Some(r.sent), "{what}: {r:?}");
            assert_messages(&what, r.device_counters.as_ref(), "rdma_recvs", r.sent);
        }
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn events_throughput_uses_less_cpu_than_busy_polling_the_same_point() {
    // One signaled WR in flight: a polling issuer spins between WRs, a
    // sleeping one waits in poll(2) for the event (on rxe the completion is
    // the kernel's work, done in the post's system call and a tasklet).
    let point = [
        "write", "--tput", "inbound", "-s", "64", "-S", "1", "-t", "1", "-D", "0.5",
    ];
    let cpu = |name: &str, extra: &[&str]| {
        let mut all = point.to_vec();
        all.extend_from_slice(extra);
        let (doc, _) = latency(name, &all);
        let r = doc.throughput().next().unwrap().clone();
        let pct = r
            .cpu_util
            .as_ref()
            .and_then(|c| c.local_process_pct)
            .unwrap_or_else(|| panic!("{name}: no cpu_util.local_process_pct: {r:?}"));
        (pct, r)
    };
    let (spin, rs) = cpu("evcpu0", &[]);
    let (sleep, re) = cpu("evcpu1", &["-e"]);
    assert!(!rs.posting.events && rs.event_wakeups.is_none(), "{rs:?}");
    let woke = assert_woken("write inbound -S 1 -t 1 -e", &re);
    eprintln!(
        "MEASURED: write inbound -S 1 -t 1, 0.5 s: process CPU busy-polling {spin:.1}% ({:.4} Mops), with --events {sleep:.1}% ({:.4} Mops, {woke} events), ratio {:.2}",
        rs.mops,
        re.mops,
        sleep / spin
    );
    assert!(
        spin >= 50.0,
        "a busy-polling issuer uses at least half a CPU: {spin:.1}%"
    );
    assert!(
        sleep < 0.95 * spin,
        "sleeping on events ({sleep:.1}% of a CPU) is not clearly below busy polling ({spin:.1}%)"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn events_and_post_api_ex_through_serve() {
    let _server = start_server(18661);
    let target = format!("{}:18661", ipv4());
    let connect = ["--connect", target.as_str()];

    // SEND ping-pong with --events: the client sleeps for the server's answers.
    let mut args = vec!["send", "-e", "-s", "64", "-n", "1000", "--warmup", "100"];
    args.extend_from_slice(&connect);
    let (doc, _) = latency("evsrv0", &args);
    let r = doc.latency().next().unwrap();
    let what = "send ping-pong -e via serve";
    assert!(r.posting.events, "{what}: {r:?}");
    assert_eq!(r.iters, 1000, "{what}");
    assert_eq!(r.server_received, Some(r.sent), "{what}: {r:?}");
    let woke = r.event_wakeups.expect("event_wakeups recorded");
    eprintln!(
        "MEASURED: {what}: {woke} wake-ups over {} iterations, p50 {:.1} us",
        r.iters,
        r.stats.p50_ns / 1e3
    );
    assert!(
        woke >= r.iters / 2 && woke <= 3 * r.iters,
        "{what}: {woke} wake-ups"
    );
    // Both processes use rxe0: a SEND and its ACK each way per iteration.
    assert_packets(what, r.device_counters.as_ref(), r.iters, 4);

    // WRITE ping-pong posted through ibv_wr_* on both sides.
    let mut args = vec!["write", "--post-api", "ex", "-s", "64", "-n", "2000"];
    args.extend_from_slice(&connect);
    let (doc, csv) = latency("exsrv0", &args);
    let r = doc.latency().next().unwrap();
    let what = "write ping-pong --post-api ex via serve";
    assert_eq!(
        (r.posting.post_api, r.iters),
        (PostApi::Ex, 2000),
        "{what}: {r:?}"
    );
    assert!(csv.lines().nth(1).unwrap().contains(",ex,"), "{csv}");
    assert_packets(what, r.device_counters.as_ref(), r.iters, 4);

    // Throughput: the client's ex QPs issue inbound; outbound the server's
    // issuer posts SENDs through ibv_wr_* and the client counts them.
    let mut args = vec![
        "write",
        "--tput",
        "inbound",
        "--post-api",
        "ex",
        "-q",
        "2",
        "-n",
        "1000",
        "-s",
        "64",
    ];
    args.extend_from_slice(&connect);
    let (doc, _) = latency("exsrv1", &args);
    let r = doc.throughput().next().unwrap();
    let what = "write inbound --post-api ex via serve";
    assert_eq!(
        (r.posting.post_api, r.ops),
        (PostApi::Ex, 2000),
        "{what}: {r:?}"
    );
    assert_packets(what, r.device_counters.as_ref(), r.ops, 2);

    let mut args = vec![
        "send",
        "--tput",
        "outbound",
        "--post-api",
        "ex",
        "-n",
        "1500",
        "-s",
        "64",
    ];
    args.extend_from_slice(&connect);
    let (doc, _) = latency("exsrv2", &args);
    let r = doc.throughput().next().unwrap();
    let what = "send outbound --post-api ex via serve";
    assert_eq!(
        (r.posting.post_api, r.ops),
        (PostApi::Ex, 1500),
        "{what}: {r:?}"
    );
    assert_eq!(r.received, Some(r.sent), "{what}: {r:?}");
    assert_packets(what, r.device_counters.as_ref(), r.ops, 2);
    assert_messages(what, r.device_counters.as_ref(), "rdma_sends", r.sent);

    // --events outbound: the server's issuer takes the events, and its
    // count comes back over the wire into the client's record.
    let mut args = vec!["read", "--tput", "outbound", "-e", "-n", "1500", "-s", "64"];
    args.extend_from_slice(&connect);
    let (doc, _) = latency("evsrv1", &args);
    let r = doc.throughput().next().unwrap();
    let what = "read outbound -e via serve";
    assert_eq!(
        (r.ops, r.issued_by.as_deref()),
        (1500, Some("server")),
        "{what}: {r:?}"
    );
    assert_woken(what, r);
    assert_packets(what, r.device_counters.as_ref(), r.ops, 2);
}
