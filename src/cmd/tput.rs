//! Throughput: the sweep built from command-line arguments, and the results
//! record of one measured point.

use crate::bench::TputOutcome;
use crate::cli::TestArgs;
use crate::error::{Error, Result};
use crate::report::{DriverReport, IntervalFigure};
use crate::results::{
    CheckFields, CpuUtil, DirectionFigure, LiveFields, MemoryFields, PathFields, PostingFields,
    TputRecord,
};
use crate::spec::{
    default_window, Direction, RateLimit, TputPoint, TputSpec, VerbKind,
    DEFAULT_THREAD_OUTSTANDING, DEFAULT_WINDOW,
};
use crate::sweep::parse_list;

use super::setup::parse_transports;

fn list(option: &str, text: &str) -> Result<Vec<u32>> {
    parse_list(text).map_err(|e| Error::usage(format!("{option}: {e}")))
}

/// `--rate`, `--rate-per-qp` and `--burst` (the last two need the first).
fn rate_from_args(a: &TestArgs) -> Result<Option<RateLimit>> {
    match a.rate {
        Some(mops) => Ok(Some(RateLimit {
            mops,
            per_qp: a.rate_per_qp,
            burst: a.burst,
        })),
        None if a.rate_per_qp => Err(Error::usage("--rate-per-qp: needs --rate MOPS")),
        None if a.burst.is_some() => Err(Error::usage("--burst: needs --rate MOPS")),
        None => Ok(None),
    }
}

/// Builds the spec, refusing bad input (exit 2) before any verbs object exists.
/// Returns it with the plan's notes: sweep points skipped as contradictory,
/// and windows lowered because `--window` was not given.
pub fn spec_from_args(verb: VerbKind, a: &TestArgs) -> Result<(TputSpec, Vec<String>)> {
    let direction = match (verb, a.tput.as_deref()) {
        (VerbKind::Echo, Some("" | "echo")) => Direction::Echo,
        (VerbKind::Echo, Some(other)) => {
            return Err(Error::usage(format!(
                "--tput {other}: echo throughput takes no direction (`echo --tput`)"
            )))
        }
        (_, Some("inbound")) => Direction::Inbound,
        (_, Some("outbound")) => Direction::Outbound,
        (_, Some("")) => {
            return Err(Error::usage(format!(
                "--tput: {} needs a direction, inbound or outbound",
                verb.name()
            )))
        }
        (_, other) => {
            return Err(Error::usage(format!(
                "--tput {}: expected inbound or outbound",
                other.unwrap_or("")
            )))
        }
    };
    if a.completion {
        return Err(Error::usage(
            "--completion: a latency option, not for --tput",
        ));
    }
    if a.group > 1 && direction == Direction::Outbound {
        return Err(Error::usage(format!(
            "--group {}: groups run inbound and echo (outbound has one issuing server per client)",
            a.group
        )));
    }
    if a.group > 1 && a.connect.is_none() {
        return Err(Error::usage(format!(
            "--group {}: several client processes need --connect to one serve",
            a.group
        )));
    }
    let sizes = super::perftest::sizes(verb, a, true)?;
    let transports = parse_transports(&a.transport)?;
    let periods = list("--signal-period", &a.signal_period)?;
    let qps = list("--qps", &a.qps)?;
    let postlists = list("--postlist", &a.postlist)?;
    // None: the point's default window (`default_window`), which depends on its QPs.
    let windows: Vec<Option<u32>> = match &a.window {
        Some(w) => list("--window", w)?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let threads = list("--threads", &a.threads)?;
    let count = crate::sweep::count_points(&[
        ("--transport", transports.len()),
        ("--threads", threads.len()),
        ("--qps", qps.len()),
        ("--signal-period", periods.len()),
        ("--postlist", postlists.len()),
        ("--window", windows.len()),
        ("--size", sizes.len()),
    ])?;
    let mut points = Vec::with_capacity(count as usize);
    let mut skipped = Vec::new();
    for &transport in &transports {
        for &threads in &threads {
            for &qps in &qps {
                for &signal_period in &periods {
                    for &postlist in &postlists {
                        for &window in &windows {
                            for &size in &sizes {
                                points.push(TputPoint {
                                    transport,
                                    size,
                                    signal_period,
                                    qps,
                                    postlist,
                                    window: window.unwrap_or_else(|| default_window(qps, postlist)),
                                    threads,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    // A sweep skips contradictory combinations (say which); a single point is refused.
    if points.len() > 1 {
        points.retain(|p| match p.combination_conflict() {
            Some(why) => {
                skipped.push(why);
                false
            }
            None => true,
        });
        if points.is_empty() {
            return Err(Error::usage(format!(
                "every point of the sweep is contradictory, e.g. {}",
                skipped[0]
            )));
        }
    }
    let mut spec = TputSpec {
        verb,
        direction,
        inline: super::perftest::inline(a)?,
        imm: a.imm,
        op: a.op,
        req: a.req,
        resp: a.resp,
        points,
        duration_s: a.duration.unwrap_or(1.0),
        iters: a.iters,
        warmup_s: a.warmup_time,
        timeout_s: a.timeout,
        group: a.group,
        sge: a.sge,
        path: super::setup::path_from_args(a)?,
        bidirectional: a.bidirectional,
        srq: a.srq,
        events: a.events,
        post_api: a.post_api,
        live: super::setup::live_from_args(a)?,
        validate: a.checks.validate,
        memory: super::setup::memory_from_args(a)?,
        rate: rate_from_args(a)?,
    };
    if spec.iters.is_some() && a.duration.is_some() {
        return Err(Error::usage(
            "--duration and --iters both given: choose one way to end each point",
        ));
    }
    if a.all {
        // perftest's -a leaves out what UD cannot carry under --mtu.
        if let Some(m) = spec.path.mtu {
            if spec.drop_ud_points_over_mtu().is_some() {
                skipped.push(format!("a UD size is above --mtu {m} (-a)"));
            }
        }
    }
    spec.validate()?;
    let mut notes: Vec<String> = skipped
        .into_iter()
        .map(|why| format!("skipped sweep points where {why}"))
        .collect();
    if a.window.is_none() {
        let mut lowered: Vec<(u32, u32)> = spec
            .points
            .iter()
            .filter(|p| p.window < DEFAULT_WINDOW)
            .map(|p| (p.qps, p.window))
            .collect();
        lowered.sort_unstable();
        lowered.dedup();
        for (qps, w) in lowered {
            notes.push(format!(
                "--window not given: {qps} QPs per thread run with a window of {w} per QP, so a thread keeps at most {DEFAULT_THREAD_OUTSTANDING} WRs outstanding (give --window to choose)"
            ));
        }
    }
    notes.sort();
    notes.dedup();
    Ok((spec, notes))
}

/// Turns one measured point into its results record.
pub fn record(spec: &TputSpec, o: &TputOutcome) -> TputRecord {
    let p = &o.point;
    let both;
    let r = match &o.reverse {
        // Bidirectional: the record's totals are both directions' sums.
        Some(rev) => {
            both = sum_reports(&o.report, &rev.report);
            &both
        }
        None => &o.report,
    };
    let bytes_per_s = if r.elapsed_s > 0.0 {
        // Sum of per-thread rates × payload, consistent with `mops`.
        r.mops * 1e6 * p.size as f64
    } else {
        0.0
    };
    let received_by = |counts: &[u64]| (!counts.is_empty()).then(|| counts.iter().sum::<u64>());
    let mut received = received_by(&o.received);
    let mut verify_failures = o.verify_failures;
    let directions = o.reverse.as_ref().map(|rev| {
        let figure =
            |by: &str, r: &DriverReport, got: Option<u64>, vf: Option<u64>| DirectionFigure {
                issued_by: by.into(),
                ops: r.ops,
                elapsed_s: r.elapsed_s,
                mops: r.mops,
                sent: r.sent,
                received: got,
                completions: r.completions,
                verify_failures: vf,
                offered_mops: spec.rate.map(|r| r.offered_mops(p.total_qps())),
                rate_missed: r.rate_missed,
            };
        let back = received_by(&rev.received);
        let out = vec![
            figure("client", &o.report, received, o.verify_failures),
            figure("server", &rev.report, back, rev.verify_failures),
        ];
        received = received.zip(back).map(|(a, b)| a + b);
        verify_failures = o
            .verify_failures
            .zip(rev.verify_failures)
            .map(|(a, b)| a + b);
        out
    });
    let echo = spec.direction == Direction::Echo;
    TputRecord {
        passes: Vec::new(),
        verb: spec.verb.name().to_string(),
        direction: spec.direction.name().to_string(),
        transport: p.transport.name().to_string(),
        size: p.size,
        posting: PostingFields {
            inline: o.inline,
            inline_size: spec.inline.limit(),
            imm: spec.imm,
            op: spec.op.map(|o| format!("{o:?}").to_lowercase()),
            sge: spec.sge,
            events: spec.events,
            post_api: spec.post_api,
        },
        event_wakeups: r.event_wakeups,
        req: echo.then(|| format!("{:?}", spec.req).to_lowercase()),
        resp: echo.then(|| format!("{:?}", spec.resp).to_lowercase()),
        path: PathFields::requested(&spec.path),
        memory: MemoryFields::requested(&spec.memory),
        connection: spec.path.connection.name().to_string(),
        path_mtu: (o.path_mtu > 0).then_some(o.path_mtu),
        signal_period: p.signal_period,
        effective_signal_period: Some(if echo {
            p.signal_period
        } else {
            p.effective_signal_period()
        }),
        qps: p.qps,
        postlist: p.postlist,
        window: p.window,
        threads: p.threads,
        warmup_s: if spec.iters.is_some() {
            0.0
        } else {
            spec.warmup_s
        },
        setup_s: o.setup_s,
        setup_per_qp_ms: o.setup_s.map(|s| s * 1e3 / p.total_qps().max(1) as f64),
        requested_s: spec.iters.is_none().then_some(spec.duration_s),
        iters: spec.iters,
        issued_by: Some(
            if spec.bidirectional {
                "both"
            } else if spec.direction == Direction::Outbound {
                "server"
            } else {
                "client"
            }
            .into(),
        ),
        bidirectional: spec.bidirectional,
        srq: spec.srq,
        directions,
        ops: r.ops,
        elapsed_s: r.elapsed_s,
        mops: r.mops,
        gbps: bytes_per_s * 8.0 / 1e9,
        mib_s: bytes_per_s / (1024.0 * 1024.0),
        sent: r.sent,
        received,
        lost: received.map(|got| r.sent.saturating_sub(got)),
        responses: echo.then_some(r.responses),
        completions: r.completions,
        per_thread: r.per_thread.clone(),
        per_qp_ops: r.per_qp_ops.clone(),
        group_clients: spec.group,
        aggregate_mops: (spec.group > 1).then(|| o.group.iter().map(|c| c.mops).sum()),
        clients: o.group.clone(),
        verify_failures,
        device_counters: (!r.device_counters.is_empty()).then(|| r.device_counters.clone()),
        series: None,
        // --forever: the CPU times cover the window up to the stop, and so
        // do the ops they are divided by.
        cpu_util: CpuUtil::new(
            o.cpu_local,
            o.cpu_peer,
            Some(r.to_stop.map_or(r.ops, |t| t.ops)),
        ),
        live: {
            let mut live = LiveFields {
                interval_s: spec.live.interval_s,
                forever: spec.live.forever,
                intervals: r.intervals.clone(),
                in_progress: None,
                to_stop: r.to_stop,
                ..Default::default()
            };
            // --bidirectional: an index only one side reached carries half
            // the traffic; it is not a rate of the point.
            let both = o
                .reverse
                .as_ref()
                .map(|rev| (o.report.intervals.len()).min(rev.report.intervals.len()));
            live.set_rate_extremes(p.size, both);
            live
        },
        checks: CheckFields {
            validation: o.validation.clone(),
            ..Default::default()
        },
        // --bidirectional: each side offers the rate; mops sums both sides.
        offered_mops: spec
            .rate
            .map(|r| r.offered_mops(p.total_qps()) * if spec.bidirectional { 2.0 } else { 1.0 }),
        rate_per_qp: spec.rate.is_some_and(|r| r.per_qp),
        burst: spec.rate.map(|r| r.burst_for(spec.wrs_per_post(p))),
        rate_missed: r.rate_missed,
    }
}

/// Both directions of a bidirectional point as one report: the client's
/// threads and QPs first, then the server's; the device counters are the
/// client's (in loopback they count both sides' packets).
fn sum_reports(client: &DriverReport, server: &DriverReport) -> DriverReport {
    let cat = |a: &[u64], b: &[u64]| a.iter().chain(b).copied().collect::<Vec<u64>>();
    DriverReport {
        ops: client.ops + server.ops,
        mops: client.mops + server.mops,
        elapsed_s: client.elapsed_s.max(server.elapsed_s),
        per_thread: client
            .per_thread
            .iter()
            .chain(&server.per_thread)
            .cloned()
            .collect(),
        per_qp_ops: cat(&client.per_qp_ops, &server.per_qp_ops),
        sent: client.sent + server.sent,
        per_qp_sent: cat(&client.per_qp_sent, &server.per_qp_sent),
        responses: 0,
        completions: client.completions + server.completions,
        // The outcome carries both sides' checks, merged (TputOutcome::validation).
        validation: None,
        device_counters: client.device_counters.clone(),
        // This process's CPU (the peer's is recorded apart).
        cpu: client.cpu,
        intervals: sum_intervals(&client.intervals, &server.intervals),
        // --forever: the client's window to the stop (its device counters),
        // both sides' ops up to their stops.
        to_stop: client.to_stop.map(|c| crate::report::ToStop {
            ops: c.ops + server.to_stop.map_or(server.ops, |s| s.ops),
            ..c
        }),
        event_wakeups: client
            .event_wakeups
            .map(|c| c + server.event_wakeups.unwrap_or(0)),
        rate_missed: client
            .rate_missed
            .map(|c| c + server.rate_missed.unwrap_or(0)),
    }
}

/// `--interval` with `--bidirectional`: both sides' intervals summed index
/// by index (each side cut its own window; the lengths are the client's), so
/// they add up to both directions' ops. An index only one side reached (the
/// last piece of a window) is that side's alone, placed after the others.
fn sum_intervals(client: &[IntervalFigure], server: &[IntervalFigure]) -> Vec<IntervalFigure> {
    let n = client.len().max(server.len());
    let mut start_s = 0.0;
    (0..n)
        .filter_map(|i| {
            let mut f = match (client.get(i), server.get(i)) {
                (Some(c), Some(s)) => IntervalFigure {
                    ops: c.ops + s.ops,
                    mops: c.mops + s.mops,
                    ..c.clone()
                },
                (Some(one), None) | (None, Some(one)) => one.clone(),
                (None, None) => return None,
            };
            f.start_s = start_s;
            start_s += f.elapsed_s;
            Some(f)
        })
        .collect()
}
