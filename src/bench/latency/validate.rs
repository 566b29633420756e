//! `--validate` for latency: each WR's payload carries the pattern of (QP 0,
//! its iteration), filled and checked in the registered region between
//! samples; the counts one side keeps; and the payload-byte fault hook.
//! Nothing here allocates: a check reads the region through its atomics.

use crate::report::{CorruptWr, Validation};
use crate::spec::{LatencyMode, LatencySpec, VerbKind};
use crate::verbs::MemoryRegion;

use super::super::ops::{test_fault, Fault, Role};
use super::super::pattern::Pattern;
use super::{server_part, ServerPart, RQ_DEPTH};

/// A latency run has one QP pair: every pattern is QP 0's, in both directions.
pub const QP: u32 = 0;

/// The fault hook damages the payload of the 11th measured iteration (so a
/// short `-D` run has it even where a round trip takes milliseconds, as in
/// an emulated guest) ...
const FAULT_AFTER_WARMUP: u64 = 10;
/// ... at this byte, or the last one below it that the loop does not own.
const FAULT_BYTE: usize = 3;

/// What a SEND sink's ring of receive buffers may take: one buffer per
/// posted receive up to the usual depth, fewer for large sizes (a sink
/// slower than its client then sees RNR retries, not overwritten buffers).
const SINK_RING_BYTES: usize = 8 << 20;

/// How many receive slots the server's receive area holds. Without
/// `--validate` one: every message lands in it. With it, a request must
/// not land where the server is still checking the previous one, so
/// WRITE and ECHO requests alternate between two slots, and SEND receives
/// each get a buffer of their own that is reposted only once checked.
pub fn recv_slots(spec: &LatencySpec, slot: usize) -> usize {
    if !spec.validate {
        return 1;
    }
    match server_part(spec) {
        ServerPart::Answer => 2,
        ServerPart::Sink if spec.verb == VerbKind::Send => {
            (SINK_RING_BYTES / slot).clamp(2, RQ_DEPTH as usize)
        }
        ServerPart::Sink | ServerPart::Passive => 1,
    }
}

/// Whether the server keeps its SEND receives in a ring of checked buffers.
pub fn recv_ring(spec: &LatencySpec) -> bool {
    spec.validate && spec.verb == VerbKind::Send && server_part(spec) != ServerPart::Passive
}

/// The side whose received payloads the fault hook damages: the server's
/// requests where it checks them before anything else reads them; the
/// client's answer for echo (the server's request buffer is also its
/// response), and the client's landing area for READ and atomics.
fn fault_side(spec: &LatencySpec) -> Role {
    match spec.verb {
        VerbKind::Echo | VerbKind::Read | VerbKind::Atomic => Role::Client,
        VerbKind::Write | VerbKind::Send => Role::Server,
    }
}

/// What the record's `validation.how` says for `spec` at one size.
pub fn how(spec: &LatencySpec, inline: bool, slots: usize) -> String {
    let signaled = if inline {
        ""
    } else {
        "; every WR is signaled and its completion reaped before its buffer is refilled (not inline: the NIC reads it until then)"
    };
    let per_wr = "each WR carries the pattern of (QP 0, its iteration), warm-up included";
    match (spec.mode, spec.verb) {
        (_, VerbKind::Atomic) => "the atomic result check: each returned value against the one expected, after its sample (validated_wrs = atomics checked, corrupt_wrs = verify_failures)".into(),
        (_, VerbKind::Read) => "the server's buffer holds the pattern of (QP 0, WR 0); the client checks each READ's landing area after its sample and clears it before the next, so a READ that moved nothing fails; samples exclude both".into(),
        (LatencyMode::PingPong, VerbKind::Echo) => format!(
            "{per_wr}; the client checks each response (it must equal its request) and fills its next request after its sample ends; the server checks each request after posting its echo; requests alternate between {slots} buffers; samples exclude the client's work, and the server's unless it outlasts the client's{signaled}"
        ),
        (LatencyMode::PingPong, _) => format!(
            "{per_wr}; the client checks each answer and fills its next request after its sample ends; the server checks each request and fills its next answer after posting its answer; requests land in {slots} buffers in turn; samples exclude the client's work, and the server's unless it outlasts the client's{signaled}"
        ),
        (LatencyMode::Completion, VerbKind::Send) => format!(
            "{per_wr}; the client fills each WR after the previous one's completion, between samples; the server checks each received buffer before reposting its receive (a ring of {slots} buffers)"
        ),
        (LatencyMode::Completion, _) => format!(
            "{per_wr}; the client fills each WR after the previous one's completion, between samples; the server checks its target memory after the point, which holds the last WR's payload only (a WRITE leaves no other trace)"
        ),
    }
}

/// Writes WR `seq`'s pattern into `len` bytes of `mr` at `at` (latency
/// runs one QP, numbered `QP`).
pub fn fill(mr: &MemoryRegion, at: usize, len: usize, seq: u64) {
    super::super::pattern::fill_region(mr, at, len, QP, seq);
}

/// One side's checks over one point.
pub struct Checks {
    on: bool,
    counts: Validation,
    /// The WR whose payload the fault hook damages, and where it lands.
    fault_at: Option<u64>,
    place: &'static str,
    flipped: Option<(u64, usize)>,
}

impl Checks {
    /// The checks `role` runs for `spec` (none without `--validate`).
    pub fn new(spec: &LatencySpec, role: Role) -> Checks {
        let on = spec.validate;
        let hooked = on && role == fault_side(spec) && test_fault(Fault::PayloadByte);
        let place = match (role, spec.verb, spec.mode) {
            (Role::Client, VerbKind::Read, _) => "the client's READ landing area",
            (Role::Client, VerbKind::Atomic, _) => "the client's atomic result",
            (Role::Client, ..) => "the client's receive buffer",
            (Role::Server, VerbKind::Write, LatencyMode::Completion) => {
                "the server's target memory, checked after the point"
            }
            (Role::Server, ..) => "the server's receive buffer",
        };
        Checks {
            on,
            counts: Validation::default(),
            fault_at: hooked.then_some(spec.warmup + FAULT_AFTER_WARMUP),
            place,
            flipped: None,
        }
    }

    pub fn on(&self) -> bool {
        self.on
    }

    /// Moves the fault hook to WR `wr` (a WRITE target checked once, after
    /// the point, holds the last WR only).
    pub fn aim_fault_at(&mut self, wr: u64) {
        if self.fault_at.is_some() {
            self.fault_at = Some(wr);
        }
    }

    /// The fault hook: flips one byte of WR `wr`'s payload (before it is
    /// checked), once.
    pub fn flip_if_due(&mut self, mr: &MemoryRegion, at: usize, len: usize, wr: u64, skip: bool) {
        if self.fault_at != Some(wr) || self.flipped.is_some() {
            return;
        }
        let owned = usize::from(skip);
        if len <= owned {
            return;
        }
        let offset = FAULT_BYTE.min(len - 1 - owned);
        mr.write_u8(at + offset, mr.read_u8(at + offset) ^ 0xff);
        self.flipped = Some((wr, offset));
    }

    /// Checks `len` bytes of `mr` at `at` (8-aligned) against pattern `seq`,
    /// counting them as WR `wr`'s; `skip`: the last byte is the loop's marker.
    pub fn check(
        &mut self,
        mr: &MemoryRegion,
        at: usize,
        len: usize,
        seq: u64,
        wr: u64,
        skip: bool,
    ) {
        self.flip_if_due(mr, at, len, wr, skip);
        debug_assert_eq!(at % 8, 0, "payloads start 8-aligned");
        let p = Pattern::of(QP, seq);
        let marker = skip.then(|| len.wrapping_sub(1));
        let mut wrong = 0u64;
        let mut first = None;
        let mut compare = |o: usize, expected: u8| {
            let found = mr.read_u8(at + o);
            if found != expected && marker != Some(o) {
                wrong += 1;
                first.get_or_insert((o, expected, found));
            }
        };
        let whole = len / 8;
        for w in 0..len.div_ceil(8) {
            let want = p.word(w);
            if w < whole && mr.read_u64(at + 8 * w) == u64::from_ne_bytes(want) {
                continue;
            }
            for (i, &b) in want.iter().enumerate().take(len - 8 * w) {
                compare(8 * w + i, b);
            }
        }
        self.count(wr, len as u64, wrong, first);
    }

    /// Counts one atomic's returned value (`found`) against `expected`.
    pub fn atomic(&mut self, wr: u64, expected: u64, found: u64) {
        let (e, f) = (expected.to_le_bytes(), found.to_le_bytes());
        let wrong = e.iter().zip(&f).filter(|(a, b)| a != b).count() as u64;
        let first = (0..8).find(|&i| e[i] != f[i]).map(|i| (i, e[i], f[i]));
        self.count(wr, 8, wrong, first);
    }

    fn count(&mut self, wr: u64, bytes: u64, wrong: u64, first: Option<(usize, u8, u8)>) {
        let c = &mut self.counts;
        c.validated_wrs += 1;
        c.validated_bytes += bytes;
        if let Some((offset, expected, found)) = first.filter(|_| wrong > 0) {
            c.corrupt_wrs += 1;
            c.corrupt_bytes += wrong;
            c.first_corrupt.get_or_insert(CorruptWr {
                qp: QP,
                wr,
                offset: offset as u32,
                expected,
                found,
            });
        }
    }

    /// The point's counts (`None` without `--validate`), after saying on
    /// stderr which byte the fault hook flipped, if it did (after the
    /// loop: the loop itself never prints).
    pub fn finish(self) -> Option<Validation> {
        if let Some((wr, offset)) = self.flipped {
            eprintln!(
                "test fault payload-byte: flipped byte {offset} of WR {wr} on QP {QP} ({})",
                self.place
            );
        }
        self.on.then_some(self.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_counts_name_the_first_wrong_byte() {
        let mut c = Checks {
            on: true,
            counts: Validation::default(),
            fault_at: None,
            place: "",
            flipped: None,
        };
        c.atomic(4, 7, 7);
        c.atomic(5, 0x0102, 0x0302);
        let v = c.finish().unwrap();
        assert_eq!((v.validated_wrs, v.validated_bytes), (2, 16));
        assert_eq!((v.corrupt_wrs, v.corrupt_bytes), (1, 1));
        let f = v.first_corrupt.unwrap();
        assert_eq!((f.wr, f.offset, f.expected, f.found), (5, 1, 1, 3));
    }
}
