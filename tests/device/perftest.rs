//! perftest's spellings on a device: -Q is -S (the CQEs polled say so), -t
//! and -l set the window and postlist, -I inlines only payloads up to SIZE,
//! -a runs 2 B to 8 MiB (UD: up to the MTU), -F and --report_gbits are accepted and say so
//! once; --markdown writes one row per point.

use super::common::{run, scratch, text};
use super::{device, latency};

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn perftest_spellings_measure_what_they_name() {
    // -Q 64 -t 16 -l 4: S=64 runs as the window's 16 (the effective period),
    // one CQE per 16 WRs; postlist 4.
    let (doc, _) = latency(
        "perftest-q",
        &[
            "write", "--tput", "inbound", "-s", "64", "-n", "2048", "-Q", "64", "-t", "16", "-l",
            "4",
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert_eq!(
        (r.signal_period, r.window, r.postlist),
        (64, 16, 4),
        "{r:?}"
    );
    assert_eq!(r.effective_signal_period, Some(16), "{r:?}");
    assert_eq!(r.sent, 2048);
    assert!(
        (r.sent / 16..=r.sent / 16 + 1).contains(&r.completions),
        "{r:?}"
    );
    eprintln!(
        "MEASURED: -Q 64 -t 16 -l 4: {} WRs, {} CQEs polled",
        r.sent, r.completions
    );

    // -I 32: 16 and 32 B go inline; -I 8: 16 B does not.
    let (doc, _) = latency(
        "perftest-i",
        &["send", "-s", "16,32", "-I", "32", "-n", "200"],
    );
    assert!(doc.latency().all(|r| r.inline), "{:?}", doc.results);
    let (doc, _) = latency("perftest-i8", &["send", "-s", "16", "-I", "8", "-n", "200"]);
    assert!(doc.latency().all(|r| !r.inline), "{:?}", doc.results);

    // -a: every power of two from 2 B to 8 MiB, one READ each.
    let (doc, _) = latency("perftest-a", &["read", "-a", "-n", "3", "--warmup", "1"]);
    let sizes: Vec<u32> = doc.latency().map(|r| r.size).collect();
    assert_eq!(sizes, (1..=23).map(|i| 1u32 << i).collect::<Vec<_>>());
    // -a over UD stops at the UD MTU, as perftest's does.
    let (doc, _) = latency(
        "perftest-a-ud",
        &["send", "-c", "ud", "-a", "-n", "3", "--warmup", "1"],
    );
    let mtu = doc.device.active_mtu;
    let sizes: Vec<u32> = doc.latency().map(|r| r.size).collect();
    let expected: Vec<u32> = (1..=23).map(|i| 1u32 << i).filter(|&s| s <= mtu).collect();
    assert!(expected.len() >= 8, "active MTU {mtu}");
    assert_eq!(sizes, expected, "UD sizes up to the MTU {mtu}");

    // -F and --report_gbits: accepted, said once above the table; --markdown
    // holds one row per point, in Gb/s.
    let dir = scratch("perftest-notes");
    let md = dir.join("t.md");
    let dev = device();
    let out = run(&[
        "write",
        "-d",
        &dev,
        "--tput",
        "inbound",
        "-s",
        "64,128",
        "-D",
        "0.1",
        "--warmup-time",
        "0.05",
        "-F",
        "--report_gbits",
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}{stdout}");
    assert_eq!(stdout.matches("# note: -F").count(), 1, "{stdout}");
    assert_eq!(
        stdout.matches("# note: --report_gbits").count(),
        1,
        "{stdout}"
    );
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.contains("Gb/s [10^9 bit/s]"), "{table}");
    let rows = table
        .lines()
        .filter(|l| l.starts_with("| - | write | inbound |"))
        .count();
    assert_eq!(rows, 2, "{table}");
}
