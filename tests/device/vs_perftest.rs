//! rdma-bench beside perftest in the same guest: the clock it times with, and
//! WRITE latency in alternating rounds of each tool.

use super::*;

/// rdma-bench's and perftest's 64 B WRITE half-RTT, each side's best over
/// the rounds run in turn.
struct Parity {
    ours_min: f64,
    ours_p50: f64,
    pt_min: f64,
    pt_typical: f64,
}

/// How many alternating rounds a comparison runs: at least `min`, and
/// then more, up to `max`, while rdma-bench's best minimum is above
/// `bound` times perftest's. A burst of load on the shared machine then
/// spoils one round, not one tool; and since noise only ever raises a
/// minimum, more rounds bring each tool's best nearer its floor, never
/// below it, so a real excess stays above the bound however many run.
#[derive(Clone, Copy)]
struct Rounds {
    min: u16,
    max: u16,
    bound: f64,
}

/// The clock test's plan: three rounds, judged only for a halving gone wrong.
const PARITY_ROUNDS: Rounds = Rounds {
    min: 3,
    max: 3,
    bound: f64::INFINITY,
};

impl Parity {
    fn ratios(&self) -> (f64, f64) {
        (self.ours_min / self.pt_min, self.ours_p50 / self.pt_typical)
    }

    /// A missing halving (ratio about 2) or a double halving (about 0.5)
    /// moves the minimum and the median alike, so both must leave
    /// (0.67, 1.5) to fail. Noise moves one at a time: a shared 2-CPU machine
    /// moved single-run medians by tens of percent (p50 ratios 0.63-1.76
    /// seen), and in a guest on the HPET perftest once had a t_min of half
    /// its typical round trip (min ratio 2.1, p50 ratio 1.2).
    fn assert_holds(&self, context: &str) {
        let (r_min, r_p50) = self.ratios();
        let band = |r: f64| r > 0.67 && r < 1.5;
        assert!(
            band(r_min) || band(r_p50),
            "{context}rdma-bench/perftest 64 B WRITE half-RTT: min {r_min:.3} ({:.2} / {:.2} us) and p50 {r_p50:.3} ({:.2} / {:.2} us) both outside (0.67, 1.5)",
            self.ours_min, self.pt_min, self.ours_p50, self.pt_typical
        );
    }
}

/// Measures [`Parity`] over the alternating `rounds` of `iters`
/// iterations: each round starts a fresh `serve` (on `port + round`) for
/// rdma-bench and then a fresh ib_write_lat pair (on `pt_port + round`), as
/// `scripts/vs-perftest` does; also returns rdma-bench's first document.
/// Like for like: rdma-bench runs without --inline, and so does perftest
/// (-I 0; it inlines small WRITEs on some NICs by default).
fn write_parity_with_perftest(
    name: &str,
    (port, pt_port): (u16, u16),
    rounds: Rounds,
    iters: &str,
) -> (Parity, ResultsDoc) {
    let dev = device();
    let mut first = None;
    let mut p = Parity {
        ours_min: f64::INFINITY,
        ours_p50: f64::INFINITY,
        pt_min: f64::INFINITY,
        pt_typical: f64::INFINITY,
    };
    let mut round = 0;
    while round < rounds.min || (round < rounds.max && p.ratios().0 > rounds.bound) {
        let doc = {
            let _server = start_server(port + round);
            let target = format!("{}:{}", ipv4(), port + round);
            latency(
                &format!("{name}-{round}"),
                &["write", "--connect", &target, "-s", "64", "-n", iters],
            )
            .0
        };
        let stats = &doc.latency().next().unwrap().stats;
        let (ours_min, ours_p50) = (stats.min_ns / 1000.0, stats.p50_ns / 1000.0);
        p.ours_min = p.ours_min.min(ours_min);
        p.ours_p50 = p.ours_p50.min(ours_p50);
        let gid = doc.device.gid_index.to_string();
        first.get_or_insert(doc);
        // perftest calibrates its own cycle counter at start-up and, in a
        // guest on the HPET, sometimes fails to (its table then says `inf`):
        // such a round counts for nothing.
        let (pt_min, pt_typical) = perftest_write_lat_64(&dev, &gid, iters, pt_port + round);
        eprintln!("round {round}: rdma-bench min {ours_min:.2} p50 {ours_p50:.2} us, perftest t_min {pt_min:.2} t_typical {pt_typical:.2} us");
        if pt_min.is_finite() && pt_typical.is_finite() && pt_min > 0.0 {
            p.pt_min = p.pt_min.min(pt_min);
            p.pt_typical = p.pt_typical.min(pt_typical);
        } else {
            eprintln!("ib_write_lat reported t_min {pt_min} us, t_typical {pt_typical} us (its clock calibration failed): round {round} counts only for rdma-bench");
        }
        round += 1;
    }
    let (r_min, r_p50) = p.ratios();
    eprintln!(
        "MEASURED: 64 B WRITE half-RTT rdma-bench/perftest, best of {round} rounds of {iters} each: min {r_min:.3} ({:.2} / {:.2} us), p50 {r_p50:.3} ({:.2} / {:.2} us)",
        p.ours_min, p.pt_min, p.ours_p50, p.pt_typical
    );
    (p, first.expect("at least one round"))
}

// ---------------------------------------------------------------------------
// Clock (scripts/test also runs this test alone in a guest booted with
// `scripts/softroce --clock hpet`, whose kernel keeps time with the HPET)
// ---------------------------------------------------------------------------

/// ib_write_lat's 64 B row as (t_min, t_typical) in µs.
fn perftest_min_and_typical_us(out: &str) -> (f64, f64) {
    for line in out.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() >= 5 && cols[0] == "64" && cols[1].chars().all(|c| c.is_ascii_digit()) {
            // #bytes #iterations t_min t_max t_typical ...
            let num = |s: &str| s.parse::<f64>().expect("a number in ib_write_lat's table");
            return (num(cols[2]), num(cols[4]));
        }
    }
    panic!("no result row for 64 B in ib_write_lat output:\n{out}");
}

#[test]
#[ignore = "needs an RDMA device and perftest: run via scripts/test (soft-RoCE)"]
fn clock_in_this_guest_is_the_tsc_and_its_read_cost_is_recorded() {
    let kernel =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .map(|s| s.trim().to_string())
            .ok();

    // rdma-bench as two processes, like perftest.
    let (parity, doc) = write_parity_with_perftest("clock", (18820, 18620), PARITY_ROUNDS, "2000");
    let clock = &doc.clock;
    eprintln!("clock: {clock}");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            clock.source, "tsc",
            "the TSC whatever the kernel chose: {clock:?}"
        );
        assert!(clock.ghz.is_some_and(|g| g > 0.2), "{clock:?}");
        let spread = clock.calibration_spread_ppm.expect("spread recorded");
        assert!((0.0..=1000.0).contains(&spread), "{clock:?}");
    }
    assert!(clock.read_ns > 0.0, "read cost recorded: {clock:?}");
    assert!(clock.kernel_clocksource.is_some(), "{clock:?}");
    assert_eq!(clock.kernel_clocksource, kernel);
    parity.assert_holds(&format!(
        "kernel clocksource {}, clock {} ({:.1} ns per read): ",
        kernel.as_deref().unwrap_or("?"),
        clock.source,
        clock.read_ns
    ));
}

/// Runs ib_write_lat (server and client on this device, 64 B, `iters`) on
/// TCP `port` and returns its (t_min, t_typical) in µs.
fn perftest_write_lat_64(dev: &str, gid: &str, iters: &str, port: u16) -> (f64, f64) {
    let port = port.to_string();
    let mut server = Command::new("ib_write_lat")
        .args([
            "-d", dev, "-x", gid, "-s", "64", "-n", iters, "-p", &port, "-I", "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ib_write_lat (perftest) is installed");
    common::await_tcp_listener(port.parse().unwrap(), 60);
    let client = Command::new("ib_write_lat")
        .args([
            "-d",
            dev,
            "-x",
            gid,
            "-s",
            "64",
            "-n",
            iters,
            "-p",
            &port,
            "-I",
            "0",
            &ipv4(),
        ])
        .output()
        .expect("ib_write_lat client runs");
    // The server ends with its client; a client that never reached it
    // leaves it waiting, so it is killed after a while, never waited on.
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = server.kill();
            let _ = server.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (pt_out, pt_err) = text(&client);
    assert!(
        client.status.success(),
        "ib_write_lat failed: {pt_err}{pt_out}"
    );
    perftest_min_and_typical_us(&pt_out)
}

/// The bound on rdma-bench's best 64 B WRITE minimum over perftest's. The
/// minimum is the figure additive noise cannot fake (no sample is faster
/// than the work between its two clock reads), so an excess in it is work
/// in rdma-bench's timed span that perftest's does not have: one more
/// syscall there costs about 1 us of the 9-19 us half round trip of a TCG
/// guest, over 5 %. Why 1.05 and not 1.02, measured in TCG guests
/// (2026-12-07, 2596 MHz EPYC host), best minima in alternating rounds:
/// - perftest against itself, the floor of what any tool can be held to:
///   best-of-5 ratios 0.984-1.019 over 8 blocks of 5 rounds;
/// - rdma-bench against perftest: best-of-5 1.001-1.029 over the same 8
///   blocks, best of 30-40 rounds 1.019-1.024 (and 1.017-1.036 over 7 rounds
///   on a 2445 MHz host on 2026-12-03), 1.010-1.081 over 8 runs of 5 rounds
///   while the host's load moved rounds between modes 9, 11 and 13 us apart
///   (the 1.081: rdma-bench's 5 rounds missed the fastest mode).
///
/// A 1.02 bound would fail a perftest-vs-perftest run now and then, and this
/// build about one run in four; 1.05 holds every floor measured with room
/// for the noise, and the extra rounds (up to 15) give a tool that missed
/// the fast mode its chance.
const MIN_RATIO_BOUND: f64 = 1.05;

#[test]
#[ignore = "needs an RDMA device and perftest: run via scripts/test (soft-RoCE)"]
fn write_64_minimum_is_within_5_percent_of_perftest() {
    let rounds = Rounds {
        min: 5,
        max: 15,
        bound: MIN_RATIO_BOUND,
    };
    let (parity, doc) = write_parity_with_perftest("vsperf", (18830, 18850), rounds, "5000");
    parity.assert_holds("");
    assert!(
        !doc.latency().next().unwrap().posting.inline,
        "like for like: no inline"
    );
    let (r_min, _) = parity.ratios();
    assert!(
        r_min <= MIN_RATIO_BOUND,
        "rdma-bench's best 64 B WRITE half-RTT minimum is {r_min:.3} of perftest's ({:.2} / {:.2} us) after {} alternating rounds, above {MIN_RATIO_BOUND}: something runs between its clock reads that perftest's loop does not run",
        parity.ours_min,
        parity.pt_min,
        rounds.max
    );
}
