//! Issue 15 items 1-2: CPU use in every record, live intervals, --forever.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdma_bench::report::IntervalFigure;
use rdma_bench::results::{CpuUtil, Record, ResultsDoc};

use super::common::{bin, read_json, scratch};
use super::{device, ipv4, kill, latency, start_server};

/// A busy-polling side: its process used at least half of one CPU, and the
/// host-wide share is a percentage.
fn assert_busy(c: &CpuUtil, what: &str) {
    eprintln!("{what}: {c:?}");
    let proc_pct = c.local_process_pct.expect("getrusage works");
    assert!(
        proc_pct >= 50.0,
        "{what}: a busy-polling run uses >= 50% of one CPU, got {proc_pct:.1}% ({c:?})"
    );
    assert!(
        proc_pct <= 100.0 * f64::from(c.local_cpus) + 10.0,
        "{what}: more CPU than the host has: {c:?}"
    );
    let host = c.local_pct.expect("/proc/stat readable");
    assert!((0.0..=100.0).contains(&host), "{what}: {c:?}");
    // (No check of host busy against this process's share: in the TCG
    // guest on a loaded host /proc/stat's tick-sampled idle time and
    // getrusage's runtime disagree by tens of percent.)
    assert!(c.window_s > 0.0);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn every_record_has_plausible_cpu_util() {
    // Loopback: both sides are this process, so no peer figures. A timed
    // window (CPU times are sampled at scheduler ticks: a window of a few
    // ms, as 2000 ping-pongs take on a fast machine, would read noise).
    let (doc, csv) = latency("cpu_lat", &["write", "-s", "2,64", "-D", "0.5"]);
    assert_eq!(doc.results.len(), 2);
    for r in doc.latency() {
        let c = r.cpu_util.as_ref().expect("latency record has cpu_util");
        assert_busy(c, "write ping-pong loopback");
        assert!(
            c.peer_pct.is_none() && c.peer_process_pct.is_none(),
            "{c:?}"
        );
        assert!(
            c.local_cpu_s_per_mop.is_none(),
            "latency has no per-op cost"
        );
    }
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains("cpu_util.local_process_pct"));
    let (doc, csv) = latency(
        "cpu_tput",
        &["write", "--tput", "inbound", "-D", "0.5", "--qps", "1,2"],
    );
    assert_eq!(doc.results.len(), 2);
    for r in doc.throughput() {
        let c = r.cpu_util.as_ref().expect("throughput record has cpu_util");
        assert_busy(c, "inbound WRITE loopback");
        assert!(c.peer_pct.is_none());
        // CPU-seconds per million ops, recomputed from the record.
        let per_mop = c.local_cpu_s_per_mop.expect("per-op cost");
        let cpu_s = c.local_process_pct.unwrap() / 100.0 * c.window_s;
        let want = cpu_s / (r.ops as f64 / 1e6);
        assert!(
            (per_mop - want).abs() <= 0.05 * want,
            "{per_mop} vs {want} from the record"
        );
        // The window the CPU was read over is the measured one.
        assert!(
            (c.window_s - r.elapsed_s).abs() < 0.05 * r.elapsed_s,
            "cpu window {} vs measured {}",
            c.window_s,
            r.elapsed_s
        );
    }
    assert!(csv.lines().nth(1).unwrap().split(',').count() > 40);
    // Against serve: the peer measured its own CPU over the point and sent it.
    let _server = start_server(18651);
    let target = format!("{}:18651", ipv4());
    let (doc, _) = latency("cpu_remote", &["write", "--connect", &target, "-D", "0.5"]);
    let c = doc.latency().next().unwrap().cpu_util.clone().unwrap();
    assert_busy(&c, "write ping-pong, client");
    // The server answers a ping-pong by polling memory: busy too.
    let peer = c.peer_process_pct.expect("the peer reports its CPU");
    assert!(peer >= 50.0, "the answering server busy-polls: {c:?}");
    assert!(c.peer_pct.is_some_and(|p| (0.0..=100.0).contains(&p)));
    let (doc, _) = latency(
        "cpu_remote_tput",
        &[
            "send",
            "--tput",
            "inbound",
            "--connect",
            &target,
            "-D",
            "0.5",
        ],
    );
    let c = doc.throughput().next().unwrap().cpu_util.clone().unwrap();
    assert_busy(&c, "inbound SEND, client");
    assert!(c.peer_process_pct.is_some_and(|p| p >= 0.0), "{c:?}");
    assert!(c.peer_cpu_s_per_mop.is_some(), "{c:?}");
}

/// ≥ 4 intervals of about `every` s whose ops sum to the point's within 5%,
/// laid end to end from the window's start.
fn check_intervals(iv: &[IntervalFigure], ops: u64, elapsed_s: f64, every: f64, what: &str) {
    assert!(iv.len() >= 4, "{what}: {} intervals", iv.len());
    let sum: u64 = iv.iter().map(|f| f.ops).sum();
    let diff = (sum as f64 - ops as f64).abs();
    assert!(
        diff <= 0.05 * ops as f64,
        "{what}: intervals hold {sum} ops, the point {ops}"
    );
    let mut at = 0.0;
    for (i, f) in iv.iter().enumerate() {
        assert_eq!(f.index as usize, i);
        assert!((f.start_s - at).abs() < 1e-6, "{what}: gap before {f:?}");
        at += f.elapsed_s;
        assert!(f.ops > 0, "{what}: empty interval {f:?}");
    }
    // The guest stalls a thread now and then (a stalled interval ends late
    // and the next one early, on the grid start + k·every), so only the
    // median interval is held to the length asked.
    assert_typical(iv, every, what);
    // They cover the window as the first thread saw it (`elapsed_s` is the
    // longest thread's, which a stalled thread stretches).
    assert!(
        at <= elapsed_s + 0.02 && at >= 0.8 * elapsed_s,
        "{what}: intervals cover {at} s of {elapsed_s}"
    );
}

/// The median whole interval lasts what was asked, within half of it.
fn assert_typical(iv: &[IntervalFigure], every: f64, what: &str) {
    let mut whole: Vec<f64> = iv[..iv.len() - 1].iter().map(|f| f.elapsed_s).collect();
    whole.sort_by(f64::total_cmp);
    let median = whole[whole.len() / 2];
    assert!(
        median > every * 0.5 && median < every * 1.5,
        "{what}: median interval {median} s: {iv:?}"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn interval_0_2_over_a_1_s_point_sums_to_the_point() {
    for args in [
        &["write", "--tput", "inbound", "-D", "1", "--interval", "0.2"][..],
        &["echo", "--tput", "-D", "1", "--interval", "0.2"][..],
    ] {
        let (doc, csv) = latency("iv_tput", args);
        let r = doc.throughput().next().unwrap();
        check_intervals(&r.live.intervals, r.ops, r.elapsed_s, 0.2, args[0]);
        assert_eq!(r.live.interval_s, Some(0.2));
        assert!(r.live.intervals.iter().all(|f| f.p50_ns.is_none()));
        assert!(csv.contains("interval_s"));
    }
    let (doc, _) = latency("iv_lat", &["read", "-D", "1", "--interval", "0.2"]);
    let r = doc.latency().next().unwrap();
    // READ completion latency: one busy thread (the server is passive), so
    // the loaded guest stalls it least.
    check_intervals(&r.live.intervals, r.iters, r.elapsed_s, 0.2, "read latency");
    // Latency intervals have their own percentiles, inside the point's range.
    for f in &r.live.intervals {
        let (p50, p99) = (f.p50_ns.unwrap(), f.p99_ns.unwrap());
        assert!(p50 <= p99, "{f:?}");
        assert!(
            p50 >= r.stats.min_ns * 0.99 && p99 <= r.stats.max_ns * 1.01,
            "{f:?}"
        );
    }
    // The live lines, printed while the point ran (not --quiet).
    let out = Command::new(bin())
        .args(["send", "-D", "1.5", "--interval", "0.2", "-d", &device()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .filter(|l| l.starts_with("# interval"))
        .count();
    assert!(lines >= 4, "{stdout}");
    assert!(stdout.contains("p99"), "{stdout}");
}

/// Starts `args` with a JSON file, waits until the file holds a provisional
/// record with `whole` intervals (the file is rewritten as they end), waits
/// `then` more (into the next interval), sends `signal`, and returns the exit
/// status, the final document and how long the process took to exit after
/// the signal, plus that time's bound on this machine: 2 s more than it took
/// to start and run up to the signal (a slow machine is slow at both).
fn forever(
    name: &str,
    args: &[&str],
    whole: usize,
    then: Duration,
    signal: &str,
) -> (std::process::ExitStatus, ResultsDoc, Duration) {
    let (status, doc, took, bound) = forever_bounded(name, args, whole, then, signal);
    assert!(
        took < bound,
        "{name}: exited {took:?} after the signal (bound {bound:?})"
    );
    (status, doc, took)
}

fn forever_bounded(
    name: &str,
    args: &[&str],
    whole: usize,
    then: Duration,
    signal: &str,
) -> (std::process::ExitStatus, ResultsDoc, Duration, Duration) {
    let dir = scratch(name);
    let json = dir.join("r.json");
    let mut all: Vec<&str> = args.to_vec();
    let dev = device();
    all.extend_from_slice(&[
        "--forever",
        "--quiet",
        "-d",
        &dev,
        "--json",
        json.to_str().unwrap(),
    ]);
    let child = Command::new(bin())
        .args(&all)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{name}: no intervals written"
        );
        if let Ok(text) = std::fs::read_to_string(&json) {
            if let Ok(doc) = serde_json::from_str::<ResultsDoc>(&text) {
                let n = doc.results.first().map_or(0, |r| match r {
                    Record::Latency(l) => l.live.intervals.len(),
                    Record::Throughput(t) => t.live.intervals.len(),
                });
                if n >= whole {
                    let in_progress = match &doc.results[0] {
                        Record::Latency(l) => l.live.in_progress,
                        Record::Throughput(t) => t.live.in_progress,
                    };
                    assert_eq!(in_progress, Some(true), "{name}: provisional record");
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(then);
    kill(&child, signal);
    // From the signal's delivery (the kill process has exited), not from
    // spawning it, which the benchmark's spinning threads can delay.
    let signalled = Instant::now();
    let bound = signalled.duration_since(start) + Duration::from_secs(2);
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("parseable file");
    (out.status, doc, took, bound)
}

/// A stopped --forever point keeps only whole intervals, each about
/// `every` long, and stopped well before the dropped one would have ended:
/// `to_stop` reaches past the kept window by `into` (about how far into the
/// next interval the signal came), and the process was gone within
/// `took`, well inside what was left of that interval.
fn assert_stopped_promptly(
    iv: &[IntervalFigure],
    elapsed_s: f64,
    to_stop: rdma_bench::report::ToStop,
    every: f64,
    took: Duration,
    what: &str,
) {
    for f in iv {
        assert!(
            f.elapsed_s > every * 0.5 && f.elapsed_s < every * 1.5,
            "{what}: every interval kept is whole: {iv:?}"
        );
    }
    let kept: f64 = iv.iter().map(|f| f.elapsed_s).sum();
    // (elapsed_s is the longest thread's kept window; the intervals are
    // timed on the first thread's clock: a thread that reached a boundary
    // late on the loaded host kept a slightly longer interval.)
    assert!(
        elapsed_s >= kept - 1e-6 && elapsed_s - kept < 0.1 * every,
        "{what}: {kept} vs {elapsed_s}"
    );
    let dropped = to_stop.window_s - elapsed_s;
    // The interval in progress would have ended at the next grid boundary.
    let left = every - dropped;
    eprintln!(
        "MEASURED: {what}: {} whole intervals ({elapsed_s:.3} s) kept, {dropped:.3} s of the next dropped; exited {:.3} s after the signal, {left:.3} s before that interval would have ended",
        iv.len(),
        took.as_secs_f64()
    );
    assert!(
        dropped > 0.2 * every,
        "{what}: the signal came mid-interval: {to_stop:?}"
    );
    // The loop ended well before the boundary that would have closed the
    // interval in progress, and the process (files written) before that
    // boundary too: a stop ends the point at once.
    assert!(
        left > 0.5,
        "{what}: the loop ran on towards the next boundary: {to_stop:?}"
    );
    assert!(
        took.as_secs_f64() < left,
        "{what}: a stop ends the point at once, not at the next boundary: exited {took:?} after the signal, {left:.3} s before the boundary"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn forever_stopped_by_a_signal_exits_0_with_its_whole_intervals() {
    // UC WRITE: one packet per WR, so the device's sent_pkts witness the
    // WRs up to the stop. Two threads must agree on the intervals kept.
    let (status, doc, took) = forever(
        "forever_tput",
        &[
            "write",
            "--tput",
            "inbound",
            "-c",
            "uc",
            "--threads",
            "2",
            "--interval",
            "3",
        ],
        1,
        Duration::from_millis(1000),
        "-INT",
    );
    assert_eq!(
        status.code(),
        Some(0),
        "stopping --forever is its normal end"
    );
    assert_eq!(doc.results.len(), 1);
    let r = doc.throughput().next().unwrap();
    assert!(r.live.forever && r.live.in_progress.is_none(), "{r:?}");
    assert!(!r.live.intervals.is_empty(), "{:?}", r.live.intervals);
    let stop = r
        .live
        .to_stop
        .expect("a stopped forever point says what its edges cover");
    assert_stopped_promptly(
        &r.live.intervals,
        r.elapsed_s,
        stop,
        3.0,
        took,
        "forever UC WRITE x2 threads",
    );
    // The point is exactly its whole intervals, on every thread and QP.
    assert_eq!(r.live.intervals.iter().map(|f| f.ops).sum::<u64>(), r.ops);
    assert_eq!(r.per_qp_ops.iter().sum::<u64>(), r.ops);
    assert_eq!(r.per_thread.len(), 2);
    assert_eq!(r.per_thread.iter().map(|t| t.ops).sum::<u64>(), r.ops);
    assert!(r.per_thread.iter().all(|t| t.ops > 0), "{:?}", r.per_thread);
    assert!(
        stop.ops > r.ops,
        "the dropped interval had ops: {stop:?} vs {}",
        r.ops
    );
    // What the edges read covers the window up to the stop, as recorded.
    let c = r.cpu_util.as_ref().expect("cpu_util");
    assert!(
        (c.window_s - stop.window_s).abs() < 0.05 * stop.window_s,
        "{c:?} vs {stop:?}"
    );
    let per_mop = c.local_cpu_s_per_mop.unwrap();
    let want = c.local_process_pct.unwrap() / 100.0 * c.window_s / (stop.ops as f64 / 1e6);
    assert!((per_mop - want).abs() / want < 0.01, "{per_mop} vs {want}");
    let pkts = r.device_counters.as_ref().expect("device counters")["sent_pkts"] as f64;
    eprintln!(
        "MEASURED: forever UC WRITE: kept {} ops, {} up to the stop; sent_pkts +{pkts}",
        r.ops, stop.ops
    );
    assert!(
        (pkts / stop.ops as f64 - 1.0).abs() < 0.03,
        "the counters cover the window up to the stop: {pkts} packets, {} WRs to the stop, {} kept",
        stop.ops,
        r.ops
    );

    let (status, doc, _) = forever(
        "forever_echo",
        &["echo", "--tput", "--interval", "0.25"],
        2,
        Duration::from_millis(120),
        "-INT",
    );
    assert_eq!(status.code(), Some(0));
    let r = doc.throughput().next().unwrap();
    assert!(r.live.intervals.len() >= 2);
    assert_eq!(r.live.intervals.iter().map(|f| f.ops).sum::<u64>(), r.ops);
    assert_eq!(r.per_qp_ops.iter().sum::<u64>(), r.ops);
    let stop = r.live.to_stop.expect("to_stop");
    assert!(stop.ops >= r.ops && stop.window_s > r.elapsed_s, "{stop:?}");

    let (status, doc, took) = forever(
        "forever_lat",
        &["write", "--interval", "3"],
        1,
        Duration::from_millis(1000),
        "-TERM",
    );
    assert_eq!(status.code(), Some(0));
    let r = doc.latency().next().unwrap();
    assert!(r.live.forever && r.live.in_progress.is_none());
    assert!(!r.live.intervals.is_empty());
    let stop = r.live.to_stop.expect("to_stop");
    assert_stopped_promptly(
        &r.live.intervals,
        r.elapsed_s,
        stop,
        3.0,
        took,
        "forever WRITE latency",
    );
    assert_eq!(r.live.intervals.iter().map(|f| f.ops).sum::<u64>(), r.iters);
    assert_eq!(
        r.stats.samples, r.iters,
        "the histogram holds exactly the kept intervals' samples"
    );
    assert_eq!(r.histogram.iter().map(|b| b.1).sum::<u64>(), r.iters);
    assert!(stop.ops > r.iters, "{stop:?} vs {}", r.iters);
    assert_eq!(
        r.sent,
        stop.ops + r.warmup_dropped,
        "every iteration sent is counted"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn bidirectional_intervals_and_forever_sum_both_directions() {
    // UC WRITE both ways; each side cuts its own window into intervals and
    // the server's travel in its Stop report.
    let b = [
        "write",
        "--tput",
        "outbound",
        "-b",
        "-c",
        "uc",
        "--interval",
        "0.25",
    ];
    let mut args = b.to_vec();
    args.extend_from_slice(&["-D", "1"]);
    let (doc, _) = latency("iv_bidir", &args);
    let r = doc.throughput().next().unwrap();
    let dirs = r.directions.as_ref().expect("two directions");
    assert!(dirs.iter().all(|d| d.ops > 0), "{dirs:?}");
    check_intervals(&r.live.intervals, r.ops, r.elapsed_s, 0.25, "-b intervals");
    assert_eq!(
        r.live.intervals.iter().map(|f| f.ops).sum::<u64>(),
        dirs.iter().map(|d| d.ops).sum::<u64>()
    );

    // --forever -b: SIGINT stops the client's issuers, whose Stop stops the
    // server's; each keeps its whole intervals.
    let (status, doc, took) = forever("forever_bidir", &b, 2, Duration::from_millis(120), "-INT");
    assert_eq!(status.code(), Some(0));
    let r = doc.throughput().next().unwrap();
    assert!(r.live.forever && r.live.in_progress.is_none(), "{r:?}");
    let dirs = r.directions.as_ref().expect("two directions");
    assert!(dirs.iter().all(|d| d.ops > 0), "{dirs:?}");
    assert!(r.live.intervals.len() >= 2, "{:?}", r.live.intervals);
    assert_eq!(r.live.intervals.iter().map(|f| f.ops).sum::<u64>(), r.ops);
    assert_eq!(dirs.iter().map(|d| d.ops).sum::<u64>(), r.ops);
    let stop = r.live.to_stop.expect("to_stop");
    assert!(stop.ops > r.ops, "the dropped intervals had ops: {stop:?}");
    eprintln!(
        "MEASURED: forever -b: {} intervals, {} ops kept ({:?} per direction), {} to the stop; exited {:.3} s after the signal",
        r.live.intervals.len(),
        r.ops,
        dirs.iter().map(|d| d.ops).collect::<Vec<_>>(),
        stop.ops,
        took.as_secs_f64()
    );

    // Through serve, which never sees the signal: the client's Stop ends
    // the server's issuers (a passive WRITE target polls for it while its
    // issuers run; a SEND sink when the client's SENDs stop coming).
    let _server = start_server(18656);
    let target = format!("{}:18656", ipv4());
    for verb in ["write", "send"] {
        let mut args = b.to_vec();
        args[0] = verb;
        args.extend_from_slice(&["--connect", &target]);
        let (status, doc, took) = forever(
            &format!("forever_bidir_srv_{verb}"),
            &args,
            2,
            Duration::from_millis(120),
            "-INT",
        );
        assert_eq!(status.code(), Some(0), "{verb}");
        let r = doc.throughput().next().unwrap();
        let dirs = r.directions.as_ref().expect("two directions");
        assert!(dirs.iter().all(|d| d.ops > 0), "{dirs:?}");
        assert_eq!(r.live.intervals.iter().map(|f| f.ops).sum::<u64>(), r.ops);
        assert_eq!(dirs.iter().map(|d| d.ops).sum::<u64>(), r.ops);
        eprintln!(
            "MEASURED: forever -b {verb} through serve: {} intervals, {:?} ops per direction, received {:?}; exited {:.3} s after the signal",
            r.live.intervals.len(),
            dirs.iter().map(|d| d.ops).collect::<Vec<_>>(),
            dirs.iter().map(|d| d.received).collect::<Vec<_>>(),
            took.as_secs_f64()
        );
    }
}
