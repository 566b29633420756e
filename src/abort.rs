//! The process-wide abort flag: set by SIGINT/SIGTERM, or when the other side
//! of a loopback run failed. Every bounded wait (control channel, CQ and
//! memory polls) checks it, so the point in progress is abandoned promptly
//! and the points measured before it stay written. It sits at the bottom of
//! the layers so the control channel and the measured loops can both see it.
//!
//! A process that serves several peers at once (`serve`, `fabric`) runs
//! each on a [`Session`] of its own: a flag that ends only that session's
//! waits (its peer went away), checked by [`aborted`] next to the process's.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use signal_hook::SigId;

static ABORT: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
/// `--forever`: a signal asked the running point to end normally.
static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
/// A signal arrived (not just a failed peer): what `rearm` must not undo.
static SIGNALLED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
/// The handlers `stop_on_signals` installed, so `--forever` can replace them.
static HANDLERS: Mutex<Vec<SigId>> = Mutex::new(Vec::new());

/// Asks every wait in the process to give up.
pub fn abort_all() {
    ABORT.store(true, Ordering::Relaxed);
}

/// Whether this thread's waits should give up: the process is aborting, or
/// the session the thread works for is.
pub fn aborted() -> bool {
    ABORT.load(Ordering::Relaxed)
        || SESSION.with_borrow(|s| s.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)))
}

thread_local! {
    /// The abort flag of the session this thread works for, if any.
    static SESSION: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// One peer's session among several in the process: aborting it ends the
/// waits of the threads working for it, and no other's. `None` inside: the
/// thread works for the process as a whole.
#[derive(Clone, Default)]
pub struct Session(Option<Arc<AtomicBool>>);

impl Session {
    /// Makes the calling thread work for a new session until the guard drops.
    pub fn begin() -> SessionGuard {
        Session(Some(Arc::new(AtomicBool::new(false)))).enter()
    }

    /// The session the calling thread works for, to hand to the threads it
    /// starts (a thread does not inherit it).
    pub fn current() -> Session {
        Session(SESSION.with_borrow(|s| s.clone()))
    }

    /// Makes the calling thread work for `self` until the guard drops.
    pub fn enter(self) -> SessionGuard {
        let before = SESSION.replace(self.0);
        SessionGuard { before }
    }

    /// Asks every wait of this session to give up; the whole process's when
    /// it is none.
    pub fn abort(&self) {
        match &self.0 {
            Some(f) => f.store(true, Ordering::Relaxed),
            None => abort_all(),
        }
    }
}

/// The calling thread works for a session until this drops.
pub struct SessionGuard {
    before: Option<Arc<AtomicBool>>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        SESSION.set(self.before.take());
    }
}

/// Lets waits run again after a peer's failure aborted them, unless a
/// signal did: a process that measures many peers in turn (`fabric`) goes
/// on to the next after one fails. Returns whether the flag is clear.
pub fn rearm() -> bool {
    if SIGNALLED.load(Ordering::Relaxed) {
        return false;
    }
    ABORT.store(false, Ordering::Relaxed);
    true
}

/// SIGINT and SIGTERM set the abort flag; a second one ends the process at
/// once (for a run that is stuck somewhere no wait checks the flag).
pub fn stop_on_signals() -> std::io::Result<()> {
    register(&ABORT)
}

/// `--forever`: from now on the first SIGINT/SIGTERM does not abort but asks
/// the running point to end at once, its interval in progress dropped, as its normal
/// end ([`stop_requested`]); a second one still ends the process at once.
pub fn end_point_on_signals() -> std::io::Result<()> {
    let old: Vec<SigId> = std::mem::take(&mut *HANDLERS.lock().unwrap_or_else(|e| e.into_inner()));
    for id in old {
        signal_hook::low_level::unregister(id);
    }
    register(&STOP)
}

/// Whether a signal asked a `--forever` point to end.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// SIGINT and SIGTERM set `flag`; a second one exits with 130.
fn register(flag: &Arc<AtomicBool>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut ids = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
    for sig in [SIGINT, SIGTERM] {
        ids.push(signal_hook::flag::register_conditional_shutdown(
            sig,
            130,
            flag.clone(),
        )?);
        ids.push(signal_hook::flag::register(sig, flag.clone())?);
        ids.push(signal_hook::flag::register(sig, SIGNALLED.clone())?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_aborted_ends_its_threads_waits_and_no_others() {
        let _mine = Session::begin();
        let handed = Session::current();
        let other = std::thread::spawn(|| {
            let _theirs = Session::begin();
            (Session::current(), aborted())
        });
        let (theirs, at_first) = other.join().unwrap();
        assert!(!at_first && !aborted());
        theirs.abort();
        assert!(!aborted(), "another session's abort is not this one's");
        let worker = std::thread::spawn(move || {
            let before = aborted();
            let _in = handed.clone().enter();
            handed.abort();
            (before, aborted())
        });
        assert_eq!(
            worker.join().unwrap(),
            (false, true),
            "a thread that entered it sees it"
        );
        assert!(aborted(), "the session's own thread sees it too");
        assert!(
            !std::thread::spawn(aborted).join().unwrap(),
            "a thread of no session does not"
        );
    }

    #[test]
    fn leaving_a_session_restores_the_one_before() {
        let outer = Session::begin();
        {
            let _inner = Session::begin();
            Session::current().abort();
            assert!(aborted());
        }
        assert!(!aborted(), "back in the outer session");
        drop(outer);
        assert!(Session::current().0.is_none());
    }
}
