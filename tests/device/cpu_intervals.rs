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
    // Loopback: both sides are this process, so no peer figures.
    let (doc, csv) = latency("cpu_lat", &["write", "-s", "2,64", "-n", "2000"]);
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
            (c.window_s - r.elapsed_s).abs() < 0.05,
            "cpu window {} vs measured {}",
            c.window_s,
            r.elapsed_s
        );
    }
    assert!(csv.lines().nth(1).unwrap().split(',').count() > 40);
    // Against serve: the peer measured its own CPU over the point and sent it.
    let _server = start_server(18651);
    let target = format!("{}:18651", ipv4());
    let (doc, _) = latency("cpu_remote", &["write", "--connect", &target, "-n", "2000"]);
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
        check_intervals(&r.intervals, r.ops, r.elapsed_s, 0.2, args[0]);
        assert_eq!(r.interval_s, Some(0.2));
        assert!(r.intervals.iter().all(|f| f.p50_ns.is_none()));
        assert!(csv.contains("interval_s"));
    }
    let (doc, _) = latency("iv_lat", &["read", "-D", "1", "--interval", "0.2"]);
    let r = doc.latency().next().unwrap();
    // READ completion latency: one busy thread (the server is passive), so
    // the loaded guest stalls it least.
    check_intervals(&r.intervals, r.iters, r.elapsed_s, 0.2, "read latency");
    // Latency intervals have their own percentiles, inside the point's range.
    for f in &r.intervals {
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
/// record with ≥ 2 intervals (the file is rewritten as they end), sends
/// `signal`, and returns the exit status and the final document.
fn forever(name: &str, args: &[&str], signal: &str) -> (std::process::ExitStatus, ResultsDoc) {
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
                    Record::Latency(l) => l.intervals.len(),
                    Record::Throughput(t) => t.intervals.len(),
                });
                if n >= 2 {
                    let in_progress = match &doc.results[0] {
                        Record::Latency(l) => l.in_progress,
                        Record::Throughput(t) => t.in_progress,
                    };
                    assert_eq!(in_progress, Some(true), "{name}: provisional record");
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(800));
    kill(&child, signal);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("parseable file");
    (out.status, doc)
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn forever_stopped_by_a_signal_exits_0_with_its_whole_intervals() {
    let (status, doc) = forever(
        "forever_tput",
        &["write", "--tput", "inbound", "--interval", "0.25"],
        "-INT",
    );
    assert_eq!(
        status.code(),
        Some(0),
        "stopping --forever is its normal end"
    );
    assert_eq!(doc.results.len(), 1);
    let r = doc.throughput().next().unwrap();
    assert!(r.forever && r.in_progress.is_none(), "{r:?}");
    assert!(r.intervals.len() >= 3, "{:?}", r.intervals);
    // Every interval whole, and the point is exactly them (stopped on a boundary).
    assert_typical(&r.intervals, 0.25, "forever inbound WRITE");
    assert_eq!(r.intervals.iter().map(|f| f.ops).sum::<u64>(), r.ops);
    assert_eq!(r.per_qp_ops.iter().sum::<u64>(), r.ops);
    assert!(r.cpu_util.is_some());

    let (status, doc) = forever("forever_lat", &["write", "--interval", "0.25"], "-TERM");
    assert_eq!(status.code(), Some(0));
    let r = doc.latency().next().unwrap();
    assert!(r.forever && r.in_progress.is_none());
    assert!(r.intervals.len() >= 3);
    assert_eq!(r.intervals.iter().map(|f| f.ops).sum::<u64>(), r.iters);
    assert_eq!(
        r.stats.samples, r.iters,
        "the histogram holds exactly the intervals' samples"
    );
    assert_eq!(r.histogram.iter().map(|b| b.1).sum::<u64>(), r.iters);
}
