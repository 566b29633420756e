//! What a measuring command writes for scripts besides its results files:
//! `--output`'s one number per point on stdout, and `-H`/`-U`'s file of raw
//! latency samples. Both are checked against the run before any device
//! opens (exit 2, naming the option) where the run cannot give them.

use std::path::PathBuf;

use crate::cli::{OutputFigure, TestArgs};
use crate::error::{Error, Result};
use crate::export::{SampleOrder, SamplesFile};
use crate::stats::RAW_SAMPLES_CAP;

/// `-H` or `-U` as the user spelled its long form, for messages.
fn dump_option(a: &TestArgs) -> &'static str {
    if a.checks.report_histogram {
        "-H/--report-histogram"
    } else {
        "-U/--report-unsorted"
    }
}

fn dumps(a: &TestArgs) -> bool {
    a.checks.report_histogram || a.checks.report_unsorted
}

/// Refuses `--output`, `-H`, `-U` and `--samples-file` where the run cannot
/// honour them.
pub fn check(a: &TestArgs) -> Result<()> {
    let tput = a.tput.is_some() && a.under_load.is_none();
    if let Some(f) = a.checks.output {
        match (f.is_tput(), tput) {
            (true, false) => {
                return Err(Error::usage(format!(
                    "--output {}: a throughput figure, and this is a latency run{} (use --output latency, or measure with --tput)",
                    f.name(),
                    if a.under_load.is_some() { " (--under-load)" } else { "" }
                )))
            }
            (false, true) => {
                return Err(Error::usage(format!(
                    "--output {}: a latency figure, and this is a throughput run (--tput): use --output bandwidth or message_rate",
                    f.name()
                )))
            }
            _ => {}
        }
    }
    if !dumps(a) {
        if a.checks.samples_file.is_some() {
            return Err(Error::usage(
                "--samples-file: needs -H (each point's samples sorted) or -U (in the order measured)",
            ));
        }
        return Ok(());
    }
    let option = dump_option(a);
    if a.checks.report_histogram && a.checks.report_unsorted {
        return Err(Error::usage(
            "-H/--report-histogram and -U/--report-unsorted: choose one (sorted, or in the order measured)",
        ));
    }
    if tput {
        return Err(Error::usage(format!(
            "{option}: applies only to latency runs (throughput has no per-operation samples)"
        )));
    }
    if a.under_load.is_some() {
        return Err(Error::usage(format!(
            "{option}: not with --under-load (its probe points' raw samples are not kept)"
        )));
    }
    if a.forever {
        return Err(Error::usage(format!(
            "{option}: not with --forever (its point keeps whole intervals, not raw samples); use --interval with -n or -D"
        )));
    }
    if a.checks.samples_file.is_none() && a.json.is_none() {
        return Err(Error::usage(format!(
            "{option}: needs --samples-file FILE (or --json FILE, beside which the samples go to FILE's stem + .samples.tsv)"
        )));
    }
    Ok(())
}

/// `-H`/`-U`: the raw samples each point's recorder keeps (0: none): every
/// one up to the cap, no more than an `iters` point measures.
pub fn keep_samples(a: &TestArgs, iters: u64, duration_s: Option<f64>) -> u64 {
    match (dumps(a), duration_s) {
        (false, _) => 0,
        (true, None) => iters.min(RAW_SAMPLES_CAP),
        (true, Some(_)) => RAW_SAMPLES_CAP,
    }
}

/// `-H`/`-U`'s file (checked by `check` first): `--samples-file`, else
/// beside `--json` as `<stem>.samples.tsv`.
pub fn samples_file(a: &TestArgs) -> Option<SamplesFile> {
    if !dumps(a) {
        return None;
    }
    let order = if a.checks.report_histogram {
        SampleOrder::Sorted
    } else {
        SampleOrder::Measured
    };
    match (&a.checks.samples_file, &a.json) {
        (Some(p), _) => Some(SamplesFile::new("--samples-file", p.clone(), order)),
        (None, Some(json)) => Some(SamplesFile::new(
            format!("{} (its samples file, beside --json)", dump_option(a)),
            beside(json),
            order,
        )),
        (None, None) => None,
    }
}

/// `w.json` → `w.samples.tsv`, in the same directory.
fn beside(json: &std::path::Path) -> PathBuf {
    json.with_extension("samples.tsv")
}

/// The figure `--output` prints, if any.
pub fn figure(a: &TestArgs) -> Option<OutputFigure> {
    a.checks.output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_samples_file_sits_beside_the_json() {
        assert_eq!(
            beside(std::path::Path::new("out/w.json")),
            PathBuf::from("out/w.samples.tsv")
        );
        assert_eq!(
            beside(std::path::Path::new("w")),
            PathBuf::from("w.samples.tsv")
        );
    }
}
