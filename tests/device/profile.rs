//! Issue 26, `profile`: a small set under a budget prints and writes its
//! plan, every point runs with the window the plan gave it, a profile
//! interrupted by SIGINT resumes where it stopped without measuring a
//! finished pass again, and two profiles of the same device compared
//! point by point (each point's three passes folded into one) get a
//! verdict each, a change called only where the two values' intervals are
//! apart, and most points come out alike (how many is printed).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{bin, profile_results_in, read_json, scratch, text};
use super::{device, RUN_DEADLINE_S};

/// Three figures: latency vs size, inbound vs size, Mops vs S; 6 points.
const SET: &str = r#"
name = "profile"
[[series]]
label = "WRITE"
verb = "write"
size = "8,64"

[[series]]
label = "WRITE inbound"
verb = "write"
metric = "throughput"
direction = "inbound"
size = "64,1024"
qps = 2

[[series]]
label = "WRITE inbound vs S"
verb = "write"
metric = "throughput"
direction = "inbound"
size = 64
qps = 2
signal_period = "1,16"
"#;

const POINTS: usize = 6;
/// The default `passes`: each point measured three times, interleaved.
const PASSES: usize = 3;
const BUDGET: &str = "15s";

/// A pass series' label without its `[pass i/K]`.
fn base(label: &str) -> &str {
    label.rsplit_once(" [pass ").map_or(label, |(b, _)| b)
}

fn records(dir: &Path) -> Vec<serde_json::Value> {
    profile_results_in(dir)
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["results"].as_array().cloned())
        .unwrap_or_default()
}

fn profile(set: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("profile")
        .arg("-d")
        .arg(device())
        .arg("--out")
        .arg(out);
    if !extra.contains(&"--resume") {
        c.arg("--set").arg(set).arg("--budget").arg(BUDGET);
    }
    c.args(extra).stdin(Stdio::null());
    c
}

fn finish(mut c: Command) -> (String, String) {
    let out = c.output().expect("rdma-bench runs");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

/// Each record's window as asked, by series.
fn windows(recs: &[serde_json::Value]) -> Vec<(String, f64)> {
    recs.iter()
        .map(|r| {
            (
                r["series"].as_str().unwrap().to_string(),
                r["requested_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs an RDMA device"]
fn profile_plans_resumes_without_measuring_twice_and_compares_with_intervals() {
    let dir = scratch("profile");
    let set = dir.join("set.toml");
    std::fs::write(&set, SET).unwrap();
    let a = dir.join("a");

    // Interrupted once two points are saved.
    let mut child = profile(&set, &a, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rdma-bench runs");
    let deadline = Instant::now() + Duration::from_secs(RUN_DEADLINE_S);
    while records(&a).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "no 2 points within {RUN_DEADLINE_S} s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "profile ended before 2 points"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let int = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(int.success());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    // 130, or 1 where the signal ended a loopback throughput point (its
    // client side reports the interruption as its peer's failure).
    assert!(
        matches!(out.status.code(), Some(130 | 1)),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        stdout.contains(
            "# profile plan: 3 series, 6 points, 3 passes of each (interleaved), budget 15 s"
        ),
        "{stdout}"
    );
    for figure in [
        "Latency vs payload size",
        "Inbound throughput vs payload size",
        "Throughput vs signaling period S",
    ] {
        assert!(stdout.contains(figure), "plan names {figure}: {stdout}");
    }
    assert!(
        stdout.contains("figure 'Latency vs payload size'"),
        "progress names the figure: {stdout}"
    );
    let before = records(&a);
    assert!(
        (2..POINTS * PASSES).contains(&before.len()),
        "{} points before the signal",
        before.len()
    );

    // Resumed: the saved points are kept as they were, the rest measured once.
    finish(profile(&set, &a, &["--resume"]));
    let after = records(&a);
    assert_eq!(
        after.len(),
        POINTS * PASSES,
        "every pass of every point once"
    );
    assert_eq!(
        after[..before.len()],
        before[..],
        "finished points were not measured again"
    );
    let ids: std::collections::BTreeSet<String> = after
        .iter()
        .map(|r| format!("{} {} {}", r["series"], r["size"], r["signal_period"]))
        .collect();
    assert_eq!(ids.len(), POINTS * PASSES, "no pass twice: {ids:?}");
    // Interleaved: every pass 1 before any pass 2, every pass 2 before any 3.
    let pass_of = |r: &serde_json::Value| {
        let s = r["series"].as_str().unwrap();
        s[s.len() - 4..s.len() - 3].parse::<usize>().unwrap()
    };
    let order: Vec<usize> = after.iter().map(pass_of).collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");

    // Every point ran with the plan's window, and could carry an interval.
    let plan = read_json(&a.join("profile-plan.json"));
    let planned: Vec<(String, f64)> = plan["figures"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["series"].as_array().unwrap().clone())
        .map(|s| {
            (
                s["label"].as_str().unwrap().to_string(),
                s["window_s"].as_f64().unwrap(),
            )
        })
        .collect();
    for (series, w) in windows(&after) {
        let p = planned
            .iter()
            .find(|(l, _)| l == base(&series))
            .expect("series in the plan")
            .1;
        assert!(
            (w - p).abs() < 1e-9,
            "{series}: window {w} s, planned {p} s"
        );
    }
    for r in &after {
        let n = r["intervals"].as_array().map(Vec::len).unwrap_or(0);
        assert!(n >= 3, "{}: {n} intervals", r["series"]);
    }
    let estimate = plan["estimate_s"].as_f64().unwrap();
    assert!(
        (estimate - 15.0).abs() < 1e-6,
        "the plan fills its budget: {estimate}"
    );

    // A second profile of the same device, compared point by point.
    let b = dir.join("b");
    finish(profile(&set, &b, &[]));
    let cmp_json = dir.join("cmp.json");
    let out = Command::new(bin())
        .arg("compare")
        .arg(profile_results_in(&a).unwrap())
        .arg(profile_results_in(&b).unwrap())
        .arg("--json")
        .arg(&cmp_json)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let cmp = read_json(&cmp_json);
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    let mut rows = 0;
    for row in cmp["rows"].as_array().unwrap() {
        if row["figure"] != "p50_ns" && row["figure"] != "mops" {
            continue;
        }
        rows += 1;
        let j = &row["judged"][1];
        eprintln!(
            "  {} {}: B/A {:.3} in [{}, {}]: {}",
            row["point"],
            row["figure"],
            j["ratio"],
            j["interval"]["lo"],
            j["interval"]["hi"],
            j["change"]
        );
        let change = row["judged"][1]["change"]
            .as_str()
            .unwrap_or("none")
            .to_string();
        *counts.entry(change).or_default() += 1;
    }
    eprintln!("same profile twice, {POINTS} points of {PASSES} passes: {counts:?}");
    assert_eq!(rows, POINTS, "one row per point, its passes folded");
    let verdicts: usize = counts.values().sum();
    assert_eq!(verdicts, POINTS, "every point has a verdict: {counts:?}");
    // Issue 26: two runs of one profile on one device agree on most points.
    let judged = POINTS - counts.get("not_judged").copied().unwrap_or(0);
    let alike = counts.get("no_difference").copied().unwrap_or(0);
    eprintln!("no significant difference: {alike} of {judged} judged points");
    assert!(
        judged > 0 && 2 * alike > judged,
        "most judged points alike: {counts:?}"
    );
    // Every call of a change is one the intervals support: B/A's interval
    // excludes 1 (recomputed here from the two values' intervals) and the
    // ratio is beyond the 5% noise threshold.
    for row in cmp["rows"].as_array().unwrap() {
        let j = &row["judged"][1];
        if !matches!(j["change"].as_str(), Some("better" | "worse")) {
            continue;
        }
        let (ia, ib) = (&row["intervals"][0], &row["intervals"][1]);
        let (alo, ahi) = (ia["lo"].as_f64().unwrap(), ia["hi"].as_f64().unwrap());
        let (blo, bhi) = (ib["lo"].as_f64().unwrap(), ib["hi"].as_f64().unwrap());
        assert!(
            bhi < alo || blo > ahi,
            "a change called where the intervals overlap: {row}"
        );
        let r = j["ratio"].as_f64().unwrap();
        assert!((r - 1.0).abs() > 0.05, "{row}");
    }
}
