//! Safe wrappers over libibverbs (through `rdma-mummy-sys`). With `sys`, the
//! only module where the crate allows `unsafe` (see `lib.rs`). Each object
//! holds an `Arc` to its parent, so whatever order handles are dropped in,
//! children are destroyed before their parents; a QP also keeps alive every
//! memory region and address handle its posted work requests named.

mod addr;
mod ah;
mod channel;
mod cm;
mod cq;
mod device;
mod error;
mod mr;
mod pd;
mod qp;
mod qp_ex;
mod srq;
mod wr;

pub use addr::{Endpoint, PortConfig};
pub use ah::AddressHandle;
pub use channel::{CompletionChannel, CqEvent};
pub use cm::{
    event as cm_event, event_name as cm_event_name,
    open_device_contexts as open_cm_device_contexts, CmEvent, CmId, EventChannel,
};
pub use cq::{CompletionQueue, WorkCompletion};
pub use device::{
    default_gid_index, device_names, AtomicCap, Context, DeviceAttr, Gid, GidEntry, GidKind,
    LinkLayer, PortAttr, PortState,
};
pub use error::{Result, Verb, VerbsError};
pub use mr::{Access, MemoryRegion};
pub use pd::ProtectionDomain;
pub use qp::{probe_max_inline, QueuePair, Transport, UD_QKEY};
pub use qp_ex::SendOps;
pub use srq::SharedReceiveQueue;
pub use wr::{sge_split, RecvList, SendList, SendOp};
