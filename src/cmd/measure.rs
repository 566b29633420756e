//! `rdma-bench read|write|send|echo|atomic [--tput ...]`: one measurement,
//! printed as a table and saved as JSON/CSV after every point.

use std::time::Duration;

use crate::bench::{DeviceChoice, Port};
use crate::cli::TestArgs;
use crate::clock::Clock;
use crate::error::Result;
use crate::export::ResultsSink;
use crate::output::Console;
use crate::spec::VerbKind;

use super::plan::Plan;
use super::setup::{new_doc, plan_cpus};

pub fn run(verb: VerbKind, args: &TestArgs) -> Result<()> {
    #[cfg(feature = "mpi")]
    if super::mpi::launched() {
        return super::mpi::run(verb, args);
    }
    let mut plan = Plan::from_args(verb, args)?;
    let expectations = super::expectations("--expect", &args.checks.expect, &plan)?;
    let sink = ResultsSink::new(args.json.clone(), args.csv.clone())
        .with_markdown("--markdown", args.markdown.clone())
        .with_samples(super::script_output::samples_file(args));
    sink.check_writable()?;
    super::setup::check_cpus("--cpu", args.device.cpu.as_deref())?;
    let port = Port::open(&DeviceChoice::from(&args.device))?;
    let capped = args
        .all
        .then(|| plan.cap_ud_sizes(&port.path_ends()))
        .flatten();
    let clock = Clock::calibrate(Duration::from_millis(10))?;
    let mut doc = new_doc(args.connect.as_deref(), &port, &clock)?;
    let (client, server) = plan.threads(args.connect.is_none());
    let (affinity, warning) = plan_cpus(&args.device, &port, client, server)?;
    doc.affinity = Some(affinity);
    let console = Console::new(args.quiet, plan.points() as u64)
        .with_figure(super::script_output::figure(args));
    if let Some(w) = warning {
        console.note(&format!("warning: {w}"));
    }
    for n in super::perftest::notes(args) {
        console.note(n);
    }
    if let Some(n) = capped {
        console.note(&n);
    }
    plan.announce(&console, port.ctx.name());
    // The files exist (and parse) from the start, whatever happens next.
    sink.write(&doc)?;
    if let (Some(file), Plan::Latency(spec)) = (sink.samples(), &plan) {
        let what = crate::output::describe_measurement(spec, port.ctx.name());
        file.start(spec.mode == crate::spec::LatencyMode::PingPong, &what)?;
    }
    if plan.forever() {
        // Ctrl-C now ends the point (its normal end), not the run.
        crate::abort::end_point_on_signals()
            .map_err(|e| crate::error::Error::io("installing signal handlers", e))?;
    }
    let live = super::Live::new(&console, &plan, None, &sink, &doc);
    let result = plan.execute_live(
        &port,
        &clock,
        args.connect.as_deref(),
        None,
        &|i, f| live.show(i, f),
        sink.samples(),
        &mut super::keep(&console, &mut doc, &sink, &expectations),
    );
    console.finish();
    result
        .and_then(|()| console.check())
        .and_then(|()| super::verified(&doc))
        .and_then(|()| super::expectations_met(&doc))
}
