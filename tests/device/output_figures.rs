//! Issue 24: what scripts read. `--output` piped into awk (one number per
//! point on stdout, each the record's figure; the table on stderr), the
//! worst-interval fields, and `-H`/`-U`'s raw samples file.

use std::process::Command;

use rdma_bench::results::{LatencyRecord, ResultsDoc};

use super::common::{bin, read_json, scratch, text};
use super::{device, RUN_DEADLINE_S};

/// Runs `sh -c script`, failing on a non-zero status; (stdout, stderr).
/// Each script's rdma-bench runs under `timeout`: a hang fails the test.
fn sh(script: &str) -> (String, String) {
    let t0 = std::time::Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .output()
        .expect("sh runs");
    eprintln!("$ {script} ({:.1} s)", t0.elapsed().as_secs_f64());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{script}: {:?}: {stderr}", out.status);
    (stdout, stderr)
}

/// The numbers awk saw on a line of their own, and its count of other lines.
fn awk_numbers(stdout: &str) -> (Vec<f64>, u64) {
    let mut lines: Vec<&str> = stdout.lines().collect();
    let summary = lines.pop().expect("awk's summary line");
    let other: u64 = summary
        .strip_prefix("other ")
        .unwrap_or_else(|| panic!("summary: {summary}"))
        .parse()
        .unwrap();
    (lines.iter().map(|l| l.parse().unwrap()).collect(), other)
}

/// awk passes through lines that are one number and counts the rest.
const AWK: &str =
    r#"awk '/^[0-9]+[.][0-9]+$/ { print; next } { other++ } END { print "other " other+0 }'"#;

fn load(path: &std::path::Path) -> ResultsDoc {
    serde_json::from_value(read_json(path)).expect("results match the schema")
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn output_figures_piped_into_awk_are_the_records_figures() {
    let dir = scratch("output-awk");
    let (b, d) = (
        format!("timeout {RUN_DEADLINE_S} {}", bin().display()),
        device(),
    );
    let json = dir.join("lat.json");
    let (out, err) = sh(&format!(
        "{b} write -d {d} -s 2,64 -n 100 --warmup 10 --json {} --output latency | {AWK}",
        json.display()
    ));
    let (numbers, other) = awk_numbers(&out);
    assert_eq!(other, 0, "stdout had only numbers: {out}");
    let doc = load(&json);
    let want: Vec<f64> = doc.latency().map(|r| r.stats.p50_ns / 1000.0).collect();
    assert_eq!(numbers.len(), 2, "{out}");
    for (got, want) in numbers.iter().zip(&want) {
        assert!(
            (got - want).abs() <= 0.0005 + 1e-9,
            "{got} vs p50 {want} us"
        );
    }
    assert!(err.contains("p50[us]"), "the table is on stderr: {err}");

    let json = dir.join("tput.json");
    let (out, err) = sh(&format!(
        "{b} write -d {d} --tput inbound -s 64,1024 -D 0.2 --warmup-time 0.05 --json {} --output message_rate | {AWK}",
        json.display()
    ));
    let (numbers, other) = awk_numbers(&out);
    assert_eq!(other, 0, "{out}");
    let doc = load(&json);
    let want: Vec<f64> = doc.throughput().map(|r| r.mops).collect();
    assert_eq!(numbers.len(), want.len(), "{out}");
    assert_eq!(numbers.len(), 2);
    for (got, want) in numbers.iter().zip(&want) {
        assert!((got - want).abs() <= 0.00005 + 1e-9, "{got} vs mops {want}");
    }
    assert!(err.contains("Mops"), "the table is on stderr: {err}");
    eprintln!("message rates {numbers:?}");
    // Without --interval the worst-interval fields are absent.
    let raw = std::fs::read_to_string(&json).unwrap();
    assert!(!raw.contains("min_interval") && !raw.contains("interval_p99"));

    // A reader that stops after the first number ends the run quietly.
    let status = dir.join("status");
    let (out, err) = sh(&format!(
        "({b} write -d {d} -s 2,64 -n 50 --warmup 10 --output latency; echo $? > {}) | head -1",
        status.display()
    ));
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(
        std::fs::read_to_string(&status).unwrap().trim(),
        "0",
        "{err}"
    );
    assert!(!err.contains("error"), "{err}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn output_worst_interval_bounds_the_point() {
    let dir = scratch("output-interval");
    let (b, d) = (
        format!("timeout {RUN_DEADLINE_S} {}", bin().display()),
        device(),
    );
    let json = dir.join("t.json");
    let (table, _) = sh(&format!(
        "{b} write -d {d} --tput inbound -s 4096 -D 0.3 --warmup-time 0.05 --interval 0.1 --json {}",
        json.display()
    ));
    assert!(
        table.contains(" intervals: ") && table.contains("Gb/s (min_interval_*"),
        "{table}"
    );
    let doc = load(&json);
    let t = doc.throughput().next().unwrap();
    let v = &t.live;
    let (lo, hi) = (v.min_interval_mops.unwrap(), v.max_interval_mops.unwrap());
    eprintln!(
        "tput: {} intervals, {lo:.4} <= {:.4} <= {hi:.4} Mops, {:.3}..{:.3} Gb/s",
        v.intervals.len(),
        t.mops,
        v.min_interval_gbps.unwrap(),
        v.max_interval_gbps.unwrap()
    );
    let slack = 1e-6 * t.mops;
    assert!(
        lo - slack <= t.mops && t.mops <= hi + slack,
        "{v:?} mops {}",
        t.mops
    );
    let (glo, ghi) = (v.min_interval_gbps.unwrap(), v.max_interval_gbps.unwrap());
    assert!(glo - 1e-6 * t.gbps <= t.gbps && t.gbps <= ghi + 1e-6 * t.gbps);
    assert!(v.worst_interval_p99_ns.is_none());

    // -b: the extremes are of the indices both sides reached.
    let json = dir.join("b.json");
    sh(&format!(
        "{b} write -d {d} --tput outbound -b -s 4096 -D 0.3 --warmup-time 0.05 --interval 0.1 --quiet --json {}",
        json.display()
    ));
    let doc = load(&json);
    let t = doc.throughput().next().unwrap();
    let v = &t.live;
    let (lo, hi) = (v.min_interval_mops.unwrap(), v.max_interval_mops.unwrap());
    eprintln!(
        "-b: {} intervals, {lo:.4}..{hi:.4} Mops, point {:.4}",
        v.intervals.len(),
        t.mops
    );
    assert!(0.0 < lo && lo <= hi, "{v:?}");

    let json = dir.join("l.json");
    let (table, _) = sh(&format!(
        "{b} write -d {d} -D 0.3 --warmup 10 --interval 0.1 --json {}",
        json.display()
    ));
    assert!(
        table.contains("p99 worst"),
        "the note after the row: {table}"
    );
    let doc = load(&json);
    let l: &LatencyRecord = doc.latency().next().unwrap();
    let worst = l.live.worst_interval_p99_ns.unwrap();
    let best = l.live.best_interval_p99_ns.unwrap();
    let p99s: Vec<f64> = l.live.intervals.iter().filter_map(|f| f.p99_ns).collect();
    eprintln!("latency: interval p99s {p99s:?}, worst {worst}, best {best}");
    assert!(p99s.iter().all(|&p| best <= p && p <= worst));
    assert!(l.live.min_interval_mops.is_none());
}

/// The blocks of a samples file: (the `# point:` line, its values).
fn blocks(text: &str) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("# point:") {
            out.push((p.to_string(), Vec::new()));
        } else if !line.starts_with('#') {
            let v = line.parse().unwrap_or_else(|_| panic!("a value: {line}"));
            out.last_mut().expect("a point line first").1.push(v);
        }
    }
    out
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn output_raw_samples_sorted_and_in_order() {
    let dir = scratch("output-samples");
    let (b, d) = (
        format!("timeout {RUN_DEADLINE_S} {}", bin().display()),
        device(),
    );
    // -H, ping-pong: half round trips, sorted.
    let (json, samples) = (dir.join("h.json"), dir.join("h.tsv"));
    sh(&format!(
        "{b} write -d {d} -s 2,64 -n 100 --warmup 10 --quiet -H --samples-file {} --json {}",
        samples.display(),
        json.display()
    ));
    let text = std::fs::read_to_string(&samples).unwrap();
    assert!(
        text.starts_with("# rdma-bench raw latency samples (-H"),
        "{text:.300}"
    );
    assert!(text.contains("# unit: nanoseconds") && text.contains("half of one round trip"));
    let doc = load(&json);
    let got = blocks(&text);
    assert_eq!(got.len(), 2);
    for ((point, values), r) in got.iter().zip(doc.latency()) {
        eprintln!(
            "-H point{point}: {} values, first {:?}",
            values.len(),
            values.first()
        );
        assert!(point.contains(&format!("size {} ", r.size)), "{point}");
        assert_eq!(values.len() as u64, r.stats.samples);
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "sorted");
        // The histogram's min is the smallest sample within its 0.1%.
        assert!((values[0] - r.stats.min_ns).abs() <= r.stats.min_ns * 0.002 + 1.0);
    }
    // -U, completion time, beside --json by default: in the order measured.
    let json = dir.join("u.json");
    sh(&format!(
        "{b} read -d {d} -s 64 -n 100 --warmup 10 --quiet -U --json {}",
        json.display()
    ));
    let text = std::fs::read_to_string(dir.join("u.samples.tsv")).unwrap();
    assert!(text.contains("in the order measured") && text.contains("completion time"));
    let doc = load(&json);
    let r = doc.latency().next().unwrap();
    let got = blocks(&text);
    assert_eq!(got.len(), 1);
    let values = &got[0].1;
    eprintln!("-U: {} values, first {:?}", values.len(), &values[..5]);
    assert_eq!(values.len() as u64, r.stats.samples);
    assert!(values.iter().all(|v| v.fract() == 0.0), "whole ns");
    assert!(!values.windows(2).all(|w| w[0] <= w[1]), "not sorted");
}
