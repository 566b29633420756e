//! `rdma-bench run bench-configs/X.toml`: every series of an experiment, one
//! connection per series, into one self-describing results file pair.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use super::experiment;
use crate::bench::{DeviceChoice, Port};
use crate::cli::RunArgs;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::escape::printable;
use crate::export::ResultsSink;
use crate::output::{print_line, Console};
use crate::results::SCHEMA_VERSION;
use crate::verdict::Expectation;

use super::plan::Plan;
use super::setup::{new_doc, plan_cpus};

/// `<experiment>-<device>-<host>-<UTC time>`, safe as a file name.
pub fn results_stem(experiment: &str, device: &str, host: &str, utc: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let compact: String = utc.chars().filter(|c| *c != '-' && *c != ':').collect();
    format!(
        "{}-{}-{}-{}",
        clean(experiment),
        clean(device),
        clean(host),
        compact
    )
}

pub fn run(args: &RunArgs) -> Result<()> {
    run_with(args, "run", &|_| None)
}

/// `run`, with what each series' progress note adds (`profile`: its
/// figure) and the command its progress lines are said by.
pub fn run_with(
    args: &RunArgs,
    command: &str,
    figure_of: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let exp = experiment::load(
        &args.config,
        &experiment::RunContext {
            connect: args.connect.clone(),
        },
    )?;
    let expectations = expectations(args, &exp)?;
    let forever = exp.series.iter().any(|s| s.plan.forever());
    if forever && exp.series.len() > 1 {
        return Err(Error::usage(format!(
            "{}: forever runs one point until stopped, so its experiment has one series (this one has {})",
            args.config.display(),
            exp.series.len()
        )));
    }
    if exp.launcher != experiment::Launcher::Direct {
        // What the printed lines cannot carry is refused, never dropped.
        let d = &args.device;
        let ignored = [
            ("--resume", args.resume.is_some()),
            ("--connect", args.connect.is_some()),
            ("--device", d.device.is_some()),
            ("--gid-index", d.gid_index.is_some()),
            ("--ib-port", d.ib_port != 1),
            ("--cpu", d.cpu.is_some()),
        ];
        if let Some((option, _)) = ignored.iter().find(|(_, given)| *given) {
            return Err(Error::usage(format!(
                "{option}: {} runs under an MPI launcher, so `run` only prints its lines (rank 0 serves); put the option in the file (a series key, or `cpu =`) or on the printed lines",
                args.config.display()
            )));
        }
        crate::output_target::check_out_dir("--out", &args.out)?;
        // A many-host experiment: say exactly how to launch it; start nothing.
        print_line(&format!(
            "# {} runs under an MPI launcher (build with `cargo build --release --features mpi`); one line per series:",
            exp.name
        ))?;
        for line in exp.launch_lines(&args.out, &args.expect) {
            print_line(&line)?;
        }
        return Ok(());
    }
    if let Some(target) = &args.connect {
        super::setup::resolve(target)?;
    }
    // What an interrupted run already measured, checked before any device work.
    let resumed = match &args.resume {
        Some(path) => {
            let doc =
                super::compare::load(path).map_err(|e| Error::usage(format!("--resume: {e}")))?;
            if doc.experiment.as_deref() != Some(exp.name.as_str()) {
                return Err(Error::usage(format!(
                    "--resume {}: holds experiment {:?}, not '{}'",
                    path.display(),
                    doc.experiment.as_deref().unwrap_or("(none)"),
                    exp.name
                )));
            }
            Some((path.clone(), doc))
        }
        None => None,
    };
    // Where results go, checked before anything is created or opened. The
    // --resume file is rewritten by design; the experiment file never is.
    let config = [args.config.as_path()];
    match &args.resume {
        Some(path) => ResultsSink::named(
            ("--resume", Some(path.clone())),
            ("--resume (its CSV)", Some(path.with_extension("csv"))),
        )
        .check_targets(&config)?,
        None => crate::output_target::check_out_dir("--out", &args.out)?,
    }
    // --cpu wins over the file's `cpu =`; either is checked before the device opens.
    match (&args.device.cpu, &exp.cpu) {
        (Some(cpu), _) => super::setup::check_cpus("--cpu", Some(cpu))?,
        (None, file) => super::setup::check_cpus(&format!("{} =", exp.cpu_where), file.as_deref())?,
    }
    if !args.quiet {
        // Which [defaults] each series took, said before anything is opened.
        for (s, (_, left_out)) in exp.series.iter().zip(&expectations) {
            if let Some(note) = s.defaults_note() {
                print_line(&format!("# series '{}': {note}", printable(&s.label)))?;
            }
            for (e, why) in left_out {
                print_line(&format!(
                    "# series '{}': --expect '{}' left out ({why})",
                    printable(&s.label),
                    printable(e)
                ))?;
            }
        }
    }
    let port = Port::open(&DeviceChoice::from(&args.device))?;
    let clock = Clock::calibrate(Duration::from_millis(10))?;
    let (json, mut doc) = match resumed {
        Some((path, mut doc)) => {
            // The resumed file is rewritten in this version's schema.
            doc.schema_version = SCHEMA_VERSION;
            (path, doc)
        }
        None => {
            let mut doc = new_doc(args.connect.as_deref(), &port, &clock)?;
            doc.experiment = Some(exp.name.clone());
            let stem = results_stem(
                &exp.name,
                &doc.device.name,
                &doc.host.hostname,
                &doc.started_utc,
            );
            // Made only now: a run that resumes, or never reaches a
            // device, leaves no directory behind.
            std::fs::create_dir_all(&args.out)
                .map_err(|e| Error::usage(format!("--out {}: {e}", args.out.display())))?;
            (args.out.join(format!("{stem}.json")), doc)
        }
    };
    if doc.device.name != port.ctx.name() {
        return Err(Error::usage(format!(
            "--resume: the file was measured on {}, this run would use {} (give -d {})",
            doc.device.name,
            port.ctx.name(),
            doc.device.name
        )));
    }
    let plans: Vec<(String, Plan, &[Expectation])> = exp
        .series
        .iter()
        .zip(exp.remaining(&doc.results))
        .zip(&expectations)
        .map(|((s, rest), (e, _))| (s.label.clone(), rest, e.as_slice()))
        .collect();
    let csv = json.with_extension("csv");
    let sink = ResultsSink::new(Some(json.clone()), Some(csv.clone()));
    let todo: usize = plans.iter().map(|(_, p, _)| p.points()).sum();
    let planned: usize = exp.series.iter().map(|s| s.plan.points()).sum();
    let progress = super::progress::Progress::new(
        command,
        &plans
            .iter()
            .map(|(label, plan, _)| (label.clone(), figure_of(label), plan))
            .collect::<Vec<_>>(),
        planned.saturating_sub(todo),
        // A terminal has the bar instead.
        !args.quiet && !std::io::stderr().is_terminal(),
    );
    let loopback = args.connect.is_none();
    let (client, server) = plans.iter().fold((1, 0), |(c, s), (_, p, _)| {
        let (pc, ps) = p.threads(loopback);
        (c.max(pc), s.max(ps))
    });
    let mut device = args.device.clone();
    device.cpu = device.cpu.or_else(|| exp.cpu.clone());
    let (affinity, warning) = plan_cpus(&device, &port, client, server)?;
    doc.affinity = Some(affinity);
    let console = Console::new(args.quiet, todo as u64);
    if let Some(w) = warning {
        console.note(&format!("warning: {w}"));
    }
    if let Some(d) = &exp.description {
        console.note(&format!("{}: {}", exp.name, printable(d)));
    }
    if !doc.results.is_empty() {
        console.note(&format!(
            "resuming {}: {} points already measured, {todo} to go",
            json.display(),
            planned.saturating_sub(todo)
        ));
    }
    // The file exists (and parses) from the start, whatever happens next.
    sink.write(&doc)?;
    if forever {
        // Ctrl-C now ends the point (its normal end), not the run.
        crate::abort::end_point_on_signals()
            .map_err(|e| Error::io("installing signal handlers", e))?;
    }
    let result = plans
        .iter()
        .filter(|(_, p, _)| p.points() > 0)
        .try_for_each(|(label, plan, expectations)| {
            let figure = figure_of(label)
                .map(|f| format!(", figure '{f}'"))
                .unwrap_or_default();
            console.note(&format!("series '{}'{figure}", printable(label)));
            plan.announce(&console, port.ctx.name());
            progress.series_starts();
            let live = super::Live::new(&console, plan, Some(label), &sink, &doc);
            let mut keep = super::keep(&console, &mut doc, &sink, expectations);
            plan.execute_live(
                &port,
                &clock,
                args.connect.as_deref(),
                Some(label),
                &|i, f| live.show(i, f),
                None,
                // Between points, after the record is saved: never
                // inside a measured loop.
                &mut |record, peer| {
                    keep(record, peer)?;
                    progress.point_done();
                    Ok(())
                },
            )
        });
    console.finish();
    if !args.quiet || result.is_err() {
        // Best effort: stderr may be closed too.
        let _ = writeln!(
            std::io::stderr(),
            "# {} points in {} and {}",
            doc.results.len(),
            json.display(),
            csv.display()
        );
    }
    result
        .and_then(|()| console.check())
        .and_then(|()| super::verified(&doc))
        .and_then(|()| super::expectations_met(&doc))
}

/// What a series is held to, and the `run --expect` expressions (with why)
/// that it never records.
type SeriesExpectations = (Vec<Expectation>, Vec<(String, String)>);

/// Each series' expectations: `run --expect`'s that it records, then the
/// file's (`[defaults]`' and its own); and the `run --expect` expressions
/// left out of it, with why. An expression no series records is refused,
/// as are malformed ones, before any device opens.
fn expectations(args: &RunArgs, exp: &experiment::Experiment) -> Result<Vec<SeriesExpectations>> {
    let parsed = args
        .expect
        .iter()
        .map(|e| {
            Expectation::parse(e)
                .map_err(|m| Error::usage(format!("--expect '{}': {m}", printable(e.trim()))))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut per_series: Vec<SeriesExpectations> = Vec::new();
    for s in &exp.series {
        let run = super::recorded(&s.plan);
        let (mut kept, mut left_out) = (Vec::new(), Vec::new());
        for e in &parsed {
            match e.recorded_by(&run) {
                Ok(()) => kept.push(e.clone()),
                Err(why) => left_out.push((e.expr.clone(), why)),
            }
        }
        kept.extend(s.expect.iter().cloned());
        per_series.push((kept, left_out));
    }
    for (i, e) in parsed.iter().enumerate() {
        let nowhere = per_series
            .iter()
            .all(|(_, left)| left.iter().any(|(x, _)| *x == e.expr));
        if nowhere && !exp.series.is_empty() {
            // The first series' refusal says why, and which fields it does record.
            let run = super::recorded(&exp.series[0].plan);
            crate::verdict::parse_all("--expect", &args.expect[i..=i], &run)?;
        }
    }
    Ok(per_series)
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_stem_is_file_safe() {
        assert_eq!(
            super::results_stem("herd-fig2", "rxe0", "my host/x", "2026-11-29T10:46:12Z"),
            "herd-fig2-rxe0-my_host_x-20261129T104612Z"
        );
    }
}
