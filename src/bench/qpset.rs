//! The one bundle of QPs every test builds: `count` QPs of one transport
//! sharing a send CQ and a receive CQ, one registered buffer with a region of
//! `region` bytes per QP, and (UD) an address handle per QP once connected.
//! Latency uses it with one QP; throughput with one set per thread.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::verbs::{
    Access, AddressHandle, CompletionChannel, CompletionQueue, Endpoint, Gid, MemoryRegion,
    PortConfig, ProtectionDomain, QueuePair, SendOps, SharedReceiveQueue, Transport,
};

use super::footprint::Buffers;
use super::port::{Port, MAX_CQE};
use crate::spec::{Connection, MemorySpec, PathSpec};

/// Room for the Global Route Header a UD receive carries before the payload.
pub const GRH_BYTES: usize = 40;

/// Bytes per message slot: payload plus the GRH a UD receive carries, cache-line rounded.
pub fn slot_bytes(size: u32) -> usize {
    (size as usize + GRH_BYTES).div_ceil(64) * 64
}

/// What a set is made of.
pub struct QpShape {
    pub transport: Transport,
    pub count: u32,
    pub sq_depth: u32,
    pub rq_depth: u32,
    /// Inline room each QP is created with.
    pub inline: u32,
    /// SGEs a send WR may gather (`--sge`).
    pub sge: u32,
    /// Buffer bytes per QP.
    pub region: usize,
    pub access: Access,
    /// QoS and MTU of every QP's path.
    pub path: PathSpec,
    /// Both CQs report to a completion channel (`--events`).
    pub events: bool,
    /// `Some`: extended QPs posting through `ibv_wr_*` (`--post-api ex`),
    /// created with exactly these send operations (the ones this side posts).
    pub ex_ops: Option<SendOps>,
    /// Huge pages, and one registration per QP (`--mr-per-qp`).
    pub memory: MemorySpec,
}

impl QpShape {
    /// The buffers this set registers (what `footprint` sums).
    pub fn buffers(&self) -> Buffers {
        Buffers {
            region: self.region,
            qps: self.count,
            memory: self.memory,
        }
    }
}

pub struct QpSet {
    pub qps: Vec<QueuePair>,
    pub send_cq: Arc<CompletionQueue>,
    pub recv_cq: Arc<CompletionQueue>,
    /// Where both CQs' events go (`--events`), else `None`.
    pub channel: Option<Arc<CompletionChannel>>,
    /// The registration of QP 0 (of every QP unless `per_qp_mrs`).
    pub mr: Arc<MemoryRegion>,
    /// With `--mr-per-qp`: QP i's own registration of `region` bytes.
    per_qp_mrs: Vec<Arc<MemoryRegion>>,
    /// Buffer bytes per QP: QP i owns [i·region, (i+1)·region) of `mr`, or
    /// all of its own registration.
    pub region: usize,
    /// UD only: where QP i sends, once connected.
    pub ahs: Vec<Option<Arc<AddressHandle>>>,
    /// `--srq`: the shared receive queue every QP of the set draws from.
    pub srq: Option<Arc<SharedReceiveQueue>>,
    psns: Vec<u32>,
    lid: u16,
    gid: Gid,
    config: PortConfig,
    /// `--cm`: rdma_cm brings the QPs to RTS (`bench::cm`), not `connect`.
    connection: Connection,
    pd: Arc<ProtectionDomain>,
}

impl QpSet {
    /// Creates the CQs, the buffer and the QPs (in INIT, granting `access`).
    pub fn new(port: &Port, shape: &QpShape) -> Result<QpSet> {
        Self::build(port, shape, None)
    }

    /// As `new`, with every QP receiving from one shared receive queue of
    /// `srq_depth` WRs (one SRQ per set: one per side of a point).
    pub fn with_srq(port: &Port, shape: &QpShape, srq_depth: u32) -> Result<QpSet> {
        let srq = SharedReceiveQueue::new(&port.pd, srq_depth)?;
        Self::build(port, shape, Some(srq))
    }

    fn build(port: &Port, shape: &QpShape, srq: Option<Arc<SharedReceiveQueue>>) -> Result<QpSet> {
        let n = shape.count.max(1);
        let config = port.config_for(&shape.path);
        let cq_depth = |per_qp: u32| n.saturating_mul(per_qp).saturating_add(16).min(MAX_CQE);
        let channel = match shape.events {
            true => Some(CompletionChannel::new(&port.ctx)?),
            false => None,
        };
        let ch = channel.as_ref();
        let send_cq = CompletionQueue::with_channel(&port.ctx, cq_depth(shape.sq_depth), ch)?;
        let recv_cq = CompletionQueue::with_channel(&port.ctx, cq_depth(shape.rq_depth), ch)?;
        let register = |len: usize| {
            if shape.memory.hugepages {
                MemoryRegion::new_huge(&port.pd, len, shape.access)
            } else {
                MemoryRegion::new(&port.pd, len, shape.access)
            }
        };
        // Exactly what `footprint` counts: serve's budget admitted these bytes.
        let (count, len) = shape.buffers().registrations();
        let len =
            usize::try_from(len).map_err(|_| Error::usage(format!("a buffer of {len} bytes")))?;
        let per_qp_mrs = if shape.memory.mr_per_qp {
            (0..count)
                .map(|_| register(len))
                .collect::<std::result::Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        let mr = match per_qp_mrs.first() {
            Some(mr) => mr.clone(),
            None => register(len)?,
        };
        let mut qps = Vec::with_capacity(n as usize);
        for _ in 0..shape.count {
            let mut b = QueuePair::builder(&port.pd, shape.transport, &send_cq, &recv_cq)
                .max_send_wr(shape.sq_depth)
                .max_recv_wr(shape.rq_depth.max(1))
                .max_inline(shape.inline)
                .max_send_sge(shape.sge)
                .srq(srq.as_ref());
            if let Some(ops) = shape.ex_ops {
                b = b.extended(ops);
            }
            let qp = b.build()?;
            qp.to_init(&config, shape.access)?;
            qps.push(qp);
        }
        Ok(QpSet {
            ahs: (0..shape.count).map(|_| None).collect(),
            srq,
            psns: random_psns(shape.count as usize),
            qps,
            send_cq,
            recv_cq,
            channel,
            mr,
            per_qp_mrs,
            region: shape.region,
            lid: port.lid,
            gid: port.gid,
            config,
            connection: shape.path.connection,
            pd: port.pd.clone(),
        })
    }

    /// What the peer needs per QP: the QP, and its region as the RDMA target.
    /// With `--cm` the GID, LID and PSN stay zero (rdma_cm resolves the path
    /// and chooses the PSNs); the QP number only names which QP a request
    /// is for.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        let cm = self.connection == Connection::Cm;
        self.qps
            .iter()
            .enumerate()
            .map(|(i, qp)| {
                let e = if cm {
                    qp.endpoint(0, Gid::default(), 0)
                } else {
                    qp.endpoint(self.lid, self.gid, self.psns[i])
                };
                Endpoint {
                    addr: self.mr_of(i).addr() + self.offset(i) as u64,
                    rkey: self.mr_of(i).rkey(),
                    len: self.region as u64,
                    ..e
                }
            })
            .collect()
    }

    /// The port settings these QPs connect with (what `bench::cm` applies).
    pub fn config(&self) -> &PortConfig {
        &self.config
    }

    /// Connects at `mtu` (what both sides agreed on) instead of what the
    /// set was made with.
    pub fn run_at_mtu(&mut self, mtu: u32) {
        self.config.mtu = mtu;
    }

    /// Brings QP i to RTS towards `remotes[i]` (UD: makes an address handle
    /// to it). With `--cm` the QPs were (server) or will be (client) brought
    /// to RTS by rdma_cm instead; only the remote buffers are taken here.
    pub fn connect(&mut self, remotes: &[Endpoint]) -> Result<()> {
        if remotes.len() != self.qps.len() {
            return Err(Error::Peer {
                peer: "peer".into(),
                what: format!(
                    "sent {} endpoints for {} QPs",
                    remotes.len(),
                    self.qps.len()
                ),
            });
        }
        for (i, qp) in self.qps.iter().enumerate() {
            if self.connection == Connection::Cm {
                continue;
            }
            qp.to_rts(&self.config, self.psns[i], &remotes[i])?;
            if qp.transport() == Transport::Ud {
                self.ahs[i] = Some(self.address(&remotes[i])?);
            }
        }
        Ok(())
    }

    /// An address handle to any UD peer (the echo server's clients).
    pub fn address(&self, remote: &Endpoint) -> Result<Arc<AddressHandle>> {
        Ok(AddressHandle::new(&self.pd, &self.config, remote)?)
    }

    /// Each QP's number, in set order (what SRQ arrivals are attributed by).
    pub fn qp_nums(&self) -> Vec<u32> {
        self.qps.iter().map(QueuePair::qpn).collect()
    }

    /// Where QP `q`'s region starts in its registration ([`QpSet::mr_of`]).
    pub fn offset(&self, q: usize) -> usize {
        if self.per_qp_mrs.is_empty() {
            q * self.region
        } else {
            0
        }
    }

    /// The registration QP `q`'s region lies in.
    pub fn mr_of(&self, q: usize) -> &Arc<MemoryRegion> {
        self.per_qp_mrs.get(q).unwrap_or(&self.mr)
    }
}

/// A peer that sent fewer endpoints than this side has QPs.
pub fn short(got: usize) -> Error {
    Error::Peer {
        peer: "peer".into(),
        what: format!("sent too few endpoints ({got})"),
    }
}

/// Fresh 24-bit starting PSNs, one per QP, so a stale packet from an earlier
/// point (throughput rebuilds its QPs every point) cannot be mistaken for
/// this one's.
fn random_psns(n: usize) -> Vec<u32> {
    use std::hash::{BuildHasher, Hasher};
    let seed = std::collections::hash_map::RandomState::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (0..n)
        .map(|i| {
            let mut h = seed.build_hasher();
            h.write_u128(now);
            h.write_usize(i);
            (h.finish() & 0x00ff_ffff) as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psns_are_24_bit_and_differ() {
        let p = random_psns(64);
        assert!(p.iter().all(|&x| x <= 0x00ff_ffff));
        let distinct: std::collections::HashSet<_> = p.iter().collect();
        assert!(distinct.len() > 60, "{distinct:?}");
    }

    #[test]
    fn slots_hold_payload_and_grh_in_whole_cache_lines() {
        assert_eq!(slot_bytes(0), 64);
        assert_eq!(slot_bytes(24), 64);
        assert_eq!(slot_bytes(25), 128);
        assert_eq!(slot_bytes(4096) % 64, 0);
    }
}
