//! The bookkeeping every throughput loop shares: how a WR's id names its QP
//! and sequence number, how many WRs each QP has posted and completed, and
//! receives reposted in batches.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::verbs::{CompletionQueue, QueuePair, RecvList, SharedReceiveQueue, WorkCompletion};

/// Receives reposted per batch on a sink or echo receiver.
pub const RECV_BATCH: u32 = 32;
/// Completions polled per `ibv_poll_cq`.
const POLL_BATCH: usize = 32;

/// A work request's id: the index of its QP within the set above `SEQ_BITS`,
/// its 1-based sequence number on that QP below (48 bits: no wrap in any run
/// a person would wait for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrId;

impl WrId {
    const SEQ_BITS: u32 = 48;
    const SEQ_MASK: u64 = (1 << Self::SEQ_BITS) - 1;

    #[inline(always)]
    pub fn pack(qp: usize, seq: u64) -> u64 {
        ((qp as u64) << Self::SEQ_BITS) | (seq & Self::SEQ_MASK)
    }

    #[inline(always)]
    pub fn qp(id: u64) -> usize {
        (id >> Self::SEQ_BITS) as usize
    }

    #[inline(always)]
    pub fn seq(id: u64) -> u64 {
        id & Self::SEQ_MASK
    }
}

/// Send-queue accounting for a group of QPs sharing one send CQ. WRs are
/// numbered 1, 2, … per QP; a signaled completion for WR #n retires every
/// earlier WR of that QP (a send queue completes in order).
pub struct SendTracker {
    pub posted: Vec<u64>,
    pub completed: Vec<u64>,
    /// Send completions polled so far (signaled WRs).
    pub completions: u64,
    wcs: [WorkCompletion; POLL_BATCH],
}

impl SendTracker {
    pub fn new(qps: usize) -> Self {
        SendTracker {
            posted: vec![0; qps],
            completed: vec![0; qps],
            completions: 0,
            wcs: [WorkCompletion::default(); POLL_BATCH],
        }
    }

    /// WRs of QP `q` posted and not yet known to be complete.
    #[inline(always)]
    pub fn outstanding(&self, q: usize) -> u64 {
        self.posted[q] - self.completed[q]
    }

    /// Polls `cq` once; every completion must be a success (`verb` names
    /// the operation in the error). Returns how many were polled.
    #[inline(always)]
    pub fn reap(&mut self, cq: &CompletionQueue, verb: &'static str) -> Result<usize> {
        let k = cq.poll(&mut self.wcs)?;
        for (i, wc) in self.wcs[..k].iter().enumerate() {
            if !wc.is_success() {
                return Err(first_failure(wc, &self.wcs[i + 1..k], cq, verb));
            }
            self.completed[WrId::qp(wc.wr_id())] = WrId::seq(wc.wr_id());
        }
        self.completions += k as u64;
        Ok(k)
    }

    /// Whether every QP has completed at least the WRs in `target`.
    pub fn reached(&self, target: &[u64]) -> bool {
        self.completed.iter().zip(target).all(|(c, t)| c >= t)
    }
}

/// Receives kept posted on a group of QPs: one prebuilt list of `batch` WRs
/// per QP, reposted whenever that many have been consumed. A receive's wr_id
/// names its QP (`WrId::qp`). With a shared receive queue (`shared`), one
/// list serves every QP and is reposted on the SRQ whenever that many
/// receives have been consumed on any of them. A rotating ring
/// (`--validate`) holds `per` lists per QP (or SRQ), each over buffers of
/// its own, posted in turn, so no two receives outstanding share a buffer
/// and a payload stays put until its receive is checked and reposted.
pub struct RecvRing {
    lists: Vec<RecvList>,
    consumed: Vec<u32>,
    batch: u32,
    shared: Option<Arc<SharedReceiveQueue>>,
    /// Lists per QP (or for the SRQ), and the one each reposts next.
    per: usize,
    turns: Vec<usize>,
}

impl RecvRing {
    /// `lists[q]`: the batch list of QP `q` (every list the same length).
    pub fn new(lists: Vec<RecvList>) -> Self {
        Self::rotating(lists, 1)
    }

    /// `lists[q * per..][..per]`: QP `q`'s lists, posted in turn.
    pub fn rotating(lists: Vec<RecvList>, per: usize) -> Self {
        let batch = lists.first().map_or(1, |l| l.len() as u32);
        let qps = lists.len() / per.max(1);
        RecvRing {
            consumed: vec![0; qps],
            lists,
            batch,
            shared: None,
            per: per.max(1),
            turns: vec![0; qps],
        }
    }

    /// One batch `list` reposted on `srq` for every QP that draws from it.
    pub fn shared(srq: Arc<SharedReceiveQueue>, list: RecvList) -> Self {
        Self::shared_rotating(srq, vec![list])
    }

    /// `lists` posted in turn on `srq`.
    pub fn shared_rotating(srq: Arc<SharedReceiveQueue>, lists: Vec<RecvList>) -> Self {
        let per = lists.len();
        RecvRing {
            shared: Some(srq),
            ..RecvRing::rotating(lists, per)
        }
    }

    /// Posts `batches` whole batches on every QP, or on the SRQ (setup,
    /// before the peer sends).
    pub fn fill(&mut self, qps: &mut [QueuePair], batches: u32) -> Result<()> {
        let per = self.per;
        if let Some(srq) = &self.shared {
            for b in 0..batches as usize {
                srq.post_recv(&mut self.lists[b % per])?;
            }
            self.turns[0] = batches as usize % per;
            return Ok(());
        }
        for (q, qp) in qps.iter_mut().enumerate().take(self.turns.len()) {
            for b in 0..batches as usize {
                qp.post_recv(&mut self.lists[q * per + b % per])?;
            }
            self.turns[q] = batches as usize % per;
        }
        Ok(())
    }

    /// Notes one receive consumed on QP `q` (posted on `qp`); reposts its
    /// batch (on the SRQ, whichever QP consumed it) when a whole batch has
    /// been used.
    #[inline(always)]
    pub fn consumed(&mut self, q: usize, qp: &mut QueuePair) -> Result<()> {
        if let Some(srq) = &self.shared {
            self.consumed[0] += 1;
            if self.consumed[0] == self.batch {
                self.consumed[0] = 0;
                srq.post_recv(&mut self.lists[self.turns[0]])?;
                self.turns[0] = (self.turns[0] + 1) % self.per;
            }
            return Ok(());
        }
        self.consumed[q] += 1;
        if self.consumed[q] == self.batch {
            self.consumed[q] = 0;
            qp.post_recv(&mut self.lists[q * self.per + self.turns[q]])?;
            self.turns[q] = (self.turns[q] + 1) % self.per;
        }
        Ok(())
    }
}

/// A receive polled from a CQ, reduced to what the loops use.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub qp: usize,
    pub imm: Option<u32>,
}

/// Receive completions polled in batches, with their scratch space
/// allocated once outside the loop.
pub struct ArrivalBuf {
    wcs: [WorkCompletion; POLL_BATCH],
    pub got: [Arrival; POLL_BATCH],
    /// With a shared receive queue a receive's wr_id cannot name the QP
    /// that consumed it: (qp_num, index) of every QP, sorted by qp_num.
    by_qpn: Vec<(u32, usize)>,
}

impl ArrivalBuf {
    pub fn new() -> Self {
        ArrivalBuf {
            wcs: [WorkCompletion::default(); POLL_BATCH],
            got: [Arrival { qp: 0, imm: None }; POLL_BATCH],
            by_qpn: Vec::new(),
        }
    }

    /// Arrivals on QPs that share a receive queue: each is attributed to
    /// its QP by the completion's qp_num (`qpns[i]` is QP i's number).
    pub fn by_qp_num(qpns: &[u32]) -> Self {
        let mut by_qpn: Vec<(u32, usize)> = qpns.iter().copied().zip(0..).collect();
        by_qpn.sort_unstable();
        ArrivalBuf {
            by_qpn,
            ..ArrivalBuf::new()
        }
    }

    /// The index of the QP a receive completion belongs to.
    #[inline(always)]
    fn qp_of(&self, wr_id: u64, qpn: u32) -> Result<usize> {
        if self.by_qpn.is_empty() {
            return Ok(WrId::qp(wr_id));
        }
        match self.by_qpn.binary_search_by_key(&qpn, |&(n, _)| n) {
            Ok(i) => Ok(self.by_qpn[i].1),
            Err(_) => Err(stray(qpn)),
        }
    }

    /// The wr_id of arrival `i` of the last poll (which buffer it filled).
    #[inline(always)]
    pub fn wr_id(&self, i: usize) -> u64 {
        self.wcs[i].wr_id()
    }

    /// Polls `cq` once; the arrivals are `self.got[..n]`. Every one must be
    /// a success.
    #[inline(always)]
    pub fn poll(&mut self, cq: &CompletionQueue) -> Result<usize> {
        let k = cq.poll(&mut self.wcs)?;
        for i in 0..k {
            let wc = &self.wcs[i];
            if !wc.is_success() {
                return Err(first_failure(wc, &self.wcs[i + 1..k], cq, "RECV"));
            }
            self.got[i] = Arrival {
                qp: self.qp_of(wc.wr_id(), wc.qp_num())?,
                imm: wc.imm(),
            };
        }
        Ok(k)
    }

    /// Whether a poll that returned `k` arrivals emptied the CQ (a full
    /// batch may have left more behind).
    pub fn drained(&self, k: usize) -> bool {
        k < POLL_BATCH
    }
}

/// Batches polled past a flush looking for the completion that caused it.
const CAUSE_POLLS: usize = 4096;

/// The error for failed completion `wc` (posted as `verb`), polled from `cq`
/// with `rest` after it in the same batch. A flush only says that its QP
/// had already gone to the error state: the completion that put it there
/// may come later on the same CQ, so the rest of the batch and then the CQ
/// (a bounded drain; the run is over) are searched for the first failure
/// that is not a flush, which is reported instead.
#[cold]
fn first_failure(
    wc: &WorkCompletion,
    rest: &[WorkCompletion],
    cq: &CompletionQueue,
    verb: &'static str,
) -> Error {
    let flush = match wc.check(verb) {
        Err(e) if e.is_flush() => e,
        Err(e) => return e.into(),
        Ok(()) => unreachable!("first_failure is only called for a failed completion"),
    };
    let later = rest.iter().find(|w| !w.is_success() && !w.is_flush());
    if let Some(Err(cause)) = later.map(|w| w.check(verb)) {
        return cause.into();
    }
    match cause_on(cq, verb) {
        Some(cause) => cause,
        None => Error::Verbs(flush),
    }
}

/// The first failed completion on `cq` that is not a flush, polling at most
/// `CAUSE_POLLS` batches.
#[cold]
fn cause_on(cq: &CompletionQueue, verb: &'static str) -> Option<Error> {
    let mut wcs = [WorkCompletion::default(); POLL_BATCH];
    for _ in 0..CAUSE_POLLS {
        let k = cq.poll(&mut wcs).ok()?;
        if k == 0 {
            return None;
        }
        if let Some(w) = wcs[..k].iter().find(|w| !w.is_success() && !w.is_flush()) {
            return w.check(verb).err().map(Error::from);
        }
    }
    None
}

/// `err` from one of a QP set's CQs; when it is a flush, the set's `other`
/// CQ (WRs posted there as `verb`) is searched for the failure behind it
/// (a QP's sends and receives complete on different CQs, and either may
/// carry the cause). A flush with no cause on either CQ says so: its QP went
/// to the error state without a completion naming why, which is what a
/// completion queue that overflowed does on rxe.
#[cold]
pub fn name_the_cause(err: Error, other: &CompletionQueue, verb: &'static str) -> Error {
    match err {
        Error::Verbs(v) if v.is_flush() => match cause_on(other, verb) {
            Some(cause) => cause,
            None => Error::Verbs(v.with_note(FLUSH_ONLY)),
        },
        other => other,
    }
}

const FLUSH_ONLY: &str = "; no completion on its QP's CQs failed otherwise: the QP went to the error state without one naming why (e.g. a completion queue overflowed)";

#[cold]
fn stray(qpn: u32) -> Error {
    Error::Verification(format!(
        "a receive completion named QP {qpn}, which does not draw from this shared receive queue"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_arrivals_are_attributed_by_qp_num() {
        let b = ArrivalBuf::by_qp_num(&[907, 17, 4242]);
        // The wr_id (QP 0's) is ignored: the SRQ's receives name no QP.
        for (qpn, want) in [(907, 0), (17, 1), (4242, 2)] {
            assert_eq!(b.qp_of(WrId::pack(0, 3), qpn).unwrap(), want);
        }
        assert!(b.qp_of(0, 5).is_err());
        assert_eq!(ArrivalBuf::new().qp_of(WrId::pack(2, 3), 907).unwrap(), 2);
    }

    #[test]
    fn wr_ids_round_trip() {
        for (q, seq) in [(0, 1), (5, 12345), (1023, (1 << 48) - 1)] {
            let id = WrId::pack(q, seq);
            assert_eq!((WrId::qp(id), WrId::seq(id)), (q, seq));
        }
        assert_ne!(WrId::pack(1, 1), WrId::pack(0, 1));
    }
}
