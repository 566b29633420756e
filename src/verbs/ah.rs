//! Address handles: where a UD send goes.

use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::addr::{ah_attr, Endpoint, PortConfig};
use super::error::{Result, Verb, VerbsError};
use super::pd::ProtectionDomain;

pub struct AddressHandle {
    raw: *mut ffi::ibv_ah,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: an AH is immutable after creation and usable from any thread.
unsafe impl Send for AddressHandle {}
// SAFETY: see Send above.
unsafe impl Sync for AddressHandle {}

impl AddressHandle {
    pub fn new(
        pd: &Arc<ProtectionDomain>,
        port: &PortConfig,
        remote: &Endpoint,
    ) -> Result<Arc<Self>> {
        let mut attr = ah_attr(port, remote);
        // SAFETY: `attr` is fully initialised; the PD is alive.
        let raw = unsafe { ffi::ibv_create_ah(pd.raw(), &mut attr) };
        if raw.is_null() {
            return Err(VerbsError::last_os(
                Verb::CreateAh,
                format!("{} to QP {}", pd.context().name(), remote.qpn),
            ));
        }
        Ok(Arc::new(Self {
            raw,
            _pd: pd.clone(),
        }))
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_ah {
        self.raw
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: every QP that was posted a WR naming this AH keeps an Arc
        // to it until the QP is destroyed.
        unsafe { ffi::ibv_destroy_ah(self.raw) };
    }
}
