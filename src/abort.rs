//! The process-wide abort flag: set by SIGINT/SIGTERM, or when the other side
//! of a loopback run failed. Every bounded wait (control channel, CQ and
//! memory polls) checks it, so the point in progress is abandoned promptly
//! and the points measured before it stay written. It sits at the bottom of
//! the layers so the control channel and the measured loops can both see it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

static ABORT: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Asks every wait in the process to give up.
pub fn abort_all() {
    ABORT.store(true, Ordering::Relaxed);
}

pub fn aborted() -> bool {
    ABORT.load(Ordering::Relaxed)
}

/// SIGINT and SIGTERM set the abort flag; a second one ends the process at
/// once (for a run that is stuck somewhere no wait checks the flag).
pub fn stop_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, ABORT.clone())?;
        signal_hook::flag::register(sig, ABORT.clone())?;
    }
    Ok(())
}
