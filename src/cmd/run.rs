//! `rdma-bench run bench-configs/X.toml`: every series of an experiment, one
//! connection per series, into one self-describing results file pair.

use std::time::Duration;

use crate::bench::{DeviceChoice, Port};
use crate::cli::RunArgs;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::experiment;
use crate::export::ResultsSink;
use crate::output::Console;

use super::setup::new_doc;

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
    let exp = experiment::load(&args.config)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Error::usage(format!("--out {}: {e}", args.out.display())))?;
    let port = Port::open(&DeviceChoice::from(&args.device))?;
    let clock = Clock::calibrate(Duration::from_millis(20));
    let mut doc = new_doc(args.connect.as_deref(), &port, &clock)?;
    doc.experiment = Some(exp.name.clone());
    let stem = results_stem(
        &exp.name,
        &doc.device.name,
        &doc.host.hostname,
        &doc.started_utc,
    );
    let json = args.out.join(format!("{stem}.json"));
    let csv = args.out.join(format!("{stem}.csv"));
    let sink = ResultsSink::new(Some(json.clone()), Some(csv.clone()));
    let console = Console::new(args.quiet, exp.points() as u64);
    if let Some(d) = &exp.description {
        console.note(&format!("{}: {d}", exp.name));
    }
    let max_inline = doc.device.max_inline;
    for series in &exp.series {
        console.note(&format!("series '{}'", series.label));
        series.plan.announce(&console, port.ctx.name());
        series.plan.execute(
            &port,
            &clock,
            args.connect.as_deref(),
            max_inline,
            Some(&series.label),
            &mut |record| {
                console.record(&record);
                doc.results.push(record);
                sink.write(&doc)
            },
        )?;
    }
    console.finish();
    if !args.quiet {
        println!("# wrote {} and {}", json.display(), csv.display());
    }
    Ok(())
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
