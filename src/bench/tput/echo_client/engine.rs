//! The echo client's measured loop: each thread keeps every request slot of
//! its QPs in flight (`Flights`), completes a round trip when the slot's
//! response arrives, and (`--validate`) checks the responses.

use std::sync::Barrier;
use std::time::Duration;

use crate::abort::aborted;
use crate::error::{Error, Result};
use crate::report::{DriverReport, ToStop, Validation};
use crate::spec::EchoVerb;
use crate::verbs::Transport;

use super::EchoClientSet;
use crate::bench::latency::marker;
use crate::bench::ops::echo_wc_label;
use crate::bench::qpset::{QpSet, GRH_BYTES};
use crate::bench::tput::completions::{name_the_cause, ArrivalBuf, SendTracker, WrId};
use crate::bench::tput::echo_wire::EchoImm;
use crate::bench::tput::pace::QpPacers;
use crate::bench::tput::threads::{run_threads, ThreadResult};
use crate::bench::tput::validate::{self, Checker};
use crate::bench::tput::window::{PointCtx, ThreadWindow, WithinPass};
use crate::bench::wait::{arm_all, take_event_within, Patience, EVENT_SLICE_MS};

/// Runs the echo client threads; every completed round trip is one op.
pub fn run_echo_client(sets: &mut [EchoClientSet], ctx: &PointCtx<'_>) -> Result<DriverReport> {
    run_threads(sets, ctx.side, |t, set, barrier| {
        echo_client_thread(t, set, ctx, barrier)
    })
}

/// Which request slots are in flight, and round trips completed per QP.
struct Flights {
    window: usize,
    busy: Vec<bool>,
    /// Per slot: how many round trips it has completed or given up on (its
    /// next marker).
    gen: Vec<u64>,
    /// Per slot: when its request was posted (clock ticks).
    sent_at: Vec<u64>,
    done: Vec<u64>,
    in_flight: usize,
    /// Requests given up on: no response within the loss timeout.
    abandoned: u64,
    /// The longest round trip that has landed (clock ticks, to within the
    /// few posts between the pass's clock readings).
    longest: u64,
}

impl Flights {
    fn new(qps: usize, window: usize) -> Self {
        Flights {
            window,
            busy: vec![false; qps * window],
            gen: vec![0; qps * window],
            sent_at: vec![0; qps * window],
            done: vec![0; qps],
            in_flight: 0,
            abandoned: 0,
            longest: 0,
        }
    }

    /// Frees every slot whose request has waited, by `now`, longer than both
    /// `after` and twice the longest round trip landed so far: over UC/UD a
    /// lost request or response never comes back, and a slot left busy
    /// would shrink the window for the rest of the run. Its marker moves on,
    /// so a late answer cannot complete the next request.
    ///
    /// The second bound is why a slow server is not taken for a lossy wire:
    /// thousands of requests in flight wait in its receive queue for as long
    /// as it takes to answer them all (seconds in a TCG guest at `-q 1024`),
    /// and every one of them comes back. Freed too early, a slot takes a new
    /// request while its answer is still coming, two responses wait for one
    /// slot, and the receive CQ, sized for one per slot, can overflow and
    /// put the QP in the error state.
    fn abandon_lost(&mut self, now: u64, after: u64) {
        let after = after.max(self.longest.saturating_mul(2));
        for i in 0..self.busy.len() {
            if self.busy[i] && now.wrapping_sub(self.sent_at[i]) > after {
                self.busy[i] = false;
                self.gen[i] += 1;
                self.in_flight -= 1;
                self.abandoned += 1;
            }
        }
    }

    /// A response for slot `k` of QP `q` arrived, seen at `now` (the
    /// pass's latest clock reading); one for a slot not in flight (a
    /// duplicate) is ignored.
    #[inline(always)]
    fn land(&mut self, q: usize, k: usize, now: u64) -> bool {
        let i = q * self.window + k;
        if !self.busy[i] {
            return false;
        }
        self.longest = self.longest.max(now.wrapping_sub(self.sent_at[i]));
        self.busy[i] = false;
        self.gen[i] += 1;
        self.done[q] += 1;
        self.in_flight -= 1;
        true
    }
}

fn echo_client_thread(
    thread: u32,
    s: &mut EchoClientSet,
    ctx: &PointCtx<'_>,
    barrier: &Barrier,
) -> Result<ThreadResult> {
    let (spec, p, clock, window) = (ctx.spec, ctx.point, ctx.clock, ctx.window);
    let n = s.req.qps.len();
    let layout = s.layout;
    let w = layout.window;
    let last = s.size as usize - 1;
    let sp = p.signal_period as u64;
    let mut fl = Flights::new(n, w);
    let mut tx = SendTracker::new(n);
    let mut arrivals = ArrivalBuf::new();
    let mut base = vec![0u64; n];
    let mut at_end = vec![0u64; n];
    // --forever: round trips per QP at the last published interval.
    let mut kept = vec![0u64; n];
    let mut to_stop = None;
    let patience = Patience::new(*clock, spec.timeout_s);
    let sq_room = s.req.qps[0].max_send_wr() as u64 - 1;
    let qpn = s.req.qps[0].qpn();
    let req_label = echo_wc_label(s.req_verb);
    let drain_limit = clock.ticks(Duration::from_secs_f64(spec.timeout_s.min(2.0)));
    // UC and UD may drop a request or a response; RC never does.
    let lossy = p.transport != Transport::Rc || s.resp_verb == EchoVerb::Send;
    let loss_after = clock.ticks(Duration::from_secs_f64(spec.timeout_s / 2.0));
    let mut last_sweep = 0u64;
    // --events: see `sleep_for_responses`.
    let woken = |s: &EchoClientSet| s.req.channel.as_ref().map(|c| c.events_taken());
    let mut quiet = true;
    // --validate with SEND responses: each response is checked against its
    // request slot's pattern as it is polled (in the loop: it costs the
    // client's rate, which the record's `how` says); responses per QP count
    // as its WRs.
    // (SEND/SEND: the server answers from a scratch slot, not with the
    // request's bytes, so there is nothing to hold a response to.)
    let mut resp_check = (s.validate
        && s.req_verb == EchoVerb::Write
        && s.resp_verb == EchoVerb::Send
        && s.size > 0)
        .then(|| {
            Checker::new(
                s.size,
                ECHO_SEND_HOW.into(),
                validate::FAULT_WR,
                "echo client",
            )
            .skipping(last)
        });
    let mut checked = vec![0u64; if resp_check.is_some() { n } else { 0 }];
    // Where response buffers start in their QP's region, and the GRH a UD
    // receive puts before the payload.
    let (resp_at, resp_grh) = match &s.resp {
        Some(_) => (0, GRH_BYTES),
        None if p.transport == Transport::Ud => (layout.response(0), GRH_BYTES),
        None => (layout.response(0), 0),
    };
    if s.req.channel.is_some() {
        arm_all(&[&s.req.send_cq, &s.req.recv_cq])?;
    }

    barrier.wait();
    let mut win = ctx.thread_window(thread);
    let t0 = win.opened();
    let mut woken_before = woken(s);
    let mut wakeups = None;
    // An --iters run sends exactly that many requests per QP and counts
    // every round trip that comes back; a timed run counts those completed
    // inside the window.
    let limit = window.iters.unwrap_or(u64::MAX);
    // --rate: one token bucket per request QP, started now (the warm-up is
    // paced too), as the inbound/outbound issuer's.
    let mut pacers = QpPacers::for_thread(ctx, n, t0);
    let mut last_progress = t0;
    let mut stopping = false;
    let mut stopped_at = t0;
    let mut counters = Default::default();
    let mut last_landing = t0;
    // A pass over many QPs (scanning each one's slots for responses, then
    // refilling them) can outlast a tenth of a short window, so it reads the
    // clock every few posts or QPs as well and, once the window is over,
    // goes straight back to the head, which stops it: every round trip
    // counted landed before `stopped_at`.
    let mut within = WithinPass::default();
    // What only the head does: stop at the window's end, or mark an
    // --interval boundary (so intervals are as long as asked at any -q).
    let head_due = |win: &ThreadWindow<'_>, t: u64| win.over(t) || win.interval_due(t);
    'pass: loop {
        if aborted() {
            return Err(Error::Interrupted);
        }
        let now = clock.now();
        if !stopping && win.interval_due(now) {
            let ops = fl.done.iter().sum::<u64>() - base.iter().sum::<u64>();
            if win.mark_interval(now, ops) {
                kept.copy_from_slice(&fl.done);
            }
        }
        if !stopping && win.over(now) {
            // Stop issuing; round trips still in flight are drained, not counted.
            stopping = true;
            counters = win.close();
            wakeups = woken(s).zip(woken_before).map(|(a, b)| a - b);
            match win.kept() {
                // --forever: the window kept ends at the last whole
                // interval; the counters and CPU times cover it up to now.
                Some((at, _)) => {
                    to_stop = Some(ToStop {
                        window_s: counters.window_s,
                        ops: fl.done.iter().sum::<u64>() - base.iter().sum::<u64>(),
                    });
                    at_end.copy_from_slice(&kept);
                    stopped_at = at;
                }
                None => {
                    at_end.copy_from_slice(&fl.done);
                    stopped_at = now;
                }
            }
        }
        if !stopping && window.iters.is_some() && tx.posted.iter().all(|&p| p >= limit) {
            stopping = true;
            stopped_at = now;
        }
        if win.opens(now) {
            base.copy_from_slice(&fl.done);
            woken_before = woken(s);
            kept.copy_from_slice(&fl.done);
            if let Some(pacers) = pacers.as_mut() {
                pacers.restart(win.opened());
            }
        }
        // Drain what is in flight, but not forever: over UD a lost request
        // or response never comes back; it is counted (sent - responses), not waited for.
        // The bound is on the quiet since the last response (or the stop),
        // not on the whole drain: a slow host drains thousands of round
        // trips for longer than the bound while each keeps arriving.
        let quiet_since = last_landing.max(stopped_at);
        if stopping && (fl.in_flight == 0 || now.wrapping_sub(quiet_since) > drain_limit) {
            if window.iters.is_some() {
                // Every round trip counts, timed to the last response (not
                // to the end of a drain that waited for lost ones).
                at_end.copy_from_slice(&fl.done);
                stopped_at = last_landing;
                counters = win.close();
                wakeups = woken(s).zip(woken_before).map(|(a, b)| a - b);
            }
            break;
        }
        let mut progress = false;
        // The clock as last read in this pass (every few posts): when a
        // request was posted and a WRITE response seen, to within those
        // few posts, even when a pass over many QPs takes seconds.
        let mut read = now;
        // Waiting for tokens is not a stalled server.
        let mut pacing = false;
        // QPs refused tokens this pass: when that is all of them, the
        // thread may sleep until the first token is due.
        let mut starved = 0;
        // WRITE responses: each QP's slots are scanned for their markers
        // just before its free slots are refilled, so round trips land (and
        // count) as the pass goes, not only once it has posted to every QP.
        let scan = s.resp_verb == EchoVerb::Write;
        for q in 0..n {
            if !stopping && within.due() {
                read = clock.now();
                if head_due(&win, read) {
                    continue 'pass;
                }
            }
            if scan {
                let responses = s.req.offset(q) + last;
                for k in 0..w {
                    let i = q * w + k;
                    if fl.busy[i]
                        && s.req.mr.read_u8(responses + layout.response(k)) == marker(fl.gen[i])
                    {
                        progress |= fl.land(q, k, read);
                    }
                }
            }
            if stopping {
                continue;
            }
            for k in 0..w {
                let i = q * w + k;
                if fl.busy[i] || tx.outstanding(q) >= sq_room || tx.posted[q] >= limit {
                    continue;
                }
                if within.due() {
                    read = clock.now();
                    if head_due(&win, read) {
                        continue 'pass;
                    }
                }
                if let Some(pacers) = pacers.as_mut() {
                    if !pacers.take(q, now, 1) {
                        pacing = true;
                        starved += 1;
                        break;
                    }
                }
                let at = s.req.offset(q) + layout.request(k) + last;
                s.req.mr.write_u8(at, marker(fl.gen[i]));
                let seq = tx.posted[q] + 1;
                let l = &mut s.requests[i];
                l.set_signaled(0, seq % sp == 0);
                l.set_wr_id(0, WrId::pack(q, seq));
                s.req.qps[q].post_send(l)?;
                tx.posted[q] = seq;
                fl.busy[i] = true;
                fl.sent_at[i] = read;
                fl.in_flight += 1;
                progress = true;
            }
        }
        // (Not while a QP waits for --rate tokens: they come with time, not an event.)
        if quiet && fl.in_flight > 0 && !pacing {
            let ms = if stopping {
                EVENT_SLICE_MS
            } else {
                win.sleep_ms(clock.now(), EVENT_SLICE_MS)
            };
            sleep_for_responses(&s.req, ms)?;
        }
        // SEND responses: the receive CQ, whichever QPs they came to.
        let mut landed = 0;
        // Only a lossy run (SEND responses always are) times what it polls
        // and sweeps for losses; RC's WRITE responses need no clock here.
        let polled_at = if lossy { clock.now() } else { read };
        // Whether every response that has arrived has been seen (WRITE
        // responses: the scan saw each slot).
        let mut drained = true;
        if let (Some(ring), EchoVerb::Send) = (&mut s.recvs, s.resp_verb) {
            let rs = s.resp.as_mut().unwrap_or(&mut s.req);
            let k = arrivals
                .poll(&rs.recv_cq)
                .map_err(|e| name_the_cause(e, &rs.send_cq, req_label))?;
            for (j, a) in arrivals.got[..k].iter().enumerate() {
                // A response without the slot's immediate, or naming
                // a slot that does not exist, completes nothing.
                if let Some((_, slot)) = a.imm.map(EchoImm::unpack) {
                    if slot < w {
                        if let Some(rc) = resp_check.as_mut() {
                            // Before the receive is reposted: its buffer
                            // holds this response until then.
                            let buf = WrId::seq(arrivals.wr_id(j)) as usize;
                            let at = rs.offset(a.qp) + resp_at + buf * layout.slot + resp_grh;
                            checked[a.qp] += 1;
                            let qp = (s.first_qp + a.qp) as u32;
                            rc.check(&rs.mr, at, qp, checked[a.qp], slot as u64, 1, 1);
                        }
                        fl.land(a.qp, slot, polled_at);
                    }
                }
                ring.consumed(a.qp, &mut rs.qps[a.qp])?;
                progress = true;
            }
            landed = k;
            drained = arrivals.drained(k);
        }
        // Losses are judged only once every response that came has been
        // polled: a slot whose answer waits in the CQ is not lost.
        if lossy && drained && polled_at.wrapping_sub(last_sweep) > loss_after / 4 {
            fl.abandon_lost(polled_at, loss_after);
            last_sweep = polled_at;
        }
        let k = tx
            .reap(&s.req.send_cq, req_label)
            .map_err(|e| name_the_cause(e, &s.req.recv_cq, "RECV"))?;
        quiet = landed == 0 && k == 0;
        if let (Some(pacers), true) = (pacers.as_mut(), starved == n && quiet) {
            pacers.rest(clock, 1, &win);
        }
        if progress || k > 0 {
            last_progress = now;
            last_landing = now;
        } else if pacing {
            last_progress = now;
        } else if !stopping {
            // (A drain has its own bound: drain_limit.)
            patience.check_stall(last_progress, now, || {
                format!("echo responses on thread {thread}'s QPs (QP {qpn}…): the server, or the network to it, stopped answering")
            })?;
        }
    }
    // Round trips completed by the end of the window; the drain after it is not counted.
    let per_qp: Vec<u64> = at_end.iter().zip(&base).map(|(d, b)| d - b).collect();
    let elapsed_s = clock.to_ns(stopped_at.saturating_sub(win.opened())) as f64 / 1e9;
    let missed = pacers.as_mut().map(|p| p.missed(stopped_at));
    let validation = match resp_check {
        Some(c) => Some(c.finish()),
        None => s.validate.then(|| check_responses(s, &fl, lossy)),
    };
    Ok(ThreadResult::new(
        thread,
        per_qp,
        elapsed_s,
        tx.posted,
        fl.done.iter().sum(),
        tx.completions,
    )
    .with_counters(counters)
    .with_wakeups(wakeups)
    .with_to_stop(to_stop)
    .with_validation(validation)
    .with_missed(missed))
}

const ECHO_WRITE_HOW: &str = "echo (WRITE responses): each response slot that a round trip reached, against its request slot's pattern (its marker byte excepted), on the client after the loop, at no cost to the figures; the last response of each slot is what is checked (a corrupt one is named by its slot's round trips so far)";
const ECHO_SEND_HOW: &str = "echo (SEND responses): every response, against its request slot's pattern (its marker byte excepted), in the client's loop as its receive completion is polled and before the receive is reposted (each receive of a window has its own buffer); the check is inside the loop, so it costs the client's round-trip rate";

const ECHO_SEND_SEND_HOW: &str = "echo (SEND requests, SEND responses): not checked: the server answers each request from a scratch slot, so a response carries none of its request's bytes; the requests carry the pattern";

/// `--validate` after the loop: each response slot whose round trip came
/// back at least once holds its request's pattern (WRITE responses).
fn check_responses(s: &EchoClientSet, fl: &Flights, lossy: bool) -> Validation {
    if s.resp_verb != EchoVerb::Write {
        let how = match s.req_verb {
            EchoVerb::Write => ECHO_SEND_HOW,
            EchoVerb::Send => ECHO_SEND_SEND_HOW,
        };
        return Validation {
            how: how.into(),
            ..Validation::default()
        };
    }
    let size = s.size as usize;
    let mut c = Checker::new(s.size, ECHO_WRITE_HOW.into(), 0, "echo client");
    if size == 0 {
        return c.finish();
    }
    c = c.skipping(size - 1);
    let w = s.layout.window;
    for q in 0..s.req.qps.len() {
        let qp = (s.first_qp + q) as u32;
        for k in 0..w {
            let at = s.req.offset(q) + s.layout.response(k);
            // A slot given up on (UC/UD) may never have been answered.
            let answered = fl.gen[q * w + k] > 0 && !(lossy && c.is_blank(&s.req.mr, at));
            if answered {
                c.check(&s.req.mr, at, qp, fl.gen[q * w + k], k as u64, 1, 1);
            }
        }
    }
    c.finish()
}

/// `--events` (SEND requests and SEND responses): once a pass has found the
/// request QPs' send and receive CQs both empty (so every completion polled
/// so far raised no event still unseen) and a response is coming, sleeps
/// until either CQ raises an event (`ms` at most: one slice, or less when
/// the window ends sooner, so the window's end, the drain and the stall
/// check still run on time), re-arms that CQ, and lets the pass poll both.
/// Without a channel, does nothing.
fn sleep_for_responses(req: &QpSet, ms: i32) -> Result<()> {
    if let Some(ch) = &req.channel {
        take_event_within(ch, &[&req.send_cq, &req.recv_cq], ms)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Flights;

    /// One QP, `w` slots, each posted at tick 0.
    fn posted(w: usize) -> Flights {
        let mut fl = Flights::new(1, w);
        fl.busy.fill(true);
        fl.in_flight = w;
        fl
    }

    #[test]
    fn a_queue_slower_than_the_loss_timeout_is_not_taken_for_losses() {
        // Answers take 6 ticks to come back, the loss timeout is 4: the
        // first one lands at 6, so the others, still queued at the server
        // at 9, are not given up on until twice that round trip.
        let mut fl = posted(3);
        assert!(fl.land(0, 0, 6));
        fl.abandon_lost(9, 4);
        assert_eq!((fl.abandoned, fl.in_flight), (0, 2));
        assert!(fl.land(0, 1, 9));
        // One that has waited longer than twice the longest round trip (9)
        // is lost.
        fl.abandon_lost(19, 4);
        assert_eq!((fl.abandoned, fl.in_flight), (1, 0));
        // Its marker moved on: a late answer completes nothing.
        assert!(!fl.land(0, 2, 20));
        assert_eq!(fl.done, vec![2]);
    }

    #[test]
    fn with_nothing_landed_the_loss_timeout_alone_decides() {
        let mut fl = posted(2);
        fl.abandon_lost(4, 4);
        assert_eq!(fl.abandoned, 0);
        fl.abandon_lost(5, 4);
        assert_eq!((fl.abandoned, fl.in_flight), (2, 0));
    }
}
