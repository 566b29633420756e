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
    /// RDMA devices of this host, as a comma list; each is an endpoint of its
    /// own (default: $RDMA_BENCH_DEVICE, else the first with an active port).
    #[arg(short = 'd', long, value_name = "LIST")]
    pub device: Option<String>,
    /// Port of each device (ports are numbered from 1).
    #[arg(short = 'i', long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: u8,
    /// GID index (default: an IPv4-mapped RoCE v2 GID on Ethernet, index 0 on InfiniBand).
    #[arg(short = 'x', long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(0..=255))]
    pub gid_index: Option<u32>,
    /// Which pairs to measure: all (a round-robin tournament), ring (each
    /// endpoint with its neighbours), or random:K (K random partners each).
    #[arg(long, default_value = "all", value_name = "all|ring|random:K")]
    pub pairs: String,
    /// Seed of --pairs random:K, so a run can be repeated.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Which tests each pair runs, both ways: lat (WRITE half-RTT), bw (WRITE
    /// Gb/s at --bw-size), rate (WRITE Mops at --rate-size).
    #[arg(long, default_value = "lat,bw,rate", value_name = "LIST")]
    pub tests: String,
    /// Payload of the latency test, in bytes.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    pub lat_size: u32,
    /// Iterations of the latency test.
    #[arg(
        short = 'n',
        long,
        default_value_t = 1000,
        allow_negative_numbers = true
    )]
    pub iters: u64,
    /// Payload of the bandwidth test, in bytes.
    #[arg(long, default_value_t = 65536, allow_negative_numbers = true)]
    pub bw_size: u32,
    /// Payload of the message-rate test, in bytes.
    #[arg(long, default_value_t = 64, allow_negative_numbers = true)]
    pub rate_size: u32,
    /// Seconds each throughput test measures.
    #[arg(
        short = 'D',
        long,
        default_value_t = 2.0,
        allow_negative_numbers = true
    )]
    pub duration: f64,
    /// A pair is slow when a judged figure is more than PCT percent worse
    /// than the reference (the best quarter of pairs).
    #[arg(
        long,
        default_value_t = 20.0,
        value_name = "PCT",
        allow_negative_numbers = true
    )]
    pub tolerance: f64,
    /// An absolute limit every pair and direction must meet, e.g.
    /// 'lat_p99<=30us' or 'gbps>=90' (fields lat_p50, lat_p99, lat_min, gbps, mops).
    #[arg(long, value_name = "EXPR")]
    pub expect: Vec<String>,
    /// Directory for fabric.json, fabric.csv and matrix-<figure>.csv (rank 0 writes them).
    #[arg(long, default_value = "fabric-results")]
    pub out: PathBuf,
    /// Rank 0's host (and port), where the ranks meet. Default: the first
    /// host of $SLURM_JOB_NODELIST under srun; needed under mpirun.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub rendezvous: Option<String>,
    /// This process's rank, for a launcher that does not say it.
    #[arg(long, requires = "ranks", allow_negative_numbers = true)]
    pub rank: Option<u32>,
    /// How many ranks there are, with --rank.
    #[arg(long, requires = "rank", allow_negative_numbers = true)]
    pub ranks: Option<u32>,
    /// TCP port rank 0 listens on (with --rendezvous HOST without a port).
    #[arg(long, default_value_t = FABRIC_PORT, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// First TCP port of this rank's serve (one port per device).
    #[arg(long, default_value_t = FABRIC_SERVE_PORT, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub serve_port: u16,
    /// Seconds a host may go without answering before it counts as failed;
    /// also each test's --timeout.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true)]
    pub timeout: f64,
    /// No progress lines.
    #[arg(long)]
    pub quiet: bool,
}
