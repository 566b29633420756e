//! Registered memory: a page-aligned buffer this process owns, registered with
//! the access rights a test needs and no more.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
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

/// A buffer registered with the NIC.
///
/// The NIC reads and writes it behind the compiler's back, and `Arc<MemoryRegion>`
/// is shared between threads, so every CPU access goes through atomic views
/// (`AtomicU8`/`AtomicU64`) of the raw buffer: two threads touching the same
/// byte is a well-defined race, never a data race. Nothing hands out `&[u8]`
/// or `&mut [u8]` over the buffer.
pub struct MemoryRegion {
    raw: *mut ffi::ibv_mr,
    buf: *mut u8,
    layout: Layout,
    /// Set when the buffer is a huge-page mapping (freed by dropping it)
    /// rather than a heap allocation of `layout`.
    huge: Option<crate::sys::HugePages>,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: the buffer is owned by this struct and the CPU only reaches it
// through atomic operations (see the type's doc); the NIC accessing it
// concurrently is the point of registered memory.
unsafe impl Send for MemoryRegion {}
// SAFETY: see Send above.
unsafe impl Sync for MemoryRegion {}

const PAGE: usize = 4096;

impl MemoryRegion {
    /// A buffer of at least `len` bytes from 2 MiB huge pages (`--hugepages`),
    /// registered like [`MemoryRegion::new`]'s.
    pub fn new_huge(pd: &Arc<ProtectionDomain>, len: usize, access: Access) -> Result<Arc<Self>> {
        let pages = crate::sys::HugePages::map(len).map_err(|e| {
            VerbsError::Invalid(format!(
                "--hugepages: cannot map {len} bytes of 2 MiB huge pages ({e}; {} free): reserve more in {}",
                crate::sys::free_huge_pages().map_or("?".into(), |n| n.to_string()),
                crate::sys::NR_HUGEPAGES
            ))
        })?;
        let size = pages.bytes();
        let layout = Layout::from_size_align(size, PAGE)
            .map_err(|e| VerbsError::Invalid(format!("buffer of {len} bytes: {e}")))?;
        let buf = pages.as_ptr();
        // SAFETY: `buf` points to `size` mapped bytes that `pages` owns until
        // Drop, which deregisters before unmapping.
        let raw = unsafe { ffi::ibv_reg_mr(pd.raw(), buf.cast(), size, access.bits() as i32) };
        if raw.is_null() {
            return Err(VerbsError::last_os(
                Verb::RegMr,
                format!("{} bytes of huge pages on {}", size, pd.context().name()),
            ));
        }
        Ok(Arc::new(Self {
            raw,
            buf,
            layout,
            huge: Some(pages),
            _pd: pd.clone(),
        }))
    }

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
            huge: None,
            _pd: pd.clone(),
        }))
    }

    /// Whether the buffer comes from huge pages.
    pub fn is_huge(&self) -> bool {
        self.huge.is_some()
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

    /// The byte at `offset` as an atomic (bounds checked).
    #[inline(always)]
    fn byte(&self, offset: usize) -> &AtomicU8 {
        self.check(offset, 1);
        // SAFETY: in bounds (checked), so valid for reads and writes for as
        // long as `self` lives (the buffer is freed only in Drop); AtomicU8
        // has alignment 1; and the CPU only ever accesses the buffer atomically.
        unsafe { AtomicU8::from_ptr(self.buf.add(offset)) }
    }

    /// The aligned 8-byte word at `offset` as an atomic (bounds and alignment checked).
    #[inline(always)]
    fn word(&self, offset: usize) -> &AtomicU64 {
        self.check(offset, 8);
        assert!(offset % 8 == 0, "unaligned u64 at {offset}");
        // SAFETY: in bounds (checked) and 8-byte aligned (the buffer is page
        // aligned and `offset` a multiple of 8); valid for as long as `self`
        // lives; the CPU only ever accesses the buffer atomically.
        unsafe { AtomicU64::from_ptr(self.buf.add(offset).cast::<u64>()) }
    }

    /// Reads one byte the NIC may have written; used to poll for a peer's WRITE.
    #[inline(always)]
    pub fn read_u8(&self, offset: usize) -> u8 {
        // Acquire: once the marker byte of a peer's WRITE is seen, later
        // reads of the payload must not be hoisted above this load (the NIC
        // places a WRITE's bytes in order, the last one last, as perftest
        // also assumes).
        self.byte(offset).load(Ordering::Acquire)
    }

    /// Writes one byte (a marker the NIC will send, or a reset between points).
    #[inline(always)]
    pub fn write_u8(&self, offset: usize, value: u8) {
        // Release: a thread that Acquire-reads this byte also sees what was
        // written before it. For the NIC, the provider's barrier before the
        // doorbell in ibv_post_send orders this store before the DMA read.
        self.byte(offset).store(value, Ordering::Release)
    }

    /// Reads an aligned 8-byte word (an atomic target or result).
    #[inline(always)]
    pub fn read_u64(&self, offset: usize) -> u64 {
        // Acquire, as for read_u8: the word may have been written by the NIC
        // (a READ or atomic result) and is read after its completion.
        self.word(offset).load(Ordering::Acquire)
    }

    /// Fills `len` bytes at `offset` with `byte` (setup, not the measured loop):
    /// byte stores up to 8-byte alignment, word stores in between.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) {
        self.check(offset, len);
        let end = offset + len;
        let mut at = offset;
        // Relaxed: setup before a point; the barrier or the post that follows
        // (a lock, a channel message, the doorbell) publishes these stores.
        while at < end && at % 8 != 0 {
            self.byte(at).store(byte, Ordering::Relaxed);
            at += 1;
        }
        let pattern = u64::from_ne_bytes([byte; 8]);
        while at + 8 <= end {
            self.word(at).store(pattern, Ordering::Relaxed);
            at += 8;
        }
        while at < end {
            self.byte(at).store(byte, Ordering::Relaxed);
            at += 1;
        }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: every QP that was posted a WR naming this MR keeps an Arc
        // to it until the QP is destroyed, so no WR can still reference it;
        // no atomic view outlives `&self`; deregister before freeing.
        unsafe {
            ffi::ibv_dereg_mr(self.raw);
            if self.huge.is_none() {
                dealloc(self.buf, self.layout);
            }
        }
        // A huge-page buffer is unmapped when `huge` drops, after deregistration.
    }
}
