//! Host-side tests over the example results committed in results/ (real
//! soft-RoCE runs): every plotting script draws them, and `compare` matches
//! two runs of one experiment point by point. No device is needed; matplotlib
//! is (scripts/install-deps installs it), and its absence fails the test.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{run, scratch, text};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Committed result files of `experiment`, oldest first.
/// The committed results files of an experiment: `results/NAME-*.json`, or
/// with `DIR/NAME`, `results/DIR/NAME-*.json` (a profile's directory).
fn results_of(experiment: &str) -> Vec<PathBuf> {
    let (dir, experiment) = match experiment.split_once('/') {
        Some((dir, name)) => (repo().join("results").join(dir), name),
        None => (repo().join("results"), experiment),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("results/ is committed")
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(&format!("{experiment}-")) && name.ends_with(".json")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no committed results for {experiment}");
    files
}

fn python_has_matplotlib() {
    let ok = Command::new("python3")
        .args(["-c", "import matplotlib"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "python3 with matplotlib is required (run scripts/install-deps)"
    );
}

#[test]
fn every_plotting_script_draws_the_committed_results() {
    python_has_matplotlib();
    let out = scratch("plots");
    let cases: &[(&str, &str, &[&str])] = &[
        ("plot_latency.py", "herd-fig2-latency", &[]),
        ("plot_latency_cdf.py", "herd-fig2-latency", &[]),
        ("plot_tput_size.py", "herd-fig3-inbound", &[]),
        ("plot_tput_qps.py", "herd-fig4-outbound-qps", &[]),
        ("plot_tput_signal.py", "signaling-period", &[]),
        (
            "plot_tput_postlist.py",
            "profile-rxe0-loopback/profile-rxe0",
            &[],
        ),
        ("plot_compare.py", "herd-fig2-latency", &[]),
        ("plot_vs_perftest.py", "vs-perftest", &[]),
        ("plot_nic_cache.py", "nic-cache", &[]),
        ("plot_latency_load.py", "latency-under-load", &[]),
    ];
    let scripts: Vec<String> = std::fs::read_dir(repo().join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("plot_") && n.ends_with(".py"))
        // No fabric run is committed: plot_fabric_draws_a_fabric_document
        // draws one built here instead.
        .filter(|n| n != "plot_fabric.py")
        .collect();
    for s in &scripts {
        assert!(cases.iter().any(|c| c.0 == s), "{s} is not exercised here");
    }
    for (script, experiment, extra) in cases {
        let png = out.join(format!("{script}.png"));
        let mut cmd = Command::new("python3");
        cmd.arg(repo().join("scripts").join(script));
        for f in results_of(experiment) {
            cmd.arg(f);
        }
        cmd.args(*extra).arg("-o").arg(&png);
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{script} wrote a {size}-byte PNG");
        let head = std::fs::read(&png).unwrap();
        assert_eq!(&head[..4], b"\x89PNG", "{script} output is a PNG");
    }
}

/// A fabric document of 4 endpoints, one slow through endpoint 2 and one
/// entry failed: plot_fabric.py draws a heatmap per figure from it.
#[test]
fn plot_fabric_draws_a_fabric_document() {
    use rdma_bench::fabric::doc::*;
    python_has_matplotlib();
    let dir = scratch("plot-fabric");
    let name = |i: u32| EndpointRef {
        endpoint: i,
        host: format!("node{i}"),
        device: "rxe0".into(),
        gid: String::new(),
    };
    let mut doc = FabricDoc {
        environment: Some("soft-RoCE (rxe) in guests".into()),
        ..Default::default()
    };
    doc.tests.push(FabricTest {
        name: "lat".into(),
        command: String::new(),
        metrics: vec![FabricMetric {
            name: "lat_p50_ns".into(),
            what: "WRITE latency p50 (ns)".into(),
            better: "lower".into(),
            judged: true,
        }],
    });
    for a in 0..4 {
        for b in (0..4).filter(|&b| b != a) {
            let failed = (a, b) == (1, 3);
            let mut entry = FabricEntry {
                from: name(a),
                to: name(b),
                state: if failed { "failed" } else { "ok" }.into(),
                ..Default::default()
            };
            if !failed {
                let slow = a == 2 || b == 2;
                let v = if slow { 9000.0 } else { 4000.0 };
                entry.metrics.insert("lat_p50_ns".into(), v);
            }
            doc.entries.push(entry);
        }
    }
    doc.verdicts.slow.push(SlowPair {
        metric: "lat_p50_ns".into(),
        from: "node2/rxe0".into(),
        to: "node0/rxe0".into(),
        ..Default::default()
    });
    let json = dir.join("fabric.json");
    std::fs::write(&json, serde_json::to_string(&doc).unwrap()).unwrap();
    let o = Command::new("python3")
        .arg(repo().join("scripts/plot_fabric.py"))
        .arg(&json)
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let png = std::fs::read(dir.join("fabric-lat_p50_ns.png")).unwrap();
    assert!(png.len() > 10_000 && png.starts_with(b"\x89PNG"));
}

#[test]
fn compare_matches_two_runs_and_lists_one_sided_points() {
    let runs = results_of("herd-fig2-latency");
    assert!(
        runs.len() >= 2,
        "two committed runs of herd-fig2-latency to compare"
    );
    let other = &results_of("atomics")[0];
    let dir = scratch("compare");
    let csv = dir.join("c.csv");
    let json = dir.join("c.json");
    let args: Vec<String> = vec![
        "compare".into(),
        runs[0].display().to_string(),
        runs[1].display().to_string(),
        other.display().to_string(),
        "--csv".into(),
        csv.display().to_string(),
        "--json".into(),
        json.display().to_string(),
        // The atomics file also holds timed throughput points: its iteration
        // mode differs from fig2's, which compare refuses unless forced.
        "--force".into(),
    ];
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&argv);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("soft-RoCE (rxe)"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    // Every fig2 point is in both runs; every atomics point only in the third file.
    let both: Vec<_> = rows
        .iter()
        .filter(|r| !r["values"][0].is_null() && !r["values"][1].is_null())
        .collect();
    let fig2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&runs[0]).unwrap()).unwrap();
    assert_eq!(both.len(), fig2["results"].as_array().unwrap().len());
    for r in &both {
        let ratio = r["ratios"][1].as_f64().unwrap();
        let (a, b) = (
            r["values"][0].as_f64().unwrap(),
            r["values"][1].as_f64().unwrap(),
        );
        assert!((ratio - b / a).abs() < 1e-9);
    }
    let only_third = rows
        .iter()
        .filter(|r| r["values"][0].is_null() && r["values"][1].is_null())
        .count();
    assert!(only_third > 0, "atomics points are listed, not dropped");
    assert!(stdout.contains("present in some files only"));
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        rows.len() + 1
    );
    // A file that is not results is refused with exit 2 and one line.
    let bad = run(&["compare", "Cargo.toml", &runs[0].display().to_string()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).1.contains("Cargo.toml"));
}

/// The plots name a device by the `model` rdma-bench recorded in the file;
/// a file without one (older files, unknown NICs) shows the raw device name,
/// because the scripts keep no NIC table of their own.
#[test]
fn plot_labels_use_the_recorded_model_else_the_raw_name() {
    python_has_matplotlib();
    let dir = scratch("model-labels");
    let doc = |host: &str, model: Option<&str>| {
        let mut device = serde_json::json!({
            "name": "mlx5_0",
            "vendor_id": 0x02c9,
            "vendor_part_id": 4123,
        });
        if let Some(m) = model {
            device["model"] = serde_json::json!(m);
        }
        serde_json::json!({
            "schema_version": 1,
            "started_utc": "2026-11-29T00:00:00Z",
            "host": {"hostname": host},
            "device": device,
            "results": [],
        })
    };
    let files = [
        ("with.json", doc("a", Some("ConnectX-6"))),
        ("without.json", doc("b", None)),
    ];
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import sys; sys.path.insert(0, sys.argv[1]); import rdma_results as rr\n\
         for run in rr.load_runs(sys.argv[2:]): print(run.label)",
    ])
    .arg(repo().join("scripts"));
    for (name, value) in &files {
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
        cmd.arg(path);
    }
    let o = cmd.output().unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let labels: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        labels,
        [
            "ConnectX-6 (0x2c9:4123) @ a, 2026-11-29",
            "mlx5_0 (0x2c9:4123) @ b, 2026-11-29",
        ]
    );
}

/// A loopback file against the same test run between two hosts measures
/// different things: `compare` refuses (exit 2, naming the field) unless
/// `--force`, and then prints the ratios.
#[test]
fn compare_refuses_loopback_against_two_hosts_unless_forced() {
    let src = std::fs::read_dir("results")
        .expect("results/ is committed")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("herd-fig2-latency") && n.ends_with(".json"))
        })
        .expect("a committed herd-fig2-latency results file");
    let dir = common::scratch("cmp-conditions");
    let mut doc = common::read_json(&src);
    doc["peer"] = serde_json::json!("192.0.2.1:18515");
    let remote = dir.join("remote.json");
    std::fs::write(&remote, serde_json::to_vec(&doc).unwrap()).unwrap();
    let (a, b) = (src.to_str().unwrap(), remote.to_str().unwrap());

    let out = common::run(&["compare", a, b]);
    let (stdout, stderr) = common::text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}{stdout}");
    assert!(stderr.contains("peer mode differs"), "{stderr}");
    assert!(
        stderr.contains("loopback") && stderr.contains("tcp"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");

    let out = common::run(&["compare", a, b, "--force"]);
    let (stdout, stderr) = common::text(&out);
    assert!(out.status.success(), "{stderr}{stdout}");
    assert!(stdout.contains("# points matched on:"), "{stdout}");
    assert!(stdout.contains("# peer mode: loopback | tcp"), "{stdout}");
    // Same measurements: every matched point's ratio is exactly 1, and no
    // difference is called (the last word is the verdict's mark, after the
    // ratio and its interval "[lo, hi]" where it has one).
    let ratios: Vec<(&str, &str)> = stdout
        .lines()
        .filter(|l| l.starts_with("latency "))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let before = if w.get(w.len().checked_sub(2)?)?.ends_with(']') {
                4
            } else {
                2
            };
            Some((*w.get(w.len().checked_sub(before)?)?, *w.last()?))
        })
        .collect();
    assert!(!ratios.is_empty(), "{stdout}");
    assert!(
        ratios
            .iter()
            .all(|(r, m)| *r == "1.000" && (*m == "=" || *m == "?")),
        "{ratios:?}"
    );
}
