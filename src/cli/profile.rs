//! `rdma-bench profile` and `rdma-bench report`'s options.

use std::path::PathBuf;

use clap::Args;

use super::DeviceArgs;

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rdma-bench profile --budget 3m --out prof-cx6
  rdma-bench profile --connect host2 --budget 10m --out prof-pair
  rdma-bench profile --out prof-cx6 --resume          # after an interrupted run
  cp bench-configs/profile.toml my.toml && rdma-bench profile --set my.toml --budget 5m")]
pub struct ProfileArgs {
    /// Run against `rdma-bench serve` on HOST[:PORT] instead of in loopback.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub connect: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// How long the whole profile may take, e.g. 3m, 90s, 1h (default 10m):
    /// split evenly over its figures, then over each figure's points, each
    /// point's window sized to its share.
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// The series to measure, an experiment file (default: the built-in set,
    /// bench-configs/profile.toml).
    #[arg(long, value_name = "FILE")]
    pub set: Option<PathBuf>,
    /// Directory the plan (profile-plan.toml, profile-plan.json) and the
    /// results files go into.
    #[arg(long, default_value = "profile")]
    pub out: PathBuf,
    /// Continue the profile in --out where it stopped: its written plan runs
    /// again and the points already in its results file are kept, never
    /// measured again.
    #[arg(long)]
    pub resume: bool,
    /// Print and write the plan, measure nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No tables and no progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rdma-bench report prof-cx6 -o cx6.html
  rdma-bench report prof-cx5 prof-cx6 -o cx5-vs-cx6.html     # B/A per headline
  rdma-bench report results/herd-fig3-inbound-*.json -o fig3.html")]
pub struct ReportArgs {
    /// Profiles: each a directory (every results file in it) or one results
    /// file. With several, the first is the baseline every ratio divides by.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub inputs: Vec<PathBuf>,
    /// The HTML page to write (one self-contained file).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// Name each profile (once per input, in order; default: device @ host, date).
    #[arg(long, value_name = "TEXT")]
    pub label: Vec<String>,
    /// Report even when the profiles' run conditions differ.
    #[arg(long)]
    pub force: bool,
    /// A ratio within this many percent of 1 is called "within noise" even
    /// where its interval excludes 1.
    #[arg(long, value_name = "PCT", default_value_t = 5.0, value_parser = super::percent)]
    pub noise: f64,
    /// A step of a swept knob losing more than this many percent of
    /// throughput (or adding as much latency) is reported as a cliff.
    #[arg(long, value_name = "PCT", default_value_t = 25.0, value_parser = super::percent)]
    pub cliff: f64,
    /// A point whose 95% interval is wider than ± this many percent of its
    /// value is reported as too wide to trust.
    #[arg(long, value_name = "PCT", default_value_t = 10.0, value_parser = super::percent)]
    pub spread: f64,
    /// Directory of the plotting scripts (default: $RDMA_BENCH_SCRIPTS, the
    /// source tree's scripts/ beside the binary, or /usr/share/rdma-bench/scripts).
    #[arg(long, value_name = "DIR")]
    pub scripts: Option<PathBuf>,
}
