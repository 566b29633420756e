//! A throughput spec against what the device offers (`validate_device`):
//! queue depths, CQ sizes, QP counts, inline and UD MTU limits, SRQs and
//! atomics, each refusal naming the option, the device and its limit.

use super::*;

impl TputSpec {
    /// Checks each point against what the device offers.
    pub fn validate_device(&self, dev: &DeviceLimits) -> Result<()> {
        check_device_sge(self.sge, &dev.name, dev.max_sge)?;
        self.path.check_device(&dev.path)?;
        let (ud_mtu, ud_why) = self.path.ud_limit(&dev.path);
        for p in &self.points {
            let name = &dev.name;
            let max_inline = dev.max_inline(p.transport);
            if self.inline.wants(p.size) && p.size > max_inline {
                let on = format!(" ({})", p.transport);
                return Err(self.inline.exceeds_device(p.size, &on, name, max_inline));
            }
            if self.over_ud(p.transport) && p.size > ud_mtu {
                return Err(Error::usage(format!(
                    "--size {} exceeds {ud_why}{}",
                    p.size,
                    self.ud_note(p.transport)
                )));
            }
            if p.sq_depth() > dev.max_qp_wr {
                return Err(Error::usage(format!(
                    "--window {} / --signal-period {}: a send queue of {} WRs exceeds max_qp_wr of {name} ({})",
                    p.window,
                    p.signal_period,
                    p.sq_depth(),
                    dev.max_qp_wr
                )));
            }
            if self.direction != Direction::Echo && p.issuer_cq_entries() > dev.max_cqe.into() {
                return Err(Error::usage(format!(
                    "--qps {} --window {} --signal-period {}: a thread's send CQ may need {} entries, more than {name} allows ({}); raise --signal-period or lower --qps/--window",
                    p.qps,
                    p.window,
                    p.signal_period,
                    p.issuer_cq_entries(),
                    dev.max_cqe
                )));
            }
            if self.direction == Direction::Echo {
                let depth = p.echo_request_sq_depth().max(p.echo_response_sq_depth());
                if depth > dev.max_qp_wr {
                    return Err(Error::usage(format!(
                        "--window {} / --signal-period {}: echo needs send queues of {depth} WRs, more than max_qp_wr of {name} ({})",
                        p.window, p.signal_period, dev.max_qp_wr
                    )));
                }
            }
            if self.direction == Direction::Echo {
                check_device_echo_cqs(p, dev, (self.req, self.resp))?;
            }
            // Both sides of a loopback run live on the device: 2 QPs per pair, plus UD helpers.
            if 2 * p.total_qps() + 2 > dev.max_qp {
                return Err(Error::usage(format!(
                    "--qps {} x --threads {}: needs {} QPs, more than max_qp of {name} ({})",
                    p.qps,
                    p.threads,
                    2 * p.total_qps() + 2,
                    dev.max_qp
                )));
            }
            if self.srq {
                check_device_srq(p, dev, self.bidirectional)?;
            }
            if self.verb == VerbKind::Atomic && !dev.atomics {
                return Err(Error::usage(format!(
                    "atomic: {name} reports no atomic capability (atomic_cap NONE)"
                )));
            }
        }
        Ok(())
    }
}

/// Echo's completion queues against the device's max_cqe: a CQ that
/// overflows loses completions, and rxe then moves the QP whose completion
/// did not fit to the error state (every WR left on it is flushed).
fn check_device_echo_cqs(
    p: &TputPoint,
    dev: &DeviceLimits,
    (req, resp): (EchoVerb, EchoVerb),
) -> Result<()> {
    let (name, max_cqe) = (&dev.name, u64::from(dev.max_cqe));
    let responses = p.echo_response_cq_entries();
    if resp == EchoVerb::Send && responses > max_cqe {
        return Err(Error::usage(format!(
            "--qps {} x --window {}: {responses} SEND responses may wait in a client thread's receive CQ, more than max_cqe of {name} ({max_cqe}); lower --qps or --window",
            p.qps, p.window
        )));
    }
    // SEND requests: the server's receive CQ holds a receive per request in flight.
    let requests = p.srq_depth();
    if req == EchoVerb::Send && requests > max_cqe {
        return Err(Error::usage(format!(
            "--qps {} x --threads {} x --window {}: the echo server keeps {requests} receives posted for SEND requests, more than max_cqe of {name} ({max_cqe}) for its receive CQ; lower --qps, --threads or --window",
            p.qps, p.threads, p.window
        )));
    }
    // WRITE responses: the server's QPs (one per client QP, all threads) share one send CQ.
    let qps = match resp {
        EchoVerb::Write => p.total_qps(),
        EchoVerb::Send => p.qps,
    };
    let sends = p.echo_send_cq_entries(qps);
    if sends > max_cqe {
        return Err(Error::usage(format!(
            "--qps {} --window {} --signal-period {}: {sends} signaled completions may wait in one echo send CQ, more than max_cqe of {name} ({max_cqe}); raise --signal-period or lower --qps/--window",
            p.qps, p.window, p.signal_period
        )));
    }
    Ok(())
}

/// `--srq` against the device: it must offer SRQs (two when both sides of
/// a loopback run receive), each holding the receives one side needs.
fn check_device_srq(p: &TputPoint, dev: &DeviceLimits, bidirectional: bool) -> Result<()> {
    let name = &dev.name;
    let need = if bidirectional { 2 } else { 1 };
    if dev.max_srq < need {
        return Err(Error::usage(format!(
            "--srq: needs {need} shared receive queue(s), {name} offers {} (max_srq)",
            dev.max_srq
        )));
    }
    if p.srq_depth() > u64::from(dev.max_srq_wr) {
        return Err(Error::usage(format!(
            "--srq --qps {} x --threads {} --window {}: an SRQ of {} receives exceeds max_srq_wr of {name} ({})",
            p.qps,
            p.threads,
            p.window,
            p.srq_depth(),
            dev.max_srq_wr
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tput::tests::{spec, with};

    /// rxe0's limits as the guest reports them, but for a small max_qp_wr
    /// and max_qp and no SRQs (each test widens what it needs).
    fn rxe0() -> DeviceLimits {
        DeviceLimits {
            name: "rxe0".into(),
            port: 1,
            max_inline: [512; 3],
            path: PathEnds::single("rxe0", 1, 1024),
            max_qp_wr: 1024,
            max_qp: 64,
            max_cqe: 32_767,
            atomics: true,
            max_sge: 32,
            max_srq: 0,
            max_srq_wr: 0,
        }
    }

    #[test]
    fn srq_depth_is_refused_above_max_srq_wr_with_both_numbers() {
        let dev = DeviceLimits {
            max_qp_wr: 1 << 20,
            max_qp: 1 << 16,
            max_srq: 2,
            max_srq_wr: 4096,
            ..rxe0()
        };
        let mut s = spec(VerbKind::Send, Direction::Inbound);
        s.srq = true;
        assert_eq!(s.points[0].srq_depth(), 512);
        s.validate_device(&dev).unwrap();
        // A sink's SRQ holds what its QPs' own queues would as far as the
        // device allows, and never less than the windows need.
        assert_eq!(s.points[0].sink_rq_depth(), 4096);
        assert_eq!(s.points[0].sink_srq_depth(4096), 4096);
        assert_eq!(s.points[0].sink_srq_depth(1024), 1024);
        s.points[0].qps = 4;
        assert_eq!(s.points[0].sink_srq_depth(1 << 20), 16384);
        s.points[0].qps = 64; // 16384 / 64 is below perftest's 512
        assert_eq!(s.points[0].sink_rq_depth(), 512);
        s.points[0].qps = 16;
        assert_eq!(s.points[0].sink_srq_depth(4100), 4096);
        s.validate_device(&dev).unwrap();
        s.points[0].qps = 64; // 64 x 64 + 64 receives
        assert_eq!(s.points[0].sink_srq_depth(4096), 4160);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--srq --qps 64 x --threads 1 --window 64: an SRQ of 4160 receives exceeds max_srq_wr of rxe0 (4096)"
        );
        let none = DeviceLimits { max_srq: 0, ..dev };
        s.points[0].qps = 1;
        let e = s.validate_device(&none).unwrap_err().to_string();
        assert!(e.contains("rxe0 offers 0 (max_srq)"), "{e}");
    }

    #[test]
    fn echo_cqs_are_refused_above_max_cqe_with_both_numbers() {
        let dev = DeviceLimits {
            max_qp_wr: 1 << 20,
            max_qp: 1 << 16,
            max_srq: 2,
            max_srq_wr: 1 << 20,
            ..rxe0()
        };
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        (e.req, e.resp) = (EchoVerb::Send, EchoVerb::Send);
        e.points[0] = TputPoint {
            transport: Transport::Ud,
            qps: 1024,
            window: 31,
            signal_period: 64,
            ..e.points[0]
        };
        // 1024 x 31 + 64 receives at the server: the largest window that fits.
        e.validate_device(&dev).unwrap();
        e.points[0].window = 128;
        assert_eq!(
            e.validate_device(&dev).unwrap_err().to_string(),
            "--qps 1024 x --window 128: 131072 SEND responses may wait in a client thread's receive CQ, more than max_cqe of rxe0 (32767); lower --qps or --window"
        );
        // Spread over threads, each client CQ fits but the server's does not.
        e.points[0] = TputPoint {
            qps: 512,
            threads: 2,
            window: 32,
            ..e.points[0]
        };
        let err = e.validate_device(&dev).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "--qps 512 x --threads 2 x --window 32: the echo server keeps 32832 receives"
            ) && err.contains("max_cqe of rxe0 (32767)"),
            "{err}"
        );
        // WRITE/WRITE: every signaled response of 1024 server QPs in one send CQ.
        (e.req, e.resp) = (EchoVerb::Write, EchoVerb::Write);
        e.points[0] = TputPoint {
            transport: Transport::Rc,
            qps: 1024,
            threads: 1,
            window: 128,
            signal_period: 1,
            ..e.points[0]
        };
        let err = e.validate_device(&dev).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "--qps 1024 --window 128 --signal-period 1: 133120 signaled completions"
            ) && err.contains("(32767)"),
            "{err}"
        );
        e.points[0].signal_period = 64;
        e.validate_device(&dev).unwrap();
    }

    #[test]
    fn device_limits_refuse_with_device_and_limit() {
        let dev = rxe0();
        let mut s = spec(VerbKind::Send, Direction::Inbound);
        s.points[0].transport = Transport::Ud;
        s.points[0].size = 2048;
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--size 2048 exceeds the UD MTU of rxe0 (1024)"
        );
        s.points[0].size = 1024;
        s.path.mtu = Some(512);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--size 1024 exceeds the UD MTU of rxe0 (512, from --mtu 512)"
        );
        s.path.mtu = Some(2048);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--mtu 2048 exceeds the active MTU of rxe0 port 1 (1024)"
        );
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| {
            p.window = 2048
        });
        assert!(s
            .validate_device(&dev)
            .unwrap_err()
            .to_string()
            .contains("max_qp_wr of rxe0 (1024)"));
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| p.qps = 40);
        assert!(s
            .validate_device(&dev)
            .unwrap_err()
            .to_string()
            .contains("max_qp of rxe0 (64)"));
        let mut s = spec(VerbKind::Write, Direction::Inbound);
        s.inline = InlineRequest::Always;
        s.points[0].size = 1024;
        assert!(s
            .validate_device(&dev)
            .unwrap_err()
            .to_string()
            .contains("max_inline of rxe0 (512)"));
        // -I inlines only the points up to its size: 1024 B above -I 512 runs.
        s.inline = InlineRequest::UpTo(512);
        s.validate_device(&dev).unwrap();
        s.inline = InlineRequest::UpTo(2048);
        assert_eq!(
            s.validate_device(&dev).unwrap_err().to_string(),
            "--inline-size 2048 --size 1024 (rc): a payload of at most 2048 B is inlined, and 1024 B exceeds the max_inline of rxe0 (512); use -I 512 or less"
        );
        // -S 1 on 512 QPs: up to 65 536 signaled WRs in one thread's CQ.
        let big = DeviceLimits {
            max_qp: 1 << 20,
            max_qp_wr: 1 << 20,
            ..dev.clone()
        };
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| {
            p.qps = 512;
            p.window = 128;
            p.signal_period = 1;
            p.postlist = 1;
        });
        let e = s.validate_device(&big).unwrap_err().to_string();
        assert!(
            e.contains("--signal-period 1") && e.contains("(32767)"),
            "{e}"
        );
        let s = with(spec(VerbKind::Write, Direction::Inbound), |p| {
            p.qps = 512;
            p.window = 128;
            p.signal_period = 64;
        });
        assert!(s.validate_device(&big).is_ok());
        // Echo keeps S: its send queues must fit max_qp_wr.
        let mut e = spec(VerbKind::Echo, Direction::Echo);
        e.points[0].signal_period = 8192;
        let err = e.validate_device(&dev).unwrap_err().to_string();
        assert!(err.contains("echo needs send queues of 32768 WRs"), "{err}");
    }
}
