//! Host-side checks of a throughput spec, before any verbs object exists:
//! every knob's range, and the combinations of verb, direction, transport
//! and options that are refused, each naming the option.

use super::*;

impl TputSpec {
    /// Host-side checks of every point, before any verbs object exists.
    pub fn validate(&self) -> Result<()> {
        let verb = self.verb.name();
        if self.points.is_empty() {
            return Err(Error::usage("no points to measure"));
        }
        // A spec from the wire is bounded as the command line's is.
        if self.points.len() as u64 > crate::sweep::MAX_POINTS {
            return Err(Error::usage(format!(
                "{} points exceed the limit of {} per run",
                self.points.len(),
                crate::sweep::MAX_POINTS
            )));
        }
        self.live.validate(self.points.len())?;
        if self.live.forever && self.direction == Direction::Outbound && !self.bidirectional {
            return Err(Error::usage(
                "--forever: outbound points are driven by the server, which cannot report live to this client; use inbound or echo",
            ));
        }
        if self.live.forever && self.group > 1 {
            return Err(Error::usage(format!(
                "--forever: a --group {} run starts and stops its clients together, and a forever point has no set end",
                self.group
            )));
        }
        if self.direction == Direction::Echo {
            if self.verb != VerbKind::Echo {
                return Err(Error::usage(format!(
                    "--tput echo: use `rdma-bench echo --tput`, not {verb}"
                )));
            }
        } else if self.verb == VerbKind::Echo {
            return Err(Error::usage(
                "--tput: echo throughput takes no direction (`echo --tput`)",
            ));
        }
        if self.inline.is_asked() && matches!(self.verb, VerbKind::Read | VerbKind::Atomic) {
            return Err(Error::usage(format!(
                "{}: {verb} carries no outbound payload to inline",
                self.inline.option()
            )));
        }
        if self.imm && self.verb != VerbKind::Send {
            return Err(Error::usage(format!(
                "--imm: throughput runs take --imm with send only, not {verb}"
            )));
        }
        if self.op.is_some() != (self.verb == VerbKind::Atomic) {
            return Err(Error::usage(if self.verb == VerbKind::Atomic {
                "atomic needs --op fadd|cas".to_string()
            } else {
                format!("--op: only atomic takes an operation, not {verb}")
            }));
        }
        check_range(
            "--duration",
            self.duration_s,
            MIN_DURATION,
            MAX_SECONDS,
            " seconds",
        )?;
        check_range(
            "--warmup-time",
            self.warmup_s,
            0.0,
            MAX_WARMUP_SECONDS,
            " seconds",
        )?;
        if let Some(n) = self.iters {
            check_range("--iters", n, 1, MAX_ITERS, "")?;
        }
        check_timeout(self.timeout_s)?;
        check_range("--group", self.group, 1, MAX_GROUP, "")?;
        self.path.validate()?;
        if self.path.connection == Connection::Cm && self.direction == Direction::Echo {
            return Err(Error::usage(
                "--cm: echo throughput answers through UD QPs and a server QP shared by its clients; --cm connects RC QP pairs only (use write/read/send/atomic --tput, or drop --cm)",
            ));
        }
        for p in &self.points {
            self.path.check_transport(p.transport)?;
            self.validate_point(p)?;
        }
        if let Some(r) = &self.rate {
            self.validate_rate(r)?;
        }
        check_sge(self.sge, self.verb, self.points.iter().map(|p| p.size))?;
        let inlines = self.points.iter().any(|p| self.inline.wants(p.size));
        check_post_api(self.post_api, inlines, self.sge)?;
        if self.events {
            check_tput_events(self.direction, self.req, self.resp)?;
        }
        self.memory
            .validate_tput(self.verb, self.direction, self.max_size())?;
        self.validate_bidir_srq()
    }

    /// `--bidirectional` and `--srq` against the verb and direction.
    fn validate_bidir_srq(&self) -> Result<()> {
        let verb = self.verb.name();
        if self.bidirectional {
            match self.direction {
                Direction::Echo => {
                    return Err(Error::usage(
                        "--bidirectional: echo already runs both ways (requests and responses)",
                    ))
                }
                Direction::Inbound => {
                    return Err(Error::usage(
                        "--bidirectional: each side issues outbound to the other; use --tput outbound -b",
                    ))
                }
                Direction::Outbound => {}
            }
            if self.group > 1 {
                return Err(Error::usage(format!(
                    "--group {}: --bidirectional runs one client against one serve",
                    self.group
                )));
            }
        }
        if self.srq {
            let receives = match self.direction {
                Direction::Echo => self.req == EchoVerb::Send,
                _ => self.verb == VerbKind::Send,
            };
            if !receives {
                return Err(Error::usage(if self.direction == Direction::Echo {
                    "--srq: the echo server receives only SEND requests (--req send --resp send -c ud); WRITE requests land in memory".to_string()
                } else {
                    format!("--srq: {verb} posts no receives (only send has a receiver)")
                }));
            }
            if self.memory.mr_per_qp {
                return Err(Error::usage(
                    "--srq: not with --mr-per-qp (every receive of the shared queue lands in one registration)",
                ));
            }
        }
        Ok(())
    }

    fn validate_point(&self, p: &TputPoint) -> Result<()> {
        let verb = self.verb.name();
        let t = p.transport;
        match (self.verb, t) {
            (VerbKind::Read | VerbKind::Atomic, Transport::Uc | Transport::Ud) => {
                return Err(Error::usage(format!(
                    "--transport {t}: {verb} needs RC (READ and atomics exist only on reliable connections)"
                )))
            }
            (VerbKind::Write, Transport::Ud) => {
                return Err(Error::usage("--transport ud: write needs RC or UC (UD carries only SEND)"))
            }
            _ => {}
        }
        if self.direction == Direction::Echo {
            match (self.req, self.resp, t) {
                (EchoVerb::Send, EchoVerb::Send, Transport::Ud) => {}
                (EchoVerb::Send, _, _) | (_, _, Transport::Ud) => {
                    return Err(Error::usage(format!(
                        "--req {:?} --resp {:?} -c {t}: echo supports write/send (requests over RC or UC, responses over UD), write/write over RC or UC, and send/send over UD",
                        self.req, self.resp
                    ).to_lowercase()))
                }
                _ => {}
            }
        }
        if self.verb == VerbKind::Atomic && p.size != ATOMIC_SIZE {
            return Err(Error::usage(format!(
                "--size {}: atomics always move {ATOMIC_SIZE} bytes (leave --size out)",
                p.size
            )));
        }
        if p.size == 0 {
            check_size_zero(self.verb, false)?;
        }
        check_range("--size", p.size, 0, MAX_SIZE, "")?;
        if let Some(m) = self.path.mtu.filter(|_| self.over_ud(t)) {
            if p.size > m {
                return Err(Error::usage(format!(
                    "--size {} exceeds the UD MTU of {m} given by --mtu{}",
                    p.size,
                    self.ud_note(t)
                )));
            }
        }
        check_range("--qps", p.qps, 1, MAX_QPS, "")?;
        check_range("--threads", p.threads, 1, MAX_THREADS, "")?;
        if p.total_qps() > MAX_QPS {
            return Err(Error::usage(format!(
                "--qps {} x --threads {}: {} QPs exceed the limit of {MAX_QPS}",
                p.qps,
                p.threads,
                p.total_qps()
            )));
        }
        check_range("--signal-period", p.signal_period, 1, MAX_WINDOW, "")?;
        check_range("--postlist", p.postlist, 1, MAX_WINDOW, "")?;
        check_range("--window", p.window, 1, MAX_WINDOW, "")?;
        if let Some(why) = p.combination_conflict() {
            return Err(Error::usage(why));
        }
        Ok(())
    }

    fn validate_rate(&self, r: &RateLimit) -> Result<()> {
        r.validate()?;
        for p in &self.points {
            // An --iters run ends when its WRs are done; only its refills must fit.
            let window_s = if self.iters.is_some() {
                f64::INFINITY
            } else {
                self.duration_s
            };
            r.validate_point(
                p.window,
                self.wrs_per_post(p),
                p.total_qps(),
                window_s,
                &format!("--rate {}", r.mops),
                "raise --rate or --duration",
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tput::tests::{spec, with};

    fn refused(s: &TputSpec, needle: &str) {
        let e = s.validate().expect_err("should be refused");
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(needle), "'{e}' lacks '{needle}'");
    }

    #[test]
    fn valid_tput_specs_pass() {
        for v in [
            VerbKind::Read,
            VerbKind::Write,
            VerbKind::Send,
            VerbKind::Atomic,
        ] {
            spec(v, Direction::Inbound).validate().unwrap();
            spec(v, Direction::Outbound).validate().unwrap();
        }
        let mut echo = spec(VerbKind::Echo, Direction::Echo);
        echo.points[0].transport = Transport::Uc;
        echo.validate().unwrap();
    }

    #[test]
    fn tput_sge_and_size_zero() {
        for v in [VerbKind::Write, VerbKind::Send] {
            for d in [Direction::Inbound, Direction::Outbound] {
                with(spec(v, d), |p| p.size = 0).validate().unwrap();
            }
        }
        let s = with(spec(VerbKind::Read, Direction::Inbound), |p| p.size = 0);
        refused(&s, "--size 0: a READ");
        let mut s = spec(VerbKind::Write, Direction::Inbound);
        s.sge = 4;
        s.validate().unwrap();
        refused(&with(s.clone(), |p| p.size = 2), "--sge 4 --size 2");
        s.sge = 0;
        refused(&s, "--sge 0");
    }

    #[test]
    fn bidirectional_and_srq_combinations() {
        let mut b = spec(VerbKind::Write, Direction::Outbound);
        b.bidirectional = true;
        b.validate().unwrap();
        let mut i = spec(VerbKind::Send, Direction::Inbound);
        i.bidirectional = true;
        refused(&i, "--bidirectional: each side issues outbound");
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.bidirectional = true;
        refused(&e, "--bidirectional: echo");
        let mut s = spec(VerbKind::Send, Direction::Inbound);
        s.srq = true;
        s.validate().unwrap();
        let mut r = spec(VerbKind::Read, Direction::Outbound);
        r.srq = true;
        refused(&r, "--srq: read posts no receives");
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.srq = true;
        refused(&e, "--srq: the echo server receives only SEND");
        e.req = EchoVerb::Send;
        e.points[0].transport = Transport::Ud;
        e.validate().unwrap();
    }

    #[test]
    fn tput_combinations_are_refused_naming_the_option() {
        let s = spec(VerbKind::Write, Direction::Inbound);
        refused(&with(s.clone(), |p| p.postlist = 32), "--postlist 32");
        refused(&with(s.clone(), |p| p.window = 0), "--window 0");
        refused(
            &with(s.clone(), |p| {
                p.postlist = 8;
                p.window = 4
            }),
            "--window 4",
        );
        refused(&with(s.clone(), |p| p.qps = 0), "--qps 0");
        refused(&with(s.clone(), |p| p.threads = 100), "--threads 100");
        refused(
            &with(s.clone(), |p| p.signal_period = 0),
            "--signal-period 0",
        );
        refused(
            &with(s.clone(), |p| p.transport = Transport::Ud),
            "--transport ud",
        );
        refused(
            &with(spec(VerbKind::Read, Direction::Inbound), |p| {
                p.transport = Transport::Uc
            }),
            "--transport uc",
        );
        refused(
            &with(spec(VerbKind::Atomic, Direction::Outbound), |p| p.size = 16),
            "--size 16",
        );
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.req = EchoVerb::Send;
        refused(&e, "--req send");
        let mut w = spec(VerbKind::Write, Direction::Inbound);
        w.imm = true;
        refused(&w, "--imm");
        let mut d = spec(VerbKind::Write, Direction::Inbound);
        d.duration_s = 0.0;
        refused(&d, "--duration");
        let echo_dir = spec(VerbKind::Write, Direction::Echo);
        refused(&echo_dir, "--tput echo");
    }
}
