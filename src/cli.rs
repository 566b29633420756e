//! Command-line arguments only: parsing, not behaviour.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod checks;
mod fabric;
mod profile;
mod utf8;

pub use checks::{CheckArgs, OutputFigure};
pub use fabric::{FabricArgs, FABRIC_PORT, FABRIC_SERVE_PORT};
pub use profile::{ProfileArgs, ReportArgs};

use crate::spec::{AtomicOp, EchoVerb, Offsets, PostApi, VerbKind};

/// The default TCP port of `serve` (perftest's).
pub const DEFAULT_PORT: u16 = 18515;

#[derive(Debug, Parser)]
#[command(
    name = "rdma-bench",
    version = env!("RDMA_BENCH_VERSION"),
    about = "Measure RDMA verbs: latency of READ, WRITE, WR-INLINE, SEND, ECHO and atomics",
    after_help = "Without --connect, a test runs in loopback: both sides in this process, on one device, through the real NIC."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every device and port with the capabilities a benchmark cares about.
    Devices(DevicesArgs),
    /// Passive side for two-host runs: serves clients until killed.
    Serve(ServeArgs),
    /// RDMA READ completion latency.
    Read(TestArgs),
    /// RDMA WRITE ping-pong half-RTT (or completion latency with --completion).
    Write(TestArgs),
    /// SEND ping-pong half-RTT (or completion latency with --completion).
    Send(TestArgs),
    /// HERD's ECHO: WRITE a request, the server WRITEs it back; RTT and RTT/2.
    Echo(TestArgs),
    /// Atomic (fetch-and-add or compare-and-swap) completion latency, with verification.
    Atomic(TestArgs),
    /// Run every series of an experiment file (bench-configs/*.toml).
    Run(RunArgs),
    /// Compare result files point by point (e.g. two NIC generations).
    Compare(CompareArgs),
    /// Measure every pair of hosts of a cluster (start one per host with srun or mpirun).
    Fabric(FabricArgs),
    /// Profile a NIC (or a pair of hosts) through the HERD and design-guideline figures, within a time budget.
    Profile(ProfileArgs),
    /// One self-contained HTML page of one or more profiles (or results files), side by side.
    Report(ReportArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions(CompletionsArgs),
    /// Print the JSON Schema of results files on stdout.
    Schema,
    /// Write the man pages into DIR (for packaging).
    #[command(hide = true)]
    Manpage(ManpageArgs),
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
    #[arg(long, value_name = "HOST[:PORT]")]
    pub connect: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Directory for <experiment>-<device>-<host>-<UTC time>.json and .csv.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// No tables and no progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Continue an interrupted run: keep FILE's points, run only the missing
    /// ones, and write into FILE (and the CSV beside it).
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// Expectations every point of every series is held to (as the
    /// measuring commands' --expect; a series' `expect` key adds its own).
    #[arg(long, value_name = "EXPR", allow_hyphen_values = true)]
    pub expect: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Result files; the first is the baseline every ratio divides by.
    #[arg(required = true, num_args = 2..)]
    pub files: Vec<PathBuf>,
    /// Also write the comparison as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the comparison as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the comparison as a Markdown table (to paste into an issue or a paper).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Compare even when the files' run conditions differ (peer mode,
    /// iteration mode, environment, clock source).
    #[arg(long)]
    pub force: bool,
    /// A ratio within this many percent of 1 is "within noise" even where
    /// its 95% interval excludes 1; beyond it, a ratio whose interval
    /// excludes 1 is called better or worse.
    #[arg(long, value_name = "PCT", default_value_t = 5.0,
          value_parser = percent)]
    pub noise: f64,
    /// Fail (exit 3, after the files are written) when a file's ratio to the
    /// first file's misses a limit at a matched point, e.g. ratio.p50<=1.05,
    /// ratio.mops>=0.95 (ratio.FIELD for any --expect field); repeatable.
    #[arg(long, value_name = "EXPR", allow_hyphen_values = true)]
    pub expect: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct DeviceArgs {
    /// RDMA device (default: $RDMA_BENCH_DEVICE, else the first with an active port).
    #[arg(short = 'd', long, value_parser = device_name)]
    pub device: Option<String>,
    /// Port of the device (ports are numbered from 1).
    #[arg(short = 'i', long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: u8,
    /// GID index (default: an IPv4-mapped RoCE v2 GID on Ethernet, index 0 on InfiniBand).
    #[arg(short = 'x', long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(0..=255))]
    pub gid_index: Option<u32>,
    /// CPUs for the measuring threads, e.g. 0,2-3 (default: the device's NUMA
    /// node when sysfs names one, else any; client and server threads apart).
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
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Address to listen on. The default, 0.0.0.0, listens on every interface.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,
    /// TCP port to listen on.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Clients served at the same time; more are refused.
    #[arg(long, default_value_t = 16, allow_negative_numbers = true)]
    pub max_clients: usize,
    /// Seconds a client may stay silent during the handshake.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true)]
    pub timeout: f64,
    /// Bytes all sessions together may register (k, m, g or t suffix); a test
    /// that would take more is refused at its handshake. Default: half the
    /// host's memory, and at most RLIMIT_MEMLOCK without CAP_IPC_LOCK.
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    pub max_memory: Option<String>,
    /// Port of the rdma_cm listener a `--cm` client's session opens (default:
    /// an ephemeral port, announced over the control channel).
    #[arg(long, value_name = "PORT", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub cm_port: Option<u16>,
}

#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Run against `rdma-bench serve` on HOST[:PORT] instead of in loopback.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub connect: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Payload sizes in bytes: a list (2,64,1024) or a power-of-two range (2..4096).
    #[arg(short = 's', long, value_name = "SIZES", allow_negative_numbers = true)]
    pub size: Option<String>,
    /// Every power-of-two size from 2 B to 8 MiB (perftest's -a), instead of --size.
    #[arg(short = 'a', long, conflicts_with = "size")]
    pub all: bool,
    /// Measured iterations per size (after warm-up; default 10000); throughput: WRs per QP.
    #[arg(short = 'n', long, allow_negative_numbers = true)]
    pub iters: Option<u64>,
    /// Measure each size for this many seconds instead of --iters.
    #[arg(
        short = 'D',
        long,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub duration: Option<f64>,
    /// Iterations run before measuring each size, not recorded.
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true)]
    pub warmup: u64,
    /// Post payloads inline (WR-INLINE); refused above the QP's real max_inline.
    #[arg(long)]
    pub inline: bool,
    /// Post inline each payload of at most SIZE bytes, decided per size
    /// (perftest's -I, --inline_size): `-s 16,256 -I 64` inlines 16 B, not 256 B.
    /// A size it would inline above the device's max_inline is refused (both numbers).
    #[arg(
        short = 'I',
        long = "inline-size",
        visible_alias = "inline_size",
        value_name = "SIZE",
        conflicts_with = "inline",
        allow_negative_numbers = true
    )]
    pub inline_size: Option<i64>,
    /// Accepted for perftest's -F and ignored: rdma-bench has no CPU-frequency warning to silence.
    /// Also --CPU-freq.
    #[arg(short = 'F', long = "cpu-freq", visible_alias = "CPU-freq")]
    pub cpu_freq: bool,
    /// Transport: rc, uc (write, send, echo) or ud (send); throughput takes a list (rc,uc).
    #[arg(short = 'c', long, default_value = "rc")]
    pub transport: String,
    /// SEND or WRITE with immediate data.
    #[arg(long)]
    pub imm: bool,
    /// Split each WR's payload over N SGEs (contiguous, near-equal pieces);
    /// 1..=the device's max_sge, at most the size.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub sge: u32,
    /// Sleep on a completion channel instead of busy polling (latency then
    /// includes the wake-up): send ping-pong, --completion, read, atomic, and
    /// inbound/outbound --tput issuers.
    #[arg(short = 'e', long)]
    pub events: bool,
    /// Post with ibv_post_send (classic) or ibv_wr_* on an extended QP (ex).
    #[arg(long, value_enum, value_name = "API", default_value_t = PostApi::Classic)]
    pub post_api: PostApi,
    /// Atomic operation.
    #[arg(long, value_enum)]
    pub op: Option<AtomicOp>,
    /// write/send: time post-to-completion of a signaled WR instead of a ping-pong.
    #[arg(long)]
    pub completion: bool,
    /// Write results as JSON to FILE (rewritten after every size).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write results as CSV to FILE (rewritten after every size).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write results as a Markdown table to FILE (rewritten after every size).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// No table and no progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Seconds to wait for the peer before giving up.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true)]
    pub timeout: f64,
    #[command(flatten)]
    pub checks: CheckArgs,

    /// Measure throughput instead of latency: inbound or outbound (echo: no value).
    #[arg(long, value_name = "DIRECTION", num_args = 0..=1, default_missing_value = "")]
    pub tput: Option<String>,
    /// Throughput: one signaled WR every S (1 = all signaled); a list sweeps.
    /// Also -Q (perftest's --cq-mod; perftest's -S is the service level, see --sl).
    #[arg(
        short = 'S',
        visible_short_alias = 'Q',
        long,
        value_name = "S",
        default_value = "64",
        allow_negative_numbers = true
    )]
    pub signal_period: String,
    /// Throughput: QPs per thread (and per server thread for outbound); a list sweeps.
    #[arg(short = 'q', long, default_value = "1", allow_negative_numbers = true)]
    pub qps: String,
    /// Throughput: WRs chained per ibv_post_send (doorbell batching); a list sweeps
    /// (perftest's -l, --post_list).
    #[arg(short = 'l', long, default_value = "1", allow_negative_numbers = true)]
    pub postlist: String,
    /// Throughput: outstanding WRs (echo: requests) per QP; a list sweeps
    /// (perftest's -t, --tx-depth).
    #[arg(
        short = 't',
        long,
        default_value = "128",
        allow_negative_numbers = true
    )]
    pub window: String,
    /// Throughput: accepted for perftest's --report_gbits; the table is always in Gb/s.
    /// Also --report_gbits.
    #[arg(long = "report-gbits", visible_alias = "report_gbits")]
    pub report_gbits: bool,
    /// Throughput: issuing threads; a list sweeps.
    #[arg(long, default_value = "1", allow_negative_numbers = true)]
    pub threads: String,
    /// Throughput: seconds of warm-up before each point's measured window.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.2,
        allow_negative_numbers = true
    )]
    pub warmup_time: f64,
    /// Echo throughput: request verb.
    #[arg(long, value_enum, default_value_t = EchoVerb::Write)]
    pub req: EchoVerb,
    /// Echo throughput: response verb.
    #[arg(long, value_enum, default_value_t = EchoVerb::Send)]
    pub resp: EchoVerb,
    /// Traffic class of every QP's path (GRH; DSCP/ECN on RoCE), 0-255.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub tclass: Option<i64>,
    /// Service level of every QP's path, 0-15.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub sl: Option<i64>,
    /// GRH flow label of every QP's path, 0-1048575 (20 bits).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub flow_label: Option<i64>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (at most the port's active MTU; default: it).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub mtu: Option<i64>,
    /// Buffers from 2 MiB huge pages (reserve them in /proc/sys/vm/nr_hugepages).
    #[arg(long, visible_alias = "use_hugepages")]
    pub hugepages: bool,
    /// Throughput: one memory registration per QP instead of one per thread.
    #[arg(long, visible_alias = "mr_per_qp")]
    pub mr_per_qp: bool,
    /// Throughput (write/read): each QP's WRs target slots of a remote region of SIZE bytes (k, m, g suffixes).
    #[arg(long, value_name = "SIZE")]
    pub region: Option<String>,
    /// Throughput: which slot of the --region each WR targets.
    #[arg(long, value_enum, default_value_t = Offsets::Fixed)]
    pub offsets: Offsets,
    /// Connect the measured QPs with rdma_cm (address and route resolution,
    /// connect/accept) instead of exchanging GIDs and QP numbers; RC only.
    #[arg(short = 'R', long)]
    pub cm: bool,
    /// Throughput: offered rate of this process's issuers in Mops, split evenly
    /// over their threads and QPs (a token bucket per QP).
    #[arg(long, value_name = "MOPS", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// With --rate (or --under-load): the rate is per QP, not per process.
    #[arg(long)]
    pub rate_per_qp: bool,
    /// With --rate (or --under-load): WRs added to a QP's bucket per refill (default: --postlist).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub burst: Option<u32>,
    /// Latency under background load: offered loads in Mops, percentages of
    /// the saturated rate (measured first) or max, e.g. 10%,50%,90%,max.
    #[arg(long, value_name = "LOADS", allow_hyphen_values = true)]
    pub under_load: Option<String>,
    /// Throughput with --connect: this many client processes start and stop together.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub group: u32,
    /// Throughput (--tput outbound): both sides issue at once, each to the
    /// other's targets; records each direction's Mops and their sum.
    #[arg(short = 'b', long)]
    pub bidirectional: bool,
    /// Throughput: receivers of SENDs (send sinks, the echo server with
    /// --req send) post to one shared receive queue per side.
    #[arg(long, visible_alias = "use-srq")]
    pub srq: bool,
    /// Print a line every SECONDS during each point (ops, Mops; latency: p50/p99)
    /// and store the intervals in the record; 0.05-3600.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub interval: Option<f64>,
    /// Run one point until Ctrl-C/SIGTERM (its normal end: exit 0), reporting every
    /// --interval (default 1 s) and rewriting the results file after each.
    #[arg(long, visible_alias = "run_infinitely")]
    pub forever: bool,
    /// The options given on the command line (clap ids such as `signal_period`),
    /// not defaults: each must apply to the run (see `inapplicable`).
    #[arg(skip)]
    pub given: Vec<String>,
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
