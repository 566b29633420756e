//! What every measuring command needs besides its spec: the peer connection,
//! the device description and the results document header.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::bench::Port;
use crate::cli::{DeviceArgs, DEFAULT_PORT};
use crate::clock::Clock;
use crate::connect::TcpChannel;
use crate::device_name;
use crate::error::{Error, Result};
use crate::results::{
    now_utc, DeviceCaps, DeviceInfo, HostInfo, PeerDoc, ResultsDoc, SCHEMA_VERSION,
};
use crate::verbs::Transport;

/// `--interval` and `--forever` (which reports every second unless told).
pub fn live_from_args(a: &crate::cli::TestArgs) -> Result<crate::spec::LiveSpec> {
    if a.forever && (a.iters.is_some() || a.duration.is_some()) {
        return Err(Error::usage(
            "--forever runs until Ctrl-C/SIGTERM: drop --iters and --duration",
        ));
    }
    Ok(crate::spec::LiveSpec {
        interval_s: a
            .interval
            .or(a.forever.then_some(crate::spec::FOREVER_INTERVAL_S)),
        forever: a.forever,
    })
}

/// `--tclass`, `--sl`, `--flow-label` and `--mtu`, range-checked, and `--cm`.
pub fn path_from_args(a: &crate::cli::TestArgs) -> Result<crate::spec::PathSpec> {
    let path = crate::spec::PathSpec::from_options(a.tclass, a.sl, a.flow_label, a.mtu)?;
    Ok(crate::spec::PathSpec {
        connection: if a.cm {
            crate::spec::Connection::Cm
        } else {
            crate::spec::Connection::Gid
        },
        ..path
    })
}

/// `--hugepages`, `--mr-per-qp`, `--region` and `--offsets`; `--hugepages`
/// is refused here when the kernel has no huge pages reserved.
pub fn memory_from_args(a: &crate::cli::TestArgs) -> Result<crate::spec::MemorySpec> {
    if a.hugepages {
        crate::spec::check_hugepages(crate::sys::reserved_huge_pages(), crate::sys::NR_HUGEPAGES)?;
    }
    let memory = crate::spec::MemorySpec {
        hugepages: a.hugepages,
        mr_per_qp: a.mr_per_qp,
        region: a
            .region
            .as_deref()
            .map(crate::spec::parse_region)
            .transpose()?,
        offsets: a.offsets,
    };
    memory.validate()?;
    Ok(memory)
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
    let attr = &port.attr;
    let name = port.ctx.name();
    // The one port query `devices` makes too, for its speed, state and LID.
    let port_attr = port.ctx.query_port(port.config.port)?;
    Ok(DeviceInfo {
        name: name.to_string(),
        vendor_id: attr.vendor_id,
        vendor_part_id: attr.vendor_part_id,
        model: device_name::model(name, attr.vendor_id, attr.vendor_part_id).map(String::from),
        fw_ver: attr.fw_ver.clone(),
        hw_ver: attr.hw_ver,
        port: port.config.port,
        gid_index: port.config.gid_index,
        gid: port.gid.to_string(),
        link_layer: format!("{:?}", port.link_layer),
        active_mtu: port.mtu,
        speed_gbps: port_attr.speed_gbps,
        max_inline: port.max_inline(Transport::Rc)?,
        driver: device_name::driver(name, attr.vendor_id),
        capabilities: Some(DeviceCaps::of(attr)),
        port_state: Some(port_attr.state.name().into()),
        lid: Some(port_attr.lid),
    })
}

/// `--connect HOST[:PORT]`: parsed and resolved (bad input, exit 2) before
/// any device is opened. HOST is a name, an IPv4 address or a bracketed IPv6
/// address (`[::1]:18515`); PORT is 1..=65535 (default 18515).
pub fn resolve(target: &str) -> Result<(String, Vec<SocketAddr>)> {
    let bad = |why: &str| Error::usage(format!("--connect {target}: {why}"));
    let (host, port) = if let Some(rest) = target.strip_prefix('[') {
        let (h, tail) = rest
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 address needs its closing ']'"))?;
        let port = match tail {
            "" => None,
            t => Some(
                t.strip_prefix(':')
                    .ok_or_else(|| bad("expected ':PORT' after ']'"))?,
            ),
        };
        h.parse::<std::net::Ipv6Addr>()
            .map_err(|_| bad("not an IPv6 address inside [ ]"))?;
        (h, port)
    } else if target.matches(':').count() > 1 {
        if target.parse::<std::net::Ipv6Addr>().is_ok() {
            (target, None)
        } else {
            return Err(bad("write an IPv6 address in brackets: [ADDR]:PORT"));
        }
    } else {
        match target.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (target, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let plausible_name = host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if !plausible_name && host.parse::<std::net::IpAddr>().is_err() {
        return Err(bad("not a host name or IP address"));
    }
    let port: u16 = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(bad("the port must be 1..=65535")),
            Ok(p) => p,
        },
    };
    let with_port = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| bad(&format!("cannot resolve: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(bad("resolves to no address"));
    }
    Ok((with_port, addrs))
}

pub fn connect_to(target: &str, timeout: f64) -> Result<TcpChannel> {
    let (with_port, addrs) = resolve(target)?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs_f64(timeout)) {
            Ok(s) => return TcpChannel::new(s, Duration::from_secs_f64(timeout)),
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

/// `serve --bind ADDR`: an IP address of this host (IPv6 with or without
/// brackets), parsed before any device is opened.
pub fn bind_address(bind: &str, port: u16) -> Result<SocketAddr> {
    let ip = bind
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .unwrap_or(bind);
    let ip: std::net::IpAddr = ip.parse().map_err(|_| {
        Error::usage(format!(
            "--bind {bind}: not an IP address of this host (e.g. 192.0.2.1, ::1, 0.0.0.0)"
        ))
    })?;
    Ok(SocketAddr::new(ip, port))
}

/// Refuses a CPU list (`who` says where it came from: `--cpu`, or a file's
/// key) naming CPUs this process may not use. It needs no device, so every
/// command calls it before `Port::open`: on a host without a device the
/// user hears about the list, not about the device.
pub fn check_cpus(who: &str, cpus: Option<&[usize]>) -> Result<()> {
    let Some(cpus) = cpus else {
        return Ok(());
    };
    crate::affinity::check_user(cpus, &crate::affinity::allowed_cpus()).map_err(|e| {
        Error::usage(format!(
            "{who} {}: {e}",
            crate::affinity::format_cpu_list(cpus)
        ))
    })
}

/// Plans the CPUs of this process's measuring threads (`--cpu`, else the
/// device's NUMA node, else any; client and server threads apart) and
/// installs the plan they pin to. Returns what to record as `affinity` and
/// a one-line warning where threads must share CPUs or leave the node.
pub fn plan_cpus(
    args: &DeviceArgs,
    port: &Port,
    client_threads: usize,
    server_threads: usize,
) -> Result<(String, Option<String>)> {
    let allowed = crate::affinity::allowed_cpus();
    let numa = crate::affinity::device_numa_cpus(std::path::Path::new("/sys"), port.ctx.name());
    let plan = crate::affinity::plan(crate::affinity::PlanInput {
        allowed: &allowed,
        numa: numa.as_ref(),
        user: args.cpu.as_deref(),
        client_threads,
        server_threads,
    })
    .map_err(Error::usage)?;
    let out = (plan.description.clone(), plan.warning.clone());
    crate::affinity::install(plan);
    Ok(out)
}

/// The results document of a run, before any point is measured.
pub fn new_doc(connect: Option<&str>, port: &Port, clock: &Clock) -> Result<ResultsDoc> {
    Ok(ResultsDoc {
        schema_version: SCHEMA_VERSION,
        tool: "rdma-bench".into(),
        tool_version: env!("RDMA_BENCH_VERSION").into(),
        command_line: std::env::args().collect(),
        started_utc: now_utc(),
        peer: PeerDoc {
            mode: if connect.is_some() { "tcp" } else { "loopback" }.into(),
            address: connect.map(str::to_string),
            ..Default::default()
        },
        experiment: None,
        // Set by scripts/softroce (or by hand) so results say where they came from.
        environment: std::env::var("RDMA_BENCH_ENVIRONMENT")
            .ok()
            .filter(|e| !e.is_empty()),
        clock: clock.info(),
        host: HostInfo::current(),
        device: device_info(port)?,
        peak_rss_kib: None,
        affinity: None,
        results: Vec::new(),
    })
}
