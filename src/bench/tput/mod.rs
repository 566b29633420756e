//! Throughput: inbound, outbound and echo (HERD §3), one point at a time.
//!
//! An *issuer* (`issuer.rs`) owns `threads` threads of `qps` QPs each and
//! keeps up to `window` WRs outstanding per QP, posting `postlist` WRs per
//! doorbell and signaling one WR in `signal_period`. A *target* (`target.rs`)
//! owns one QP per issuer QP and either stays passive (READ/WRITE/atomics:
//! its CPU does nothing) or consumes SENDs. Echo clients (`echo_client.rs`)
//! keep `window` requests in flight per QP; the echo server
//! (`echo_server.rs`) answers each request it finds. `session.rs` runs the
//! points over the control channel; `completions.rs` holds the send-queue
//! and receive-queue bookkeeping every loop shares.

mod bidir;
mod completions;
mod echo_client;
mod echo_server;
mod echo_wire;
mod hold;
mod issuer;
mod pace;
mod session;
mod target;
mod threads;
mod validate;
mod window;

pub use hold::LoadHold;
pub use session::{
    run_tput_client, run_tput_client_held, run_tput_client_live, serve_tput, Reverse, TputOutcome,
};
pub use window::{PointCtx, Window, WindowTimer};

use crate::error::Result;
use crate::spec::{Direction, TputPoint, TputSpec};
use crate::verbs::{Access, Endpoint, PortConfig, QueuePair};

use super::footprint::{self, Buffers, Footprint};
use super::ops::{access_for, ex_send_ops, inline_room, Role};
use super::port::Port;
use super::qpset::{short, slot_bytes, QpShape};
use echo_client::EchoClientSet;
use echo_server::EchoServerSet;
use issuer::IssuerSet;
use target::TargetSet;

/// The resources of one side for one point, by what that side does in it.
/// `E` is that side's part in an echo point: the client drives echo
/// (`EchoClients`), the server answers it (`EchoServer`), so neither side
/// can hold the other's.
pub enum PointSide<E> {
    Issuer(Vec<IssuerSet>),
    Target(Box<TargetSet>),
    Echo(E),
    /// `--bidirectional`: both sides issue and both are targets.
    Both {
        issuers: Vec<IssuerSet>,
        target: Box<TargetSet>,
    },
}

/// The echo client's threads.
pub type EchoClients = Vec<EchoClientSet>;
pub type EchoServer = Box<EchoServerSet>;

/// A side's part in an echo point.
pub trait EchoPart: Sized {
    const ROLE: Role;
    fn build(port: &Port, spec: &TputSpec, p: &TputPoint) -> Result<Self>;
    /// What `build` registers.
    fn buffers(spec: &TputSpec, p: &TputPoint) -> Vec<Buffers>;
    /// Work requests `build` prepares and keeps for the whole point.
    fn prepared_wrs(_spec: &TputSpec, _p: &TputPoint) -> u64 {
        0
    }
    fn endpoints(&self) -> Vec<Endpoint>;
    fn connect(&mut self, remotes: &[Endpoint]) -> Result<()>;
}

impl EchoPart for EchoClients {
    const ROLE: Role = Role::Client;

    fn build(port: &Port, spec: &TputSpec, p: &TputPoint) -> Result<Self> {
        (0..p.threads)
            .map(|_| EchoClientSet::new(port, spec, p))
            .collect()
    }

    fn buffers(spec: &TputSpec, p: &TputPoint) -> Vec<Buffers> {
        let (req, resp) = echo_client::buffers(spec, p);
        (0..p.threads)
            .flat_map(|_| [Some(req), resp])
            .flatten()
            .collect()
    }

    /// Every thread's request QPs, then every thread's response QPs.
    fn endpoints(&self) -> Vec<Endpoint> {
        let mut eps: Vec<Endpoint> = self.iter().flat_map(|s| s.request_endpoints()).collect();
        eps.extend(self.iter().flat_map(|s| s.response_endpoints()));
        eps
    }

    fn connect(&mut self, remotes: &[Endpoint]) -> Result<()> {
        let total: usize = self.iter().map(|s| s.qp_count()).sum();
        let mut at = 0;
        for s in self.iter_mut() {
            s.connect(remotes, at, total)?;
            at += s.qp_count();
        }
        Ok(())
    }
}

impl EchoPart for EchoServer {
    const ROLE: Role = Role::Server;

    fn build(port: &Port, spec: &TputSpec, p: &TputPoint) -> Result<Self> {
        Ok(Box::new(EchoServerSet::new(port, spec, p)?))
    }

    fn buffers(spec: &TputSpec, p: &TputPoint) -> Vec<Buffers> {
        echo_server::buffers(spec, p)
    }

    fn prepared_wrs(_spec: &TputSpec, p: &TputPoint) -> u64 {
        // One response per client QP and window slot (EchoServerSet::connect).
        u64::from(p.total_qps()) * u64::from(p.window)
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        EchoServerSet::endpoints(self)
    }

    fn connect(&mut self, remotes: &[Endpoint]) -> Result<()> {
        EchoServerSet::connect(self, remotes)
    }
}

/// What one issuing thread's set registers: a slot per QP (`--validate`:
/// a ring of them, one per WR of its prebuilt postlists).
fn issuer_buffers(spec: &TputSpec, p: &TputPoint) -> Buffers {
    let slots = if spec.validate {
        validate::ring_slots(p)
    } else {
        1
    };
    Buffers {
        region: slot_bytes(p.size) * slots,
        qps: p.qps,
        memory: spec.memory,
    }
}

impl<E: EchoPart> PointSide<E> {
    /// What `build` registers for this point, from the same functions.
    pub fn buffers(spec: &TputSpec, p: &TputPoint) -> Vec<Buffers> {
        let issuers = || vec![issuer_buffers(spec, p); p.threads as usize];
        let target = || vec![target::buffers(spec, p)];
        if spec.bidirectional {
            return [issuers(), target()].concat();
        }
        match (spec.direction, E::ROLE) {
            (Direction::Inbound, Role::Client) | (Direction::Outbound, Role::Server) => issuers(),
            (Direction::Inbound, Role::Server) | (Direction::Outbound, Role::Client) => target(),
            (Direction::Echo, _) => E::buffers(spec, p),
        }
    }

    /// What this side of the whole session pins at its largest point.
    pub fn footprint(spec: &TputSpec) -> Result<Footprint> {
        footprint::session("points", &spec.points, |p| {
            let f = Footprint::of(&Self::buffers(spec, p));
            match (spec.direction, spec.bidirectional) {
                (Direction::Echo, false) => f.with_prepared(E::prepared_wrs(spec, p)),
                // --validate: the issuers' rings of prebuilt postlists.
                _ if spec.validate => f.with_prepared(issuer_ring_wrs(spec, p, E::ROLE)),
                _ => f,
            }
        })
    }

    /// Sizes this side of a point and creates its QPs.
    pub fn build(port: &Port, spec: &TputSpec, p: &TputPoint) -> Result<Self> {
        let issuers = || -> Result<Vec<IssuerSet>> {
            // Issuers are never echo, so the device's limit is not needed:
            // what they inline is what was asked, checked against it already.
            let inline = inline_room(spec.verb, spec.inline, [p.size], 0);
            // An issuer exposes nothing: READ results and atomic replies land locally.
            let b = issuer_buffers(spec, p);
            let shape = QpShape {
                transport: p.transport,
                count: b.qps,
                sq_depth: p.sq_depth(),
                rq_depth: 1,
                inline,
                sge: spec.sge,
                region: b.region,
                access: Access::LOCAL,
                path: spec.path,
                events: spec.events,
                ex_ops: ex_send_ops(spec.post_api, spec.verb, spec.op, spec.imm),
                memory: b.memory,
            };
            (0..p.threads)
                .map(|_| IssuerSet::new(port, &shape))
                .collect()
        };
        let target = || -> Result<Box<TargetSet>> {
            let access = access_for(spec.verb, Role::Server);
            Ok(Box::new(TargetSet::new(port, spec, p, access)?))
        };
        if spec.bidirectional {
            return Ok(PointSide::Both {
                issuers: issuers()?,
                target: target()?,
            });
        }
        Ok(match (spec.direction, E::ROLE) {
            (Direction::Inbound, Role::Client) | (Direction::Outbound, Role::Server) => {
                PointSide::Issuer(issuers()?)
            }
            (Direction::Inbound, Role::Server) | (Direction::Outbound, Role::Client) => {
                PointSide::Target(target()?)
            }
            (Direction::Echo, _) => PointSide::Echo(E::build(port, spec, p)?),
        })
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        match self {
            PointSide::Issuer(sets) => sets.iter().flat_map(|s| s.set.endpoints()).collect(),
            PointSide::Target(set) => set.set.endpoints(),
            PointSide::Echo(e) => e.endpoints(),
            // Both sides list their issuers' QPs first, then their targets'.
            PointSide::Both { issuers, target } => {
                let mut eps: Vec<Endpoint> =
                    issuers.iter().flat_map(|s| s.set.endpoints()).collect();
                eps.extend(target.set.endpoints());
                eps
            }
        }
    }

    /// Every QP of this side in the order of the peer's endpoints they pair
    /// with (`--cm` dials QP i to the peer's endpoint i), with the port
    /// settings they connect with (echo refuses `--cm`, so it has none).
    pub fn qps_mut(&mut self) -> (Vec<&mut QueuePair>, Option<PortConfig>) {
        match self {
            PointSide::Issuer(sets) => {
                let config = sets.first().map(|s| *s.set.config());
                (
                    sets.iter_mut().flat_map(|s| s.set.qps.iter_mut()).collect(),
                    config,
                )
            }
            PointSide::Target(set) => {
                let config = Some(*set.set.config());
                (set.set.qps.iter_mut().collect(), config)
            }
            // Bidirectional: this side's targets pair with the peer's
            // issuers (listed first), its issuers with the peer's targets.
            PointSide::Both { issuers, target } => {
                let config = Some(*target.set.config());
                let mut qps: Vec<&mut QueuePair> = target.set.qps.iter_mut().collect();
                qps.extend(issuers.iter_mut().flat_map(|s| s.set.qps.iter_mut()));
                (qps, config)
            }
            // --cm is refused with echo.
            PointSide::Echo(_) => (Vec::new(), None),
        }
    }

    /// Connects to the peer's endpoints (in the peer's order) and prepares
    /// every work request the measured loops will post.
    pub fn connect(&mut self, remotes: &[Endpoint], ctx: &PointCtx<'_>) -> Result<()> {
        match self {
            PointSide::Issuer(sets) => connect_issuers(sets, remotes, ctx),
            PointSide::Target(set) => set.connect(remotes, ctx.point),
            PointSide::Echo(e) => e.connect(remotes),
            // The peer's issuers reach this side's targets, and this side's
            // issuers the peer's targets (listed after its issuers).
            PointSide::Both { issuers, target } => {
                let n = target.set.qps.len();
                let (theirs, targets) = (remotes.get(..n), remotes.get(n..));
                let (Some(theirs), Some(targets)) = (theirs, targets) else {
                    return Err(short(remotes.len()));
                };
                target.connect(theirs, ctx.point)?;
                connect_issuers(issuers, targets, ctx)
            }
        }
    }
}

/// `--validate`: the WRs this side's issuers prebuild in their rings (one
/// postlist per QP without it).
fn issuer_ring_wrs(spec: &TputSpec, p: &TputPoint, role: Role) -> u64 {
    let issues = spec.bidirectional
        || matches!(
            (spec.direction, role),
            (Direction::Inbound, Role::Client) | (Direction::Outbound, Role::Server)
        );
    match issues {
        true => u64::from(p.total_qps()) * validate::ring_slots(p) as u64,
        false => 0,
    }
}

/// Connects each issuing thread's QPs to its share of `remotes`, in order.
fn connect_issuers(sets: &mut [IssuerSet], remotes: &[Endpoint], ctx: &PointCtx<'_>) -> Result<()> {
    let mut at = 0;
    for s in sets.iter_mut() {
        let n = s.set.qps.len();
        let mine = remotes
            .get(at..at + n)
            .ok_or_else(|| short(remotes.len()))?;
        s.connect(mine, ctx, at as u32)?;
        at += n;
    }
    Ok(())
}
