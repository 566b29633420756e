//! Host tests (no device) for bounded input: memory that input can ask for
//! (CPU lists, results files, compare, under-load lists), checks that need
//! no device made before one is opened, and output targets compared by file
//! identity. Each class is a table of cases through the binary.

mod common;

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Address space for the memory-limited runs: room for the binary to start
/// and read its inputs, far below what an unbounded parse would ask for.
const LIMITED_KIB: u64 = 512 * 1024;

/// Runs the binary under `ulimit -v kib` with a generous deadline.
fn run_limited(args: &[&str], kib: u64) -> Output {
    let script = format!("ulimit -v {kib} || exit 99; exec \"$0\" \"$@\"");
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(common::bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    // Not a timing bound: only so that a hang fails instead of stalling.
    let out = child.wait_with_output().expect("the limited run ends");
    assert_ne!(out.status.code(), Some(99), "ulimit -v is not available");
    out
}

/// The bad-input contract under a memory limit: exit 2 (never a signal such
/// as SIGABRT from a failed allocation), one line, every needle.
fn refused_limited(args: &[&str], kib: u64, needles: &[&str]) -> String {
    let out = run_limited(args, kib);
    let (stdout, stderr) = common::text(&out);
    let shown: Vec<String> = args.iter().map(|a| a.chars().take(60).collect()).collect();
    assert_eq!(
        out.status.signal(),
        None,
        "{shown:?}: killed by a signal: {stderr}"
    );
    assert_eq!(out.status.code(), Some(2), "{shown:?}: stderr {stderr}");
    assert!(!stderr.contains("panicked"), "{shown:?} panicked: {stderr}");
    assert!(
        !stderr.contains("memory allocation"),
        "{shown:?}: allocation failure: {stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{shown:?}: not one line: {stderr}"
    );
    for n in needles {
        assert!(stderr.contains(n), "{shown:?}: '{stderr}' lacks '{n}'");
    }
    assert!(stdout.is_empty(), "{shown:?}: printed to stdout: {stdout}");
    stderr
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

const SERIES: &str = "[[series]]\nverb = \"write\"\n";

/// A results file of `strings` one-byte strings in its command line.
fn tiny_strings(dir: &Path, name: &str, strings: usize) -> PathBuf {
    // Spliced in as text: building it as a JSON value would cost the test
    // what it is meant to show the binary does not spend.
    let path = common::results_file(dir, name, |v| {
        v["command_line"] = serde_json::json!(["@TINY@"]);
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let list = vec!["\"a\""; strings].join(",");
    std::fs::write(&path, text.replace("\"@TINY@\"", &list)).unwrap();
    path
}

#[test]
fn input_whose_parsed_form_outgrows_its_bytes_is_refused_under_a_memory_limit() {
    let dir = common::scratch("limits-memory");
    // 128 KiB of whole-set ranges in one argument: each item alone is fine.
    let many_ranges = vec!["0-1023"; 128 * 1024 / 7 - 1].join(",");
    let many_ranges_high = format!("{many_ranges},2000");
    // An experiment's cpu = of nearly 1 MiB, the file's limit.
    let cfg = dir.join("cpu.toml");
    let long = vec!["0-1023"; (1 << 20) / 7 - 100].join(",");
    std::fs::write(&cfg, format!("name = \"c\"\ncpu = \"{long}\"\n{SERIES}")).unwrap();
    let cfg_high = dir.join("cpu-high.toml");
    std::fs::write(
        &cfg_high,
        format!("name = \"c\"\ncpu = \"{long},1024\"\n{SERIES}"),
    )
    .unwrap();
    let out = dir.join("out");
    // A results file of many tiny strings, just over the count limit.
    let tiny = tiny_strings(&dir, "tiny.json", 4_000_001);
    // Under the count limit, but more than the limited process may hold.
    let tiny_under = tiny_strings(&dir, "tiny-under.json", 3_900_000);
    // More records than any run can measure, each nearly free in the file.
    let records = common::results_file(&dir, "records.json", |v| {
        v["results"] = serde_json::Value::Array(vec![serde_json::json!({}); 10_001]);
    });
    let ok = common::results_file(&dir, "ok.json", |_| {});
    let many_files: Vec<String> = vec![s(&ok); 257];
    let mut compare_many = vec!["compare"];
    compare_many.extend(many_files.iter().map(String::as_str));
    // Within one argument's limit (128 KiB).
    let loads = (1..=20_000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");

    let (cfg, cfg_high, out) = (s(&cfg), s(&cfg_high), s(&out));
    let (tiny, tiny_under, records, ok) = (s(&tiny), s(&tiny_under), s(&records), s(&ok));
    #[allow(clippy::type_complexity)]
    let cases: Vec<(Vec<&str>, u64, Vec<&str>)> = vec![
        // Many ranges in one --cpu: at most 1024 CPUs parsed, whatever the length.
        (
            vec!["write", "--cpu", &many_ranges],
            LIMITED_KIB,
            vec!["--cpu"],
        ),
        (
            vec!["write", "--cpu", &many_ranges_high],
            LIMITED_KIB,
            vec!["--cpu", "CPU 2000", "above the highest CPU", "1023"],
        ),
        (
            vec!["serve", "--cpu", &many_ranges],
            LIMITED_KIB,
            vec!["--cpu"],
        ),
        (vec!["run", &cfg, "--out", &out], LIMITED_KIB, vec!["cpu"]),
        (
            vec!["run", &cfg_high, "--out", &out],
            LIMITED_KIB,
            vec!["key 'cpu'", "CPU 1024", "above the highest CPU"],
        ),
        // Results files: counted before they are built.
        (
            vec!["compare", &tiny, &ok],
            LIMITED_KIB,
            vec!["tiny.json", "holds 400", "strings", "limit of 4000000"],
        ),
        (
            vec!["compare", &tiny_under, &ok],
            256 * 1024,
            vec![
                "tiny-under.json",
                "MiB",
                "more than this process may allocate",
            ],
        ),
        (
            vec!["compare", &records, &ok],
            LIMITED_KIB,
            vec!["records.json", "10001 records", "limit of 10000"],
        ),
        (
            vec!["run", &cfg, "--resume", &tiny],
            LIMITED_KIB,
            vec!["--resume", "strings", "limit of 4000000"],
        ),
        // Many compare files: refused before any is read.
        (
            compare_many.clone(),
            LIMITED_KIB,
            vec!["257 files", "limit of 256"],
        ),
        // A long --under-load list is counted before its (quadratic) check.
        (
            vec!["write", "--under-load", &loads],
            LIMITED_KIB,
            vec!["--under-load", "20000 loads", "limit of 64"],
        ),
    ];
    for (args, kib, needles) in &cases {
        refused_limited(args, *kib, needles);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_needs_no_device_is_refused_before_one_is_opened() {
    let dir = common::scratch("limits-nodevice");
    let cfg = dir.join("cpu.toml");
    std::fs::write(&cfg, format!("name = \"c\"\ncpu = \"1023\"\n{SERIES}")).unwrap();
    let cfg_ok = dir.join("plain.toml");
    std::fs::write(&cfg_ok, format!("name = \"c\"\n{SERIES}")).unwrap();
    let out = dir.join("out");
    let (cfg, cfg_ok, out) = (s(&cfg), s(&cfg_ok), s(&out));
    #[allow(clippy::type_complexity)]
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        // A CPU outside the allowed set (no host here has 1024 CPUs).
        (
            vec!["write", "--cpu", "1023"],
            vec!["--cpu 1023", "not available to this process", "allowed:"],
        ),
        (
            vec!["send", "--tput", "inbound", "--cpu", "0,1023"],
            vec!["--cpu 0,1023", "CPU 1023 not available"],
        ),
        (
            vec!["serve", "--cpu", "1023"],
            vec!["--cpu 1023", "not available to this process"],
        ),
        (
            vec!["run", &cfg, "--out", &out],
            vec!["cpu.toml:2:", "key 'cpu'", "1023", "not available"],
        ),
        (
            vec!["run", &cfg_ok, "--cpu", "1000-1023", "--out", &out],
            vec!["--cpu 1000-1023", "not available"],
        ),
        // A UD payload above the --mtu given.
        (
            vec!["send", "-c", "ud", "--mtu", "1024", "-s", "2048"],
            vec!["--size 2048", "UD MTU of 1024", "--mtu"],
        ),
        (
            vec!["send", "-c", "ud", "--mtu", "256", "-s", "64,512"],
            vec!["--size 512", "--mtu"],
        ),
        (
            vec![
                "send", "--tput", "inbound", "-c", "ud", "--mtu", "1024", "-s", "4096",
            ],
            vec!["--size 4096", "UD MTU of 1024", "--mtu"],
        ),
        (
            vec![
                "echo", "--tput", "--req", "send", "--resp", "send", "-c", "ud", "--mtu", "512",
                "-s", "1024",
            ],
            vec!["--size 1024", "--mtu"],
        ),
        // A budget of pinned memory above the host's memory.
        (
            vec!["serve", "--max-memory", "1t"],
            vec!["--max-memory 1t", "more than this host's memory"],
        ),
        // Echo's SEND responses go over UD whatever carries the requests.
        (
            vec!["echo", "--tput", "-s", "4096", "--mtu", "1024"],
            vec![
                "--size 4096",
                "UD MTU of 1024",
                "echo's SEND responses go over UD",
            ],
        ),
        (
            vec![
                "echo", "--tput", "--req", "write", "--resp", "send", "-c", "uc", "--mtu", "512",
                "-s", "1024",
            ],
            vec!["--size 1024", "UD MTU of 512"],
        ),
        // serve's listener is bound before the device opens.
        (
            vec!["serve", "--bind", "192.0.2.1"],
            vec!["--bind 192.0.2.1", "cannot listen"],
        ),
    ];
    for (args, needles) in &cases {
        let e = common::refused(args, needles);
        assert!(!e.contains("no RDMA device"), "{args:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ud_sizes_above_the_mtu_given_are_left_out_of_minus_a() {
    // perftest's -a caps rather than refuses: what is left gets as far as
    // the device (none here), never a refusal naming --size.
    for args in [
        &["send", "-c", "ud", "--mtu", "1024", "-a"][..],
        &[
            "send", "--tput", "inbound", "-c", "ud", "--mtu", "1024", "-a",
        ],
        &[
            "send", "--tput", "inbound", "-c", "rc,ud", "--mtu", "512", "-a",
        ],
    ] {
        let out = common::run_within(args, 30);
        let (_, stderr) = common::text(&out);
        assert!(!stderr.contains("--size"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        if out.status.code() == Some(2) {
            assert!(stderr.contains("no RDMA device"), "{args:?}: {stderr}");
        }
    }
}

/// Every entry of `dir` with its size and link count.
fn listing(dir: &Path) -> Vec<(String, u64, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                m.len(),
                m.nlink(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn output_targets_that_are_one_file_are_refused_by_identity() {
    let dir = common::scratch("limits-identity");
    let d = |n: &str| s(&dir.join(n));
    let a = s(&common::results_file(&dir, "a.json", |_| {}));
    let b = s(&common::results_file(&dir, "b.json", |_| {}));
    // Two names of one existing file.
    let h1 = d("h1.out");
    std::fs::write(&h1, "keep me").unwrap();
    let h2 = d("h2.out");
    std::fs::hard_link(&h1, &h2).unwrap();
    // An experiment and the file it resumes, whose CSV is a link of the JSON.
    let cfg = d("t.toml");
    std::fs::write(&cfg, format!("name = \"t\"\n{SERIES}")).unwrap();
    let sub = dir.join("resume");
    std::fs::create_dir(&sub).unwrap();
    let resume = s(&common::results_file(&sub, "r.json", |v| {
        v["experiment"] = "t".into()
    }));
    std::fs::hard_link(&resume, sub.join("r.csv")).unwrap();
    // One new name reached through two spellings of its directory.
    let via_dot = format!("{}/./new.json", dir.display());
    let new = d("new.json");
    #[allow(clippy::type_complexity)]
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["write", "--json", &h1, "--csv", &h2],
            vec![
                "--csv",
                "h2.out",
                "same file as --json",
                "h1.out",
                "two names",
            ],
        ),
        (
            vec!["write", "--json", &h1, "--markdown", &h2],
            vec!["--markdown", "same file as --json"],
        ),
        (
            vec!["send", "--tput", "inbound", "--csv", &h2, "--markdown", &h1],
            vec!["--markdown", "same file as --csv"],
        ),
        (
            vec!["compare", &a, &b, "--json", &h1, "--markdown", &h2],
            vec!["--markdown", "same file as --json"],
        ),
        (
            vec!["compare", &a, &b, "--csv", &h1, "--json", &h2],
            vec!["--csv", "h1.out", "same file as --json", "h2.out"],
        ),
        (
            vec!["run", &cfg, "--resume", &resume],
            vec!["--resume (its CSV)", "same file as --resume"],
        ),
        (
            vec!["write", "--json", &new, "--csv", &via_dot],
            vec!["--csv", "same file as --json"],
        ),
    ];
    for (args, needles) in &cases {
        let before = (listing(&dir), listing(&sub));
        common::refused(args, needles);
        assert_eq!(
            (listing(&dir), listing(&sub)),
            before,
            "{args:?} changed files"
        );
    }
    assert_eq!(std::fs::metadata(&h1).unwrap().nlink(), 2, "the link holds");
    assert_eq!(std::fs::read_to_string(&h2).unwrap(), "keep me");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_experiment_is_bounded_in_series_and_its_defaults_decided_in_one_check_each() {
    let dir = common::scratch("series-bound");
    // Thirty defaults beside every series: each series must not cost a
    // check per default (a thousand series, each taking every default).
    let defaults = "[defaults]\nmetric = \"throughput\"\ndirection = \"inbound\"\nqps = 2\nwindow = 8\nsignal_period = 4\npostlist = 1\nwarmup_time = 0.1\nduration = 0.5\ntimeout = 9\nsge = 1\n";
    let many = |n: usize| {
        let mut t = format!("name = \"m\"\n{defaults}");
        for i in 0..n {
            t.push_str(&format!(
                "[[series]]\nlabel = \"s{i}\"\nverb = \"write\"\nsize = {}\n",
                8 + i
            ));
        }
        t
    };
    let ok = dir.join("ok.toml");
    std::fs::write(&ok, many(1000)).unwrap();
    let out_dir = dir.join("o");
    let out = common::run_within(&["run", &s(&ok), "--out", &s(&out_dir)], 120);
    let (_, stderr) = common::text(&out);
    assert!(
        stderr.contains("no RDMA device"),
        "1000 series pass every check: {stderr}"
    );
    assert!(
        !out_dir.exists(),
        "no --out directory made for a run that never started"
    );
    let over = dir.join("over.toml");
    std::fs::write(&over, many(1001)).unwrap();
    common::refused(
        &["run", &s(&over), "--out", &s(&out_dir)],
        &["key 'series'", "1001 series, over the limit of 1000"],
    );
}
