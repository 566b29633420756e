//! The tests every pair runs, in each direction: each is an ordinary
//! `rdma-bench write` command line, parsed and validated as a user's would
//! be, and run with `--connect` against the other endpoint's serve.

use std::collections::BTreeMap;

use crate::bench::Port;
use crate::cli::{Command, FabricArgs};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::fabric::doc::{FabricMetric, FabricTest};
use crate::results::Record;
use crate::spec::VerbKind;

use super::super::plan::Plan;

/// Device counters that count trouble when they move; the rest (packets,
/// sends) move in every healthy run.
const QUIET_COUNTERS: &[&str] = &[
    "sent_pkts",
    "rcvd_pkts",
    "rdma_sends",
    "rdma_recvs",
    "lifespan",
    "ack_deferred",
];

pub struct SuiteTest {
    pub doc: FabricTest,
    plan: Plan,
}

fn metric(name: &str, what: &str, better: &str, judged: bool) -> FabricMetric {
    FabricMetric {
        name: name.into(),
        what: what.into(),
        better: better.into(),
        judged,
    }
}

/// The tests `--tests` names, each checked as `rdma-bench write` checks
/// its arguments (exit 2 before any device opens).
pub fn build(a: &FabricArgs) -> Result<Vec<SuiteTest>> {
    crate::spec::check_timeout(a.timeout)?;
    let t = a.timeout.to_string();
    let mut tests = Vec::new();
    for name in a.tests.split(',').map(str::trim) {
        let (argv, metrics): (Vec<String>, Vec<FabricMetric>) = match name {
            "lat" => (
                // Warm-up a tenth of the samples (write's default, 1000,
                // would dominate a slow link's time).
                words(&[
                    "-s",
                    &a.lat_size.to_string(),
                    "-n",
                    &a.iters.to_string(),
                    "--warmup",
                    &(a.iters / 10).max(10).to_string(),
                ]),
                vec![
                    metric("lat_p50_ns", "WRITE ping-pong half-RTT, median: each sample is half of one round trip, timed by the driving side from its post to the peer's answer landing", "lower", true),
                    metric("lat_p99_ns", "WRITE ping-pong half-RTT, 99th percentile", "lower", false),
                    metric("lat_min_ns", "WRITE ping-pong half-RTT, minimum", "lower", false),
                ],
            ),
            "bw" => (
                words(&["--tput", "inbound", "-s", &a.bw_size.to_string(), "-D", &a.duration.to_string()]),
                vec![metric("gbps", "WRITE payload Gb/s from the driving side into the other's memory over the measured window (the client issues: --tput inbound into the serving side, 1 QP)", "higher", true)],
            ),
            "rate" => (
                words(&["--tput", "inbound", "-s", &a.rate_size.to_string(), "-D", &a.duration.to_string()]),
                vec![metric("mops", "WRITE messages per second (millions) from the driving side over the measured window", "higher", true)],
            ),
            other => {
                return Err(Error::usage(format!(
                    "--tests '{other}': not a fabric test (lat, bw, rate)"
                )))
            }
        };
        if tests.iter().any(|t: &SuiteTest| t.doc.name == name) {
            return Err(Error::usage(format!("--tests: '{name}' given twice")));
        }
        let mut full = vec!["rdma-bench".to_string(), "write".into()];
        full.extend(argv);
        full.extend(["--timeout".to_string(), t.clone(), "--quiet".into()]);
        let shown = format!("{} --connect PEER", full[1..].join(" "));
        let plan = match crate::cli::parse_from(&full).map(|c| c.command) {
            Ok(Command::Write(args)) => Plan::from_args_unresolved(VerbKind::Write, &args),
            Ok(_) => unreachable!("a write command line parses as write"),
            Err(e) => Err(Error::usage(crate::cli::one_line(&e))),
        }
        .map_err(|e| Error::usage(format!("fabric test {name} (`{shown}`): {e}")))?;
        tests.push(SuiteTest {
            doc: FabricTest {
                name: name.into(),
                command: shown,
                metrics,
            },
            plan,
        });
    }
    Ok(tests)
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

/// What one direction of a pair measured.
#[derive(Debug, Default)]
pub struct Figures {
    pub metrics: BTreeMap<String, f64>,
    pub counters: BTreeMap<String, u64>,
    pub error: Option<String>,
}

/// Runs every test from `port` against the serve at `serve`. A failed test
/// is noted and the next still runs (against a peer that is gone it fails
/// at once); a failure's abort of this process's waits is lifted first.
pub fn run_all(tests: &[SuiteTest], port: &Port, clock: &Clock, serve: &str) -> Figures {
    let mut f = Figures::default();
    for t in tests {
        if !crate::abort::rearm() {
            f.error.get_or_insert_with(|| "interrupted".into());
            break;
        }
        let mut keep = |r: Record, _: &crate::report::PeerInfo| {
            let counters = match &r {
                Record::Latency(l) => {
                    f.metrics.insert("lat_p50_ns".into(), l.stats.p50_ns);
                    f.metrics.insert("lat_p99_ns".into(), l.stats.p99_ns);
                    f.metrics.insert("lat_min_ns".into(), l.stats.min_ns);
                    &l.device_counters
                }
                Record::Throughput(tp) => {
                    let (name, v) = if t.doc.name == "bw" {
                        ("gbps", tp.gbps)
                    } else {
                        ("mops", tp.mops)
                    };
                    f.metrics.insert(name.into(), v);
                    &tp.device_counters
                }
            };
            for (k, v) in counters.iter().flatten() {
                if *v > 0 && !QUIET_COUNTERS.contains(&k.as_str()) {
                    *f.counters.entry(k.clone()).or_default() += v;
                }
            }
            Ok(())
        };
        if let Err(e) = t
            .plan
            .execute(port, clock, Some(serve), Some(&t.doc.name), &mut keep)
        {
            f.error
                .get_or_insert_with(|| format!("{} test: {e}", t.doc.name));
        }
    }
    crate::abort::rearm();
    f
}
