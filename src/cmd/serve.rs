//! `rdma-bench serve`: the passive side of two-host runs. Each client gets its
//! own thread, QP and freshly registered buffer (so no client can reach
//! another's memory); a failing client costs one log line, never the server.
//! Each session measures in a descriptor table of its own ([`LeftBehind`]),
//! a `--cm` one once librdmacm's state allows it.

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::abort::aborted;
use crate::bench::footprint::{self, MemoryBudget};
use crate::bench::{cm, serve_client_within, DeviceChoice, Port, Rendezvous};
use crate::cli::ServeArgs;
use crate::clock::Clock;
use crate::connect::{fail, Control, Message, TcpChannel};
use crate::error::{Error, Result};
use crate::spec::Connection;
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
    let left = Arc::new(LeftBehind::default());
    let handshake = Duration::from_secs_f64(args.timeout);
    // Accept without blocking forever, so SIGINT/SIGTERM end the server cleanly.
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("making the listener non-blocking", e))?;
    loop {
        slots.reap();
        left.close_all();
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
        let (port, groups, budget, left) =
            (port.clone(), groups.clone(), budget.clone(), left.clone());
        let spawned = std::thread::Builder::new()
            .name("serve-client".into())
            .spawn(move || {
                let peer = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| "?".into());
                let done = serve_one(&port, stream, &clock, handshake, &groups, &budget, &left);
                // The slot is free once the connection has ended (serve_one
                // ended it), not once the log line below is written.
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
/// seen (and its slot reused) without waiting for its thread to notice. The
/// duplicates live in the accepting thread's descriptor table, which a
/// client's thread may have left, so only the accepting thread closes them:
/// a client's thread reports its slot ended.
struct Slots {
    max: usize,
    held: Mutex<Vec<(u64, TcpStream)>>,
    ended: Mutex<Vec<u64>>,
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
        let mut ended = self.slots.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.push(self.id);
    }
}

impl Slots {
    fn new(max: usize) -> Self {
        Slots {
            max,
            held: Mutex::new(Vec::new()),
            ended: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        }
    }

    /// The live slots, the duplicates of those whose threads have ended
    /// closed first. Only the accepting thread calls this.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, TcpStream)>> {
        let ended = std::mem::take(&mut *self.ended.lock().unwrap_or_else(|p| p.into_inner()));
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|(id, _)| !ended.contains(id));
        held
    }

    /// Closes the duplicates of connections whose threads have ended.
    fn reap(&self) {
        drop(self.lock());
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

/// One client's session, in the thread it was given. Once the hello says
/// what the session needs, the thread moves to a descriptor table of its own
/// (see [`LeftBehind`]; a `--cm` session only where
/// [`cm::ready_for_own_table`] says librdmacm allows it); the connection
/// ends with the session, whatever duplicates of its socket the accepting
/// thread still holds.
pub(crate) fn serve_one(
    port: &Port,
    stream: TcpStream,
    clock: &Clock,
    handshake: Duration,
    groups: &Rendezvous,
    budget: &MemoryBudget,
    left: &LeftBehind,
) -> Result<()> {
    // This client's waits end when it goes (a watch aborts the session),
    // the other clients' go on.
    let _session = crate::abort::Session::begin();
    let socket = stream.as_raw_fd();
    // The client's host counts as gone after --timeout without an answer.
    let mut ctl = TcpChannel::new(stream, handshake)?;
    let done = ctl.recv(handshake).and_then(|hello| {
        if let Message::Hello { spec, .. } = &hello {
            let apart = match spec.path().connection {
                Connection::Gid => true,
                Connection::Cm => cm::ready_for_own_table(port, ctl.local_ip()),
            };
            if apart {
                left.measure_apart(socket);
            }
        }
        serve_client_within(port, &mut ctl, clock, hello, groups, budget)
            .inspect_err(|e| fail(&mut ctl, e))
    });
    ctl.end();
    done
}

/// Client threads that measure in descriptor tables of their own, and the
/// copies of their sockets they left in the accepting thread's table.
///
/// In a table shared by several threads the kernel's `fdget` takes and drops
/// a reference on the file (two atomic operations) in every system call, and
/// soft-RoCE's doorbell is a `write(2)` per post, inside the timed span. A
/// client's thread therefore unshares its table once the hello has come
/// (for `--cm`, after librdmacm has opened its device contexts in the shared
/// table: it reaches them by descriptor number from every thread), and
/// closes its copies of other threads' sockets, which would hold their
/// connections open. The accepting thread's copy of the client's socket is
/// owned by no value there; it is left here for that thread to close.
#[derive(Default)]
pub(crate) struct LeftBehind(Mutex<Vec<RawFd>>);

impl LeftBehind {
    /// Moves the calling client thread, whose connection is `socket`, to a
    /// table of its own; stays in the shared one where procfs cannot list
    /// what to close.
    fn measure_apart(&self, socket: RawFd) {
        if !std::path::Path::new("/proc/thread-self/fd").is_dir() {
            return;
        }
        if sys::own_descriptor_table().is_err() {
            return;
        }
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(socket);
        if let Err(e) = sys::close_copied_sockets(socket) {
            eprintln!("serve: warning: cannot close this client's copies of other sockets: {e}");
        }
    }

    /// Closes the copies left behind. Only the accepting thread calls this:
    /// they are numbers in its table.
    pub(crate) fn close_all(&self) {
        let left = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        left.into_iter().for_each(sys::close_left_copy);
    }
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
