//! `rdma-bench serve`: the passive side of two-host runs. Each client gets its
//! own thread, QP and freshly registered buffer (so no client can reach
//! another's memory); a failing client costs one log line, never the server.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::abort::aborted;
use crate::bench::{serve_client, DeviceChoice, Port, Rendezvous};
use crate::cli::ServeArgs;
use crate::clock::Clock;
use crate::connect::{fail, Control, Message, TcpChannel};
use crate::error::{Error, Result};

pub fn run(args: &ServeArgs) -> Result<()> {
    crate::spec::check_range("--max-clients", args.max_clients, 1, 4096, "")?;
    crate::spec::check_timeout(args.timeout)?;
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
        "serve: listening on {addr} for {} port {} (gid index {}), at most {} clients at once",
        port.ctx.name(),
        port.config.port,
        port.config.gid_index,
        args.max_clients
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
    let active = Arc::new(AtomicUsize::new(0));
    let groups = Arc::new(Rendezvous::default());
    let handshake = Duration::from_secs_f64(args.timeout);
    // Accept without blocking forever, so SIGINT/SIGTERM end the server cleanly.
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("making the listener non-blocking", e))?;
    loop {
        if aborted() {
            eprintln!(
                "serve: stopping ({} clients still connected)",
                active.load(Ordering::SeqCst)
            );
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
        if active.fetch_add(1, Ordering::SeqCst) >= args.max_clients {
            active.fetch_sub(1, Ordering::SeqCst);
            refuse_busy(stream, args.max_clients);
            continue;
        }
        let (port, groups) = (port.clone(), groups.clone());
        let slot = ClientSlot(active.clone());
        std::thread::spawn(move || {
            // Frees the client slot however this thread ends, panics included.
            let _slot = slot;
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into());
            match serve_one(&port, stream, &clock, handshake, &groups) {
                Ok(()) => eprintln!("serve: {peer}: done"),
                Err(e) => eprintln!("serve: {peer}: dropped: {e}"),
            }
        });
    }
}

/// One of the --max-clients slots, given back when dropped.
struct ClientSlot(Arc<AtomicUsize>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve_one(
    port: &Port,
    stream: TcpStream,
    clock: &Clock,
    handshake: Duration,
    groups: &Rendezvous,
) -> Result<()> {
    // The client's host counts as gone after --timeout without an answer.
    let mut ctl = TcpChannel::new(stream, handshake)?;
    let hello = ctl.recv(handshake)?;
    serve_client(port, &mut ctl, clock, hello, groups).inspect_err(|e| fail(&mut ctl, e))
}

fn refuse_busy(stream: TcpStream, max: usize) {
    if let Ok(mut ctl) = TcpChannel::new(stream, Duration::from_secs(5)) {
        let _ = ctl.send(&Message::Refuse {
            usage: false,
            reason: format!("server busy: already serving --max-clients {max} clients"),
        });
    }
}
