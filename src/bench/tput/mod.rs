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

mod completions;
mod echo_client;
mod echo_server;
mod echo_wire;
mod issuer;
mod session;
mod target;
mod threads;
mod window;

pub use session::{run_tput_client, serve_tput, TputOutcome};
pub use window::{PointCtx, Window, WindowTimer};

use crate::error::Result;
use crate::spec::{Direction, TputPoint, TputSpec};
use crate::verbs::{Access, Endpoint};

use super::ops::{access_for, Role};
use super::port::Port;
use super::qpset::{short, slot_bytes, QpShape};
use echo_client::EchoClientSet;
use echo_server::EchoServerSet;
use issuer::IssuerSet;
use target::TargetSet;

/// The resources of one side for one point, by what that side does in it.
pub enum PointSide {
    Issuer(Vec<IssuerSet>),
    Target(Box<TargetSet>),
    EchoClient(Vec<EchoClientSet>),
    EchoServer(Box<EchoServerSet>),
}

impl PointSide {
    /// Sizes this side of a point and creates its QPs.
    pub fn build(port: &Port, spec: &TputSpec, p: &TputPoint, role: Role) -> Result<PointSide> {
        let slot = slot_bytes(p.size);
        Ok(match (spec.direction, role) {
            (Direction::Inbound, Role::Client) | (Direction::Outbound, Role::Server) => {
                // An issuer exposes nothing: READ results and atomic replies land locally.
                let shape = QpShape {
                    transport: p.transport,
                    count: p.qps,
                    sq_depth: p.sq_depth(),
                    rq_depth: 1,
                    inline: if spec.inline { p.size } else { 0 },
                    region: slot,
                    access: Access::LOCAL,
                };
                let sets = (0..p.threads)
                    .map(|_| IssuerSet::new(port, &shape))
                    .collect::<Result<Vec<_>>>()?;
                PointSide::Issuer(sets)
            }
            (Direction::Inbound, Role::Server) | (Direction::Outbound, Role::Client) => {
                PointSide::Target(Box::new(TargetSet::new(
                    port,
                    spec,
                    p,
                    access_for(spec.verb, Role::Server),
                )?))
            }
            (Direction::Echo, Role::Client) => PointSide::EchoClient(
                (0..p.threads)
                    .map(|_| EchoClientSet::new(port, spec, p))
                    .collect::<Result<Vec<_>>>()?,
            ),
            (Direction::Echo, Role::Server) => {
                PointSide::EchoServer(Box::new(EchoServerSet::new(port, spec, p)?))
            }
        })
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        match self {
            PointSide::Issuer(sets) => sets.iter().flat_map(|s| s.set.endpoints()).collect(),
            PointSide::Target(set) => set.set.endpoints(),
            PointSide::EchoClient(sets) => {
                let mut eps: Vec<Endpoint> =
                    sets.iter().flat_map(|s| s.request_endpoints()).collect();
                eps.extend(sets.iter().flat_map(|s| s.response_endpoints()));
                eps
            }
            PointSide::EchoServer(s) => s.endpoints(),
        }
    }

    /// Connects to the peer's endpoints (in the peer's order) and prepares
    /// every work request the measured loops will post.
    pub fn connect(&mut self, remotes: &[Endpoint], ctx: &PointCtx<'_>) -> Result<()> {
        match self {
            PointSide::Issuer(sets) => {
                let mut at = 0;
                for s in sets.iter_mut() {
                    let n = s.set.qps.len();
                    let mine = remotes
                        .get(at..at + n)
                        .ok_or_else(|| short(remotes.len()))?;
                    s.connect(mine, ctx)?;
                    at += n;
                }
                Ok(())
            }
            PointSide::Target(set) => set.connect(remotes, ctx.point),
            PointSide::EchoClient(sets) => {
                let total: usize = sets.iter().map(|s| s.qp_count()).sum();
                let mut at = 0;
                for s in sets.iter_mut() {
                    s.connect(remotes, at, total)?;
                    at += s.qp_count();
                }
                Ok(())
            }
            PointSide::EchoServer(s) => s.connect(remotes),
        }
    }
}
