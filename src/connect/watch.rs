//! A control connection watched from a thread of its own while the measured
//! loops run. Those loops never read the control channel, and an unreliable
//! transport (UC, UD) gets no error when the peer's host is gone: without
//! the watch a client would go on posting into the void for the rest of its
//! window; a server's issuers (outbound, bidirectional) would post into it
//! to their window's end and wait out --timeout for the last completions.
//! The thread sleeps in `poll(2)` for the connection's end only (the peer's
//! FIN, a reset, or the kernel giving up on a host that stopped answering,
//! see `TcpChannel::new`), and in a descriptor table of its own, so it costs
//! the loops nothing. It ends the waits of its [`Session`] only: in `serve`
//! the other clients' points go on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Control;
use crate::abort::Session;
use crate::error::{Error, Result};
use crate::sys::{close_copied_sockets, own_descriptor_table, wait_hangup, Hangup};

/// How often the watching thread looks at its stop flag.
const SLICE: Duration = Duration::from_millis(200);

/// A running watch; stops (and joins its thread) when dropped.
pub struct PeerWatch {
    stop: Arc<AtomicBool>,
    ended: Arc<Mutex<Option<Hangup>>>,
    thread: Option<JoinHandle<()>>,
}

impl PeerWatch {
    /// Runs `work` (which may use the control channel too) with `ctl`'s
    /// connection watched: its result, with an interruption the watch caused
    /// replaced by why the peer went ([`PeerWatch::explain`]).
    pub fn during<T>(
        ctl: &mut dyn Control,
        work: impl FnOnce(&mut dyn Control) -> Result<T>,
    ) -> Result<T> {
        let watch = PeerWatch::start(ctl);
        let result = work(ctl);
        watch.explain(ctl, result)
    }

    /// Starts watching `ctl`'s connection, if it has one. When it ends,
    /// every wait of the calling thread's session (the whole process's when
    /// it is none) is asked to give up ([`Session::abort`]); the caller
    /// turns the interruption that follows into the peer's error with
    /// [`PeerWatch::explain`].
    fn start(ctl: &dyn Control) -> PeerWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(None));
        // A thread that cannot be had (memory limits) leaves the point
        // unwatched rather than panicking: its own bounded waits and the
        // connection's --timeout still end it if the peer goes.
        let session = Session::current();
        let thread = ctl.hangup_fd().and_then(|fd| {
            let (stop, ended) = (stop.clone(), ended.clone());
            std::thread::Builder::new()
                .name("peer-watch".into())
                .spawn(move || {
                    // Out of the measuring thread's descriptor table, so its
                    // doorbell writes find the table unshared (see
                    // `own_descriptor_table`); the copy keeps `fd` open. Its
                    // copies of other sockets (serve's other clients) are
                    // closed, lest they hold those connections open. If the
                    // kernel refuses, the watch still works.
                    if own_descriptor_table().is_ok() {
                        let _ = close_copied_sockets(fd);
                    }
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(h) = wait_hangup(fd, SLICE) {
                            *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
                            session.abort();
                            return;
                        }
                    }
                })
                .ok()
        });
        PeerWatch {
            stop,
            ended,
            thread,
        }
    }

    /// `result` of the watched work, with an interruption the watch caused
    /// replaced by why: the peer's own last word if it sent one (a
    /// `Failed` or `Refuse` still in the socket), else how the connection
    /// ended.
    fn explain<T>(self, ctl: &mut dyn Control, result: Result<T>) -> Result<T> {
        let ended = self.finish();
        match (result, ended) {
            (Err(Error::Interrupted), Some(how)) => Err(last_word(ctl).unwrap_or_else(|| {
                Error::Peer {
                    peer: ctl.peer(),
                    what: match how {
                        Hangup::Closed => "closed the connection in the middle of a point".into(),
                        Hangup::Failed(std::io::ErrorKind::TimedOut, _) => {
                            "stopped answering in the middle of a point (the connection timed out after --timeout): its host, or the network to it, is down".into()
                        }
                        Hangup::Failed(_, e) => format!("the connection failed in the middle of a point: {e}"),
                    },
                }
            })),
            (r, _) => r,
        }
    }

    fn finish(mut self) -> Option<Hangup> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.ended.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Drop for PeerWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A `Failed` or `Refuse` the peer sent before it went, as its error.
fn last_word(ctl: &mut dyn Control) -> Option<Error> {
    while let Ok(Some(msg)) = ctl.poll() {
        if let Some(e) = super::protocol::peer_error(ctl, &msg) {
            return Some(e);
        }
    }
    None
}
