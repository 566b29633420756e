//! Live intervals (`--interval`, `--forever`): the measured window cut into
//! fixed-length pieces while it runs.
//!
//! Who does what, so the measured loops stay free of syscalls, locks and
//! allocation:
//! - Each measuring thread notices a boundary from the clock reading its loop
//!   takes anyway (`IntervalMarks::due` is one compare) and publishes the
//!   interval into its own preallocated ring of atomics (`mark`): four
//!   relaxed stores and one release store, once per interval. Boundaries lie
//!   on the grid window start + k·interval; an interval ends at the first
//!   loop pass at or after its boundary.
//! - A watcher thread (`watch`) wakes a few times per interval, reads every
//!   thread's ring, and hands each interval all threads have finished to a
//!   callback (printing, rewriting the results file) — off the measuring
//!   threads.
//! - `--forever`: the first SIGINT/SIGTERM (`abort::stop_requested`) ends
//!   the window at an interval boundary, the same one for every thread, so a
//!   stopped point is exactly its whole intervals.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::abort::stop_requested;
use crate::clock::Clock;
use crate::report::IntervalFigure;

/// Intervals a thread may run ahead of the watcher before its ring wraps
/// (the watcher polls several times per interval, so it never lags this far).
const RING: usize = 1024;
/// `p50`/`p99` slot value meaning "not a latency point".
const NONE: u64 = u64::MAX;

#[derive(Default)]
struct Slot {
    ops: AtomicU64,
    ticks: AtomicU64,
    p50: AtomicU64,
    p99: AtomicU64,
}

struct Ring {
    /// Intervals published so far; slot `k % RING` holds interval `k`.
    published: AtomicU64,
    slots: Box<[Slot]>,
}

/// Every measuring thread's published intervals for one point.
pub struct IntervalBoard {
    clock: Clock,
    period: u64,
    forever: bool,
    rings: Vec<Ring>,
    /// `--forever`: the boundary (interval count) at which every thread stops.
    stop_at: AtomicU64,
}

impl IntervalBoard {
    /// A board for `threads` measuring threads cutting every `interval_s`;
    /// `None` when no interval was asked for.
    pub fn new(
        clock: &Clock,
        interval_s: Option<f64>,
        forever: bool,
        threads: u32,
    ) -> Option<Self> {
        let interval_s = interval_s?;
        Some(IntervalBoard {
            clock: *clock,
            period: clock.ticks(Duration::from_secs_f64(interval_s)).max(1),
            forever,
            rings: (0..threads.max(1))
                .map(|_| Ring {
                    published: AtomicU64::new(0),
                    slots: (0..RING).map(|_| Slot::default()).collect(),
                })
                .collect(),
            stop_at: AtomicU64::new(u64::MAX),
        })
    }

    /// Thread `thread`'s marker (a no-op one without a board).
    pub fn marks(board: Option<&IntervalBoard>, thread: u32) -> IntervalMarks<'_> {
        IntervalMarks {
            board,
            thread: thread as usize,
            next: u64::MAX,
            last_at: 0,
            last_ops: 0,
            k: 0,
            stopped: false,
        }
    }

    /// The intervals from `*next` on that every thread has published; moves `*next`.
    fn collect(&self, next: &mut u64, start_s: &mut f64) -> Vec<IntervalFigure> {
        let ready = self
            .rings
            .iter()
            .map(|r| r.published.load(Ordering::Acquire))
            .min()
            .unwrap_or(0);
        let mut out = Vec::new();
        while *next < ready {
            let at = (*next % RING as u64) as usize;
            let (mut ops, mut mops) = (0u64, 0.0);
            for r in &self.rings {
                let s = &r.slots[at];
                let o = s.ops.load(Ordering::Relaxed);
                let secs = self.clock.to_ns(s.ticks.load(Ordering::Relaxed)) as f64 / 1e9;
                ops += o;
                if secs > 0.0 {
                    mops += o as f64 / secs / 1e6;
                }
            }
            let first = &self.rings[0].slots[at];
            let elapsed_s = self.clock.to_ns(first.ticks.load(Ordering::Relaxed)) as f64 / 1e9;
            let pct = |a: &AtomicU64| {
                let v = a.load(Ordering::Relaxed);
                (v != NONE).then(|| f64::from_bits(v))
            };
            out.push(IntervalFigure {
                index: *next as u32,
                start_s: *start_s,
                elapsed_s,
                ops,
                mops,
                p50_ns: pct(&first.p50),
                p99_ns: pct(&first.p99),
            });
            *start_s += elapsed_s;
            *next += 1;
        }
        out
    }
}

/// One measuring thread's side of the board.
pub struct IntervalMarks<'a> {
    board: Option<&'a IntervalBoard>,
    thread: usize,
    /// The next boundary (`u64::MAX`: none, before the window opens or without a board).
    next: u64,
    last_at: u64,
    last_ops: u64,
    k: u64,
    stopped: bool,
}

impl IntervalMarks<'_> {
    /// The window opened at `now`: the first interval starts.
    pub fn start(&mut self, now: u64) {
        if let Some(b) = self.board {
            self.next = now + b.period;
            self.last_at = now;
        }
    }

    /// Whether an interval boundary has passed (one compare: safe in the loop).
    #[inline(always)]
    pub fn due(&self, now: u64) -> bool {
        now >= self.next
    }

    /// Publishes the interval ending at `now`; `ops` counts since the window
    /// opened; `pct`: the interval's (p50, p99) in ns, latency only. Call
    /// when `due`, and once more at a finite window's end for its last piece.
    pub fn mark(&mut self, now: u64, ops: u64, pct: Option<(f64, f64)>) {
        let Some(b) = self.board else { return };
        let ring = &b.rings[self.thread];
        let slot = &ring.slots[(self.k % RING as u64) as usize];
        slot.ops.store(ops - self.last_ops, Ordering::Relaxed);
        slot.ticks
            .store(now.wrapping_sub(self.last_at), Ordering::Relaxed);
        let (p50, p99) = pct.map_or((NONE, NONE), |(a, b)| (a.to_bits(), b.to_bits()));
        slot.p50.store(p50, Ordering::Relaxed);
        slot.p99.store(p99, Ordering::Relaxed);
        self.k += 1;
        ring.published.store(self.k, Ordering::Release);
        self.last_at = now;
        self.last_ops = ops;
        // Boundaries stay on the window's grid (start + k·interval), so a
        // thread stalled past one (a busy host) lengthens that interval and
        // shortens the next instead of shifting every later one; a stall
        // past a whole further interval restarts the grid here.
        self.next = if now < self.next + b.period {
            self.next + b.period
        } else {
            now + b.period
        };
        if b.forever {
            if stop_requested() {
                // The first thread to see the request picks the boundary:
                // this one alone, or the next one when others may be
                // just past this one already.
                let at = self.k + u64::from(b.rings.len() > 1);
                let _ =
                    b.stop_at
                        .compare_exchange(u64::MAX, at, Ordering::AcqRel, Ordering::Acquire);
            }
            self.stopped = self.k >= b.stop_at.load(Ordering::Acquire);
        }
    }

    /// Ops published so far, and whether anything happened since the last mark.
    pub fn last_ops(&self) -> u64 {
        self.last_ops
    }

    /// `--forever`: the window ends here (all threads at the same boundary).
    #[inline(always)]
    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

/// Runs `work` while a watcher thread hands every interval that all
/// measuring threads have finished to `on_interval`, as they finish; returns
/// `work`'s result and every interval. Without a board, just runs `work`.
pub fn watch<R>(
    board: Option<&IntervalBoard>,
    on_interval: &(dyn Fn(&IntervalFigure) + Sync),
    work: impl FnOnce() -> R,
) -> (R, Vec<IntervalFigure>) {
    let Some(b) = board else {
        return (work(), Vec::new());
    };
    let done = AtomicBool::new(false);
    // Poll a few times per interval, never busier than every 5 ms.
    let poll = Duration::from_nanos(b.clock.to_ns(b.period) / 4).max(Duration::from_millis(5));
    std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let (mut next, mut start_s, mut all) = (0u64, 0.0, Vec::new());
            loop {
                let last = done.load(Ordering::Acquire);
                for f in b.collect(&mut next, &mut start_s) {
                    on_interval(&f);
                    all.push(f);
                }
                if last {
                    return all;
                }
                std::thread::sleep(poll);
            }
        });
        let r = work();
        done.store(true, Ordering::Release);
        let all = watcher.join().unwrap_or_default();
        (r, all)
    })
}

/// Adds the piece of a finite window after its last whole interval, from the
/// point's totals (throughput: the threads do not publish it themselves), if
/// it holds any ops.
pub fn add_tail(
    intervals: &mut Vec<IntervalFigure>,
    ops: u64,
    elapsed_s: f64,
) -> Option<&IntervalFigure> {
    if intervals.is_empty() {
        return None;
    }
    let seen: u64 = intervals.iter().map(|f| f.ops).sum();
    let start_s: f64 = intervals.iter().map(|f| f.elapsed_s).sum();
    let tail = ops.saturating_sub(seen);
    let secs = elapsed_s - start_s;
    if tail == 0 || secs <= 0.0 {
        return None;
    }
    intervals.push(IntervalFigure {
        index: intervals.len() as u32,
        start_s,
        elapsed_s: secs,
        ops: tail,
        mops: tail as f64 / secs / 1e6,
        p50_ns: None,
        p99_ns: None,
    });
    intervals.last()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_threads_intervals_are_summed_once_both_have_published() {
        let clock = Clock::calibrate(Duration::from_millis(10)).unwrap();
        let board = IntervalBoard::new(&clock, Some(0.05), false, 2).unwrap();
        let p = board.period;
        let seen = std::sync::Mutex::new(Vec::new());
        let show = |f: &IntervalFigure| seen.lock().unwrap().push(f.index);
        let ((), all) = watch(Some(&board), &show, || {
            let mut a = IntervalBoard::marks(Some(&board), 0);
            let mut b = IntervalBoard::marks(Some(&board), 1);
            a.start(1000);
            b.start(1000);
            assert!(!a.due(1000 + p - 1) && a.due(1000 + p));
            // Thread 0 finishes three intervals, thread 1 only two.
            for (k, ops) in [(1, 10), (2, 25), (3, 45)] {
                a.mark(1000 + k * p, ops, None);
            }
            for (k, ops) in [(1, 7), (2, 9)] {
                b.mark(1000 + k * p, ops, None);
            }
            // Grid: a boundary hit late does not shift the next one.
            assert!(a.due(1000 + 4 * p) && !a.due(1000 + 4 * p - 1));
        });
        assert_eq!(all.len(), 2, "interval 2 waits for thread 1: {all:?}");
        assert_eq!(all.iter().map(|f| f.ops).collect::<Vec<_>>(), [17, 17]);
        assert_eq!(*seen.lock().unwrap(), [0, 1], "handed out as they end");
        assert!((all[1].start_s - all[0].elapsed_s).abs() < 1e-9);
        // The rest of a finite window becomes its last interval.
        let mut all = all;
        let tail = add_tail(&mut all, 60, 0.2).cloned().unwrap();
        assert_eq!((tail.index, tail.ops), (2, 26));
    }
}
