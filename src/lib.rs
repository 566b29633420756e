//! rdma-bench: measure RDMA verbs the way perftest does, and more.
//!
//! The layers, bottom up, and the one direction imports go, are in
//! ARCHITECTURE.md (checked by `scripts/check-layers`): `verbs` (safe
//! libibverbs wrappers) and `sys` (CPU and OS calls), `abort`/`clock`, plain
//! data (`spec`, `report`, `stats`, …), `connect` (the control channel),
//! `bench` (the measured loops and their sessions), `results`/`export`/
//! `output`, and `cli` + `cmd` (the program).
//!
//! `unsafe` is denied crate-wide and allowed in two modules only: `verbs`
//! and `sys`.

#![deny(unsafe_code)]

pub mod abort;
pub mod affinity;
pub mod analysis;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod connect;
pub mod cpu_use;
pub mod device_name;
pub mod error;
pub mod escape;
pub mod export;
pub mod fabric;
pub mod input;
pub mod output;
pub mod output_target;
pub mod report;
pub mod results;
pub mod spec;
pub mod stats;
pub mod sweep;
#[allow(unsafe_code)]
mod sys;
#[allow(unsafe_code)]
pub mod verbs;
pub mod verdict;
