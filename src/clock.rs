//! A cheap nanosecond clock for the measured loops.
//!
//! Where the CPU has a cycle counter (the TSC on x86_64, `cntvct_el0` on
//! aarch64), timestamps are raw counter reads (tens of cycles, no syscall, no
//! vDSO page) converted to nanoseconds with a rate calibrated against
//! `CLOCK_MONOTONIC` at start-up. The counter is used whatever clocksource the
//! kernel chose: a kernel that keeps time with the HPET (a VM whose CPU does
//! not advertise an invariant TSC) makes every `clock_gettime` cost
//! microseconds, while the TSC still ticks steadily, and calibration checks
//! that it does. Only where there is no counter does the clock fall back to
//! `Instant` (vDSO `clock_gettime`). Either way a timestamp is an opaque tick
//! count; only differences converted with `to_ns` mean anything.
//!
//! Calibration: several windows, each bounded at both edges by a paired read
//! (counter, `Instant`, counter, repeated, keeping the tightest pair), give
//! one rate each; the clock uses their median and records their spread. A
//! spread above [`MAX_SPREAD_PPM`] or a rate outside the plausible range is
//! retried (a preemption inside a pair can spoil one attempt) and then
//! refused. The calling thread runs pinned to one CPU while it calibrates.
//! The counter is assumed to tick at that rate on every CPU (true of any
//! x86_64 CPU with an invariant TSC and of the aarch64 generic timer).

use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sys;

/// Calibration windows per attempt.
const WINDOWS: usize = 5;
/// Paired reads per window edge; the tightest one is kept.
const PAIR_TRIES: usize = 9;
/// Attempts before calibration gives up.
const ATTEMPTS: usize = 3;
/// The largest spread between windows' rates that counts as steady.
pub const MAX_SPREAD_PPM: f64 = 1000.0;
/// A window lasts at least this many times one `Instant` read, so the
/// uncertainty of its edges stays far below the spread limit (the HPET makes
/// a read cost microseconds).
const WINDOW_PER_READ_COST: u32 = 20_000;
/// The longest a window may be stretched to for that.
const MAX_WINDOW: Duration = Duration::from_millis(200);
/// Plausible rates: an x86 TSC runs at 0.2–10 GHz; the aarch64 generic
/// timer at 1 MHz (older parts run it at tens of MHz) to 10 GHz.
const TSC_GHZ: RangeInclusive<f64> = 0.2..=10.0;
const CNTVCT_GHZ: RangeInclusive<f64> = 0.001..=10.0;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    source: Source,
    /// Nanoseconds per tick.
    ns_per_tick: f64,
    epoch: Instant,
    /// Cost of one `now()` in ns, measured at start-up.
    read_ns: f64,
    calibration_spread_ppm: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The CPU's cycle counter (`sys::COUNTER` names it).
    Counter,
    Monotonic,
}

/// Calibration refused the counter; the message names what was seen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("clock calibration failed: {0}")]
pub struct ClockError(pub String);

/// What the results file says about the clock (`clock` in schema 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct ClockInfo {
    /// `tsc`, `cntvct` or `monotonic`.
    pub source: String,
    /// The counter's calibrated rate; `None` for `monotonic`.
    pub ghz: Option<f64>,
    /// Cost of one timestamp read in ns (median, measured at start-up); 0 in
    /// files written before schema 2, which did not measure it.
    pub read_ns: f64,
    /// The kernel's clocksource (sysfs), where it says.
    pub kernel_clocksource: Option<String>,
    /// Spread of the calibration windows' rates ((max − min) / median).
    pub calibration_spread_ppm: Option<f64>,
}

impl Clock {
    /// Chooses and calibrates the clock: the CPU's counter where there is
    /// one, over `WINDOWS` windows of at least `window` each (10 ms gives
    /// ppm accuracy), else `CLOCK_MONOTONIC`. Errs when the counter's rate is
    /// implausible or unsteady in every attempt.
    pub fn calibrate(window: Duration) -> Result<Clock, ClockError> {
        let epoch = Instant::now();
        let mut clock = match sys::COUNTER {
            None => Clock {
                source: Source::Monotonic,
                ns_per_tick: 1.0,
                epoch,
                read_ns: 0.0,
                calibration_spread_ppm: None,
            },
            Some(name) => {
                let (ns_per_tick, spread) = pinned_to_one_cpu(|| calibrate_counter(name, window))?;
                Clock {
                    source: Source::Counter,
                    ns_per_tick,
                    epoch,
                    read_ns: 0.0,
                    calibration_spread_ppm: Some(spread),
                }
            }
        };
        clock.read_ns = clock.measure_read_ns();
        Ok(clock)
    }

    /// Reads the clock (ticks). On the counter path this is one instruction.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.source {
            Source::Counter => sys::counter(),
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

    /// Cost of one `now()` in ns, as measured at start-up.
    pub fn read_ns(&self) -> f64 {
        self.read_ns
    }

    /// What the results file records about this clock.
    pub fn info(&self) -> ClockInfo {
        let counter = self.source == Source::Counter;
        ClockInfo {
            source: match (self.source, sys::COUNTER) {
                (Source::Counter, Some(name)) => name.to_string(),
                _ => "monotonic".to_string(),
            },
            ghz: counter.then(|| 1.0 / self.ns_per_tick),
            read_ns: self.read_ns,
            kernel_clocksource: std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
            calibration_spread_ppm: self.calibration_spread_ppm,
        }
    }

    /// Median cost of one `now()`: batches of back-to-back reads, timed by
    /// the clock itself.
    fn measure_read_ns(&self) -> f64 {
        const BATCH: u64 = 64;
        const SAMPLES: usize = 101;
        let mut per_read: Vec<f64> = (0..SAMPLES)
            .map(|_| {
                let t0 = self.now();
                for _ in 0..BATCH {
                    std::hint::black_box(self.now());
                }
                let t1 = self.now();
                // BATCH reads in between plus the closing one.
                t1.wrapping_sub(t0) as f64 * self.ns_per_tick / (BATCH + 1) as f64
            })
            .collect();
        median(&mut per_read)
    }
}

impl ClockInfo {
    /// A file written before schema 2 recorded the clock as a sentence:
    /// `TSC, 2.100 GHz (calibrated against CLOCK_MONOTONIC)` or
    /// `CLOCK_MONOTONIC`. Keeps what it says (source and rate); the rest is
    /// unknown.
    pub fn from_legacy(s: &str) -> ClockInfo {
        let t = s.trim();
        let source = if t.starts_with("TSC") {
            "tsc".to_string()
        } else if t.starts_with("CLOCK_MONOTONIC") {
            "monotonic".to_string()
        } else {
            t.to_string()
        };
        // "<source>, <rate> GHz (...)": the two words after the comma.
        let ghz = t.split_once(',').and_then(|(_, rest)| {
            let mut words = rest.split_whitespace();
            match (words.next(), words.next()) {
                (Some(num), Some("GHz")) => num.parse::<f64>().ok(),
                _ => None,
            }
        });
        ClockInfo {
            source,
            ghz,
            ..ClockInfo::default()
        }
    }

    /// A one-line warning for the latency table when the clock is
    /// `CLOCK_MONOTONIC` (no counter here) and one read costs more than 1%
    /// of the smallest latency measured: every sample then carries it.
    pub fn warning(&self, min_latency_ns: f64) -> Option<String> {
        (self.source == "monotonic" && min_latency_ns > 0.0 && self.read_ns > 0.01 * min_latency_ns)
            .then(|| {
                format!(
                    "the only clock here is CLOCK_MONOTONIC and one read costs {:.0} ns, {:.1}% of the smallest latency ({:.2} us); every sample includes it",
                    self.read_ns,
                    100.0 * self.read_ns / min_latency_ns,
                    min_latency_ns / 1000.0
                )
            })
    }
}

impl std::fmt::Display for ClockInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(ghz) = self.ghz {
            write!(f, " {ghz:.3} GHz")?;
        }
        if let Some(ppm) = self.calibration_spread_ppm {
            write!(f, " (calibration spread {ppm:.0} ppm)")?;
        }
        if self.read_ns > 0.0 {
            write!(f, ", {:.1} ns per read", self.read_ns)?;
        }
        if let Some(k) = &self.kernel_clocksource {
            write!(f, ", kernel clocksource {k}")?;
        }
        Ok(())
    }
}

/// Runs `f` with the calling thread pinned to the CPU it is on (so every
/// window reads one CPU's counter), then restores the thread's CPU mask.
/// Where pinning is refused, `f` runs unpinned.
fn pinned_to_one_cpu<T>(f: impl FnOnce() -> T) -> T {
    let before = sys::allowed_cpus();
    let cpu = sys::current_cpu()
        .filter(|c| before.contains(c))
        .or_else(|| before.first().copied());
    let pinned = cpu.is_some_and(|c| sys::pin_current_thread(c).is_ok());
    let out = f();
    if pinned {
        // Best effort: the mask we read is the one the kernel gave us.
        let _ = sys::set_thread_cpus(&before);
    }
    out
}

/// One paired read: the counter before and after an `Instant` read. The
/// instant lies between the two counter values; the tightest of several
/// tries bounds where.
#[derive(Debug, Clone, Copy)]
struct Pair {
    at: Instant,
    before: u64,
    width: u64,
}

fn paired_read() -> Pair {
    let mut best: Option<Pair> = None;
    for _ in 0..PAIR_TRIES {
        let before = sys::counter();
        let at = Instant::now();
        let after = sys::counter();
        let width = after.wrapping_sub(before);
        if !best.is_some_and(|b| b.width <= width) {
            best = Some(Pair { at, before, width });
        }
    }
    best.expect("PAIR_TRIES > 0")
}

/// The ticks and nanoseconds between two paired reads (midpoint to midpoint).
fn between(a: Pair, b: Pair) -> (f64, f64) {
    let ticks = b.before.wrapping_sub(a.before) as f64 + (b.width as f64 - a.width as f64) / 2.0;
    (ticks, (b.at - a.at).as_nanos() as f64)
}

/// Cost of one `Instant::now()` in ns (median of short batches).
fn instant_read_ns() -> f64 {
    let mut v: Vec<f64> = (0..11)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..16 {
                std::hint::black_box(Instant::now());
            }
            t0.elapsed().as_nanos() as f64 / 17.0
        })
        .collect();
    median(&mut v)
}

/// Calibrates the counter named `name`: (ns per tick, spread in ppm).
fn calibrate_counter(name: &str, window: Duration) -> Result<(f64, f64), ClockError> {
    let read_cost = Duration::from_nanos(instant_read_ns() as u64);
    let window = window
        .max(read_cost * WINDOW_PER_READ_COST)
        .min(MAX_WINDOW.max(window));
    let plausible = if name == "tsc" { TSC_GHZ } else { CNTVCT_GHZ };
    let mut last = ClockError(String::new());
    for _ in 0..ATTEMPTS {
        let mut rates = Vec::with_capacity(WINDOWS);
        for _ in 0..WINDOWS {
            let start = paired_read();
            while start.at.elapsed() < window {
                std::hint::spin_loop();
            }
            let (ticks, ns) = between(start, paired_read());
            rates.push(ns / ticks);
        }
        match judge(name, &mut rates, &plausible, window) {
            Ok(ok) => return Ok(stated_rate(ok)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Where the CPU states its counter's rate (aarch64's `cntfrq_el0`) and the
/// calibration agrees with it, the stated rate is exact; else the median.
fn stated_rate((ns_per_tick, spread): (f64, f64)) -> (f64, f64) {
    match sys::counter_hz() {
        Some(hz) => {
            let stated = 1e9 / hz as f64;
            if ((ns_per_tick - stated) / stated).abs() * 1e6 <= MAX_SPREAD_PPM {
                (stated, spread)
            } else {
                (ns_per_tick, spread)
            }
        }
        None => (ns_per_tick, spread),
    }
}

/// Checks one attempt's per-window rates (ns per tick): returns the median
/// and the spread in ppm, or why they cannot be trusted.
fn judge(
    name: &str,
    rates: &mut [f64],
    plausible: &RangeInclusive<f64>,
    window: Duration,
) -> Result<(f64, f64), ClockError> {
    if rates.iter().any(|r| !r.is_finite() || *r <= 0.0) {
        return Err(ClockError(format!(
            "the {name} counter did not advance steadily over {window:?} windows (rates {rates:?} ns/tick)"
        )));
    }
    let med = median(rates);
    let (lo, hi) = rates
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let spread = (hi - lo) / med * 1e6;
    let ghz = 1.0 / med;
    if !plausible.contains(&ghz) {
        return Err(ClockError(format!(
            "the {name} counter runs at {ghz:.4} GHz by CLOCK_MONOTONIC, outside the plausible {}–{} GHz",
            plausible.start(),
            plausible.end()
        )));
    }
    if spread > MAX_SPREAD_PPM {
        return Err(ClockError(format!(
            "the {name} counter is not steady: its rate varied by {spread:.0} ppm across {} windows of {window:?} (limit {MAX_SPREAD_PPM:.0} ppm), in each of {ATTEMPTS} attempts; is the machine heavily loaded?",
            rates.len()
        )));
    }
    Ok((med, spread))
}

/// The median (sorts `v`); NaN for an empty slice.
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_measures_a_sleep_within_reason() {
        let c = Clock::calibrate(Duration::from_millis(10)).expect("calibrates here");
        let t0 = c.now();
        std::thread::sleep(Duration::from_millis(20));
        let ns = c.to_ns(c.now().wrapping_sub(t0));
        // A sleep lasts at least what was asked; an unloaded-or-not machine
        // will not stretch 20 ms to 2 s. This checks the unit, not the speed.
        assert!(ns >= 19_000_000, "{ns} ns");
        assert!(ns < 2_000_000_000, "{ns} ns");
        assert!(c.ticks(Duration::from_millis(1)) > 0);
        let info = c.info();
        assert!(info.read_ns > 0.0 && info.read_ns < 100_000.0, "{info:?}");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(info.source, "tsc");
            let ghz = info.ghz.unwrap();
            assert!(TSC_GHZ.contains(&ghz), "{ghz}");
            assert!(info.calibration_spread_ppm.unwrap() <= MAX_SPREAD_PPM);
        }
    }

    #[test]
    fn calibration_restores_the_thread_cpu_mask() {
        std::thread::spawn(|| {
            let before = sys::allowed_cpus();
            Clock::calibrate(Duration::from_millis(1)).unwrap();
            assert_eq!(sys::allowed_cpus(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn judge_takes_the_median_and_the_spread() {
        // 2 GHz = 0.5 ns/tick, windows off by up to +-100 ppm.
        let mut r = [0.5, 0.50005, 0.49995, 0.5, 0.50001];
        let (med, spread) = judge("tsc", &mut r, &TSC_GHZ, Duration::from_millis(10)).unwrap();
        assert_eq!(med, 0.5);
        assert!((spread - 200.0).abs() < 0.01, "{spread}");
    }

    #[test]
    fn judge_refuses_unsteady_or_implausible_rates() {
        let w = Duration::from_millis(10);
        let mut unsteady = [0.5, 0.5, 0.5, 0.5, 0.5006];
        let e = judge("tsc", &mut unsteady, &TSC_GHZ, w).unwrap_err();
        assert!(e.0.contains("1200 ppm"), "{e}");
        assert!(e.to_string().starts_with("clock calibration failed: "));
        let mut slow = [20.0; 5]; // 0.05 GHz
        let e = judge("tsc", &mut slow, &TSC_GHZ, w).unwrap_err();
        assert!(e.0.contains("0.0500 GHz"), "{e}");
        // ... which is fine for the aarch64 generic timer.
        assert!(judge("cntvct", &mut slow, &CNTVCT_GHZ, w).is_ok());
        let mut fast = [0.05; 5]; // 20 GHz
        assert!(judge("tsc", &mut fast, &TSC_GHZ, w).is_err());
        let mut stuck = [f64::INFINITY, 0.5, 0.5, 0.5, 0.5];
        assert!(judge("tsc", &mut stuck, &TSC_GHZ, w).is_err());
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn paired_reads_combine_midpoints() {
        let t = Instant::now();
        let a = Pair {
            at: t,
            before: 100,
            width: 10,
        };
        let b = Pair {
            at: t + Duration::from_nanos(1000),
            before: 2100,
            width: 20,
        };
        // Midpoints 105 and 2110.
        assert_eq!(between(a, b), (2005.0, 1000.0));
    }

    #[test]
    fn legacy_clock_strings_keep_source_and_rate() {
        let tsc = ClockInfo::from_legacy("TSC, 2.100 GHz (calibrated against CLOCK_MONOTONIC)");
        assert_eq!(tsc.source, "tsc");
        assert_eq!(tsc.ghz, Some(2.1));
        assert_eq!(tsc.read_ns, 0.0);
        assert_eq!(tsc.kernel_clocksource, None);
        assert_eq!(tsc.calibration_spread_ppm, None);
        let mono = ClockInfo::from_legacy("CLOCK_MONOTONIC");
        assert_eq!(mono.source, "monotonic");
        assert_eq!(mono.ghz, None);
        let odd = ClockInfo::from_legacy("something else");
        assert_eq!(odd.source, "something else");
        assert_eq!(odd.ghz, None);
    }

    #[test]
    fn warning_only_for_an_expensive_monotonic_clock() {
        let mono = ClockInfo {
            source: "monotonic".into(),
            read_ns: 2000.0,
            ..Default::default()
        };
        let w = mono.warning(50_000.0).expect("4% of the smallest latency");
        assert!(w.contains("2000 ns") && w.contains("4.0%"), "{w}");
        assert_eq!(mono.warning(500_000.0), None, "0.4%");
        assert_eq!(mono.warning(0.0), None, "nothing measured");
        let tsc = ClockInfo {
            source: "tsc".into(),
            read_ns: 2000.0,
            ..Default::default()
        };
        assert_eq!(tsc.warning(50_000.0), None);
    }
}
