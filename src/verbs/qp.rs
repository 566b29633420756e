//! Queue pairs: a builder, the RESET→INIT→RTR→RTS transitions, and posting.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;
use serde::{Deserialize, Serialize};

use super::addr::{ah_attr, Endpoint, PortConfig};
use super::ah::AddressHandle;
use super::cm::CmId;
use super::cq::CompletionQueue;
use super::device::{mtu_enum, Gid};
use super::error::{Result, Verb, VerbsError};
use super::mr::{Access, MemoryRegion};
use super::pd::ProtectionDomain;
use super::qp_ex::{self, SendOps};
use super::srq::SharedReceiveQueue;
use super::wr::{Held, RecvList, SendList};

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
    max_send_sge: u32,
    max_inline: u32,
    srq: Option<&'a Arc<SharedReceiveQueue>>,
    /// `Some`: an extended QP (`ibv_create_qp_ex`) with these send operations.
    ex_ops: Option<SendOps>,
}

impl<'a> QueuePairBuilder<'a> {
    /// Receives come from `srq` instead of this QP's own receive queue.
    pub fn srq(mut self, srq: Option<&'a Arc<SharedReceiveQueue>>) -> Self {
        self.srq = srq;
        self
    }

    /// Creates an extended QP with exactly `ops` (`--post-api ex`); posting
    /// then goes through `ibv_wr_*`, and only these operations may be posted.
    pub fn extended(mut self, ops: SendOps) -> Self {
        self.ex_ops = Some(ops);
        self
    }

    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.max_send_wr = n;
        self
    }

    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.max_recv_wr = n;
        self
    }

    /// SGEs a send WR may gather (default 1; see `SendList::with_sges`).
    pub fn max_send_sge(mut self, n: u32) -> Self {
        self.max_send_sge = n;
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
        init.cap.max_send_sge = self.max_send_sge.max(1);
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = self.max_inline;
        if let Some(srq) = self.srq {
            init.srq = srq.raw();
        }
        if let Some(ops) = self.ex_ops {
            return self.build_ex(init, ops);
        }
        // SAFETY: the PD, CQs and SRQ are alive (we keep Arcs to them in the QP).
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
        Ok(self.wrap(raw, &init.cap))
    }

    /// The `QueuePair` for `raw`, a QP this builder just created (either
    /// way), holding its PD, CQs and SRQ.
    fn wrap(&self, raw: *mut ffi::ibv_qp, granted: &ffi::ibv_qp_cap) -> QueuePair {
        // SAFETY: `raw` was just created on this PD with these CQs (and SRQ),
        // and the create call wrote back the capabilities actually granted.
        let mut qp = unsafe {
            QueuePair::from_raw(
                raw,
                self.transport,
                granted,
                self.pd.clone(),
                self.send_cq.clone(),
                self.recv_cq.clone(),
            )
        };
        qp._srq = self.srq.cloned();
        qp
    }

    /// `build` for an extended QP: the same attributes plus the send operations.
    fn build_ex(self, init: ffi::ibv_qp_init_attr, ops: SendOps) -> Result<QueuePair> {
        use ffi::ibv_qp_init_attr_mask as m;
        // SAFETY: all-zero is a valid ibv_qp_init_attr_ex; the fields that
        // comp_mask names are set below.
        let mut ex: ffi::ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
        ex.send_cq = init.send_cq;
        ex.recv_cq = init.recv_cq;
        ex.qp_type = init.qp_type;
        ex.sq_sig_all = 0;
        ex.cap = init.cap;
        ex.srq = init.srq;
        ex.pd = self.pd.raw();
        ex.comp_mask = m::IBV_QP_INIT_ATTR_PD.0 | m::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.0;
        ex.send_ops_flags = ops.bits();
        // SAFETY: the context, PD and CQs are alive (the QP keeps Arcs to the
        // PD and CQs); `ex` is initialised for every bit of comp_mask.
        let raw = unsafe { ffi::ibv_create_qp_ex(self.pd.context().raw(), &mut ex) };
        // SAFETY: `raw` (when not null) is a QP created with send operations.
        let qpx = if raw.is_null() {
            std::ptr::null_mut()
        } else {
            unsafe { ffi::ibv_qp_to_qp_ex(raw) }
        };
        if raw.is_null() || qpx.is_null() {
            let err = std::io::Error::last_os_error();
            if !raw.is_null() {
                // SAFETY: created just above and not wrapped: destroyed once here.
                unsafe { ffi::ibv_destroy_qp(raw) };
            }
            return Err(VerbsError::Call {
                verb: Verb::CreateQpEx,
                object: format!(
                    "{} ({} QP with send ops {}, {} send WRs, inline {}): \
                     the device refuses the extended post API (--post-api ex); \
                     use --post-api classic",
                    self.pd.context().name(),
                    self.transport,
                    ops.names(),
                    self.max_send_wr,
                    self.max_inline
                ),
                source: err,
                hint: "",
            });
        }
        let mut qp = self.wrap(raw, &ex.cap);
        qp.ex = qpx;
        qp.ex_ops = ops;
        Ok(qp)
    }
}

/// A queue pair, destroyed when dropped.
///
/// Keep-alive contract: a posted WR may be executed by the NIC at any time
/// until the QP is destroyed (its completion may never be polled, and an
/// error flushes it only later), so the QP itself keeps an `Arc` to every
/// [`MemoryRegion`] and [`AddressHandle`] that any list posted to it named,
/// until `Drop` has destroyed the QP. Callers may drop their lists and
/// regions whenever they like. The set grows with the distinct resources
/// posted (each is held once), not with the number of posts.
///
/// Cost: each list remembers the id of the QP that already holds its
/// resources; posting it again to that QP compares one integer. The first
/// post of a list to a QP (or after `set`/`set_ud_dest` named a new
/// resource) takes a cold path that clones the list's `Arc`s into the QP.
///
/// Extension point: `from_raw` wraps any `ibv_qp` with its parents, so a QP
/// created another way (rdma_cm, `ibv_create_qp_ex`) can share this type,
/// its transitions and its posting.
pub struct QueuePair {
    raw: *mut ffi::ibv_qp,
    /// Unique among the QPs of this process (never reused): what lists record.
    id: u64,
    qpn: u32,
    transport: Transport,
    max_inline: u32,
    max_send_wr: u32,
    max_recv_wr: u32,
    /// The extended view (`--post-api ex`), or null: `post_send` then uses
    /// `ibv_wr_*` and may post only the operations in `ex_ops`.
    ex: *mut ffi::ibv_qp_ex,
    ex_ops: SendOps,
    /// Released after the QP is destroyed (fields drop after `Drop::drop`).
    keep: KeepAlive,
    /// The rdma_cm id that connected this QP (`--cm`), destroyed (and so
    /// disconnected) only after the QP.
    link: Option<CmId>,
    _pd: Arc<ProtectionDomain>,
    _send_cq: Arc<CompletionQueue>,
    _recv_cq: Arc<CompletionQueue>,
    /// The shared receive queue it draws receives from, if any.
    _srq: Option<Arc<SharedReceiveQueue>>,
}

/// QP ids start at 1; 0 in a list means "held by no QP".
static NEXT_QP_ID: AtomicU64 = AtomicU64::new(1);

/// What WRs posted to a QP may point at, keyed by address (each held once).
#[derive(Default)]
struct KeepAlive {
    mrs: HashMap<*const MemoryRegion, Arc<MemoryRegion>>,
    ahs: HashMap<*const AddressHandle, Arc<AddressHandle>>,
}

impl KeepAlive {
    /// Takes clones of everything `held` names; records `qp` as its holder.
    #[cold]
    #[inline(never)]
    fn adopt(&mut self, held: &mut Held, qp: u64) {
        for mr in &held.mrs {
            self.mrs
                .entry(Arc::as_ptr(mr))
                .or_insert_with(|| mr.clone());
        }
        for ah in &held.ahs {
            self.ahs
                .entry(Arc::as_ptr(ah))
                .or_insert_with(|| ah.clone());
        }
        held.by_qp = qp;
    }
}

// SAFETY: a QP may be used from any thread; posting needs `&mut self`, so one
// thread posts at a time; what it keeps alive is Send + Sync.
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
            max_send_sge: 1,
            max_inline: 0,
            srq: None,
            ex_ops: None,
        }
    }

    /// Wraps a QP created elsewhere.
    ///
    /// # Safety
    /// `raw` is a live QP that nothing else will destroy, created on `pd` with
    /// `send_cq` and `recv_cq`, and `cap` holds the capabilities it was granted.
    unsafe fn from_raw(
        raw: *mut ffi::ibv_qp,
        transport: Transport,
        cap: &ffi::ibv_qp_cap,
        pd: Arc<ProtectionDomain>,
        send_cq: Arc<CompletionQueue>,
        recv_cq: Arc<CompletionQueue>,
    ) -> QueuePair {
        QueuePair {
            raw,
            id: NEXT_QP_ID.fetch_add(1, Ordering::Relaxed),
            // SAFETY: `raw` is a live QP (the caller's promise).
            qpn: unsafe { (*raw).qp_num },
            transport,
            max_inline: cap.max_inline_data,
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            ex: std::ptr::null_mut(),
            ex_ops: SendOps::NONE,
            keep: KeepAlive::default(),
            link: None,
            _pd: pd,
            _send_cq: send_cq,
            _recv_cq: recv_cq,
            _srq: None,
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

    /// Brings this QP (in INIT) to RTR and RTS with the attributes rdma_cm
    /// negotiated on `id` (path, remote QP number, PSNs), overlaid with
    /// `port`'s MTU, traffic class, flow label and SL and the RC timeouts and
    /// READ depth `to_rts` uses, so a QP connected either way runs alike.
    /// Where rdma_cm drives the QP itself (iWARP's iw_cm returns an empty
    /// mask) nothing is modified.
    pub fn ready_via(&self, id: &CmId, port: &PortConfig) -> Result<()> {
        use ffi::ibv_qp_attr_mask as m;
        let rc = self.transport == Transport::Rc;
        for (state, step) in [
            (ffi::ibv_qp_state::IBV_QPS_RTR, "RTR via rdma_cm"),
            (ffi::ibv_qp_state::IBV_QPS_RTS, "RTS via rdma_cm"),
        ] {
            let (mut attr, mut mask) = id.init_qp_attr(state, step, self.qpn)?;
            if mask == 0 {
                continue;
            }
            if state == ffi::ibv_qp_state::IBV_QPS_RTR {
                attr.path_mtu = mtu_enum(port.mtu);
                attr.ah_attr.sl = port.sl;
                if attr.ah_attr.is_global != 0 {
                    attr.ah_attr.grh.traffic_class = port.traffic_class;
                    attr.ah_attr.grh.flow_label = port.flow_label;
                }
                mask |= m::IBV_QP_PATH_MTU.0;
                if rc {
                    attr.max_dest_rd_atomic = port.rd_atomic;
                    attr.min_rnr_timer = 12;
                    mask |= m::IBV_QP_MAX_DEST_RD_ATOMIC.0 | m::IBV_QP_MIN_RNR_TIMER.0;
                }
            } else if rc {
                attr.timeout = 14;
                attr.retry_cnt = 7;
                attr.rnr_retry = 7;
                attr.max_rd_atomic = port.rd_atomic;
                mask |= m::IBV_QP_TIMEOUT.0
                    | m::IBV_QP_RETRY_CNT.0
                    | m::IBV_QP_RNR_RETRY.0
                    | m::IBV_QP_MAX_QP_RD_ATOMIC.0;
            }
            self.modify(&mut attr, mask, step)?;
        }
        Ok(())
    }

    /// Keeps the rdma_cm id that connected this QP for the QP's lifetime.
    pub fn hold_link(&mut self, id: CmId) {
        self.link = Some(id);
    }

    /// Whether sends go through the extended post API (`ibv_wr_*`).
    pub fn is_extended(&self) -> bool {
        !self.ex.is_null()
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

    /// Posts the whole chain of `list` (one doorbell). From here on this QP
    /// keeps the list's memory regions and address handles alive until it is
    /// destroyed (see the type's doc), so the list and the caller's `Arc`s
    /// may be dropped at any time.
    #[inline(always)]
    pub fn post_send(&mut self, list: &mut SendList) -> Result<()> {
        if list.held().by_qp != self.id {
            self.keep.adopt(list.held(), self.id);
        }
        if !self.ex.is_null() {
            let (qpn, t) = (self.qpn, self.transport);
            // SAFETY: `ex` is this live QP's extended view, created with
            // `ex_ops`; `&mut self` makes this thread its only poster; what
            // the list names is kept alive by this QP (adopted above).
            return unsafe {
                qp_ex::post(self.ex, self.ex_ops, list, || format!("QP {qpn} ({t})"))
            };
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: head() links the WRs afresh; their SGEs point into MRs, and
        // their UD addresses name AHs, that this QP now keeps alive until it
        // is destroyed; the provider copies the WRs before returning.
        let rc = unsafe { ffi::ibv_post_send(self.raw, list.head(), &mut bad) };
        if rc != 0 {
            return Err(self.post_error(Verb::PostSend, rc));
        }
        Ok(())
    }

    /// Posts every receive WR of `list` (one call). From here on this QP
    /// keeps the list's memory region alive until it is destroyed (see the
    /// type's doc): the NIC may write into it whenever a message arrives.
    #[inline(always)]
    pub fn post_recv(&mut self, list: &mut RecvList) -> Result<()> {
        if list.held().by_qp != self.id {
            self.keep.adopt(list.held(), self.id);
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: head() links the WRs afresh; their SGEs point into MRs this
        // QP now keeps alive until it is destroyed; the provider copies the
        // WRs before returning.
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
        // SAFETY: the QP is alive and destroyed once. Its CQs, PD and the MRs
        // and AHs in `keep` are fields, dropped only after this returns, so
        // the NIC is done with them before they can be freed.
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
