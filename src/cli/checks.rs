//! The options that judge or dump a measuring command's results rather than
//! shape what it measures: `--expect`, `--validate`, `--output`, and the
//! raw-sample dumps (perftest's `-H`, `-U`).

use std::path::PathBuf;

use clap::Args;

use super::headings::{CHECKS, OUTPUT};

/// Defined beside the console that prints it; the option is here.
pub use crate::output::OutputFigure;

#[derive(Debug, Args, Clone, Default)]
pub struct CheckArgs {
    /// Fail (exit 3) when a point misses a limit, e.g. p99<=20us; repeatable.
    ///
    /// The run fails after every file is written. A limit is on a recorded
    /// field, e.g. p99<=20us, mops>=12, gbps>=90, verify_failures==0 (see
    /// "Expectations" in docs/errors.md).
    #[arg(long, value_name = "EXPR", allow_hyphen_values = true, help_heading = CHECKS)]
    pub expect: Vec<String>,
    /// Check every payload where it lands (exit 1 on a corrupt one).
    ///
    /// Puts a pattern unique to each WR (QP, sequence, offset) in every
    /// payload; records `validation`, and exits 1 on a corrupt payload
    /// after the files are written.
    #[arg(long, help_heading = CHECKS)]
    pub validate: bool,
    /// Print exactly one number per point on stdout (everything else on stderr).
    ///
    /// The number is latency (p50, us), bandwidth (Gb/s) or message_rate (Mops).
    #[arg(long, value_enum, value_name = "FIGURE", help_heading = OUTPUT)]
    pub output: Option<OutputFigure>,
    /// Latency: write every sample of each point, sorted, to --samples-file.
    ///
    /// perftest's -H.
    #[arg(
        short = 'H',
        long = "report-histogram",
        visible_alias = "report-histogrm",
        alias = "report_histogram",
        help_heading = OUTPUT
    )]
    pub report_histogram: bool,
    /// Latency: as -H, in the order measured (perftest's -U).
    #[arg(short = 'U', long = "report-unsorted", alias = "report_unsorted", help_heading = OUTPUT)]
    pub report_unsorted: bool,
    /// Where -H/-U write the raw samples; at most 1,000,000 per point.
    ///
    /// Default: beside --json, r.json -> r.samples.tsv.
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub samples_file: Option<PathBuf>,
}
