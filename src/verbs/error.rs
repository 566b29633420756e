//! One error type for the verbs layer: every failing verb names itself, the
//! object it acted on, and carries the OS error (or the work-completion status).

use std::fmt;
use std::io;

use rdma_mummy_sys as ffi;

/// The verb (or verbs-layer step) that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    GetDeviceList,
    OpenDevice,
    QueryDevice,
    QueryPort,
    QueryGid,
    AllocPd,
    RegMr,
    CreateCq,
    CreateQp,
    ModifyQp,
    CreateAh,
    PostSend,
    PostRecv,
    PollCq,
    CreateSrq,
    PostSrqRecv,
    CmCreateChannel,
    CmGetDevices,
    CmCreateId,
    CmSetOption,
    CmBindAddr,
    CmListen,
    CmResolveAddr,
    CmResolveRoute,
    CmConnect,
    CmAccept,
    CmEstablish,
    CmInitQpAttr,
    CmGetEvent,
    CreateCompChannel,
    ReqNotifyCq,
    GetCqEvent,
    CreateQpEx,
    WrComplete,
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Verb::GetDeviceList => "ibv_get_device_list",
            Verb::OpenDevice => "ibv_open_device",
            Verb::QueryDevice => "ibv_query_device",
            Verb::QueryPort => "ibv_query_port",
            Verb::QueryGid => "ibv_query_gid_ex",
            Verb::AllocPd => "ibv_alloc_pd",
            Verb::RegMr => "ibv_reg_mr",
            Verb::CreateCq => "ibv_create_cq",
            Verb::CreateQp => "ibv_create_qp",
            Verb::ModifyQp => "ibv_modify_qp",
            Verb::CreateAh => "ibv_create_ah",
            Verb::PostSend => "ibv_post_send",
            Verb::PostRecv => "ibv_post_recv",
            Verb::PollCq => "ibv_poll_cq",
            Verb::CreateSrq => "ibv_create_srq",
            Verb::PostSrqRecv => "ibv_post_srq_recv",
            Verb::CmCreateChannel => "rdma_create_event_channel",
            Verb::CmGetDevices => "rdma_get_devices",
            Verb::CmCreateId => "rdma_create_id",
            Verb::CmSetOption => "rdma_set_option",
            Verb::CmBindAddr => "rdma_bind_addr",
            Verb::CmListen => "rdma_listen",
            Verb::CmResolveAddr => "rdma_resolve_addr",
            Verb::CmResolveRoute => "rdma_resolve_route",
            Verb::CmConnect => "rdma_connect",
            Verb::CmAccept => "rdma_accept",
            Verb::CmEstablish => "rdma_establish",
            Verb::CmInitQpAttr => "rdma_init_qp_attr",
            Verb::CmGetEvent => "rdma_get_cm_event",
            Verb::CreateCompChannel => "ibv_create_comp_channel",
            Verb::ReqNotifyCq => "ibv_req_notify_cq",
            Verb::GetCqEvent => "ibv_get_cq_event",
            Verb::CreateQpEx => "ibv_create_qp_ex",
            Verb::WrComplete => "ibv_wr_complete",
        };
        f.write_str(name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    #[error(
        "no RDMA device found (no NIC, and no soft-RoCE device: try `scripts/softroce run -- ...`)"
    )]
    NoDevice,
    #[error("RDMA device '{wanted}' not found (available: {available})")]
    DeviceNotFound { wanted: String, available: String },
    #[error("{verb} failed on {object}: {source}{hint}")]
    Call {
        verb: Verb,
        object: String,
        source: io::Error,
        hint: &'static str,
    },
    #[error(
        "{opcode} work completion failed on QP {qpn}: {status_name} (status {status}, vendor_err {vendor_err:#x}, wr_id {wr_id}){note}"
    )]
    WorkCompletion {
        opcode: &'static str,
        qpn: u32,
        status: u32,
        status_name: String,
        vendor_err: u32,
        wr_id: u64,
        /// What else is known about the failure (empty, or "; ...").
        note: &'static str,
    },
    /// rdma_cm answered a step with the wrong event (a reject, an
    /// unreachable peer, a disconnect) or with an error status.
    #[error("{verb} on {object}: rdma_cm answered {event} (status {status}{detail})")]
    CmEvent {
        verb: Verb,
        object: String,
        event: String,
        status: i32,
        detail: String,
    },
    #[error("{0}")]
    Invalid(String),
}

impl VerbsError {
    /// A flushed work request: its QP was already in the error state, so
    /// this completion is a consequence, not the cause.
    pub fn is_flush(&self) -> bool {
        matches!(self, VerbsError::WorkCompletion { status, .. }
            if *status == ffi::ibv_wc_status::IBV_WC_WR_FLUSH_ERR)
    }

    /// The same error with `note` ("; ...") appended to a failed completion.
    pub fn with_note(mut self, note: &'static str) -> Self {
        if let VerbsError::WorkCompletion { note: n, .. } = &mut self {
            *n = note;
        }
        self
    }

    /// Builds a `Call` error from `errno` right after a failed verb.
    pub fn last_os(verb: Verb, object: impl Into<String>) -> Self {
        Self::from_os(verb, object, io::Error::last_os_error())
    }

    /// Builds a `Call` error from a verb that returns the error number itself.
    pub fn from_code(verb: Verb, object: impl Into<String>, code: i32) -> Self {
        // Some providers return -errno, others errno: the magnitude is the error.
        Self::from_os(verb, object, io::Error::from_raw_os_error(code.abs()))
    }

    fn from_os(verb: Verb, object: impl Into<String>, source: io::Error) -> Self {
        // Registering memory is what trips the locked-memory limit; say how to fix it.
        let hint = match (verb, source.raw_os_error()) {
            (Verb::RegMr, Some(libc::ENOMEM)) | (Verb::RegMr, Some(libc::EPERM)) => {
                " (the locked-memory limit is too low: raise it with `ulimit -l unlimited`)"
            }
            // The shim answers EOPNOTSUPP for every rdma_* call when it could
            // not dlopen librdmacm.so.1 (or the symbol is missing).
            (Verb::CmCreateChannel, Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) | Some(libc::ENOENT)) => {
                " (--cm needs librdmacm.so.1 (Debian: librdmacm1) and the rdma_ucm kernel module (/dev/infiniband/rdma_cm))"
            }
            _ => "",
        };
        VerbsError::Call {
            verb,
            object: object.into(),
            source,
            hint,
        }
    }
}

pub type Result<T> = std::result::Result<T, VerbsError>;
