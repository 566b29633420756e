//! `rdma-bench fabric`'s options.

use std::path::PathBuf;

use clap::Args;

/// The TCP port rank 0 listens on for the other ranks.
pub const FABRIC_PORT: u16 = 18516;
/// The first TCP port of each rank's `serve` (one per device).
pub const FABRIC_SERVE_PORT: u16 = 18517;

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:
  srun -N 64 --ntasks-per-node=1 rdma-bench fabric --out fabric-$SLURM_JOB_ID
  sbatch -N 64 scripts/fabric.sbatch --expect 'lat_p99<=30us' --expect 'gbps>=90'
  mpirun -np 3 --host h1,h2,h3 rdma-bench fabric --rendezvous h1 --pairs ring

Exit status: 0 every pair measured, none slow, every --expect held; 1 a host or
a pair failed (the others are still measured and written); 3 an --expect limit
failed; 4 slow pairs were found. When several apply, 1 wins over 3, 3 over 4.")]
pub struct FabricArgs {
    /// RDMA devices of this host, as a comma list; each is an endpoint of its own.
    ///
    /// Default: $RDMA_BENCH_DEVICE, else the first with an active port.
    #[arg(short = 'd', long, value_name = "LIST", help_heading = "Device")]
    pub device: Option<String>,
    /// Port of each device (ports are numbered from 1).
    #[arg(short = 'i', long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u8).range(1..),
          help_heading = "Device"
    )]
    pub ib_port: u8,
    /// GID index, 0-255.
    ///
    /// Default: an IPv4-mapped RoCE v2 GID on Ethernet, index 0 on InfiniBand.
    #[arg(short = 'x', long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(0..=255),
          help_heading = "Device"
    )]
    pub gid_index: Option<u32>,
    /// Which pairs to measure: all, ring or random:K.
    ///
    /// all is a round-robin tournament, ring each endpoint with its
    /// neighbours, random:K K random partners each.
    #[arg(
        long,
        default_value = "all",
        value_name = "all|ring|random:K",
        help_heading = "Pairs and tests"
    )]
    pub pairs: String,
    /// Seed of --pairs random:K, so a run can be repeated.
    #[arg(long, default_value_t = 1, help_heading = "Pairs and tests")]
    pub seed: u64,
    /// Which tests each pair runs, both ways: lat, bw, rate.
    ///
    /// lat is the WRITE half-RTT, bw WRITE Gb/s at --bw-size, rate WRITE Mops
    /// at --rate-size.
    #[arg(
        long,
        default_value = "lat,bw,rate",
        value_name = "LIST",
        help_heading = "Pairs and tests"
    )]
    pub tests: String,
    /// Payload of the latency test, in bytes.
    #[arg(
        long,
        default_value_t = 8,
        allow_negative_numbers = true,
        help_heading = "Pairs and tests"
    )]
    pub lat_size: u32,
    /// Iterations of the latency test.
    #[arg(
        short = 'n',
        long,
        default_value_t = 1000,
        allow_negative_numbers = true,
        help_heading = "Pairs and tests"
    )]
    pub iters: u64,
    /// Payload of the bandwidth test, in bytes.
    #[arg(
        long,
        default_value_t = 65536,
        allow_negative_numbers = true,
        help_heading = "Pairs and tests"
    )]
    pub bw_size: u32,
    /// Payload of the message-rate test, in bytes.
    #[arg(
        long,
        default_value_t = 64,
        allow_negative_numbers = true,
        help_heading = "Pairs and tests"
    )]
    pub rate_size: u32,
    /// Seconds each throughput test measures.
    #[arg(
        short = 'D',
        long,
        default_value_t = 2.0,
        allow_negative_numbers = true,
        help_heading = "Pairs and tests"
    )]
    pub duration: f64,
    /// A pair is slow when a figure is more than PCT percent worse than the reference.
    ///
    /// The reference is the best quarter of pairs.
    #[arg(
        long,
        default_value_t = 20.0,
        value_name = "PCT",
        allow_negative_numbers = true,
        help_heading = "Judging"
    )]
    pub tolerance: f64,
    /// Measure a slow pair again, up to N more times, before calling it slow.
    ///
    /// Each figure is then the best of the pair's attempts, so a fault that
    /// persists is slow in every attempt while a pause of a host (a busy
    /// hypervisor, a daemon waking) is not; pairs that were slow only at first
    /// are listed as transient. 0 judges the first measurement alone.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(0..=5),
        help_heading = "Judging"
    )]
    pub recheck: u32,
    /// An absolute limit every pair and direction must meet, e.g. 'gbps>=90'.
    ///
    /// Fields: lat_p50, lat_p99, lat_min, gbps, mops, e.g. 'lat_p99<=30us'.
    #[arg(long, value_name = "EXPR", help_heading = "Judging")]
    pub expect: Vec<String>,
    /// Directory for fabric.json, fabric.csv and matrix-<figure>.csv.
    ///
    /// Rank 0 writes them.
    #[arg(long, default_value = "fabric-results", help_heading = "Output")]
    pub out: PathBuf,
    /// Rank 0's host (and port), where the ranks meet.
    ///
    /// Default: the first host of $SLURM_JOB_NODELIST under srun; needed
    /// under mpirun.
    #[arg(long, value_name = "HOST[:PORT]", help_heading = "Ranks")]
    pub rendezvous: Option<String>,
    /// This process's rank, for a launcher that does not say it.
    #[arg(
        long,
        requires = "ranks",
        allow_negative_numbers = true,
        help_heading = "Ranks"
    )]
    pub rank: Option<u32>,
    /// How many ranks there are, with --rank.
    #[arg(
        long,
        requires = "rank",
        allow_negative_numbers = true,
        help_heading = "Ranks"
    )]
    pub ranks: Option<u32>,
    /// TCP port rank 0 listens on.
    ///
    /// Used with a --rendezvous HOST without a port.
    #[arg(long, default_value_t = FABRIC_PORT, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..),
          help_heading = "Ranks"
    )]
    pub port: u16,
    /// First TCP port of this rank's serve (one port per device).
    #[arg(long, default_value_t = FABRIC_SERVE_PORT, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..),
          help_heading = "Ranks"
    )]
    pub serve_port: u16,
    /// Seconds a host may go without answering before it counts as failed.
    ///
    /// Also each test's --timeout.
    #[arg(
        long,
        default_value_t = 30.0,
        allow_negative_numbers = true,
        help_heading = "Ranks"
    )]
    pub timeout: f64,
    /// No progress lines.
    #[arg(long, help_heading = "Output")]
    pub quiet: bool,
}
