//! Registered memory: a page-aligned buffer this process owns, registered with
//! the access rights a test needs and no more.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::error::{Result, Verb, VerbsError};
use super::pd::ProtectionDomain;

/// Remote and local rights for a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    pub local_write: bool,
    pub remote_write: bool,
    pub remote_read: bool,
    pub remote_atomic: bool,
}

impl Access {
    pub const LOCAL: Access = Access {
        local_write: true,
        remote_write: false,
        remote_read: false,
        remote_atomic: false,
    };

    pub(crate) fn bits(self) -> u32 {
        let mut bits = 0;
        if self.local_write {
            bits |= ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        }
        if self.remote_write {
            bits |= ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        }
        if self.remote_read {
            bits |= ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
        }
        if self.remote_atomic {
            bits |= ffi::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0;
        }
        bits
    }
}

/// A buffer registered with the NIC. The NIC reads and writes it behind the
/// compiler's back, so all access goes through volatile reads and writes.
pub struct MemoryRegion {
    raw: *mut ffi::ibv_mr,
    buf: *mut u8,
    layout: Layout,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: the buffer is owned by this struct and only accessed with volatile
// operations; concurrent NIC access is the point of registered memory.
unsafe impl Send for MemoryRegion {}
// SAFETY: see Send above.
unsafe impl Sync for MemoryRegion {}

const PAGE: usize = 4096;

impl MemoryRegion {
    pub fn new(pd: &Arc<ProtectionDomain>, len: usize, access: Access) -> Result<Arc<Self>> {
        let size = len.max(64).div_ceil(PAGE) * PAGE;
        let layout = Layout::from_size_align(size, PAGE)
            .map_err(|e| VerbsError::Invalid(format!("buffer of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let buf = unsafe { alloc_zeroed(layout) };
        if buf.is_null() {
            return Err(VerbsError::Invalid(format!(
                "cannot allocate a {size}-byte buffer"
            )));
        }
        // SAFETY: `buf` points to `size` bytes we own until Drop, which
        // deregisters before freeing.
        let raw = unsafe { ffi::ibv_reg_mr(pd.raw(), buf.cast(), size, access.bits() as i32) };
        if raw.is_null() {
            let err = VerbsError::last_os(
                Verb::RegMr,
                format!("{} bytes on {}", size, pd.context().name()),
            );
            // SAFETY: allocated above with this layout and not registered.
            unsafe { dealloc(buf, layout) };
            return Err(err);
        }
        Ok(Arc::new(Self {
            raw,
            buf,
            layout,
            _pd: pd.clone(),
        }))
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The address remote peers use (and local SGEs carry).
    pub fn addr(&self) -> u64 {
        self.buf as u64
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: `raw` is a live MR.
        unsafe { (*self.raw).lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: `raw` is a live MR.
        unsafe { (*self.raw).rkey }
    }

    #[inline(always)]
    fn check(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len()),
            "offset {offset}+{len} outside a {}-byte region",
            self.len()
        );
    }

    /// Reads one byte the NIC may have written; used to poll for a peer's WRITE.
    #[inline(always)]
    pub fn read_u8(&self, offset: usize) -> u8 {
        self.check(offset, 1);
        // SAFETY: in bounds (checked); volatile because the NIC writes it.
        unsafe { std::ptr::read_volatile(self.buf.add(offset)) }
    }

    #[inline(always)]
    pub fn write_u8(&self, offset: usize, value: u8) {
        self.check(offset, 1);
        // SAFETY: in bounds (checked); volatile so the store is not elided.
        unsafe { std::ptr::write_volatile(self.buf.add(offset), value) }
    }

    /// Reads an aligned 8-byte word (an atomic target or result).
    #[inline(always)]
    pub fn read_u64(&self, offset: usize) -> u64 {
        self.check(offset, 8);
        assert!(offset % 8 == 0, "unaligned u64 at {offset}");
        // SAFETY: in bounds and 8-byte aligned (the buffer is page aligned).
        unsafe { std::ptr::read_volatile(self.buf.add(offset).cast::<u64>()) }
    }

    /// Fills `len` bytes at `offset` with `byte` (setup, not the measured loop).
    pub fn fill(&self, offset: usize, len: usize, byte: u8) {
        self.check(offset, len);
        // SAFETY: in bounds (checked).
        unsafe { std::ptr::write_bytes(self.buf.add(offset), byte, len) }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: QPs that post with this MR keep an Arc to it (via their WR
        // lists), so no WR can still reference it; deregister before freeing.
        unsafe {
            ffi::ibv_dereg_mr(self.raw);
            dealloc(self.buf, self.layout);
        }
    }
}
