//! The measured loops of every latency test, client and server side.
//!
//! Ping-pong (write, echo, send): the client stamps the clock, posts, and
//! stamps again when the answer is visible (WRITE/ECHO: the last byte of its
//! receive area changes to the iteration's marker; SEND: a receive completion).
//! One sample = that round trip; results report half of it.
//! Completion (read, atomic, --completion): the client stamps the clock,
//! posts a signaled WR and stamps again when its completion is polled.
//! Nothing here allocates, locks, logs or makes a syscall besides the verbs'.

use crate::clock::Clock;
use crate::connect::{Control, Message};
use crate::error::Result;
use crate::spec::{AtomicOp, LatencyMode, LatencySpec, VerbKind};
use crate::stats::LatencyRecorder;
use crate::verbs::{Endpoint, RecvList, SendList, Transport, WorkCompletion, UD_QKEY};

use super::side::{send_op, Side, GRH_BYTES, RQ_DEPTH, SIGNAL_EVERY};
use super::wait::Patience;

/// The marker byte a peer writes as the last payload byte of iteration `k`:
/// 1..=254, never the zero a reset buffer holds, never `STOP`.
#[inline(always)]
pub fn marker(k: u64) -> u8 {
    (k % 254) as u8 + 1
}

/// The marker that ends a ping-pong point on the server.
pub const STOP: u8 = 255;

/// What the client measured for one point.
pub struct ClientPoint {
    pub measured: u64,
    pub warmup: u64,
    pub verify_failures: u64,
    pub inline: bool,
    pub elapsed_ns: u64,
}

/// How the server takes part in a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPart {
    /// Answers each message (write/echo/send ping-pong).
    Answer,
    /// Consumes messages that need receives (send, or write with immediate).
    Sink,
    /// Does nothing: the NIC serves READs, WRITEs and atomics on its own.
    Passive,
}

pub fn server_part(spec: &LatencySpec) -> ServerPart {
    match spec.mode {
        LatencyMode::PingPong => ServerPart::Answer,
        LatencyMode::Completion if spec.verb == VerbKind::Send || spec.imm => ServerPart::Sink,
        LatencyMode::Completion => ServerPart::Passive,
    }
}

/// Whether this side keeps receives posted.
pub fn needs_receives(spec: &LatencySpec, server: bool) -> bool {
    match server_part(spec) {
        ServerPart::Answer => spec.verb == VerbKind::Send,
        ServerPart::Sink => server,
        ServerPart::Passive => false,
    }
}

/// Receive list for one message into the receive area (UD: GRH first).
pub fn recv_list(side: &Side) -> RecvList {
    RecvList::new(&side.mr, side.recv_offset(), side.slot as u32, 1, 0)
}

pub fn post_receives(side: &mut Side, list: &mut RecvList) -> Result<()> {
    for _ in 0..RQ_DEPTH {
        side.qp.post_recv(list)?;
    }
    Ok(())
}

/// Offset of the last payload byte of a `size`-byte message in the receive area.
fn recv_marker_at(side: &Side, size: u32) -> usize {
    let grh = if side.qp.transport() == Transport::Ud {
        GRH_BYTES
    } else {
        0
    };
    side.recv_offset() + grh + size as usize - 1
}

/// Builds the one-WR list a side posts for `spec` at `size`.
fn build_wr(
    side: &Side,
    spec: &LatencySpec,
    size: u32,
    remote: &Endpoint,
    echo_from_recv: bool,
) -> SendList {
    let mut wr = SendList::new(1);
    let op = send_op(spec.verb, spec.op, spec.imm, remote.addr, remote.rkey);
    let offset = if echo_from_recv {
        side.recv_offset()
    } else {
        side.send_offset()
    };
    wr.set(0, op, &side.mr, offset, size);
    if let Some(ah) = &side.ah {
        wr.set_ud_dest(0, ah, remote.qpn, UD_QKEY);
    }
    wr
}

/// Whether a side posts `size` bytes inline.
pub fn use_inline(spec: &LatencySpec, side: &Side, size: u32) -> bool {
    match spec.verb {
        VerbKind::Read | VerbKind::Atomic => false,
        // ECHO inlines whenever it fits, as HERD's clients do.
        VerbKind::Echo => size <= side.qp.max_inline(),
        _ => spec.inline,
    }
}

/// Polls one completion from `cq` (bounded by `patience`), checking its status.
#[inline(always)]
fn reap_one(
    side: &Side,
    recv: bool,
    verb: &'static str,
    patience: &Patience,
    wc: &mut [WorkCompletion; 1],
) -> Result<()> {
    let cq = if recv { &side.recv_cq } else { &side.send_cq };
    let qpn = side.qp.qpn();
    patience.wait(
        || format!("a {verb} completion on QP {qpn}"),
        || Ok((cq.poll(wc)? == 1).then_some(())),
    )?;
    wc[0].check(verb)?;
    Ok(())
}

fn verb_label(spec: &LatencySpec) -> &'static str {
    spec.verb.wc_label(spec.op)
}

/// Runs one point on the client; samples go to `rec` (cleared first).
#[allow(clippy::too_many_arguments)]
pub fn client_point(
    side: &mut Side,
    spec: &LatencySpec,
    size: u32,
    remote: &Endpoint,
    clock: &Clock,
    rec: &mut LatencyRecorder,
    recvs: &mut RecvList,
) -> Result<ClientPoint> {
    rec.clear();
    let patience = Patience::new(*clock, spec.timeout_s);
    let inline = use_inline(spec, side, size);
    let mut wr = build_wr(side, spec, size, remote, false);
    wr.set_inline(0, inline);
    let verb = verb_label(spec);
    let warmup = spec.warmup;
    let duration_ticks = spec
        .duration_s
        .map(|d| clock.ticks(std::time::Duration::from_secs_f64(d)));
    let total = warmup + spec.iters;
    let send_marker = side.send_offset() + size as usize - 1;
    let recv_marker = recv_marker_at(side, size);
    let mut wc = [WorkCompletion::default(); 1];
    let mut failures = 0u64;
    let started = clock.now();
    let mut measured_from = started;
    let mut k = 0u64;
    let qpn = side.qp.qpn();

    loop {
        if k == warmup {
            measured_from = clock.now();
        }
        let done = match duration_ticks {
            // Duration mode: the warm-up still counts iterations, then time rules.
            Some(_) if k < warmup => false,
            Some(d) => clock.now().wrapping_sub(measured_from) >= d,
            None => k >= total,
        };
        if done {
            break;
        }
        match spec.mode {
            LatencyMode::PingPong => {
                let m = marker(k);
                side.mr.write_u8(send_marker, m);
                let signaled = k % SIGNAL_EVERY == SIGNAL_EVERY - 1;
                wr.set_signaled(0, signaled);
                let t0 = clock.now();
                side.qp.post_send(&mut wr)?;
                if spec.verb == VerbKind::Send {
                    reap_one(side, true, "RECV", &patience, &mut wc)?;
                    let t1 = clock.now();
                    side.qp.post_recv(recvs)?;
                    if k >= warmup {
                        rec.record(clock.to_ns(t1.wrapping_sub(t0)));
                    }
                } else {
                    let mr = &side.mr;
                    patience.wait(
                        || {
                            format!(
                                "the answer to iteration {k} on QP {qpn} (peer stopped writing?)"
                            )
                        },
                        || Ok((mr.read_u8(recv_marker) == m).then_some(())),
                    )?;
                    let t1 = clock.now();
                    if k >= warmup {
                        rec.record(clock.to_ns(t1.wrapping_sub(t0)));
                    }
                }
                if signaled {
                    reap_one(side, false, verb, &patience, &mut wc)?;
                }
            }
            LatencyMode::Completion => {
                if let Some(AtomicOp::Cas) = spec.op {
                    wr.set_compare_swap(0, k, k + 1);
                }
                wr.set_signaled(0, true);
                let t0 = clock.now();
                side.qp.post_send(&mut wr)?;
                reap_one(side, false, verb, &patience, &mut wc)?;
                let t1 = clock.now();
                if k >= warmup {
                    rec.record(clock.to_ns(t1.wrapping_sub(t0)));
                }
                if spec.verb == VerbKind::Atomic {
                    // Fetch-add returns the count so far; CAS returns k when it swapped.
                    if side.mr.read_u64(side.send_offset()) != k {
                        failures += 1;
                    }
                }
            }
        }
        k += 1;
    }
    let finished = clock.now();
    if spec.mode == LatencyMode::PingPong {
        // Tell the answering side this point is over.
        side.mr.write_u8(send_marker, STOP);
        wr.set_signaled(0, true);
        side.qp.post_send(&mut wr)?;
        reap_one(side, false, verb, &patience, &mut wc)?;
    }
    Ok(ClientPoint {
        measured: k.saturating_sub(warmup),
        warmup: k.min(warmup),
        verify_failures: failures,
        inline,
        elapsed_ns: clock.to_ns(finished.wrapping_sub(measured_from)),
    })
}

/// Runs one point on the server; returns how many messages it received.
#[allow(clippy::too_many_arguments)]
pub fn server_point(
    side: &mut Side,
    spec: &LatencySpec,
    size: u32,
    index: u32,
    remote: &Endpoint,
    clock: &Clock,
    ctl: &mut dyn Control,
    recvs: &mut RecvList,
) -> Result<u64> {
    let patience = Patience::new(*clock, spec.timeout_s);
    let qpn = side.qp.qpn();
    let mut wc = [WorkCompletion::default(); 1];
    let mut received = 0u64;
    match server_part(spec) {
        ServerPart::Answer => {
            let echo = spec.verb == VerbKind::Echo;
            let mut wr = build_wr(side, spec, size, remote, echo);
            wr.set_inline(0, use_inline(spec, side, size));
            let verb = verb_label(spec);
            let send_marker = side.send_offset() + size as usize - 1;
            let recv_marker = recv_marker_at(side, size);
            let mut k = 0u64;
            loop {
                let m = marker(k);
                let seen = if spec.verb == VerbKind::Send {
                    reap_one(side, true, "RECV", &patience, &mut wc)?;
                    side.qp.post_recv(recvs)?;
                    side.mr.read_u8(recv_marker)
                } else {
                    let mr = &side.mr;
                    patience.wait(
                        || format!("iteration {k} from the client on QP {qpn} (client gone?)"),
                        || {
                            let v = mr.read_u8(recv_marker);
                            Ok((v == m || v == STOP).then_some(v))
                        },
                    )?
                };
                if seen == STOP {
                    break;
                }
                received += 1;
                if !echo {
                    side.mr.write_u8(send_marker, m);
                }
                let signaled = k % SIGNAL_EVERY == SIGNAL_EVERY - 1;
                wr.set_signaled(0, signaled);
                side.qp.post_send(&mut wr)?;
                if signaled {
                    reap_one(side, false, verb, &patience, &mut wc)?;
                }
                k += 1;
            }
            // Reap what is still outstanding so the next point starts clean.
            while side.send_cq.poll(&mut wc)? == 1 {
                wc[0].check(verb)?;
            }
            expect_finish(ctl, index, spec)?;
        }
        ServerPart::Sink => loop {
            if side.recv_cq.poll(&mut wc)? == 1 {
                wc[0].check("RECV")?;
                side.qp.post_recv(recvs)?;
                received += 1;
                continue;
            }
            // Idle: ask the control channel whether the client is done. This
            // only happens when no message is waiting, so it costs the client nothing.
            match ctl.poll() {
                Ok(Some(Message::Finish { index: i })) if i == index => {
                    // Count what arrived while the Finish was on its way.
                    while side.recv_cq.poll(&mut wc)? == 1 {
                        wc[0].check("RECV")?;
                        side.qp.post_recv(recvs)?;
                        received += 1;
                    }
                    break;
                }
                Ok(Some(other)) => return Err(unexpected(ctl, "finish", &other)),
                Ok(None) => {}
                Err(e) => return Err(e),
            }
        },
        ServerPart::Passive => expect_finish(ctl, index, spec)?,
    }
    Ok(received)
}

/// Waits for the client's `Finish`: a passive server can wait as long as a
/// point may last, but not forever.
fn expect_finish(ctl: &mut dyn Control, index: u32, spec: &LatencySpec) -> Result<()> {
    let longest = spec.duration_s.unwrap_or(0.0) + spec.timeout_s * 4.0 + 3600.0;
    match ctl.recv(std::time::Duration::from_secs_f64(longest))? {
        Message::Finish { index: i } if i == index => Ok(()),
        other => Err(unexpected(ctl, "finish", &other)),
    }
}

pub fn unexpected(ctl: &dyn Control, wanted: &str, got: &Message) -> crate::error::Error {
    crate::error::Error::Peer {
        peer: ctl.peer(),
        what: format!("protocol error: expected '{wanted}', got '{}'", got.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_cycle_without_zero_or_stop() {
        let mut prev = 0u8;
        for k in 0..1000 {
            let m = marker(k);
            assert!(m != 0 && m != STOP);
            assert_ne!(m, prev, "consecutive iterations must differ");
            prev = m;
        }
    }
}
