//! rdma-bench: measure RDMA verbs the way perftest does, and more.
//!
//! Layers, bottom up: `verbs` (safe libibverbs wrappers; all `unsafe` lives
//! there), `connect` (the out-of-band control channel), `bench` (resources,
//! measured loops, sessions), `stats` (numbers from samples), `results` +
//! `export` (files), `output` (what people see), `cli` + `cmd` (the program).

pub mod bench;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod connect;
pub mod device_name;
pub mod error;
pub mod escape;
pub mod experiment;
pub mod export;
pub mod input;
#[cfg(feature = "mpi")]
pub mod mpi_boot;
pub mod output;
pub mod output_target;
pub mod results;
pub mod spec;
pub mod stats;
pub mod sweep;
pub mod verbs;
