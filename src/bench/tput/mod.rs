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

pub use session::{run_tput_client, serve_tput, TputOutcome};

use std::time::Duration;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::spec::{Direction, TputPoint, TputSpec};
use crate::verbs::{Access, Endpoint};

use super::ops::{access_for, Role};
use super::port::Port;
use super::qpset::{slot_bytes, QpShape};
use completions::RECV_BATCH;
use echo_client::EchoClientSet;
use echo_server::EchoServerSet;
use issuer::IssuerSet;
use target::TargetSet;

/// What one side measures with, and against what, in one point.
pub struct PointCtx<'a> {
    pub spec: &'a TputSpec,
    pub point: &'a TputPoint,
    pub clock: &'a Clock,
    pub window: Window,
}

impl<'a> PointCtx<'a> {
    pub fn new(spec: &'a TputSpec, point: &'a TputPoint, clock: &'a Clock) -> Self {
        PointCtx {
            spec,
            point,
            clock,
            window: Window::new(clock, spec),
        }
    }
}

/// Where the measured window starts and ends, shared by all threads of a point.
#[derive(Clone, Copy)]
pub struct Window {
    pub warmup: u64,
    pub duration: u64,
    pub iters: Option<u64>,
}

impl Window {
    fn new(clock: &Clock, spec: &TputSpec) -> Self {
        Window {
            warmup: clock.ticks(Duration::from_secs_f64(spec.warmup_s)),
            duration: clock.ticks(Duration::from_secs_f64(spec.duration_s)),
            iters: spec.iters,
        }
    }
}

/// One thread's view of the measured window, fed the loop's clock readings.
/// Throughput loops ask it once per pass whether the window opens (then they
/// snapshot their counters) and whether it is over.
pub struct WindowTimer {
    warm_end: u64,
    /// When a timed window ends; `None` in an --iters run (the loop ends it).
    end: Option<u64>,
    measuring: bool,
    /// When the window opened (the start reading until then).
    pub opened: u64,
}

impl WindowTimer {
    /// Starts the clock at `now`: warm-up first, except in an --iters run.
    pub fn start(now: u64, w: &Window) -> Self {
        let warmup = if w.iters.is_some() { 0 } else { w.warmup };
        WindowTimer {
            warm_end: now + warmup,
            end: w.iters.is_none().then_some(now + warmup + w.duration),
            measuring: warmup == 0,
            opened: now,
        }
    }

    /// True exactly once: on the first reading at or after the warm-up's end.
    #[inline(always)]
    pub fn opens(&mut self, now: u64) -> bool {
        if self.measuring || now < self.warm_end {
            return false;
        }
        self.measuring = true;
        self.opened = now;
        true
    }

    /// Whether a timed window is over. It ends no earlier than one loop pass
    /// after it opened, so a slow loop (many QPs on a slow machine) still
    /// measures something.
    #[inline(always)]
    pub fn over(&self, now: u64) -> bool {
        self.measuring && self.end.is_some_and(|e| now >= e) && now > self.opened
    }
}

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

/// A peer that sent fewer endpoints than this side has QPs.
fn short(got: usize) -> Error {
    Error::Peer {
        peer: "peer".into(),
        what: format!("sent too few endpoints ({got})"),
    }
}

/// Receive-queue depth of a SEND sink QP: room for two full windows plus a
/// batch being reposted, and at least perftest's 512, so a sender is not
/// slowed by RNR NAKs while the sink thread catches up; whole batches.
fn sink_rq_depth(p: &TputPoint) -> u32 {
    (2 * p.window + RECV_BATCH).max(512).div_ceil(RECV_BATCH) * RECV_BATCH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_opens_once_after_warmup_and_ends_after_its_duration() {
        let w = Window {
            warmup: 10,
            duration: 100,
            iters: None,
        };
        let mut t = WindowTimer::start(1000, &w);
        assert!(!t.opens(1005) && !t.over(1005));
        assert!(t.opens(1012));
        assert!(!t.opens(1013), "opens only once");
        assert_eq!(t.opened, 1012);
        assert!(!t.over(1109));
        assert!(t.over(1110));
    }

    #[test]
    fn iters_runs_have_no_warmup_and_no_timed_end() {
        let w = Window {
            warmup: 10,
            duration: 100,
            iters: Some(5),
        };
        let mut t = WindowTimer::start(0, &w);
        assert!(!t.opens(0), "measuring from the start");
        assert!(!t.over(1_000_000));
    }
}
