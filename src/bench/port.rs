//! The opened device and port: which one the user chose, the resolved port
//! settings every QP uses, and the device's limits, each probed once.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::report::PeerInfo;

use super::counters::DeviceCounters;

/// The largest CQ rdma-bench asks for (rxe's limit, and within most NICs');
/// a QP set with more entries' worth of queues shares it.
pub const MAX_CQE: u32 = 32_767;
use crate::spec::{DeviceLimits, PathEnds, PathSpec};
use crate::verbs::{
    default_gid_index, probe_max_inline, AtomicCap, CompletionQueue, Context, DeviceAttr, Gid,
    LinkLayer, PortConfig, PortState, ProtectionDomain, Transport,
};

/// Which device and port a side uses, as the user chose them.
#[derive(Debug, Clone)]
pub struct DeviceChoice {
    pub device: Option<String>,
    pub ib_port: u8,
    pub gid_index: Option<u32>,
}

/// The opened device and the resolved port settings.
pub struct Port {
    pub ctx: Arc<Context>,
    pub attr: DeviceAttr,
    pub pd: Arc<ProtectionDomain>,
    pub config: PortConfig,
    pub lid: u16,
    pub gid: Gid,
    pub link_layer: LinkLayer,
    pub mtu: u32,
    /// The inline limit of RC, UC and UD QPs, probed on first use.
    inline: [OnceLock<u32>; 3],
    /// The port's own counters (sysfs), the witness for rdma-bench's counts.
    pub counters: DeviceCounters,
    /// The port a `--cm` session's rdma_cm listener binds (`serve
    /// --cm-port`; 0: an ephemeral one).
    pub cm_port: u16,
}

/// `$RDMA_BENCH_DEVICE`, held to the rules of `-d` (unset or empty: none).
fn device_from_env() -> Result<Option<String>> {
    let Some(raw) = std::env::var_os("RDMA_BENCH_DEVICE").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let name = raw.into_string().map_err(|v| {
        Error::usage(format!(
            "$RDMA_BENCH_DEVICE: the value '{}' is not valid UTF-8",
            crate::escape::bytes(v.as_encoded_bytes())
        ))
    })?;
    match crate::device_name::refusal(&name) {
        Some(why) => Err(Error::usage(format!(
            "$RDMA_BENCH_DEVICE {}: {why}",
            crate::escape::printable(&name)
        ))),
        None => Ok(Some(name)),
    }
}

impl Port {
    /// Opens the device (the named one, `RDMA_BENCH_DEVICE`, or the first with
    /// an active port) and resolves the GID index.
    pub fn open(choice: &DeviceChoice) -> Result<Port> {
        let name = match &choice.device {
            Some(d) => d.clone(),
            None => match device_from_env()? {
                Some(d) => d,
                None => first_active_device(choice.ib_port)?,
            },
        };
        let ctx = Context::open(&name)?;
        let attr = ctx.query_device()?;
        if choice.ib_port == 0 || choice.ib_port > attr.phys_port_cnt {
            return Err(Error::usage(format!(
                "--ib-port {}: {name} has ports 1..{}",
                choice.ib_port, attr.phys_port_cnt
            )));
        }
        let port = ctx.query_port(choice.ib_port)?;
        if port.state != PortState::Active {
            return Err(Error::usage(format!(
                "--ib-port {}: port {} of {name} is {:?}, not active",
                choice.ib_port, choice.ib_port, port.state
            )));
        }
        let table = ctx.gid_table(choice.ib_port)?;
        let gid_index = match choice.gid_index {
            Some(i) => {
                if !table.iter().any(|e| e.index == i) {
                    return Err(Error::usage(format!(
                        "--gid-index {i}: no such GID on {name} port {} (valid: {})",
                        choice.ib_port,
                        table
                            .iter()
                            .map(|e| e.index.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                i
            }
            None => default_gid_index(&table, port.link_layer).ok_or_else(|| {
                Error::usage(format!(
                    "{name} port {} has no GID; give --gid-index",
                    choice.ib_port
                ))
            })?,
        };
        let gid = table
            .iter()
            .find(|e| e.index == gid_index)
            .map(|e| e.gid)
            .unwrap_or_default();
        let pd = ProtectionDomain::new(&ctx)?;
        Ok(Port {
            config: PortConfig {
                port: choice.ib_port,
                gid_index: gid_index as u8,
                mtu: port.active_mtu,
                traffic_class: 0,
                flow_label: 0,
                sl: 0,
                global: port.link_layer == LinkLayer::Ethernet,
                rd_atomic: attr
                    .max_qp_rd_atom
                    .min(attr.max_qp_init_rd_atom)
                    .clamp(1, 255) as u8,
            },
            lid: port.lid,
            gid,
            link_layer: port.link_layer,
            mtu: port.active_mtu,
            ctx,
            pd,
            attr,
            inline: Default::default(),
            counters: DeviceCounters::open(&name, choice.ib_port),
            cm_port: 0,
        })
    }

    /// The port settings of a run's QPs: `path`'s QoS and MTU (an MTU above
    /// the active one has been refused by then; it never exceeds it here).
    pub fn config_for(&self, path: &PathSpec) -> PortConfig {
        PortConfig {
            mtu: path.effective_mtu(self.mtu),
            traffic_class: path.tclass.unwrap_or(0),
            flow_label: path.flow_label.unwrap_or(0),
            sl: path.sl.unwrap_or(0),
            ..self.config
        }
    }

    /// This side as its handshake describes it: host, device, port, and the
    /// port's active MTU as it is now (an administrator may change the
    /// netdev's MTU while `serve` runs; the port follows it).
    pub fn describe(&self) -> PeerInfo {
        let active_mtu = self
            .ctx
            .query_port(self.config.port)
            .map_or(self.mtu, |p| p.active_mtu);
        PeerInfo {
            host: crate::connect::protocol::local_host(),
            device: self.ctx.name().to_string(),
            port: self.config.port,
            active_mtu,
            gid: self.gid.to_string(),
        }
    }

    /// The path between this side (as `describe` said) and the peer's port,
    /// as far as its handshake said.
    pub fn path_to(me: &PeerInfo, peer: &PeerInfo) -> PathEnds {
        match (me.mtu_end(), peer.mtu_end()) {
            (Some(m), Some(p)) => PathEnds::between(m, p),
            (Some(m), None) => PathEnds {
                local: m,
                peer: None,
            },
            _ => PathEnds::single(&me.device, me.port, me.active_mtu),
        }
    }

    /// This port as the only end of a path (before a handshake names the peer's).
    pub fn path_ends(&self) -> PathEnds {
        PathEnds::single(self.ctx.name(), self.config.port, self.mtu)
    }

    /// The largest inline payload a `transport` QP is granted, found by
    /// creating QPs (attributes do not report it); probed once per transport.
    pub fn max_inline(&self, transport: Transport) -> Result<u32> {
        let cell = &self.inline[transport as usize];
        if let Some(&v) = cell.get() {
            return Ok(v);
        }
        let cq = CompletionQueue::new(&self.ctx, 4)?;
        Ok(*cell.get_or_init(|| probe_max_inline(&self.pd, &cq, transport)))
    }

    /// The device facts a run's validation needs; inline limits are probed
    /// only for the transports in `inline_for`.
    pub fn limits(&self, inline_for: &[Transport]) -> Result<DeviceLimits> {
        let mut max_inline = [0; 3];
        for &t in inline_for {
            max_inline[t as usize] = self.max_inline(t)?;
        }
        Ok(DeviceLimits {
            name: self.ctx.name().to_string(),
            port: self.config.port,
            max_inline,
            path: self.path_ends(),
            max_qp_wr: self.attr.max_qp_wr,
            max_qp: self.attr.max_qp,
            max_cqe: self.attr.max_cqe.min(MAX_CQE),
            atomics: self.attr.atomic_cap != AtomicCap::None,
            max_sge: self.attr.max_sge,
            max_srq: self.attr.max_srq,
            max_srq_wr: self.attr.max_srq_wr,
        })
    }
}

fn first_active_device(port: u8) -> Result<String> {
    let names = crate::verbs::device_names()?;
    if names.is_empty() {
        return Err(crate::verbs::VerbsError::NoDevice.into());
    }
    for n in &names {
        if let Ok(ctx) = Context::open(n) {
            if ctx
                .query_port(port)
                .is_ok_and(|p| p.state == PortState::Active)
            {
                return Ok(n.clone());
            }
        }
    }
    Ok(names[0].clone())
}
