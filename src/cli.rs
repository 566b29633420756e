//! Command-line arguments only: parsing, not behaviour.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod checks;
mod examples;
mod fabric;
mod headings;
mod profile;
mod test_args;
mod utf8;

pub use checks::{CheckArgs, OutputFigure};
pub use fabric::{FabricArgs, FABRIC_PORT, FABRIC_SERVE_PORT};
pub use profile::{ProfileArgs, ReportArgs};
pub use test_args::TestArgs;

use crate::spec::VerbKind;

/// The default TCP port of `serve` (perftest's).
pub const DEFAULT_PORT: u16 = 18515;

#[derive(Debug, Parser)]
#[command(
    name = "rdma-bench",
    version = env!("RDMA_BENCH_VERSION"),
    about = "Measure RDMA verbs: latency of READ, WRITE, WR-INLINE, SEND, ECHO and atomics",
    after_help = examples::TOP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every device and port with the capabilities a benchmark cares about.
    #[command(after_help = examples::DEVICES)]
    Devices(DevicesArgs),
    /// Passive side for two-host runs: serves clients until killed.
    #[command(after_help = examples::SERVE)]
    Serve(ServeArgs),
    /// RDMA READ completion latency.
    #[command(after_help = examples::READ)]
    Read(TestArgs),
    /// RDMA WRITE ping-pong half-RTT (or completion latency with --completion).
    #[command(after_help = examples::WRITE)]
    Write(TestArgs),
    /// SEND ping-pong half-RTT (or completion latency with --completion).
    #[command(after_help = examples::SEND)]
    Send(TestArgs),
    /// HERD's ECHO: WRITE a request, the server WRITEs it back; RTT and RTT/2.
    #[command(after_help = examples::ECHO)]
    Echo(TestArgs),
    /// Atomic (fetch-and-add or compare-and-swap) completion latency, with verification.
    #[command(after_help = examples::ATOMIC)]
    Atomic(TestArgs),
    /// Run every series of an experiment file (bench-configs/*.toml).
    #[command(after_help = examples::RUN)]
    Run(RunArgs),
    /// Compare result files point by point (e.g. two NIC generations).
    #[command(after_help = examples::COMPARE)]
    Compare(CompareArgs),
    /// Measure every pair of hosts of a cluster (start one per host with srun or mpirun).
    Fabric(FabricArgs),
    /// Profile a NIC (or a pair of hosts) through the HERD and design-guideline figures, within a time budget.
    Profile(ProfileArgs),
    /// One self-contained HTML page of one or more profiles (or results files), side by side.
    Report(ReportArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    #[command(after_help = examples::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Print the JSON Schema of results files on stdout.
    #[command(after_help = examples::SCHEMA)]
    Schema,
    /// Write the man pages into DIR (for packaging).
    #[command(hide = true)]
    Manpage(ManpageArgs),
    /// Print the Markdown option reference (docs/reference.md) on stdout.
    #[command(hide = true)]
    ReferenceMd,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Directory the pages are written into (rdma-bench.1, rdma-bench-<sub>.1).
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The experiment file.
    pub config: PathBuf,
    /// Run against `rdma-bench serve` on HOST[:PORT] instead of in loopback.
    #[arg(long, value_name = "HOST[:PORT]", help_heading = "Connection")]
    pub connect: Option<String>,
    #[command(flatten, next_help_heading = "Connection")]
    pub device: DeviceArgs,
    /// Directory for <experiment>-<device>-<host>-<UTC time>.json and .csv.
    #[arg(long, default_value = "results", help_heading = "Results")]
    pub out: PathBuf,
    /// No tables, no progress bar and no progress lines.
    #[arg(long, help_heading = "Results")]
    pub quiet: bool,
    /// Continue an interrupted run: keep FILE's points, run only the missing ones.
    ///
    /// The run writes into FILE (and the CSV beside it).
    #[arg(long, value_name = "FILE", help_heading = "Results")]
    pub resume: Option<PathBuf>,
    /// Expectations every point of every series is held to; repeatable.
    ///
    /// As the measuring commands' --expect; a series' `expect` key adds its own.
    #[arg(
        long,
        value_name = "EXPR",
        allow_hyphen_values = true,
        help_heading = "Checks"
    )]
    pub expect: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Result files; the first is the baseline every ratio divides by.
    #[arg(required = true, num_args = 2..)]
    pub files: Vec<PathBuf>,
    /// Also write the comparison as CSV.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub csv: Option<PathBuf>,
    /// Also write the comparison as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// Also write the comparison as a Markdown table (to paste into an issue or a paper).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub markdown: Option<PathBuf>,
    /// Compare even when the files' run conditions differ.
    ///
    /// The conditions are the peer mode, iteration mode, environment and
    /// clock source.
    #[arg(long, help_heading = "Judging")]
    pub force: bool,
    /// A ratio within this many percent of 1 is "within noise".
    ///
    /// Even where its 95% interval excludes 1; beyond it, a ratio whose
    /// interval excludes 1 is called better or worse.
    #[arg(long, value_name = "PCT", default_value_t = 5.0,
          value_parser = percent, help_heading = "Judging")]
    pub noise: f64,
    /// Fail (exit 3) when a ratio to the first file misses a limit; repeatable.
    ///
    /// Checked at every matched point after the files are written, e.g.
    /// ratio.p50<=1.05, ratio.mops>=0.95 (ratio.FIELD for any --expect field).
    #[arg(
        long,
        value_name = "EXPR",
        allow_hyphen_values = true,
        help_heading = "Judging"
    )]
    pub expect: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct DeviceArgs {
    /// RDMA device (default: $RDMA_BENCH_DEVICE, else the first active one).
    ///
    /// The first device with an active port, when $RDMA_BENCH_DEVICE is not set.
    #[arg(short = 'd', long, value_parser = device_name)]
    pub device: Option<String>,
    /// Port of the device (ports are numbered from 1).
    #[arg(short = 'i', long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: u8,
    /// GID index, 0-255.
    ///
    /// Default: an IPv4-mapped RoCE v2 GID on Ethernet, index 0 on InfiniBand.
    #[arg(short = 'x', long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(0..=255))]
    pub gid_index: Option<u32>,
    /// CPUs for the measuring threads, e.g. 0,2-3.
    ///
    /// Default: the device's NUMA node when sysfs names one, else any;
    /// client and server threads apart.
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpu: Option<std::vec::Vec<usize>>,
}

/// A percentage from 0 to 1000.
pub fn percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=1000.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}': a percentage from 0 to 1000")),
    }
}

fn cpu_list(s: &str) -> Result<Vec<usize>, String> {
    crate::affinity::parse_cpu_list(s)
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten, next_help_heading = "Device")]
    pub device: DeviceArgs,
    /// Address to listen on; 0.0.0.0 is every interface.
    #[arg(long, default_value = "0.0.0.0", help_heading = "Listening")]
    pub bind: String,
    /// TCP port to listen on.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..), help_heading = "Listening")]
    pub port: u16,
    /// Clients served at the same time; more are refused.
    #[arg(
        long,
        default_value_t = 16,
        allow_negative_numbers = true,
        help_heading = "Limits"
    )]
    pub max_clients: usize,
    /// Seconds a client may stay silent during the handshake.
    #[arg(
        long,
        default_value_t = 30.0,
        allow_negative_numbers = true,
        help_heading = "Listening"
    )]
    pub timeout: f64,
    /// Bytes all sessions together may register (k, m, g or t suffix).
    ///
    /// A test that would take more is refused at its handshake. Default:
    /// half the host's memory, and at most RLIMIT_MEMLOCK without CAP_IPC_LOCK.
    #[arg(
        long,
        value_name = "SIZE",
        allow_negative_numbers = true,
        help_heading = "Limits"
    )]
    pub max_memory: Option<String>,
    /// Port of the rdma_cm listener a `--cm` client's session opens.
    ///
    /// Default: an ephemeral port, announced over the control channel. The
    /// listener is bound to the address the client reached `serve` at when
    /// that is an address of the device, else to every IPv4 address.
    #[arg(long, value_name = "PORT", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..), help_heading = "Listening")]
    pub cm_port: Option<u16>,
}

/// `-d`: a device name as the kernel spells them (at most 64 printable
/// characters, no `/`), refused here rather than looked up.
fn device_name(s: &str) -> Result<String, String> {
    match crate::device_name::refusal(s) {
        Some(why) => Err(why.into()),
        None => Ok(s.to_string()),
    }
}

impl Command {
    /// The verb a measuring subcommand measures, and its arguments (the one
    /// place that maps subcommands to verbs).
    pub fn measurement(&self) -> Option<(VerbKind, &TestArgs)> {
        Some(match self {
            Command::Read(a) => (VerbKind::Read, a),
            Command::Write(a) => (VerbKind::Write, a),
            Command::Send(a) => (VerbKind::Send, a),
            Command::Echo(a) => (VerbKind::Echo, a),
            Command::Atomic(a) => (VerbKind::Atomic, a),
            _ => return None,
        })
    }

    fn measurement_args_mut(&mut self) -> Option<&mut TestArgs> {
        match self {
            Command::Read(a)
            | Command::Write(a)
            | Command::Send(a)
            | Command::Echo(a)
            | Command::Atomic(a) => Some(a),
            _ => None,
        }
    }
}

/// Parses a command line, and records in the measuring commands' `given`
/// which options the user gave (clap's value source, not defaults).
pub fn parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let cmd = command();
    let matches = match cmd.clone().try_get_matches_from(&argv) {
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidUtf8 => {
            return Err(match utf8::invalid_utf8(&cmd, &argv) {
                Some(msg) => clap::Error::raw(clap::error::ErrorKind::InvalidUtf8, msg),
                None => e,
            })
        }
        other => other?,
    };
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let (Some((_, sub)), Some(a)) = (matches.subcommand(), cli.command.measurement_args_mut()) {
        a.given = given(sub);
    }
    Ok(cli)
}

/// The command tree every parse and every generated page uses. Each
/// value-taking argument accepts a value that looks like a negative number,
/// so `--region -1` is refused by `--region`'s own parser, naming it, rather
/// than as an "unexpected argument '-1'" (flags are unaffected: clap only
/// applies this to tokens that parse as numbers).
pub fn command() -> clap::Command {
    fn negatives(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(negatives)
    }
    negatives(Cli::command())
}

fn given(m: &ArgMatches) -> Vec<String> {
    m.ids()
        .map(|id| id.as_str())
        .filter(|id| m.try_contains_id(id).unwrap_or(false))
        .filter(|id| matches!(m.value_source(id), Some(ValueSource::CommandLine)))
        .map(str::to_string)
        .collect()
}

/// Where an option of the measuring commands applies, when it does not
/// apply to this run (`id` is clap's id, `signal_period` for
/// `--signal-period`): "--window applies only with --tput".
pub fn inapplicable(id: &str, verb: VerbKind, tput: bool) -> Option<&'static str> {
    use VerbKind::*;
    let write_or_send = matches!(verb, Write | Send);
    match id {
        "rate" if !tput => Some("with --tput (--under-load sets its own rates)"),
        "rate_per_qp" | "burst" if !tput => Some("with --tput or --under-load"),
        "signal_period" | "qps" | "postlist" | "window" | "threads" | "warmup_time" | "group"
        | "bidirectional" | "srq" | "report_gbits"
            if !tput =>
        {
            Some("with --tput")
        }
        "warmup" if tput => Some("without --tput (throughput warms up for --warmup-time)"),
        "completion" if tput || !write_or_send => Some("to write and send latency runs"),
        "req" | "resp" if !(tput && verb == Echo) => Some("with echo --tput"),
        "op" if verb != Atomic => Some("to atomic"),
        "imm" if tput && verb != Send => Some("to send with --tput"),
        "imm" if !write_or_send => Some("to write and send"),
        "inline" | "inline_size" if matches!(verb, Read | Atomic) => {
            Some("to write, send and echo")
        }
        "all" if verb == Atomic => Some("to read, write, send and echo (atomics are 8 bytes)"),
        "sge" if matches!(verb, Echo | Atomic) => Some("to write, send and read"),
        "events" if verb == Echo && !tput => Some(
            "to echo --tput (--req send --resp send) and to latency runs of write --completion, send, read and atomic",
        ),
        "mr_per_qp" | "region" | "offsets" if !tput => Some("with --tput"),
        _ => None,
    }
}

/// Why an option does not apply to an `--under-load` run, where the probe
/// takes the latency options and the background the throughput ones.
pub fn inapplicable_under_load(id: &str, verb: VerbKind) -> Option<&'static str> {
    match id {
        "tput" => Some("the background is its own throughput run (drop --tput)"),
        "rate" | "rate_per_qp" => Some("the loads give the background process's rates"),
        "group" | "req" | "resp" => Some("the background is one inbound issuer"),
        _ if inapplicable(id, verb, false).is_none() || inapplicable(id, verb, true).is_none() => {
            None
        }
        _ => Some("to neither the probe nor the background"),
    }
}

/// A clap error in one line: what is wrong, naming the option and the
/// argument names (a missing argument keeps its `<NAME>`), without the usage.
pub fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut out = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    if out.is_empty() {
        "error: bad arguments".into()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    /// Every value-taking argument of every subcommand takes a negative
    /// number as its value, so its own parser names it when refusing one.
    #[test]
    fn every_value_taking_argument_accepts_negative_numbers() {
        fn walk(cmd: &clap::Command) {
            for a in cmd.get_arguments() {
                if a.get_action().takes_values() {
                    assert!(
                        a.is_allow_negative_numbers_set(),
                        "{} --{:?}",
                        cmd.get_name(),
                        a.get_long()
                    );
                }
            }
            cmd.get_subcommands().for_each(walk);
        }
        walk(&super::command());
    }
}
