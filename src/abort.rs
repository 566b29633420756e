//! The process-wide abort flag: set by SIGINT/SIGTERM, or when the other side
//! of a loopback run failed. Every bounded wait (control channel, CQ and
//! memory polls) checks it, so the point in progress is abandoned promptly
//! and the points measured before it stay written. It sits at the bottom of
//! the layers so the control channel and the measured loops can both see it.

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

pub fn aborted() -> bool {
    ABORT.load(Ordering::Relaxed)
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
