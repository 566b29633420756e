//! `rdma-bench report` on results files a test makes: a known cliff is
//! found and named with its rule and a flat curve finds none; two profiles
//! with a known ratio show it, judged against their intervals; profiles
//! measured under other conditions are refused unless `--force`; bad
//! input is one line, exit 2. Findings (cliffs along region size, spread,
//! counters): findings.rs; the header's device facts: header.rs. (The page
//! in a real browser: report_page.rs.)

mod common;
#[path = "cli_report/cpu_cost.rs"]
mod cpu_cost;
#[path = "cli_report/findings.rs"]
mod findings;
#[path = "cli_report/header.rs"]
mod header;
#[path = "cli_report/resume.rs"]
mod resume;

use std::path::{Path, PathBuf};

use common::{read_json, run, scratch, text};
use serde_json::Value;

const QPS_FILE: &str = "results/herd-fig4-outbound-qps-rxe0-vm-qemu-20261129T114046Z.json";

fn committed(path: &str) -> Value {
    read_json(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p
}

/// The outbound series of the QP-count file, its Mops set by `mops(i)`,
/// each point with four `--interval` figures of ±1% around it (so each
/// point has an interval of its own).
fn qps_curve(mops: impl Fn(usize) -> f64) -> Value {
    let mut doc = committed(QPS_FILE);
    let results = doc["results"].as_array_mut().unwrap();
    results.retain(|r| r["direction"] == "outbound");
    for (i, r) in results.iter_mut().enumerate() {
        let m = mops(i);
        r["mops"] = m.into();
        r["interval_s"] = 0.25.into();
        r["intervals"] = (0..4)
            .map(|k| {
                let f = [0.99, 1.01, 0.995, 1.005][k];
                serde_json::json!({"index": k, "start_s": 0.25 * k as f64, "elapsed_s": 0.25,
                    "ops": 1000, "mops": m * f})
            })
            .collect();
    }
    doc
}

fn report(args: &[&str]) -> (std::process::Output, String) {
    let out = run(&[&["report"], args].concat());
    let (stdout, stderr) = text(&out);
    (out, format!("{stdout}{stderr}"))
}

fn page(dir: &Path, inputs: &[&Path], extra: &[&str]) -> String {
    let html = dir.join("page.html");
    let mut args: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    args.extend(["-o", html.to_str().unwrap()]);
    args.extend(extra);
    let (out, said) = report(&args);
    assert!(out.status.success(), "{said}");
    std::fs::read_to_string(html).unwrap()
}

fn findings(html: &str, kind: &str) -> Vec<String> {
    html.split("<li data-kind=\"")
        .skip(1)
        .filter(|l| l.starts_with(&format!("{kind}\"")))
        .map(|l| l.split("</li>").next().unwrap().to_string())
        .collect()
}

#[test]
fn a_known_cliff_is_found_with_its_rule_and_a_flat_curve_finds_none() {
    let dir = scratch("report-cliff");
    let n = committed(QPS_FILE)["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["direction"] == "outbound")
        .count();
    assert!(n >= 4, "{n} points");
    // Flat at 1 Mops, then halved from the last point on.
    let steep = write(
        &dir,
        "steep.json",
        &qps_curve(|i| if i + 1 == n { 0.5 } else { 1.0 }),
    );
    let html = page(&dir, &[&steep], &[]);
    let cliffs = findings(&html, "cliff");
    assert_eq!(cliffs.len(), 1, "{cliffs:?}");
    assert!(cliffs[0].contains("Mops falls 50%"), "{}", cliffs[0]);
    assert!(cliffs[0].contains("QPs to"), "{}", cliffs[0]);
    assert!(
        html.contains("1 point(s) found by the rule: a step of the swept knob where Mops falls by more than 25%"),
        "the rule is said above what it found"
    );
    // A 20% step is under the default threshold, over a 10% one.
    let mild = write(
        &dir,
        "mild.json",
        &qps_curve(|i| if i + 1 == n { 0.8 } else { 1.0 }),
    );
    assert!(findings(&page(&dir, &[&mild], &[]), "cliff").is_empty());
    assert_eq!(
        findings(&page(&dir, &[&mild], &["--cliff", "10"]), "cliff").len(),
        1
    );
    let flat = write(&dir, "flat.json", &qps_curve(|_| 1.0));
    let html = page(&dir, &[&flat], &[]);
    assert!(findings(&html, "cliff").is_empty());
    assert!(html.contains("None: no rule above found anything"));
}

/// The ratio cell of a headline key in the page's B/A table.
fn ratio_of(html: &str, key_part: &str) -> (f64, String) {
    let row = html
        .split("<tr data-key=\"")
        .skip(1)
        .find(|r| r.split('"').next().unwrap().contains(key_part))
        .unwrap_or_else(|| panic!("no ratio row for {key_part}"));
    let ratio = row
        .split("rb-ratio\">")
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap();
    let verdict = row
        .rsplit("</td></tr>")
        .nth(1)
        .unwrap()
        .rsplit('>')
        .next()
        .unwrap();
    (ratio.parse().unwrap(), verdict.to_string())
}

#[test]
fn two_profiles_show_their_known_ratio_judged_by_their_intervals() {
    let dir = scratch("report-ratio");
    // B has 1.25x the Mops of A everywhere, with intervals as tight as A's.
    let a = write(&dir, "a.json", &qps_curve(|_| 1.0));
    let b = write(&dir, "b.json", &qps_curve(|_| 1.25));
    let html = page(&dir, &[&a, &b], &["--label", "gen A", "--label", "gen B"]);
    let (ratio, verdict) = ratio_of(&html, "mops|max");
    assert_eq!(ratio, 1.25);
    assert_eq!(verdict, "better", "intervals apart, 25% > --noise");
    // The same file twice: ratio 1, no difference.
    let html = page(&dir, &[&a, &a], &[]);
    let (ratio, verdict) = ratio_of(&html, "mops|max");
    assert_eq!(
        (ratio, verdict.as_str()),
        (1.0, "no significant difference")
    );
    // Within the noise threshold when it is raised past 25%.
    let html = page(&dir, &[&a, &b], &["--noise", "30"]);
    assert_eq!(ratio_of(&html, "mops|max").1, "within noise");
}

/// `qps_curve(mops)` measured in three interleaved passes, the passes'
/// Mops 1, 1.02 and 0.98 times the point's.
fn in_passes(mops: impl Fn(usize) -> f64) -> Value {
    let mut doc = qps_curve(mops);
    let once = doc["results"].as_array().unwrap().clone();
    let mut passes = Vec::new();
    for (i, f) in [(1, 1.0), (2, 1.02), (3, 0.98)] {
        for r in &once {
            let mut r = r.clone();
            r["series"] = format!("{} [pass {i}/3]", r["series"].as_str().unwrap()).into();
            let m = r["mops"].as_f64().unwrap() * f;
            r["mops"] = m.into();
            for iv in r["intervals"].as_array_mut().unwrap() {
                iv["mops"] = (iv["mops"].as_f64().unwrap() * f).into();
            }
            passes.push(r);
        }
    }
    doc["results"] = passes.into();
    doc
}

#[test]
fn passes_fold_into_one_point_in_compare_and_report() {
    let dir = scratch("report-passes");
    let points = qps_curve(|_| 1.0)["results"].as_array().unwrap().len();
    let a = write(&dir, "a.json", &in_passes(|_| 1.0));
    let a2 = write(&dir, "a2.json", &in_passes(|_| 1.01));
    let b = write(&dir, "b.json", &in_passes(|_| 1.25));
    let verdicts = |other: &Path| {
        let json = dir.join("cmp.json");
        let _ = std::fs::remove_file(&json);
        let o = run(&[
            "compare",
            a.to_str().unwrap(),
            other.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{stdout}{stderr}");
        let cmp = read_json(&json);
        cmp["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["figure"] == "mops")
            .map(|r| r["judged"][1]["change"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    // One row per point, not per pass; 1% apart with passes 4% apart: alike.
    let alike = verdicts(&a2);
    assert_eq!(alike.len(), points, "{alike:?}");
    assert!(alike.iter().all(|v| v == "no_difference"), "{alike:?}");
    // 25% apart: better everywhere.
    let better = verdicts(&b);
    assert_eq!(better.len(), points);
    assert!(better.iter().all(|v| v == "better"), "{better:?}");
    // The table on stdout shows each ratio with its 95% interval, then the
    // mark, in aligned columns, and its legend says what the brackets are.
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let (stdout, _) = text(&o);
    assert!(
        stdout.contains("the brackets after a ratio are its 95% interval"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" Mops ") && l.trim_end().ends_with('+'))
        .collect();
    assert_eq!(rows.len(), points, "{stdout}");
    for row in &rows {
        let cell = row.split("1.250 [").nth(1).expect("ratio, then interval");
        let (lo, hi) = cell.split_once("]").unwrap().0.split_once(", ").unwrap();
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        assert!(lo > 1.0 && lo < 1.25 && hi > 1.25, "{row}");
    }
    let header = stdout.lines().find(|l| l.starts_with("point")).unwrap();
    // Where the B/A heading and the ratio under it end.
    let ends = (
        header.find("B/A").unwrap() + 3,
        rows[0].find("1.250 [").unwrap() + 5,
    );
    assert_eq!(
        ends.0, ends.1,
        "ratio column aligned:\n{header}\n{}",
        rows[0]
    );
    // The page: one headline per series, its passes folded, judged the same.
    let html = page(&dir, &[&a, &b], &[]);
    let (ratio, verdict) = ratio_of(&html, "mops|max");
    assert!((ratio - 1.25).abs() < 1e-9, "{ratio}");
    assert_eq!(verdict, "better");
    assert!(!html.contains("[pass 1/3]|"), "no headline per pass");
}

#[test]
fn unlike_conditions_are_refused_naming_the_field_unless_forced() {
    let dir = scratch("report-conditions");
    let a = write(&dir, "a.json", &qps_curve(|_| 1.0));
    let mut other = qps_curve(|_| 1.0);
    other["environment"] = Value::Null;
    let b = write(&dir, "b.json", &other);
    let html = dir.join("p.html");
    let (out, said) = report(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("environment") && said.contains("--force"),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(!html.exists(), "nothing written when refused");
    let forced = page(&dir, &[&a, &b], &["--force"]);
    assert!(forced.contains("Run conditions differ (--force)"));
}

#[test]
fn bad_input_is_one_line_exit_2() {
    let dir = scratch("report-bad");
    let a = write(&dir, "a.json", &qps_curve(|_| 1.0));
    let a = a.to_str().unwrap();
    let o = dir.join("o.html");
    let o = o.to_str().unwrap();
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for (args, needle) in [
        (vec![a, "-o", o, "--noise", "-3"], "--noise"),
        (vec![a, "-o", o, "--cliff", "x"], "--cliff"),
        (
            vec![a, "-o", o, "--label", "one", "--label", "two"],
            "--label",
        ),
        (
            vec![empty.to_str().unwrap(), "-o", o],
            "holds no results files",
        ),
        (vec!["/nonexistent.json", "-o", o], "/nonexistent.json"),
        (vec![a, "-o", a], "-o"),
        (vec![a, "-o", o, "--scripts", "/tmp"], "--scripts"),
    ] {
        let (out, said) = report(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(needle), "{args:?}: {said}");
        assert!(!said.contains("panicked"), "{said}");
    }
}

/// `profile --dry-run --budget BUDGET` of the built-in set, which must
/// succeed: its scratch directory, stdout and the plan it wrote.
fn dry_run_profile(name: &str, budget: &str) -> (std::path::PathBuf, String, serde_json::Value) {
    let dir = scratch(name);
    let out = dir.join("p");
    let o = run(&[
        "profile",
        "--dry-run",
        "--budget",
        budget,
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    let plan = read_json(&out.join("profile-plan.json"));
    (dir, stdout, plan)
}

#[test]
fn a_budget_too_short_for_every_pass_measures_each_point_fewer_times_and_says_so() {
    let (_, stdout, plan) = dry_run_profile("profile-fewer-passes", "3m");
    let passes = plan["passes"].as_u64().unwrap();
    assert!(
        (1..3).contains(&passes),
        "the built-in set asks for 3: {plan}"
    );
    assert!(
        stdout.contains(&format!("--budget 3m fits {passes} of the 3 passes")),
        "{stdout}"
    );
    let estimate = plan["estimate_s"].as_f64().unwrap();
    assert!(estimate <= 180.0 + 0.1, "within the budget: {estimate}");
}

#[test]
fn profile_plans_within_its_budget_and_refuses_bad_input_before_any_device() {
    let (dir, stdout, plan) = dry_run_profile("profile-plan", "10m");
    assert!(
        stdout.contains("# profile plan: ") && stdout.contains("3 passes of each"),
        "{stdout}"
    );
    let estimate = plan["estimate_s"].as_f64().unwrap();
    assert!(
        (estimate - 600.0).abs() < 0.1,
        "the plan fills the budget: {estimate}"
    );
    assert_eq!(plan["passes"], 3);
    let figures: Vec<&str> = plan["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["figure"].as_str().unwrap())
        .collect();
    for f in [
        "latency",
        "inbound-size",
        "outbound-size",
        "echo-size",
        "outbound-qps",
        "signal-period",
        "postlist",
        "nic-cache",
        "latency-under-load",
    ] {
        assert!(figures.contains(&f), "{f} in {figures:?}");
    }
    // Every figure gets the same share of the budget.
    for f in plan["figures"].as_array().unwrap() {
        let share: f64 = f["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["estimate_s"].as_f64().unwrap())
            .sum();
        assert!((share - 600.0 / figures.len() as f64).abs() < 0.1, "{f}");
    }
    let toml = std::fs::read_to_string(dir.join("p").join("profile-plan.toml")).unwrap();
    assert!(
        toml.contains("interval = ") && toml.contains("duration = "),
        "{toml}"
    );
    // Each series three times, every series' pass 1 before any pass 2.
    let labels: Vec<&str> = toml
        .lines()
        .filter_map(|l| l.strip_prefix("label = "))
        .collect();
    let first_pass2 = labels
        .iter()
        .position(|l| l.contains("[pass 2/3]"))
        .unwrap();
    assert_eq!(labels[0], "\"WRITE [pass 1/3]\"", "{labels:?}");
    assert!(labels[..first_pass2]
        .iter()
        .all(|l| l.contains("[pass 1/3]")));
    assert_eq!(labels.len() % 3, 0);
    assert_eq!(labels[first_pass2], "\"WRITE [pass 2/3]\"");
    assert!(
        !toml.contains("\npasses = "),
        "the plan lists its passes itself"
    );

    let set = dir.join("set.toml");
    std::fs::write(
        &set,
        "name = \"x\"\n[[series]]\nlabel = \"W\"\nverb = \"write\"\nsize = \"2..4096\"\n",
    )
    .unwrap();
    let nine = dir.join("nine.toml");
    std::fs::write(
        &nine,
        "name = \"x\"\npasses = 9\n[[series]]\nlabel = \"W\"\nverb = \"write\"\n",
    )
    .unwrap();
    let fresh = dir.join("fresh");
    let fresh = fresh.to_str().unwrap();
    let set = set.to_str().unwrap();
    let nine = nine.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--budget", "1s", "--out", fresh],
            "--budget 1s: too short",
        ),
        (vec!["--budget", "3x", "--out", fresh], "--budget"),
        (vec!["--budget", "0", "--out", fresh], "--budget"),
        (
            vec!["--set", "/nonexistent.toml", "--out", fresh],
            "/nonexistent.toml",
        ),
        (
            vec!["--set", set, "--budget", "2s", "--out", fresh],
            "12 points × 1 pass",
        ),
        (
            vec!["--set", nine, "--budget", "1m", "--out", fresh],
            "nine.toml:2: key 'passes': 9 is outside 1 to 5",
        ),
        (
            vec!["--resume", "--budget", "3m", "--out", fresh],
            "--resume",
        ),
        (vec!["--resume", "--out", fresh], "--resume"),
    ] {
        let o = run(&[&["profile", "--dry-run"], &args[..]].concat());
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    assert!(!Path::new(fresh).exists(), "nothing made for refused input");
}

/// The text of one figure of a page: matplotlib draws text as paths and
/// keeps each string in a comment beside them, so legends are readable here.
fn figure_texts(html: &str, id: &str) -> Vec<String> {
    let figure = html
        .split(&format!("data-figure=\"{id}\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no figure {id}"))
        .split("</figure>")
        .next()
        .unwrap();
    figure
        .split("<!-- ")
        .skip(1)
        .map(|t| t.split(" -->").next().unwrap().to_string())
        .collect()
}

/// Two committed profiles on one page: in the NIC-cache and under-load
/// figures (whose x values never meet across profiles) each profile has
/// lines of its own, named in the legend by the name the page gives it.
#[test]
fn two_profiles_have_their_own_lines_named_by_their_labels() {
    let dir = scratch("report-labels");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let (a, b) = (
        root.join("profile-rxe0-loopback"),
        root.join("profile-rxe0-two-host"),
    );
    let html = page(
        &dir,
        &[&a, &b],
        &["--force", "--label", "loop", "--label", "wire"],
    );
    for (id, lines) in [
        ("nic-cache", &["random offsets", "one MR per QP"][..]),
        ("latency-under-load", &["WRITE under load"][..]),
    ] {
        let texts = figure_texts(&html, id);
        for line in lines {
            for label in ["loop", "wire"] {
                let want = format!("{line} \u{2014} {label}");
                assert!(
                    texts.iter().any(|t| t.starts_with(&want)),
                    "{id}: no line {want:?} in {texts:?}"
                );
            }
        }
        assert!(
            !texts
                .iter()
                .any(|t| t.contains("@ vm-qemu, 2026") && t.contains('\u{2014}')),
            "{id}: a line named by the scripts' own tag: {texts:?}"
        );
    }
    // Without --label, the page's default names (device @ host, date) are
    // the legend's.
    let html = page(&dir, &[&a, &b], &["--force"]);
    let texts = figure_texts(&html, "latency-under-load");
    for host in ["rxe0 @ vm-qemu, 2026-12-02", "rxe0 @ h1, 2026-12-03"] {
        assert!(
            texts.iter().any(|t| t.contains(host)),
            "no line named {host:?} in {texts:?}"
        );
    }
}
