//! `--validate` for throughput: where each WR's payload comes from, and the
//! checker the receiving side (SEND and WRITE targets, READ issuers) runs
//! over what arrived.
//!
//! The issuer's WRs are prebuilt and reposted unchanged, so a WR's pattern
//! sequence is its slot in a ring of `ring_slots` distinct source slots per
//! QP: WR `seq` (1-based) of a QP carries `bench::pattern`'s bytes for
//! (the QP's index in the run, `(seq - 1) % ring_slots`). Consecutive WRs of
//! a QP differ, so a stale payload (an older WR's) or a misplaced one
//! (another QP's) fails as a flipped byte does.

use crate::report::{CorruptWr, Validation};
use crate::spec::TputPoint;
use crate::verbs::MemoryRegion;

use super::super::ops::{test_fault, Fault};
use super::super::pattern;

/// At most this many distinct source slots per issuer QP (a ring of
/// `--postlist`-long prebuilt lists): enough for consecutive WRs to differ,
/// little enough that the extra memory stays small.
const RING_MAX: usize = 16;

/// Source slots per issuer QP under `--validate`: whole postlists, as many
/// as fit in min(window, 16) (at least one).
pub fn ring_slots(p: &TputPoint) -> usize {
    let pl = p.postlist.max(1) as usize;
    (RING_MAX.min(p.window as usize) / pl).max(1) * pl
}

/// The pattern sequence WR `seq` (1-based) of a QP carries.
#[inline(always)]
pub fn slot_of(seq: u64, slots: usize) -> u64 {
    seq.saturating_sub(1) % slots as u64
}

/// The last WR (1-based) at or before `posted` that used source slot `k`
/// (0 when none did).
pub fn last_wr_of_slot(posted: u64, slots: usize, k: u64) -> u64 {
    if posted == 0 || posted - 1 < k {
        return 0;
    }
    let last = posted - 1;
    last - (last - k) % slots as u64 + 1
}

/// Copies `out.len()` bytes of `mr` from `offset` into `out`, in 8-byte
/// words where aligned (payload slots are).
#[inline]
fn read_into(mr: &MemoryRegion, offset: usize, out: &mut [u8]) {
    let mut i = 0;
    while i < out.len() && (offset + i) % 8 != 0 {
        out[i] = mr.read_u8(offset + i);
        i += 1;
    }
    while i + 8 <= out.len() {
        out[i..i + 8].copy_from_slice(&mr.read_u64(offset + i).to_ne_bytes());
        i += 8;
    }
    while i < out.len() {
        out[i] = mr.read_u8(offset + i);
        i += 1;
    }
}

/// Checks payloads against the pattern and sums what it found. The scratch
/// copy is allocated once, so checking inside a loop allocates nothing.
pub struct Checker {
    v: Validation,
    scratch: Vec<u8>,
    /// `RDMA_BENCH_TEST_FAULT=payload-byte`: the first payload checked on
    /// QP 0 whose WR is at least this one gets one byte flipped (in the
    /// copy that is checked, so the NIC's memory is never raced).
    fault_from: Option<u64>,
    /// The flip made: (QP, WR, byte), reported by `finish`.
    flipped: Option<(u32, u64, usize)>,
    side: &'static str,
    /// A byte the loop owns in every payload (echo's marker), not compared.
    skip: Option<usize>,
}

/// The WR the fault hook picks among payloads checked as they arrive.
pub const FAULT_WR: u64 = 17;

impl Checker {
    /// A checker of `size`-byte payloads; `how` goes into the record.
    /// `fault_from`: the first WR the fault hook may pick (`FAULT_WR` for
    /// payloads checked as they arrive, 0 for memory checked at the end).
    pub fn new(size: u32, how: String, fault_from: u64, side: &'static str) -> Self {
        Checker {
            v: Validation {
                how,
                ..Validation::default()
            },
            scratch: vec![0u8; size as usize],
            fault_from: (test_fault(Fault::PayloadByte) && size > 0).then_some(fault_from),
            flipped: None,
            side,
            skip: None,
        }
    }

    /// The same checker, leaving byte `at` of each payload uncompared.
    pub fn skipping(mut self, at: usize) -> Self {
        self.skip = Some(at);
        self
    }

    /// Copies the payload at `offset` of `mr` and applies the fault hook.
    #[inline]
    fn load(&mut self, mr: &MemoryRegion, offset: usize, qp: u32, wr: u64) {
        read_into(mr, offset, &mut self.scratch);
        if let (Some(from), None, 0) = (self.fault_from, self.flipped, qp) {
            if wr >= from {
                let byte = match 3.min(self.scratch.len() - 1) {
                    b if Some(b) == self.skip => 0,
                    b => b,
                };
                self.scratch[byte] ^= 0x01;
                self.flipped = Some((qp, wr, byte));
            }
        }
    }

    /// Whether the payload-sized slot at `offset` is all zero (never written).
    pub fn is_blank(&mut self, mr: &MemoryRegion, offset: usize) -> bool {
        read_into(mr, offset, &mut self.scratch);
        self.scratch.iter().all(|&b| b == 0)
    }

    /// Checks WR `wr` of QP `qp`, expected to carry pattern sequence `seq`;
    /// also accepts any other sequence in `seq..seq + alternatives` modulo
    /// `modulo` (an unreliable transport's lost messages, a WRITE slot any
    /// of its QP's WRs may hold). Returns the sequence matched, if any.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &mut self,
        mr: &MemoryRegion,
        offset: usize,
        qp: u32,
        wr: u64,
        seq: u64,
        alternatives: u64,
        modulo: u64,
    ) -> Option<u64> {
        self.load(mr, offset, qp, wr);
        self.v.validated_wrs += 1;
        self.v.validated_bytes += self.scratch.len() as u64;
        let Some(miss) = pattern::check(&self.scratch, qp, seq, self.skip) else {
            return Some(seq);
        };
        for a in 1..alternatives {
            let s = (seq + a) % modulo.max(1);
            if pattern::check(&self.scratch, qp, s, self.skip).is_none() {
                return Some(s);
            }
        }
        self.v.corrupt_wrs += 1;
        self.v.corrupt_bytes += miss.wrong;
        self.v.first_corrupt.get_or_insert(CorruptWr {
            qp,
            wr,
            offset: miss.offset,
            expected: miss.expected,
            found: miss.found,
        });
        None
    }

    /// What was checked; the fault hook's note goes to stderr now (never
    /// from inside a measured loop).
    pub fn finish(self) -> Validation {
        if let Some((qp, wr, byte)) = self.flipped {
            eprintln!(
                "test fault payload-byte: flipped byte {byte} of WR {wr} on QP {qp} ({})",
                self.side
            );
        }
        self.v
    }
}

/// Sums per-side validations into one (`None` when none checked anything).
pub fn merge<'a>(parts: impl IntoIterator<Item = &'a Option<Validation>>) -> Option<Validation> {
    let mut all: Option<Validation> = None;
    for v in parts.into_iter().flatten() {
        match &mut all {
            None => all = Some(v.clone()),
            Some(a) => {
                a.absorb(v);
                if !v.how.is_empty() && !a.how.contains(&v.how) {
                    a.how = format!("{}; {}", a.how, v.how);
                }
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_ring_and_last_writer() {
        assert_eq!(
            (1..=5).map(|s| slot_of(s, 4)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 0]
        );
        assert_eq!(last_wr_of_slot(5, 4, 0), 5);
        assert_eq!(last_wr_of_slot(5, 4, 3), 4);
        assert_eq!(last_wr_of_slot(2, 4, 3), 0);
        assert_eq!(last_wr_of_slot(0, 4, 0), 0);
        for posted in 1..40 {
            for k in 0..4 {
                let w = last_wr_of_slot(posted, 4, k);
                if w > 0 {
                    assert_eq!(slot_of(w, 4), k);
                    assert!(w <= posted && posted - w < 4);
                }
            }
        }
    }

    #[test]
    fn merged_validations_sum_and_keep_the_first_corrupt_wr() {
        let a = Validation {
            validated_wrs: 3,
            how: "a".into(),
            ..Default::default()
        };
        let b = Validation {
            validated_wrs: 2,
            corrupt_wrs: 1,
            first_corrupt: Some(CorruptWr::default()),
            how: "b".into(),
            ..Default::default()
        };
        let m = merge([&Some(a), &None, &Some(b)]).unwrap();
        assert_eq!((m.validated_wrs, m.corrupt_wrs), (5, 1));
        assert!(m.first_corrupt.is_some());
        assert_eq!(m.how, "a; b");
        assert_eq!(merge([&None]), None);
    }
}
