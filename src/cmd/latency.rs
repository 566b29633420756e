//! Latency: the spec built from command-line arguments, and the results
//! record of one measured point.

use crate::bench::PointOutcome;
use crate::cli::TestArgs;
use crate::error::{Error, Result};
use crate::results::{
    CheckFields, CpuUtil, LatencyRecord, LiveFields, MemoryFields, PathFields, PostingFields,
};
use crate::spec::{LatencyMode, LatencySpec, VerbKind};

/// Builds the spec from arguments, refusing bad input (exit 2) before any
/// verbs object exists.
pub fn spec_from_args(verb: VerbKind, a: &TestArgs) -> Result<LatencySpec> {
    let sizes = super::perftest::sizes(verb, a, false)?;
    crate::sweep::count_points(&[("--size", sizes.len())])?;
    let mode = match verb {
        v if v.completion_only() => LatencyMode::Completion,
        VerbKind::Echo if a.completion => {
            return Err(Error::usage(
                "--completion: echo is a round trip by definition; use write --completion",
            ))
        }
        _ if a.completion => LatencyMode::Completion,
        _ => LatencyMode::PingPong,
    };
    if a.duration.is_some() && a.iters.is_some() {
        return Err(Error::usage(
            "--duration and --iters both given: choose one way to end each size",
        ));
    }
    let mut spec = LatencySpec {
        verb,
        mode,
        transport: match super::setup::parse_transports(&a.transport)?.as_slice() {
            [t] => *t,
            _ => {
                return Err(Error::usage(format!(
                    "--transport {}: a latency run takes one transport",
                    a.transport
                )))
            }
        },
        inline: super::perftest::inline(a)?,
        imm: a.imm,
        op: a.op,
        sizes,
        iters: a.iters.unwrap_or(10_000),
        duration_s: a.duration,
        warmup: a.warmup,
        timeout_s: a.timeout,
        sge: a.sge,
        path: super::setup::path_from_args(a)?,
        events: a.events,
        post_api: a.post_api,
        live: super::setup::live_from_args(a)?,
        validate: a.checks.validate,
        memory: super::setup::memory_from_args(a)?,
        keep_samples: 0,
    };
    spec.keep_samples = super::script_output::keep_samples(a, spec.iters, spec.duration_s);
    if a.all {
        // perftest's -a leaves out what UD cannot carry under --mtu.
        spec.drop_ud_sizes_over_mtu();
    }
    spec.validate()?;
    Ok(spec)
}

/// Turns one measured point into its results record.
pub fn record(spec: &LatencySpec, p: &PointOutcome<'_>) -> LatencyRecord {
    let ping = spec.mode == LatencyMode::PingPong;
    // Ping-pong samples are round trips; the reported figure is half of each.
    let scale = if ping { 0.5 } else { 1.0 };
    let rtt = ping.then(|| p.samples.summary(1.0));
    LatencyRecord {
        passes: Vec::new(),
        verb: spec.verb.name().to_string(),
        metric: spec.mode.metric().to_string(),
        transport: spec.transport.name().to_string(),
        size: p.size,
        posting: PostingFields {
            inline: p.client.inline,
            inline_size: spec.inline.limit(),
            imm: spec.imm,
            op: spec.op.map(|o| format!("{o:?}").to_lowercase()),
            sge: spec.sge,
            events: spec.events,
            post_api: spec.post_api,
        },
        event_wakeups: p.client.event_wakeups,
        iters: p.client.measured,
        warmup_dropped: p.client.warmup,
        elapsed_s: p.client.elapsed_ns as f64 / 1e9,
        path: PathFields::requested(&spec.path),
        bidirectional: false,
        srq: false,
        memory: MemoryFields::requested(&spec.memory),
        connection: spec.path.connection.name().to_string(),
        path_mtu: (p.path_mtu > 0).then_some(p.path_mtu),
        stats: p.samples.summary(scale),
        rtt_p50_ns: rtt.as_ref().map(|r| r.p50_ns),
        rtt_mean_ns: rtt.as_ref().map(|r| r.mean_ns),
        // --forever: the iterations after the last kept interval were sent too.
        sent: p.client.to_stop.map_or(p.client.measured, |t| t.ops) + p.client.warmup,
        server_received: p.server_received,
        verify_failures: p.client.verify_failures,
        device_counters: p.client.device_counters.clone(),
        requested_s: spec.duration_s,
        histogram: p.samples.buckets(scale),
        series: None,
        cpu_util: CpuUtil::new(p.client.cpu, p.cpu_peer, None),
        live: {
            let mut live = LiveFields {
                interval_s: spec.live.interval_s,
                forever: spec.live.forever,
                intervals: p.intervals.clone(),
                in_progress: None,
                to_stop: p.client.to_stop,
                ..Default::default()
            };
            live.set_p99_extremes();
            live
        },
        checks: CheckFields {
            validation: p.validation.clone(),
            ..Default::default()
        },
        load: None,
        offered_mops: None,
        achieved_mops: None,
        saturated_mops: None,
        background: None,
    }
}
