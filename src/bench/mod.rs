//! The benchmarks: the device port, the QP bundle every test builds, the
//! verb table, the measured loops and the sessions that run them point by
//! point. Results come back as plain structs; printing and saving them is
//! `output`'s and `export`'s business.

pub mod cm;
pub mod counters;
pub mod footprint;
pub mod group;
pub mod intervals;
pub mod latency;
pub mod ops;
pub mod pattern;
pub mod port;
pub mod qpset;
pub mod slots;
pub mod tput;
pub mod wait;

pub use footprint::MemoryBudget;
pub use group::Rendezvous;
pub use latency::{run_client, run_client_live, PointOutcome};
pub use port::{DeviceChoice, Port};
pub use tput::{
    run_tput_client, run_tput_client_held, run_tput_client_live, LoadHold, TputOutcome,
};

use crate::clock::Clock;
use crate::connect::{check_version, refuse, unexpected, Control, Message};
use crate::error::Result;
use crate::spec::TestSpec;

/// Serves one client whose `Hello` has been read: checks its protocol
/// version and runs the latency or throughput test it asks for. The one
/// client of a loopback or MPI server is the user, so nothing bounds what
/// it may pin but the host.
pub fn serve_client(
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    hello: Message,
    groups: &Rendezvous,
) -> Result<()> {
    serve_client_within(port, ctl, clock, hello, groups, &MemoryBudget::unlimited())
}

/// As [`serve_client`], refusing a test that would pin more than is left
/// of `budget` (`serve --max-memory`) before it builds anything.
pub fn serve_client_within(
    port: &Port,
    ctl: &mut dyn Control,
    clock: &Clock,
    hello: Message,
    groups: &Rendezvous,
    budget: &MemoryBudget,
) -> Result<()> {
    let Message::Hello {
        version,
        spec,
        endpoint,
        client,
        ..
    } = hello
    else {
        return Err(unexpected(ctl, "hello", &hello));
    };
    if let Err(e) = check_version(&ctl.peer(), version) {
        return Err(refuse(ctl, e));
    }
    match spec {
        TestSpec::Latency(l) => {
            latency::serve_latency(port, ctl, clock, l, endpoint, &client, budget)
        }
        TestSpec::Tput(t) => tput::serve_tput(port, ctl, clock, t, groups, &client, budget),
    }
}
