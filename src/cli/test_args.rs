//! The options of the measuring subcommands (read, write, send, echo,
//! atomic), in the groups `--help` shows them in.

use std::path::PathBuf;

use clap::Args;

use super::headings::*;
use super::{CheckArgs, DeviceArgs};
use crate::spec::{AtomicOp, EchoVerb, Offsets, PostApi};

#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Run against `rdma-bench serve` on HOST[:PORT] instead of in loopback.
    #[arg(long, value_name = "HOST[:PORT]", help_heading = CONNECTION)]
    pub connect: Option<String>,
    #[command(flatten, next_help_heading = CONNECTION)]
    pub device: DeviceArgs,
    /// Seconds to wait for the peer before giving up.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true, help_heading = CONNECTION)]
    pub timeout: f64,

    /// Payload sizes in bytes: a list (2,64,1024) or a power-of-two range (2..4096).
    #[arg(short = 's', long, value_name = "SIZES", allow_negative_numbers = true, help_heading = SIZES)]
    pub size: Option<String>,
    /// Every power-of-two size from 2 B to 8 MiB (perftest's -a), instead of --size.
    #[arg(short = 'a', long, conflicts_with = "size", help_heading = SIZES)]
    pub all: bool,
    /// Measured iterations per size (default 10000); throughput: WRs per QP.
    ///
    /// Latency: counted after the warm-up (--warmup).
    #[arg(short = 'n', long, allow_negative_numbers = true, help_heading = SIZES)]
    pub iters: Option<u64>,
    /// Measure each size for this many seconds instead of --iters.
    #[arg(
        short = 'D',
        long,
        value_name = "SECONDS",
        allow_negative_numbers = true,
        help_heading = SIZES
    )]
    pub duration: Option<f64>,
    /// Iterations run before measuring each size, not recorded.
    ///
    /// With -D, also no longer than a fifth of it: a link with long round
    /// trips warms up for fewer (the results' warmup_dropped says how many).
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true, help_heading = SIZES)]
    pub warmup: u64,
    /// Throughput: seconds of warm-up before each point's measured window.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.2,
        allow_negative_numbers = true,
        help_heading = SIZES
    )]
    pub warmup_time: f64,

    /// Transport: rc, uc (write, send, echo) or ud (send).
    ///
    /// Throughput takes a list (rc,uc).
    #[arg(short = 'c', long, default_value = "rc", help_heading = OPERATION)]
    pub transport: String,
    /// Atomic operation.
    #[arg(long, value_enum, help_heading = OPERATION)]
    pub op: Option<AtomicOp>,
    /// write/send: time post-to-completion of a signaled WR, not a ping-pong.
    #[arg(long, help_heading = OPERATION)]
    pub completion: bool,
    /// SEND or WRITE with immediate data.
    #[arg(long, help_heading = OPERATION)]
    pub imm: bool,
    /// Sleep on a completion channel instead of busy polling.
    ///
    /// Latency then includes the wake-up. Applies to send ping-pong,
    /// --completion, read, atomic, and inbound/outbound --tput issuers.
    #[arg(short = 'e', long, help_heading = OPERATION)]
    pub events: bool,
    /// Echo throughput: request verb.
    #[arg(long, value_enum, default_value_t = EchoVerb::Write, help_heading = OPERATION)]
    pub req: EchoVerb,
    /// Echo throughput: response verb.
    #[arg(long, value_enum, default_value_t = EchoVerb::Send, help_heading = OPERATION)]
    pub resp: EchoVerb,

    /// Post payloads inline (WR-INLINE); refused above the QP's real max_inline.
    #[arg(long, help_heading = POSTING)]
    pub inline: bool,
    /// Post inline each payload of at most SIZE bytes, decided per size.
    ///
    /// perftest's -I, --inline_size: `-s 16,256 -I 64` inlines 16 B, not 256 B.
    /// A size it would inline above the device's max_inline is refused (both numbers).
    #[arg(
        short = 'I',
        long = "inline-size",
        visible_alias = "inline_size",
        value_name = "SIZE",
        conflicts_with = "inline",
        allow_negative_numbers = true,
        help_heading = POSTING
    )]
    pub inline_size: Option<i64>,
    /// Throughput: one signaled WR every S (1 = all signaled); a list sweeps.
    ///
    /// -Q is perftest's --cq-mod (perftest's -S is the service level, see --sl).
    #[arg(
        short = 'S',
        visible_short_alias = 'Q',
        long,
        value_name = "S",
        default_value = "64",
        allow_negative_numbers = true,
        help_heading = POSTING
    )]
    pub signal_period: String,
    /// Throughput: WRs chained per ibv_post_send (doorbell batching); a list sweeps.
    ///
    /// perftest's -l, --post_list.
    #[arg(short = 'l', long, default_value = "1", allow_negative_numbers = true, help_heading = POSTING)]
    pub postlist: String,
    /// Throughput: outstanding WRs (echo: requests) per QP; a list sweeps
    /// [default: 128, fewer beyond 128 QPs].
    ///
    /// perftest's -t, --tx-depth. Not given, a point's window is 128 per QP
    /// up to 128 QPs per thread, and beyond that 16384 / QPs (at least the
    /// postlist), so a thread keeps at most 16384 WRs outstanding: at 1024 QPs
    /// a window of 128 would hold 131072 WRs, more than a window of time can
    /// fill on a software device, and its send queues alone would map 68 MiB
    /// (rxe gives a queue of 128 WRs room for 255). The plan says when a
    /// point's window was lowered; the record keeps the window it ran.
    #[arg(short = 't', long, allow_negative_numbers = true, help_heading = POSTING)]
    pub window: Option<String>,
    /// Split each WR's payload over N SGEs (contiguous, near-equal pieces).
    ///
    /// From 1 to the device's max_sge, and at most the size.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true,
        help_heading = POSTING
    )]
    pub sge: u32,
    /// Post with ibv_post_send (classic) or ibv_wr_* on an extended QP (ex).
    #[arg(long, value_enum, value_name = "API", default_value_t = PostApi::Classic, help_heading = POSTING)]
    pub post_api: PostApi,

    /// Traffic class of every QP's path (GRH; DSCP/ECN on RoCE), 0-255.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PATH)]
    pub tclass: Option<i64>,
    /// Service level of every QP's path, 0-15.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PATH)]
    pub sl: Option<i64>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU).
    ///
    /// At most the port's active MTU.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, help_heading = PATH)]
    pub mtu: Option<i64>,
    /// GRH flow label of every QP's path, 0-1048575 (20 bits).
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PATH)]
    pub flow_label: Option<i64>,
    /// Connect the measured QPs with rdma_cm; RC only.
    ///
    /// Address and route resolution, connect/accept, instead of exchanging
    /// GIDs and QP numbers over the control channel.
    #[arg(short = 'R', long, help_heading = PATH)]
    pub cm: bool,

    /// Buffers from 2 MiB huge pages (reserve them in /proc/sys/vm/nr_hugepages).
    #[arg(long, visible_alias = "use_hugepages", help_heading = MEMORY)]
    pub hugepages: bool,
    /// Throughput: one memory registration per QP instead of one per thread.
    #[arg(long, visible_alias = "mr_per_qp", help_heading = MEMORY)]
    pub mr_per_qp: bool,
    /// Throughput (write/read): WRs target slots of a remote region of SIZE bytes.
    ///
    /// Each QP's own region; SIZE takes a k, m or g suffix.
    #[arg(long, value_name = "SIZE", help_heading = MEMORY)]
    pub region: Option<String>,
    /// Throughput: which slot of the --region each WR targets.
    #[arg(long, value_enum, default_value_t = Offsets::Fixed, help_heading = MEMORY)]
    pub offsets: Offsets,

    /// Measure throughput instead of latency: inbound or outbound (echo: no value).
    #[arg(long, value_name = "DIRECTION", num_args = 0..=1, default_missing_value = "", help_heading = SHAPE)]
    pub tput: Option<String>,
    /// Throughput: QPs per thread (and per server thread for outbound); a list sweeps.
    #[arg(short = 'q', long, default_value = "1", allow_negative_numbers = true, help_heading = SHAPE)]
    pub qps: String,
    /// Throughput: issuing threads; a list sweeps.
    #[arg(long, default_value = "1", allow_negative_numbers = true, help_heading = SHAPE)]
    pub threads: String,
    /// Throughput (--tput outbound): both sides issue at once.
    ///
    /// Each side issues to the other's targets; records each direction's
    /// Mops and their sum.
    #[arg(short = 'b', long, help_heading = SHAPE)]
    pub bidirectional: bool,
    /// Throughput: receivers of SENDs post to one shared receive queue per side.
    ///
    /// The receivers are the send sinks, and the echo server with --req send.
    #[arg(long, visible_alias = "use-srq", help_heading = SHAPE)]
    pub srq: bool,
    /// Throughput with --connect: this many client processes start and stop together.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, help_heading = SHAPE)]
    pub group: u32,

    /// Throughput: offered rate of this process's issuers in Mops.
    ///
    /// Split evenly over their threads and QPs (a token bucket per QP).
    #[arg(long, value_name = "MOPS", allow_negative_numbers = true, help_heading = RATE)]
    pub rate: Option<f64>,
    /// With --rate (or --under-load): the rate is per QP, not per process.
    #[arg(long, help_heading = RATE)]
    pub rate_per_qp: bool,
    /// With --rate (or --under-load): WRs added to a QP's bucket per refill.
    ///
    /// Default: --postlist.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = RATE)]
    pub burst: Option<u32>,
    /// Latency under background load: offered loads, e.g. 10%,50%,90%,max.
    ///
    /// Each load is in Mops, a percentage of the saturated rate (measured
    /// first) or max.
    #[arg(long, value_name = "LOADS", allow_hyphen_values = true, help_heading = RATE)]
    pub under_load: Option<String>,

    /// Print a line every SECONDS during each point, 0.05-3600.
    ///
    /// Each line has the ops and Mops (latency: p50/p99); the intervals are
    /// stored in the record.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, help_heading = LIVE)]
    pub interval: Option<f64>,
    /// Run one point until Ctrl-C/SIGTERM (its normal end: exit 0).
    ///
    /// Reports every --interval (default 1 s) and rewrites the results file
    /// after each.
    #[arg(long, visible_alias = "run_infinitely", help_heading = LIVE)]
    pub forever: bool,

    #[command(flatten)]
    pub checks: CheckArgs,

    /// Write results as JSON to FILE (rewritten after every size).
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub json: Option<PathBuf>,
    /// Write results as CSV to FILE (rewritten after every size).
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub csv: Option<PathBuf>,
    /// Write results as a Markdown table to FILE (rewritten after every size).
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub markdown: Option<PathBuf>,
    /// No table and no progress bar.
    #[arg(long, help_heading = OUTPUT)]
    pub quiet: bool,
    /// Throughput: accepted for perftest's --report_gbits; the table is always in Gb/s.
    #[arg(long = "report-gbits", visible_alias = "report_gbits", help_heading = OUTPUT)]
    pub report_gbits: bool,
    /// Accepted for perftest's -F and ignored.
    ///
    /// rdma-bench has no CPU-frequency warning to silence.
    #[arg(short = 'F', long = "cpu-freq", visible_alias = "CPU-freq", help_heading = OUTPUT)]
    pub cpu_freq: bool,

    /// The options given on the command line (clap ids such as `signal_period`),
    /// not defaults: each must apply to the run (see `inapplicable`).
    #[arg(skip)]
    pub given: Vec<String>,
}
