//! Protection domains.

use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::device::Context;
use super::error::{Result, Verb, VerbsError};

pub struct ProtectionDomain {
    raw: *mut ffi::ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: libibverbs objects may be used from any thread; the PD is never mutated.
unsafe impl Send for ProtectionDomain {}
// SAFETY: see Send above.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Self>> {
        // SAFETY: the context is open for as long as `ctx` lives.
        let raw = unsafe { ffi::ibv_alloc_pd(ctx.raw()) };
        if raw.is_null() {
            return Err(VerbsError::last_os(Verb::AllocPd, ctx.name()));
        }
        Ok(Arc::new(Self {
            raw,
            ctx: ctx.clone(),
        }))
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_pd {
        self.raw
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: children (MRs, QPs, AHs) hold an Arc to this PD, so none is alive.
        unsafe { ffi::ibv_dealloc_pd(self.raw) };
    }
}
