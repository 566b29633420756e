//! Running under `mpirun`/`srun` (cargo feature `mpi`): rank 0 is the server,
//! every other rank a client, and the control messages that otherwise cross
//! TCP travel as MPI messages instead. Rank 0's main thread owns MPI (thread
//! level "funneled") and routes messages between the ranks and one server
//! thread per client; the server threads run exactly the code `serve` runs.
//! All clients form one group, so each point starts and stops on all of them
//! together, and rank 0 writes the one results file with every rank's figure.

use std::time::{Duration, Instant};

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::plan::Plan;
use super::setup::new_doc;
use crate::abort::aborted;
use crate::bench::{run_tput_client, DeviceChoice, Port, Rendezvous};
use crate::cli::TestArgs;
use crate::clock::Clock;
use crate::connect::{local_pair_named, Control, LocalChannel, Message};
use crate::error::{Error, Result};
use crate::export::ResultsSink;
use crate::output::Console;
use crate::results::{Record, ResultsDoc};
use crate::spec::VerbKind;

const TAG_CONTROL: i32 = 1;
const TAG_WHOAMI: i32 = 2;
const TAG_RESULTS: i32 = 3;

/// Whether this process was started by an MPI launcher.
pub fn launched() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// A client rank's control channel to rank 0.
struct ToRankZero<'a> {
    world: &'a SimpleCommunicator,
}

impl Control for ToRankZero<'_> {
    fn send(&mut self, msg: &Message) -> Result<()> {
        let bytes = serde_json::to_vec(msg).expect("messages serialise");
        self.world
            .process_at_rank(0)
            .send_with_tag(&bytes[..], TAG_CONTROL);
        Ok(())
    }

    fn recv(&mut self, timeout: Duration) -> Result<Message> {
        let deadline = Instant::now() + timeout;
        let zero = self.world.process_at_rank(0);
        loop {
            if zero.immediate_probe_with_tag(TAG_CONTROL).is_some() {
                let (bytes, _) = zero.receive_vec_with_tag::<u8>(TAG_CONTROL);
                return serde_json::from_slice(&bytes).map_err(|e| Error::Peer {
                    peer: "rank 0".into(),
                    what: format!("malformed message: {e}"),
                });
            }
            if aborted() {
                return Err(Error::Interrupted);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "rank 0".into(),
                    secs: timeout.as_secs_f64(),
                });
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    fn peer(&self) -> String {
        "rank 0".into()
    }
}

/// `rdma-bench <verb> --tput ...` under an MPI launcher.
pub fn run(verb: VerbKind, args: &TestArgs) -> Result<()> {
    let plan = Plan::from_args(verb, args)?;
    let expectations = super::expectations("--expect", &args.checks.expect, &plan)?;
    let Plan::Tput(mut spec, _) = plan else {
        return Err(Error::usage(
            "under mpirun, run throughput tests (--tput): rank 0 serves, the other ranks are clients",
        ));
    };
    if args.connect.is_some() {
        return Err(Error::usage(
            "--connect: under mpirun, rank 0 is the server",
        ));
    }
    if args.cm {
        return Err(Error::usage(
            "--cm: under mpirun the ranks have no IP control channel to learn rank 0's address from; run --cm with serve/--connect",
        ));
    }
    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| Error::usage("MPI was already initialised"))?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        return Err(Error::usage(format!(
            "mpirun -np {size}: need at least 2 ranks (rank 0 serves, the rest are clients)"
        )));
    }
    // Every client rank is in the one group: points start and stop together.
    spec.group = (size - 1) as u32;
    // What depends on the group (--bidirectional, --forever) is checked again.
    spec.validate()?;
    let port = Port::open(&DeviceChoice::from(&args.device))?;
    let clock = Clock::calibrate(Duration::from_millis(10))?;
    let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".into());
    world.barrier();
    if rank != 0 {
        let me = format!("rank {rank} on {host} ({})", port.ctx.name());
        world
            .process_at_rank(0)
            .send_with_tag(me.as_bytes(), TAG_WHOAMI);
        let mut doc = new_doc(Some("mpi rank 0"), &port, &clock)?;
        doc.peer.mode = "mpi".into();
        let mut ctl = ToRankZero { world: &world };
        let result = run_tput_client(&spec, &port, &mut ctl, &clock, |o| {
            doc.peer.note(&o.peer);
            doc.results
                .push(Record::Throughput(super::tput::record(&spec, &o)));
            Ok(())
        });
        // Rank 0 writes the file: hand it what this rank measured (even after a failure).
        let bytes = serde_json::to_vec(&doc).expect("results serialise");
        world
            .process_at_rank(0)
            .send_with_tag(&bytes[..], TAG_RESULTS);
        world.barrier();
        return result;
    }
    let result = serve_ranks(&world, size, &port, &clock);
    // Every client's results, then the file.
    let mut docs = Vec::new();
    for r in 1..size {
        let (bytes, _) = world
            .process_at_rank(r)
            .receive_vec_with_tag::<u8>(TAG_RESULTS);
        docs.push(
            serde_json::from_slice::<ResultsDoc>(&bytes).map_err(|e| Error::Peer {
                peer: format!("rank {r}"),
                what: format!("malformed results: {e}"),
            })?,
        );
    }
    world.barrier();
    result?;
    // Rank 1's records carry every rank's figure and the aggregate (the group
    // exchange at each stop), so its document is the run's document.
    let mut doc = docs.into_iter().next().expect("at least one client rank");
    doc.peer = crate::results::PeerDoc {
        mode: "mpi".into(),
        address: Some(format!("rank 0 serving {} client ranks", size - 1)),
        // Rank 0's own host and device, as its handshake told rank 1.
        ..doc.peer
    };
    doc.command_line = std::env::args().collect();
    doc.note_peak_rss();
    let console = Console::new(args.quiet, 0).with_figure(args.checks.output);
    console.tput_header(&spec, port.ctx.name());
    for r in &mut doc.results {
        let failed = crate::verdict::judge_record(&expectations, r);
        console.record(r);
        for f in &failed {
            console.expectation_failed(f);
        }
    }
    ResultsSink::new(args.json.clone(), args.csv.clone())
        .with_markdown("--markdown", args.markdown.clone())
        .write(&doc)?;
    super::verified(&doc).and_then(|()| super::expectations_met(&doc))
}

/// Rank 0: one server thread per client rank, and this thread routing their
/// control messages to and from MPI until every client has said bye.
fn serve_ranks(world: &SimpleCommunicator, size: i32, port: &Port, clock: &Clock) -> Result<()> {
    let groups = Rendezvous::default();
    let mut routes: Vec<(i32, LocalChannel)> = Vec::new();
    let mut servers: Vec<(i32, LocalChannel)> = Vec::new();
    for r in 1..size {
        let (bytes, _) = world
            .process_at_rank(r)
            .receive_vec_with_tag::<u8>(TAG_WHOAMI);
        let name = String::from_utf8_lossy(&bytes).into_owned();
        let (router_end, server_end) = local_pair_named(format!("server for {name}"), name);
        routes.push((r, router_end));
        servers.push((r, server_end));
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .into_iter()
            .map(|(r, mut ch)| {
                let groups = &groups;
                scope.spawn(move || {
                    let res = ch.recv(Duration::from_secs(600)).and_then(|hello| {
                        crate::bench::serve_client(port, &mut ch, clock, hello, groups)
                    });
                    if let Err(e) = &res {
                        eprintln!("rank 0: rank {r}: {e}");
                    }
                    res
                })
            })
            .collect();
        loop {
            let mut moved = false;
            for (r, ch) in routes.iter_mut() {
                let rank = world.process_at_rank(*r);
                if rank.immediate_probe_with_tag(TAG_CONTROL).is_some() {
                    let (bytes, _) = rank.receive_vec_with_tag::<u8>(TAG_CONTROL);
                    if let Ok(msg) = serde_json::from_slice::<Message>(&bytes) {
                        let _ = ch.send(&msg);
                    }
                    moved = true;
                }
                while let Some(msg) = ch.try_recv() {
                    let bytes = serde_json::to_vec(&msg).expect("messages serialise");
                    rank.send_with_tag(&bytes[..], TAG_CONTROL);
                    moved = true;
                }
            }
            if handles.iter().all(|h| h.is_finished()) {
                // Flush what the servers said last (their Finished/Stopped).
                for (r, ch) in routes.iter_mut() {
                    while let Some(msg) = ch.try_recv() {
                        let bytes = serde_json::to_vec(&msg).expect("messages serialise");
                        world
                            .process_at_rank(*r)
                            .send_with_tag(&bytes[..], TAG_CONTROL);
                    }
                }
                break;
            }
            if !moved {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::Interrupted)))
            .find(|r| r.is_err())
            .unwrap_or(Ok(()))
    })
}

/// `fabric` under mpirun: MPI says where rank 0 is (its host name,
/// broadcast from rank 0); from then on the ranks talk over TCP and MPI
/// is finalised at once, so a rank that dies later cannot hang the others
/// in an MPI call.
pub fn rank_zero_host() -> Result<String> {
    let universe = mpi::initialize().ok_or_else(|| Error::usage("MPI was already initialised"))?;
    let world = universe.world();
    let mut name = [0u8; 256];
    if world.rank() == 0 {
        let me = crate::connect::protocol::local_host();
        let n = me.len().min(name.len());
        name[..n].copy_from_slice(&me.as_bytes()[..n]);
    }
    world.process_at_rank(0).broadcast_into(&mut name[..]);
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let host = String::from_utf8_lossy(&name[..end]).into_owned();
    if host.is_empty() {
        return Err(Error::usage(
            "--rendezvous: MPI's rank 0 has no host name; give --rendezvous HOST",
        ));
    }
    Ok(host)
}
