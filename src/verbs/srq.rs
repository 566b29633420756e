//! Shared receive queues: one pool of receive WRs that every QP created with
//! it draws from (`QueuePairBuilder::srq`). A receive completion then names
//! the QP that consumed it only by `qp_num`, not by its wr_id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rdma_mummy_sys as ffi;

use super::error::{Result, Verb, VerbsError};
use super::mr::MemoryRegion;
use super::pd::ProtectionDomain;
use super::wr::RecvList;

/// Holder ids of SRQs: the upper half of the id space, so a list posted to an
/// SRQ is never mistaken for one a QP (ids from 1 upwards) already holds.
static NEXT_SRQ_ID: AtomicU64 = AtomicU64::new(1 << 63);

/// A shared receive queue, destroyed when dropped (after every QP made with
/// it: each QP keeps an `Arc` to it).
///
/// Keep-alive contract, as for a QP: a posted receive may be written by the
/// NIC until the SRQ is destroyed, so the SRQ keeps an `Arc` to every memory
/// region any list posted to it named.
pub struct SharedReceiveQueue {
    raw: *mut ffi::ibv_srq,
    id: u64,
    max_wr: u32,
    /// Taken only the first time a list is posted here (the cold path).
    keep: Mutex<HashMap<*const MemoryRegion, Arc<MemoryRegion>>>,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: libibverbs SRQs may be posted to from any thread (the provider
// serialises its own queue); the keep-alive map is behind a mutex and holds
// only Send + Sync regions.
unsafe impl Send for SharedReceiveQueue {}
// SAFETY: see Send above; `post_recv` takes `&self` and is thread-safe.
unsafe impl Sync for SharedReceiveQueue {}

impl SharedReceiveQueue {
    /// An SRQ on `pd` holding up to `max_wr` receives of one SGE each.
    pub fn new(pd: &Arc<ProtectionDomain>, max_wr: u32) -> Result<Arc<Self>> {
        // SAFETY: all-zero is a valid ibv_srq_init_attr; the sizes are set below.
        let mut init: ffi::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        init.attr.max_wr = max_wr.max(1);
        init.attr.max_sge = 1;
        // SAFETY: the PD is alive (we keep an Arc to it); `init` is initialised.
        let raw = unsafe { ffi::ibv_create_srq(pd.raw(), &mut init) };
        if raw.is_null() {
            return Err(VerbsError::last_os(
                Verb::CreateSrq,
                format!("{} (SRQ of {max_wr} WRs)", pd.context().name()),
            ));
        }
        Ok(Arc::new(Self {
            raw,
            id: NEXT_SRQ_ID.fetch_add(1, Ordering::Relaxed),
            // ibv_create_srq writes back what was granted (at least asked).
            max_wr: init.attr.max_wr,
            keep: Mutex::new(HashMap::new()),
            _pd: pd.clone(),
        }))
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_srq {
        self.raw
    }

    /// The receives it may hold, as the provider granted.
    pub fn max_wr(&self) -> u32 {
        self.max_wr
    }

    /// Posts every receive WR of `list` (one call). From here on the SRQ
    /// keeps the list's memory regions alive until it is destroyed.
    #[inline(always)]
    pub fn post_recv(&self, list: &mut RecvList) -> Result<()> {
        if list.held().by_qp != self.id {
            self.adopt(list);
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: head() links the WRs afresh; their SGEs point into MRs this
        // SRQ now keeps alive until it is destroyed; the provider copies the
        // WRs before returning.
        let rc = unsafe { ffi::ibv_post_srq_recv(self.raw, list.head(), &mut bad) };
        if rc != 0 {
            return Err(VerbsError::from_code(
                Verb::PostSrqRecv,
                format!("SRQ of {} WRs", self.max_wr),
                rc,
            ));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn adopt(&self, list: &mut RecvList) {
        let held = list.held();
        let mut keep = self.keep.lock().unwrap_or_else(|p| p.into_inner());
        for mr in &held.mrs {
            keep.entry(Arc::as_ptr(mr)).or_insert_with(|| mr.clone());
        }
        held.by_qp = self.id;
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        // SAFETY: every QP made with this SRQ holds an Arc to it, so none is
        // alive; the SRQ is destroyed once, before the MRs in `keep` and the
        // PD (fields, dropped after this returns).
        unsafe { ffi::ibv_destroy_srq(self.raw) };
    }
}
