//! rdma-bench: measure RDMA verbs the way perftest does, and more.
//!
//! Layers, bottom up: `verbs` (safe libibverbs wrappers), `connect` (the
//! out-of-band control channel), `bench` (resources, measured loops,
//! sessions), `stats` (numbers from samples), `results` + `export` (files),
//! `output` (what people see), `cli` + `cmd` (the program).
//!
//! `unsafe` is denied crate-wide and allowed in two modules only: `verbs`
//! and `sys` (OS and CPU calls, such as the time-stamp counter).

#![deny(unsafe_code)]

pub mod bench;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod connect;
pub mod device_name;
pub mod error;
pub mod experiment;
pub mod export;
#[cfg(feature = "mpi")]
pub mod mpi_boot;
pub mod output;
pub mod results;
pub mod spec;
pub mod stats;
pub mod sweep;
#[allow(unsafe_code)]
mod sys;
#[allow(unsafe_code)]
pub mod verbs;
