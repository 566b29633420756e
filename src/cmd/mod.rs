//! One module per subcommand: each turns parsed arguments into a run and
//! returns an `Error` for `main` to report.

pub mod compare;
pub mod completions;
pub mod devices;
pub mod experiment;
pub mod fabric;
pub mod latency;
pub mod measure;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod perftest;
pub mod plan;
pub mod profile;
pub mod progress;
pub mod report;
pub mod run;
pub mod schema;
pub mod script_output;
pub mod serve;
pub mod setup;
pub mod tput;
pub mod under_load;

use std::sync::Mutex;
use std::time::Duration;

use crate::abort::abort_all;
use crate::bench::{serve_client, DeviceChoice, Port, Rendezvous};
use crate::cli::DeviceArgs;
use crate::clock::Clock;
use crate::connect::{local_pair, Control};
use crate::error::{Error, Result};
use crate::export::ResultsSink;
use crate::output::Console;
use crate::report::{IntervalFigure, PeerInfo};
use crate::results::{Record, ResultsDoc};
use crate::verdict::{Expectation, Recorded};

/// What to do with each measured point: hold it to the expectations, show
/// it, add it to the document and rewrite the results files (so an
/// interrupted run keeps it).
pub fn keep<'a>(
    console: &'a Console,
    doc: &'a mut ResultsDoc,
    sink: &'a ResultsSink,
    expectations: &'a [Expectation],
) -> impl FnMut(Record, &PeerInfo) -> Result<()> + 'a {
    move |mut record, peer| {
        let failed = crate::verdict::judge_record(expectations, &mut record);
        doc.peer.note(peer);
        doc.results.push(record);
        doc.note_peak_rss();
        sink.write(doc)?;
        // Saved first: a closed stdout ends the run here, with the point kept.
        if let Some(record) = doc.results.last() {
            console.record(record);
            for f in &failed {
                console.expectation_failed(f);
            }
            console.clock_note(record, &doc.clock);
        }
        console.check()
    }
}

/// What `plan`'s records will carry, for checking `--expect` before the run.
pub fn recorded(plan: &plan::Plan) -> Recorded {
    let latency = |s: &crate::spec::LatencySpec| Recorded {
        throughput: false,
        interval: s.live.interval_s.is_some(),
        validate: s.validate,
        ping_pong: s.server_answers(),
        iters: false,
        atomic: false,
        received: false,
    };
    match plan {
        plan::Plan::Latency(s) => latency(s),
        plan::Plan::Tput(s, _) => Recorded {
            throughput: true,
            interval: s.live.interval_s.is_some(),
            validate: s.validate,
            ping_pong: false,
            iters: s.iters.is_some(),
            atomic: s.verb == crate::spec::VerbKind::Atomic,
            // The receiving side counts what consumes a receive WR.
            received: s.verb == crate::spec::VerbKind::Send
                || s.direction == crate::spec::Direction::Echo
                || (s.verb == crate::spec::VerbKind::Write && s.imm),
        },
        // The records are the probe's; --interval is refused with --under-load.
        plan::Plan::UnderLoad(s) => Recorded {
            interval: false,
            ..latency(&s.probe)
        },
    }
}

/// `option`'s expressions, checked against what `plan` records (exit 2).
pub fn expectations(option: &str, exprs: &[String], plan: &plan::Plan) -> Result<Vec<Expectation>> {
    crate::verdict::parse_all(option, exprs, &recorded(plan))
}

/// Fails (exit 3) when any point missed an expectation; called after every
/// file is written and after `verified`, whose failures win.
pub fn expectations_met(doc: &ResultsDoc) -> Result<()> {
    let (mut failed, mut points, mut first) = (0usize, 0usize, None);
    for r in &doc.results {
        let (checks, size) = match r {
            Record::Latency(l) => (&l.checks, l.size),
            Record::Throughput(t) => (&t.checks, t.size),
        };
        let missed: Vec<_> = checks.expectations.iter().filter(|e| !e.pass).collect();
        if let Some(e) = missed.first() {
            first.get_or_insert((*e, size));
            failed += missed.len();
            points += 1;
        }
    }
    let Some((e, size)) = first else {
        return Ok(());
    };
    let measured = e
        .measured
        .map_or_else(|| "not recorded".to_string(), crate::verdict::round);
    Err(Error::Expectation(format!(
        "{failed} expectations failed, in {points} of {} points (first: '{}' at size {size}: {} = {measured}); each point's verdicts are in `expectations` in the results file",
        doc.results.len(),
        e.expr,
        e.field
    )))
}

/// What happens to each `--interval` as it ends (on the interval watcher
/// thread, never a measuring one): its line is printed above the progress
/// bar, and a `--forever` point rewrites the results files with everything
/// measured so far, so even a killed run keeps every whole interval.
pub struct Live<'a> {
    console: &'a Console,
    plan: &'a plan::Plan,
    series: Option<&'a str>,
    sink: &'a ResultsSink,
    /// The document as it was before the point, and the point's intervals so far.
    state: Mutex<(ResultsDoc, Vec<IntervalFigure>)>,
}

impl<'a> Live<'a> {
    pub fn new(
        console: &'a Console,
        plan: &'a plan::Plan,
        series: Option<&'a str>,
        sink: &'a ResultsSink,
        doc: &ResultsDoc,
    ) -> Self {
        Live {
            console,
            plan,
            series,
            sink,
            state: Mutex::new((doc.clone(), Vec::new())),
        }
    }

    pub fn show(&self, _index: u32, f: &IntervalFigure) {
        self.console.interval(f);
        if !self.plan.forever() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (doc, intervals) = &mut *state;
        intervals.push(f.clone());
        if let Some(r) = self.plan.provisional(self.series, intervals) {
            let mut d = doc.clone();
            d.results.push(r);
            d.note_peak_rss();
            if let Err(e) = self.sink.write(&d) {
                self.console
                    .note(&format!("warning: interval {}: {e}", f.index));
            }
        }
    }
}

/// Fails (exit 1) when any measured result did not verify: an atomic that
/// returned the wrong value, target words that do not account for every
/// atomic executed, or (`--validate`) a corrupt payload. Called after the
/// results are written, so they are kept.
pub fn verified(doc: &ResultsDoc) -> Result<()> {
    let (mut failures, mut points) = (0u64, 0usize);
    let (mut corrupt, mut corrupt_points, mut first) = (0u64, 0usize, None);
    for r in &doc.results {
        let (f, checks) = match r {
            Record::Latency(l) => (l.verify_failures, &l.checks),
            Record::Throughput(t) => (t.verify_failures.unwrap_or(0), &t.checks),
        };
        if f > 0 {
            failures += f;
            points += 1;
        }
        if let Some(v) = checks.validation.as_ref().filter(|v| v.corrupt_wrs > 0) {
            corrupt += v.corrupt_wrs;
            corrupt_points += 1;
            if first.is_none() {
                first = v.first_corrupt.clone();
            }
        }
    }
    if failures > 0 {
        return Err(Error::Verification(format!(
            "{failures} atomic results did not verify, in {points} points (verify_failures in the results file)"
        )));
    }
    if corrupt == 0 {
        return Ok(());
    }
    let first = first.map_or_else(String::new, |c| {
        format!(
            "; the first: QP {} WR {} at offset {} (expected {:#04x}, found {:#04x})",
            c.qp, c.wr, c.offset, c.expected, c.found
        )
    });
    Err(Error::Verification(format!(
        "--validate: {corrupt} WRs arrived corrupt, in {corrupt_points} points{first} (validation in the results file)"
    )))
}

/// Runs `client` against a server on its own thread of this process, over an
/// in-process control channel: both sides use the same device for real.
pub fn loopback(
    port: &Port,
    clock: &Clock,
    timeout_s: f64,
    client: impl FnOnce(&mut dyn Control) -> Result<()>,
) -> Result<()> {
    let (mut client_end, mut server_end) = local_pair();
    std::thread::scope(|scope| {
        let timeout = Duration::from_secs_f64(timeout_s);
        // A thread the kernel refuses (ulimit -v, -u) is an error, not a panic.
        let server_thread = std::thread::Builder::new()
            .spawn_scoped(scope, move || {
                let r = server_end.recv(timeout).and_then(|hello| {
                    serve_client(port, &mut server_end, clock, hello, &Rendezvous::default())
                });
                if r.is_err() {
                    abort_all();
                }
                r
            })
            .map_err(|e| Error::io("starting the loopback server's thread", e))?;
        let client_result = client(&mut client_end);
        if client_result.is_err() {
            // Unblock the server thread wherever it waits.
            abort_all();
        }
        drop(client_end);
        let server_result = server_thread.join().unwrap_or(Err(Error::Interrupted));
        match (client_result, server_result) {
            // The client stopped because the server failed: the server's error says why.
            (Err(Error::Interrupted), Err(e)) => Err(e),
            (Err(e), _) => Err(e),
            (Ok(()), r) => r,
        }
    })
}

impl From<&DeviceArgs> for DeviceChoice {
    fn from(a: &DeviceArgs) -> Self {
        DeviceChoice {
            device: a.device.clone(),
            ib_port: a.ib_port,
            gid_index: a.gid_index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CorruptWr, ExpectationResult, Validation};
    use crate::results::{LatencyRecord, TputRecord};

    fn doc(records: Vec<Record>) -> ResultsDoc {
        ResultsDoc {
            results: records,
            ..Default::default()
        }
    }

    fn verdict(expr: &str, pass: bool) -> ExpectationResult {
        ExpectationResult {
            expr: expr.into(),
            field: "p50_ns".into(),
            measured: Some(37_823.5),
            limit: 1.0,
            pass,
        }
    }

    #[test]
    fn a_corrupt_payload_fails_verification_naming_the_first_wr() {
        let mut t = TputRecord::example();
        t.checks.validation = Some(Validation {
            validated_wrs: 100,
            corrupt_wrs: 1,
            corrupt_bytes: 1,
            first_corrupt: Some(CorruptWr {
                qp: 2,
                wr: 17,
                offset: 5,
                expected: 0x3a,
                found: 0xc5,
            }),
            ..Default::default()
        });
        let clean = Record::Throughput(TputRecord::example());
        let d = doc(vec![clean, Record::Throughput(t)]);
        let e = verified(&d).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert_eq!(
            e.to_string(),
            "--validate: 1 WRs arrived corrupt, in 1 points; the first: QP 2 WR 17 at offset 5 (expected 0x3a, found 0xc5) (validation in the results file)"
        );
        assert!(verified(&doc(vec![Record::Latency(LatencyRecord::example())])).is_ok());
    }

    #[test]
    fn a_failed_expectation_exits_3_naming_the_first() {
        let mut a = LatencyRecord::example();
        a.checks.expectations = vec![verdict("p50>0ns", true)];
        let mut b = LatencyRecord::example();
        b.size = 64;
        b.checks.expectations = vec![verdict("p50>0ns", true), verdict("p50<1ns", false)];
        let d = doc(vec![Record::Latency(a.clone()), Record::Latency(b)]);
        let e = expectations_met(&d).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert_eq!(
            e.to_string(),
            "1 expectations failed, in 1 of 2 points (first: 'p50<1ns' at size 64: p50_ns = 37823.5); each point's verdicts are in `expectations` in the results file"
        );
        assert!(expectations_met(&doc(vec![Record::Latency(a)])).is_ok());
    }
}
