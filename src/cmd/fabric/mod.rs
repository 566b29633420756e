//! `rdma-bench fabric`: started once per host by srun or mpirun, the ranks
//! meet at rank 0 over TCP, every rank serves its endpoints, and rank 0
//! has each round's pairs measure each other both ways (`coordinator`),
//! then judges the entries (`verdicts`) and writes one document (`files`).
//! The pure parts (schedule, outlier rule, document) are in `crate::fabric`.

mod coordinator;
mod engine;
mod files;
mod progress;
mod suite;
mod verdicts;
mod wire;

use std::net::TcpListener;

use crate::cli::FabricArgs;
use crate::error::{Error, Result};
use crate::fabric::doc::{FabricDoc, FABRIC_SCHEMA_VERSION};
use crate::fabric::schedule::{Pairs, Schedule};

pub fn run(a: &FabricArgs) -> Result<()> {
    // Everything that needs no device and no other host, checked first.
    let pairs = Pairs::parse(&a.pairs, a.seed).map_err(Error::usage)?;
    if !(a.tolerance.is_finite() && (0.0..=1000.0).contains(&a.tolerance)) {
        return Err(Error::usage(format!(
            "--tolerance {}: must be 0 .. 1000 (percent)",
            a.tolerance
        )));
    }
    let expectations = crate::verdict::parse_fabric("--expect", &a.expect)?;
    let tests = suite::build(a)?;
    let engine = engine::detect(a, &|k| std::env::var(k).ok().filter(|v| !v.is_empty()))?;
    let rendezvous = match engine.rendezvous.clone() {
        Some(r) => r,
        None => mpi_rendezvous(a)?,
    };
    if engine.rank != 0 {
        return worker_only(a, &engine, &rendezvous, &tests);
    }
    crate::output_target::check_out_dir("--out", &a.out)?;
    let listener = TcpListener::bind(("0.0.0.0", a.port))
        .map_err(|e| Error::usage(format!("--port {}: rank 0 cannot listen: {e}", a.port)))?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Error::io(format!("--out {}: creating it", a.out.display()), e))?;
    let doc = FabricDoc {
        schema_version: FABRIC_SCHEMA_VERSION,
        tool: crate::results::TOOL.into(),
        tool_version: env!("RDMA_BENCH_VERSION").into(),
        command_line: std::env::args().collect(),
        started_utc: crate::results::now_utc(),
        engine: engine.kind.into(),
        environment: std::env::var("RDMA_BENCH_ENVIRONMENT")
            .ok()
            .filter(|e| !e.is_empty()),
        pairs: a.pairs.clone(),
        tolerance: a.tolerance / 100.0,
        recheck: a.recheck,
        tests: tests.iter().map(|t| t.doc.clone()).collect(),
        ..Default::default()
    };
    let lines: Vec<String> = tests.iter().map(|t| t.doc.command.clone()).collect();
    if !a.quiet {
        for t in &tests {
            eprintln!(
                "fabric: each pair, both ways: {} = `{}`",
                t.doc.name, t.doc.command
            );
        }
    }
    let plan = coordinator::Plan {
        args: a,
        ranks: engine.ranks,
        tests: &lines,
        measured_s: tests.iter().filter(|t| t.doc.name != "lat").count() as f64 * a.duration
            + a.iters as f64 * 0.01,
    };
    let out = a.out.clone();
    let result = std::thread::scope(|s| {
        // Rank 0 is a host like the others: its own worker joins over TCP.
        let me = s.spawn(|| worker::run(a, 0, engine.ranks, &rendezvous, &tests));
        let done = coordinator::run(
            &plan,
            &listener,
            doc,
            |n| Schedule::new(n, &pairs),
            &verdicts::slow_entries,
            &mut |d| files::write(&out, d),
        );
        let mine = me.join().unwrap_or(Err(Error::Interrupted));
        if let Err(e) = &mine {
            eprintln!("fabric: rank 0's own endpoints: {e}");
        }
        done
    });
    let mut doc = result?;
    verdicts::draw(&mut doc, &expectations);
    files::write(&a.out, &doc)?;
    verdicts::report(&doc, &a.out.display().to_string())
}

mod worker;

fn worker_only(
    a: &FabricArgs,
    e: &engine::Engine,
    rendezvous: &str,
    tests: &[suite::SuiteTest],
) -> Result<()> {
    worker::run(a, e.rank, e.ranks, rendezvous, tests)
}

/// Rank 0's address when only MPI can say it: the mpi feature broadcasts
/// rank 0's host name; without it, `--rendezvous` is needed.
#[cfg(not(feature = "mpi"))]
fn mpi_rendezvous(_a: &FabricArgs) -> Result<String> {
    Err(Error::usage(
        "--rendezvous: needed under mpirun (rank 0's host), unless rdma-bench is built with --features mpi",
    ))
}

#[cfg(feature = "mpi")]
fn mpi_rendezvous(a: &FabricArgs) -> Result<String> {
    crate::cmd::mpi::rank_zero_host().map(|h| format!("{h}:{}", a.port))
}
