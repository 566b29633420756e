//! A CPU cost per op is judged from a point's passes; measured once, it says why it is not.

use std::path::Path;

use serde_json::Value;

use super::{in_passes, qps_curve, write};
use crate::common::{read_json, run, scratch, text};

/// `doc` with each record's CPU-seconds per Mop set to `cost` over its Mops
/// (so `in_passes`' passes, 2% apart in Mops, are about 2% apart in cost).
fn with_cpu_cost(mut doc: Value, cost: f64) -> Value {
    for r in doc["results"].as_array_mut().unwrap() {
        let f = r["mops"].as_f64().unwrap().max(1e-9);
        r["cpu_util"] = serde_json::json!({"local_pct": null, "local_process_pct": null,
            "peer_pct": null, "peer_process_pct": null, "local_cpus": 2, "window_s": 1.0,
            "local_cpu_s_per_mop": cost / f});
    }
    doc
}

/// `compare A B --json`'s CPU rows: each row's judgement of B.
fn cpu_verdicts(dir: &Path, a: &Path, b: &Path) -> Vec<Value> {
    let json = dir.join("cmp.json");
    let _ = std::fs::remove_file(&json);
    let o = run(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    read_json(&json)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["figure"] == "cpu_s_per_mop")
        .map(|r| r["judged"][1].clone())
        .collect()
}

#[test]
fn cpu_cost_is_judged_from_passes_and_one_pass_says_why_it_is_not() {
    let dir = scratch("report-cpu-passes");
    // B costs 1.5x A's CPU per op; passes put it 2% either way.
    let a = write(&dir, "a.json", &with_cpu_cost(in_passes(|_| 1.0), 1.0));
    let b = write(&dir, "b.json", &with_cpu_cost(in_passes(|_| 1.0), 1.5));
    let judged = cpu_verdicts(&dir, &a, &b);
    assert!(!judged.is_empty());
    for j in &judged {
        assert_eq!(j["change"], "worse", "costlier, intervals apart: {j}");
        assert!(j["interval"].is_object() && j.get("why").is_none(), "{j}");
    }
    // Measured once: not judged, and why.
    let a1 = write(&dir, "a1.json", &with_cpu_cost(qps_curve(|_| 1.0), 1.0));
    let b1 = write(&dir, "b1.json", &with_cpu_cost(qps_curve(|_| 1.0), 1.5));
    let judged = cpu_verdicts(&dir, &a1, &b1);
    assert!(!judged.is_empty());
    for j in &judged {
        assert_eq!(j["change"], "not_judged", "{j}");
        assert_eq!(j["why"], "one pass: no interval", "{j}");
    }
    let md = dir.join("cmp.md");
    let o = run(&[
        "compare",
        a1.to_str().unwrap(),
        b1.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("not judged (one pass: no interval)"), "{md}");
}
