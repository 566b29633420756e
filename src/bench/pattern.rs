//! `--validate`'s payload pattern: byte `o` of WR `seq` on QP `qp` is a
//! hash of the three, so a payload that is stale (another sequence),
//! misplaced (another QP or offset) or damaged (one flipped byte) differs
//! from what its receiver expects. Filling and checking run outside the
//! timed spans (or the record says what they cost); both are plain loops
//! over bytes, with no allocation.

/// SplitMix64's finaliser: every input bit moves every output bit.
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 64-bit seed of one WR's payload.
#[inline(always)]
fn seed(qp: u32, seq: u64) -> u64 {
    mix(mix(u64::from(qp).wrapping_add(0x9e37_79b9_7f4a_7c15)) ^ seq)
}

/// The pattern's 8-byte word `w` (bytes `8w..8w+8`) of WR `seq` on QP `qp`.
#[inline(always)]
fn word(seed: u64, w: u64) -> [u8; 8] {
    mix(seed.wrapping_add(w.wrapping_mul(0x9e37_79b9_7f4a_7c15))).to_le_bytes()
}

/// Byte `offset` of WR `seq`'s payload on QP `qp`.
pub fn byte(qp: u32, seq: u64, offset: u32) -> u8 {
    word(seed(qp, seq), u64::from(offset) / 8)[offset as usize % 8]
}

/// Writes WR `seq`'s pattern for QP `qp` into `buf` (its whole payload).
pub fn fill(buf: &mut [u8], qp: u32, seq: u64) {
    let s = seed(qp, seq);
    for (w, chunk) in buf.chunks_mut(8).enumerate() {
        let bytes = word(s, w as u64);
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// One WR's pattern, word by word, for a payload that is not a slice (a
/// registered region the NIC writes, read and written through atomics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern(u64);

impl Pattern {
    /// WR `seq`'s pattern on QP `qp`.
    #[inline(always)]
    pub fn of(qp: u32, seq: u64) -> Pattern {
        Pattern(seed(qp, seq))
    }

    /// Bytes `8w..8w+8` of the payload.
    #[inline(always)]
    pub fn word(self, w: usize) -> [u8; 8] {
        word(self.0, w as u64)
    }
}

/// Writes WR `seq`'s pattern for QP `qp` into `len` bytes of `mr` at `at`,
/// word by word through the region's own accessors: no copy, no allocation,
/// so a loop may refill a payload between two samples.
pub fn fill_region(mr: &crate::verbs::MemoryRegion, at: usize, len: usize, qp: u32, seq: u64) {
    let p = Pattern::of(qp, seq);
    for w in 0..len.div_ceil(8) {
        let base = at + 8 * w;
        for (i, &b) in p.word(w).iter().enumerate().take(len - 8 * w) {
            mr.write_u8(base + i, b);
        }
    }
}

/// What one payload's check found: how many bytes were wrong, and the
/// first of them (offset, expected, found).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mismatch {
    pub wrong: u64,
    pub offset: u32,
    pub expected: u8,
    pub found: u8,
}

/// Checks `buf` against WR `seq`'s pattern for QP `qp`; `None` when every
/// byte is right. `skip` names offsets the loop itself owns (a latency
/// marker byte), which are not compared.
pub fn check(buf: &[u8], qp: u32, seq: u64, skip: Option<usize>) -> Option<Mismatch> {
    let s = seed(qp, seq);
    let mut first: Option<Mismatch> = None;
    let mut wrong = 0u64;
    for (w, chunk) in buf.chunks(8).enumerate() {
        let bytes = word(s, w as u64);
        if chunk == &bytes[..chunk.len()] {
            continue;
        }
        for (i, (&found, &expected)) in chunk.iter().zip(&bytes).enumerate() {
            let offset = w * 8 + i;
            if found == expected || skip == Some(offset) {
                continue;
            }
            wrong += 1;
            first.get_or_insert(Mismatch {
                wrong: 0,
                offset: offset as u32,
                expected,
                found,
            });
        }
    }
    first.map(|m| Mismatch { wrong, ..m })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_payload_checks_and_matches_byte() {
        let mut buf = vec![0u8; 37];
        fill(&mut buf, 3, 9);
        assert_eq!(check(&buf, 3, 9, None), None);
        for (o, &b) in buf.iter().enumerate() {
            assert_eq!(byte(3, 9, o as u32), b);
        }
    }

    #[test]
    fn stale_misplaced_and_flipped_payloads_fail() {
        let mut buf = vec![0u8; 64];
        fill(&mut buf, 1, 100);
        // Another sequence, another QP: (nearly) every byte differs.
        assert!(check(&buf, 1, 101, None).unwrap().wrong > 48);
        assert!(check(&buf, 2, 100, None).unwrap().wrong > 48);
        // Shifted by one byte (a wrong offset).
        assert!(check(&buf[1..], 1, 100, None).is_some());
        // One flipped byte is found exactly.
        buf[17] ^= 0x40;
        let m = check(&buf, 1, 100, None).unwrap();
        assert_eq!((m.wrong, m.offset, m.found ^ m.expected), (1, 17, 0x40));
        // ...unless it is the byte the loop owns.
        assert_eq!(check(&buf, 1, 100, Some(17)), None);
    }

    #[test]
    fn pattern_words_are_the_filled_bytes() {
        let mut buf = vec![0u8; 21];
        fill(&mut buf, 4, 77);
        let p = Pattern::of(4, 77);
        let words: Vec<u8> = (0..3).flat_map(|w| p.word(w)).collect();
        assert_eq!(&words[..21], &buf[..]);
    }

    #[test]
    fn two_byte_payloads_differ_between_sequences() {
        // The smallest payload still tells most consecutive WRs apart.
        let same = (0..1000u64)
            .filter(|&k| byte(0, k, 0) == byte(0, k + 1, 0) && byte(0, k, 1) == byte(0, k + 1, 1))
            .count();
        assert!(same < 5, "{same}");
    }
}
