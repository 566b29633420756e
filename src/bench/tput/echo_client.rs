//! Echo clients: per thread, request QPs that keep `window` requests in
//! flight each; a round trip completes when its response arrives (a WRITE
//! response: the slot's last byte turns to the request's marker; a SEND
//! response: a receive completion naming the slot).

use crate::error::Result;
use crate::spec::{EchoVerb, TputPoint, TputSpec, VerbKind};
use crate::verbs::{Access, Endpoint, RecvList, SendList, SendOp, Transport, UD_QKEY};

use super::super::footprint::Buffers;
use super::super::ops::{echo_ex_send_ops, posts_inline};
use super::super::pattern;
use super::super::port::Port;
use super::super::qpset::{short, slot_bytes, QpSet, QpShape};
use super::completions::{RecvRing, WrId, RECV_BATCH};
use super::echo_wire::{EchoImm, EchoLayout};

mod engine;
pub use engine::run_echo_client;

/// One echo client thread: request QPs, and (SEND responses to WRITE
/// requests) one UD QP per request QP to receive responses on.
pub struct EchoClientSet {
    req: QpSet,
    resp: Option<QpSet>,
    layout: EchoLayout,
    req_verb: EchoVerb,
    resp_verb: EchoVerb,
    size: u32,
    inline: bool,
    /// Built once connected: one request WR per (QP, slot), QP-major.
    requests: Vec<SendList>,
    /// SEND responses: the receives kept posted (on `resp`, or on `req` for
    /// SEND/SEND), built once connected.
    recvs: Option<RecvRing>,
    /// `--validate`: request slots carry the pattern, and (WRITE responses)
    /// the response slots are checked against them after the loop.
    validate: bool,
    /// This thread's first QP in the client's numbering (the pattern's QP).
    first_qp: usize,
}

/// What one client thread's sets register (what `EchoClientSet::new`
/// builds them from): its request QPs, each with request and response
/// slots, and (WRITE/SEND) its UD response QPs.
pub fn buffers(spec: &TputSpec, p: &TputPoint) -> (Buffers, Option<Buffers>) {
    let layout = EchoLayout {
        window: p.window as usize,
        slot: slot_bytes(p.size),
    };
    let set = |region| Buffers {
        region,
        qps: p.qps,
        memory: spec.memory,
    };
    let resp = (spec.req == EchoVerb::Write && spec.resp == EchoVerb::Send)
        .then(|| set(layout.server_region()));
    (set(layout.client_region()), resp)
}

impl EchoClientSet {
    pub fn new(port: &Port, spec: &TputSpec, p: &TputPoint) -> Result<Self> {
        let layout = EchoLayout {
            window: p.window as usize,
            slot: slot_bytes(p.size),
        };
        let mut access = Access::LOCAL;
        if spec.resp == EchoVerb::Write {
            access.remote_write = true;
        }
        let inline = posts_inline(
            VerbKind::Echo,
            spec.inline,
            p.size,
            port.max_inline(p.transport)?,
        );
        let send_send = spec.req == EchoVerb::Send && spec.resp == EchoVerb::Send;
        let (req_b, resp_b) = buffers(spec, p);
        let req = QpSet::new(
            port,
            &QpShape {
                transport: p.transport,
                count: req_b.qps,
                sq_depth: p.echo_request_sq_depth(),
                rq_depth: if send_send {
                    (p.window + RECV_BATCH) * 2
                } else {
                    1
                },
                inline: if inline { p.size } else { 0 },
                sge: 1,
                region: req_b.region,
                access,
                path: spec.path,
                // --events (SEND/SEND only): both CQs on one channel.
                events: spec.events,
                ex_ops: echo_ex_send_ops(spec.post_api, spec.req, spec.resp, p.transport),
                memory: req_b.memory,
            },
        )?;
        let resp = if let Some(resp_b) = resp_b {
            Some(QpSet::new(
                port,
                &QpShape {
                    transport: Transport::Ud,
                    count: resp_b.qps,
                    sq_depth: 1,
                    rq_depth: (p.window + RECV_BATCH) * 2,
                    inline: 0,
                    sge: 1,
                    region: resp_b.region,
                    access: Access::LOCAL,
                    path: spec.path,
                    events: false,
                    ex_ops: echo_ex_send_ops(spec.post_api, spec.req, spec.resp, Transport::Ud),
                    memory: resp_b.memory,
                },
            )?)
        } else {
            None
        };
        Ok(EchoClientSet {
            req,
            resp,
            layout,
            req_verb: spec.req,
            resp_verb: spec.resp,
            size: p.size,
            inline,
            requests: Vec::new(),
            recvs: None,
            validate: spec.validate,
            first_qp: 0,
        })
    }

    /// Whether requests are posted inline (whenever the payload fits the
    /// request QPs' inline limit, as HERD's clients do).
    pub fn posts_inline(&self) -> bool {
        self.inline
    }

    pub fn qp_count(&self) -> usize {
        self.req.qps.len()
    }

    pub fn request_endpoints(&self) -> Vec<Endpoint> {
        self.req.endpoints()
    }

    pub fn response_endpoints(&self) -> Vec<Endpoint> {
        self.resp
            .as_ref()
            .map(|r| r.endpoints())
            .unwrap_or_default()
    }

    /// `server` = the server's endpoints: one per client request QP (all
    /// threads) for WRITE requests, then (SEND responses or requests) its
    /// one UD QP. `first`: this thread's first QP in the client's numbering.
    pub fn connect(&mut self, server: &[Endpoint], first: usize, total: usize) -> Result<()> {
        let n = self.req.qps.len();
        let (w, slot) = (self.layout.window, self.layout.slot);
        let server_ud = match self.req_verb {
            EchoVerb::Write => server.get(total).copied(),
            EchoVerb::Send => server.first().copied(),
        };
        let need_ud = || server_ud.ok_or_else(|| short(server.len()));
        // Where requests go: the server QP paired with each of ours, or its UD QP.
        let targets: Vec<Endpoint> = match self.req_verb {
            EchoVerb::Write => server
                .get(first..first + n)
                .ok_or_else(|| short(server.len()))?
                .to_vec(),
            EchoVerb::Send => vec![need_ud()?; n],
        };
        self.req.connect(&targets)?;
        if let Some(resp) = &mut self.resp {
            resp.connect(&vec![need_ud()?; n])?;
        }
        self.first_qp = first;
        if self.validate && self.size > 0 {
            // Request slot k of QP q carries the pattern of (q, k); the
            // loop owns its last byte (the round trip's marker).
            for q in 0..n {
                for k in 0..w {
                    let at = self.req.offset(q) + self.layout.request(k);
                    let qp = (first + q) as u32;
                    pattern::fill_region(&self.req.mr, at, self.size as usize, qp, k as u64);
                }
            }
        }
        let mut requests = Vec::with_capacity(n * w);
        for (q, target) in targets.iter().enumerate() {
            for k in 0..w {
                let op = match self.req_verb {
                    EchoVerb::Write => SendOp::Write {
                        remote_addr: target.addr + self.layout.request(k) as u64,
                        rkey: target.rkey,
                    },
                    EchoVerb::Send => SendOp::SendImm {
                        imm: EchoImm::pack(first + q, k),
                    },
                };
                let mut l = SendList::new(1);
                let local = self.req.offset(q) + self.layout.request(k);
                l.set(0, op, &self.req.mr, local, self.size);
                l.set_inline(0, self.inline);
                if let Some(ah) = &self.req.ahs[q] {
                    l.set_ud_dest(0, ah, target.qpn, UD_QKEY);
                }
                requests.push(l);
            }
        }
        self.requests = requests;
        if self.resp_verb == EchoVerb::Send {
            // Responses land in the response QPs' regions, or (SEND/SEND)
            // in the response half of the request QPs' regions.
            let (rs, at) = match &mut self.resp {
                Some(rs) => (rs, 0),
                None => (&mut self.req, self.layout.response(0)),
            };
            // --validate: one batch is the whole window, each receive with
            // its own slot, so two receives sharing a buffer are a window
            // apart in the queue, and with at most a window of responses in
            // flight per QP none is overwritten before the loop checks it.
            let batch = if self.validate {
                w
            } else {
                w.min(RECV_BATCH as usize)
            };
            let lists = (0..n)
                .map(|q| {
                    let base = rs.offset(q) + at;
                    RecvList::new(&rs.mr, base, slot as u32, batch, WrId::pack(q, 0))
                })
                .collect();
            let mut ring = RecvRing::new(lists);
            // As many whole batches as the receive queue really holds.
            let batches = rs.qps[0].max_recv_wr() as usize / batch;
            ring.fill(&mut rs.qps, batches as u32)?;
            self.recvs = Some(ring);
        }
        Ok(())
    }
}
