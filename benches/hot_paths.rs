//! Host-side costs that need no device: what the measured loops and the
//! per-point bookkeeping spend on the CPU. Run with `cargo bench`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use rdma_bench::bench::latency::marker;
use rdma_bench::bench::wait::Patience;
use rdma_bench::clock::Clock;
use rdma_bench::export::{CsvExporter, Exporter, JsonExporter};
use rdma_bench::results::{LatencyRecord, PostingFields, Record, ResultsDoc};
use rdma_bench::stats::LatencyRecorder;
use rdma_bench::verbs::SendList;

fn recording(c: &mut Criterion) {
    let mut rec = LatencyRecorder::new();
    let mut v = 12_345u64;
    c.bench_function("histogram record (one sample)", |b| {
        b.iter(|| {
            v = v
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            rec.record(black_box(10_000 + (v >> 50)));
        })
    });
    c.bench_function("summary of 1M samples", |b| {
        let mut r = LatencyRecorder::new();
        for i in 0..1_000_000u64 {
            r.record(10_000 + i % 5_000);
        }
        b.iter(|| black_box(r.summary(0.5)))
    });
}

/// What a latency sample runs besides the post and the device's answer: the
/// two clock reads, the tick difference in ns, the marker and the signaled
/// flag set before the first read, and the spin that waits for the answer.
fn per_sample(c: &mut Criterion) {
    let clock = Clock::calibrate(Duration::from_millis(100)).expect("a steady clock");
    c.bench_function("clock read (Clock::now)", |b| {
        b.iter(|| black_box(clock.now()))
    });
    c.bench_function("ticks to ns (Clock::to_ns)", |b| {
        let t0 = clock.now();
        b.iter(|| black_box(clock.to_ns(black_box(clock.now().wrapping_sub(t0)))))
    });
    let mut list = SendList::new(1);
    let mut k = 0u64;
    c.bench_function("marker and signaled flag of one WR", |b| {
        b.iter(|| {
            k += 1;
            black_box(marker(k));
            list.set_signaled(0, k & 63 == 63);
            black_box(&list);
        })
    });
    let patience = Patience::new(clock, 30.0);
    let byte = AtomicU8::new(7);
    c.bench_function("spin wait answered on its first pass", |b| {
        b.iter(|| {
            patience
                .wait(String::new, || {
                    Ok((byte.load(Ordering::Acquire) == 7).then_some(()))
                })
                .unwrap()
        })
    });
    // 1024 passes that find no answer, then one that does: the abort check
    // and the clock read every 1024th pass are in this figure.
    c.bench_function("spin wait of 1024 passes", |b| {
        b.iter(|| {
            let mut left = 1025u32;
            patience
                .wait(String::new, || {
                    left -= 1;
                    Ok((left == 0 && byte.load(Ordering::Acquire) == 7).then_some(()))
                })
                .unwrap()
        })
    });
}

fn wr_preparation(c: &mut Criterion) {
    // What the throughput loop does per WR before ibv_post_send.
    let mut list = SendList::new(4);
    let mut seq = 0u64;
    c.bench_function("prepare a postlist of 4 WRs", |b| {
        b.iter(|| {
            for j in 0..4 {
                seq += 1;
                list.set_signaled(j, seq % 64 == 0);
                list.set_wr_id(j, (3u64 << 32) | seq);
            }
            black_box(&list);
        })
    });
}

fn sweep_doc(points: usize) -> ResultsDoc {
    let mut rec = LatencyRecorder::new();
    for i in 0..100_000u64 {
        rec.record(20_000 + (i * 7919) % 30_000);
    }
    let record = LatencyRecord {
        series: Some("WRITE".into()),
        posting: PostingFields {
            inline: true,
            ..Default::default()
        },
        iters: 100_000,
        warmup_dropped: 1000,
        elapsed_s: 2.0,
        stats: rec.summary(0.5),
        rtt_p50_ns: Some(40_000.0),
        rtt_mean_ns: Some(41_000.0),
        sent: 101_000,
        server_received: Some(101_000),
        histogram: rec.buckets(0.5),
        ..LatencyRecord::example()
    };
    ResultsDoc {
        schema_version: 1,
        started_utc: "2026-11-29T00:00:00Z".into(),
        experiment: Some("bench".into()),
        results: (0..points)
            .map(|_| Record::Latency(record.clone()))
            .collect(),
        ..Default::default()
    }
}

fn export(c: &mut Criterion) {
    // Results are rewritten after every point: the cost of the last rewrite of a 200-point sweep.
    let doc = sweep_doc(200);
    c.bench_function("JSON of a 200-point latency sweep", |b| {
        b.iter(|| black_box(JsonExporter.serialize(&doc).unwrap()))
    });
    c.bench_function("CSV of a 200-point latency sweep", |b| {
        b.iter(|| black_box(CsvExporter.serialize(&doc).unwrap()))
    });
}

criterion_group!(benches, per_sample, recording, wr_preparation, export);
criterion_main!(benches);
