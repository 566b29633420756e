//! Memory stays bounded whatever the iteration count: latency samples go to
//! an HdrHistogram, not a vector per sample (perftest's arrays grow with -n).
//! This binary holds only this test, so its peak RSS is the recorder's.

use rdma_bench::stats::LatencyRecorder;

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[test]
fn ten_million_samples_stay_under_64_mib() {
    let before = peak_rss_kib();
    let mut rec = LatencyRecorder::new();
    let mut v = 1u64;
    for _ in 0..10_000_000u64 {
        v = v
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // 1 µs .. ~1 s, spread over many buckets.
        rec.record(1_000 + (v >> 34));
    }
    let s = rec.summary(1.0);
    assert_eq!(s.samples, 10_000_000);
    assert!(s.p50_ns > 1_000.0);
    let peak = peak_rss_kib();
    eprintln!("MEASURED: peak RSS {peak} KiB after 10M samples ({before} KiB before)");
    assert!(peak < 64 * 1024, "peak RSS {peak} KiB");
}
