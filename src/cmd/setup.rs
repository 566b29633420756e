//! What every measuring command needs besides its spec: the peer connection,
//! the device description and the results document header.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::bench::Port;
use crate::cli::DEFAULT_PORT;
use crate::clock::Clock;
use crate::connect::TcpChannel;
use crate::device_name;
use crate::error::{Error, Result};
use crate::results::{now_utc, DeviceInfo, HostInfo, ResultsDoc, SCHEMA_VERSION};
use crate::verbs::Transport;

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
        speed_gbps: port.ctx.query_port(port.config.port)?.speed_gbps,
        max_inline: port.max_inline(Transport::Rc)?,
    })
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
pub fn new_doc(connect: Option<&str>, port: &Port, clock: &Clock) -> Result<ResultsDoc> {
    Ok(ResultsDoc {
        schema_version: SCHEMA_VERSION,
        tool: "rdma-bench".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command_line: std::env::args().collect(),
        started_utc: now_utc(),
        peer: connect.unwrap_or("loopback").to_string(),
        experiment: None,
        // Set by scripts/softroce (or by hand) so results say where they came from.
        environment: std::env::var("RDMA_BENCH_ENVIRONMENT")
            .ok()
            .filter(|e| !e.is_empty()),
        clock: clock.info(),
        host: HostInfo::current(),
        device: device_info(port)?,
        peak_rss_kib: None,
        results: Vec::new(),
    })
}
