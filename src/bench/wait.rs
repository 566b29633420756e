//! Bounded busy-waiting: every spin on the peer (a memory marker, a CQ) gives
//! up after the run's timeout instead of hanging when the peer dies.

use crate::abort::aborted;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::verbs::{CompletionChannel, CompletionQueue, WorkCompletion};

/// Longest single sleep on a completion channel: between sleeps the waiter
/// checks the abort flag and its deadline, so a vanished peer never hangs it.
pub const EVENT_SLICE_MS: i32 = 100;

/// `--events` in loops that poll several CQs made on one completion channel
/// (a QP set's send and receive CQs): arm them all once with `arm_all`;
/// then, whenever a pass found them all empty and a completion is coming,
/// `take_event` sleeps until one of them raises an event (one slice at
/// most), re-arms the CQ that raised it and returns, and the caller polls
/// them all again. A CQ that did not fire stays armed, so a completion on
/// any of them after its last arming always raises the next event.
pub fn arm_all(cqs: &[&CompletionQueue]) -> Result<()> {
    Ok(cqs.iter().try_for_each(|cq| cq.arm())?)
}

/// See `arm_all`. True when an event was taken (a wake-up); false when the
/// slice ended first (the caller checks its deadlines and the abort flag).
pub fn take_event(ch: &CompletionChannel, cqs: &[&CompletionQueue]) -> Result<bool> {
    take_event_within(ch, cqs, EVENT_SLICE_MS)
}

/// `take_event`, sleeping `ms` at most (a measured window's end may come
/// before a whole slice has passed).
pub fn take_event_within(
    ch: &CompletionChannel,
    cqs: &[&CompletionQueue],
    ms: i32,
) -> Result<bool> {
    let Some(event) = ch.wait(ms)? else {
        return Ok(false);
    };
    if let Some(cq) = cqs.iter().find(|cq| cq.raised(event)) {
        cq.arm()?;
    }
    Ok(true)
}

/// For loops that serve a peer while the peer drives (a SEND sink, the echo
/// server): counts idle passes, says every 4096 in a row that it is time to
/// look at the control channel, and fails once nothing has happened for
/// `limit` (a peer gone without closing its connection) or the run was
/// aborted. It reads the clock only when idle.
pub struct IdleWatch {
    idle: u32,
    since: Option<std::time::Instant>,
    limit: std::time::Duration,
    what: &'static str,
}

impl IdleWatch {
    pub fn new(limit: std::time::Duration, what: &'static str) -> Self {
        IdleWatch {
            idle: 0,
            since: None,
            limit,
            what,
        }
    }

    /// Something happened.
    #[inline(always)]
    pub fn busy(&mut self) {
        self.idle = 0;
        self.since = None;
    }

    /// Nothing happened in a pass that slept a whole slice on a completion
    /// channel (`--events`): check the control channel and the limit now,
    /// not after 4096 such passes.
    pub fn slept(&mut self) -> Result<bool> {
        self.idle |= 4095;
        self.idle()
    }

    /// Nothing happened this pass: true when it is time to poll the control
    /// channel (every 4096 idle passes).
    #[inline]
    pub fn idle(&mut self) -> Result<bool> {
        self.idle = self.idle.wrapping_add(1);
        if self.idle % 4096 != 0 {
            return Ok(false);
        }
        if aborted() {
            return Err(Error::Interrupted);
        }
        let now = std::time::Instant::now();
        match self.since {
            None => self.since = Some(now),
            Some(t) if now - t > self.limit => {
                return Err(Error::Timeout {
                    what: self.what.into(),
                    secs: self.limit.as_secs_f64(),
                })
            }
            Some(_) => {}
        }
        Ok(true)
    }
}

pub struct Patience {
    clock: Clock,
    limit_ticks: u64,
    limit_s: f64,
}

impl Patience {
    pub fn new(clock: Clock, timeout_s: f64) -> Self {
        Self {
            clock,
            limit_ticks: clock.ticks(std::time::Duration::from_secs_f64(timeout_s)),
            limit_s: timeout_s,
        }
    }

    /// Spins until `poll` yields a value. The clock is read only every 1024
    /// spins, so waiting costs almost nothing when the answer is quick.
    #[inline(always)]
    pub fn wait<T>(
        &self,
        what: impl Fn() -> String,
        mut poll: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let mut spins = 0u32;
        let mut start = 0u64;
        loop {
            if let Some(v) = poll()? {
                return Ok(v);
            }
            spins = spins.wrapping_add(1);
            if spins & 1023 == 0 {
                if aborted() {
                    return Err(Error::Interrupted);
                }
                let now = self.clock.now();
                if start == 0 {
                    start = now;
                } else if now.wrapping_sub(start) > self.limit_ticks {
                    return Err(self.timeout(what()));
                }
            }
            // No PAUSE hint: it costs ~140 cycles on recent x86 (and exits the
            // translation loop under qemu TCG), which would land in every
            // latency sample; perftest's polls spin bare too.
        }
    }

    /// `--events`: polls `cq` into `out` and, while it is empty, sleeps on
    /// its completion channel `ch` instead of spinning. Arms the CQ, then
    /// polls once more before sleeping (a completion that landed before the
    /// arming raises no event), and sleeps in slices of `EVENT_SLICE_MS`,
    /// giving up after the timeout or on abort. Returns how many completions
    /// were polled (at least one).
    pub fn sleep_for(
        &self,
        cq: &CompletionQueue,
        ch: &CompletionChannel,
        out: &mut [WorkCompletion],
        what: impl Fn() -> String,
    ) -> Result<usize> {
        let mut start = None;
        loop {
            let n = cq.poll(out)?;
            if n > 0 {
                return Ok(n);
            }
            cq.arm()?;
            let n = cq.poll(out)?;
            if n > 0 {
                return Ok(n);
            }
            if ch.wait(EVENT_SLICE_MS)?.is_none() {
                if aborted() {
                    return Err(Error::Interrupted);
                }
                let now = self.clock.now();
                let since = *start.get_or_insert(now);
                if now.wrapping_sub(since) > self.limit_ticks {
                    return Err(self.timeout(what()));
                }
            }
        }
    }

    /// For loops that poll several things: fails when nothing has moved since
    /// `last_progress` (a clock reading) for longer than the timeout.
    #[inline]
    pub fn check_stall(
        &self,
        last_progress: u64,
        now: u64,
        what: impl Fn() -> String,
    ) -> Result<()> {
        if aborted() {
            return Err(Error::Interrupted);
        }
        if now.wrapping_sub(last_progress) > self.limit_ticks {
            return Err(self.timeout(what()));
        }
        Ok(())
    }

    #[cold]
    fn timeout(&self, what: String) -> Error {
        Error::Timeout {
            what,
            secs: self.limit_s,
        }
    }
}
