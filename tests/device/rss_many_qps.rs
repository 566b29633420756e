//! Memory at 1024 QPs: a loopback throughput point (the issuer's 1024 QPs
//! and the target's 1024 in one process) peaks under 64 MiB, outbound and
//! inbound, with the default window (16 per QP at 1024 QPs, so the send
//! queues ask for 32 WRs and rxe maps 20 KiB for each; docs/vs-perftest.md
//! has the table of what each queue maps).
//!
//! Witnesses: the record's `peak_rss_kib` (VmHWM, read by rdma-bench) and
//! the kernel's maximum resident set size of the child as `/usr/bin/time`
//! reports it from wait4's rusage, which shares no code with rdma-bench.

use std::process::Command;

use super::common::{bin, read_json, scratch, text};
use super::device;
use rdma_bench::results::ResultsDoc;

const LIMIT_KIB: u64 = 64 * 1024;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_1024_qp_point_peaks_under_64_mib_outbound_and_inbound() {
    let dev = device();
    for direction in ["outbound", "inbound"] {
        let dir = scratch(&format!("rss1024{direction}"));
        let (json, maxrss) = (dir.join("r.json"), dir.join("maxrss"));
        let args = [
            "write", "--tput", direction, "-q", "1024", "-D", "1", "-d", &dev, "--quiet", "--json",
        ];
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M", "-o", maxrss.to_str().unwrap()])
            .arg(bin())
            .args(args)
            .arg(&json)
            .output()
            .expect("/usr/bin/time runs (Debian package `time`, scripts/install-deps)");
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?}: {stderr}{stdout}");
        let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("results parse");
        let r = doc.throughput().next().expect("one throughput record");
        let rss = doc.peak_rss_kib.expect("peak RSS recorded");
        let kernel: u64 = std::fs::read_to_string(&maxrss)
            .expect("/usr/bin/time wrote the maximum RSS")
            .trim()
            .parse()
            .expect("a number of KiB");
        eprintln!(
            "MEASURED: write --tput {direction} -q 1024 -D 1: window {}, ops {}, peak_rss_kib {rss}, kernel's max RSS {kernel} KiB",
            r.window, r.ops
        );
        assert_eq!((r.qps, r.window), (1024, 16), "{r:?}");
        assert!(r.ops > 0, "{r:?}");
        // The record's figure is the process's own peak so far, read when the
        // results were written; the kernel's covers the whole life, so it is
        // at least as large, and the exit adds little.
        assert!(
            rss <= kernel && kernel < rss + 8 * 1024,
            "{direction}: peak_rss_kib {rss} against the kernel's {kernel} KiB"
        );
        assert!(
            kernel < LIMIT_KIB,
            "{direction}: peak RSS {kernel} KiB at 1024 QPs, over {LIMIT_KIB} KiB"
        );
    }
}
