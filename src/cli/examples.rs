//! The examples each subcommand's help ends with. `tests/reference.rs`
//! parses every `rdma-bench ...` line here as the binary would (and builds
//! a measuring example's plan), so an example that stops working fails it.

pub const TOP: &str = "Without --connect, a test runs in loopback: both sides in this process, on one device, through the real NIC.

Examples:
  rdma-bench devices
  rdma-bench write -s 2..4096
  rdma-bench write --connect host2 --tput outbound -s 64 -q 4";

pub const DEVICES: &str = "Examples:
  rdma-bench devices
  rdma-bench devices --json";

pub const SERVE: &str = "Examples:
  rdma-bench serve
  rdma-bench serve -d mlx5_0 -p 18600 --max-clients 4
  rdma-bench serve --bind 10.0.0.2 --max-memory 8g --timeout 10";

pub const READ: &str = "Examples:
  rdma-bench read -s 2..4096
  rdma-bench read --connect host2 -d mlx5_0 -a --json read.json
  rdma-bench read --tput outbound -s 64 -q 4 --threads 2 -D 5";

pub const WRITE: &str = "Examples:
  rdma-bench write -s 64 -n 100000 --expect 'p99<=5us'
  rdma-bench write --connect host2 --tput inbound -s 4096 -S 1,16,64 --region 1g --offsets random
  rdma-bench write --connect host2 -s 64 --under-load 10%,50%,max";

pub const SEND: &str = "Examples:
  rdma-bench send -c ud -s 64
  rdma-bench send --completion --events -s 2..1024
  rdma-bench send --connect host2 --tput inbound --srq -q 8";

pub const ECHO: &str = "Examples:
  rdma-bench echo -s 32 --validate
  rdma-bench echo --connect host2 --tput -c ud --req send --resp send -t 16";

pub const ATOMIC: &str = "Examples:
  rdma-bench atomic --op cas -n 100000
  rdma-bench atomic --op fadd --tput inbound -q 4 --interval 1";

pub const RUN: &str = "Examples:
  rdma-bench run bench-configs/smoke.toml
  rdma-bench run bench-configs/herd-fig2-latency.toml --connect host2 --expect 'p99<=10us'
  rdma-bench run bench-configs/smoke.toml --resume results/smoke-mlx5_0-host1-20260101T120000Z.json";

pub const COMPARE: &str = "Examples:
  rdma-bench compare cx5.json cx6.json
  rdma-bench compare cx5.json cx6.json --markdown cx5-vs-cx6.md
  rdma-bench compare before.json after.json --expect 'ratio.p50<=1.05' --noise 3";

pub const COMPLETIONS: &str = "Examples:
  rdma-bench completions bash > /etc/bash_completion.d/rdma-bench
  rdma-bench completions zsh > ~/.zfunc/_rdma-bench
  rdma-bench completions fish > ~/.config/fish/completions/rdma-bench.fish";

pub const SCHEMA: &str = "Examples:
  rdma-bench schema > results.schema.json
  rdma-bench schema | python3 -m json.tool";
