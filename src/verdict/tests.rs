use super::*;
use crate::results::{LatencyRecord, TputRecord};

const LATENCY: Recorded = Recorded {
    throughput: false,
    interval: false,
    validate: false,
    ping_pong: true,
    iters: false,
    atomic: false,
    received: false,
};
const TPUT: Recorded = Recorded {
    throughput: true,
    ..LATENCY
};
const EVERYTHING_LATENCY: Recorded = Recorded {
    interval: true,
    validate: true,
    ..LATENCY
};
const EVERYTHING_TPUT: Recorded = Recorded {
    throughput: true,
    iters: true,
    atomic: true,
    received: true,
    ..EVERYTHING_LATENCY
};

fn parse(e: &str) -> Expectation {
    Expectation::parse(e).unwrap_or_else(|m| panic!("{e}: {m}"))
}

fn refused(e: &str, needle: &str) {
    let msg = Expectation::parse(e).expect_err(e);
    assert!(msg.contains(needle), "{e}: '{msg}' lacks '{needle}'");
}

/// A limit that each field's kind accepts, written as its expression.
fn sample(f: &Field) -> String {
    match f.kind {
        Kind::Time => format!("{}<=20us", f.name),
        _ => format!("{}>=1", f.name),
    }
}

#[test]
fn every_field_parses_and_is_recorded_by_some_run() {
    for f in FIELDS {
        let e = parse(&sample(f));
        assert_eq!(e.field, f);
        let runs = if f.has == Has::Latency {
            [EVERYTHING_LATENCY]
        } else if f.has == Has::Throughput {
            [EVERYTHING_TPUT]
        } else {
            [EVERYTHING_LATENCY]
        };
        for run in runs {
            parse_all("--expect", &[sample(f)], &run).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        }
        if f.has == Has::Both {
            parse_all("--expect", &[sample(f)], &EVERYTHING_TPUT).unwrap();
        }
    }
}

#[test]
fn every_unit_converts_to_the_fields_unit() {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    for (expr, limit) in [
        ("p99<=20ns", 20.0),
        ("p99<=20us", 20_000.0),
        ("p99<=20µs", 20_000.0),
        ("p99<=2ms", 2e6),
        ("p99<=2s", 2e9),
        ("p99<=2US", 2_000.0),
        ("mops>=12", 12.0),
        ("mops>=12mops", 12.0),
        ("mops>=500kops", 0.5),
        ("mops>=500Kops", 0.5),
        ("gbps>=90", 90.0),
        ("gbps>=90gbps", 90.0),
        ("gbps>=900mbps", 0.9),
        ("mib_s>=100", 100.0),
        // 1 Gb/s is 1e9 / 8 / 2^20 MiB/s.
        ("mib_s>=1gbps", 1e9 / 8.0 / 1_048_576.0),
        ("min_interval_gbps>=85", 85.0),
        ("verify_failures==0", 0.0),
        ("cpu_s_per_mop<=0.5", 0.5),
    ] {
        let e = parse(expr);
        assert!(close(e.limit, limit), "{expr}: {} != {limit}", e.limit);
    }
}

#[test]
fn every_operator_holds_as_written() {
    for (expr, op, yes, no) in [
        ("p50<5ns", Op::Lt, 4.0, 5.0),
        ("p50<=5ns", Op::Le, 5.0, 5.5),
        ("p50>5ns", Op::Gt, 6.0, 5.0),
        ("p50>=5ns", Op::Ge, 5.0, 4.5),
        ("p50==5ns", Op::Eq, 5.0, 5.1),
        ("p50!=5ns", Op::Ne, 5.1, 5.0),
    ] {
        let e = parse(expr);
        assert_eq!(e.op, op, "{expr}");
        assert!(e.judge(Some(yes)).pass, "{expr} with {yes}");
        assert!(!e.judge(Some(no)).pass, "{expr} with {no}");
        assert!(!e.judge(None).pass, "{expr}: a missing value fails");
    }
}

#[test]
fn whitespace_is_allowed_between_the_parts() {
    let e = parse("  p99 <=  20 us ");
    assert_eq!((e.field.name, e.op, e.limit), ("p99", Op::Le, 20_000.0));
    assert_eq!(e.expr, "p99 <=  20 us");
    assert_eq!(parse("mops >= 1e3").limit, 1000.0);
}

#[test]
fn bad_expressions_are_refused_naming_what_is_wrong() {
    refused("", "no field name");
    refused("<=20us", "no field name");
    refused("p99", "no operator");
    refused("p99 = 20us", "no operator");
    refused("p99=>20us", "no operator");
    refused("p99<=", "no number");
    refused("p99<=us", "no number");
    refused("p99<=1.2.3us", "not a number");
    refused("p99<=1e999us", "not a finite number");
    refused("p99<=20", "give the limit a unit");
    refused("p99<=20xs", "unknown unit 'xs'");
    refused("p99<=20 u s", "not a unit");
    refused("mops>=20us", "'us' is a unit of time, but mops is a rate");
    refused("gbps>=20mops", "but gbps is a bandwidth");
    refused("ops>=20us", "units: none");
    refused("verify_failures==0ns", "but verify_failures is a count");
    let msg = Expectation::parse("p98<=20us").unwrap_err();
    assert!(msg.contains("unknown field 'p98'"), "{msg}");
    for f in FIELDS {
        assert!(msg.contains(f.name), "the list lacks {}: {msg}", f.name);
    }
}

#[test]
fn a_field_the_run_never_records_is_a_usage_error() {
    let err = |e: &str, run: &Recorded| {
        let msg = parse_all("--expect", &[e.to_string()], run)
            .expect_err(e)
            .to_string();
        assert!(msg.starts_with(&format!("--expect '{e}': ")), "{msg}");
        msg
    };
    let m = err("p99<=20us", &TPUT);
    assert!(m.contains("a throughput run records no p99"), "{m}");
    assert!(m.contains("fields for this run: mops, gbps"), "{m}");
    assert!(!m.contains("p50"), "{m}");
    assert!(err("mops>=1", &LATENCY).contains("a latency run records no mops"));
    assert!(err("min_interval_mops>=1", &TPUT).contains("only with --interval"));
    assert!(err("worst_interval_p99<=1ms", &LATENCY).contains("only with --interval"));
    assert!(err("corrupt_wrs==0", &LATENCY).contains("only with --validate"));
    assert!(err("validated_wrs>0", &TPUT).contains("only with --validate"));
    let completion = Recorded {
        ping_pong: false,
        ..LATENCY
    };
    assert!(err("rtt_p50<=1ms", &completion).contains("ping-pong"));
    assert!(err("iters>=1", &TPUT).contains("timed"));
    assert!(err("verify_failures==0", &TPUT).contains("only for atomics"));
    assert!(err("lost==0", &TPUT).contains("receiver counts"));
    // Accepted where recorded.
    parse_all("--expect", &["iters>=1".into()], &LATENCY).unwrap();
    parse_all("--expect", &["verify_failures==0".into()], &LATENCY).unwrap();
    parse_all("--expect", &["corrupt_wrs==0".into()], &EVERYTHING_TPUT).unwrap();
}

#[test]
fn ratios_take_any_field_and_no_unit() {
    let e = Expectation::parse_ratio("ratio.p50<=1.05").unwrap();
    assert_eq!((e.field.name, e.limit, e.ratio), ("p50", 1.05, true));
    assert_eq!(e.judge(Some(1.1)).field, "ratio.p50_ns");
    assert!(Expectation::parse_ratio("ratio.mops >= 0.95").is_ok());
    assert!(Expectation::parse_ratio("ratio.gbps>=0.95").is_ok());
    let m = Expectation::parse_ratio("p50<=1.05").unwrap_err();
    assert!(m.contains("not ratio.FIELD"), "{m}");
    let m = Expectation::parse_ratio("ratio.p50<=1.05us").unwrap_err();
    assert!(m.contains("no unit"), "{m}");
    let m = parse_ratios("--expect", &["ratio.nope<1".into()])
        .unwrap_err()
        .to_string();
    assert!(m.starts_with("--expect 'ratio.nope<1': "), "{m}");
}

#[test]
fn records_are_judged_by_their_fields() {
    let mut r = Record::Latency(LatencyRecord::example());
    let Record::Latency(l) = &mut r else {
        unreachable!()
    };
    l.stats.p50_ns = 5_210.0;
    l.stats.p99_ns = 25_310.0;
    let exps = parse_all(
        "--expect",
        &["p50>0ns".into(), "p99<=20us".into(), "p50<=6us".into()],
        &LATENCY,
    )
    .unwrap();
    let failed = judge_record(&exps, &mut r);
    assert_eq!(failed, vec!["p99<=20us (p99 = 25.31 us)".to_string()]);
    let Record::Latency(l) = &r else {
        unreachable!()
    };
    let got: Vec<(bool, Option<f64>)> = l
        .checks
        .expectations
        .iter()
        .map(|x| (x.pass, x.measured))
        .collect();
    assert_eq!(
        got,
        [
            (true, Some(5_210.0)),
            (false, Some(25_310.0)),
            (true, Some(5_210.0))
        ]
    );
    assert_eq!(l.checks.expectations[1].field, "p99_ns");
    assert_eq!(l.checks.expectations[1].limit, 20_000.0);

    // A field the record lacks (here: no --validate counts) fails as null.
    let mut t = Record::Throughput(TputRecord::example());
    let exps = parse_all(
        "--expect",
        &["corrupt_wrs==0".into(), "mops>1000000".into()],
        &EVERYTHING_TPUT,
    )
    .unwrap();
    let failed = judge_record(&exps, &mut t);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].contains("corrupt_wrs is not recorded"),
        "{failed:?}"
    );
    assert!(failed[1].starts_with("mops>1000000 (mops = "), "{failed:?}");
    let Record::Throughput(t) = &t else {
        unreachable!()
    };
    assert_eq!(t.checks.expectations[0].measured, None);
    assert_eq!(t.checks.expectations[0].field, "validation.corrupt_wrs");
}

#[test]
fn nested_fields_are_read_from_their_path() {
    let e = parse("cpu_s_per_mop<=2");
    let v = serde_json::json!({"cpu_util": {"local_cpu_s_per_mop": 1.5}});
    assert_eq!(e.value_in(&v), Some(1.5));
    assert_eq!(e.value_in(&serde_json::json!({"cpu_util": null})), None);
    let g = parse("gbps>=1gbps");
    assert_eq!(
        g.failure(&g.judge(Some(0.5))),
        "gbps>=1gbps (gbps = 0.50 gbps)"
    );
}

proptest::proptest! {
    /// Whatever the text, parsing answers (an expectation or a message), never panics.
    #[test]
    fn parsing_never_panics(s in "\\PC{0,40}") {
        let _ = Expectation::parse(&s);
        let _ = Expectation::parse_ratio(&s);
        let _ = parse_all("--expect", std::slice::from_ref(&s), &LATENCY);
    }

    /// Expressions built from the grammar's own pieces never panic either.
    #[test]
    fn grammar_shaped_text_never_panics(
        field in "(p99|mops|gbps|ratio\\.p50|ops|x)",
        op in "(<|<=|>|>=|==|!=|=|=<)",
        num in "[-+0-9.eE]{0,8}",
        unit in "(|ns|us|µs|ms|s|mops|kops|gbps|mbps|xx| us)",
    ) {
        let e = format!("{field}{op}{num}{unit}");
        let _ = Expectation::parse(&e);
        let _ = Expectation::parse_ratio(&e);
    }
}
