//! `rdma-bench read|write|send|echo|atomic`: a latency run, in loopback or
//! against a `serve` peer, printed as a table and saved as JSON/CSV.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::bench::session::PointOutcome;
use crate::bench::{run_client, DeviceChoice, Port};
use crate::cli::{TestArgs, DEFAULT_PORT};
use crate::clock::Clock;
use crate::connect::TcpChannel;
use crate::error::{Error, Result};
use crate::export::ResultsSink;
use crate::output::Console;
use crate::results::{
    now_utc, DeviceInfo, HostInfo, LatencyRecord, Record, ResultsDoc, SCHEMA_VERSION,
};
use crate::spec::{LatencyMode, LatencySpec, VerbKind, ATOMIC_SIZE};
use crate::sweep::parse_list;
use crate::verbs::{probe_max_inline, CompletionQueue, Transport};

/// Builds the spec from arguments, refusing bad input (exit 2) before any
/// verbs object exists.
pub fn spec_from_args(verb: VerbKind, a: &TestArgs) -> Result<LatencySpec> {
    let sizes = match &a.size {
        Some(s) => parse_list(s).map_err(|e| Error::usage(format!("--size: {e}")))?,
        None if verb == VerbKind::Atomic => vec![ATOMIC_SIZE],
        None => vec![2],
    };
    let mode = match verb {
        VerbKind::Read | VerbKind::Atomic => LatencyMode::Completion,
        VerbKind::Echo if a.completion => {
            return Err(Error::usage(
                "--completion: echo is a round trip by definition; use write --completion",
            ))
        }
        _ if a.completion => LatencyMode::Completion,
        _ => LatencyMode::PingPong,
    };
    if a.duration.is_some() && a.iters != 10_000 {
        return Err(Error::usage(
            "--duration and --iters both given: choose one way to end each size",
        ));
    }
    let spec = LatencySpec {
        verb,
        mode,
        transport: match parse_transports(&a.transport)?.as_slice() {
            [t] => *t,
            _ => {
                return Err(Error::usage(format!(
                    "--transport {}: a latency run takes one transport",
                    a.transport
                )))
            }
        },
        inline: a.inline,
        imm: a.imm,
        op: a.op,
        sizes,
        iters: a.iters,
        duration_s: a.duration,
        warmup: a.warmup,
        timeout_s: a.timeout,
    };
    spec.validate()?;
    Ok(spec)
}

/// Parses `rc`, `uc`, `ud` or a comma list of them.
pub fn parse_transports(text: &str) -> Result<Vec<Transport>> {
    let mut out = Vec::new();
    for t in text.split(',') {
        let t = match t.trim() {
            "rc" => Transport::Rc,
            "uc" => Transport::Uc,
            "ud" => Transport::Ud,
            other => {
                return Err(Error::usage(format!(
                    "--transport {other}: expected rc, uc or ud (or a list like rc,uc)"
                )))
            }
        };
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

pub fn device_info(port: &Port) -> Result<DeviceInfo> {
    let attr = port.ctx.query_device()?;
    let cq = CompletionQueue::new(&port.ctx, 4)?;
    Ok(DeviceInfo {
        name: port.ctx.name().to_string(),
        vendor_id: attr.vendor_id,
        vendor_part_id: attr.vendor_part_id,
        fw_ver: attr.fw_ver,
        hw_ver: attr.hw_ver,
        port: port.config.port,
        gid_index: port.config.gid_index,
        gid: port.gid.to_string(),
        link_layer: format!("{:?}", port.link_layer),
        active_mtu: port.mtu,
        speed_gbps: port.ctx.query_port(port.config.port)?.speed_gbps,
        max_inline: probe_max_inline(&port.pd, &cq, Transport::Rc),
    })
}

/// Turns one measured point into its results record.
pub fn record(spec: &LatencySpec, p: &PointOutcome<'_>) -> LatencyRecord {
    let ping = spec.mode == LatencyMode::PingPong;
    // Ping-pong samples are round trips; the reported figure is half of each.
    let scale = if ping { 0.5 } else { 1.0 };
    let rtt = ping.then(|| p.samples.summary(1.0));
    LatencyRecord {
        verb: spec.verb.name().to_string(),
        metric: spec.mode.metric().to_string(),
        transport: spec.transport.name().to_string(),
        size: p.size,
        inline: p.client.inline,
        imm: spec.imm,
        op: spec.op.map(|o| format!("{o:?}").to_lowercase()),
        iters: p.client.measured,
        warmup_dropped: p.client.warmup,
        elapsed_s: p.client.elapsed_ns as f64 / 1e9,
        stats: p.samples.summary(scale),
        rtt_p50_ns: rtt.as_ref().map(|r| r.p50_ns),
        rtt_mean_ns: rtt.as_ref().map(|r| r.mean_ns),
        sent: p.client.measured + p.client.warmup,
        server_received: p.server_received,
        verify_failures: p.client.verify_failures,
        histogram: p.samples.buckets(scale),
    }
}

pub fn connect_to(target: &str, timeout: f64) -> Result<TcpChannel> {
    let with_port = if target.contains(':') && !target.starts_with('[') || target.contains("]:") {
        target.to_string()
    } else {
        format!("{target}:{DEFAULT_PORT}")
    };
    let addrs: Vec<_> = with_port
        .to_socket_addrs()
        .map_err(|e| Error::usage(format!("--connect {target}: cannot resolve: {e}")))?
        .collect();
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs_f64(timeout)) {
            Ok(s) => return TcpChannel::new(s),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Peer {
        peer: with_port,
        what: format!(
            "cannot connect: {} (is `rdma-bench serve` running there?)",
            last.map(|e| e.to_string())
                .unwrap_or_else(|| "no address".into())
        ),
    })
}

/// The results document of a run, before any point is measured.
pub fn new_doc(args: &TestArgs, port: &Port, clock: &Clock) -> Result<ResultsDoc> {
    Ok(ResultsDoc {
        schema_version: SCHEMA_VERSION,
        tool: "rdma-bench".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command_line: std::env::args().collect(),
        started_utc: now_utc(),
        peer: args.connect.clone().unwrap_or_else(|| "loopback".into()),
        clock: clock.describe(),
        host: HostInfo::current(),
        device: device_info(port)?,
        results: Vec::new(),
    })
}

pub fn run(verb: VerbKind, args: &TestArgs) -> Result<()> {
    if args.tput.is_some() {
        return super::tput::run(verb, args);
    }
    let spec = spec_from_args(verb, args)?;
    let sink = ResultsSink::new(args.json.clone(), args.csv.clone());
    sink.check_writable()?;
    let port = Port::open(&DeviceChoice::from(&args.device))?;
    let clock = Clock::calibrate(Duration::from_millis(20));
    let mut doc = new_doc(args, &port, &clock)?;
    let console = Console::new(args.quiet, spec.sizes.len() as u64);
    console.header(&spec, port.ctx.name());
    let mut on_point = |p: PointOutcome<'_>| {
        let r = record(&spec, &p);
        console.row(&r);
        doc.results.push(Record::Latency(r));
        sink.write(&doc)
    };
    let result = match &args.connect {
        Some(target) => {
            let mut ctl = connect_to(target, spec.timeout_s)?;
            run_client(&spec, &port, &mut ctl, &clock, &mut on_point)
        }
        None => run_loopback(&spec, &port, &clock, &mut on_point),
    };
    console.finish();
    result
}

/// Loopback: the server side runs on its own thread over an in-process channel.
fn run_loopback(
    spec: &LatencySpec,
    port: &Port,
    clock: &Clock,
    on_point: &mut dyn FnMut(PointOutcome<'_>) -> Result<()>,
) -> Result<()> {
    super::loopback(port, clock, spec.timeout_s, |ctl| {
        run_client(spec, port, ctl, clock, on_point)
    })
}
