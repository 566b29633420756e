//! The measured loops of every latency test, client and server side.
//!
//! Ping-pong (write, echo, send): the client stamps the clock, posts, and
//! stamps again when the answer is visible (WRITE/ECHO: the last byte of its
//! receive area changes to the iteration's marker; SEND: a receive completion).
//! One sample = that round trip; results report half of it.
//! Completion (read, atomic, --completion): the client stamps the clock,
//! posts a signaled WR and stamps again when its completion is polled.
//! Nothing here allocates, locks, logs or makes a syscall besides the verbs'.
//! (The window's two edges read the device counters and the CPU times;
//! an `--interval` boundary, noticed from the clock, summarises the
//! interval's own histogram and publishes it lock-free: between two
//! samples, never inside one.)

use crate::clock::Clock;
use crate::connect::{expect, unexpected, Control, Deadlines, Message};
use crate::cpu_use::{CpuSnapshot, CpuUse};
use crate::error::Result;
use crate::report::{CounterDeltas, ToStop, Validation};
use crate::spec::{AtomicOp, LatencyMode, LatencySpec, VerbKind};
use crate::stats::LatencyRecorder;
use crate::verbs::{
    CompletionQueue, MemoryRegion, QueuePair, SendList, Transport, WorkCompletion, UD_QKEY,
};

use super::super::counters::DeviceCounters;
use super::super::intervals::IntervalBoard;
use super::super::ops::Role;
use super::super::ops::{
    atomic_expected, atomic_operands, posts_inline, send_op, test_fault, wc_label, Fault,
};
use super::super::qpset::GRH_BYTES;
use super::super::wait::{IdleWatch, Patience};
use super::validate::{self, Checks};
use super::{server_part, ServerPart, Side, SIGNAL_EVERY};

/// The marker byte a peer writes as the last payload byte of iteration `k`:
/// 1..=254, never the zero a reset buffer holds, never `STOP`.
#[inline(always)]
pub fn marker(k: u64) -> u8 {
    (k % 254) as u8 + 1
}

/// Duration mode: the warm-up takes at most this fraction of the window.
pub const WARMUP_SHARE_OF_WINDOW: u64 = 5;

/// The marker that ends a ping-pong point on the server.
const STOP: u8 = 255;

/// What the client measured for one point.
pub struct ClientPoint {
    pub measured: u64,
    pub warmup: u64,
    pub verify_failures: u64,
    pub inline: bool,
    pub elapsed_ns: u64,
    /// The device's counters over the measured iterations (warm-up excluded).
    pub device_counters: Option<CounterDeltas>,
    /// `--events`: completion-channel wake-ups over the measured iterations.
    pub event_wakeups: Option<u64>,
    /// This process's CPU use over the measured iterations.
    pub cpu: Option<CpuUse>,
    /// `--forever`: the window up to the stop, which `device_counters`,
    /// `event_wakeups` and `cpu` cover (`measured` and `elapsed_ns` cover
    /// the kept intervals only).
    pub to_stop: Option<ToStop>,
}

/// Offset of a message's payload in receive slot `j` (UD: after the GRH).
fn recv_payload_at(side: &Side, j: usize) -> usize {
    let grh = if side.qp().transport() == Transport::Ud {
        GRH_BYTES
    } else {
        0
    };
    side.recv_area() + j * side.slot + grh
}

/// Offset of the last payload byte of a `size`-byte message in the receive area.
fn recv_marker_at(side: &Side, size: u32) -> usize {
    // Size 0 (completion latency only) has no last byte: any byte will do.
    recv_payload_at(side, 0) + (size as usize).saturating_sub(1)
}

/// Offset of the last payload byte of a `size`-byte message in the send area.
fn send_marker_at(size: u32) -> usize {
    Side::SEND_AREA + (size as usize).saturating_sub(1)
}

/// Builds the one-WR list a side posts for `spec` at `size` from `offset`:
/// the send area, or (ECHO's server) straight from where the request landed.
fn build_wr(side: &Side, spec: &LatencySpec, size: u32, offset: usize) -> SendList {
    let sge = spec.sge as usize;
    let mut wr = SendList::with_sges(1, sge);
    let remote = &side.remote;
    let op = send_op(spec.verb, spec.op, spec.imm, remote.addr, remote.rkey);
    wr.set_split(0, op, &side.set.mr, offset, size, sge);
    if let Some(ah) = &side.set.ahs[0] {
        wr.set_ud_dest(0, ah, remote.qpn, UD_QKEY);
    }
    wr.set_inline(
        0,
        posts_inline(spec.verb, spec.inline, size, side.qp().max_inline()),
    );
    if test_fault(Fault::SendLkey) {
        wr.spoil_lkeys();
    }
    wr
}

/// Iteration `k`'s WR is signaled when `k & mask == mask`: one in
/// `SIGNAL_EVERY`, or (`--validate`, not inline) every one, since a buffer
/// the NIC may still read is not refilled before its completion. A mask
/// costs the loop what the constant modulo did.
fn signal_mask(every_wr: bool) -> u64 {
    const _: () = assert!(SIGNAL_EVERY.is_power_of_two());
    if every_wr {
        0
    } else {
        SIGNAL_EVERY - 1
    }
}

/// Polls one completion from `cq` (bounded by `patience`), checking its
/// status; a CQ on a completion channel (`--events`) is slept on instead.
#[inline(always)]
fn reap_one(
    cq: &CompletionQueue,
    qpn: u32,
    verb: &'static str,
    patience: &Patience,
    wc: &mut [WorkCompletion; 1],
) -> Result<()> {
    let what = || format!("a {verb} completion on QP {qpn}");
    match cq.channel() {
        // --events: the wake-up is part of the sample.
        Some(ch) => {
            patience.sleep_for(cq, ch, wc, what)?;
        }
        None => patience.wait(what, || Ok((cq.poll(wc)? == 1).then_some(())))?,
    }
    wc[0].check(verb)?;
    Ok(())
}

/// Runs one point on the client; samples go to `rec` (cleared first).
pub fn client_point(
    side: &mut Side,
    spec: &LatencySpec,
    size: u32,
    clock: &Clock,
    rec: &mut LatencyRecorder,
    counters: &DeviceCounters,
    board: Option<&IntervalBoard>,
) -> Result<(ClientPoint, Option<Validation>)> {
    let mut before = None;
    let mut cpu_before = None;
    rec.clear();
    // --interval: each interval's own samples, summarised at its end.
    let mut irec = board.map(|_| LatencyRecorder::new());
    let mut marks = IntervalBoard::marks(board, 0);
    let scale = if spec.mode == LatencyMode::PingPong {
        0.5
    } else {
        1.0
    };
    let forever = spec.live.forever;
    let patience = Patience::new(*clock, spec.timeout_s);
    let mut wr = build_wr(side, spec, size, Side::SEND_AREA);
    let inline = posts_inline(spec.verb, spec.inline, size, side.qp().max_inline());
    // --validate: what the client checks and fills, between its samples.
    let mut checks = Checks::new(spec, Role::Client);
    let validate = checks.on();
    let len = size as usize;
    let answer_at = recv_payload_at(side, 0);
    let (slot, remote_addr, slots) = (side.slot, side.remote.addr, side.recv_slots);
    let signal_mask = signal_mask(validate && !inline);
    let write_based = matches!(spec.verb, VerbKind::Write | VerbKind::Echo);
    let mut target = 0usize;
    let verb = wc_label(spec.verb, spec.op);
    let mut warmup = spec.warmup;
    let duration_ticks = spec
        .duration_s
        .map(|d| clock.ticks(std::time::Duration::from_secs_f64(d)));
    // Duration mode: the warm-up also ends once it has taken a fifth of the
    // window, so a link with long round trips (1000 of them take seconds
    // between two guests) does not stretch a timed point far past its
    // window, which a profile's budget counts on.
    let warmup_ticks = duration_ticks
        .filter(|_| !forever)
        .map(|d| d / WARMUP_SHARE_OF_WINDOW);
    let total = warmup + spec.iters;
    let send_marker = send_marker_at(size);
    let recv_marker = recv_marker_at(side, size);
    let qpn = side.qp().qpn();
    let Side { set, recvs, .. } = side;
    let (qp, mr) = (&mut set.qps[0], &set.mr);
    let (send_cq, recv_cq) = (&set.send_cq, &set.recv_cq);
    let channel = set.channel.as_deref();
    let mut woken_before = 0;
    let mut wc = [WorkCompletion::default(); 1];
    let mut failures = 0u64;
    let started = clock.now();
    let mut measured_from = started;
    let mut k = 0u64;
    if validate && spec.op.is_none() && spec.verb != VerbKind::Read {
        validate::fill(mr, Side::SEND_AREA, len, 0);
    }

    loop {
        if k < warmup {
            if let Some(w) = warmup_ticks {
                if clock.now().wrapping_sub(started) >= w {
                    warmup = k;
                }
            }
        }
        if k == warmup {
            if !counters.is_empty() {
                before = Some(counters.read());
            }
            woken_before = channel.map_or(0, |c| c.events_taken());
            // Innermost, so it covers the measured iterations closely.
            cpu_before = Some(CpuSnapshot::take());
            measured_from = clock.now();
            marks.start(measured_from);
        }
        if let Some(ir) = irec.as_mut() {
            let now = clock.now();
            if marks.due(now) {
                let s = ir.summary(scale);
                if marks.mark(now, k - warmup, Some((s.p50_ns, s.p99_ns))) {
                    if forever {
                        // Only whole intervals reach the point's histogram.
                        rec.add(ir);
                    }
                    ir.clear();
                }
            }
        }
        let done = match duration_ticks {
            // --forever: until a signal ends it at an interval boundary.
            _ if forever => marks.stopped(),
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
                mr.write_u8(send_marker, m);
                let signaled = k & signal_mask == signal_mask;
                wr.set_signaled(0, signaled);
                let t0 = clock.now();
                qp.post_send(&mut wr)?;
                if spec.verb == VerbKind::Send {
                    reap_one(recv_cq, qpn, "RECV", &patience, &mut wc)?;
                    let t1 = clock.now();
                    qp.post_recv(recvs)?;
                    if k >= warmup {
                        sample(rec, &mut irec, forever, clock.to_ns(t1.wrapping_sub(t0)));
                    }
                } else {
                    patience.wait(
                        || {
                            format!(
                                "the answer to iteration {k} on QP {qpn} (the peer stopped writing, or the network to it is down)"
                            )
                        },
                        || Ok((mr.read_u8(recv_marker) == m).then_some(())),
                    )?;
                    let t1 = clock.now();
                    if k >= warmup {
                        sample(rec, &mut irec, forever, clock.to_ns(t1.wrapping_sub(t0)));
                    }
                }
                if signaled {
                    reap_one(send_cq, qpn, verb, &patience, &mut wc)?;
                }
                if validate {
                    // The answer (echo: our own request) is the pattern of k.
                    checks.check(mr, answer_at, len, k, k, true);
                    validate::fill(mr, Side::SEND_AREA, len, k + 1);
                    if write_based {
                        // The server checks request k while k+1 lands beside it.
                        target = (target + 1) % slots;
                        wr.set_remote_addr(0, remote_addr + (target * slot) as u64);
                    }
                }
            }
            LatencyMode::Completion => {
                if let Some(AtomicOp::Cas) = spec.op {
                    let (compare, swap) = atomic_operands(k);
                    wr.set_compare_swap(0, compare, swap);
                }
                wr.set_signaled(0, true);
                let t0 = clock.now();
                qp.post_send(&mut wr)?;
                reap_one(send_cq, qpn, verb, &patience, &mut wc)?;
                let t1 = clock.now();
                if k >= warmup {
                    sample(rec, &mut irec, forever, clock.to_ns(t1.wrapping_sub(t0)));
                }
                if validate {
                    match spec.verb {
                        VerbKind::Atomic => checks.flip_if_due(mr, Side::SEND_AREA, 8, k, false),
                        VerbKind::Read => {
                            // Every READ brings back the server's WR-0 pattern
                            // into a landing area cleared after each check.
                            checks.check(mr, Side::SEND_AREA, len, 0, k, false);
                            mr.fill(Side::SEND_AREA, len, 0);
                        }
                        _ => validate::fill(mr, Side::SEND_AREA, len, k + 1),
                    }
                }
                if spec.op.is_some() {
                    let (found, expected) = (mr.read_u64(Side::SEND_AREA), atomic_expected(k));
                    if found != expected {
                        failures += 1;
                    }
                    if validate {
                        checks.atomic(k, expected, found);
                    }
                }
            }
        }
        k += 1;
    }
    let mut finished = clock.now();
    let cpu = cpu_before.map(|b| CpuSnapshot::take().since(&b));
    let device_counters = before.map(|b| counters.delta(&b, &counters.read()));
    let event_wakeups = channel.map(|c| c.events_taken() - woken_before);
    let mut measured = k.saturating_sub(warmup);
    let mut to_stop = None;
    if forever {
        // A stopped --forever point keeps its whole intervals: the one in
        // progress is dropped (its samples never left `irec`).
        to_stop = Some(ToStop {
            window_s: clock.to_ns(finished.wrapping_sub(measured_from)) as f64 / 1e9,
            ops: measured,
        });
        measured = marks.last_ops();
        finished = marks.last_at();
    } else if let Some(ir) = irec.as_ref().filter(|_| measured > marks.last_ops()) {
        // The last piece of a finite window.
        let s = ir.summary(scale);
        marks.mark(finished, measured, Some((s.p50_ns, s.p99_ns)));
    }
    if spec.mode == LatencyMode::PingPong {
        // Tell the answering side this point is over.
        mr.write_u8(send_marker, STOP);
        wr.set_signaled(0, true);
        qp.post_send(&mut wr)?;
        reap_one(send_cq, qpn, verb, &patience, &mut wc)?;
    }
    let validation = checks.finish().map(|v| Validation {
        how: validate::how(spec, inline, slots),
        ..v
    });
    let point = ClientPoint {
        measured,
        warmup: k.min(warmup),
        verify_failures: failures,
        inline,
        elapsed_ns: clock.to_ns(finished.wrapping_sub(measured_from)),
        device_counters,
        event_wakeups,
        cpu,
        to_stop,
    };
    Ok((point, validation))
}

/// Records one sample in the interval's histogram (--interval) and the
/// point's; a --forever point adds each whole interval to its histogram
/// when the interval ends, so the one in progress at the stop is left out.
#[inline(always)]
fn sample(rec: &mut LatencyRecorder, irec: &mut Option<LatencyRecorder>, forever: bool, ns: u64) {
    if let Some(ir) = irec {
        ir.record(ns);
    }
    if !forever {
        rec.record(ns);
    }
}

/// What the server counted over one point.
pub struct ServerPoint {
    /// Messages received (SEND and ping-pong).
    pub received: u64,
    /// `--validate`: the payloads the server checked.
    pub validation: Option<Validation>,
}

/// Runs one point on the server.
pub fn server_point(
    side: &mut Side,
    spec: &LatencySpec,
    size: u32,
    index: u32,
    clock: &Clock,
    ctl: &mut dyn Control,
) -> Result<ServerPoint> {
    let patience = Patience::new(*clock, spec.timeout_s);
    let deadlines = Deadlines::new(
        spec.timeout_s,
        spec.live.point_s(spec.duration_s.unwrap_or(0.0)),
    );
    let qpn = side.qp().qpn();
    let echo = spec.verb == VerbKind::Echo;
    let from = if echo {
        side.recv_area()
    } else {
        Side::SEND_AREA
    };
    let mut wr = build_wr(side, spec, size, from);
    let verb = wc_label(spec.verb, spec.op);
    let send_marker = send_marker_at(size);
    let mut recv_marker = recv_marker_at(side, size);
    // --validate: requests land in `recv_slots` buffers in turn (SEND: the
    // ring's next buffer, kept across points), each checked after the answer
    // is posted; echo answers from the buffer its request landed in.
    let mut checks = Checks::new(spec, Role::Server);
    let validate = checks.on();
    let len = size as usize;
    let inline = posts_inline(spec.verb, spec.inline, size, side.qp().max_inline());
    let signal_mask = signal_mask(validate && !inline);
    let slots = side.recv_slots;
    let ring = validate && !side.ring.is_empty();
    let mut at = if ring { side.next_recv } else { 0 };
    let payloads: Vec<usize> = (0..slots).map(|j| recv_payload_at(side, j)).collect();
    let mut echo_next = (validate && echo && slots > 1)
        .then(|| build_wr(side, spec, size, side.recv_area() + side.slot));
    if validate && !echo {
        validate::fill(&side.set.mr, Side::SEND_AREA, len, 0);
    }
    if ring {
        recv_marker = payloads[at] + len.saturating_sub(1);
    }
    let Side {
        set,
        recvs,
        ring: ring_recvs,
        ..
    } = side;
    let (qp, mr) = (&mut set.qps[0], &set.mr);
    let (send_cq, recv_cq) = (&set.send_cq, &set.recv_cq);
    let mut wc = [WorkCompletion::default(); 1];
    let mut received = 0u64;
    let mut watch = IdleWatch::new(
        deadlines.passive(),
        "SENDs or the client's finish (client gone?)",
    );
    let finished = |m: &Message| match m {
        Message::Finish { index: i, sent } if *i == index => Some(*sent),
        _ => None,
    };
    match server_part(spec) {
        ServerPart::Answer => {
            let mut k = 0u64;
            loop {
                let m = marker(k);
                let seen = if spec.verb == VerbKind::Send {
                    reap_one(recv_cq, qpn, "RECV", &patience, &mut wc)?;
                    if !ring {
                        qp.post_recv(recvs)?;
                    }
                    mr.read_u8(recv_marker)
                } else {
                    patience.wait(
                        || format!("iteration {k} from the client on QP {qpn} (client gone?)"),
                        || {
                            let v = mr.read_u8(recv_marker);
                            Ok((v == m || v == STOP).then_some(v))
                        },
                    )?
                };
                if seen == STOP {
                    if ring {
                        qp.post_recv(&mut ring_recvs[at])?;
                        at = (at + 1) % slots;
                    }
                    break;
                }
                received += 1;
                if !echo {
                    mr.write_u8(send_marker, m);
                }
                let signaled = k & signal_mask == signal_mask;
                wr.set_signaled(0, signaled);
                qp.post_send(&mut wr)?;
                if signaled {
                    reap_one(send_cq, qpn, verb, &patience, &mut wc)?;
                }
                if validate {
                    checks.check(mr, payloads[at], len, k, k, true);
                    if ring {
                        qp.post_recv(&mut ring_recvs[at])?;
                    }
                    at = (at + 1) % slots;
                    recv_marker = payloads[at] + len.saturating_sub(1);
                    match echo_next.as_mut() {
                        Some(next) => std::mem::swap(&mut wr, next),
                        None => validate::fill(mr, Side::SEND_AREA, len, k + 1),
                    }
                }
                k += 1;
            }
            // Reap what is still outstanding so the next point starts clean.
            while send_cq.poll(&mut wc)? == 1 {
                wc[0].check(verb)?;
            }
            expect(ctl, "finish", deadlines.passive(), |m| finished(m))?;
        }
        ServerPart::Sink => {
            // One received message: checked (SEND under --validate) before
            // its receive is posted again.
            let mut take = |qp: &mut QueuePair, done: &WorkCompletion| -> Result<()> {
                done.check("RECV")?;
                if ring {
                    checks.check(mr, payloads[at], len, received, received, false);
                    qp.post_recv(&mut ring_recvs[at])?;
                    at = (at + 1) % slots;
                } else {
                    qp.post_recv(recvs)?;
                }
                received += 1;
                Ok(())
            };
            loop {
                if recv_cq.poll(&mut wc)? == 1 {
                    take(qp, &wc[0])?;
                    watch.busy();
                    continue;
                }
                watch.idle()?;
                // Idle: ask the control channel whether the client is done. This
                // only happens when no message is waiting, so it costs the client nothing.
                let Some(m) = ctl.poll()? else { continue };
                let Some(sent) = finished(&m) else {
                    return Err(unexpected(ctl, "finish", &m));
                };
                // Count what arrived while the Finish was on its way.
                while recv_cq.poll(&mut wc)? == 1 {
                    take(qp, &wc[0])?;
                }
                check_target(&mut checks, spec, mr, payloads[0], len, sent);
                break;
            }
        }
        ServerPart::Passive => {
            let sent = expect(ctl, "finish", deadlines.passive(), |m| finished(m))?;
            check_target(&mut checks, spec, mr, payloads[0], len, sent);
        }
    }
    if ring {
        side.next_recv = at;
    }
    Ok(ServerPoint {
        received,
        validation: checks.finish(),
    })
}

/// `--validate` WRITE --completion: the target holds the last WR's payload
/// once the client has finished (`sent` WRs, warm-up included).
fn check_target(
    checks: &mut Checks,
    spec: &LatencySpec,
    mr: &MemoryRegion,
    at: usize,
    len: usize,
    sent: u64,
) {
    if checks.on() && spec.verb == VerbKind::Write && sent > 0 {
        checks.aim_fault_at(sent - 1);
        checks.check(mr, at, len, sent - 1, sent - 1, false);
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
