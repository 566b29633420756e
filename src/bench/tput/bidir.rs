//! One side of a bidirectional point (`--bidirectional`): this side's issuer
//! threads drive its QPs towards the peer's targets while this thread serves
//! its own targets (a SEND sink counts and reposts receives; READ/WRITE/atomic
//! targets are served by the NIC alone). Both sides do the same at once; each
//! then tells the other what it issued (`Stop`) and what it received
//! (`Stopped`).

use crate::abort::{aborted, Session};
use crate::affinity;
use crate::connect::{expect, Control, Deadlines, Message};
use crate::error::{Error, Result};
use crate::report::{DriverReport, IntervalFigure, Validation};

use super::issuer::{run_issuer, IssuerSet};
use super::target::{poll_stop, TargetSet};
use super::threads::drive;
use super::window::PointCtx;
use crate::bench::wait::IdleWatch;

/// What one side of a bidirectional point knows once both have finished.
pub struct BidirOutcome {
    /// What this side issued.
    pub mine: DriverReport,
    /// What the peer issued.
    pub peer: DriverReport,
    /// Per QP, the peer's SENDs this side's sink received (empty when passive).
    pub received: Vec<u64>,
    /// Atomics: this side's target words after the peer's last WR.
    pub words: Vec<u64>,
    /// What the peer's target counted of this side's WRs, and its words.
    pub peer_received: Vec<u64>,
    pub peer_words: Vec<u64>,
    /// `--validate`: what this side's targets checked of the peer's
    /// payloads, and what the peer's checked of this side's.
    pub validation: Option<Validation>,
    pub peer_validation: Option<Validation>,
}

/// Runs this side's issuers and targets together until both sides' issuers
/// have finished and every WR has landed, then exchanges counts. This
/// side's `--interval`s go to `on_interval` as they end and travel in its
/// `Stop` report; under `--forever` the peer's `Stop` ends this side's
/// point too.
pub fn run_bidir(
    issuers: &mut [IssuerSet],
    target: &mut TargetSet,
    ctx: &PointCtx<'_>,
    index: u32,
    ctl: &mut dyn Control,
    d: &Deadlines,
    on_interval: &(dyn Fn(&IntervalFigure) + Sync),
) -> Result<BidirOutcome> {
    // The serving thread keeps its own CPU, after the issuer threads'.
    affinity::pin(ctx.side, ctx.point.threads as usize);
    let mut received = vec![0u64; target.set.qps.len()];
    let session = Session::current();
    let result = std::thread::scope(|scope| -> Result<(DriverReport, DriverReport)> {
        let mut issuing = Some(
            std::thread::Builder::new()
                .spawn_scoped(scope, || {
                    let _session = session.clone().enter();
                    drive(ctx.intervals, on_interval, || run_issuer(issuers, ctx))
                })
                .map_err(|e| Error::io("starting the bidirectional issuing thread", e))?,
        );
        let mut mine: Option<DriverReport> = None;
        let mut peer: Option<DriverReport> = None;
        let mut buf = target.arrivals();
        let mut watch = IdleWatch::new(d.passive(), "the peer's SENDs or its stop (peer gone?)");
        loop {
            if let Some(h) = issuing.take_if(|h| h.is_finished()) {
                let report = h.join().unwrap_or(Err(Error::Interrupted))?;
                ctl.send(&Message::Stop {
                    index,
                    report: report.clone(),
                })?;
                mine = Some(report);
            }
            if !target.is_sink() {
                // Passive: nothing to serve; wait for our issuers, then the peer's stop.
                if mine.is_none() {
                    if aborted() {
                        return Err(Error::Interrupted);
                    }
                    if ctx.spec.live.forever && peer.is_none() {
                        peer = poll_stop(ctl, index)?;
                        if let (Some(b), Some(_)) = (ctx.intervals, &peer) {
                            // The peer stopped, so does this side.
                            b.end_forever();
                        }
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                if peer.is_none() {
                    let report = expect(ctl, "stop", d.passive(), |m| match m {
                        Message::Stop { index: i, report } if *i == index => {
                            Some(std::mem::take(report))
                        }
                        _ => None,
                    })?;
                    peer = Some(report);
                }
            } else if target.drain_any(&mut received, &mut buf)? > 0 {
                watch.busy();
                continue;
            } else if peer.is_none() && watch.idle()? {
                peer = poll_stop(ctl, index)?;
                if let (Some(b), Some(_), None) = (ctx.intervals, &peer, &mine) {
                    // --forever: the peer stopped, so does this side.
                    b.end_forever();
                }
            }
            if let (Some(m), Some(p)) = (&mine, &peer) {
                // The peer's WRs have all completed: count what is still queued.
                while target.drain_any(&mut received, &mut buf)? > 0 {}
                return Ok((m.clone(), p.clone()));
            }
        }
    });
    affinity::pin(ctx.side, 0);
    let (mine, peer) = result?;
    if !target.is_sink() {
        // A passive target counts nothing (the record says null, not 0).
        received.clear();
    }
    let words = target.atomic_words();
    target.hook_written_slots(ctx.spec, index);
    let validation = target.validation(&peer);
    ctl.send(&Message::Stopped {
        index,
        received: received.clone(),
        group: Vec::new(),
        words: words.clone(),
        // Each side's CPU travels in its issuers' report (`DriverReport::cpu`).
        cpu: None,
        validation: validation.clone(),
    })?;
    let (peer_received, peer_words, peer_validation) =
        expect(ctl, "stopped", d.point(), |m| match m {
            Message::Stopped {
                index: r,
                received,
                words,
                validation,
                ..
            } if *r == index => Some((
                std::mem::take(received),
                std::mem::take(words),
                validation.take(),
            )),
            _ => None,
        })?;
    Ok(BidirOutcome {
        mine,
        peer,
        received,
        words,
        peer_received,
        peer_words,
        validation,
        peer_validation,
    })
}
