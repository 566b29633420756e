//! Completion channels (`--events`): a CQ created on a channel can be armed
//! (`CompletionQueue::arm`), and the next completion on it then makes the
//! channel's file descriptor readable, so a thread can sleep in poll(2)
//! instead of spinning on the CQ.
//!
//! Every CQ made on a channel holds an `Arc` to it, so the channel is
//! destroyed after its last CQ. Every event taken is acknowledged at once
//! (`ibv_destroy_cq` waits for unacknowledged events).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::device::Context;
use super::error::{Result, Verb, VerbsError};

pub struct CompletionChannel {
    raw: *mut ffi::ibv_comp_channel,
    ctx: Arc<Context>,
    /// Events taken so far (each one a wake-up), for the records.
    taken: AtomicU64,
}

// SAFETY: the channel is a file descriptor and a context pointer; libibverbs
// allows its calls from any thread, and each channel is waited on by one
// thread at a time (`wait` takes `&self` only to share the Arc).
unsafe impl Send for CompletionChannel {}
// SAFETY: see Send above.
unsafe impl Sync for CompletionChannel {}

impl CompletionChannel {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Self>> {
        // SAFETY: the context is open.
        let raw = unsafe { ffi::ibv_create_comp_channel(ctx.raw()) };
        if raw.is_null() {
            return Err(VerbsError::last_os(Verb::CreateCompChannel, ctx.name()));
        }
        Ok(Arc::new(Self {
            raw,
            ctx: ctx.clone(),
            taken: AtomicU64::new(0),
        }))
    }

    /// How many events `wait` has taken (wake-ups) since the channel was made.
    pub fn events_taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_comp_channel {
        self.raw
    }

    /// Sleeps until an armed CQ of this channel has a completion, or
    /// `timeout_ms` passes (the caller checks its own deadline and the abort
    /// flag between calls, so a vanished peer never hangs it). Returns the
    /// event taken (and acknowledged), which names the CQ that raised it:
    /// the caller must re-arm that CQ before sleeping on it again.
    pub fn wait(&self, timeout_ms: i32) -> Result<Option<CqEvent>> {
        let mut pfd = libc::pollfd {
            // SAFETY: `raw` is a live channel; its fd is a plain field.
            fd: unsafe { (*self.raw).fd },
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(VerbsError::Call {
                verb: Verb::GetCqEvent,
                object: format!("{} (poll on the completion channel)", self.ctx.name()),
                source: e,
                hint: "",
            });
        }
        if rc == 0 {
            return Ok(None);
        }
        let mut cq: *mut ffi::ibv_cq = std::ptr::null_mut();
        let mut cq_ctx: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: the channel is alive and its fd is readable, so this reads
        // the pending event without blocking; both out-pointers are valid.
        let rc = unsafe { ffi::ibv_get_cq_event(self.raw, &mut cq, &mut cq_ctx) };
        if rc != 0 {
            return Err(VerbsError::last_os(Verb::GetCqEvent, self.ctx.name()));
        }
        // SAFETY: `cq` is the CQ this event came from, alive: destroying a CQ
        // discards its events not yet read, and `ibv_destroy_cq` waits for
        // those read but not acknowledged. One event taken, one acknowledged.
        unsafe { ffi::ibv_ack_cq_events(cq, 1) };
        self.taken.fetch_add(1, Ordering::Relaxed);
        Ok(Some(CqEvent(cq as usize)))
    }
}

/// An event taken from a channel: which of the channel's CQs raised it
/// (`CompletionQueue::raised`). One channel serves several CQs (a QP set's
/// send and receive CQs), so a waiter re-arms only the CQ that fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqEvent(pub(crate) usize);

impl Drop for CompletionChannel {
    fn drop(&mut self) {
        // SAFETY: every CQ on this channel holds an Arc to it, so none is
        // left; the channel is destroyed once.
        unsafe { ffi::ibv_destroy_comp_channel(self.raw) };
    }
}
