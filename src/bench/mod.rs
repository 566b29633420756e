//! The benchmarks: per-side resources, the measured loops, and the sessions
//! that run them point by point. Results come back as plain structs; printing
//! and saving them is `output`'s and `export`'s business.

pub mod group;
pub mod latency;
pub mod session;
pub mod side;
pub mod tput;
pub mod tput_session;
pub mod wait;

pub use group::Rendezvous;
pub use session::{run_client, serve_client, PointOutcome};
pub use side::{DeviceChoice, Port};
pub use tput_session::{run_tput_client, TputOutcome};
