//! The thread harness of a throughput point: one scoped thread per QP set,
//! started together at a barrier, their figures summed into one report.

use std::sync::Barrier;

use crate::abort::Session;
use crate::affinity::{self, Side};
use crate::cpu_use::CpuUse;
use crate::error::{Error, Result};
use crate::report::{
    CounterDeltas, DriverReport, IntervalFigure, ThreadFigure, ToStop, Validation,
};

use super::super::intervals::{add_tail, watch, IntervalBoard};
use super::window::WindowEdges;

/// What one driving thread hands back.
pub struct ThreadResult {
    figure: ThreadFigure,
    per_qp: Vec<u64>,
    per_qp_sent: Vec<u64>,
    sent: u64,
    responses: u64,
    completions: u64,
    counters: Option<CounterDeltas>,
    cpu: Option<CpuUse>,
    to_stop: Option<ToStop>,
    wakeups: Option<u64>,
    validation: Option<Validation>,
    missed: Option<u64>,
}

impl ThreadResult {
    /// `per_qp`: ops of each QP in the window; `elapsed_s`: the window;
    /// `per_qp_sent`: every WR each QP posted.
    pub fn new(
        thread: u32,
        per_qp: Vec<u64>,
        elapsed_s: f64,
        per_qp_sent: Vec<u64>,
        responses: u64,
        completions: u64,
    ) -> Self {
        let sent = per_qp_sent.iter().sum();
        let ops: u64 = per_qp.iter().sum();
        let mops = if elapsed_s > 0.0 {
            ops as f64 / elapsed_s / 1e6
        } else {
            0.0
        };
        ThreadResult {
            figure: ThreadFigure {
                thread,
                ops,
                elapsed_s,
                mops,
            },
            per_qp,
            per_qp_sent,
            sent,
            responses,
            completions,
            counters: None,
            cpu: None,
            to_stop: None,
            wakeups: None,
            validation: None,
            missed: None,
        }
    }

    /// `--validate`: what this thread checked (READ issuers, echo clients).
    pub fn with_validation(mut self, validation: Option<Validation>) -> Self {
        self.validation = validation;
        self
    }

    /// `--rate`: the tokens this thread's buckets were given in its window
    /// and did not hand out.
    pub fn with_missed(mut self, missed: Option<u64>) -> Self {
        self.missed = missed;
        self
    }

    /// `--events`: the completion-channel events this thread took in its window.
    pub fn with_wakeups(mut self, wakeups: Option<u64>) -> Self {
        self.wakeups = wakeups;
        self
    }

    /// The device's counters and the CPU use over this thread's window
    /// (thread 0 reads them).
    pub fn with_counters(mut self, edges: WindowEdges) -> Self {
        self.counters = edges.counters;
        self.cpu = edges.cpu;
        self
    }

    /// `--forever`: this thread's window up to the stop (its `ops` and
    /// `elapsed_s` covering the kept intervals only).
    pub fn with_to_stop(mut self, to_stop: Option<ToStop>) -> Self {
        self.to_stop = to_stop;
        self
    }
}

/// Runs `work` on one scoped thread per set, started together; sums what they measured.
/// Each thread is pinned to the CPU planned for the `t`-th measuring
/// thread of `side` before it starts.
pub fn run_threads<S: Send>(
    sets: &mut [S],
    side: Side,
    work: impl Fn(u32, &mut S, &Barrier) -> Result<ThreadResult> + Sync,
) -> Result<DriverReport> {
    let barrier = Barrier::new(sets.len());
    // The threads work for this thread's session (a serve client's).
    let session = Session::current();
    let results: Vec<Result<ThreadResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sets
            .iter_mut()
            .enumerate()
            .map(|(t, set)| {
                let (barrier, work, session) = (&barrier, &work, session.clone());
                scope.spawn(move || {
                    let _session = session.enter();
                    affinity::pin(side, t);
                    work(t as u32, set, barrier)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::Interrupted)))
            .collect()
    });
    let mut report = DriverReport::default();
    for r in results {
        let r = r?;
        report.ops += r.figure.ops;
        report.mops += r.figure.mops;
        report.elapsed_s = report.elapsed_s.max(r.figure.elapsed_s);
        report.per_thread.push(r.figure);
        report.per_qp_ops.extend(r.per_qp);
        report.sent += r.sent;
        report.per_qp_sent.extend(r.per_qp_sent);
        report.responses += r.responses;
        report.completions += r.completions;
        if let Some(c) = r.counters {
            report.device_counters = c;
        }
        if r.cpu.is_some() {
            report.cpu = r.cpu;
        }
        if let Some(v) = &r.validation {
            match &mut report.validation {
                Some(all) => all.absorb(v),
                None => report.validation = Some(v.clone()),
            }
        }
        if let Some(f) = r.missed {
            report.rate_missed = Some(report.rate_missed.unwrap_or(0) + f);
        }
        if let Some(w) = r.wakeups {
            report.event_wakeups = Some(report.event_wakeups.unwrap_or(0) + w);
        }
        // The first thread's span (its edges were read), every thread's ops.
        if let Some(t) = r.to_stop {
            let all = report.to_stop.get_or_insert(ToStop { ops: 0, ..t });
            all.ops += t.ops;
        }
    }
    Ok(report)
}

/// Runs a driving side's threads while its intervals go to `on_interval` as
/// they end; returns its report with every interval (the last piece of a
/// finite window included).
pub fn drive(
    board: Option<&IntervalBoard>,
    on_interval: &(dyn Fn(&IntervalFigure) + Sync),
    work: impl FnOnce() -> Result<DriverReport>,
) -> Result<DriverReport> {
    let (report, intervals) = watch(board, on_interval, work);
    let mut report = report?;
    report.intervals = intervals;
    if let Some(tail) = add_tail(&mut report.intervals, report.ops, report.elapsed_s) {
        on_interval(tail);
    }
    Ok(report)
}
