//! The options that judge or dump a measuring command's results rather than
//! shape what it measures: `--expect`, `--validate`, `--output`, and the
//! raw-sample dumps (perftest's `-H`, `-U`).

use std::path::PathBuf;

use clap::Args;

/// Defined beside the console that prints it; the option is here.
pub use crate::output::OutputFigure;

#[derive(Debug, Args, Clone, Default)]
pub struct CheckArgs {
    /// Fail the run (exit 3, after every file is written) when a point's
    /// recorded field misses a limit, e.g. p99<=20us, mops>=12, gbps>=90,
    /// verify_failures==0; repeatable (see "Expectations" in the README).
    #[arg(long, value_name = "EXPR", allow_hyphen_values = true)]
    pub expect: Vec<String>,
    /// Put a pattern unique to each WR (QP, sequence, offset) in every
    /// payload and check it where it lands; records `validation`, exits 1 on
    /// a corrupt payload after the files are written.
    #[arg(long)]
    pub validate: bool,
    /// Print exactly one number per point on stdout (everything else goes
    /// to stderr): latency (p50, us), bandwidth (Gb/s) or message_rate (Mops).
    #[arg(long, value_enum, value_name = "FIGURE")]
    pub output: Option<OutputFigure>,
    /// Latency: write every sample of each point, sorted, to --samples-file
    /// (perftest's -H; also --report-histogrm).
    #[arg(
        short = 'H',
        long = "report-histogram",
        visible_alias = "report-histogrm",
        alias = "report_histogram"
    )]
    pub report_histogram: bool,
    /// Latency: as -H, in the order measured (perftest's -U).
    #[arg(short = 'U', long = "report-unsorted", alias = "report_unsorted")]
    pub report_unsorted: bool,
    /// Where -H/-U write the raw samples (default: beside --json,
    /// r.json -> r.samples.tsv); at most 1,000,000 per point.
    #[arg(long, value_name = "FILE")]
    pub samples_file: Option<PathBuf>,
}
