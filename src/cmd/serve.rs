//! `rdma-bench serve`: the passive side of two-host runs. Each client gets its
//! own thread, QP and freshly registered buffer (so no client can reach
//! another's memory); a failing client costs one log line, never the server.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::abort::aborted;
use crate::bench::footprint::{self, MemoryBudget};
use crate::bench::{serve_client_within, DeviceChoice, Port, Rendezvous};
use crate::cli::ServeArgs;
use crate::clock::Clock;
use crate::connect::{fail, Control, Message, TcpChannel};
use crate::error::{Error, Result};
use crate::sys;

pub fn run(args: &ServeArgs) -> Result<()> {
    crate::spec::check_range("--max-clients", args.max_clients, 1, 4096, "")?;
    crate::spec::check_timeout(args.timeout)?;
    let budget = Arc::new(memory_budget(args.max_memory.as_deref())?);
    let addr = super::setup::bind_address(&args.bind, args.port)?;
    // What needs no device is decided before it opens.
    super::setup::check_cpus("--cpu", args.device.cpu.as_deref())?;
    let listener = TcpListener::bind(addr)
        .map_err(|e| Error::usage(format!("--bind {addr}: cannot listen: {e}")))?;
    let mut port = Port::open(&DeviceChoice::from(&args.device))?;
    port.cm_port = args.cm_port.unwrap_or(0);
    let port = Arc::new(port);
    if args.bind == "0.0.0.0" || args.bind == "::" || args.bind == "[::]" {
        eprintln!(
            "serve: warning: listening on every interface ({addr}); anyone who can reach this port can run tests against {} (use --bind ADDR to restrict)",
            port.ctx.name()
        );
    }
    eprintln!(
        "serve: listening on {addr} for {} port {} (gid index {}), at most {} clients at once, {}",
        port.ctx.name(),
        port.config.port,
        port.config.gid_index,
        args.max_clients,
        match budget.limit() {
            Some(b) => format!("registering at most {} (--max-memory)", footprint::bytes(b)),
            None => "no --max-memory bound (the host's size is unknown)".into(),
        }
    );
    let clock = Clock::calibrate(Duration::from_millis(10))?;
    // Clients' points are not known yet: one measuring thread per usable CPU.
    let threads = match &args.device.cpu {
        Some(list) => list.len(),
        None => crate::affinity::allowed_cpus().len(),
    };
    let (affinity, warning) = super::setup::plan_cpus(&args.device, &port, 0, threads.max(1))?;
    eprintln!("serve: measuring threads pinned: {affinity}");
    if let Some(w) = warning {
        eprintln!("serve: warning: {w}");
    }
    let slots = Arc::new(Slots::new(args.max_clients));
    let groups = Arc::new(Rendezvous::default());
    let handshake = Duration::from_secs_f64(args.timeout);
    // Accept without blocking forever, so SIGINT/SIGTERM end the server cleanly.
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("making the listener non-blocking", e))?;
    loop {
        if aborted() {
            eprintln!("serve: stopping ({} clients still connected)", slots.held());
            return Err(Error::Interrupted);
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => {
                eprintln!("serve: accept failed: {e}");
                continue;
            }
        };
        if let Err(e) = stream.set_nonblocking(false) {
            eprintln!("serve: dropped a connection: {e}");
            continue;
        }
        // A connection that is already gone takes no slot and no thread.
        if sys::wait_hangup(stream.as_raw_fd(), Duration::ZERO).is_some() {
            continue;
        }
        let slot = match slots.take(&stream) {
            Ok(Some(slot)) => slot,
            Ok(None) => {
                refuse(
                    stream,
                    format!(
                        "server busy: already serving --max-clients {} clients",
                        args.max_clients
                    ),
                );
                continue;
            }
            Err(e) => {
                eprintln!("serve: dropped a connection: {e}");
                continue;
            }
        };
        // Kept to tell the client why, should its thread not start.
        let Ok(spare) = stream.try_clone() else {
            eprintln!("serve: dropped a connection: cannot duplicate its socket");
            continue;
        };
        let (port, groups, budget) = (port.clone(), groups.clone(), budget.clone());
        let spawned = std::thread::Builder::new()
            .name("serve-client".into())
            .spawn(move || {
                let peer = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| "?".into());
                let done = serve_one(&port, stream, &clock, handshake, &groups, &budget);
                // The slot is free once the connection is closed (serve_one
                // dropped it), not once the log line below is written.
                drop(slot);
                match done {
                    Ok(()) => eprintln!("serve: {peer}: done"),
                    Err(e) => eprintln!("serve: {peer}: dropped: {e}"),
                }
            });
        if let Err(e) = spawned {
            // The closure, and with it the slot, is gone already.
            eprintln!("serve: refused a client: cannot start its thread: {e}");
            refuse(
                spare,
                format!("server busy: cannot start a thread for this client ({e})"),
            );
        }
    }
}

/// The --max-clients slots: one per live connection, each held with a
/// duplicate of its socket so that a connection whose peer is gone can be
/// seen (and its slot reused) without waiting for its thread to notice.
struct Slots {
    max: usize,
    held: Mutex<Vec<(u64, TcpStream)>>,
    next: AtomicU64,
}

/// One slot, given back when dropped (however the client's thread ends,
/// panics included) unless a sweep found its connection gone first.
struct SlotGuard {
    slots: Arc<Slots>,
    id: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.slots.lock().retain(|(id, _)| *id != self.id);
    }
}

impl Slots {
    fn new(max: usize) -> Self {
        Slots {
            max,
            held: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, TcpStream)>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn held(&self) -> usize {
        self.lock().len()
    }

    /// A slot for `stream`, or `None` if every slot holds a live
    /// connection: when all are taken, those whose peers have hung up are
    /// freed first, so the count is of connections, not of threads.
    fn take(self: &Arc<Self>, stream: &TcpStream) -> std::io::Result<Option<SlotGuard>> {
        let mine = stream.try_clone()?;
        let mut held = self.lock();
        if held.len() >= self.max {
            held.retain(|(_, s)| sys::wait_hangup(s.as_raw_fd(), Duration::ZERO).is_none());
        }
        if held.len() >= self.max {
            return Ok(None);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        held.push((id, mine));
        Ok(Some(SlotGuard {
            slots: self.clone(),
            id,
        }))
    }
}

/// `--max-memory`, or half the host's memory within what it may pin.
fn memory_budget(given: Option<&str>) -> Result<MemoryBudget> {
    let limit = match given {
        Some(text) => {
            let limit = footprint::parse_limit(text)?;
            // Pinned memory cannot be paged out: a budget above the host's
            // memory would let sessions try to pin what is not there.
            if let Some(total) = sys::mem_total().filter(|&t| limit > t) {
                return Err(Error::usage(format!(
                    "--max-memory {text}: more than this host's memory ({})",
                    footprint::bytes(total)
                )));
            }
            Some(limit)
        }
        None => footprint::default_limit(
            sys::mem_total(),
            sys::memlock_limit(),
            sys::can_lock_any_memory(),
        ),
    };
    Ok(limit.map_or_else(MemoryBudget::unlimited, MemoryBudget::new))
}

pub(crate) fn serve_one(
    port: &Port,
    stream: TcpStream,
    clock: &Clock,
    handshake: Duration,
    groups: &Rendezvous,
    budget: &MemoryBudget,
) -> Result<()> {
    // The client's host counts as gone after --timeout without an answer.
    let mut ctl = TcpChannel::new(stream, handshake)?;
    let hello = ctl.recv(handshake)?;
    serve_client_within(port, &mut ctl, clock, hello, groups, budget)
        .inspect_err(|e| fail(&mut ctl, e))
}

/// Tells a client it is not served, and why (not worth a usage exit: it may
/// try again later).
fn refuse(stream: TcpStream, reason: String) {
    if let Ok(mut ctl) = TcpChannel::new(stream, Duration::from_secs(5)) {
        let _ = ctl.send(&Message::Refuse {
            usage: false,
            reason,
        });
    }
}
