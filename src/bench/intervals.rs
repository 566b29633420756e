//! Live intervals (`--interval`, `--forever`): the measured window cut into
//! fixed-length pieces while it runs.
//!
//! Who does what, so the measured loops stay free of syscalls, locks and
//! allocation:
//! - Each measuring thread notices a boundary from the clock reading its loop
//!   takes anyway (`IntervalMarks::due` is one compare against a relaxed
//!   atomic load of its own next boundary) and publishes the interval into
//!   its own preallocated ring of atomics (`mark`): four relaxed stores and
//!   one release store, once per interval. Boundaries lie on the grid window
//!   start + k·interval; an interval ends at the first loop pass at or after
//!   its boundary.
//! - A watcher thread (`watch`) wakes a few times per interval, reads every
//!   thread's ring, and hands each interval all threads have finished to a
//!   callback (printing, rewriting the results file) — off the measuring
//!   threads.
//! - `--forever`: the first SIGINT/SIGTERM (`abort::stop_requested`) ends
//!   the window at once, the interval in progress dropped. The watcher sees
//!   the request (it polls at least every [`STOP_POLL`]) and sets every
//!   thread's next boundary to 0, so each loop's next `due` compare is true
//!   and its `mark` learns of the stop: no extra load in the loop. Every
//!   thread keeps the same whole intervals: as many as the most any thread
//!   had published when it learned of the stop (a thread just short of that
//!   boundary, a few microseconds behind the others, runs on to it), and
//!   each thread's kept figures are those of its last published mark.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::abort::stop_requested;
use crate::clock::Clock;
use crate::report::IntervalFigure;

/// Intervals a thread may run ahead of the watcher before its ring wraps
/// (the watcher polls several times per interval, so it never lags this far).
const RING: usize = 1024;
/// `p50`/`p99` slot value meaning "not a latency point".
const NONE: u64 = u64::MAX;
/// `--forever`: the watcher looks for a stop request at least this often,
/// which bounds how long a stop takes to reach the measuring loops.
pub const STOP_POLL: Duration = Duration::from_millis(20);
/// The next boundary of a thread without a board (never due).
static NEVER: AtomicU64 = AtomicU64::new(u64::MAX);

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
    /// The thread's next boundary (clock ticks; `u64::MAX` before its window
    /// opens). Only the thread writes it, except that the watcher sets it to
    /// 0 when a `--forever` stop is asked.
    next: AtomicU64,
    slots: Box<[Slot]>,
}

/// Every measuring thread's published intervals for one point.
pub struct IntervalBoard {
    clock: Clock,
    period: u64,
    forever: bool,
    rings: Vec<Ring>,
    /// `--forever`: a signal asked the point to end (set by the watcher).
    stopping: AtomicBool,
    /// `--forever`: how many intervals every thread keeps: the most any
    /// thread had published when it learned of the stop.
    stop_at: AtomicU64,
    /// `--forever`: threads that have learned of the stop (or left).
    arrived: AtomicU32,
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
                    next: AtomicU64::new(u64::MAX),
                    slots: (0..RING).map(|_| Slot::default()).collect(),
                })
                .collect(),
            stopping: AtomicBool::new(false),
            stop_at: AtomicU64::new(0),
            arrived: AtomicU32::new(0),
        })
    }

    /// Thread `thread`'s marker (a no-op one without a board).
    pub fn marks(board: Option<&IntervalBoard>, thread: u32) -> IntervalMarks<'_> {
        IntervalMarks {
            board,
            thread: thread as usize,
            next: board.map_or(&NEVER, |b| &b.rings[thread as usize].next),
            boundary: u64::MAX,
            started: false,
            last_at: 0,
            last_ops: 0,
            k: 0,
            arrived: false,
            stopped: false,
        }
    }

    /// `--forever`: passes a signal's stop request on to every measuring
    /// thread (their next `due` is true at once). Called by the watcher.
    fn pass_on_stop(&self) {
        if self.forever && stop_requested() {
            self.stop();
        }
    }

    /// `--forever`: ends the point as a signal would (`--bidirectional`:
    /// the peer's issuers have stopped). Nothing otherwise.
    pub fn end_forever(&self) {
        if self.forever {
            self.stop();
        }
    }

    /// Ends a `--forever` point: every thread's next `due` is true.
    fn stop(&self) {
        if self.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        for r in &self.rings {
            r.next.store(0, Ordering::SeqCst);
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
    /// The thread's next boundary as the loop compares it (its ring's
    /// `next`, which a stop sets to 0; [`NEVER`] without a board).
    next: &'a AtomicU64,
    /// The next boundary on the grid (`next` before any stop).
    boundary: u64,
    started: bool,
    last_at: u64,
    last_ops: u64,
    k: u64,
    /// `--forever`: this thread has learned of the stop.
    arrived: bool,
    stopped: bool,
}

impl IntervalMarks<'_> {
    /// The window opened at `now`: the first interval starts.
    pub fn start(&mut self, now: u64) {
        if self.board.is_some() {
            self.started = true;
            self.last_at = now;
            self.arm(now + self.period());
        }
    }

    fn period(&self) -> u64 {
        self.board.map_or(u64::MAX, |b| b.period)
    }

    /// Sets the next boundary. A stop the watcher passed on while this
    /// thread was storing its own boundary is not lost: the watcher stores
    /// 0 after setting `stopping` (both SeqCst), so either this load sees
    /// `stopping` or the watcher's 0 lands after this store.
    fn arm(&mut self, at: u64) {
        self.boundary = at;
        self.next.store(at, Ordering::SeqCst);
        if let Some(b) = self.board.filter(|b| b.forever) {
            if b.stopping.load(Ordering::SeqCst) {
                self.next.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Whether an interval boundary has passed, or (`--forever`) a stop was
    /// asked: one compare with one relaxed load, safe in the loop.
    #[inline(always)]
    pub fn due(&self, now: u64) -> bool {
        now >= self.next.load(Ordering::Relaxed)
    }

    /// Call when `due`: publishes the interval ending at `now`, unless a
    /// `--forever` stop drops it. `ops` counts since the window opened;
    /// `pct`: the interval's (p50, p99) in ns, latency only. Call once more
    /// at a finite window's end for its last piece. Returns whether it
    /// published, so a caller can snapshot what it keeps at each mark.
    pub fn mark(&mut self, now: u64, ops: u64, pct: Option<(f64, f64)>) -> bool {
        let Some(b) = self.board else { return false };
        if !self.started {
            return false;
        }
        if b.forever && b.stopping.load(Ordering::SeqCst) {
            return self.on_stop(b, now, ops, pct);
        }
        self.publish(b, now, ops, pct);
        // Boundaries stay on the window's grid (start + k·interval), so a
        // thread stalled past one (a busy host) lengthens that interval and
        // shortens the next instead of shifting every later one; a stall
        // past a whole further interval restarts the grid here.
        let next = if now < self.boundary + b.period {
            self.boundary + b.period
        } else {
            now + b.period
        };
        self.arm(next);
        true
    }

    fn publish(&mut self, b: &IntervalBoard, now: u64, ops: u64, pct: Option<(f64, f64)>) {
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
    }

    /// `--forever` after the stop (every pass comes here, `next` being 0):
    /// the first time, proposes this thread's published count as the
    /// intervals to keep; publishes only the boundaries it still owes to
    /// reach the agreed count; stops once every thread has proposed and it
    /// has that many.
    fn on_stop(&mut self, b: &IntervalBoard, now: u64, ops: u64, pct: Option<(f64, f64)>) -> bool {
        if !self.arrived {
            self.arrived = true;
            b.stop_at.fetch_max(self.k, Ordering::SeqCst);
            b.arrived.fetch_add(1, Ordering::SeqCst);
        }
        let keep = b.stop_at.load(Ordering::SeqCst);
        let mut published = false;
        if self.k < keep && now >= self.boundary {
            self.publish(b, now, ops, pct);
            self.boundary = if now < self.boundary + b.period {
                self.boundary + b.period
            } else {
                now + b.period
            };
            published = true;
        }
        let all = b.arrived.load(Ordering::SeqCst) as usize == b.rings.len();
        // Every thread has proposed, so `keep` is final.
        self.stopped = all && self.k >= b.stop_at.load(Ordering::SeqCst);
        published
    }

    /// Ops published so far (`--forever` once stopped: the ops it keeps).
    pub fn last_ops(&self) -> u64 {
        self.last_ops
    }

    /// When the last published interval ended (`--forever` once stopped:
    /// where its kept window ends).
    pub fn last_at(&self) -> u64 {
        self.last_at
    }

    /// `--forever`: the window ends here, every thread keeping the same
    /// whole intervals; its kept figures are those of its last mark.
    #[inline(always)]
    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

impl Drop for IntervalMarks<'_> {
    /// A thread that leaves its loop without learning of a stop (an error)
    /// counts as arrived, so the others never wait for it.
    fn drop(&mut self) {
        if let Some(b) = self.board.filter(|b| b.forever && !self.arrived) {
            self.arrived = true;
            b.arrived.fetch_add(1, Ordering::SeqCst);
        }
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
    // Poll a few times per interval, never busier than every 5 ms;
    // --forever: often enough that a stop reaches the loops promptly.
    let mut poll = Duration::from_nanos(b.clock.to_ns(b.period) / 4).max(Duration::from_millis(5));
    if b.forever {
        poll = poll.min(STOP_POLL);
    }
    std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let (mut next, mut start_s, mut all) = (0u64, 0.0, Vec::new());
            loop {
                let last = done.load(Ordering::Acquire);
                b.pass_on_stop();
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

    #[test]
    fn a_forever_stop_drops_the_interval_in_progress_on_every_thread() {
        let clock = Clock::calibrate(Duration::from_millis(10)).unwrap();
        let board = IntervalBoard::new(&clock, Some(0.05), true, 2).unwrap();
        let p = board.period;
        let mut a = IntervalBoard::marks(Some(&board), 0);
        let mut b = IntervalBoard::marks(Some(&board), 1);
        a.start(1000);
        b.start(1000);
        // Thread 0 crosses boundary 1; thread 1 is a moment behind it.
        assert!(a.mark(1000 + p, 10, None));
        assert!(!b.due(1000 + p - 1));
        board.stop();
        // The stop makes the next compare true at once, mid-interval.
        assert!(a.due(1001 + p) && b.due(1000 + p - 1));
        assert!(
            !a.mark(1000 + p + p / 2, 18, None),
            "its interval 1 is dropped"
        );
        assert!(!a.stopped(), "thread 1 has not proposed yet");
        // Thread 1 proposes 0 but owes boundary 1, which thread 0 kept.
        assert!(!b.mark(1000 + p - 1, 6, None));
        assert!(!b.stopped());
        assert!(
            b.mark(1000 + p, 7, None),
            "it runs on to the agreed boundary"
        );
        assert!(b.stopped());
        assert!(!a.mark(1000 + 2 * p, 30, None) && a.stopped());
        // Each keeps its figures at boundary 1, nothing after it.
        assert_eq!((a.last_ops(), a.last_at()), (10, 1000 + p));
        assert_eq!((b.last_ops(), b.last_at()), (7, 1000 + p));
        let (mut next, mut start_s) = (0, 0.0);
        let kept = board.collect(&mut next, &mut start_s);
        assert_eq!(kept.iter().map(|f| f.ops).collect::<Vec<_>>(), [17]);
    }

    #[test]
    fn a_thread_that_leaves_does_not_hold_the_others() {
        let clock = Clock::calibrate(Duration::from_millis(10)).unwrap();
        let board = IntervalBoard::new(&clock, Some(0.05), true, 2).unwrap();
        let mut a = IntervalBoard::marks(Some(&board), 0);
        a.start(1000);
        {
            let mut b = IntervalBoard::marks(Some(&board), 1);
            b.start(1000);
        }
        board.stop();
        assert!(!a.mark(1001, 1, None));
        assert!(a.stopped() && a.last_ops() == 0);
    }
}
