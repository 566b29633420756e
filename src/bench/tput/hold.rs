//! Holds a throughput point's measured window open while something else
//! measures under its load (`--under-load`): the issuers announce when
//! their windows open, and their windows do not end before `release`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

#[derive(Default)]
pub struct LoadHold {
    open: AtomicU32,
    released: AtomicBool,
}

impl LoadHold {
    /// An issuing thread's window has opened (its warm-up is over).
    pub fn opened(&self) {
        self.open.fetch_add(1, Ordering::Release);
    }

    /// Issuing threads whose windows are open.
    pub fn open_threads(&self) -> u32 {
        self.open.load(Ordering::Acquire)
    }

    /// Whether the windows must stay open.
    #[inline(always)]
    pub fn held(&self) -> bool {
        !self.released.load(Ordering::Acquire)
    }

    /// Lets the windows end (at their requested length, or now if that has passed).
    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
    }
}
