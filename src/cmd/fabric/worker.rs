//! One rank: serve every local endpoint to the others, join rank 0, and
//! measure against whichever serve rank 0 names, until it says done.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bench::{DeviceChoice, MemoryBudget, Port, Rendezvous};
use crate::cli::FabricArgs;
use crate::clock::Clock;
use crate::cmd::serve::LeftBehind;
use crate::connect::TcpChannel;
use crate::error::{Error, Result};

use super::suite::{run_all, SuiteTest};
use super::wire::{Join, JoinedEndpoint, Measured, Order};

/// This rank's devices, opened (the `-d` list, or the default device).
fn open_ports(a: &FabricArgs) -> Result<Vec<Port>> {
    let names: Vec<Option<String>> = match &a.device {
        Some(list) => list
            .split(',')
            .map(|d| Some(d.trim().to_string()))
            .collect(),
        None => vec![None],
    };
    names
        .into_iter()
        .map(|device| {
            Port::open(&DeviceChoice {
                device,
                ib_port: a.ib_port,
                gid_index: a.gid_index,
            })
        })
        .collect()
}

/// Each port's serve: an accept loop per port on its own thread, each
/// client (another rank measuring) on a thread of its own, as `serve` does.
struct Serving {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Serving {
    fn start(ports: &[Arc<Port>], clock: &Clock, first: u16, timeout: f64) -> Result<Serving> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let at = first as usize + i;
            let at = u16::try_from(at).map_err(|_| {
                Error::usage(format!("--serve-port {first}: no port left for device {i}"))
            })?;
            let listener = TcpListener::bind(("0.0.0.0", at))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| Error::io(format!("--serve-port {at}: cannot listen"), e))?;
            let (stop, port, clock) = (stop.clone(), port.clone(), *clock);
            threads.push(std::thread::spawn(move || {
                let groups = Arc::new(Rendezvous::default());
                let budget = Arc::new(MemoryBudget::unlimited());
                let handshake = Duration::from_secs_f64(timeout);
                let left = Arc::new(LeftBehind::default());
                while !stop.load(Ordering::Relaxed) {
                    left.close_all();
                    let Ok((stream, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    let _ = stream.set_nonblocking(false);
                    let (port, clock, groups, budget, left) = (
                        port.clone(),
                        clock,
                        groups.clone(),
                        budget.clone(),
                        left.clone(),
                    );
                    std::thread::spawn(move || {
                        if let Err(e) = crate::cmd::serve::serve_one(
                            &port, stream, &clock, handshake, &groups, &budget, &left,
                        ) {
                            eprintln!("fabric: serve on {}: {e}", port.ctx.name());
                        }
                    });
                }
                // Sessions still running then leave their copies to the exit.
                left.close_all();
            }));
        }
        Ok(Serving { stop, threads })
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Connects to rank 0, trying again until `timeout` (rank 0 may start
/// after this rank does).
fn dial(rendezvous: &str, timeout: f64) -> Result<TcpChannel> {
    let deadline = Instant::now() + Duration::from_secs_f64(timeout);
    loop {
        match crate::cmd::setup::connect_to(rendezvous, timeout) {
            Ok(ch) => return Ok(ch),
            Err(e) if e.exit_code() == 2 => return Err(e),
            Err(e) => {
                if Instant::now() >= deadline || crate::abort::aborted() {
                    return Err(Error::Peer {
                        peer: format!("rank 0 at {rendezvous}"),
                        what: format!("not reached within {timeout} s (--timeout): {e}"),
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Runs this rank until rank 0 says done (or goes away: an error).
pub fn run(
    a: &FabricArgs,
    rank: u32,
    ranks: u32,
    rendezvous: &str,
    tests: &[SuiteTest],
) -> Result<()> {
    let host = crate::connect::protocol::local_host();
    let opened = open_ports(a).and_then(|ports| {
        let ports: Vec<Arc<Port>> = ports.into_iter().map(Arc::new).collect();
        let clock = Clock::calibrate(Duration::from_millis(10))?;
        let serving = Serving::start(&ports, &clock, a.serve_port, a.timeout)?;
        Ok((ports, clock, serving))
    });
    let mut ch = dial(rendezvous, a.timeout)?;
    let (endpoints, error) = match &opened {
        Ok((ports, _, _)) => (
            ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let d = p.describe();
                    JoinedEndpoint {
                        device: d.device,
                        port: d.port,
                        gid: d.gid,
                        active_mtu: d.active_mtu,
                        serve_port: a.serve_port + i as u16,
                    }
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    ch.send_value(
        "join",
        &Join {
            rank,
            ranks,
            host,
            tool_version: env!("RDMA_BENCH_VERSION").into(),
            tests: tests.iter().map(|t| t.doc.command.clone()).collect(),
            endpoints,
            error,
        },
    )?;
    loop {
        // Rank 0 may take many rounds to need this rank again; the
        // channel's liveness (--timeout) still notices its host going.
        let order: Order = ch.recv_value(Duration::from_secs(7 * 24 * 3600))?;
        match order {
            // A rank that could not take part says why in its own exit too.
            Order::Done => return opened.map(|_| ()),
            Order::Measure {
                entry,
                device,
                serve,
                ..
            } => {
                let began = Instant::now();
                let figures = match &opened {
                    Ok((ports, clock, _)) => match ports.get(device as usize) {
                        Some(port) => run_all(tests, port, clock, &serve),
                        None => super::suite::Figures {
                            error: Some(format!("no local endpoint {device}")),
                            ..Default::default()
                        },
                    },
                    Err(e) => super::suite::Figures {
                        error: Some(e.to_string()),
                        ..Default::default()
                    },
                };
                ch.send_value(
                    "measured",
                    &Measured {
                        entry,
                        metrics: figures.metrics,
                        counters: figures.counters,
                        error: figures.error,
                        elapsed_s: began.elapsed().as_secs_f64(),
                    },
                )?;
            }
        }
    }
}
