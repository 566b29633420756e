//! Completion queues and work completions.

use std::ffi::CStr;
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::channel::{CompletionChannel, CqEvent};
use super::device::Context;
use super::error::{Result, Verb, VerbsError};

pub struct CompletionQueue {
    raw: *mut ffi::ibv_cq,
    ctx: Arc<Context>,
    /// The channel its events go to (`--events`); dropped after the CQ.
    channel: Option<Arc<CompletionChannel>>,
}

// SAFETY: a CQ may be polled from any thread; we poll each CQ from one thread at a time
// (polling takes `&self` but providers lock internally where needed).
unsafe impl Send for CompletionQueue {}
// SAFETY: see Send above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    pub fn new(ctx: &Arc<Context>, entries: u32) -> Result<Arc<Self>> {
        Self::with_channel(ctx, entries, None)
    }

    /// A CQ whose completions, once armed (`arm`), wake `channel`'s waiter.
    pub fn with_channel(
        ctx: &Arc<Context>,
        entries: u32,
        channel: Option<&Arc<CompletionChannel>>,
    ) -> Result<Arc<Self>> {
        let ch = channel.map_or(std::ptr::null_mut(), |c| c.raw());
        // SAFETY: the context is open; the channel (if any) is alive and
        // outlives the CQ (the CQ holds an Arc to it); vector 0.
        let raw =
            unsafe { ffi::ibv_create_cq(ctx.raw(), entries as i32, std::ptr::null_mut(), ch, 0) };
        if raw.is_null() {
            return Err(VerbsError::last_os(
                Verb::CreateCq,
                format!("{} ({entries} entries)", ctx.name()),
            ));
        }
        Ok(Arc::new(Self {
            raw,
            ctx: ctx.clone(),
            channel: channel.cloned(),
        }))
    }

    /// Completions the CQ holds (what the provider made of the entries asked for).
    pub fn capacity(&self) -> u32 {
        // SAFETY: the CQ is alive; `cqe` is set at creation and only changed by ibv_resize_cq, which is never called.
        unsafe { (*self.raw).cqe.max(0) as u32 }
    }

    /// The channel this CQ reports to, if it was made with one.
    pub fn channel(&self) -> Option<&Arc<CompletionChannel>> {
        self.channel.as_ref()
    }

    /// Requests an event on the channel for the next completion. A
    /// completion that arrived before arming raises no event: poll again
    /// after arming, before sleeping.
    pub fn arm(&self) -> Result<()> {
        // SAFETY: the CQ is alive; 0 = any completion, not only solicited.
        let rc = unsafe { ffi::ibv_req_notify_cq(self.raw, 0) };
        if rc != 0 {
            return Err(VerbsError::from_code(
                Verb::ReqNotifyCq,
                self.ctx.name(),
                rc,
            ));
        }
        Ok(())
    }

    /// Whether `event` was raised by this CQ.
    pub fn raised(&self, event: CqEvent) -> bool {
        self.raw as usize == event.0
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_cq {
        self.raw
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Polls up to `out.len()` completions; returns how many were written.
    /// Statuses are not checked here: callers check each with `WorkCompletion::ok`.
    #[inline(always)]
    pub fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        // SAFETY: WorkCompletion is repr(transparent) over ibv_wc, `out` is
        // writable for `out.len()` entries, and the CQ is alive.
        let n = unsafe {
            ffi::ibv_poll_cq(
                self.raw,
                out.len() as i32,
                out.as_mut_ptr().cast::<ffi::ibv_wc>(),
            )
        };
        if n < 0 {
            return Err(VerbsError::from_code(Verb::PollCq, self.ctx.name(), n));
        }
        Ok(n as usize)
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: QPs using this CQ hold an Arc to it, so none is alive.
        unsafe { ffi::ibv_destroy_cq(self.raw) };
    }
}

/// One completion, as the provider wrote it.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct WorkCompletion(ffi::ibv_wc);

impl Default for WorkCompletion {
    fn default() -> Self {
        // SAFETY: ibv_wc is plain data; all-zero is a valid (success, wr_id 0) value.
        Self(unsafe { std::mem::zeroed() })
    }
}

impl WorkCompletion {
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// The QP the completion belongs to (what names the receiving QP when
    /// receives come from a shared receive queue).
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    pub fn is_success(&self) -> bool {
        self.0.status == ffi::ibv_wc_status::IBV_WC_SUCCESS
    }

    /// A flushed WR: its QP had already gone to the error state.
    pub fn is_flush(&self) -> bool {
        self.0.status == ffi::ibv_wc_status::IBV_WC_WR_FLUSH_ERR
    }

    /// Immediate data (host order) when the completion carries one.
    pub fn imm(&self) -> Option<u32> {
        (self.0.wc_flags & ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0)
            // SAFETY: with IBV_WC_WITH_IMM set, the union holds the immediate.
            .then(|| u32::from_be(unsafe { self.0.imm_data_invalidated_rkey_union.imm_data }))
    }

    /// Turns an error completion into an error naming status, the verb the
    /// caller posted (`verb`: error completions carry no valid opcode), QP and WR id.
    #[inline(always)]
    pub fn check(&self, verb: &'static str) -> Result<()> {
        if self.is_success() {
            Ok(())
        } else {
            Err(self.error(verb))
        }
    }

    #[cold]
    fn error(&self, verb: &'static str) -> VerbsError {
        // SAFETY: ibv_wc_status_str returns a static string for any status value.
        let name = unsafe {
            let p = ffi::ibv_wc_status_str(self.0.status);
            if p.is_null() {
                "unknown status".to_string()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        VerbsError::WorkCompletion {
            opcode: verb,
            qpn: self.0.qp_num,
            status: self.0.status,
            status_name: name,
            vendor_err: self.0.vendor_err,
            wr_id: self.0.wr_id,
            note: "",
        }
    }
}
