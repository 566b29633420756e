//! Pre-built work-request lists. WRs and SGEs are built once, outside the
//! measured loop; the loop only flips flags, lengths and ids and posts.
//!
//! Pointer discipline: the `next` and `sg_list` fields that link a list are
//! written only by `head()`, right before the list is handed to
//! `ibv_post_send`/`ibv_post_recv`, from one raw base pointer per boxed slice
//! (`as_mut_ptr()`). Safe setters write through the boxes in between, which
//! may invalidate earlier raw pointers; `head()` re-derives them all, so no
//! stale or reference-derived pointer ever reaches the provider.
//!
//! Keep-alive: each list holds `Arc`s to the memory regions and address
//! handles its WRs name ([`Held`]); posting hands clones of them to the QP,
//! which keeps them until it is destroyed (see `QueuePair::post_send`).

use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::ah::AddressHandle;
use super::mr::MemoryRegion;

/// The resources a list's WRs point into, and which QP already holds them.
#[derive(Default)]
pub(crate) struct Held {
    pub(crate) mrs: Vec<Arc<MemoryRegion>>,
    pub(crate) ahs: Vec<Arc<AddressHandle>>,
    /// Id of the QP that already keeps every resource above alive (0: none).
    /// Cleared whenever a resource is added.
    pub(crate) by_qp: u64,
}

impl Held {
    fn add_mr(&mut self, mr: &Arc<MemoryRegion>) {
        if !self.mrs.iter().any(|m| Arc::ptr_eq(m, mr)) {
            self.mrs.push(mr.clone());
            self.by_qp = 0;
        }
    }

    fn add_ah(&mut self, ah: &Arc<AddressHandle>) {
        if !self.ahs.iter().any(|a| Arc::ptr_eq(a, ah)) {
            self.ahs.push(ah.clone());
            self.by_qp = 0;
        }
    }
}

/// A chain of send WRs posted with one `ibv_post_send` (a postlist of 1 or more),
/// each with room for the same number of SGEs.
pub struct SendList {
    // Boxed slices: their heap storage never moves while the list lives.
    pub(super) wrs: Box<[ffi::ibv_send_wr]>,
    /// WR `i` gathers from `sges[i * sges_per_wr..][..num_sge]`.
    pub(super) sges: Box<[ffi::ibv_sge]>,
    pub(super) sges_per_wr: usize,
    /// Room for inline WRs of several SGEs on an extended QP
    /// (`ibv_wr_set_inline_data_list`), filled from `sges` when posting.
    pub(super) bufs: Box<[ffi::ibv_data_buf]>,
    held: Held,
}

// SAFETY: the raw pointers only point into this list's own boxes, and MRs and
// AHs it keeps alive; moving it between threads moves all of that together.
unsafe impl Send for SendList {}

/// What a send WR does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    Write {
        remote_addr: u64,
        rkey: u32,
    },
    WriteImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    Send,
    SendImm {
        imm: u32,
    },
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
    CompareSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
}

impl SendList {
    /// `len` WRs of one SGE each.
    pub fn new(len: usize) -> Self {
        Self::with_sges(len, 1)
    }

    /// `len` WRs with room for `sges_per_wr` SGEs each (gather lists; the QP
    /// must then be built with `max_send_sge` at least that large). Each WR
    /// starts with one SGE; `set_sge` adds more.
    pub fn with_sges(len: usize, sges_per_wr: usize) -> Self {
        assert!(len > 0, "a send list needs at least one WR");
        assert!(sges_per_wr > 0, "a send WR needs room for at least one SGE");
        let wrs: Box<[ffi::ibv_send_wr]> = (0..len)
            .map(|i| {
                // SAFETY: ibv_send_wr is plain data; all-zero is valid.
                let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
                wr.num_sge = 1;
                wr.wr_id = i as u64;
                wr
            })
            .collect();
        let zero = ffi::ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let no_buf = ffi::ibv_data_buf {
            addr: std::ptr::null_mut(),
            length: 0,
        };
        Self {
            wrs,
            sges: vec![zero; len * sges_per_wr].into_boxed_slice(),
            sges_per_wr,
            bufs: vec![no_buf; len * sges_per_wr].into_boxed_slice(),
            held: Held::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Sets WR `i` to `op` on `len` bytes of `mr` at `offset`, as its one SGE
    /// (setup time).
    pub fn set(&mut self, i: usize, op: SendOp, mr: &Arc<MemoryRegion>, offset: usize, len: u32) {
        assert!(
            offset + len as usize <= mr.len(),
            "WR {i}: {len} bytes at {offset} do not fit a {}-byte MR",
            mr.len()
        );
        self.held.add_mr(mr);
        self.sges[i * self.sges_per_wr] = ffi::ibv_sge {
            addr: mr.addr() + offset as u64,
            length: len,
            lkey: mr.lkey(),
        };
        let wr = &mut self.wrs[i];
        wr.num_sge = 1;
        use ffi::ibv_wr_opcode::*;
        let (opcode, imm) = match op {
            SendOp::Write { remote_addr, rkey } => {
                wr.wr.rdma = ffi::rdma_t { remote_addr, rkey };
                (IBV_WR_RDMA_WRITE, None)
            }
            SendOp::WriteImm {
                remote_addr,
                rkey,
                imm,
            } => {
                wr.wr.rdma = ffi::rdma_t { remote_addr, rkey };
                (IBV_WR_RDMA_WRITE_WITH_IMM, Some(imm))
            }
            SendOp::Read { remote_addr, rkey } => {
                wr.wr.rdma = ffi::rdma_t { remote_addr, rkey };
                (IBV_WR_RDMA_READ, None)
            }
            SendOp::Send => (IBV_WR_SEND, None),
            SendOp::SendImm { imm } => (IBV_WR_SEND_WITH_IMM, Some(imm)),
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                wr.wr.atomic = ffi::atomic_t {
                    remote_addr,
                    compare_add: add,
                    swap: 0,
                    rkey,
                };
                (IBV_WR_ATOMIC_FETCH_AND_ADD, None)
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                wr.wr.atomic = ffi::atomic_t {
                    remote_addr,
                    compare_add: compare,
                    swap,
                    rkey,
                };
                (IBV_WR_ATOMIC_CMP_AND_SWP, None)
            }
        };
        wr.opcode = opcode;
        if let Some(imm) = imm {
            wr.imm_data_invalidated_rkey_union = ffi::imm_data_invalidated_rkey_union_t {
                imm_data: imm.to_be(),
            };
        }
    }

    /// Makes `len` bytes of `mr` at `offset` SGE `j` (≥ 1) of WR `i`, after
    /// `set` gave it SGE 0; the WR then gathers SGEs `0..=j` (setup time).
    pub fn set_sge(&mut self, i: usize, j: usize, mr: &Arc<MemoryRegion>, offset: usize, len: u32) {
        assert!(
            (1..self.sges_per_wr).contains(&j),
            "WR {i}: SGE {j} outside 1..{}",
            self.sges_per_wr
        );
        assert!(
            offset + len as usize <= mr.len(),
            "WR {i} SGE {j}: {len} bytes at {offset} do not fit a {}-byte MR",
            mr.len()
        );
        self.held.add_mr(mr);
        self.sges[i * self.sges_per_wr + j] = ffi::ibv_sge {
            addr: mr.addr() + offset as u64,
            length: len,
            lkey: mr.lkey(),
        };
        let wr = &mut self.wrs[i];
        wr.num_sge = wr.num_sge.max(j as i32 + 1);
    }

    /// Sets WR `i` to `op` on `len` bytes of `mr` at `offset`, split over
    /// `sges` contiguous SGEs of near-equal length (see [`sge_split`]); a
    /// 0-byte WR gathers nothing (`num_sge` 0). The list must have room for
    /// `sges` SGEs per WR, and `sges` ≤ `len` unless `len` is 0 (setup time).
    pub fn set_split(
        &mut self,
        i: usize,
        op: SendOp,
        mr: &Arc<MemoryRegion>,
        offset: usize,
        len: u32,
        sges: usize,
    ) {
        assert!(
            (1..=self.sges_per_wr).contains(&sges),
            "WR {i}: {sges} SGEs outside 1..={}",
            self.sges_per_wr
        );
        self.set(i, op, mr, offset, len);
        if len == 0 {
            self.wrs[i].num_sge = 0;
            return;
        }
        for (j, (at, piece)) in sge_split(len, sges).enumerate() {
            if j == 0 {
                self.sges[i * self.sges_per_wr].length = piece;
            } else {
                self.set_sge(i, j, mr, offset + at as usize, piece);
            }
        }
    }

    /// Gives every SGE an lkey that names no memory region (setup time; a
    /// fault the device tests inject). A WR the device gathers through its
    /// lkey then completes with a local protection error, while an inline
    /// WR, whose bytes the provider copies at post time, does not: a witness
    /// of which WRs were posted inline that does not rely on our own flag.
    pub fn spoil_lkeys(&mut self) {
        for sge in self.sges.iter_mut() {
            sge.lkey ^= 0x8000_0000;
        }
    }

    /// Addresses WR `i` to a UD peer (setup time).
    pub fn set_ud_dest(&mut self, i: usize, ah: &Arc<AddressHandle>, qpn: u32, qkey: u32) {
        self.held.add_ah(ah);
        self.wrs[i].wr.ud = ffi::ud_t {
            ah: ah.raw(),
            remote_qpn: qpn,
            remote_qkey: qkey,
        };
    }

    #[inline(always)]
    fn flag(&mut self, i: usize, bit: u32, on: bool) {
        let f = &mut self.wrs[i].send_flags;
        *f = if on { *f | bit } else { *f & !bit };
    }

    #[inline(always)]
    pub fn set_signaled(&mut self, i: usize, on: bool) {
        self.flag(i, ffi::ibv_send_flags::IBV_SEND_SIGNALED.0, on);
    }

    #[inline(always)]
    pub fn set_inline(&mut self, i: usize, on: bool) {
        self.flag(i, ffi::ibv_send_flags::IBV_SEND_INLINE.0, on);
    }

    #[inline(always)]
    pub fn set_wr_id(&mut self, i: usize, id: u64) {
        self.wrs[i].wr_id = id;
    }

    /// Points a WRITE or READ WR at another remote address (same rkey).
    #[inline(always)]
    pub fn set_remote_addr(&mut self, i: usize, addr: u64) {
        self.wrs[i].wr.rdma.remote_addr = addr;
    }

    /// Sets the compare and swap operands of a CAS WR.
    #[inline(always)]
    pub fn set_compare_swap(&mut self, i: usize, compare: u64, swap: u64) {
        self.wrs[i].wr.atomic.compare_add = compare;
        self.wrs[i].wr.atomic.swap = swap;
    }

    pub(crate) fn held(&mut self) -> &mut Held {
        &mut self.held
    }

    /// Links the chain afresh from the slices' base pointers and returns its
    /// first WR, for `ibv_post_send` (see the module doc).
    #[inline(always)]
    pub(crate) fn head(&mut self) -> *mut ffi::ibv_send_wr {
        let n = self.wrs.len();
        let wr_base = self.wrs.as_mut_ptr();
        let sge_base = self.sges.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < n = wrs.len() and i * sges_per_wr < sges.len(); both
            // pointers derive from the base pointers taken above, after every
            // write through the boxes.
            unsafe {
                let wr = wr_base.add(i);
                (*wr).sg_list = sge_base.add(i * self.sges_per_wr);
                (*wr).next = if i + 1 < n {
                    wr_base.add(i + 1)
                } else {
                    std::ptr::null_mut()
                };
            }
        }
        wr_base
    }
}

/// Splits `len` bytes into `n` contiguous pieces (offset, length) whose
/// lengths differ by at most one, the longer ones first. Each piece has at
/// least one byte when `n` ≤ `len`.
pub fn sge_split(len: u32, n: usize) -> impl Iterator<Item = (u32, u32)> {
    let n = n.max(1) as u32;
    let (base, extra) = (len / n, len % n);
    (0..n).map(move |j| {
        let at = j * base + j.min(extra);
        (at, base + u32::from(j < extra))
    })
}

/// A chain of receive WRs posted with one `ibv_post_recv`, one SGE each.
pub struct RecvList {
    wrs: Box<[ffi::ibv_recv_wr]>,
    sges: Box<[ffi::ibv_sge]>,
    held: Held,
}

// SAFETY: as for SendList.
unsafe impl Send for RecvList {}

impl RecvList {
    /// `len` receives into consecutive `slot`-byte slots of `mr` from `offset`;
    /// WR ids are `first_id + i`.
    pub fn new(
        mr: &Arc<MemoryRegion>,
        offset: usize,
        slot: u32,
        len: usize,
        first_id: u64,
    ) -> Self {
        assert!(len > 0, "a receive list needs at least one WR");
        assert!(
            offset + slot as usize * len <= mr.len(),
            "{len} receive slots of {slot} bytes do not fit a {}-byte MR",
            mr.len()
        );
        let sges = (0..len)
            .map(|i| ffi::ibv_sge {
                addr: mr.addr() + (offset + i * slot as usize) as u64,
                length: slot,
                lkey: mr.lkey(),
            })
            .collect();
        let mut held = Held::default();
        held.add_mr(mr);
        Self::from_parts(sges, first_id, held)
    }

    /// One receive WR per SGE in `sges` (which must point into `held`'s MRs).
    fn from_parts(sges: Box<[ffi::ibv_sge]>, first_id: u64, held: Held) -> Self {
        let wrs = (0..sges.len())
            .map(|i| ffi::ibv_recv_wr {
                wr_id: first_id + i as u64,
                next: std::ptr::null_mut(),
                sg_list: std::ptr::null_mut(),
                num_sge: 1,
            })
            .collect();
        Self { wrs, sges, held }
    }

    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub(crate) fn held(&mut self) -> &mut Held {
        &mut self.held
    }

    /// Links the chain afresh from the slices' base pointers and returns its
    /// first WR, for `ibv_post_recv` (see the module doc).
    #[inline(always)]
    pub(crate) fn head(&mut self) -> *mut ffi::ibv_recv_wr {
        let n = self.wrs.len();
        let wr_base = self.wrs.as_mut_ptr();
        let sge_base = self.sges.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < n = wrs.len() = sges.len(); both pointers derive from
            // the base pointers taken above.
            unsafe {
                let wr = wr_base.add(i);
                (*wr).sg_list = sge_base.add(i);
                (*wr).next = if i + 1 < n {
                    wr_base.add(i + 1)
                } else {
                    std::ptr::null_mut()
                };
            }
        }
        wr_base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks a linked chain from `head` and returns (WR, SGE) addresses.
    fn walk_send(head: *mut ffi::ibv_send_wr) -> Vec<(usize, usize, i32)> {
        let mut out = Vec::new();
        let mut p = head;
        while !p.is_null() {
            // SAFETY: `p` is `head` or a `next` of a list that outlives this walk.
            let wr = unsafe { &*p };
            out.push((p as usize, wr.sg_list as usize, wr.num_sge));
            p = wr.next;
        }
        out
    }

    #[test]
    fn send_list_head_links_each_wr_to_the_next_and_to_its_own_sges() {
        for (len, per) in [(1, 1), (4, 1), (3, 2), (5, 3)] {
            let mut list = SendList::with_sges(len, per);
            // Setters write through the boxes in between posts.
            for i in 0..len {
                list.set_signaled(i, i % 2 == 0);
                list.set_wr_id(i, 100 + i as u64);
            }
            let head = list.head();
            let chain = walk_send(head);
            let wr0 = list.wrs.as_ptr() as usize;
            let sge0 = list.sges.as_ptr() as usize;
            let (wsz, ssz) = (
                std::mem::size_of::<ffi::ibv_send_wr>(),
                std::mem::size_of::<ffi::ibv_sge>(),
            );
            assert_eq!(chain.len(), len, "chain ends after the last WR");
            assert_eq!(head as usize, wr0);
            for (i, &(wr, sge, num)) in chain.iter().enumerate() {
                assert_eq!(wr, wr0 + i * wsz, "WR {i} is element {i}");
                assert_eq!(sge, sge0 + i * per * ssz, "WR {i} gathers its own SGEs");
                assert_eq!(num, 1);
            }
            assert_eq!(list.wrs[0].wr_id, 100);
            // Re-linking is idempotent.
            assert_eq!(walk_send(list.head()), chain);
        }
    }

    #[test]
    fn sge_split_covers_the_payload_in_near_equal_contiguous_pieces() {
        for (len, n) in [
            (1, 1),
            (4, 4),
            (5, 4),
            (64, 4),
            (1024, 3),
            (7, 2),
            (4096, 30),
        ] {
            let pieces: Vec<_> = sge_split(len, n).collect();
            assert_eq!(pieces.len(), n, "{len}/{n}");
            let mut next = 0;
            for &(at, l) in &pieces {
                assert_eq!(at, next, "{len}/{n}: pieces are contiguous");
                assert!(l >= 1, "{len}/{n}: every SGE carries a byte");
                next = at + l;
            }
            assert_eq!(next, len, "{len}/{n}: pieces cover the payload");
            let (min, max) = pieces
                .iter()
                .fold((u32::MAX, 0), |(a, b), &(_, l)| (a.min(l), b.max(l)));
            assert!(max - min <= 1, "{len}/{n}: {pieces:?}");
        }
        assert_eq!(
            sge_split(5, 4).collect::<Vec<_>>(),
            [(0, 2), (2, 1), (3, 1), (4, 1)]
        );
    }

    #[test]
    fn recv_list_head_links_each_wr_to_the_next_and_to_its_own_sge() {
        let sges: Box<[ffi::ibv_sge]> = (0..4u64)
            .map(|i| ffi::ibv_sge {
                addr: 0x1000 + i * 64,
                length: 64,
                lkey: 7,
            })
            .collect();
        let mut list = RecvList::from_parts(sges, 10, Held::default());
        let mut p = list.head();
        let mut seen = 0;
        while !p.is_null() {
            // SAFETY: `p` walks the chain of `list`, alive here.
            let wr = unsafe { &*p };
            // SAFETY: sg_list points at this WR's SGE inside `list`.
            let sge = unsafe { &*wr.sg_list };
            assert_eq!(wr.wr_id, 10 + seen);
            assert_eq!(
                sge.addr,
                0x1000 + seen * 64,
                "WR {seen} points at its own SGE"
            );
            assert_eq!(wr.num_sge, 1);
            seen += 1;
            p = wr.next;
        }
        assert_eq!(seen, 4);
    }
}
