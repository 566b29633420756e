//! Memory layouts on the device: `--hugepages` (its pages really leave the
//! kernel's pool, and it is refused naming the pool's file when none are
//! reserved), `--mr-per-qp` (one huge page per QP's registration shows the
//! registrations are per QP), and `--region`/`--offsets` (the target's memory
//! shows the WRITE payload at one slot, or spread over the region).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{bin, read_json, refused, scratch, text};
use rdma_bench::results::{ResultsDoc, TputRecord};

const NR: &str = "/proc/sys/vm/nr_hugepages";

/// Reserves `n` huge pages for the test's lifetime, restoring the old count
/// on drop (the guest runs the tests as root).
struct Reserve(String);

impl Reserve {
    fn pages(n: u64) -> Reserve {
        let old = std::fs::read_to_string(NR).expect("the kernel has huge pages");
        std::fs::write(NR, n.to_string()).expect("write nr_hugepages (root in the guest)");
        Reserve(old.trim().to_string())
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        let _ = std::fs::write(NR, &self.0);
    }
}

fn meminfo(field: &str) -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("{field} in /proc/meminfo"))
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap()
}

/// Runs rdma-bench with `args` (plus device and JSON output) and returns its
/// records, its stderr, and the most huge pages it held at once (sampled
/// from /proc/meminfo while it ran).
fn run_sampling(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Vec<TputRecord>, String, u64) {
    let json = scratch(name).join("r.json");
    let dev = super::device();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["-d", &dev, "--quiet", "--json", json.to_str().unwrap()]);
    let total = meminfo("HugePages_Total:");
    let mut child = Command::new(bin())
        .args(&all)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rdma-bench starts");
    let start = Instant::now();
    let mut most = 0;
    while child.try_wait().unwrap().is_none() {
        most = most.max(total - meminfo("HugePages_Free:"));
        assert!(start.elapsed() < Duration::from_secs(120), "{args:?} hangs");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{args:?}: {stderr}{stdout}");
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("results parse");
    (doc.throughput().cloned().collect(), stderr, most)
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn hugepages_back_the_buffers_and_are_refused_when_none_are_reserved() {
    let none = Reserve::pages(0);
    for args in [
        &["write", "--tput", "inbound", "--hugepages", "-D", "0.2"][..],
        &["write", "-n", "100", "--use_hugepages"][..],
    ] {
        refused(
            args,
            &[
                "--hugepages: no huge pages are reserved",
                "/proc/sys/vm/nr_hugepages is 0",
            ],
        );
    }
    drop(none);
    let _pool = Reserve::pages(64);
    assert_eq!(meminfo("HugePages_Total:"), 64, "the guest reserved them");
    // One registration per thread: the issuer's set and the target's set
    // each map one 2 MiB page.
    let (recs, _, held) = run_sampling(
        "huge",
        &[
            "write",
            "--tput",
            "inbound",
            "--hugepages",
            "-q",
            "4",
            "-D",
            "0.5",
        ],
        &[],
    );
    assert!(
        recs[0].memory.hugepages && !recs[0].memory.mr_per_qp,
        "{:?}",
        recs[0]
    );
    assert!(recs[0].mops > 0.0);
    assert_eq!(held, 2, "pages held by 1 issuer set + 1 target set");
    // --mr-per-qp: each of the 4 issuer QPs and 4 target QPs registers its own
    // buffer, so eight pages leave the pool.
    let (recs, _, held) = run_sampling(
        "huge-per-qp",
        &[
            "write",
            "--tput",
            "inbound",
            "--hugepages",
            "--mr_per_qp",
            "-q",
            "4",
            "-D",
            "0.5",
        ],
        &[],
    );
    assert!(
        recs[0].memory.hugepages && recs[0].memory.mr_per_qp,
        "{:?}",
        recs[0]
    );
    assert!(
        recs[0].per_qp_ops.iter().all(|&n| n > 0),
        "{:?}",
        recs[0].per_qp_ops
    );
    assert_eq!(held, 8, "one page per QP registration");
    // Latency takes huge pages too, and records them.
    let (doc, _) = super::latency("huge-lat", &["write", "-n", "200", "--hugepages"]);
    let r = doc.latency().next().unwrap();
    assert!(
        r.memory.hugepages
            && !r.memory.mr_per_qp
            && r.memory.region.is_none()
            && r.memory.offsets == "fixed"
    );
    assert_eq!(r.iters, 200);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn mr_per_qp_with_8_qps_inbound_and_outbound() {
    for dir in ["inbound", "outbound"] {
        for verb in ["write", "read", "send"] {
            let (doc, _) = super::latency(
                &format!("perqp-{verb}-{dir}"),
                &[
                    verb,
                    "--tput",
                    dir,
                    "-q",
                    "8",
                    "--mr-per-qp",
                    "-n",
                    "200",
                    "-s",
                    "64",
                ],
            );
            // A count, not a duration: on a starved machine a short window
            // may end before every QP's first completion.
            let r = doc.throughput().next().unwrap();
            assert!(r.memory.mr_per_qp && !r.memory.hugepages, "{r:?}");
            assert_eq!(r.per_qp_ops.len(), 8);
            assert!(
                r.per_qp_ops.iter().all(|&n| n >= 200),
                "{verb} {dir}: {r:?}"
            );
            if verb == "send" {
                assert_eq!(r.received, Some(r.sent), "{verb} {dir}: {r:?}");
            }
        }
    }
    let (doc, _) = super::latency(
        "perqp-atomic",
        &[
            "atomic",
            "--op",
            "fadd",
            "--tput",
            "inbound",
            "-q",
            "8",
            "--mr-per-qp",
            "-n",
            "200",
        ],
    );
    let r = doc.throughput().next().unwrap();
    // Each QP's word lives in its own registration and counts its fetch-adds.
    assert_eq!(r.verify_failures, Some(0), "{r:?}");
    assert!(r.memory.mr_per_qp);
}

/// "[n0, n1] of N" from the target's test-hook line.
fn written(stderr: &str) -> (Vec<usize>, usize) {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("test hook: WRITE slots written per target QP: "))
        .unwrap_or_else(|| panic!("no test-hook line in {stderr}"));
    let (list, of) = line.split_once(" of ").unwrap();
    let counts = list
        .trim_matches(['[', ']'])
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    (counts, of.trim().parse().unwrap())
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn offsets_spread_writes_over_the_region_as_asked() {
    let hook = [("RDMA_BENCH_TEST_SLOTS", "1")];
    // 64 KiB region, 64 B payloads: 1024 slots per QP.
    for dir in ["outbound", "inbound"] {
        for offsets in ["fixed", "sequential", "random"] {
            let (recs, stderr, _) = run_sampling(
                &format!("off-{dir}-{offsets}"),
                &[
                    "write",
                    "--tput",
                    dir,
                    "-q",
                    "2",
                    "-s",
                    "64",
                    "--region",
                    "64k",
                    "--offsets",
                    offsets,
                    "-D",
                    "0.3",
                ],
                &hook,
            );
            let r = &recs[0];
            assert_eq!(
                (r.memory.region, r.memory.offsets.as_str()),
                (Some(65536), offsets)
            );
            let (counts, slots) = written(&stderr);
            assert_eq!(slots, 1024, "{stderr}");
            assert_eq!(counts.len(), 2);
            for (q, &n) in counts.iter().enumerate() {
                // Each QP's WRs reached at most as many slots as it posted.
                let posted = r.per_qp_ops[q] as usize;
                // The WRs of the window (the hook also saw the warm-up's, so
                // these are lower bounds): sequential ones cover a slot each
                // until they wrap; P random draws of 1024 slots cover
                // 1024 (1 - e^(-P/1024)) on average, and 80 % of that is
                // far below what one run draws at any P (how many a timed
                // window posts depends on the machine's speed).
                let least = match offsets {
                    "fixed" => 1,
                    "sequential" => posted.min(1024) * 9 / 10,
                    _ => (0.8 * 1024.0 * (1.0 - (-(posted as f64) / 1024.0).exp())) as usize,
                };
                if offsets == "fixed" {
                    assert_eq!(n, 1, "{dir} fixed: only slot 0 is written: {stderr}");
                } else {
                    assert!(
                        n >= least,
                        "{dir} {offsets}: QP {q} wrote {n} of 1024 slots after {posted} WRs (at least {least})"
                    );
                }
            }
        }
    }
    // READs walk a region too (no memory witness: nothing is written), and a
    // region larger than a huge page's worth of slots works.
    let (doc, _) = super::latency(
        "off-read",
        &[
            "read",
            "--tput",
            "inbound",
            "-s",
            "256",
            "--region",
            "16m",
            "--offsets",
            "random",
            "-D",
            "0.2",
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert!(
        r.mops > 0.0 && r.memory.region == Some(16 << 20) && r.memory.offsets == "random",
        "{r:?}"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn region_and_offsets_through_serve() {
    // Outbound: the serve process issues at this client's region, so the
    // hook line comes from this side; the layout crossed the wire.
    let _server = super::start_server(18691);
    let target = format!("{}:18691", super::ipv4());
    let (recs, stderr, _) = run_sampling(
        "off-serve",
        &[
            "write",
            "--tput",
            "outbound",
            "--connect",
            &target,
            "-s",
            "64",
            "--region",
            "64k",
            "--offsets",
            "sequential",
            "--mr-per-qp",
            "-q",
            "2",
            "-D",
            "0.3",
        ],
        &[("RDMA_BENCH_TEST_SLOTS", "1")],
    );
    let r = &recs[0];
    assert!(
        r.memory.mr_per_qp && r.memory.region == Some(65536) && r.memory.offsets == "sequential"
    );
    let (counts, slots) = written(&stderr);
    assert_eq!(slots, 1024);
    for (q, &n) in counts.iter().enumerate() {
        let posted = r.per_qp_ops[q] as usize;
        assert!(
            n >= 512.min(posted),
            "QP {q} wrote {n} of 1024 slots after {posted} WRs"
        );
    }
}
