//! The token bucket of a rate-limited issuer QP (`--rate`, `--burst`).
//!
//! Refills land on a fixed grid: refill k is due `k` refill periods after
//! the bucket started, and the number due is computed from the elapsed
//! ticks of the calibrated clock every time, so rounding never accumulates
//! and the offered rate does not drift. The bucket holds at most `cap`
//! tokens (a QP's window): after a stall it catches up by at most one
//! window, so a hiccup cannot turn into a long full-speed burst. The
//! issuer spins on it; nothing here sleeps or calls the OS. `QpPacers` is
//! one issuing thread's buckets, one per QP, shared by the inbound/outbound
//! issuer and the echo client.

use std::time::Duration;

use super::window::PointCtx;

/// One bucket per QP of an issuing thread (`--rate`), each offered its
/// QP's share of the point's rate.
pub struct QpPacers(Vec<Pacer>);

impl QpPacers {
    /// The buckets of a thread with `qps` QPs, started at `now`; `None`
    /// without `--rate`. A refill holds `--burst` WRs, or one post's worth.
    pub fn for_thread(ctx: &PointCtx<'_>, qps: usize, now: u64) -> Option<Self> {
        let (spec, p) = (ctx.spec, ctx.point);
        let r = spec.rate?;
        let ticks_per_s = ctx.clock.ticks(Duration::from_secs(1)) as f64;
        let ops = r.per_qp_ops(p.total_qps());
        let burst = r.burst_for(spec.wrs_per_post(p));
        Some(QpPacers(
            (0..qps)
                .map(|_| Pacer::new(ops, burst, p.window, ticks_per_s, now))
                .collect(),
        ))
    }

    /// Restarts every bucket at `now` (the measured window opens).
    pub fn restart(&mut self, now: u64) {
        for pacer in &mut self.0 {
            pacer.restart(now);
        }
    }

    /// Takes `n` tokens from QP `q`'s bucket if it holds them at `now`.
    #[inline(always)]
    pub fn take(&mut self, q: usize, now: u64, n: u64) -> bool {
        self.0[q].take(now, n)
    }
}

/// One QP's bucket: `burst` tokens (WRs) per refill, `rate` WRs per second.
pub struct Pacer {
    /// Refills per clock tick.
    refills_per_tick: f64,
    burst: u64,
    cap: u64,
    origin: u64,
    /// Refills due so far (counted whether or not they fit).
    refills: u64,
    tokens: u64,
}

impl Pacer {
    /// A bucket for `ops_per_s` WRs per second on a clock of `ticks_per_s`,
    /// started at `now` with one refill in it.
    pub fn new(ops_per_s: f64, burst: u32, cap: u32, ticks_per_s: f64, now: u64) -> Self {
        let burst = u64::from(burst.max(1));
        let ticks_per_refill = burst as f64 * ticks_per_s / ops_per_s;
        Pacer {
            refills_per_tick: 1.0 / ticks_per_refill,
            burst,
            cap: u64::from(cap).max(burst),
            origin: now,
            refills: 0,
            tokens: burst,
        }
    }

    /// Starts the grid again at `now` with one refill in the bucket: the
    /// measured window opens with what the rate gives it, not with tokens
    /// saved up while the warm-up could not keep pace.
    pub fn restart(&mut self, now: u64) {
        self.origin = now;
        self.refills = 0;
        self.tokens = self.burst;
    }

    /// Takes `n` tokens if the bucket holds them at `now`.
    #[inline(always)]
    pub fn take(&mut self, now: u64, n: u64) -> bool {
        if self.tokens < n {
            let due = (now.wrapping_sub(self.origin) as f64 * self.refills_per_tick) as u64;
            if due > self.refills {
                let add = (due - self.refills).saturating_mul(self.burst);
                self.tokens = (self.tokens + add.min(self.cap)).min(self.cap);
                self.refills = due;
            }
            if self.tokens < n {
                return false;
            }
        }
        self.tokens -= n;
        true
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
}
