//! A cheap nanosecond clock for the measured loops.
//!
//! Where the CPU has an invariant TSC, timestamps are raw `rdtsc` reads
//! (about 20 cycles, no syscall, no vDSO page) converted to nanoseconds with
//! a factor calibrated against `CLOCK_MONOTONIC` at start-up. Elsewhere it
//! falls back to `Instant` (vDSO `clock_gettime`). Either way a timestamp is an
//! opaque tick count; only differences converted with `to_ns` mean anything.

use std::time::{Duration, Instant};

use crate::sys::{invariant_tsc, rdtsc};

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    source: Source,
    /// Nanoseconds per tick.
    ns_per_tick: f64,
    epoch: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Tsc,
    Monotonic,
}

impl Clock {
    /// Calibrates the TSC over `window` (20 ms is plenty for ppm accuracy).
    pub fn calibrate(window: Duration) -> Clock {
        let epoch = Instant::now();
        if !invariant_tsc() && !kernel_trusts_tsc() {
            return Clock {
                source: Source::Monotonic,
                ns_per_tick: 1.0,
                epoch,
            };
        }
        let (t0, c0) = (Instant::now(), rdtsc());
        while t0.elapsed() < window {
            std::hint::spin_loop();
        }
        let (c1, t1) = (rdtsc(), Instant::now());
        let ns = (t1 - t0).as_nanos() as f64;
        let ticks = c1.wrapping_sub(c0) as f64;
        if ticks <= 0.0 || ns <= 0.0 {
            return Clock {
                source: Source::Monotonic,
                ns_per_tick: 1.0,
                epoch,
            };
        }
        Clock {
            source: Source::Tsc,
            ns_per_tick: ns / ticks,
            epoch,
        }
    }

    /// Reads the clock (ticks).
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.source {
            Source::Tsc => rdtsc(),
            Source::Monotonic => self.epoch.elapsed().as_nanos() as u64,
        }
    }

    #[inline(always)]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick) as u64
    }

    /// Ticks in `d`, for deadlines compared against `now()` without converting.
    pub fn ticks(&self, d: Duration) -> u64 {
        (d.as_nanos() as f64 / self.ns_per_tick) as u64
    }

    /// What the output says the clock is.
    pub fn describe(&self) -> String {
        match self.source {
            Source::Tsc => format!(
                "TSC, {:.3} GHz (calibrated against CLOCK_MONOTONIC)",
                1.0 / self.ns_per_tick
            ),
            Source::Monotonic => "CLOCK_MONOTONIC".to_string(),
        }
    }
}

/// The kernel keeps time with the TSC only after checking it is stable and
/// synchronised (or when told so, as the soft-RoCE guest is): good enough
/// for us too, where CPUID does not advertise an invariant TSC.
fn kernel_trusts_tsc() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_measures_a_sleep_within_reason() {
        let c = Clock::calibrate(Duration::from_millis(10));
        let t0 = c.now();
        std::thread::sleep(Duration::from_millis(20));
        let ns = c.to_ns(c.now().wrapping_sub(t0));
        // A sleep lasts at least what was asked; an unloaded-or-not machine
        // will not stretch 20 ms to 2 s. This checks the unit, not the speed.
        assert!(ns >= 19_000_000, "{ns} ns");
        assert!(ns < 2_000_000_000, "{ns} ns");
        assert!(c.ticks(Duration::from_millis(1)) > 0);
    }
}
