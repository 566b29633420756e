//! The measured window of a throughput point: how long it lasts, and each
//! thread's view of when it opens and ends.

use std::time::Duration;

use crate::affinity::Side;
use crate::clock::Clock;
use crate::cpu_use::{CpuSnapshot, CpuUse};
use crate::report::CounterDeltas;
use crate::spec::{TputPoint, TputSpec};

use super::super::counters::{CounterSnapshot, DeviceCounters};
use super::super::intervals::{IntervalBoard, IntervalMarks};
use super::hold::LoadHold;

/// What one side measures with, and against what, in one point.
pub struct PointCtx<'a> {
    pub spec: &'a TputSpec,
    pub point: &'a TputPoint,
    pub clock: &'a Clock,
    pub window: Window,
    /// The device's counters, read by thread 0 at its window's edges.
    pub counters: &'a DeviceCounters,
    /// Which side this process's measuring threads are on (their CPUs).
    pub side: Side,
    /// `--interval` on the driving side: where each thread publishes its intervals.
    pub intervals: Option<&'a IntervalBoard>,
    /// Under load: the issuers' windows stay open until it is released.
    pub hold: Option<&'a LoadHold>,
}

impl<'a> PointCtx<'a> {
    pub fn new(
        spec: &'a TputSpec,
        point: &'a TputPoint,
        clock: &'a Clock,
        counters: &'a DeviceCounters,
        side: Side,
    ) -> Self {
        PointCtx {
            spec,
            point,
            clock,
            window: Window::new(clock, spec),
            counters,
            side,
            intervals: None,
            hold: None,
        }
    }

    /// The same context with its issuers' windows held open by `hold`.
    pub fn held_by(mut self, hold: Option<&'a LoadHold>) -> Self {
        self.hold = hold;
        self
    }

    /// Starts thread `thread`'s window now (call it right after the start
    /// barrier). Only thread 0 reads the device's counters and the CPU
    /// times at its edges.
    pub fn thread_window(&self, thread: u32) -> ThreadWindow<'a> {
        let mut w = ThreadWindow {
            timer: WindowTimer::start(self.clock.now(), &self.window),
            edges: CounterEdges {
                counters: (thread == 0 && !self.counters.is_empty()).then_some(self.counters),
                before: CounterSnapshot::default(),
                cpu: thread == 0,
                cpu_before: None,
            },
            clock: self.clock,
            marks: IntervalBoard::marks(self.intervals, thread),
            held: self.hold.is_some(),
        };
        if w.timer.measuring() {
            if w.edges.open() {
                // Measuring from the start: the counters are read before it.
                w.timer.reopen(w.clock.now());
            }
            w.marks.start(w.timer.opened);
        }
        w
    }
}

/// One thread's measured window with the device counters at its edges.
pub struct ThreadWindow<'a> {
    timer: WindowTimer,
    edges: CounterEdges<'a>,
    clock: &'a Clock,
    marks: IntervalMarks<'a>,
    /// Under a `LoadHold` the window ends when the hold is released; its
    /// timer is only the floor, so no sleep is cut to it.
    held: bool,
}

impl ThreadWindow<'_> {
    /// True exactly once, when the warm-up is over (snapshot the counts
    /// then); the window starts after the counters are read.
    #[inline(always)]
    pub fn opens(&mut self, now: u64) -> bool {
        if !self.timer.opens(now) {
            return false;
        }
        if self.edges.open() {
            self.timer.reopen(self.clock.now());
        }
        self.marks.start(self.timer.opened);
        true
    }

    /// Whether the window is over: its time is up, or (`--forever`) a
    /// signal asked it to end and it reached an interval boundary.
    #[inline(always)]
    pub fn over(&self, now: u64) -> bool {
        self.timer.over(now) || self.marks.stopped()
    }

    /// How long a loop may sleep on a completion channel at `now` without
    /// overrunning a timed window's end: `slice_ms`, cut to the time left
    /// (rounded up to whole ms; 0 once it is over). Outside a timed window
    /// the whole slice.
    pub fn sleep_ms(&self, now: u64, slice_ms: i32) -> i32 {
        match self.ticks_left(now) {
            Some(t) => self.clock.to_ns(t).div_ceil(1_000_000).min(slice_ms as u64) as i32,
            None => slice_ms,
        }
    }

    /// Ticks left in a timed window at `now`, for a sleep that must not
    /// overrun its end; `None` outside one (warm-up, `--iters`, `--forever`,
    /// or a held window, which ends at its release).
    pub fn ticks_left(&self, now: u64) -> Option<u64> {
        self.timer.left(now).filter(|_| !self.held)
    }

    /// Whether an `--interval` boundary has passed (one compare); then call
    /// `mark_interval` with the ops since the window opened.
    #[inline(always)]
    pub fn interval_due(&self, now: u64) -> bool {
        self.marks.due(now)
    }

    /// Publishes the interval that ended at `now` (once per interval, so a
    /// sum over QPs here costs the loop nothing that matters); false when
    /// nothing was published (a `--forever` stop drops the interval).
    pub fn mark_interval(&mut self, now: u64, ops: u64) -> bool {
        self.marks.mark(now, ops, None)
    }

    /// `--forever` once `over`: where the kept window ends (its last
    /// published boundary) and the ops counted up to it; `None` otherwise.
    pub fn kept(&self) -> Option<(u64, u64)> {
        self.marks
            .stopped()
            .then(|| (self.marks.last_at(), self.marks.last_ops()))
    }

    /// When the window opened (its start until then).
    pub fn opened(&self) -> u64 {
        self.timer.opened
    }

    /// What the device counters and the CPUs did since the window opened
    /// (thread 0; nothing on other threads).
    pub fn close(&self) -> WindowEdges {
        let mut e = self.edges.close();
        e.window_s = self
            .clock
            .to_ns(self.clock.now().wrapping_sub(self.timer.opened)) as f64
            / 1e9;
        e
    }
}

/// What was read at the edges of thread 0's window.
#[derive(Default)]
pub struct WindowEdges {
    pub counters: Option<CounterDeltas>,
    pub cpu: Option<CpuUse>,
    /// How long the window had been open when they were read.
    pub window_s: f64,
}

/// Where the measured window starts and ends, shared by all threads of a point.
#[derive(Clone, Copy)]
pub struct Window {
    pub warmup: u64,
    pub duration: u64,
    pub iters: Option<u64>,
    /// `--forever`: no timed end (a signal ends it at an interval boundary).
    pub forever: bool,
}

impl Window {
    fn new(clock: &Clock, spec: &TputSpec) -> Self {
        Window {
            warmup: clock.ticks(Duration::from_secs_f64(spec.warmup_s)),
            duration: clock.ticks(Duration::from_secs_f64(spec.duration_s)),
            iters: spec.iters,
            forever: spec.live.forever,
        }
    }
}

/// Posts (or other units of a pass's work) between two clock readings
/// within a pass: a post on rxe under TCG costs ~38 us, so the window ends
/// within ~0.6 ms of its deadline there, and a fast NIC's loop pays one
/// counter read per 16 posts.
pub const POSTS_PER_READING: u32 = 16;

/// Says when a loop reads the clock within a pass to see whether its
/// window is over: every `POSTS_PER_READING`-th call to `due`.
pub struct WithinPass {
    left: u32,
}

impl Default for WithinPass {
    fn default() -> Self {
        WithinPass {
            left: POSTS_PER_READING,
        }
    }
}

impl WithinPass {
    /// Call before each post; true when it is time to read the clock.
    #[inline(always)]
    pub fn due(&mut self) -> bool {
        self.left -= 1;
        if self.left == 0 {
            self.left = POSTS_PER_READING;
            return true;
        }
        false
    }
}

/// The device counters at the edges of one thread's window.
struct CounterEdges<'a> {
    counters: Option<&'a DeviceCounters>,
    before: CounterSnapshot,
    /// Whether this thread reads the CPU times (thread 0).
    cpu: bool,
    cpu_before: Option<CpuSnapshot>,
}

impl CounterEdges<'_> {
    /// Reads the counters and CPU times as the window opens; true if it did
    /// (the reads took time, so the caller restarts its window after them).
    /// The CPU times are read innermost (after the counters, which may
    /// wait out the kernel's cache), so they cover the window closely.
    fn open(&mut self) -> bool {
        if let Some(c) = self.counters {
            self.before = c.read();
        }
        if self.cpu {
            self.cpu_before = Some(CpuSnapshot::take());
        }
        self.cpu || self.counters.is_some()
    }

    /// What grew since `open`, read as the window closes.
    fn close(&self) -> WindowEdges {
        let cpu = self
            .cpu_before
            .map(|before| CpuSnapshot::take().since(&before));
        WindowEdges {
            counters: self.counters.map(|c| c.delta(&self.before, &c.read())),
            cpu,
            window_s: 0.0,
        }
    }
}

/// One thread's view of the measured window, fed the loop's clock readings.
/// Throughput loops ask it once per pass whether the window opens (then they
/// snapshot their counters), and whether it is over both at the head of each
/// pass and every few posts within one (`WithinPass`): one pass over 1024
/// QPs takes 45-100 ms under TCG, more than a tenth of a 0.5 s window.
pub struct WindowTimer {
    warm_end: u64,
    /// How long a timed window lasts; `None` in an --iters run (the loop ends it).
    duration: Option<u64>,
    /// When the window ends, set when it opens.
    end: u64,
    measuring: bool,
    /// When the window opened (the start reading until then).
    pub opened: u64,
}

impl WindowTimer {
    /// Starts the clock at `now`: warm-up first, except in an --iters run.
    pub fn start(now: u64, w: &Window) -> Self {
        let warmup = if w.iters.is_some() { 0 } else { w.warmup };
        let duration = (w.iters.is_none() && !w.forever).then_some(w.duration);
        WindowTimer {
            warm_end: now + warmup,
            duration,
            end: now + duration.unwrap_or(0),
            measuring: warmup == 0,
            opened: now,
        }
    }

    /// True exactly once: on the first reading at or after the warm-up's end.
    /// The window lasts its full duration from here, however long the warm-up
    /// really took (filling thousands of QPs can outlast it).
    #[inline(always)]
    pub fn opens(&mut self, now: u64) -> bool {
        if self.measuring || now < self.warm_end {
            return false;
        }
        self.measuring = true;
        self.opened = now;
        self.end = now + self.duration.unwrap_or(0);
        true
    }

    /// Whether the window is open (from the start when there is no warm-up).
    pub fn measuring(&self) -> bool {
        self.measuring
    }

    /// Moves the window's start (and end) to `now`, after work that must
    /// not count, such as reading the device's counters.
    pub fn reopen(&mut self, now: u64) {
        self.opened = now;
        self.end = now + self.duration.unwrap_or(0);
    }

    /// Ticks left in an open timed window (0 once it is over); `None` when
    /// the window is not open or has no timed end.
    pub fn left(&self, now: u64) -> Option<u64> {
        (self.measuring && self.duration.is_some()).then(|| self.end.saturating_sub(now))
    }

    /// Whether a timed window is over (never at the very reading it opened on).
    #[inline(always)]
    pub fn over(&self, now: u64) -> bool {
        self.measuring && self.duration.is_some() && now >= self.end && now > self.opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_opens_once_after_warmup_and_ends_after_its_duration() {
        let w = Window {
            warmup: 10,
            duration: 100,
            iters: None,
            forever: false,
        };
        let mut t = WindowTimer::start(1000, &w);
        assert!(!t.opens(1005) && !t.over(1005));
        assert!(t.opens(1012));
        assert!(!t.opens(1013), "opens only once");
        assert_eq!(t.opened, 1012);
        assert!(
            !t.over(1111),
            "the window lasts its duration from when it opened"
        );
        assert!(t.over(1112));
    }

    #[test]
    fn a_warmup_that_overruns_does_not_shorten_the_window() {
        let w = Window {
            warmup: 10,
            duration: 100,
            iters: None,
            forever: false,
        };
        let mut t = WindowTimer::start(0, &w);
        // The first loop pass (filling every queue) took 500 ticks.
        assert!(t.opens(500));
        assert!(!t.over(501) && !t.over(599));
        assert!(t.over(600));
    }

    #[test]
    fn within_a_pass_the_clock_is_read_every_sixteenth_post() {
        let mut w = WithinPass::default();
        let due: Vec<usize> = (1..=40).filter(|_| w.due()).collect();
        assert_eq!(due, vec![16, 32]);
    }

    #[test]
    fn time_left_counts_down_once_the_window_opens() {
        let w = Window {
            warmup: 10,
            duration: 100,
            iters: None,
            forever: false,
        };
        let mut t = WindowTimer::start(0, &w);
        assert_eq!(t.left(5), None, "warm-up: no end yet");
        assert!(t.opens(20));
        assert_eq!(t.left(20), Some(100));
        assert_eq!(t.left(90), Some(30));
        assert_eq!(t.left(500), Some(0));
        let forever = Window { forever: true, ..w };
        let mut f = WindowTimer::start(0, &forever);
        assert!(f.opens(20));
        assert_eq!(f.left(30), None, "--forever has no timed end");
    }

    #[test]
    fn iters_runs_have_no_warmup_and_no_timed_end() {
        let w = Window {
            warmup: 10,
            duration: 100,
            iters: Some(5),
            forever: false,
        };
        let mut t = WindowTimer::start(0, &w);
        assert!(!t.opens(0), "measuring from the start");
        assert!(!t.over(1_000_000));
        assert_eq!(t.left(1_000_000), None);
    }
}
