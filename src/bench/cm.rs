//! `--cm`: connecting a run's QP pairs through rdma_cm instead of by
//! exchanged GIDs and QP numbers.
//!
//! The server side of a session opens a [`Listener`] (its port goes to the
//! client in the `Accept` message; `serve --cm-port` fixes it). For each
//! set of QPs (a latency run's one, each throughput point's), both sides
//! still exchange endpoints over the control channel for what rdma_cm does
//! not carry (each buffer's address and rkey, and which server QP pairs with
//! which client QP); then the client [`dial`]s every pair and the server
//! [`answer`]s as many requests. A request names its server QP in its
//! private data; everything that connects the QPs (the route, the QP
//! numbers each QP is bound to, the PSNs) is rdma_cm's. Every wait is
//! bounded by the caller's deadline and checks the abort flag, so a peer
//! that disappears is an error, not a hang.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::abort::aborted;
use crate::error::{Error, Result};
use crate::verbs::{cm_event, CmEvent, CmId, EventChannel, Gid, PortConfig, QueuePair, Verb};

use super::Port;

/// Marks rdma-bench's connect requests ("RBCM").
const MAGIC: u32 = 0x5242_434d;
/// How long one address or route resolution may take (the kernel's own bound).
const RESOLVE_MS: u64 = 5000;
/// Longest single wait for an event, so the abort flag is seen.
const SLICE: Duration = Duration::from_millis(100);

/// A session's rdma_cm listener (server side).
pub struct Listener {
    channel: Arc<EventChannel>,
    _id: CmId,
    pub port: u16,
}

impl Listener {
    /// Listens at `port` (0: an ephemeral port) on `ip`, what
    /// [`listen_ip`] gave, or on every IPv4 address.
    pub fn open(ip: Option<IpAddr>, port: u16) -> Result<Listener> {
        let channel = EventChannel::new()?;
        let id = CmId::new(&channel)?;
        let at = SocketAddr::new(ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), port);
        id.listen(at, 1024).map_err(|e| {
            if port != 0 {
                Error::usage(format!(
                    "serve --cm-port {port}: cannot listen ({e}); another --cm client's session may hold it"
                ))
            } else {
                e.into()
            }
        })?;
        let port = id.local_port();
        Ok(Listener {
            channel,
            _id: id,
            port,
        })
    }
}

/// Where a session's listener binds: the address the client reached the
/// server at (the control connection's `local` end, which a `--cm` client
/// dials), when it is an address of the server's own device and port. Bound
/// there, every request it takes is on that device, whose context librdmacm
/// has open; `None` (every address) otherwise, and for an IPv6 link-local
/// address, which binds only with its interface's scope.
pub fn listen_ip(port: &Port, local: Option<IpAddr>) -> Option<IpAddr> {
    let ip = bindable(local?)?;
    let table = port.ctx.gid_table(port.config.port).ok()?;
    table.iter().any(|e| gid_is(&e.gid, ip)).then_some(ip)
}

/// `ip` as a listener binds to it (an IPv4-mapped IPv6 address, as a socket
/// bound to `::` reports it, as IPv4); `None` for an IPv6 link-local one.
fn bindable(ip: IpAddr) -> Option<IpAddr> {
    let ip = ip.to_canonical();
    let link_local = matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
    (!link_local).then_some(ip)
}

/// Whether `gid` is RoCE's GID of address `ip` (IPv4-mapped for IPv4).
fn gid_is(gid: &Gid, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => gid.ipv4() == Some(v4),
        IpAddr::V6(v6) => gid.0 == v6.octets(),
    }
}

/// Readies a `--cm` session of `serve` to measure in a descriptor table of
/// its own, from the shared table it still runs in: true once every device
/// context librdmacm reaches by descriptor number is open here (so the
/// table the session copies holds them), and the session's listener will be
/// bound to this device (so no request makes librdmacm open another
/// device's context in the session's table alone). False where either
/// fails: the session then stays in the shared table.
pub fn ready_for_own_table(port: &Port, local: Option<IpAddr>) -> bool {
    listen_ip(port, local).is_some() && crate::verbs::open_cm_device_contexts().is_ok()
}

/// What a request's private data says: which server QP, for which point.
fn private_data(server_qpn: u32, tag: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&server_qpn.to_be_bytes());
    b[8..].copy_from_slice(&tag.to_be_bytes());
    b
}

fn parse_private(b: &[u8]) -> Option<(u32, u32)> {
    let word = |i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    (word(0)? == MAGIC).then_some((word(4)?, word(8)?))
}

/// Where a client dials in loopback (no IP control channel): the device's
/// own IPv4 address, from its IPv4-mapped GID.
pub fn loopback_ip(gid: &crate::verbs::Gid) -> Result<IpAddr> {
    gid.ipv4().map(IpAddr::V4).ok_or_else(|| {
        Error::usage(format!(
            "--cm: the device's GID ({gid}) is not an IPv4-mapped RoCE address, so loopback has no address to connect to (choose one with --gid-index)"
        ))
    })
}

/// Where a `--cm` client dials: the control channel's peer (what `--connect`
/// named), or in loopback the device's own address, at the port the
/// server's `Accept` announced. `None` for GID-connected runs.
pub fn target(
    connection: crate::spec::Connection,
    cm_port: Option<u16>,
    peer_ip: Option<IpAddr>,
    gid: &crate::verbs::Gid,
) -> Result<Option<SocketAddr>> {
    if connection != crate::spec::Connection::Cm {
        return Ok(None);
    }
    let port = cm_port.ok_or_else(|| Error::Peer {
        peer: "server".into(),
        what: "accepted a --cm test without announcing an rdma_cm listener port".into(),
    })?;
    let ip = match peer_ip {
        Some(ip) => ip,
        None => loopback_ip(gid)?,
    };
    Ok(Some(SocketAddr::new(ip, port)))
}

/// Checks an id rdma_cm bound to a device: it must be ours, on our port,
/// because our QPs live on our own context of that device.
fn check_device(id: &CmId, device: &str, port: u8, what: &str) -> Result<()> {
    match id.device_name() {
        Some(d) if d == device && id.port_num() == port => Ok(()),
        other => Err(Error::usage(format!(
            "--cm: {what} resolved to {} port {}, but this side measures on {device} port {port} (connect to an address of {device}'s network interface)",
            other.unwrap_or_else(|| "no RDMA device".into()),
            id.port_num()
        ))),
    }
}

/// Waits for the next event on `channel` until `deadline`; `what` names
/// what is awaited in the timeout error.
fn next_event(
    channel: &Arc<EventChannel>,
    deadline: Instant,
    timeout: Duration,
    what: impl Fn() -> String,
) -> Result<CmEvent> {
    loop {
        if aborted() {
            return Err(Error::Interrupted);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout {
                what: what(),
                secs: timeout.as_secs_f64(),
            });
        }
        if let Some(ev) = channel.next(left.min(SLICE))? {
            return Ok(ev);
        }
    }
}

/// Where one dialled QP stands.
#[derive(Clone, Copy, PartialEq)]
enum Stage {
    Addr,
    Route,
    Connect,
    Done,
}

/// Client side: connects each `qps[i]` (in INIT) to the server QP
/// `server_qpns[i]` through the listener at `to`, all pairs at once, and
/// brings each to RTS with `config`. `tag` names the point (the server
/// refuses requests for another). On return every QP holds its cm id.
#[allow(clippy::too_many_arguments)]
pub fn dial(
    to: SocketAddr,
    qps: &mut [&mut QueuePair],
    server_qpns: &[u32],
    config: &PortConfig,
    device: &str,
    tos: Option<u8>,
    tag: u32,
    timeout: Duration,
) -> Result<()> {
    if qps.len() != server_qpns.len() {
        return Err(Error::Peer {
            peer: to.to_string(),
            what: format!("sent {} endpoints for {} QPs", server_qpns.len(), qps.len()),
        });
    }
    let channel = EventChannel::new()?;
    let deadline = Instant::now() + timeout;
    let mut ids: Vec<Option<CmId>> = Vec::with_capacity(qps.len());
    let mut stage = vec![Stage::Addr; qps.len()];
    let mut by_key = HashMap::with_capacity(qps.len());
    for i in 0..qps.len() {
        let id = CmId::new(&channel)?;
        if let Some(t) = tos {
            id.set_tos(t)?;
        }
        id.resolve_addr(to, Duration::from_millis(RESOLVE_MS))?;
        by_key.insert(id.key(), i);
        ids.push(Some(id));
    }
    let mut done = 0;
    while done < qps.len() {
        let ev = next_event(&channel, deadline, timeout, || {
            format!(
                "rdma_cm to connect {} QPs to {to} ({done} connected)",
                qps.len()
            )
        })?;
        let Some(&i) = by_key.get(&ev.id) else {
            continue;
        };
        let (Some(id), qp) = (ids[i].as_ref(), &mut *qps[i]) else {
            continue;
        };
        let object = || format!("QP {} towards {to}", qp.qpn());
        match (stage[i], ev.kind) {
            (Stage::Addr, cm_event::ADDR_RESOLVED) if ev.status == 0 => {
                check_device(id, device, config.port, &to.to_string())?;
                id.resolve_route(Duration::from_millis(RESOLVE_MS))?;
                stage[i] = Stage::Route;
            }
            (Stage::Route, cm_event::ROUTE_RESOLVED) if ev.status == 0 => {
                let private = private_data(server_qpns[i], tag);
                id.connect(qp.qpn(), &private, config.rd_atomic)?;
                stage[i] = Stage::Connect;
            }
            (Stage::Connect, cm_event::CONNECT_RESPONSE) if ev.status == 0 => {
                qp.ready_via(id, config)?;
                id.establish()?;
                stage[i] = Stage::Done;
                let id = ids[i].take().expect("an id until done");
                qp.hold_link(id);
                done += 1;
            }
            (Stage::Done, _) => {}
            (s, _) => {
                let verb = match s {
                    Stage::Addr => Verb::CmResolveAddr,
                    Stage::Route => Verb::CmResolveRoute,
                    _ => Verb::CmConnect,
                };
                return Err(ev.error(verb, object()).into());
            }
        }
    }
    Ok(())
}

/// Server side: answers the client's requests for `qps` (in INIT; each
/// request names one by its QP number) on `listener`, bringing each to RTS
/// with `config` and accepting it, until every QP's connection is
/// established. Requests for another point (`tag`) are rejected.
pub fn answer(
    listener: &Listener,
    qps: &mut [&mut QueuePair],
    config: &PortConfig,
    device: &str,
    tag: u32,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let by_qpn: HashMap<u32, usize> = qps.iter().enumerate().map(|(i, q)| (q.qpn(), i)).collect();
    let mut taken = vec![false; qps.len()];
    // Accepted ids (now held by their QPs) by key, and whether established.
    let mut accepted: HashMap<usize, (usize, bool)> = HashMap::new();
    let mut established = 0;
    while established < qps.len() {
        let ev = next_event(&listener.channel, deadline, timeout, || {
            format!(
                "rdma_cm connect requests for {} QPs on port {} ({established} established)",
                qps.len(),
                listener.port
            )
        })?;
        if let Some(request) = ev.request {
            let wanted = parse_private(&ev.private_data)
                .filter(|&(_, t)| t == tag)
                .and_then(|(qpn, _)| by_qpn.get(&qpn).copied())
                .filter(|&i| !taken[i]);
            let Some(i) = wanted else {
                // Not ours, a stale point's, or a QP already connected.
                request.reject();
                continue;
            };
            check_device(&request, device, config.port, "a connect request")?;
            let qp = &mut *qps[i];
            qp.ready_via(&request, config)?;
            request.accept(qp.qpn(), config.rd_atomic)?;
            taken[i] = true;
            accepted.insert(request.key(), (i, false));
            qp.hold_link(request);
            continue;
        }
        let Some((i, up)) = accepted.get_mut(&ev.id) else {
            continue;
        };
        match ev.kind {
            cm_event::ESTABLISHED if !*up => {
                *up = true;
                established += 1;
            }
            cm_event::ESTABLISHED | cm_event::TIMEWAIT_EXIT => {}
            _ => {
                let object = format!("QP {} (port {})", qps[*i].qpn(), listener.port);
                return Err(ev.error(Verb::CmAccept, object).into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_round_trips_and_refuses_strangers() {
        let b = private_data(0x1234, 7);
        assert_eq!(parse_private(&b), Some((0x1234, 7)));
        // A request carries padding after our 12 bytes.
        let mut padded = b.to_vec();
        padded.extend_from_slice(&[0; 44]);
        assert_eq!(parse_private(&padded), Some((0x1234, 7)));
        assert_eq!(parse_private(&[0; 12]), None);
        assert_eq!(parse_private(&b[..8]), None);
    }

    #[test]
    fn a_gid_is_its_own_address_only() {
        let v4: std::net::Ipv4Addr = "10.99.0.1".parse().unwrap();
        let mapped = Gid(v4.to_ipv6_mapped().octets());
        assert!(gid_is(&mapped, IpAddr::V4(v4)));
        assert!(!gid_is(&mapped, "10.99.0.2".parse().unwrap()));
        let v6: std::net::Ipv6Addr = "fe80::5054:ff:fe12:3456".parse().unwrap();
        let link_local = Gid(v6.octets());
        assert!(gid_is(&link_local, IpAddr::V6(v6)));
        assert!(!gid_is(&link_local, IpAddr::V4(v4)));
    }

    #[test]
    fn a_listener_binds_to_mapped_addresses_as_ipv4_and_never_to_link_local() {
        let seen: IpAddr = "::ffff:10.99.0.1".parse().unwrap();
        assert_eq!(bindable(seen), Some("10.99.0.1".parse().unwrap()));
        let global: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(bindable(global), Some(global));
        assert_eq!(bindable("fe80::1".parse().unwrap()), None);
        assert_eq!(bindable("febf::1".parse().unwrap()), None);
    }
}
