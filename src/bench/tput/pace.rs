//! The token bucket of a rate-limited issuer QP (`--rate`, `--burst`).
//!
//! Refills land on a fixed grid: refill k is due `k` refill periods after
//! the bucket started, and the number due is computed from the elapsed
//! ticks of the calibrated clock every time, so rounding never accumulates
//! and the offered rate does not drift. The bucket holds at most `cap`
//! tokens (a QP's window): after a stall it catches up by at most one
//! window, so a hiccup cannot turn into a long full-speed burst. `QpPacers`
//! is one issuing thread's buckets, one per QP, shared by the
//! inbound/outbound issuer and the echo client.
//!
//! When every QP of a thread waits for tokens and the first is far off, the
//! thread sleeps (`Doze`) instead of spinning, waking a little early and
//! spinning the rest of the way. A paced issuer therefore uses the CPU its
//! load needs, not a whole core at any rate: its `cpu_util` is the load's
//! cost, and at a low offered load the CPU is free for whatever runs beside
//! it (on soft-RoCE, where the CPU is the NIC, the probe of `--under-load`).
//! The grid is absolute, so waking late costs no tokens: the offered rate
//! is the same, only the spacing of WRs gets coarser by the lateness.
//!
//! What a longer stall costs is counted, not hidden: the record's
//! `rate_missed` is every token the grid gave inside the window that was
//! not posted in it, either forfeited (a refill found the bucket full) or
//! still in the bucket when the window closed. Achieved plus missed is the
//! offered rate, so a shortfall says the issuer fell behind, not that the
//! grid was short.

use std::time::Duration;

use super::window::{PointCtx, ThreadWindow};
use crate::clock::Clock;

/// One bucket per QP of an issuing thread (`--rate`), each offered its
/// QP's share of the point's rate.
pub struct QpPacers {
    buckets: Vec<Pacer>,
    doze: Doze,
}

impl QpPacers {
    /// The buckets of a thread with `qps` QPs, started at `now`; `None`
    /// without `--rate`. A refill holds `--burst` WRs, or one post's worth.
    pub fn for_thread(ctx: &PointCtx<'_>, qps: usize, now: u64) -> Option<Self> {
        let (spec, p) = (ctx.spec, ctx.point);
        let r = spec.rate?;
        let ticks_per_s = ctx.clock.ticks(Duration::from_secs(1)) as f64;
        let ops = r.per_qp_ops(p.total_qps());
        let burst = r.burst_for(spec.wrs_per_post(p));
        crate::sys::tighten_timer_slack();
        Some(QpPacers {
            buckets: (0..qps)
                .map(|_| Pacer::new(ops, burst, p.window, ticks_per_s, now))
                .collect(),
            doze: Doze::new(ctx.clock),
        })
    }

    /// Restarts every bucket at `now` (the measured window opens).
    pub fn restart(&mut self, now: u64) {
        for pacer in &mut self.buckets {
            pacer.restart(now);
        }
    }

    /// Tokens every bucket was given since its (re)start, the refills due
    /// by `now` included (the window closes at `now`), and did not hand out.
    pub fn missed(&mut self, now: u64) -> u64 {
        self.buckets.iter_mut().map(|b| b.missed(now)).sum()
    }

    /// Takes `n` tokens from QP `q`'s bucket if it holds them at `now`.
    #[inline(always)]
    pub fn take(&mut self, q: usize, now: u64, n: u64) -> bool {
        self.buckets[q].take(now, n)
    }

    /// Called when every QP has just been refused `n` tokens: sleeps until
    /// shortly before the first of them holds `n` (or `win`'s timed end),
    /// if that is far enough off to be worth a system call, else returns
    /// at once.
    pub fn rest(&mut self, clock: &Clock, n: u64, win: &ThreadWindow<'_>) {
        let now = clock.now();
        let due = self.buckets.iter().map(|b| b.due(n)).min().unwrap_or(now);
        let wait = due.saturating_sub(now);
        let wait = win.ticks_left(now).map_or(wait, |left| wait.min(left));
        self.doze.rest(clock, now, wait);
    }
}

/// The sleeping half of a paced thread's wait. A sleep is planned to end
/// `margin` before the token is due (the lateness of recent wake-ups, so
/// the thread is usually spinning when the token comes), is never shorter
/// than [`MIN_SLEEP`] (a shorter wait is spun: the system call would cost
/// about as much) and never longer than [`MAX_SLEEP`] (the thread still
/// sees the window's end, intervals and Ctrl-C that often).
pub struct Doze {
    min_sleep: u64,
    max_sleep: u64,
    /// Expected lateness of a wake-up, in ticks (a moving average).
    margin: u64,
    max_margin: u64,
    sleeps: u64,
}

/// The shortest sleep worth a system call.
const MIN_SLEEP: Duration = Duration::from_micros(20);
/// The longest single sleep.
const MAX_SLEEP: Duration = Duration::from_millis(1);
/// The lateness assumed before any wake-up was seen: about what a 2-vCPU
/// qemu guest shows with the timer slack tightened (45-110 µs at the median).
const FIRST_MARGIN: Duration = Duration::from_micros(50);
/// The most lateness a wake-up is believed to have.
const MAX_MARGIN: Duration = Duration::from_micros(200);

impl Doze {
    pub fn new(clock: &Clock) -> Self {
        Doze {
            min_sleep: clock.ticks(MIN_SLEEP),
            max_sleep: clock.ticks(MAX_SLEEP),
            margin: clock.ticks(FIRST_MARGIN),
            max_margin: clock.ticks(MAX_MARGIN),
            sleeps: 0,
        }
    }

    /// How long to sleep when the token is `wait` ticks away (`None`: spin).
    fn plan(&self, wait: u64) -> Option<u64> {
        let sleep = wait.checked_sub(self.margin)?.min(self.max_sleep);
        (sleep >= self.min_sleep).then_some(sleep)
    }

    /// Learns from a sleep of `planned` ticks that lasted `took`.
    fn woke(&mut self, planned: u64, took: u64) {
        // A wake-up later than `max_margin` is a preempted thread (or a
        // stalled guest), not the timer's lateness: it would teach the
        // thread to stop sleeping. An eighth of the news per wake-up.
        let late = took.saturating_sub(planned).min(self.max_margin);
        self.margin = self.margin - self.margin / 8 + late / 8;
        self.sleeps += 1;
    }

    fn rest(&mut self, clock: &Clock, now: u64, wait: u64) {
        if let Some(planned) = self.plan(wait) {
            std::thread::sleep(Duration::from_nanos(clock.to_ns(planned)));
            self.woke(planned, clock.now().wrapping_sub(now));
        }
    }
}

/// One QP's bucket: `burst` tokens (WRs) per refill, `rate` WRs per second.
pub struct Pacer {
    /// Refills per clock tick (what `take` counts with), and its inverse
    /// (what `due` counts with): one float each way is exact enough for
    /// `due` to name the very tick `take` first succeeds at.
    refills_per_tick: f64,
    ticks_per_refill: f64,
    burst: u64,
    cap: u64,
    origin: u64,
    /// Refills due so far (counted whether or not they fit).
    refills: u64,
    tokens: u64,
    /// Tokens refills brought that did not fit in the full bucket.
    forfeited: u64,
}

impl Pacer {
    /// A bucket for `ops_per_s` WRs per second on a clock of `ticks_per_s`,
    /// started at `now` with one refill in it.
    pub fn new(ops_per_s: f64, burst: u32, cap: u32, ticks_per_s: f64, now: u64) -> Self {
        let burst = u64::from(burst.max(1));
        let ticks_per_refill = burst as f64 * ticks_per_s / ops_per_s;
        Pacer {
            refills_per_tick: 1.0 / ticks_per_refill,
            ticks_per_refill,
            burst,
            cap: u64::from(cap).max(burst),
            origin: now,
            refills: 0,
            tokens: burst,
            forfeited: 0,
        }
    }

    /// Starts the grid again at `now` with one refill in the bucket: the
    /// measured window opens with what the rate gives it, not with tokens
    /// saved up while the warm-up could not keep pace.
    pub fn restart(&mut self, now: u64) {
        self.origin = now;
        self.refills = 0;
        self.tokens = self.burst;
        self.forfeited = 0;
    }

    /// Takes `n` tokens if the bucket holds them at `now`.
    #[inline(always)]
    pub fn take(&mut self, now: u64, n: u64) -> bool {
        if self.tokens < n {
            self.refill(now);
            if self.tokens < n {
                return false;
            }
        }
        self.tokens -= n;
        true
    }

    /// Adds the refills due by `now`; what does not fit is forfeited. A
    /// `now` before the origin (read just before a restart) is no refill.
    #[inline(always)]
    fn refill(&mut self, now: u64) {
        let due = (now.saturating_sub(self.origin) as f64 * self.refills_per_tick) as u64;
        if due > self.refills {
            let add = (due - self.refills).saturating_mul(self.burst);
            let room = self.cap - self.tokens;
            self.forfeited = self.forfeited.saturating_add(add.saturating_sub(room));
            self.tokens += add.min(room);
            self.refills = due;
        }
    }

    /// Tokens given since the (re)start, with the refills due by `now`,
    /// and not taken: forfeited, or still in the bucket.
    pub fn missed(&mut self, now: u64) -> u64 {
        self.refill(now);
        self.forfeited + self.tokens
    }

    /// The tick at which the bucket holds `n` tokens (in the past if it
    /// may already: `take` has not counted the refills due since).
    pub fn due(&self, n: u64) -> u64 {
        if self.tokens >= n {
            return self.origin;
        }
        let refill = self.refills + (n - self.tokens).div_ceil(self.burst);
        let mut ticks = (refill as f64 * self.ticks_per_refill).ceil() as u64;
        // The same rounding as `take`'s, which counts in refills per tick.
        while ((ticks as f64 * self.refills_per_tick) as u64) < refill {
            ticks += 1;
        }
        self.origin + ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 GHz clock (1 ns per tick).
    fn pacer(ops: f64, burst: u32, cap: u32) -> Pacer {
        Pacer::new(ops, burst, cap, 1e9, 1_000)
    }

    #[test]
    fn a_greedy_taker_gets_exactly_the_rate() {
        // 1 M WRs/s = one per 1000 ticks, taken one at a time as soon as due.
        let mut p = pacer(1e6, 1, 128);
        let mut taken = 0u64;
        let mut now = 1_000;
        while now < 1_000 + 1_000_000_000 {
            while p.take(now, 1) {
                taken += 1;
            }
            now += 37; // an odd poll period must not bias the count
        }
        // One second: 1e6 refills plus the initial token.
        assert!((taken as i64 - 1_000_001).abs() <= 1, "{taken}");
    }

    #[test]
    fn a_restart_drops_saved_tokens_and_keeps_the_rate() {
        let mut p = pacer(1e6, 1, 128);
        // Nothing taken for 1 ms: the bucket is full (128).
        p.restart(1_000_000);
        assert!(p.take(1_000_000, 1));
        assert!(
            !p.take(1_000_000 + 999, 1),
            "only one refill at the restart"
        );
        assert!(p.take(1_000_000 + 1_000, 1));
    }

    #[test]
    fn bursts_refill_in_groups() {
        let mut p = pacer(1e6, 8, 128);
        assert!(p.take(1_000, 8));
        assert!(
            !p.take(1_000 + 7_999, 1),
            "the next 8 land after 8000 ticks"
        );
        assert!(p.take(1_000 + 8_000, 8));
    }

    #[test]
    fn due_is_when_take_first_succeeds() {
        for (ops, burst, n) in [(1e6, 1, 1), (3e5, 8, 8), (7e4, 4, 2), (1e6, 16, 32)] {
            let mut p = pacer(ops, burst, 128);
            let mut now = 1_000;
            for _ in 0..50 {
                while p.take(now, n) {}
                let due = p.due(n);
                assert!(due > now, "{ops} {burst} {n}: due {due} at {now}");
                assert!(
                    !p.take(due - 1, n),
                    "{ops} {burst} {n}: early at {}",
                    due - 1
                );
                assert!(p.take(due, n), "{ops} {burst} {n}: not at {due}");
                now = due;
            }
        }
    }

    #[test]
    fn a_doze_spins_short_waits_and_wakes_before_the_token() {
        // In ns: spin below 20 µs, at most 1 ms, 20 µs early at first,
        // lateness believed up to 200 µs.
        let mut d = Doze {
            min_sleep: 20_000,
            max_sleep: 1_000_000,
            margin: 20_000,
            max_margin: 200_000,
            sleeps: 0,
        };
        assert_eq!(d.plan(30_000), None, "10 µs of sleep is not worth it");
        assert_eq!(d.plan(100_000), Some(80_000));
        assert_eq!(d.plan(50_000_000), Some(1_000_000), "capped");
        // Wake-ups 60 µs late, again and again: the margin converges to that.
        for _ in 0..100 {
            d.woke(80_000, 140_000);
        }
        assert!((59_000..=60_000).contains(&d.margin), "{}", d.margin);
        assert_eq!(d.plan(70_000), None);
        assert_eq!(d.plan(200_000), Some(200_000 - d.margin));
        assert_eq!(d.sleeps, 100);
        // A stalled wake-up (8 ms late) moves the margin by at most an
        // eighth of the cap, and the thread keeps sleeping.
        d.woke(80_000, 8_080_000);
        assert!(d.margin <= 60_000 + 25_000, "{}", d.margin);
        assert!(d.plan(300_000).is_some());
    }

    #[test]
    fn a_stall_catches_up_by_at_most_the_cap() {
        let mut p = pacer(1e6, 1, 16);
        assert!(p.take(1_000, 1));
        // 1 ms stalled: 1000 refills were due, the bucket holds 16.
        let later = 1_000 + 1_000_000;
        let mut got = 0;
        while p.take(later, 1) {
            got += 1;
        }
        assert_eq!(got, 16);
        // After that, the grid continues from where it was (no drift).
        assert!(p.take(later + 1_000, 1));
    }

    #[test]
    fn what_a_stall_cannot_catch_up_is_counted_as_missed() {
        // One token per 1000 ticks, a bucket of 16, emptied at the start.
        let mut p = pacer(1e6, 1, 16);
        assert!(p.take(1_000, 1));
        // 1 ms and half a refill later: 1000 refills due, 16 fit.
        let later = 1_000 + 1_000_000 + 500;
        assert_eq!(p.missed(later), 1000, "984 forfeited, 16 held");
        while p.take(later, 1) {}
        assert_eq!(p.missed(later), 1000 - 16);
        // The next refill lands in an empty bucket: nothing more is lost.
        assert!(p.take(later + 1_000, 1));
        assert_eq!(p.missed(later + 1_000), 1000 - 16);
    }

    #[test]
    fn a_taker_that_keeps_up_misses_nothing() {
        // Four tokens per 4000 ticks, taken at least every 1500.
        let mut p = pacer(1e6, 4, 64);
        let mut now = 1_000;
        while now < 1_000 + 10_000_000 {
            while p.take(now, 4) {}
            now += 1_500;
        }
        while p.take(now, 1) {}
        assert_eq!(p.missed(now), 0);
        // Then nothing is taken for 10 ms: 2500 refills (10 000 tokens)
        // are due, of which 64 fit in the emptied bucket: all are missed.
        assert_eq!(p.missed(now + 10_000_000), 10_000);
        while p.take(now + 10_000_000, 1) {}
        assert_eq!(p.missed(now + 10_000_000), 10_000 - 64);
        // A restart (the window opening) forgets what was missed before it,
        // and holds one refill; a clock read just before it adds none.
        p.restart(now + 10_000_000);
        assert_eq!(p.missed(now + 10_000_000), 4);
        assert!(p.take(now + 9_999_000, 4));
        assert!(!p.take(now + 9_999_000, 1));
        assert_eq!(p.missed(now + 9_999_000), 0);
    }
}
