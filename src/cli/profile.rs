//! `rdma-bench profile` and `rdma-bench report`'s options.

use std::path::PathBuf;

use clap::Args;

use super::DeviceArgs;

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rdma-bench profile --budget 10m --out prof-cx6
  rdma-bench profile --connect host2 --out prof-pair --resume    # after an interrupted run
  cp bench-configs/profile.toml my.toml && rdma-bench profile --set my.toml --budget 15m")]
pub struct ProfileArgs {
    /// Run against `rdma-bench serve` on HOST[:PORT] instead of in loopback.
    #[arg(long, value_name = "HOST[:PORT]", help_heading = "Connection")]
    pub connect: Option<String>,
    #[command(flatten, next_help_heading = "Connection")]
    pub device: DeviceArgs,
    /// How long the whole profile may take, e.g. 3m, 90s, 1h (default 10m).
    ///
    /// Split evenly over its figures, then over each figure's points and
    /// their passes (the set's `passes`, default 3), each pass's window
    /// sized to its share; a budget too short is refused with what the set
    /// needs.
    #[arg(long, value_name = "DURATION", help_heading = "Budget and set")]
    pub budget: Option<String>,
    /// The series to measure, an experiment file.
    ///
    /// Default: the built-in set, bench-configs/profile.toml.
    #[arg(long, value_name = "FILE", help_heading = "Budget and set")]
    pub set: Option<PathBuf>,
    /// Directory the plan and the results files go into.
    ///
    /// The plan is profile-plan.toml and profile-plan.json.
    #[arg(long, default_value = "profile", help_heading = "Results")]
    pub out: PathBuf,
    /// Continue the profile in --out where it stopped.
    ///
    /// Its written plan runs again and the points already in its results
    /// file are kept, never measured again; what is left of the plan (and
    /// its estimated time) is printed first, and alone with --dry-run.
    #[arg(long, help_heading = "Results")]
    pub resume: bool,
    /// Print and write the plan, measure nothing.
    #[arg(long, help_heading = "Results")]
    pub dry_run: bool,
    /// No tables, no progress bar and no progress lines.
    #[arg(long, help_heading = "Results")]
    pub quiet: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rdma-bench report prof-cx6 -o cx6.html
  rdma-bench report prof-cx5 prof-cx6 -o cx5-vs-cx6.html     # B/A per headline
  rdma-bench report results/herd-fig3-inbound-*.json -o fig3.html")]
pub struct ReportArgs {
    /// Profiles: each a directory (every results file in it) or one results file.
    ///
    /// With several, the first is the baseline every ratio divides by.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub inputs: Vec<PathBuf>,
    /// The HTML page to write (one self-contained file).
    #[arg(short = 'o', long, value_name = "FILE", help_heading = "Output")]
    pub output: PathBuf,
    /// Name each profile, on the page and in its figures' legends (once per input, in
    /// order; default: device @ host, date).
    #[arg(long, value_name = "TEXT", help_heading = "Output")]
    pub label: Vec<String>,
    /// Report even when the profiles' run conditions differ.
    #[arg(long, help_heading = "Judging")]
    pub force: bool,
    /// A ratio within this many percent of 1 is called "within noise".
    ///
    /// Even where its interval excludes 1.
    #[arg(long, value_name = "PCT", default_value_t = 5.0, value_parser = super::percent, help_heading = "Judging")]
    pub noise: f64,
    /// A step losing more than this many percent is reported as a cliff.
    ///
    /// A step of a swept knob that loses this many percent of throughput
    /// (or adds as much latency).
    #[arg(long, value_name = "PCT", default_value_t = 25.0, value_parser = super::percent, help_heading = "Judging")]
    pub cliff: f64,
    /// A point whose 95% interval is wider than ± PCT of its value is too wide to trust.
    ///
    /// It is reported as such.
    #[arg(long, value_name = "PCT", default_value_t = 10.0, value_parser = super::percent, help_heading = "Judging")]
    pub spread: f64,
    /// Directory of the plotting scripts.
    ///
    /// Default: $RDMA_BENCH_SCRIPTS, the source tree's scripts/ beside the
    /// binary, or /usr/share/rdma-bench/scripts.
    #[arg(long, value_name = "DIR", help_heading = "Drawing")]
    pub scripts: Option<PathBuf>,
}
