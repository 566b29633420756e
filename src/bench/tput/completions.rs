//! The bookkeeping every throughput loop shares: how a WR's id names its QP
//! and sequence number, how many WRs each QP has posted and completed, and
//! receives reposted in batches.

use crate::error::Result;
use crate::verbs::{CompletionQueue, QueuePair, RecvList, WorkCompletion};

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
        for wc in &self.wcs[..k] {
            wc.check(verb)?;
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
/// names its QP (`WrId::qp`).
pub struct RecvRing {
    lists: Vec<RecvList>,
    consumed: Vec<u32>,
    batch: u32,
}

impl RecvRing {
    /// `lists[q]`: the batch list of QP `q` (every list the same length).
    pub fn new(lists: Vec<RecvList>) -> Self {
        let batch = lists.first().map_or(1, |l| l.len() as u32);
        RecvRing {
            consumed: vec![0; lists.len()],
            lists,
            batch,
        }
    }

    /// Posts `batches` whole batches on every QP (setup, before the peer sends).
    pub fn fill(&mut self, qps: &mut [QueuePair], batches: u32) -> Result<()> {
        for (qp, list) in qps.iter_mut().zip(&mut self.lists) {
            for _ in 0..batches {
                qp.post_recv(list)?;
            }
        }
        Ok(())
    }

    /// Notes one receive consumed on QP `q` (posted on `qp`); reposts its
    /// batch when a whole batch has been used.
    #[inline(always)]
    pub fn consumed(&mut self, q: usize, qp: &mut QueuePair) -> Result<()> {
        self.consumed[q] += 1;
        if self.consumed[q] == self.batch {
            self.consumed[q] = 0;
            qp.post_recv(&mut self.lists[q])?;
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
}

impl ArrivalBuf {
    pub fn new() -> Self {
        ArrivalBuf {
            wcs: [WorkCompletion::default(); POLL_BATCH],
            got: [Arrival { qp: 0, imm: None }; POLL_BATCH],
        }
    }

    /// Polls `cq` once; the arrivals are `self.got[..n]`. Every one must be
    /// a success.
    #[inline(always)]
    pub fn poll(&mut self, cq: &CompletionQueue) -> Result<usize> {
        let k = cq.poll(&mut self.wcs)?;
        for (wc, a) in self.wcs[..k].iter().zip(self.got.iter_mut()) {
            wc.check("RECV")?;
            *a = Arrival {
                qp: WrId::qp(wc.wr_id()),
                imm: wc.imm(),
            };
        }
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_ids_round_trip() {
        for (q, seq) in [(0, 1), (5, 12345), (1023, (1 << 48) - 1)] {
            let id = WrId::pack(q, seq);
            assert_eq!((WrId::qp(id), WrId::seq(id)), (q, seq));
        }
        assert_ne!(WrId::pack(1, 1), WrId::pack(0, 1));
    }
}
