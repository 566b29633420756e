//! Pre-built work-request lists. WRs and SGEs are built once, outside the
//! measured loop; the loop only flips flags, lengths and ids and posts.

use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::ah::AddressHandle;
use super::mr::MemoryRegion;

/// A chain of send WRs posted with one `ibv_post_send` (a postlist of 1 or more).
pub struct SendList {
    // Boxed slices: their heap storage never moves, so the `next`/`sg_list`
    // pointers linking them stay valid for the list's life.
    wrs: Box<[ffi::ibv_send_wr]>,
    sges: Box<[ffi::ibv_sge]>,
    mrs: Vec<Arc<MemoryRegion>>,
    ahs: Vec<Arc<AddressHandle>>,
}

// SAFETY: the raw pointers only point into this list's own boxes, MRs and AHs
// it keeps alive; moving it between threads moves all of that together.
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
    pub fn new(len: usize) -> Self {
        assert!(len > 0, "a send list needs at least one WR");
        // SAFETY: ibv_send_wr and ibv_sge are plain data; all-zero is valid.
        let zero_wr = || unsafe { std::mem::zeroed::<ffi::ibv_send_wr>() };
        let mut wrs: Box<[ffi::ibv_send_wr]> = (0..len).map(|_| zero_wr()).collect();
        let mut sges: Box<[ffi::ibv_sge]> = vec![
            ffi::ibv_sge {
                addr: 0,
                length: 0,
                lkey: 0
            };
            len
        ]
        .into_boxed_slice();
        let wr_base = wrs.as_mut_ptr();
        for i in 0..len {
            wrs[i].sg_list = &mut sges[i];
            wrs[i].num_sge = 1;
            wrs[i].wr_id = i as u64;
            wrs[i].next = if i + 1 < len {
                // SAFETY: i + 1 < len, inside the boxed slice.
                unsafe { wr_base.add(i + 1) }
            } else {
                std::ptr::null_mut()
            };
        }
        Self {
            wrs,
            sges,
            mrs: Vec::new(),
            ahs: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Sets WR `i` to `op` on `len` bytes of `mr` at `offset` (setup time).
    pub fn set(&mut self, i: usize, op: SendOp, mr: &Arc<MemoryRegion>, offset: usize, len: u32) {
        assert!(
            offset + len as usize <= mr.len(),
            "WR {i}: {len} bytes at {offset} do not fit a {}-byte MR",
            mr.len()
        );
        if !self.mrs.iter().any(|m| Arc::ptr_eq(m, mr)) {
            self.mrs.push(mr.clone());
        }
        self.sges[i] = ffi::ibv_sge {
            addr: mr.addr() + offset as u64,
            length: len,
            lkey: mr.lkey(),
        };
        let wr = &mut self.wrs[i];
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

    /// Addresses WR `i` to a UD peer (setup time).
    pub fn set_ud_dest(&mut self, i: usize, ah: &Arc<AddressHandle>, qpn: u32, qkey: u32) {
        if !self.ahs.iter().any(|a| Arc::ptr_eq(a, ah)) {
            self.ahs.push(ah.clone());
        }
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

    /// Sets the compare and swap operands of a CAS WR.
    #[inline(always)]
    pub fn set_compare_swap(&mut self, i: usize, compare: u64, swap: u64) {
        self.wrs[i].wr.atomic.compare_add = compare;
        self.wrs[i].wr.atomic.swap = swap;
    }

    pub(crate) fn head(&mut self) -> *mut ffi::ibv_send_wr {
        self.wrs.as_mut_ptr()
    }
}

/// A chain of receive WRs posted with one `ibv_post_recv`.
pub struct RecvList {
    wrs: Box<[ffi::ibv_recv_wr]>,
    _sges: Box<[ffi::ibv_sge]>,
    _mr: Arc<MemoryRegion>,
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
        let mut sges: Box<[ffi::ibv_sge]> = (0..len)
            .map(|i| ffi::ibv_sge {
                addr: mr.addr() + (offset + i * slot as usize) as u64,
                length: slot,
                lkey: mr.lkey(),
            })
            .collect();
        let mut wrs: Box<[ffi::ibv_recv_wr]> = (0..len)
            .map(|i| ffi::ibv_recv_wr {
                wr_id: first_id + i as u64,
                next: std::ptr::null_mut(),
                sg_list: std::ptr::null_mut(),
                num_sge: 1,
            })
            .collect();
        let base = wrs.as_mut_ptr();
        for i in 0..len {
            wrs[i].sg_list = &mut sges[i];
            if i + 1 < len {
                // SAFETY: i + 1 < len, inside the boxed slice.
                wrs[i].next = unsafe { base.add(i + 1) };
            }
        }
        Self {
            wrs,
            _sges: sges,
            _mr: mr.clone(),
        }
    }

    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub(crate) fn head(&mut self) -> *mut ffi::ibv_recv_wr {
        self.wrs.as_mut_ptr()
    }
}
