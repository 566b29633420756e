//! One side of a run: the device port, a QP with its CQs, and one registered
//! buffer laid out as [send area | receive area]. Built once per connection and
//! reused for every size of a sweep.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::spec::{AtomicOp, LatencySpec, VerbKind};
use crate::verbs::{
    default_gid_index, Access, AddressHandle, CompletionQueue, Context, Endpoint, Gid, LinkLayer,
    MemoryRegion, PortConfig, PortState, ProtectionDomain, QueuePair, SendOp, Transport,
};

/// Room for the Global Route Header a UD receive carries before the payload.
pub const GRH_BYTES: usize = 40;
/// Send-queue depth of latency QPs; one WR in `SIGNAL_EVERY` is signaled so the
/// queue never fills with unreaped WRs.
pub const SQ_DEPTH: u32 = 128;
pub const SIGNAL_EVERY: u64 = 64;
/// Receives kept posted on a ping-pong/sink QP.
pub const RQ_DEPTH: u32 = 128;

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
    pub pd: Arc<ProtectionDomain>,
    pub config: PortConfig,
    pub lid: u16,
    pub gid: Gid,
    pub link_layer: LinkLayer,
    pub mtu: u32,
}

impl Port {
    /// Opens the device (the named one, `RDMA_BENCH_DEVICE`, or the first with
    /// an active port) and resolves the GID index.
    pub fn open(choice: &DeviceChoice) -> Result<Port> {
        let name = match &choice.device {
            Some(d) => d.clone(),
            None => match std::env::var("RDMA_BENCH_DEVICE") {
                Ok(d) if !d.is_empty() => d,
                _ => first_active_device(choice.ib_port)?,
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

/// Whether this side issues the verb (client) or answers/serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

pub struct Side {
    pub qp: QueuePair,
    pub send_cq: Arc<CompletionQueue>,
    pub recv_cq: Arc<CompletionQueue>,
    pub mr: Arc<MemoryRegion>,
    /// Bytes in each of the two areas.
    pub slot: usize,
    pub psn: u32,
    pub lid: u16,
    pub gid: Gid,
    pub config: PortConfig,
    pub pd: Arc<ProtectionDomain>,
    /// UD only: where to send (set once the peer is known).
    pub ah: Option<Arc<AddressHandle>>,
}

impl Side {
    /// Creates the QP and buffer for `spec` with the access rights `role` needs.
    pub fn new(port: &Port, spec: &LatencySpec, role: Role, inline_room: u32) -> Result<Side> {
        let slot = (spec.max_size() as usize + GRH_BYTES).div_ceil(64) * 64;
        let access = access_for(spec.verb, role);
        let ctx = &port.ctx;
        let send_cq = CompletionQueue::new(ctx, SQ_DEPTH * 2)?;
        let recv_cq = CompletionQueue::new(ctx, RQ_DEPTH * 2)?;
        let qp = QueuePair::builder(&port.pd, spec.transport, &send_cq, &recv_cq)
            .max_send_wr(SQ_DEPTH)
            .max_recv_wr(RQ_DEPTH)
            .max_inline(inline_room)
            .build()?;
        let mr = MemoryRegion::new(&port.pd, 2 * slot, access)?;
        qp.to_init(&port.config, access)?;
        Ok(Side {
            qp,
            send_cq,
            recv_cq,
            mr,
            slot,
            psn: random_psn(),
            lid: port.lid,
            gid: port.gid,
            config: port.config,
            pd: port.pd.clone(),
            ah: None,
        })
    }

    /// What the peer needs: our QP, and our receive area as the RDMA target.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.mr.addr() + self.slot as u64,
            rkey: self.mr.rkey(),
            len: self.slot as u64,
            ..self.qp.endpoint(self.lid, self.gid, self.psn)
        }
    }

    /// Brings the QP to RTS towards `remote` (and, for UD, makes the address handle).
    pub fn connect(&mut self, remote: &Endpoint) -> Result<()> {
        self.qp.to_rts(&self.config, self.psn, remote)?;
        if self.qp.transport() == Transport::Ud {
            self.ah = Some(AddressHandle::new(&self.pd, &self.config, remote)?);
        }
        Ok(())
    }

    pub fn send_offset(&self) -> usize {
        0
    }

    pub fn recv_offset(&self) -> usize {
        self.slot
    }
}

/// The send-side operation `verb` posts at `remote_addr` (atomics: fetch-add 1,
/// or compare-and-swap whose operands the caller sets per WR).
pub fn send_op(
    verb: VerbKind,
    op: Option<AtomicOp>,
    imm: bool,
    remote_addr: u64,
    rkey: u32,
) -> SendOp {
    // An arbitrary, recognisable immediate: receivers do not interpret it.
    const IMM: u32 = 0x5eed;
    match (verb, op) {
        (VerbKind::Read, _) => SendOp::Read { remote_addr, rkey },
        (VerbKind::Atomic, Some(AtomicOp::Cas)) => SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare: 0,
            swap: 0,
        },
        (VerbKind::Atomic, _) => SendOp::FetchAdd {
            remote_addr,
            rkey,
            add: 1,
        },
        (VerbKind::Send, _) if imm => SendOp::SendImm { imm: IMM },
        (VerbKind::Send, _) => SendOp::Send,
        _ if imm => SendOp::WriteImm {
            remote_addr,
            rkey,
            imm: IMM,
        },
        _ => SendOp::Write { remote_addr, rkey },
    }
}

/// The least a side must grant for `verb`: the client of a READ or atomic
/// exposes nothing; a server never grants more than its test needs.
pub fn access_for(verb: VerbKind, role: Role) -> Access {
    let mut a = Access::LOCAL;
    match (verb, role) {
        (VerbKind::Write | VerbKind::Echo, _) => a.remote_write = true,
        (VerbKind::Read, Role::Server) => a.remote_read = true,
        (VerbKind::Atomic, Role::Server) => a.remote_atomic = true,
        _ => {}
    }
    a
}

/// A fresh 24-bit starting PSN, so a stale packet from an earlier run cannot
/// be mistaken for this one's.
fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() & 0x00ff_ffff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_is_minimal_per_verb_and_role() {
        let read_client = access_for(VerbKind::Read, Role::Client);
        assert!(!read_client.remote_read && !read_client.remote_write);
        let read_server = access_for(VerbKind::Read, Role::Server);
        assert!(read_server.remote_read && !read_server.remote_write && !read_server.remote_atomic);
        let atomic_server = access_for(VerbKind::Atomic, Role::Server);
        assert!(atomic_server.remote_atomic && !atomic_server.remote_write);
        let send = access_for(VerbKind::Send, Role::Server);
        assert_eq!(send, Access::LOCAL);
        assert!(random_psn() <= 0x00ff_ffff);
    }
}
