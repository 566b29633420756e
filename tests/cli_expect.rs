//! `--expect` through the binary, without a device: expressions refused
//! (exit 2, one line naming the expression) before anything opens, the
//! experiment file's `expect` key, and `compare --expect` between result
//! files that differ by a known ratio (exit 0 or 3, files written either way).

mod common;

use common::{read_json, refused, results_file, run_within, scratch, text};

#[test]
fn bad_expressions_are_usage_errors_naming_the_expression() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["write", "--expect", "p99<=20"],
            &[
                "--expect 'p99<=20'",
                "give the limit a unit (ns, us, ms, s)",
            ],
        ),
        (
            &["write", "--expect", "p98<=20us"],
            &["--expect 'p98<=20us'", "unknown field 'p98'", "p99", "mops"],
        ),
        (
            &["write", "--expect", "p99<=20xs"],
            &["unknown unit 'xs'", "ns, us, ms, s"],
        ),
        (
            &["write", "--tput=inbound", "--expect", "mops>=12us"],
            &["'us' is a unit of time, but mops is a rate"],
        ),
        (&["read", "--expect", "p99<="], &["no number after '<='"]),
        (&["read", "--expect", "p99=20us"], &["no operator"]),
        (
            &["write", "--tput=outbound", "--expect", "p99<=20us"],
            &[
                "a throughput run records no p99",
                "fields for this run: mops, gbps",
            ],
        ),
        (
            &["send", "--expect", "gbps>=90"],
            &[
                "a latency run records no gbps",
                "fields for this run: min, p50",
            ],
        ),
        (
            &[
                "send",
                "--tput=inbound",
                "--expect",
                "min_interval_gbps>=85",
            ],
            &["min_interval_gbps is recorded only with --interval"],
        ),
        (
            &["write", "--expect", "worst_interval_p99<=1ms"],
            &["only with --interval"],
        ),
        (
            &["write", "--expect", "corrupt_wrs==0"],
            &["corrupt_wrs is recorded only with --validate"],
        ),
        (
            &["write", "--expect", "p50>0ns", "--expect", "ops>1"],
            &["--expect 'ops>1'", "a latency run records no ops"],
        ),
        (
            &["read", "--expect", "rtt_p50<=1ms"],
            &["rtt_p50 is recorded only by ping-pong latency"],
        ),
        (
            &["write", "--under-load", "max", "--expect", "mops>1"],
            &["a latency run records no mops"],
        ),
    ];
    for (args, needles) in cases {
        refused(args, needles);
    }
}

#[test]
fn experiment_expect_keys_are_checked_naming_file_line_and_key() {
    let dir = scratch("expect-cfg");
    let file = dir.join("x.toml");
    let cases: &[(&str, &[&str])] = &[
        (
            "name = \"t\"\n[[series]]\nlabel = \"l\"\nverb = \"write\"\nexpect = [\"p99<=20\"]\n",
            &["x.toml:5:", "key 'expect' (series 'l')", "give the limit a unit"],
        ),
        (
            "name = \"t\"\n[[series]]\nlabel = \"l\"\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nexpect = \"p50<1us\"\n",
            &["x.toml:7:", "a throughput run records no p50"],
        ),
        (
            "name = \"t\"\n[[series]]\nverb = \"write\"\nexpect = 3\n",
            &["x.toml:4:", "key 'expect'", "found the integer 3"],
        ),
        (
            "name = \"t\"\n[defaults]\nexpect = [\"nope<1\"]\n[[series]]\nverb = \"write\"\n",
            &["x.toml:3:", "[defaults]", "unknown field 'nope'"],
        ),
    ];
    for (toml, needles) in cases {
        std::fs::write(&file, toml).unwrap();
        refused(&["run", file.to_str().unwrap()], needles);
    }
    std::fs::write(&file, "name = \"t\"\n[[series]]\nverb = \"write\"\n").unwrap();
    refused(
        &["run", file.to_str().unwrap(), "--expect", "mops>1"],
        &["--expect 'mops>1'", "a latency run records no mops"],
    );
}

/// A `[defaults]` expression a series never records is left out of it, said
/// before any device is looked for (this host has none: exit 2 after it).
#[test]
fn a_default_expectation_that_does_not_fit_a_series_is_left_out_with_why() {
    let dir = scratch("expect-defaults");
    let file = dir.join("x.toml");
    std::fs::write(
        &file,
        "name = \"t\"\n[defaults]\nexpect = [\"p99<=20us\", \"mops>0\"]\n[[series]]\nlabel = \"bw\"\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n[[series]]\nlabel = \"lat\"\nverb = \"write\"\nexpect = \"p50>0ns\"\n",
    )
    .unwrap();
    let out = run_within(
        &[
            "run",
            file.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--expect",
            "ops>0",
            "-d",
            "no-such-device",
        ],
        10,
    );
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("# series 'bw': [defaults] applied: expect 'mops>0'; left out: expect 'p99<=20us' (a throughput run records no p99)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# series 'lat': [defaults] applied: expect 'p99<=20us'; left out: expect 'mops>0' (a latency run records no mops)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# series 'lat': --expect 'ops>0' left out (a latency run records no ops)"),
        "{stdout}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Two results files whose latency p50s differ by 1.10 and Mops by 0.90.
fn pair(dir: &std::path::Path) -> (String, String) {
    let a = results_file(dir, "a.json", |_| {});
    let b = results_file(dir, "b.json", |v| {
        for r in v["results"].as_array_mut().unwrap() {
            if r["kind"] == "latency" {
                r["p50_ns"] = (r["p50_ns"].as_f64().unwrap() * 1.10).into();
            } else {
                r["mops"] = (r["mops"].as_f64().unwrap() * 0.90).into();
            }
        }
    });
    (
        a.to_str().unwrap().to_string(),
        b.to_str().unwrap().to_string(),
    )
}

#[test]
fn compare_expect_passes_and_fails_on_the_ratio_and_writes_its_files_either_way() {
    let dir = scratch("expect-compare");
    let (a, b) = pair(&dir);
    let sample = common::sample_results();
    let points = |kind: &str| {
        sample["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == kind)
            .count()
    };
    let (latency, tput) = (points("latency"), points("throughput"));
    assert!(latency > 0 && tput > 0, "the sample has both kinds");

    let json = dir.join("pass.json");
    let out = run_within(
        &[
            "compare",
            &a,
            &b,
            "--expect",
            "ratio.p50<=1.15",
            "--expect",
            "ratio.mops >= 0.85",
            "--json",
            json.to_str().unwrap(),
        ],
        10,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("# expectations: {0} of {0} held", latency + tput)),
        "{stdout}"
    );
    let v = read_json(&json);
    let verdicts = v["expectations"].as_array().unwrap();
    assert_eq!(verdicts.len(), latency + tput);
    assert!(verdicts.iter().all(|x| x["pass"] == true));
    let p50 = verdicts
        .iter()
        .find(|x| x["expr"] == "ratio.p50<=1.15")
        .unwrap();
    assert!(
        (p50["ratio"].as_f64().unwrap() - 1.10).abs() < 1e-9,
        "{p50}"
    );
    assert_eq!(p50["field"], "p50_ns");
    assert_eq!(p50["column"], "B");

    let (json, csv) = (dir.join("fail.json"), dir.join("fail.csv"));
    let out = run_within(
        &[
            "compare",
            &a,
            &b,
            "--expect",
            "ratio.p50<=1.05",
            "--expect",
            "ratio.mops>=0.85",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
        10,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("# expectation failed: ratio.p50<=1.05 at latency "),
        "{stdout}"
    );
    assert!(stdout.contains("[B]/[A] = 1.100"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "# expectations: {tput} of {} held",
            latency + tput
        )),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!(
            "compare: {latency} of {} expectations failed",
            latency + tput
        )),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    // The files are written before the failing exit.
    let v = read_json(&json);
    let failed: Vec<_> = v["expectations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["pass"] == false)
        .collect();
    assert_eq!(failed.len(), latency);
    assert!(failed.iter().all(|x| x["expr"] == "ratio.p50<=1.05"));
    assert!(std::fs::metadata(&csv).unwrap().len() > 0);

    // A check that judges no point fails: p50 between throughput-only files.
    let t1 = results_file(&dir, "t1.json", |v| {
        v["results"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["kind"] == "throughput");
    });
    let t2 = results_file(&dir, "t2.json", |v| {
        v["results"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["kind"] == "throughput");
    });
    let out = run_within(
        &[
            "compare",
            t1.to_str().unwrap(),
            t2.to_str().unwrap(),
            "--expect",
            "ratio.p50<=1.05",
        ],
        10,
    );
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("no point matched"), "{stdout}");
}

#[test]
fn compare_expect_refuses_what_is_not_a_ratio() {
    let dir = scratch("expect-compare-bad");
    let (a, b) = pair(&dir);
    refused(
        &["compare", &a, &b, "--expect", "p50<=1.05"],
        &["--expect 'p50<=1.05'", "is not ratio.FIELD"],
    );
    refused(
        &["compare", &a, &b, "--expect", "ratio.p50<=5us"],
        &["a ratio has no unit"],
    );
    refused(
        &["compare", &a, &b, "--expect", "ratio.nope<1"],
        &["not ratio.FIELD", "p50"],
    );
}
