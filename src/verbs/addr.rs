//! Addresses: what one side tells the other to reach a QP ([`Endpoint`]), the
//! local port settings ([`PortConfig`]), and the address vector built from
//! them (for RC/UC connections in `qp.rs` and UD address handles in `ah.rs`).

use rdma_mummy_sys as ffi;
use serde::{Deserialize, Serialize};

use super::device::Gid;

/// What one side tells the other to connect a QP (plus, for RDMA verbs, where
/// its buffer is). It crosses the wire, so it is plain serde data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: Gid,
    pub addr: u64,
    pub rkey: u32,
    pub len: u64,
}

/// The local port settings every QP on this side uses.
#[derive(Debug, Clone, Copy)]
pub struct PortConfig {
    pub port: u8,
    pub gid_index: u8,
    /// The path MTU of RC/UC QPs (the active MTU unless a run asks for less).
    pub mtu: u32,
    /// GRH traffic class, GRH flow label (20 bits) and service level of
    /// every address vector (0 unless a run asks otherwise).
    pub traffic_class: u8,
    pub flow_label: u32,
    pub sl: u8,
    /// Whether addresses need a GRH (RoCE always; IB only across subnets).
    pub global: bool,
    /// READs/atomics a QP may have in flight (and accept), from the device's
    /// max_qp_rd_atom / max_qp_init_rd_atom, as perftest uses them.
    pub rd_atomic: u8,
}

/// The address vector towards `remote` through the local `port`.
pub(crate) fn ah_attr(port: &PortConfig, remote: &Endpoint) -> ffi::ibv_ah_attr {
    // SAFETY: ibv_ah_attr is plain data; zero is valid.
    let mut ah: ffi::ibv_ah_attr = unsafe { std::mem::zeroed() };
    ah.dlid = remote.lid;
    ah.sl = port.sl;
    ah.src_path_bits = 0;
    ah.port_num = port.port;
    if port.global {
        ah.is_global = 1;
        ah.grh.dgid = ffi::ibv_gid { raw: remote.gid.0 };
        ah.grh.sgid_index = port.gid_index;
        ah.grh.hop_limit = 64;
        ah.grh.traffic_class = port.traffic_class;
        ah.grh.flow_label = port.flow_label;
    }
    ah
}
