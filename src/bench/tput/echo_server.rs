//! The echo server: finds each client request (a WRITE landing in its
//! memory, or a SEND's receive completion) and answers it at once, from the
//! request's own bytes where it has them.

use crate::abort::aborted;
use crate::connect::Control;
use crate::error::{Error, Result};
use crate::report::DriverReport;
use crate::spec::{EchoVerb, InlineRequest, TputPoint, TputSpec, VerbKind};
use crate::verbs::{Access, Endpoint, RecvList, SendList, SendOp, Transport, UD_QKEY};

use super::super::footprint::Buffers;
use super::super::latency::marker;
use super::super::ops::{echo_ex_send_ops, echo_wc_label, inline_room, posts_inline};
use super::super::port::Port;
use super::super::qpset::{short, slot_bytes, QpSet, QpShape};
use super::super::wait::{arm_all, take_event, IdleWatch};
use super::completions::{name_the_cause, ArrivalBuf, RecvRing, SendTracker, WrId, RECV_BATCH};
use super::echo_wire::{EchoImm, EchoLayout};
use super::target::poll_stop;

/// The server's QPs, by what carries requests and responses.
enum ServerQps {
    /// WRITE requests into `conn` (one QP per client QP), answered by WRITEs
    /// on the same QPs.
    WriteWrite { conn: QpSet },
    /// HERD: WRITE requests into `conn`, SEND responses from one UD QP.
    WriteSend { conn: QpSet, ud: QpSet },
    /// SEND requests and responses on one UD QP.
    SendSend { ud: QpSet },
}

impl ServerQps {
    /// The QPs responses are posted on.
    fn responding(&self) -> &QpSet {
        match self {
            ServerQps::WriteWrite { conn } => conn,
            ServerQps::WriteSend { ud, .. } | ServerQps::SendSend { ud } => ud,
        }
    }
}

/// What the server's sets register, by request and response verb (what
/// `EchoServerSet::new` builds them from).
pub fn buffers(spec: &TputSpec, p: &TputPoint) -> Vec<Buffers> {
    match (spec.req, spec.resp) {
        (EchoVerb::Write, EchoVerb::Write) => vec![conn_buffers(spec, p)],
        (EchoVerb::Write, EchoVerb::Send) => vec![conn_buffers(spec, p), ud_buffers(spec, p, 1)],
        (EchoVerb::Send, _) => vec![ud_buffers(spec, p, send_requests_rq(p))],
    }
}

/// One QP per client QP, each holding that QP's request slots.
fn conn_buffers(spec: &TputSpec, p: &TputPoint) -> Buffers {
    Buffers {
        region: layout(p).server_region(),
        qps: p.total_qps(),
        memory: spec.memory,
    }
}

/// The UD QP, a slot per receive it keeps posted.
fn ud_buffers(spec: &TputSpec, p: &TputPoint, rq: u32) -> Buffers {
    Buffers {
        region: rq as usize * layout(p).slot,
        qps: 1,
        memory: spec.memory,
    }
}

/// SEND requests: the UD QP's receives, every client QP's window at once.
fn send_requests_rq(p: &TputPoint) -> u32 {
    p.srq_depth() as u32
}

fn layout(p: &TputPoint) -> EchoLayout {
    EchoLayout {
        window: p.window as usize,
        slot: slot_bytes(p.size),
    }
}

pub struct EchoServerSet {
    qps: ServerQps,
    layout: EchoLayout,
    size: u32,
    /// What the run asked about inline (`-I` caps what echo inlines).
    inline: InlineRequest,
    /// Client QPs, over all of the client's threads.
    clients: usize,
    resp_verb: EchoVerb,
    signal_period: u64,
    /// Built once connected: one response WR per (client QP, slot).
    responses: Vec<SendList>,
    /// SEND requests: the UD QP's receives, posted once connected.
    recvs: Option<RecvRing>,
}

impl EchoServerSet {
    pub fn new(port: &Port, spec: &TputSpec, p: &TputPoint) -> Result<Self> {
        let layout = layout(p);
        let inline_on = |t: Transport| -> Result<u32> {
            let device = port.max_inline(t)?;
            Ok(inline_room(VerbKind::Echo, spec.inline, [p.size], device))
        };
        let conn = || -> Result<QpSet> {
            let mut access = Access::LOCAL;
            access.remote_write = true;
            let b = conn_buffers(spec, p);
            QpSet::new(
                port,
                &QpShape {
                    transport: p.transport,
                    count: b.qps,
                    sq_depth: p.echo_request_sq_depth(),
                    rq_depth: 1,
                    inline: inline_on(p.transport)?,
                    sge: 1,
                    region: b.region,
                    access,
                    path: spec.path,
                    events: false,
                    ex_ops: echo_ex_send_ops(spec.post_api, spec.req, spec.resp, p.transport),
                    memory: b.memory,
                },
            )
        };
        let ud = |rq: u32, srq: bool| -> Result<QpSet> {
            let b = ud_buffers(spec, p, rq);
            let shape = QpShape {
                transport: Transport::Ud,
                count: b.qps,
                sq_depth: p.echo_response_sq_depth(),
                rq_depth: rq,
                inline: inline_on(Transport::Ud)?,
                sge: 1,
                region: b.region,
                access: Access::LOCAL,
                path: spec.path,
                // --events (SEND/SEND only): both CQs on one channel.
                events: spec.events,
                ex_ops: echo_ex_send_ops(spec.post_api, spec.req, spec.resp, Transport::Ud),
                memory: b.memory,
            };
            // --srq: the request QP receives from a shared receive queue.
            if srq {
                QpSet::with_srq(port, &shape, rq)
            } else {
                QpSet::new(port, &shape)
            }
        };
        let qps = match (spec.req, spec.resp) {
            (EchoVerb::Write, EchoVerb::Write) => ServerQps::WriteWrite { conn: conn()? },
            (EchoVerb::Write, EchoVerb::Send) => ServerQps::WriteSend {
                conn: conn()?,
                ud: ud(1, false)?,
            },
            // A receive for every request in flight from every client QP,
            // plus two reposting batches, on the QP or (--srq) shared; the
            // receive CQ is made to hold them all (validated against max_cqe).
            (EchoVerb::Send, _) => ServerQps::SendSend {
                ud: ud(send_requests_rq(p), spec.srq)?,
            },
        };
        Ok(EchoServerSet {
            qps,
            layout,
            size: p.size,
            inline: spec.inline,
            clients: p.total_qps() as usize,
            resp_verb: spec.resp,
            signal_period: p.signal_period as u64,
            responses: Vec::new(),
            recvs: None,
        })
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        match &self.qps {
            ServerQps::WriteWrite { conn } => conn.endpoints(),
            ServerQps::WriteSend { conn, ud } => {
                let mut eps = conn.endpoints();
                eps.extend(ud.endpoints());
                eps
            }
            ServerQps::SendSend { ud } => ud.endpoints(),
        }
    }

    /// `clients` = the client's request endpoints, then (WRITE requests with
    /// SEND responses) its response UD endpoints. Builds every response WR.
    pub fn connect(&mut self, clients: &[Endpoint]) -> Result<()> {
        let n = self.clients;
        let need = |r: std::ops::Range<usize>| {
            clients
                .get(r)
                .map(<[Endpoint]>::to_vec)
                .ok_or_else(|| short(clients.len()))
        };
        let (w, size, layout) = (self.layout.window, self.size, self.layout);
        let inline = self.inline;
        let mut responses = Vec::with_capacity(n * w);
        match &mut self.qps {
            ServerQps::WriteWrite { conn } => {
                let eps = need(0..n)?;
                conn.connect(&eps)?;
                for (q, client) in eps.iter().enumerate() {
                    for k in 0..w {
                        // Echo from where the request landed into the client's response slot k.
                        let op = SendOp::Write {
                            remote_addr: client.addr + layout.response(k) as u64,
                            rkey: client.rkey,
                        };
                        let mut l = SendList::new(1);
                        l.set(0, op, &conn.mr, conn.offset(q) + layout.request(k), size);
                        let fits = conn.qps[q].max_inline();
                        l.set_inline(0, posts_inline(VerbKind::Echo, inline, size, fits));
                        responses.push(l);
                    }
                }
            }
            ServerQps::WriteSend { conn, ud } => {
                conn.connect(&need(0..n)?)?;
                let resp_eps = need(n..2 * n)?;
                // The payload is the request's own slot.
                let from = |q: usize, k: usize| (&conn.mr, conn.offset(q) + layout.request(k));
                responses = ud_responses(ud, &resp_eps, w, (size, inline), from)?;
            }
            ServerQps::SendSend { ud } => {
                let resp_eps = need(0..n)?;
                let mr = ud.mr.clone();
                // The request's bytes are in some receive slot; answer from a scratch slot.
                responses = ud_responses(ud, &resp_eps, w, (size, inline), |_, _| (&mr, 0))?;
                let batch = RECV_BATCH as usize;
                let list = RecvList::new(&ud.mr, 0, layout.slot as u32, batch, WrId::pack(0, 0));
                let (mut ring, depth) = match &ud.srq {
                    Some(srq) => (RecvRing::shared(srq.clone(), list), srq.max_wr()),
                    None => (RecvRing::new(vec![list]), ud.qps[0].max_recv_wr()),
                };
                // No more receives than the receive CQ holds: a completion
                // may wait in it for every receive posted, and one that
                // does not fit moves the QP to the error state.
                let depth = depth.min(ud.recv_cq.capacity());
                ring.fill(&mut ud.qps, depth / RECV_BATCH)?;
                self.recvs = Some(ring);
            }
        }
        self.responses = responses;
        Ok(())
    }
}

/// SEND responses of `size` bytes (inlined as `inline` allows) from the one
/// UD QP to each client QP's response QP, the payload taken from `from(q, k)`.
fn ud_responses<'m>(
    ud: &mut QpSet,
    clients: &[Endpoint],
    w: usize,
    (size, inline): (u32, InlineRequest),
    from: impl Fn(usize, usize) -> (&'m std::sync::Arc<crate::verbs::MemoryRegion>, usize),
) -> Result<Vec<SendList>> {
    // UD needs no peer to reach RTS; the first client is a formality.
    ud.connect(&clients[..1])?;
    let inline = posts_inline(VerbKind::Echo, inline, size, ud.qps[0].max_inline());
    let mut out = Vec::with_capacity(clients.len() * w);
    for (q, client) in clients.iter().enumerate() {
        let ah = ud.address(client)?;
        for k in 0..w {
            let (mr, off) = from(q, k);
            let mut l = SendList::new(1);
            let imm = EchoImm::pack(0, k);
            l.set(0, SendOp::SendImm { imm }, mr, off, size);
            l.set_inline(0, inline);
            l.set_ud_dest(0, &ah, client.qpn, UD_QKEY);
            out.push(l);
        }
    }
    Ok(out)
}

/// Posts responses and keeps their send queue from overflowing.
struct Responder<'a> {
    responses: &'a mut [SendList],
    tx: SendTracker,
    room: u64,
    signal_period: u64,
    window: usize,
    label: &'static str,
    /// Requests answered per client QP.
    seen: Vec<u64>,
}

impl Responder<'_> {
    /// Answers request slot `k` of client QP `q` on `set`'s QP `r`.
    #[inline(always)]
    fn respond(&mut self, set: &mut QpSet, r: usize, q: usize, k: usize) -> Result<()> {
        while self.tx.outstanding(r) >= self.room {
            self.tx.reap(&set.send_cq, self.label)?;
            if aborted() {
                return Err(Error::Interrupted);
            }
        }
        let seq = self.tx.posted[r] + 1;
        let l = &mut self.responses[q * self.window + k];
        l.set_signaled(0, seq % self.signal_period == 0);
        l.set_wr_id(0, WrId::pack(r, seq));
        set.qps[r].post_send(l)?;
        self.tx.posted[r] = seq;
        self.seen[q] += 1;
        Ok(())
    }
}

/// The next WRITE request that has landed at or after slot `*i` (client-QP
/// major); moves `*i` past it and the slot on to its next marker.
#[inline(always)]
fn next_write(
    conn: &QpSet,
    layout: EchoLayout,
    last: usize,
    gen: &mut [u64],
    i: &mut usize,
) -> Option<(usize, usize)> {
    while *i < gen.len() {
        let slot = *i;
        *i += 1;
        let (q, k) = (slot / layout.window, slot % layout.window);
        if conn.mr.read_u8(conn.offset(q) + layout.request(k) + last) == marker(gen[slot]) {
            gen[slot] += 1;
            return Some((q, k));
        }
    }
    None
}

/// Runs the echo server until the client says stop; returns requests
/// answered per client QP, and the client's report.
/// `limit`: how long it may go without a request or a control message.
pub fn run_echo_server(
    s: &mut EchoServerSet,
    index: u32,
    ctl: &mut dyn Control,
    go: &mut dyn FnMut(&mut dyn Control) -> Result<()>,
    limit: std::time::Duration,
) -> Result<(Vec<u64>, DriverReport)> {
    let (n, w) = (s.clients, s.layout.window);
    let last = s.size as usize - 1;
    let layout = s.layout;
    let mut gen = vec![0u64; n * w];
    let responding = s.qps.responding();
    let mut resp = Responder {
        tx: SendTracker::new(responding.qps.len()),
        room: responding.qps[0].max_send_wr() as u64 - 1,
        signal_period: s.signal_period,
        window: w,
        label: echo_wc_label(s.resp_verb),
        seen: vec![0; n],
        responses: &mut s.responses,
    };
    // With --srq a request's receive names its QP only by qp_num.
    let mut arrivals = match &s.qps {
        ServerQps::SendSend { ud } if ud.srq.is_some() => ArrivalBuf::by_qp_num(&ud.qp_nums()),
        _ => ArrivalBuf::new(),
    };
    // --events: the UD QP's CQs stay armed (re-armed after each event), so
    // a request or a response completion always raises an event.
    if let ServerQps::SendSend { ud } = &s.qps {
        if ud.channel.is_some() {
            arm_all(&[&ud.recv_cq, &ud.send_cq])?;
        }
    }
    go(ctl)?;
    let mut watch = IdleWatch::new(limit, "echo requests or the client's stop (client gone?)");
    loop {
        let mut progress = false;
        match &mut s.qps {
            ServerQps::WriteWrite { conn } => {
                let mut i = 0;
                while let Some((q, k)) = next_write(conn, layout, last, &mut gen, &mut i) {
                    resp.respond(conn, q, q, k)?;
                    progress = true;
                }
            }
            ServerQps::WriteSend { conn, ud } => {
                let mut i = 0;
                while let Some((q, k)) = next_write(conn, layout, last, &mut gen, &mut i) {
                    resp.respond(ud, 0, q, k)?;
                    progress = true;
                }
            }
            ServerQps::SendSend { ud } => {
                let got = arrivals
                    .poll(&ud.recv_cq)
                    .map_err(|e| name_the_cause(e, &ud.send_cq, resp.label))?;
                for a in &arrivals.got[..got] {
                    // The immediate says who asked (none: not a request of ours).
                    if let Some((q, k)) = a.imm.map(EchoImm::unpack) {
                        if q < n && k < w {
                            resp.respond(ud, 0, q, k)?;
                        }
                    }
                    if let Some(ring) = &mut s.recvs {
                        ring.consumed(a.qp, &mut ud.qps[a.qp])?;
                    }
                    progress = true;
                }
            }
        }
        let responding = s.qps.responding();
        let reaped = resp
            .tx
            .reap(&responding.send_cq, resp.label)
            .map_err(|e| name_the_cause(e, &responding.recv_cq, "RECV"))?;
        if progress || reaped > 0 {
            watch.busy();
            continue;
        }
        // --events: a pass that found both CQs empty sleeps until either
        // raises an event; a slice without one is a pass that slept, after
        // which the client's stop is looked for at once.
        let check = match &s.qps {
            ServerQps::SendSend {
                ud:
                    QpSet {
                        channel: Some(ch),
                        recv_cq,
                        send_cq,
                        ..
                    },
            } => {
                if take_event(ch, &[recv_cq, send_cq])? {
                    continue;
                }
                watch.slept()?
            }
            _ => watch.idle()?,
        };
        if check {
            if let Some(report) = poll_stop(ctl, index)? {
                return Ok((resp.seen, report));
            }
        }
    }
}
