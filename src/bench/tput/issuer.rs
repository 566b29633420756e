//! The issuing side of inbound and outbound points: per thread, a set of QPs
//! each kept `window` WRs deep, `postlist` WRs per doorbell, one in
//! `signal_period` signaled.

use std::sync::Barrier;

use crate::abort::aborted;
use crate::error::{Error, Result};
use crate::report::{DriverReport, ToStop, Validation};
use crate::spec::{AtomicOp, VerbKind};
use crate::verbs::{Endpoint, SendList, UD_QKEY};

use super::super::ops::{atomic_operands, posts_inline, send_op, test_fault, wc_label, Fault};
use super::super::pattern;
use super::super::port::Port;
use super::super::qpset::{slot_bytes, QpSet, QpShape};
use super::super::slots::{self, RemoteSlots};
use super::super::wait::{arm_all, take_event_within, Patience, EVENT_SLICE_MS};
use super::completions::{SendTracker, WrId};
use super::pace::QpPacers;
use super::threads::{run_threads, ThreadResult};
use super::validate::{self, Checker};
use super::window::{PointCtx, ThreadWindow, WithinPass};

/// One issuing thread's QPs and the postlist each posts.
pub struct IssuerSet {
    pub set: QpSet,
    /// Per QP: its prebuilt postlists (built once connected), `ring` of
    /// them in a row (QP q's are `lists[q * ring..][..ring]`).
    lists: Vec<SendList>,
    /// Per QP: the remote address of each WR (`--region`/`--offsets`).
    slots: Vec<RemoteSlots>,
    /// Prebuilt postlists per QP: 1, or under `--validate` a ring of them,
    /// each WR with its own source slot (`validate::ring_slots`).
    ring: usize,
    /// The run-wide index of this set's first QP (the pattern's QP number).
    first_qp: u32,
}

impl IssuerSet {
    pub fn new(port: &Port, shape: &QpShape) -> Result<Self> {
        Ok(IssuerSet {
            set: QpSet::new(port, shape)?,
            lists: Vec::new(),
            slots: Vec::new(),
            ring: 1,
            first_qp: 0,
        })
    }

    /// Connects QP i to `remotes[i]` and builds its postlist; `first_qp`
    /// is the run-wide index of QP 0 (threads before this one hold the rest).
    pub fn connect(
        &mut self,
        remotes: &[Endpoint],
        ctx: &PointCtx<'_>,
        first_qp: u32,
    ) -> Result<()> {
        self.set.connect(remotes)?;
        let (spec, p) = (ctx.spec, ctx.point);
        let pl = p.postlist as usize;
        let write = spec.verb == VerbKind::Write;
        let slot = slot_bytes(p.size);
        // Without --validate one postlist per QP, whatever its length; under
        // it, ring_slots (a whole number of postlists) source slots.
        self.ring = if spec.validate {
            validate::ring_slots(p) / pl
        } else {
            1
        };
        self.first_qp = first_qp;
        for q in 0..remotes.len() {
            let (mr, at) = (self.set.mr_of(q), self.set.offset(q));
            if spec.validate && p.size > 0 {
                // WRITE/SEND: source slot k carries the pattern of sequence
                // k; READ: landing slots start zeroed, so one no READ
                // reached is told apart (atomics land 8 bytes, not checked here).
                let qp = first_qp + q as u32;
                for k in 0..self.ring * pl {
                    match spec.verb {
                        VerbKind::Write | VerbKind::Send => {
                            pattern::fill_region(mr, at + k * slot, p.size as usize, qp, k as u64)
                        }
                        _ => mr.fill(at + k * slot, p.size as usize, 0),
                    }
                }
            } else if write && p.size > 0 {
                // A payload no zeroed region holds, so the target's memory shows
                // which of its slots WRITEs reached.
                mr.fill(at, p.size as usize, PAYLOAD);
            }
        }
        self.slots = remotes
            .iter()
            .enumerate()
            .map(|(q, r)| {
                RemoteSlots::new(spec.memory.offsets, r.addr, r.len, p.size, slots::seed(q))
            })
            .collect();
        // Decided once per point: every WR of it is inlined or none is.
        let inline = posts_inline(
            spec.verb,
            spec.inline,
            p.size,
            self.set.qps.first().map_or(0, |q| q.max_inline()),
        );
        let spoil = test_fault(Fault::SendLkey);
        let ring = self.ring;
        self.lists = remotes
            .iter()
            .enumerate()
            .flat_map(|(q, remote)| (0..ring).map(move |r| (q, r, remote)))
            .map(|(q, r, remote)| {
                let sge = spec.sge as usize;
                let mut list = SendList::with_sges(pl, sge);
                for j in 0..pl {
                    let op = send_op(spec.verb, spec.op, spec.imm, remote.addr, remote.rkey);
                    let mr = self.set.mr_of(q);
                    // Under --validate each WR has its own source slot;
                    // without it every WR posts the QP's one payload.
                    let own = if spec.validate { r * pl + j } else { 0 };
                    let at = self.set.offset(q) + own * slot;
                    list.set_split(j, op, mr, at, p.size, sge);
                    list.set_inline(j, inline);
                    if let Some(ah) = &self.set.ahs[q] {
                        list.set_ud_dest(j, ah, remote.qpn, UD_QKEY);
                    }
                }
                if spoil {
                    list.spoil_lkeys();
                }
                list
            })
            .collect();
        Ok(())
    }
}

/// The byte every WRITE payload is made of.
pub const PAYLOAD: u8 = 0xA5;

/// Gives WR `j` of QP `q`'s postlist its sequence number `seq`, its
/// signaled flag and (chained CAS) the operands of the `seq`-th CAS.
#[inline(always)]
fn stamp(list: &mut SendList, j: usize, q: usize, seq: u64, signaled: bool, chain_cas: bool) {
    list.set_signaled(j, signaled);
    list.set_wr_id(j, WrId::pack(q, seq));
    if chain_cas {
        let (compare, swap) = atomic_operands(seq - 1);
        list.set_compare_swap(j, compare, swap);
    }
}

/// Runs the issuing threads of a point; returns what they measured.
pub fn run_issuer(sets: &mut [IssuerSet], ctx: &PointCtx<'_>) -> Result<DriverReport> {
    // The loop variant is chosen here, outside it: only under --validate
    // does a post pick its postlist from a ring.
    run_threads(sets, ctx.side, |t, set, barrier| match set.ring {
        1 => issue_thread::<false>(t, set, ctx, barrier),
        _ => issue_thread::<true>(t, set, ctx, barrier),
    })
}

/// `RING`: each QP posts from a ring of `s.ring` postlists in turn.
fn issue_thread<const RING: bool>(
    thread: u32,
    s: &mut IssuerSet,
    ctx: &PointCtx<'_>,
    barrier: &Barrier,
) -> Result<ThreadResult> {
    let (spec, p, clock, window) = (ctx.spec, ctx.point, ctx.clock, ctx.window);
    let IssuerSet {
        set,
        lists,
        slots,
        ring,
        first_qp,
    } = s;
    let ring = *ring;
    // The postlist QP q posts next (its turn in the ring under --validate).
    let list_of = |q: usize, posted: u64| match RING {
        true => q * ring + (posted / u64::from(p.postlist)) as usize % ring,
        false => q,
    };
    let moving = slots.iter().any(|s| s.moves());
    let n = set.qps.len();
    let pl = p.postlist as u64;
    let (sp, w) = (p.effective_signal_period() as u64, p.window as u64);
    let mut tx = SendTracker::new(n);
    let mut last_signaled = vec![0u64; n];
    let mut base = vec![0u64; n];
    // --forever: what each QP had posted at the last published interval.
    let mut kept = vec![0u64; n];
    let verb = wc_label(spec.verb, spec.op);
    // Each CAS finds the value the previous one on its QP left (WRs of one
    // QP execute in order), so the word really moves and its final value
    // counts the CASes that succeeded.
    let chain_cas = spec.op == Some(AtomicOp::Cas);
    let patience = Patience::new(*clock, spec.timeout_s);
    let qpn = set.qps[0].qpn();
    // An --iters run posts whole postlists: round the count up to one.
    let limit = window
        .iters
        .map(|n| n.div_ceil(pl) * pl)
        .unwrap_or(u64::MAX);
    // --events: the send CQ stays armed from here on (re-armed after every
    // event taken), so a completion that lands while every window is full
    // always raises an event to sleep on.
    let woken = || set.channel.as_ref().map(|c| c.events_taken());
    if set.channel.is_some() {
        arm_all(&[&set.send_cq])?;
    }

    barrier.wait();
    let mut win = ctx.thread_window(thread);
    let mut woken_before = woken();
    let t0 = win.opened();
    // --rate: one token bucket per QP, started now (the warm-up is paced too).
    let mut pacers = QpPacers::for_thread(ctx, n, t0);
    // Under a hold, the window ends when the hold is released (the
    // duration is only the floor of a free-running window).
    let mut open = spec.warmup_s == 0.0 || window.iters.is_some();
    if let (Some(h), true) = (ctx.hold, open) {
        h.opened();
    }
    let mut last_progress = t0;
    // Whether the window is over at `t` (a timed or a held one; an --iters
    // run ends on its completions, which only the pass's head looks at).
    let over = |win: &ThreadWindow<'_>, open: bool, t: u64| match (window.iters, ctx.hold) {
        (Some(_), _) => false,
        (None, Some(h)) => open && !h.held(),
        (None, None) => win.over(t),
    };
    // What only the pass's head does: close the window, or mark an
    // --interval boundary (so intervals are as long as asked at any -q).
    let head_due =
        |win: &ThreadWindow<'_>, open: bool, t: u64| over(win, open, t) || win.interval_due(t);
    // One pass over thousands of QPs outlasts a tenth of a short window
    // (1024 QPs under TCG: 45-100 ms), so the pass also reads the clock every
    // few posts and, once the window is over, goes straight back to the head,
    // which closes it: every WR counted was posted before `closed_at`.
    let mut within = WithinPass::default();
    let closed_at = 'pass: loop {
        if aborted() {
            return Err(Error::Interrupted);
        }
        let now = clock.now();
        if win.interval_due(now) {
            let ops = tx.posted.iter().sum::<u64>() - base.iter().sum::<u64>();
            if win.mark_interval(now, ops) {
                kept.copy_from_slice(&tx.posted);
            }
        }
        let done = match window.iters {
            None => over(&win, open, now),
            Some(_) => tx.completed.iter().all(|&c| c >= limit),
        };
        if done {
            break now;
        }
        // (The warm-up ends at a pass's head only, so the window opens
        // after the first pass has filled every QP.)
        if win.opens(now) {
            base.copy_from_slice(&tx.posted);
            kept.copy_from_slice(&tx.posted);
            woken_before = woken();
            open = true;
            if let Some(pacers) = pacers.as_mut() {
                pacers.restart(win.opened());
            }
            if let Some(h) = ctx.hold {
                h.opened();
            }
        }
        let (mut progress, mut pacing) = (false, false);
        // QPs refused tokens this pass: when that is all of them, the
        // thread may sleep until the first token is due.
        let mut starved = 0;
        for q in 0..n {
            // Fill this QP's window (as perftest does), as far as its
            // tokens allow, then poll once.
            loop {
                let out = tx.outstanding(q);
                if out + pl > w || tx.posted[q] >= limit {
                    break;
                }
                if within.due() && head_due(&win, open, clock.now()) {
                    continue 'pass;
                }
                if let Some(pacers) = pacers.as_mut() {
                    if !pacers.take(q, now, pl) {
                        // Waiting for tokens is not a stalled peer.
                        progress = true;
                        pacing = true;
                        starved += 1;
                        break;
                    }
                }
                let list = &mut lists[list_of(q, tx.posted[q])];
                for j in 0..pl {
                    let seq = tx.posted[q] + j + 1;
                    // Signal every S-th WR, the last WR of an --iters run, and the
                    // WR after which the window would be full -- but only if the
                    // newest signaled WR, once complete, would not free room for
                    // another postlist (else the window could stall).
                    let last_of_batch = j + 1 == pl;
                    let after = tx.posted[q] + pl;
                    let signaled = seq % sp == 0
                        || seq == limit
                        || (last_of_batch && out + 2 * pl > w && after - last_signaled[q] > w - pl);
                    if signaled {
                        last_signaled[q] = seq;
                    }
                    stamp(list, j as usize, q, seq, signaled, chain_cas);
                    if moving {
                        list.set_remote_addr(j as usize, slots[q].next_addr());
                    }
                }
                set.qps[q].post_send(list)?;
                tx.posted[q] += pl;
                progress = true;
            }
        }
        // --events, in perftest's -e order: after posting, while a signaled
        // WR is outstanding (so a completion, and with it an event, is
        // coming) and no QP waits for --rate tokens, take an event from the
        // armed send CQ's channel (sleeping until one is raised, or one
        // slice, or until a timed window's end, so the stall check and the
        // window's end still run on time), re-arm,
        // and poll the CQ empty: a completion that lands after the re-arm
        // raises the next event. An event raised by completions already
        // polled is taken at once (a wake-up that did not sleep).
        let sleep =
            set.channel.is_some() && !pacing && (0..n).any(|q| last_signaled[q] > tx.completed[q]);
        let k = match (&set.channel, sleep) {
            (Some(ch), true) => {
                let ms = win.sleep_ms(clock.now(), EVENT_SLICE_MS);
                take_event_within(ch, &[&set.send_cq], ms)?;
                let mut k = 0;
                loop {
                    let j = tx.reap(&set.send_cq, verb)?;
                    if j == 0 {
                        break k;
                    }
                    k += j;
                }
            }
            _ => tx.reap(&set.send_cq, verb)?,
        };
        if let (Some(pacers), true) = (pacers.as_mut(), starved == n && k == 0) {
            pacers.rest(clock, pl, &win);
        }
        if k > 0 || progress {
            last_progress = now;
        } else {
            patience.check_stall(last_progress, now, || {
                format!("any completion on thread {thread}'s QPs (QP {qpn}…): the peer, or the network to it, stopped answering")
            })?;
        }
    };
    // Ops are the WRs posted in the window. In steady state every post
    // follows the completion that freed its room, so this is the completion
    // rate over exactly the requested time; WRs still in flight at its end
    // (thousands of QPs hold many) are drained below, outside the window.
    // An --iters run's window ends when its last WR has completed.
    let counters = win.close();
    let missed = pacers.as_mut().map(|p| p.missed(closed_at));
    let wakeups = woken().zip(woken_before).map(|(now, before)| now - before);
    let mut per_qp: Vec<u64> = tx.posted.iter().zip(&base).map(|(p, b)| p - b).collect();
    let mut closed_at = closed_at;
    // --forever: the window kept ends at the last whole interval; the
    // counters and CPU times above cover it up to the stop.
    let mut to_stop = None;
    if let Some((at, _)) = win.kept() {
        to_stop = Some(ToStop {
            window_s: counters.window_s,
            ops: per_qp.iter().sum(),
        });
        per_qp = kept.iter().zip(&base).map(|(k, b)| k - b).collect();
        closed_at = at;
    }
    // Make the last WR of every QP signaled, so everything posted retires.
    // The signaled postlist waits for room in its QP's window like every
    // post (the send queue holds the window and no more): the newest
    // signaled WR, once complete, frees room for a postlist (see `signaled`).
    let mut unsignaled_tail: Vec<bool> = (0..n)
        .map(|q| window.iters.is_none() && last_signaled[q] < tx.posted[q])
        .collect();
    patience.wait(
        || format!("room for the last signaled WR on thread {thread}'s QPs (QP {qpn}…)"),
        || {
            tx.reap(&set.send_cq, verb)?;
            for q in 0..n {
                if unsignaled_tail[q] && tx.outstanding(q) + pl <= w {
                    let list = &mut lists[list_of(q, tx.posted[q])];
                    for j in 0..pl {
                        let seq = tx.posted[q] + j + 1;
                        stamp(list, j as usize, q, seq, j + 1 == pl, chain_cas);
                    }
                    set.qps[q].post_send(list)?;
                    tx.posted[q] += pl;
                    unsignaled_tail[q] = false;
                }
            }
            Ok((!unsignaled_tail.contains(&true)).then_some(()))
        },
    )?;
    // Everything posted retires, so the target has seen it all before counts are compared.
    let all = tx.posted.clone();
    patience.wait(
        || format!("the last completions of thread {thread} (QP {qpn}…)"),
        || {
            tx.reap(&set.send_cq, verb)?;
            Ok(tx.reached(&all).then_some(()))
        },
    )?;
    let elapsed_s = clock.to_ns(closed_at.wrapping_sub(win.opened())) as f64 / 1e9;
    // READ under --validate: the landing slots, checked after every WR has
    // completed (outside the window).
    let validation = (RING && spec.verb == VerbKind::Read)
        .then(|| check_read_back(set, *first_qp, p.size, ring * pl as usize, &tx.posted));
    Ok(
        ThreadResult::new(thread, per_qp, elapsed_s, tx.posted, 0, tx.completions)
            .with_counters(counters)
            .with_wakeups(wakeups)
            .with_to_stop(to_stop)
            .with_validation(validation)
            .with_missed(missed),
    )
}

/// What `validation.how` says of a READ point.
pub const READ_HOW: &str = "READ: the issuer's landing slots (one per WR of its ring) checked against the target's pattern once every WR completed, outside the window (one check per slot, the last READ into it)";

/// READ under `--validate`: every landing slot a READ reached must hold the
/// target's pattern for its QP (sequence 0: the target's memory does not
/// change). Each slot is reported as the last WR that landed in it.
fn check_read_back(
    set: &QpSet,
    first_qp: u32,
    size: u32,
    slots: usize,
    posted: &[u64],
) -> Validation {
    let mut c = Checker::new(size, READ_HOW.into(), 0, "issuer");
    if size == 0 {
        return c.finish();
    }
    let stride = slot_bytes(size);
    for (q, &sent) in posted.iter().enumerate() {
        let qp = first_qp + q as u32;
        for k in 0..slots {
            let wr = validate::last_wr_of_slot(sent, slots, k as u64);
            if wr > 0 {
                let at = set.offset(q) + k * stride;
                c.check(set.mr_of(q), at, qp, wr, 0, 1, 1);
            }
        }
    }
    c.finish()
}
