//! One module per subcommand: each turns parsed arguments into a run and
//! returns an `Error` for `main` to report.

pub mod compare;
pub mod completions;
pub mod devices;
pub mod experiment;
pub mod latency;
pub mod measure;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod perftest;
pub mod plan;
pub mod run;
pub mod schema;
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

/// What to do with each measured point: show it, add it to the document and
/// rewrite the results files (so an interrupted run keeps it).
pub fn keep<'a>(
    console: &'a Console,
    doc: &'a mut ResultsDoc,
    sink: &'a ResultsSink,
) -> impl FnMut(Record, &PeerInfo) -> Result<()> + 'a {
    move |record, peer| {
        doc.peer.note(peer);
        doc.results.push(record);
        doc.note_peak_rss();
        sink.write(doc)?;
        // Saved first: a closed stdout ends the run here, with the point kept.
        if let Some(record) = doc.results.last() {
            console.record(record);
            console.clock_note(record, &doc.clock);
        }
        console.check()
    }
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
/// returned the wrong value, or target words that do not account for every
/// atomic executed. Called after the results are written, so they are kept.
pub fn verified(doc: &ResultsDoc) -> Result<()> {
    let (mut failures, mut points) = (0u64, 0usize);
    // --validate: a payload that arrived corrupt fails the run the same way.
    let (mut corrupt, mut corrupt_points) = (0u64, 0usize);
    for r in &doc.results {
        let checks = match r {
            Record::Latency(l) => &l.checks,
            Record::Throughput(t) => &t.checks,
        };
        if let Some(v) = checks.validation.as_ref().filter(|v| v.corrupt_wrs > 0) {
            corrupt += v.corrupt_wrs;
            corrupt_points += 1;
        }
        let f = match r {
            Record::Latency(l) => l.verify_failures,
            Record::Throughput(t) => t.verify_failures.unwrap_or(0),
        };
        if f > 0 {
            failures += f;
            points += 1;
        }
    }
    if corrupt > 0 && failures == 0 {
        return Err(Error::Verification(format!(
            "{corrupt} payloads arrived corrupt, in {corrupt_points} points (validation.corrupt_wrs in the results file)"
        )));
    }
    if failures == 0 {
        return Ok(());
    }
    Err(Error::Verification(format!(
        "{failures} atomic results did not verify, in {points} points (verify_failures in the results file)"
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
