//! A latency run: what it measures and how it is validated.

use serde::{Deserialize, Serialize};

use super::*;
use crate::error::{Error, Result};
use crate::verbs::Transport;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySpec {
    pub verb: VerbKind,
    pub mode: LatencyMode,
    pub transport: Transport,
    /// Which payloads to post with IBV_SEND_INLINE (`--inline`, `-I SIZE`),
    /// decided per size. Echo inlines whenever it fits (up to `-I`'s SIZE).
    pub inline: InlineRequest,
    /// SEND/WRITE with immediate.
    pub imm: bool,
    pub op: Option<AtomicOp>,
    pub sizes: Vec<u32>,
    /// Measured iterations per size (after warm-up), unless `duration_s` is set.
    pub iters: u64,
    /// Measure for this long per size instead of a fixed count.
    pub duration_s: Option<f64>,
    /// Iterations run first and not recorded.
    pub warmup: u64,
    /// Longest wait on the peer before giving up.
    pub timeout_s: f64,
    /// SGEs each send WR's payload is split over (`--sge`).
    #[serde(default = "one_sge")]
    pub sge: u32,
    /// Traffic class, SL, flow label and MTU of the QP's path.
    #[serde(default)]
    pub path: PathSpec,
    /// Sleep on a completion channel instead of busy polling (`--events`).
    #[serde(default)]
    pub events: bool,
    /// `ibv_post_send` or `ibv_wr_*` on an extended QP (`--post-api`).
    #[serde(default)]
    pub post_api: PostApi,
    /// `--interval`, `--forever`.
    #[serde(default)]
    pub live: LiveSpec,
    /// `--validate`: every payload carries `bench::pattern`'s bytes and is
    /// checked where it lands (both sides need it, so it crosses the wire).
    #[serde(default)]
    pub validate: bool,
    /// Huge pages (the other layouts are throughput options).
    #[serde(default)]
    pub memory: MemorySpec,
    /// `-H`/`-U`: raw samples the client's recorder keeps per point (0:
    /// none); the client's own concern, so it never crosses the wire.
    #[serde(skip)]
    pub keep_samples: u64,
}

impl LatencySpec {
    pub fn max_size(&self) -> u32 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// Whether the verb and mode need the server to answer each message.
    pub fn server_answers(&self) -> bool {
        self.mode == LatencyMode::PingPong
    }

    /// `--mtu` on a UD run: a payload above it can never be sent, whatever
    /// the device, so that is decided before the device opens.
    fn ud_mtu_given(&self) -> Option<u32> {
        self.path.mtu.filter(|_| self.transport == Transport::Ud)
    }

    /// `-a` with a UD `--mtu`: the sizes above it are left out (as
    /// perftest caps them), not refused. Returns the note to print, if any.
    pub fn drop_ud_sizes_over_mtu(&mut self) -> Option<String> {
        let m = self.ud_mtu_given()?;
        let before = self.sizes.len();
        self.sizes.retain(|&z| z <= m);
        let dropped = before - self.sizes.len();
        (dropped > 0).then(|| format!("-a: {dropped} UD points above the --mtu of {m} left out"))
    }

    /// Host-side checks: everything that does not need the device.
    pub fn validate(&self) -> Result<()> {
        let verb = self.verb.name();
        let t = self.transport;
        self.live.validate(self.sizes.len())?;
        match self.verb {
            VerbKind::Read | VerbKind::Atomic if t != Transport::Rc => {
                return Err(Error::usage(format!(
                    "--transport {t}: {verb} needs RC (READ and atomics exist only on reliable connections)"
                )));
            }
            VerbKind::Write | VerbKind::Echo if t == Transport::Ud => {
                return Err(Error::usage(format!(
                    "--transport ud: {verb} needs RC or UC (UD carries only SEND)"
                )));
            }
            _ => {}
        }
        if self.inline.is_asked() && matches!(self.verb, VerbKind::Read | VerbKind::Atomic) {
            return Err(Error::usage(format!(
                "{}: {verb} carries no outbound payload to inline",
                self.inline.option()
            )));
        }
        if self.imm && !matches!(self.verb, VerbKind::Write | VerbKind::Send) {
            return Err(Error::usage(format!(
                "--imm: only write and send carry immediate data, not {verb}"
            )));
        }
        if self.imm && self.verb == VerbKind::Write && self.mode == LatencyMode::PingPong {
            return Err(Error::usage(
                "--imm: write ping-pong polls memory; use `write --imm --completion` or `send --imm`",
            ));
        }
        if self.op.is_some() != (self.verb == VerbKind::Atomic) {
            return Err(Error::usage(if self.verb == VerbKind::Atomic {
                "atomic needs --op fadd|cas".to_string()
            } else {
                format!("--op: only atomic takes an operation, not {verb}")
            }));
        }
        if self.sizes.is_empty() {
            return Err(Error::usage("--size: give at least one size"));
        }
        // A spec from the wire is bounded as the command line's is.
        if self.sizes.len() as u64 > crate::sweep::MAX_POINTS {
            return Err(Error::usage(format!(
                "--size: {} sizes exceed the limit of {} points per run",
                self.sizes.len(),
                crate::sweep::MAX_POINTS
            )));
        }
        for &s in &self.sizes {
            if self.verb == VerbKind::Atomic && s != ATOMIC_SIZE {
                return Err(Error::usage(format!(
                    "--size {s}: atomics always move {ATOMIC_SIZE} bytes (leave --size out)"
                )));
            }
            if s == 0 {
                check_size_zero(self.verb, self.mode == LatencyMode::PingPong)?;
            }
            check_range("--size", s, 0, MAX_SIZE, "")?;
        }
        if let Some(m) = self.ud_mtu_given() {
            if self.max_size() > m {
                return Err(Error::usage(format!(
                    "--size {} exceeds the UD MTU of {m} given by --mtu",
                    self.max_size()
                )));
            }
        }
        check_sge(self.sge, self.verb, self.sizes.iter().copied())?;
        let inlines = self.inline.largest_inlined(self.sizes.iter().copied());
        check_post_api(self.post_api, inlines.is_some(), self.sge)?;
        if self.events {
            check_latency_events(self.verb, self.mode)?;
        }
        self.memory.validate_latency()?;
        check_range("--iters", self.iters, 1, MAX_ITERS, "")?;
        if let Some(d) = self.duration_s {
            check_range("--duration", d, MIN_DURATION, MAX_SECONDS, " seconds")?;
        }
        check_range("--warmup", self.warmup, 0, MAX_ITERS, "")?;
        check_timeout(self.timeout_s)?;
        self.path.check_transport(self.transport)?;
        self.path.validate()
    }

    /// This spec with the path MTU both sides agreed on.
    pub fn with_path_mtu(&self, mtu: u32) -> LatencySpec {
        let mut s = self.clone();
        s.path.path_mtu = Some(mtu);
        s
    }

    /// Checks against what the device and QP really offer.
    pub fn validate_device(
        &self,
        device: &str,
        max_inline: u32,
        ends: &PathEnds,
        atomics: bool,
        max_sge: u32,
    ) -> Result<()> {
        check_device_sge(self.sge, device, max_sge)?;
        self.path.check_device(ends)?;
        let (ud_mtu, ud_why) = self.path.ud_limit(ends);
        if let Some(s) = self.inline.largest_inlined(self.sizes.iter().copied()) {
            if s > max_inline {
                return Err(self.inline.exceeds_device(s, "", device, max_inline));
            }
        }
        if self.transport == Transport::Ud && self.max_size() > ud_mtu {
            return Err(Error::usage(format!(
                "--size {} exceeds {ud_why}",
                self.max_size()
            )));
        }
        if self.verb == VerbKind::Atomic && !atomics {
            return Err(Error::usage(format!(
                "atomic: {device} reports no atomic capability (atomic_cap NONE)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn spec(verb: VerbKind) -> LatencySpec {
        LatencySpec {
            verb,
            mode: if matches!(verb, VerbKind::Read | VerbKind::Atomic) {
                LatencyMode::Completion
            } else {
                LatencyMode::PingPong
            },
            transport: Transport::Rc,
            inline: InlineRequest::Never,
            imm: false,
            op: (verb == VerbKind::Atomic).then_some(AtomicOp::Fadd),
            sizes: vec![if verb == VerbKind::Atomic { 8 } else { 64 }],
            iters: 100,
            duration_s: None,
            warmup: 10,
            timeout_s: 5.0,
            sge: 1,
            events: false,
            post_api: PostApi::Classic,
            path: PathSpec::default(),
            live: Default::default(),
            validate: false,
            memory: MemorySpec::default(),
            keep_samples: 0,
        }
    }

    fn refused(s: LatencySpec, needle: &str) {
        let err = s.validate().expect_err("should be refused").to_string();
        assert!(err.contains(needle), "'{err}' lacks '{needle}'");
    }

    #[test]
    fn valid_specs_pass() {
        for v in [
            VerbKind::Read,
            VerbKind::Write,
            VerbKind::Send,
            VerbKind::Echo,
            VerbKind::Atomic,
        ] {
            spec(v).validate().unwrap();
        }
        let mut s = spec(VerbKind::Send);
        s.transport = Transport::Ud;
        s.imm = true;
        s.validate().unwrap();
    }

    #[test]
    fn impossible_combinations_are_refused_with_the_option() {
        let mut s = spec(VerbKind::Read);
        s.transport = Transport::Uc;
        refused(s, "--transport uc");
        let mut s = spec(VerbKind::Write);
        s.transport = Transport::Ud;
        refused(s, "--transport ud");
        let mut s = spec(VerbKind::Read);
        s.inline = InlineRequest::Always;
        refused(s, "--inline");
        let mut s = spec(VerbKind::Atomic);
        s.inline = InlineRequest::UpTo(64);
        refused(s, "--inline-size 64: atomic carries no outbound payload");
        let mut s = spec(VerbKind::Echo);
        s.imm = true;
        refused(s, "--imm");
        let mut s = spec(VerbKind::Atomic);
        s.sizes = vec![64];
        refused(s, "--size 64");
        let mut s = spec(VerbKind::Atomic);
        s.op = None;
        refused(s, "--op");
        let mut s = spec(VerbKind::Write);
        s.iters = 0;
        refused(s, "--iters 0");
        let mut s = spec(VerbKind::Write);
        s.timeout_s = 0.0;
        refused(s, "--timeout");
    }

    #[test]
    fn device_limits_name_device_and_limit() {
        let mut s = spec(VerbKind::Send);
        s.transport = Transport::Ud;
        s.sizes = vec![2048];
        let e = s
            .validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--size 2048 exceeds the UD MTU of rxe0 (1024)"
        );
        assert_eq!(e.exit_code(), 2);
        let mut s = spec(VerbKind::Write);
        s.inline = InlineRequest::Always;
        s.sizes = vec![1024];
        let e = s
            .validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap_err();
        assert!(e.to_string().contains("max_inline of rxe0 (512)"), "{e}");
        // -I: only the sizes it inlines must fit; larger ones go uninlined.
        s.inline = InlineRequest::UpTo(1024);
        s.sizes = vec![16, 768, 4096];
        let e = s
            .validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap_err();
        assert!(
            e.to_string().starts_with("--inline-size 1024 --size 768:")
                && e.to_string().contains("max_inline of rxe0 (512)"),
            "{e}"
        );
        s.inline = InlineRequest::UpTo(512);
        s.validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap();
        let mut s = spec(VerbKind::Write);
        s.sge = 33;
        let e = s
            .validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap_err();
        assert_eq!(e.to_string(), "--sge 33: exceeds the max_sge of rxe0 (32)");
        let mut s = spec(VerbKind::Send);
        s.transport = Transport::Ud;
        s.sizes = vec![1024];
        s.path.mtu = Some(512);
        let e = s
            .validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--size 1024 exceeds the UD MTU of rxe0 (512, from --mtu 512)"
        );
        s.path.mtu = Some(4096);
        let e = s
            .validate_device("rxe0", 512, &PathEnds::single("rxe0", 1, 1024), true, 32)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mtu 4096 exceeds the active MTU of rxe0 port 1 (1024)"
        );
    }

    #[test]
    fn sge_and_size_zero_are_checked_against_verb_mode_and_size() {
        let mut s = spec(VerbKind::Write);
        s.sge = 4;
        s.validate().unwrap();
        s.sizes = vec![64, 3];
        refused(s, "--sge 4 --size 3");
        let mut s = spec(VerbKind::Write);
        s.sge = 0;
        refused(s, "--sge 0");
        let mut s = spec(VerbKind::Atomic);
        s.sge = 2;
        refused(s, "--sge 2");
        let mut s = spec(VerbKind::Write);
        s.sizes = vec![0];
        refused(
            s,
            "--size 0: a ping-pong detects arrival by the payload's last byte",
        );
        for v in [VerbKind::Write, VerbKind::Send] {
            let mut s = spec(v);
            s.mode = LatencyMode::Completion;
            s.sizes = vec![0];
            s.validate().unwrap();
            s.sge = 2;
            refused(s, "--sge 2 --size 0");
        }
        let mut s = spec(VerbKind::Read);
        s.sizes = vec![0];
        refused(s, "--size 0: a READ");
        let mut s = spec(VerbKind::Echo);
        s.sizes = vec![0];
        refused(s, "--size 0: echo");
    }
}
