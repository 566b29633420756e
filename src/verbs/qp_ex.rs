//! The extended post API (`--post-api ex`): a QP made with
//! `ibv_create_qp_ex` asking for a set of send operations, posted with
//! `ibv_wr_start` … `ibv_wr_<op>` … `ibv_wr_complete` instead of
//! `ibv_post_send`.
//!
//! The `ibv_wr_*` calls jump through provider function pointers without a
//! check, and a provider fills in only the operations it was asked for, so
//! every WR's operation is checked against the set requested at creation
//! before the batch starts: an operation outside it is an error, never a call.
//!
//! The same prebuilt `SendList` serves both APIs: a chain of WRs (a postlist)
//! becomes one start…complete batch, in order, with each WR's id, flags,
//! operation, UD address and SGEs (or inline data) read from the list.

use rdma_mummy_sys as ffi;

use super::error::{Result, Verb, VerbsError};
use super::wr::{SendList, SendOp};

/// A set of send operations requested for (and so callable on) an extended QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendOps(u64);

impl SendOps {
    pub const NONE: SendOps = SendOps(0);

    /// The operation `op` posts.
    pub fn of(op: &SendOp) -> SendOps {
        use ffi::ibv_qp_create_send_ops_flags as f;
        SendOps(match op {
            SendOp::Write { .. } => f::IBV_QP_EX_WITH_RDMA_WRITE.0,
            SendOp::WriteImm { .. } => f::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM.0,
            SendOp::Read { .. } => f::IBV_QP_EX_WITH_RDMA_READ.0,
            SendOp::Send => f::IBV_QP_EX_WITH_SEND.0,
            SendOp::SendImm { .. } => f::IBV_QP_EX_WITH_SEND_WITH_IMM.0,
            SendOp::FetchAdd { .. } => f::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD.0,
            SendOp::CompareSwap { .. } => f::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP.0,
        } as u64)
    }

    /// The operation a classic WR's opcode names (0 for one we never build).
    #[inline(always)]
    fn of_opcode(opcode: ffi::ibv_wr_opcode::Type) -> u64 {
        use ffi::ibv_qp_create_send_ops_flags as f;
        use ffi::ibv_wr_opcode::*;
        (match opcode {
            IBV_WR_RDMA_WRITE => f::IBV_QP_EX_WITH_RDMA_WRITE.0,
            IBV_WR_RDMA_WRITE_WITH_IMM => f::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM.0,
            IBV_WR_RDMA_READ => f::IBV_QP_EX_WITH_RDMA_READ.0,
            IBV_WR_SEND => f::IBV_QP_EX_WITH_SEND.0,
            IBV_WR_SEND_WITH_IMM => f::IBV_QP_EX_WITH_SEND_WITH_IMM.0,
            IBV_WR_ATOMIC_FETCH_AND_ADD => f::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD.0,
            IBV_WR_ATOMIC_CMP_AND_SWP => f::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP.0,
            _ => 0,
        }) as u64
    }

    pub fn with(self, other: SendOps) -> SendOps {
        SendOps(self.0 | other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn bits(self) -> u64 {
        self.0
    }

    /// The operations' names, for messages.
    pub fn names(self) -> String {
        use ffi::ibv_qp_create_send_ops_flags as f;
        let all = [
            (f::IBV_QP_EX_WITH_RDMA_WRITE.0, "RDMA_WRITE"),
            (
                f::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM.0,
                "RDMA_WRITE_WITH_IMM",
            ),
            (f::IBV_QP_EX_WITH_RDMA_READ.0, "RDMA_READ"),
            (f::IBV_QP_EX_WITH_SEND.0, "SEND"),
            (f::IBV_QP_EX_WITH_SEND_WITH_IMM.0, "SEND_WITH_IMM"),
            (
                f::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD.0,
                "ATOMIC_FETCH_AND_ADD",
            ),
            (f::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP.0, "ATOMIC_CMP_AND_SWP"),
        ];
        let names: Vec<&str> = all
            .iter()
            .filter(|(bit, _)| self.0 & *bit as u64 != 0)
            .map(|&(_, n)| n)
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join("|")
        }
    }
}

/// Posts every WR of `list` as one `ibv_wr_start`…`ibv_wr_complete` batch.
/// `what` names the QP in errors.
///
/// # Safety
/// `qpx` is the extended view of a live QP created with exactly the
/// operations `granted`, used by this thread only, and every SGE, inline
/// buffer and address handle `list` names stays alive until the QP is
/// destroyed (the QP's keep-alive set holds them).
#[inline(always)]
pub(super) unsafe fn post(
    qpx: *mut ffi::ibv_qp_ex,
    granted: SendOps,
    list: &mut SendList,
    what: impl Fn() -> String,
) -> Result<()> {
    // Check first, so a batch never starts with an operation the provider
    // may not have filled in.
    for wr in list.wrs.iter() {
        let op = SendOps::of_opcode(wr.opcode);
        if op == 0 || granted.0 & op != op {
            return Err(not_requested(wr.opcode, granted, what()));
        }
    }
    let per = list.sges_per_wr;
    let inline_bit = ffi::ibv_send_flags::IBV_SEND_INLINE.0;
    let ud = (*qpx).qp_base.qp_type == ffi::ibv_qp_type::IBV_QPT_UD;
    // SAFETY (whole block): the caller's contract; each ibv_wr_<op> below is
    // one the check above found in `granted`; the setters after it (UD
    // address, SGEs, inline data) are part of every extended QP's interface.
    ffi::ibv_wr_start(qpx);
    for i in 0..list.wrs.len() {
        let wr = &list.wrs[i];
        (*qpx).wr_id = wr.wr_id;
        // Inline is also a data setter in this API (below); the flag stays,
        // as perftest passes it (rxe reads it).
        (*qpx).wr_flags = wr.send_flags;
        use ffi::ibv_wr_opcode::*;
        match wr.opcode {
            IBV_WR_RDMA_WRITE => {
                ffi::ibv_wr_rdma_write(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr)
            }
            IBV_WR_RDMA_WRITE_WITH_IMM => ffi::ibv_wr_rdma_write_imm(
                qpx,
                wr.wr.rdma.rkey,
                wr.wr.rdma.remote_addr,
                wr.imm_data_invalidated_rkey_union.imm_data,
            ),
            IBV_WR_RDMA_READ => ffi::ibv_wr_rdma_read(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr),
            IBV_WR_SEND => ffi::ibv_wr_send(qpx),
            IBV_WR_SEND_WITH_IMM => {
                ffi::ibv_wr_send_imm(qpx, wr.imm_data_invalidated_rkey_union.imm_data)
            }
            IBV_WR_ATOMIC_FETCH_AND_ADD => ffi::ibv_wr_atomic_fetch_add(
                qpx,
                wr.wr.atomic.rkey,
                wr.wr.atomic.remote_addr,
                wr.wr.atomic.compare_add,
            ),
            // The check above admits nothing else.
            _ => ffi::ibv_wr_atomic_cmp_swp(
                qpx,
                wr.wr.atomic.rkey,
                wr.wr.atomic.remote_addr,
                wr.wr.atomic.compare_add,
                wr.wr.atomic.swap,
            ),
        }
        if ud {
            ffi::ibv_wr_set_ud_addr(qpx, wr.wr.ud.ah, wr.wr.ud.remote_qpn, wr.wr.ud.remote_qkey);
        }
        let n = wr.num_sge.max(0) as usize;
        let inline = wr.send_flags & inline_bit != 0;
        let sges = &list.sges[i * per..i * per + n];
        match (inline, n) {
            (true, 1) => ffi::ibv_wr_set_inline_data(
                qpx,
                sges[0].addr as *mut std::ffi::c_void,
                sges[0].length as usize,
            ),
            (true, _) => {
                let bufs = &mut list.bufs[i * per..i * per + n];
                for (b, s) in bufs.iter_mut().zip(sges) {
                    b.addr = s.addr as *mut std::ffi::c_void;
                    b.length = s.length as usize;
                }
                ffi::ibv_wr_set_inline_data_list(qpx, n, bufs.as_ptr());
            }
            (false, 1) => ffi::ibv_wr_set_sge(qpx, sges[0].lkey, sges[0].addr, sges[0].length),
            (false, _) => ffi::ibv_wr_set_sge_list(qpx, n, sges.as_ptr()),
        }
    }
    let rc = ffi::ibv_wr_complete(qpx);
    if rc != 0 {
        return Err(VerbsError::from_code(Verb::WrComplete, what(), rc));
    }
    Ok(())
}

#[cold]
fn not_requested(opcode: ffi::ibv_wr_opcode::Type, granted: SendOps, qp: String) -> VerbsError {
    VerbsError::Invalid(format!(
        "{qp}: work request opcode {opcode} is not among the send operations requested when \
         the extended QP was created ({}); not posted",
        granted.names()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_name_what_they_hold() {
        let w = SendOps::of(&SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        });
        let s = SendOps::of(&SendOp::SendImm { imm: 1 });
        assert_eq!(w.with(s).names(), "RDMA_WRITE|SEND_WITH_IMM");
        assert_eq!(SendOps::NONE.names(), "none");
        assert!(SendOps::NONE.is_empty());
        assert_eq!(
            SendOps::of_opcode(ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE),
            w.bits()
        );
    }

    #[test]
    fn an_operation_not_requested_is_refused_before_any_provider_call() {
        let mut list = SendList::new(2);
        list.wrs[1].opcode = ffi::ibv_wr_opcode::IBV_WR_RDMA_READ;
        let granted = SendOps::of(&SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        });
        // A null QP: reaching any provider call would crash, so passing
        // proves the check refused the batch before it started.
        // SAFETY: the check fails on WR 1 before `qpx` is dereferenced.
        let e = unsafe { post(std::ptr::null_mut(), granted, &mut list, || "QP 7".into()) }
            .unwrap_err();
        assert!(
            e.to_string().contains("requested when the extended QP"),
            "{e}"
        );
    }
}
