//! Queue pairs: a builder, the RESET→INIT→RTR→RTS transitions, and posting.

use std::mem::MaybeUninit;
use std::sync::Arc;

use rdma_mummy_sys as ffi;
use serde::{Deserialize, Serialize};

use super::addr::{ah_attr, Endpoint, PortConfig};
use super::cq::CompletionQueue;
use super::device::{mtu_enum, Gid};
use super::error::{Result, Verb, VerbsError};
use super::mr::Access;
use super::pd::ProtectionDomain;
use super::wr::{RecvList, SendList};

/// Transport service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Rc,
    Uc,
    Ud,
}

impl Transport {
    fn raw(self) -> ffi::ibv_qp_type::Type {
        match self {
            Transport::Rc => ffi::ibv_qp_type::IBV_QPT_RC,
            Transport::Uc => ffi::ibv_qp_type::IBV_QPT_UC,
            Transport::Ud => ffi::ibv_qp_type::IBV_QPT_UD,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Rc => "rc",
            Transport::Uc => "uc",
            Transport::Ud => "ud",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The well-known Q_Key all rdma-bench UD QPs share.
pub const UD_QKEY: u32 = 0x1111_1111;

pub struct QueuePairBuilder<'a> {
    pd: &'a Arc<ProtectionDomain>,
    transport: Transport,
    send_cq: &'a Arc<CompletionQueue>,
    recv_cq: &'a Arc<CompletionQueue>,
    max_send_wr: u32,
    max_recv_wr: u32,
    max_inline: u32,
}

impl<'a> QueuePairBuilder<'a> {
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.max_send_wr = n;
        self
    }

    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.max_recv_wr = n;
        self
    }

    pub fn max_inline(mut self, n: u32) -> Self {
        self.max_inline = n;
        self
    }

    pub fn build(self) -> Result<QueuePair> {
        // SAFETY: all-zero is a valid ibv_qp_init_attr; the fields we need are set below.
        let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = self.send_cq.raw();
        init.recv_cq = self.recv_cq.raw();
        init.qp_type = self.transport.raw();
        init.sq_sig_all = 0;
        init.cap.max_send_wr = self.max_send_wr.max(1);
        init.cap.max_recv_wr = self.max_recv_wr.max(1);
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = self.max_inline;
        // SAFETY: the PD and CQs are alive (we keep Arcs to them in the QP).
        let raw = unsafe { ffi::ibv_create_qp(self.pd.raw(), &mut init) };
        if raw.is_null() {
            return Err(VerbsError::last_os(
                Verb::CreateQp,
                format!(
                    "{} ({} QP, {} send WRs, {} recv WRs, inline {})",
                    self.pd.context().name(),
                    self.transport,
                    self.max_send_wr,
                    self.max_recv_wr,
                    self.max_inline
                ),
            ));
        }
        // SAFETY: `raw` is a live QP.
        let qpn = unsafe { (*raw).qp_num };
        Ok(QueuePair {
            raw,
            qpn,
            transport: self.transport,
            // ibv_create_qp writes back the capabilities actually granted.
            max_inline: init.cap.max_inline_data,
            max_send_wr: init.cap.max_send_wr,
            max_recv_wr: init.cap.max_recv_wr,
            _pd: self.pd.clone(),
            _send_cq: self.send_cq.clone(),
            _recv_cq: self.recv_cq.clone(),
        })
    }
}

pub struct QueuePair {
    raw: *mut ffi::ibv_qp,
    qpn: u32,
    transport: Transport,
    max_inline: u32,
    max_send_wr: u32,
    max_recv_wr: u32,
    _pd: Arc<ProtectionDomain>,
    _send_cq: Arc<CompletionQueue>,
    _recv_cq: Arc<CompletionQueue>,
}

// SAFETY: a QP may be used from any thread; posting needs `&mut self`, so one
// thread posts at a time.
unsafe impl Send for QueuePair {}

impl QueuePair {
    pub fn builder<'a>(
        pd: &'a Arc<ProtectionDomain>,
        transport: Transport,
        send_cq: &'a Arc<CompletionQueue>,
        recv_cq: &'a Arc<CompletionQueue>,
    ) -> QueuePairBuilder<'a> {
        QueuePairBuilder {
            pd,
            transport,
            send_cq,
            recv_cq,
            max_send_wr: 128,
            max_recv_wr: 128,
            max_inline: 0,
        }
    }

    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The inline limit the provider granted (may exceed what was asked).
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    pub fn max_send_wr(&self) -> u32 {
        self.max_send_wr
    }

    pub fn max_recv_wr(&self) -> u32 {
        self.max_recv_wr
    }

    fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: u32, step: &str) -> Result<()> {
        // SAFETY: `attr` is initialised for every bit in `mask`; the QP is alive.
        let rc = unsafe { ffi::ibv_modify_qp(self.raw, attr, mask as i32) };
        if rc != 0 {
            return Err(VerbsError::from_code(
                Verb::ModifyQp,
                format!("QP {} ({}, {step})", self.qpn, self.transport),
                rc,
            ));
        }
        Ok(())
    }

    fn zeroed_attr() -> ffi::ibv_qp_attr {
        // SAFETY: ibv_qp_attr is plain data; zero is a valid starting point.
        unsafe { MaybeUninit::<ffi::ibv_qp_attr>::zeroed().assume_init() }
    }

    /// RESET → INIT with the remote rights this QP grants its peer.
    pub fn to_init(&self, port: &PortConfig, access: Access) -> Result<()> {
        use ffi::ibv_qp_attr_mask as m;
        let mut attr = Self::zeroed_attr();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = port.port;
        let mut mask = m::IBV_QP_STATE.0 | m::IBV_QP_PKEY_INDEX.0 | m::IBV_QP_PORT.0;
        if self.transport == Transport::Ud {
            attr.qkey = UD_QKEY;
            mask |= m::IBV_QP_QKEY.0;
        } else {
            attr.qp_access_flags = access.bits();
            mask |= m::IBV_QP_ACCESS_FLAGS.0;
        }
        self.modify(&mut attr, mask, "INIT")
    }

    /// INIT → RTR → RTS. For RC/UC `remote` is the connected peer; UD ignores it.
    pub fn to_rts(&self, port: &PortConfig, local_psn: u32, remote: &Endpoint) -> Result<()> {
        use ffi::ibv_qp_attr_mask as m;
        let mut attr = Self::zeroed_attr();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_RTR;
        let mut mask = m::IBV_QP_STATE.0;
        if self.transport != Transport::Ud {
            attr.path_mtu = mtu_enum(port.mtu);
            attr.dest_qp_num = remote.qpn;
            attr.rq_psn = remote.psn;
            attr.ah_attr = ah_attr(port, remote);
            mask |=
                m::IBV_QP_AV.0 | m::IBV_QP_PATH_MTU.0 | m::IBV_QP_DEST_QPN.0 | m::IBV_QP_RQ_PSN.0;
            if self.transport == Transport::Rc {
                // As many outstanding READs/atomics as the device allows (as
                // perftest does); min RNR timer 12 (0.64 ms).
                attr.max_dest_rd_atomic = port.rd_atomic;
                attr.min_rnr_timer = 12;
                mask |= m::IBV_QP_MAX_DEST_RD_ATOMIC.0 | m::IBV_QP_MIN_RNR_TIMER.0;
            }
        }
        self.modify(&mut attr, mask, "RTR")?;

        let mut attr = Self::zeroed_attr();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_RTS;
        attr.sq_psn = local_psn;
        let mut mask = m::IBV_QP_STATE.0 | m::IBV_QP_SQ_PSN.0;
        if self.transport == Transport::Rc {
            // timeout 14 (~67 ms) and 7 retries: a dead peer surfaces as a
            // RETRY_EXC_ERR completion within seconds, not a hang.
            attr.timeout = 14;
            attr.retry_cnt = 7;
            attr.rnr_retry = 7;
            attr.max_rd_atomic = port.rd_atomic;
            mask |= m::IBV_QP_TIMEOUT.0
                | m::IBV_QP_RETRY_CNT.0
                | m::IBV_QP_RNR_RETRY.0
                | m::IBV_QP_MAX_QP_RD_ATOMIC.0;
        }
        self.modify(&mut attr, mask, "RTS")
    }

    /// Posts the whole chain of `list` (one doorbell).
    #[inline(always)]
    pub fn post_send(&mut self, list: &mut SendList) -> Result<()> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: the list's WRs are linked, their SGEs point into MRs the list
        // keeps alive, and any AH it names is kept alive by the list too.
        let rc = unsafe { ffi::ibv_post_send(self.raw, list.head(), &mut bad) };
        if rc != 0 {
            return Err(self.post_error(Verb::PostSend, rc));
        }
        Ok(())
    }

    /// Posts every receive WR of `list` (one call).
    #[inline(always)]
    pub fn post_recv(&mut self, list: &mut RecvList) -> Result<()> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: the list's WRs are linked and point into MRs it keeps alive.
        let rc = unsafe { ffi::ibv_post_recv(self.raw, list.head(), &mut bad) };
        if rc != 0 {
            return Err(self.post_error(Verb::PostRecv, rc));
        }
        Ok(())
    }

    #[cold]
    fn post_error(&self, verb: Verb, rc: i32) -> VerbsError {
        VerbsError::from_code(verb, format!("QP {} ({})", self.qpn, self.transport), rc)
    }

    /// Where a UD peer must send (used to build its address handle).
    pub fn endpoint(&self, lid: u16, gid: Gid, psn: u32) -> Endpoint {
        Endpoint {
            qpn: self.qpn,
            psn,
            lid,
            gid,
            addr: 0,
            rkey: 0,
            len: 0,
        }
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: the QP is alive and destroyed once; its CQs and PD outlive it (Arcs).
        unsafe { ffi::ibv_destroy_qp(self.raw) };
    }
}

/// Probes the largest inline size the device grants on an RC QP by asking for
/// decreasing sizes (the only reliable way: attributes do not report it).
pub fn probe_max_inline(
    pd: &Arc<ProtectionDomain>,
    cq: &Arc<CompletionQueue>,
    transport: Transport,
) -> u32 {
    for want in [4096u32, 2048, 1024, 912, 512, 256, 128, 64, 32, 0] {
        if let Ok(qp) = QueuePair::builder(pd, transport, cq, cq)
            .max_send_wr(1)
            .max_recv_wr(1)
            .max_inline(want)
            .build()
        {
            return qp.max_inline().max(want);
        }
    }
    0
}
