//! Everything that depends on which verb is measured, in one table: the work
//! request it posts, the rights each side grants, whether it may be inlined,
//! the label its completions carry, and what an atomic must return. The
//! measured loops ask these functions and never match on the verb themselves,
//! so a new verb is one entry here plus its command-line name.

use crate::spec::{AtomicOp, EchoVerb, InlineRequest, PostApi, VerbKind};
use crate::verbs::{Access, SendOp, SendOps, Transport};

/// Whether this side issues the verb (client) or answers/serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// An arbitrary, recognisable immediate: receivers do not interpret it.
const IMM: u32 = 0x5eed;

/// The send-side operation `verb` posts at `remote_addr` (atomics: fetch-add
/// 1, or compare-and-swap whose operands `atomic_operands` sets per WR).
pub fn send_op(
    verb: VerbKind,
    op: Option<AtomicOp>,
    imm: bool,
    remote_addr: u64,
    rkey: u32,
) -> SendOp {
    match (verb, op) {
        (VerbKind::Read, _) => SendOp::Read { remote_addr, rkey },
        (VerbKind::Atomic, Some(AtomicOp::Cas)) => SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare: 0,
            swap: 0,
        },
        (VerbKind::Atomic, _) => SendOp::FetchAdd {
            remote_addr,
            rkey,
            add: 1,
        },
        (VerbKind::Send, _) if imm => SendOp::SendImm { imm: IMM },
        (VerbKind::Send, _) => SendOp::Send,
        (VerbKind::Write | VerbKind::Echo, _) if imm => SendOp::WriteImm {
            remote_addr,
            rkey,
            imm: IMM,
        },
        (VerbKind::Write | VerbKind::Echo, _) => SendOp::Write { remote_addr, rkey },
    }
}

/// `--post-api ex`: the send operations a QP posting `verb` is created with
/// (exactly the one it posts); `None` for classic QPs.
pub fn ex_send_ops(
    api: PostApi,
    verb: VerbKind,
    op: Option<AtomicOp>,
    imm: bool,
) -> Option<SendOps> {
    (api == PostApi::Ex).then(|| SendOps::of(&send_op(verb, op, imm, 0, 0)))
}

/// `--post-api ex` for echo throughput: a request or response of `v` is a
/// WRITE or a SEND with immediate; echo's QPs of `transport` ask for both
/// verbs' operations, except that a UD QP only ever SENDs (and providers
/// refuse WRITE on UD).
pub fn echo_ex_send_ops(
    api: PostApi,
    req: EchoVerb,
    resp: EchoVerb,
    transport: Transport,
) -> Option<SendOps> {
    let of = |v: EchoVerb| match v {
        EchoVerb::Write if transport == Transport::Ud => SendOps::NONE,
        EchoVerb::Write => SendOps::of(&SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        }),
        EchoVerb::Send => SendOps::of(&SendOp::SendImm { imm: 0 }),
    };
    (api == PostApi::Ex).then(|| of(req).with(of(resp)))
}

/// The least a side must grant for `verb`: the client of a READ or atomic
/// exposes nothing; a server never grants more than its test needs.
pub fn access_for(verb: VerbKind, role: Role) -> Access {
    let mut a = Access::LOCAL;
    match (verb, role) {
        (VerbKind::Write | VerbKind::Echo, _) => a.remote_write = true,
        (VerbKind::Read, Role::Server) => a.remote_read = true,
        (VerbKind::Atomic, Role::Server) => a.remote_atomic = true,
        (VerbKind::Read | VerbKind::Atomic | VerbKind::Send, _) => {}
    }
    a
}

/// The verb's name in work-completion errors (as libibverbs calls the opcode).
pub fn wc_label(verb: VerbKind, op: Option<AtomicOp>) -> &'static str {
    match (verb, op) {
        (VerbKind::Read, _) => "RDMA_READ",
        (VerbKind::Atomic, Some(AtomicOp::Cas)) => "COMP_SWAP",
        (VerbKind::Atomic, _) => "FETCH_ADD",
        (VerbKind::Send, _) => "SEND",
        (VerbKind::Write | VerbKind::Echo, _) => "RDMA_WRITE",
    }
}

/// The label of an echo request's or response's completions.
pub fn echo_wc_label(v: EchoVerb) -> &'static str {
    match v {
        EchoVerb::Write => "RDMA_WRITE",
        EchoVerb::Send => "SEND",
    }
}

/// Whether the verb carries a payload that can be inlined at all.
pub fn can_inline(verb: VerbKind) -> bool {
    match verb {
        VerbKind::Read | VerbKind::Atomic => false,
        VerbKind::Write | VerbKind::Send | VerbKind::Echo => true,
    }
}

/// Whether a run must know the device's inline limit: it asked for inline,
/// or it is ECHO, which inlines whatever fits (as HERD's clients do).
pub fn needs_inline_limit(verb: VerbKind, inline: InlineRequest) -> bool {
    inline.is_asked() || verb == VerbKind::Echo
}

/// Whether a side posts `size` bytes inline, given the most its QP may
/// inline (granted, or before creating it the device's limit): the one
/// per-size rule of every loop, decided once per point, outside the timed
/// loop. WRITE and SEND inline what was asked (`--inline`, `-I SIZE`: the
/// spec's device check refused what the QP cannot); ECHO inlines whatever
/// fits, and with `-I SIZE` only up to SIZE.
pub fn posts_inline(verb: VerbKind, inline: InlineRequest, size: u32, qp_max_inline: u32) -> bool {
    match verb {
        VerbKind::Read | VerbKind::Atomic => false,
        VerbKind::Echo => {
            size <= qp_max_inline && !matches!(inline, InlineRequest::UpTo(n) if size > n)
        }
        VerbKind::Write | VerbKind::Send => inline.wants(size),
    }
}

/// Inline room a QP must be created with for the `sizes` it will post: the
/// largest one it posts inline (0: none).
pub fn inline_room(
    verb: VerbKind,
    inline: InlineRequest,
    sizes: impl IntoIterator<Item = u32>,
    device_max_inline: u32,
) -> u32 {
    sizes
        .into_iter()
        .filter(|&s| posts_inline(verb, inline, s, device_max_inline))
        .max()
        .unwrap_or(0)
}

/// The compare and swap operands of the `k`-th CAS on one word that started
/// at 0: each finds the previous one's value and moves it on by one, so the
/// word really changes and a lost or repeated CAS shows.
#[inline(always)]
pub fn atomic_operands(k: u64) -> (u64, u64) {
    (k, k + 1)
}

/// What the `k`-th atomic on a word reset to 0 must return: fetch-add 1
/// returns the count so far, and CAS (k→k+1) returns the k it found.
#[inline(always)]
pub fn atomic_expected(k: u64) -> u64 {
    k
}

/// Faults the device tests inject to prove a check can fail, named by
/// `RDMA_BENCH_TEST_FAULT` (read at setup, never in a measured loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The atomic target word starts at 1<<63 instead of 0.
    AtomicWord,
    /// Send WRs carry an lkey no MR has (`SendList::spoil_lkeys`): only
    /// inline WRs still complete.
    SendLkey,
    /// `--validate`: the receiver flips one byte of one received payload
    /// before checking it (which WR and byte: the loop that checks says,
    /// on stderr, so a test can hold the record's `first_corrupt` to it).
    PayloadByte,
}

pub fn test_fault(f: Fault) -> bool {
    let name = match f {
        Fault::AtomicWord => "atomic-word",
        Fault::SendLkey => "send-lkey",
        Fault::PayloadByte => "payload-byte",
    };
    std::env::var("RDMA_BENCH_TEST_FAULT").is_ok_and(|v| v.split(',').any(|x| x == name))
}

/// How many atomic operations the target's words do not account for: each
/// QP's word must end at the number of atomics its issuer QP executed
/// (fetch-add 1 each, or a chain of CAS k→k+1). `None` when the peer sent
/// no words (not an atomic point).
pub fn atomic_mismatch(words: &[u64], per_qp_sent: &[u64]) -> Option<u64> {
    if words.is_empty() {
        return None;
    }
    if words.len() != per_qp_sent.len() {
        return Some(per_qp_sent.iter().sum::<u64>().max(1));
    }
    Some(
        words
            .iter()
            .zip(per_qp_sent)
            // Per QP at most the atomics it sent: a word far off (never
            // reset, or overwritten) is every one of that QP's operations
            // unaccounted for, not 2^63 of them.
            .map(|(w, s)| match w.abs_diff(*s) {
                0 => 0,
                d => d.min(*s).max(1),
            })
            .fold(0u64, u64::saturating_add),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_is_minimal_per_verb_and_role() {
        let read_client = access_for(VerbKind::Read, Role::Client);
        assert!(!read_client.remote_read && !read_client.remote_write);
        let read_server = access_for(VerbKind::Read, Role::Server);
        assert!(read_server.remote_read && !read_server.remote_write && !read_server.remote_atomic);
        let atomic_server = access_for(VerbKind::Atomic, Role::Server);
        assert!(atomic_server.remote_atomic && !atomic_server.remote_write);
        let send = access_for(VerbKind::Send, Role::Server);
        assert_eq!(send, Access::LOCAL);
    }

    #[test]
    fn atomic_words_must_match_what_was_sent() {
        assert_eq!(atomic_mismatch(&[], &[3]), None);
        assert_eq!(atomic_mismatch(&[3, 5], &[3, 5]), Some(0));
        assert_eq!(atomic_mismatch(&[4, 5], &[3, 5]), Some(1));
        assert_eq!(atomic_mismatch(&[3], &[3, 5]), Some(8));
        // Words that never started at 0: every operation, without overflow.
        let far = 1u64 << 63;
        assert_eq!(atomic_mismatch(&[far + 3, far + 5], &[3, 5]), Some(8));
        assert_eq!(atomic_mismatch(&[far, far], &[0, 0]), Some(2));
    }

    #[test]
    fn only_payload_verbs_inline() {
        use InlineRequest::{Always, Never};
        assert!(!posts_inline(VerbKind::Read, Always, 8, 512));
        assert!(!posts_inline(VerbKind::Atomic, Always, 8, 512));
        assert!(posts_inline(VerbKind::Write, Always, 64, 0));
        assert!(posts_inline(VerbKind::Echo, Never, 64, 64));
        assert!(!posts_inline(VerbKind::Echo, Never, 65, 64));
        assert_eq!(inline_room(VerbKind::Echo, Never, [64, 4096], 512), 64);
        assert_eq!(inline_room(VerbKind::Echo, Never, [4096, 512], 512), 512);
        assert_eq!(inline_room(VerbKind::Write, Always, [256], 512), 256);
        assert_eq!(inline_room(VerbKind::Write, Never, [256], 512), 0);
    }

    #[test]
    fn inline_size_decides_each_point() {
        use InlineRequest::UpTo;
        let sizes = [16u32, 64, 256];
        for verb in [VerbKind::Write, VerbKind::Send] {
            let each = sizes.map(|s| posts_inline(verb, UpTo(64), s, 512));
            assert_eq!(each, [true, true, false], "{verb:?}");
            assert_eq!(inline_room(verb, UpTo(64), sizes, 512), 64);
            assert_eq!(inline_room(verb, UpTo(8), sizes, 512), 0);
        }
        // Echo: what fits the QP, and with -I only up to its size.
        let each = sizes.map(|s| posts_inline(VerbKind::Echo, UpTo(64), s, 512));
        assert_eq!(each, [true, true, false]);
        let each = sizes.map(|s| posts_inline(VerbKind::Echo, UpTo(1024), s, 32));
        assert_eq!(each, [true, false, false]);
        assert_eq!(inline_room(VerbKind::Echo, UpTo(64), sizes, 512), 64);
        // No payload to inline, whatever was asked.
        assert!(!posts_inline(VerbKind::Read, UpTo(64), 16, 512));
    }
}
