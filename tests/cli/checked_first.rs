//! What is checked before anything is built: sweeps counted, and every
//! given option checked before a device is opened.

use super::*;

#[test]
fn sweeps_are_counted_before_they_are_built() {
    let dir = common::scratch("sweeps");
    let list = |n: u32| (1..=n).map(|v| v.to_string()).collect::<Vec<_>>().join(",");
    let (l100, l5000, l20000) = (list(100), list(5000), list(20_000));
    let every = [
        "write",
        "--tput",
        "inbound",
        "-c",
        "rc,uc",
        "-s",
        "1..1m",
        "-S",
        "1..16384",
        "-q",
        "1..4096",
        "--postlist",
        "1..16384",
        "--window",
        "1..16384",
        "--threads",
        "1..64",
    ];
    let cli_cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "write",
                "--tput",
                "inbound",
                "-q",
                &l5000,
                "--threads",
                &l5000,
            ],
            "25000000 points exceed the limit of 10000",
        ),
        (
            vec![
                "write", "--tput", "inbound", "-q", &l100, "--window", &l100, "-s", "1,2",
            ],
            "20000 points exceed the limit of 10000",
        ),
        (every.to_vec(), "points exceed the limit of 10000"),
        (
            vec!["write", "-s", &l20000],
            "--size: more than 10000 values",
        ),
        (
            vec!["write", "--tput", "inbound", "-s", &l20000],
            "--size: more than 10000 values",
        ),
        (
            vec![
                "send",
                "--tput",
                "outbound",
                "-S",
                &l5000,
                "--postlist",
                "1,2,3",
            ],
            "15000 points exceed",
        ),
        (
            vec![
                "echo", "--tput", "-c", "uc", "--window", &l5000, "-s", "1..4096",
            ],
            "points exceed the limit",
        ),
    ];
    let mut n = 0;
    for (args, needle) in &cli_cases {
        common::refused(args, &[needle]);
        n += 1;
    }
    let arr = |k: u32| format!("[{}]", list(k));
    let files = [
        (format!("name = \"t\"\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nqps = {}\nwindow = {}\n", arr(200), arr(200)), ":6:", "points exceed the limit of 10000"),
        (format!("name = \"t\"\n[defaults]\nmetric = \"throughput\"\nqps = {}\nthreads = {}\n[[series]]\nverb = \"write\"\ndirection = \"inbound\"\n", arr(64), arr(64)), "", "4096"),
        (format!("name = \"t\"\n[[series]]\nverb = \"read\"\nsize = {}\n", arr(20_000)), ":4: key 'size'", "more than 10000 values"),
        (format!("name = \"t\"\n[defaults]\nsize = \"{}\"\n{}", list(2000), "[[series]]\nverb = \"write\"\n".repeat(6)), "", "over the limit of 10000 per run"),
    ];
    for (i, (body, line, needle)) in files.iter().enumerate() {
        let path = dir.join(format!("big{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let p = path.to_str().unwrap();
        if needle == &"4096" {
            // 64 x 64 = 4096 points: under the limit, accepted (launcher lines).
            let path = dir.join("ok.toml");
            std::fs::write(&path, mpi_toml(body.trim_start_matches("name = \"t\"\n"))).unwrap();
            let out = common::run_within(&["run", path.to_str().unwrap(), "--out", "o"], 10);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
            continue;
        }
        common::refused(&["run", p], &[&format!("{p}{line}"), needle]);
        n += 1;
    }
    // Exactly at the limit is accepted.
    let path = dir.join("limit.toml");
    std::fs::write(&path, mpi_toml(&format!("[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nqps = {}\nwindow = {}\n", arr(100), arr(100)))).unwrap();
    let out = common::run_within(&["run", path.to_str().unwrap(), "--out", "o"], 10);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    assert!(n + 2 >= 10, "{n}");
}

#[test]
fn every_given_option_is_checked_for_the_run_before_any_device() {
    let dir = common::scratch("given");
    let cfg = dir.join("direct.toml");
    std::fs::write(&cfg, DIRECT_TOML).unwrap();
    let cfg = cfg.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["write", "-q", "0"], "--qps applies only with --tput"),
        (
            &["write", "--window", "abc"],
            "--window applies only with --tput",
        ),
        (
            &["write", "--threads", "99999"],
            "--threads applies only with --tput",
        ),
        (
            &["write", "--group", "0"],
            "--group applies only with --tput",
        ),
        (
            &["write", "--warmup-time", "nan"],
            "--warmup-time applies only with --tput",
        ),
        (
            &["send", "-S", "0", "--postlist", "0"],
            "applies only with --tput",
        ),
        (
            &["write", "--req", "send"],
            "--req applies only with echo --tput",
        ),
        (
            &["echo", "--resp", "write"],
            "--resp applies only with echo --tput",
        ),
        (
            &["write", "--tput", "inbound", "--resp", "send"],
            "--resp applies only with echo --tput",
        ),
        (
            &["write", "--tput", "inbound", "--warmup", "5"],
            "--warmup applies only without --tput",
        ),
        (
            &["read", "--completion"],
            "--completion applies only to write and send",
        ),
        (&["send", "--op", "cas"], "--op applies only to atomic"),
        (&["read", "--imm"], "--imm applies only to write and send"),
        (
            &["write", "--tput", "inbound", "--imm"],
            "--imm applies only to send with --tput",
        ),
        (
            &["atomic", "--op", "fadd", "--inline"],
            "--inline applies only to write, send and echo",
        ),
        (
            &["write", "--tput", "inbound", "--threads", "99999"],
            "--threads 99999",
        ),
        (
            &["write", "--tput", "inbound", "--warmup-time", "nan"],
            "--warmup-time NaN",
        ),
        (&["write", "--connect", ""], "--connect : no host"),
        (&["write", "--connect", "host:0"], "--connect host:0"),
        (&["write", "--connect", "host:65536"], "1..=65535"),
        (&["write", "--connect", "host:abc"], "--connect host:abc"),
        (&["write", "--connect", ":18515"], "no host"),
        (&["write", "--connect", "[::1"], "closing ']'"),
        (&["write", "--connect", "[nothex]:1"], "not an IPv6 address"),
        (&["write", "--connect", "a b"], "not a host name"),
        (&["send", "--connect", "fe80::1:18515:9"], "--connect"),
        (
            &["serve", "--bind", "not an address"],
            "--bind not an address",
        ),
        (&["serve", "--bind", ""], "--bind"),
        (&["serve", "--bind", "999.1.1.1"], "--bind 999.1.1.1"),
        (&["serve", "-p", "0"], "--port"),
        (&["write", "-i", "0"], "--ib-port"),
        (&["serve", "-i", "0"], "--ib-port"),
        (&["run", cfg, "-i", "0"], "--ib-port"),
        (&["run", cfg, "--connect", "host:0"], "--connect host:0"),
        (&["write", "-d", ""], "--device"),
        (&["write", "-d", "a/b"], "--device"),
    ];
    for (args, needle) in cases {
        common::refused(args, &[needle]);
    }
}
