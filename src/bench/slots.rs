//! Where in the peer's region each WR of a QP lands (`--region`,
//! `--offsets`): always its first slot, slot after slot, or slots drawn at
//! random. Random slots come from a ring filled by a xorshift PRNG when the
//! QP connects, so the measured loop only reads the next entry: no
//! allocation, no syscall, a handful of instructions per WR.

use crate::spec::Offsets;

/// Entries in a QP's ring of random remote addresses (a power of two, so
/// wrapping is a mask). 64 Ki addresses = 512 KiB per QP, drawn afresh each point.
pub const RING_MAX: usize = 1 << 16;

/// One QP's sequence of remote addresses.
pub struct RemoteSlots {
    offsets: Offsets,
    base: u64,
    stride: u64,
    /// Sequential: the next address; its end wraps to `base`.
    next: u64,
    end: u64,
    /// Random: precomputed addresses, read at `at & (len - 1)`.
    ring: Box<[u64]>,
    at: usize,
}

/// Bytes between slots: the payload rounded up to a cache line (at least one).
pub fn slot_stride(size: u32) -> u64 {
    u64::from(size.max(1)).div_ceil(64) * 64
}

impl RemoteSlots {
    /// The slots of a region of `len` bytes at `base`, one every
    /// [`slot_stride`]`(size)`; `seed` varies the random draw between QPs.
    pub fn new(offsets: Offsets, base: u64, len: u64, size: u32, seed: u64) -> RemoteSlots {
        let stride = slot_stride(size);
        let slots = (len / stride).max(1);
        let ring: Box<[u64]> = match offsets {
            Offsets::Random => {
                // Four draws per slot (up to the ring's size) so the ring covers the region.
                let n =
                    (slots.saturating_mul(4).next_power_of_two() as usize).clamp(1024, RING_MAX);
                let mut rng = XorShift::new(seed);
                (0..n).map(|_| base + rng.below(slots) * stride).collect()
            }
            _ => Box::new([]),
        };
        RemoteSlots {
            offsets,
            base,
            stride,
            next: base,
            end: base + slots * stride,
            ring,
            at: 0,
        }
    }

    /// Whether the address changes from WR to WR (not `fixed`).
    pub fn moves(&self) -> bool {
        self.offsets != Offsets::Fixed
    }

    /// The remote address of the next WR.
    #[inline(always)]
    pub fn next_addr(&mut self) -> u64 {
        match self.offsets {
            Offsets::Fixed => self.base,
            Offsets::Sequential => {
                let a = self.next;
                self.next += self.stride;
                if self.next >= self.end {
                    self.next = self.base;
                }
                a
            }
            Offsets::Random => {
                let a = self.ring[self.at & (self.ring.len() - 1)];
                self.at = self.at.wrapping_add(1);
                a
            }
        }
    }
}

/// xorshift64* (Vigna): fast, and plenty uniform for picking slots.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        // Any non-zero state works; mix the seed so nearby seeds diverge.
        XorShift((seed ^ 0x9E37_79B9_7F4A_7C15).max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in 0..n (Lemire's multiply-shift; n ≥ 1).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// A seed that differs between points and QPs (the ring is drawn anew each point).
pub fn seed(q: usize) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(q);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn fixed_stays_on_the_first_slot() {
        let mut s = RemoteSlots::new(Offsets::Fixed, 4096, 1 << 20, 64, 1);
        assert!(!s.moves());
        assert!((0..100).all(|_| s.next_addr() == 4096));
    }

    #[test]
    fn sequential_walks_every_slot_and_wraps() {
        let mut s = RemoteSlots::new(Offsets::Sequential, 1000, 640, 60, 1);
        let a: Vec<u64> = (0..12).map(|_| s.next_addr()).collect();
        assert_eq!(
            a[..10],
            (0..10).map(|i| 1000 + 64 * i).collect::<Vec<_>>()[..]
        );
        assert_eq!(a[10..], [1000, 1064]);
    }

    #[test]
    fn random_stays_inside_the_region_on_slot_boundaries_and_spreads() {
        let (base, len, size) = (1 << 30, 1 << 20, 100);
        let mut s = RemoteSlots::new(Offsets::Random, base, len, size, 7);
        let stride = slot_stride(size);
        let mut seen = HashSet::new();
        for _ in 0..RING_MAX {
            let a = s.next_addr();
            assert!(a >= base && a + u64::from(size) <= base + len, "{a}");
            assert_eq!((a - base) % stride, 0);
            seen.insert(a);
        }
        // 8192 slots, a ring of 32768 uniform draws: it misses e^-4 of them.
        assert!(seen.len() > 7800, "{}", seen.len());
        // Another seed, another sequence.
        let mut t = RemoteSlots::new(Offsets::Random, base, len, size, 8);
        let mut s = RemoteSlots::new(Offsets::Random, base, len, size, 7);
        assert!((0..64).any(|_| s.next_addr() != t.next_addr()));
    }

    #[test]
    fn a_region_of_one_slot_always_targets_it() {
        for o in [Offsets::Sequential, Offsets::Random] {
            let mut s = RemoteSlots::new(o, 64, 100, 64, 3);
            assert!((0..50).all(|_| s.next_addr() == 64));
        }
    }
}
