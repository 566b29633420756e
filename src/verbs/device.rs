//! Devices and their contexts: listing, opening, and reading the attributes a
//! benchmark needs (port state, MTU, GIDs, capabilities).

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::sync::Arc;

use rdma_mummy_sys as ffi;
use serde::{Deserialize, Serialize};

use super::error::{Result, Verb, VerbsError};

/// An open device. Every other verbs object keeps an `Arc` to its context so
/// the context is closed last.
pub struct Context {
    raw: *mut ffi::ibv_context,
    name: String,
}

// SAFETY: an ibv_context is thread-safe per the libibverbs documentation; we
// never mutate it through shared references.
unsafe impl Send for Context {}
// SAFETY: see Send above.
unsafe impl Sync for Context {}

/// Names of every RDMA device the verbs library sees, in its order.
pub fn device_names() -> Result<Vec<String>> {
    with_device_list(|list| Ok(list.iter().map(|(name, _)| name.clone()).collect()))
}

/// Calls `f` with the device list (name, device pointer) and frees the list after.
fn with_device_list<T>(
    f: impl FnOnce(&[(String, *mut ffi::ibv_device)]) -> Result<T>,
) -> Result<T> {
    let mut n = 0i32;
    // SAFETY: ibv_get_device_list writes the count into `n` and returns a
    // NULL-terminated array we free below with ibv_free_device_list.
    let list = unsafe { ffi::ibv_get_device_list(&mut n) };
    if list.is_null() {
        let err = std::io::Error::last_os_error();
        // ENOSYS means the kernel has no uverbs at all: the same as no device for the user.
        if err.raw_os_error() == Some(libc::ENOSYS) {
            return Err(VerbsError::NoDevice);
        }
        return Err(VerbsError::last_os(Verb::GetDeviceList, "the system"));
    }
    let mut entries = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: `i < n`, so the entry is a valid device pointer.
        let dev = unsafe { *list.add(i) };
        // SAFETY: ibv_get_device_name returns a NUL-terminated name owned by the device.
        let name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(dev)) }
            .to_string_lossy()
            .into_owned();
        entries.push((name, dev));
    }
    let result = f(&entries);
    // SAFETY: `list` came from ibv_get_device_list and is freed once; opened
    // contexts stay valid after the list is freed.
    unsafe { ffi::ibv_free_device_list(list) };
    result
}

impl Context {
    /// Opens the device called `name`.
    pub fn open(name: &str) -> Result<Arc<Context>> {
        with_device_list(|list| {
            if list.is_empty() {
                return Err(VerbsError::NoDevice);
            }
            let Some((_, dev)) = list.iter().find(|(n, _)| n == name) else {
                return Err(VerbsError::DeviceNotFound {
                    wanted: name.to_string(),
                    available: list
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            // SAFETY: `dev` is a live entry of the device list.
            let raw = unsafe { ffi::ibv_open_device(*dev) };
            if raw.is_null() {
                return Err(VerbsError::last_os(Verb::OpenDevice, name));
            }
            Ok(Arc::new(Context {
                raw,
                name: name.to_string(),
            }))
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_context {
        self.raw
    }

    pub fn query_device(&self) -> Result<DeviceAttr> {
        let mut attr = MaybeUninit::<ffi::ibv_device_attr>::zeroed();
        // SAFETY: `attr` is a writable ibv_device_attr; the context is open.
        let rc = unsafe { ffi::ibv_query_device(self.raw, attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(VerbsError::from_code(Verb::QueryDevice, &self.name, rc));
        }
        // SAFETY: zero-initialised and filled by a successful ibv_query_device.
        let a = unsafe { attr.assume_init() };
        // SAFETY: fw_ver is a NUL-terminated C string inside the struct.
        let fw_ver = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(DeviceAttr {
            fw_ver,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp.max(0) as u32,
            max_qp_wr: a.max_qp_wr.max(0) as u32,
            max_cqe: a.max_cqe.max(0) as u32,
            max_sge: a.max_sge.max(0) as u32,
            max_qp_rd_atom: a.max_qp_rd_atom.max(0) as u32,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom.max(0) as u32,
            max_srq: a.max_srq.max(0) as u32,
            max_srq_wr: a.max_srq_wr.max(0) as u32,
            atomic_cap: AtomicCap::from_raw(a.atomic_cap),
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let mut attr = MaybeUninit::<ffi::ibv_port_attr>::zeroed();
        // SAFETY: `attr` is writable and sized for ibv_port_attr; the context is open.
        let rc = unsafe { ffi::ibv_query_port(self.raw, port, attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(VerbsError::from_code(
                Verb::QueryPort,
                format!("{} port {port}", self.name),
                rc,
            ));
        }
        // SAFETY: filled by a successful ibv_query_port.
        let a = unsafe { attr.assume_init() };
        Ok(PortAttr {
            state: PortState::from_raw(a.state),
            active_mtu: mtu_bytes(a.active_mtu),
            max_mtu: mtu_bytes(a.max_mtu),
            lid: a.lid,
            link_layer: if a.link_layer == ffi::IBV_LINK_LAYER_ETHERNET {
                LinkLayer::Ethernet
            } else {
                LinkLayer::InfiniBand
            },
            gid_tbl_len: a.gid_tbl_len.max(0) as u32,
            speed_gbps: port_speed_gbps(a.active_width, a.active_speed),
        })
    }

    /// The GID table entry at `index`, or `None` where the slot is empty.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Option<GidEntry>> {
        let mut entry = MaybeUninit::<ffi::ibv_gid_entry>::zeroed();
        // SAFETY: `entry` is a writable ibv_gid_entry; the wrapper passes its size.
        let rc =
            unsafe { ffi::ibv_query_gid_ex(self.raw, port as u32, index, entry.as_mut_ptr(), 0) };
        if rc != 0 {
            // Empty or unused slots answer ENODATA/EINVAL: not an error for a table walk.
            return Ok(None);
        }
        // SAFETY: filled by a successful ibv_query_gid_ex.
        let e = unsafe { entry.assume_init() };
        // SAFETY: `raw` is the plain-bytes view of the GID union, valid for any content.
        let raw = unsafe { e.gid.raw };
        if raw == [0u8; 16] {
            return Ok(None);
        }
        Ok(Some(GidEntry {
            index,
            gid: Gid(raw),
            kind: match e.gid_type {
                ffi::IBV_GID_TYPE_ROCE_V2 => GidKind::RoceV2,
                ffi::IBV_GID_TYPE_ROCE_V1 => GidKind::RoceV1,
                _ => GidKind::Ib,
            },
        }))
    }

    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let len = self.query_port(port)?.gid_tbl_len;
        let mut out = Vec::new();
        for i in 0..len.min(256) {
            if let Some(e) = self.query_gid(port, i)? {
                out.push(e);
            }
        }
        Ok(out)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child object holds an Arc<Context>, so none is alive now.
        unsafe { ffi::ibv_close_device(self.raw) };
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtomicCap {
    None,
    Hca,
    Global,
}

impl AtomicCap {
    /// The name serde writes (`devices --json`), for the results file.
    pub fn name(self) -> &'static str {
        match self {
            AtomicCap::None => "none",
            AtomicCap::Hca => "hca",
            AtomicCap::Global => "global",
        }
    }

    fn from_raw(v: ffi::ibv_atomic_cap::Type) -> Self {
        match v {
            ffi::ibv_atomic_cap::IBV_ATOMIC_HCA => AtomicCap::Hca,
            ffi::ibv_atomic_cap::IBV_ATOMIC_GLOB => AtomicCap::Global,
            _ => AtomicCap::None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceAttr {
    pub fw_ver: String,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    pub max_sge: u32,
    pub max_qp_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    /// Shared receive queues the device offers (0: none), and WRs in each.
    #[serde(default)]
    pub max_srq: u32,
    #[serde(default)]
    pub max_srq_wr: u32,
    pub atomic_cap: AtomicCap,
    pub phys_port_cnt: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    Down,
    Init,
    Armed,
    Active,
    Other,
}

impl PortState {
    /// The name serde writes (`devices --json`), for the results file.
    pub fn name(self) -> &'static str {
        match self {
            PortState::Down => "down",
            PortState::Init => "init",
            PortState::Armed => "armed",
            PortState::Active => "active",
            PortState::Other => "other",
        }
    }

    fn from_raw(v: ffi::ibv_port_state::Type) -> Self {
        match v {
            ffi::ibv_port_state::IBV_PORT_DOWN => PortState::Down,
            ffi::ibv_port_state::IBV_PORT_INIT => PortState::Init,
            ffi::ibv_port_state::IBV_PORT_ARMED => PortState::Armed,
            ffi::ibv_port_state::IBV_PORT_ACTIVE => PortState::Active,
            _ => PortState::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortAttr {
    pub state: PortState,
    pub active_mtu: u32,
    pub max_mtu: u32,
    pub lid: u16,
    pub link_layer: LinkLayer,
    pub gid_tbl_len: u32,
    pub speed_gbps: f64,
}

/// A 16-byte GID as it travels on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The IPv4 address inside an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<std::net::Ipv4Addr> {
        let b = &self.0;
        (b[..10] == [0u8; 10] && b[10] == 0xff && b[11] == 0xff)
            .then(|| std::net::Ipv4Addr::new(b[12], b[13], b[14], b[15]))
    }
}

impl std::fmt::Display for Gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GidKind {
    Ib,
    RoceV1,
    RoceV2,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct GidEntry {
    pub index: u32,
    pub gid: Gid,
    pub kind: GidKind,
}

/// Picks the GID a careful user would: on Ethernet an IPv4-mapped RoCE v2 GID
/// (routable, and what perftest users pass with `-x`), else any RoCE v2, else the first.
pub fn default_gid_index(table: &[GidEntry], link: LinkLayer) -> Option<u32> {
    if link == LinkLayer::InfiniBand {
        return table.first().map(|e| e.index);
    }
    table
        .iter()
        .find(|e| e.kind == GidKind::RoceV2 && e.gid.ipv4().is_some())
        .or_else(|| table.iter().find(|e| e.kind == GidKind::RoceV2))
        .or_else(|| table.first())
        .map(|e| e.index)
}

pub(crate) fn mtu_bytes(mtu: ffi::ibv_mtu::Type) -> u32 {
    match mtu {
        ffi::ibv_mtu::IBV_MTU_256 => 256,
        ffi::ibv_mtu::IBV_MTU_512 => 512,
        ffi::ibv_mtu::IBV_MTU_1024 => 1024,
        ffi::ibv_mtu::IBV_MTU_2048 => 2048,
        ffi::ibv_mtu::IBV_MTU_4096 => 4096,
        _ => 0,
    }
}

pub(crate) fn mtu_enum(bytes: u32) -> ffi::ibv_mtu::Type {
    match bytes {
        256 => ffi::ibv_mtu::IBV_MTU_256,
        512 => ffi::ibv_mtu::IBV_MTU_512,
        2048 => ffi::ibv_mtu::IBV_MTU_2048,
        4096 => ffi::ibv_mtu::IBV_MTU_4096,
        _ => ffi::ibv_mtu::IBV_MTU_1024,
    }
}

/// Nominal data rate of a port from its width and per-lane speed codes
/// (the encoding `ibv_devinfo` decodes).
fn port_speed_gbps(width: u8, speed: u8) -> f64 {
    let lanes = match width {
        1 => 1.0,
        2 => 4.0,
        4 => 8.0,
        8 => 12.0,
        16 => 2.0,
        _ => 0.0,
    };
    let per_lane = match speed {
        1 => 2.5,
        2 => 5.0,
        4 | 8 => 10.0,
        16 => 14.0,
        32 => 25.0,
        64 => 50.0,
        128 => 100.0,
        _ => 0.0,
    };
    lanes * per_lane
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_serde_writes() {
        for a in [AtomicCap::None, AtomicCap::Hca, AtomicCap::Global] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.name());
        }
        for p in [
            PortState::Down,
            PortState::Init,
            PortState::Armed,
            PortState::Active,
            PortState::Other,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
    }

    fn entry(index: u32, kind: GidKind, gid: [u8; 16]) -> GidEntry {
        GidEntry {
            index,
            gid: Gid(gid),
            kind,
        }
    }

    #[test]
    fn default_gid_prefers_ipv4_mapped_roce_v2() {
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 99, 0, 1]);
        let link_local = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let table = [
            entry(0, GidKind::RoceV1, link_local),
            entry(1, GidKind::RoceV2, link_local),
            entry(2, GidKind::RoceV1, v4),
            entry(3, GidKind::RoceV2, v4),
        ];
        assert_eq!(default_gid_index(&table, LinkLayer::Ethernet), Some(3));
        assert_eq!(default_gid_index(&table[..3], LinkLayer::Ethernet), Some(1));
        assert_eq!(default_gid_index(&table, LinkLayer::InfiniBand), Some(0));
        assert_eq!(Gid(v4).ipv4(), Some(std::net::Ipv4Addr::new(10, 99, 0, 1)));
        assert_eq!(Gid(link_local).ipv4(), None);
    }

    #[test]
    fn speed_decodes_width_and_lane_rate() {
        assert_eq!(port_speed_gbps(2, 32), 100.0); // 4x EDR
        assert_eq!(port_speed_gbps(1, 1), 2.5); // 1x SDR, what rxe reports
    }
}
