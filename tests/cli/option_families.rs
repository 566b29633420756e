//! Refusals of option families: perftest's spellings, memory layout,
//! rates and latency under load, intervals and --forever.

use super::*;

/// perftest's spellings reach the options they stand for: each alias is
/// refused with the message of the option it names, or changes what the run
/// would do in a way the refusals show (device-free; tests/device/perftest.rs
/// runs them on a device).
#[test]
fn perftest_aliases_reach_their_options() {
    use common::refused;
    // -t = --window, -l = --postlist, -Q = -S (--signal-period).
    refused(&["write", "--tput", "inbound", "-t", "0"], &["--window"]);
    refused(
        &["write", "-t", "16"],
        &["--window applies only with --tput"],
    );
    refused(&["write", "--tput", "inbound", "-l", "0"], &["--postlist"]);
    refused(
        &["send", "-l", "4"],
        &["--postlist applies only with --tput"],
    );
    refused(
        &["write", "--tput", "inbound", "-Q", "0"],
        &["--signal-period"],
    );
    refused(
        &["read", "-Q", "8"],
        &["--signal-period applies only with --tput"],
    );
    // -a: 2 B to 8 MiB, 23 sizes: 23 x 435 signaling periods = 10005 points.
    let periods: Vec<String> = (1..=435).map(|v| v.to_string()).collect();
    let periods = periods.join(",");
    refused(
        &["write", "--tput", "inbound", "-a", "-S", &periods],
        &["10005 points exceed the limit of 10000"],
    );
    refused(&["write", "-a", "-s", "64"], &["--all", "--size"]);
    refused(
        &["atomic", "--op", "fadd", "-a"],
        &["--all applies only to"],
    );
    // -I SIZE decides per size, so a size list that straddles SIZE (-a's
    // 2 B..8 MiB with -I 64, or 16,64,1024) passes the host's checks and is
    // refused only by the next check (--sl 16); -I is parsed as a whole number.
    for tail in [&["-a", "-I", "64"][..], &["-s", "16,64,1024", "-I", "64"]] {
        for tput in [&[][..], &["--tput", "inbound"]] {
            let args: Vec<&str> = [&["write"][..], tput, tail, &["--sl", "16"]].concat();
            refused(&args, &["--sl 16"]);
        }
    }
    refused(
        &["echo", "-s", "16,1024", "-I", "64", "--sl", "16"],
        &["--sl 16"],
    );
    // read and atomic carry no payload to inline: -I is refused like --inline
    // (perftest ignores it there), in latency and throughput.
    for verb in [&["read"][..], &["atomic", "--op", "fadd"]] {
        for tput in [&[][..], &["--tput", "inbound"]] {
            let args: Vec<&str> = [verb, tput, &["-I", "64"]].concat();
            refused(
                &args,
                &["--inline-size applies only to write, send and echo"],
            );
        }
    }
    refused(&["write", "-I", "-1"], &["--inline-size -1"]);
    refused(
        &["write", "-I", "2147483648"],
        &["--inline-size 2147483648", "1073741824"],
    );
    refused(&["write", "-I", "1.5"], &["--inline-size"]);
    refused(&["write", "-I", "64", "--inline"], &["--inline"]);
    refused(&["write", "--inline_size", "x"], &["--inline-size"]);
    // -I below every size means not inline: --inline-size 1 with 2 B is allowed
    // as far as the host can tell, and so are -F and --report_gbits, which
    // leave other checks to refuse the command (--sl 16).
    refused(&["write", "-s", "2", "-I", "1", "--sl", "16"], &["--sl 16"]);
    refused(&["write", "-F", "--sl", "16"], &["--sl 16"]);
    refused(&["write", "--CPU-freq", "--sl", "16"], &["--sl 16"]);
    refused(
        &["write", "--report_gbits"],
        &["--report-gbits applies only with --tput"],
    );
    refused(
        &["write", "--tput", "inbound", "--report_gbits", "--sl", "16"],
        &["--sl 16"],
    );
}

#[test]
fn memory_layout_options_are_refused_where_they_do_not_apply() {
    #[allow(clippy::type_complexity)]
    let cases: &[(&[&str], &str)] = &[
        (
            &["write", "--tput", "inbound", "--offsets", "random"],
            "--offsets random: needs --region SIZE",
        ),
        (
            &["write", "--tput", "inbound", "--region", "32"],
            "--region 32: must be 64..=",
        ),
        (
            &["write", "--tput", "inbound", "--region", "lots"],
            "--region lots: expected bytes",
        ),
        (
            &["write", "--tput", "inbound", "--region", "1k", "-s", "4096"],
            "--region 1024 --size 4096",
        ),
        (
            &["send", "--tput", "inbound", "--region", "1m"],
            "--region 1048576: a SEND",
        ),
        (
            &[
                "atomic", "--op", "fadd", "--tput", "inbound", "--region", "1m",
            ],
            "--region 1048576: atomics",
        ),
        (&["echo", "--tput", "--mr-per-qp"], "--mr-per-qp: echo"),
        (
            &["echo", "--tput", "--region", "1m"],
            "--region 1048576: echo",
        ),
        (&["write", "--mr-per-qp"], "--mr-per-qp"),
        (&["write", "--region", "1m"], "--region"),
        (
            &["write", "--tput", "inbound", "--offsets", "zigzag"],
            "--offsets",
        ),
    ];
    for (args, needle) in cases {
        common::refused(args, &[needle]);
    }
    // perftest's spellings are the same options.
    common::refused(&["write", "--mr_per_qp", "-n", "10"], &["--mr-per-qp"]);
    let reserved = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap_or_default();
    if reserved.trim() == "0" {
        for spelling in ["--hugepages", "--use_hugepages"] {
            common::refused(
                &["write", "--tput", "inbound", spelling],
                &[
                    "--hugepages: no huge pages are reserved",
                    "/proc/sys/vm/nr_hugepages",
                ],
            );
        }
    }
}

#[test]
fn rate_and_under_load_refuse_nonsense_with_one_line() {
    #[allow(clippy::type_complexity)]
    let cases: &[(&[&str], &str)] = &[
        (&["write", "--tput", "inbound", "--rate", "0"], "--rate 0"),
        (&["write", "--tput", "inbound", "--rate", "-1"], "--rate -1"),
        (
            &["write", "--tput", "inbound", "--rate", "NaN"],
            "--rate NaN",
        ),
        (&["write", "--tput", "inbound", "--rate", "1e9"], "--rate"),
        (
            &["write", "--tput", "inbound", "--rate", "1", "--burst", "0"],
            "--burst 0",
        ),
        (
            &[
                "write", "--tput", "inbound", "--rate", "1", "--burst", "129",
            ],
            "--burst 129: above --window 128",
        ),
        (
            &[
                "write",
                "--tput",
                "inbound",
                "--rate",
                "0.0000001",
                "-D",
                "1",
            ],
            "fewer than one refill",
        ),
        (
            &["write", "--tput", "inbound", "--burst", "4"],
            "--burst: needs --rate",
        ),
        (
            &["write", "--tput", "inbound", "--rate-per-qp"],
            "--rate-per-qp: needs --rate",
        ),
        (&["write", "--rate", "1"], "--rate applies only with --tput"),
        (
            // Echo is paced one request per token.
            &["echo", "--tput", "--rate", "0.0000001", "-D", "1"],
            "fewer than one refill of 1",
        ),
        (&["write", "--under-load", "0%"], "--under-load 0%"),
        (&["write", "--under-load", "101%"], "--under-load 101%"),
        (&["write", "--under-load", "10%,10%"], "given twice"),
        (&["write", "--under-load", "fast"], "--under-load fast"),
        (&["write", "--under-load", "-1"], "--under-load -1"),
        (
            &["write", "--under-load", "10%", "--tput", "inbound"],
            "--tput does not apply to --under-load",
        ),
        (
            &["write", "--under-load", "10%", "--rate", "1"],
            "--rate does not apply to --under-load",
        ),
        (
            &[
                "write",
                "--under-load",
                "10%",
                "--connect",
                "nonexistent.invalid",
            ],
            "--connect nonexistent.invalid: cannot resolve",
        ),
        (&["write", "--under-load", "10%", "-s", "2,4"], "one size"),
        (&["write", "--under-load", "10%", "-q", "1,2"], "one point"),
        (
            &["write", "--under-load", "10%", "--burst", "0"],
            "--burst 0",
        ),
        (
            &["write", "--under-load", "10%", "--burst", "999"],
            "--burst 999",
        ),
        (&["read", "--under-load", "10%", "--op", "fadd"], "--op"),
    ];
    for (args, needle) in cases {
        refused(args, &[needle]);
    }
}

#[test]
fn interval_and_forever_refusals_exit_2() {
    #[allow(clippy::type_complexity)]
    let cases: &[(&[&str], &str)] = &[
        (&["write", "--interval", "0"], "--interval 0"),
        (&["write", "--interval", "0.01"], "--interval 0.01"),
        (&["write", "--interval", "-1"], "--interval -1"),
        (&["write", "--interval", "5000"], "--interval 5000"),
        (&["write", "--interval", "NaN"], "--interval NaN"),
        (
            &["write", "--tput", "inbound", "--interval", "0.001"],
            "--interval 0.001",
        ),
        (&["write", "--forever", "-n", "100"], "--forever"),
        (&["write", "--forever", "-D", "2"], "--forever"),
        (
            &["write", "--tput", "inbound", "--forever", "-D", "2"],
            "--forever",
        ),
        (
            &["write", "--forever", "-s", "2,64"],
            "--forever: runs one point",
        ),
        (
            &["write", "--tput", "inbound", "--forever", "--qps", "1,2"],
            "--forever: runs one point",
        ),
        (
            &["write", "--tput", "outbound", "--forever"],
            "--forever: outbound",
        ),
        (
            &["write", "--run_infinitely", "--interval", "0"],
            "--interval 0",
        ),
        (
            &["write", "--under-load", "10%,max", "--interval", "1"],
            "--interval: not with --under-load",
        ),
        (
            &["write", "--under-load", "10%,max", "--forever"],
            "--forever: not with --under-load",
        ),
    ];
    for (args, needle) in cases {
        refused(args, &[needle]);
    }
    let dir = common::scratch("badlive");
    let files: &[(&str, &str)] = &[
        ("name = \"t\"\n[[series]]\nverb = \"write\"\ninterval = \"often\"\n", ":4: key 'interval'"),
        ("name = \"t\"\n[[series]]\nverb = \"write\"\ninterval = 0.001\n", "--interval 0.001"),
        ("name = \"t\"\n[[series]]\nverb = \"write\"\nforever = 1\n", ":4: key 'forever'"),
        (
            "name = \"t\"\n[[series]]\nverb = \"write\"\nforever = true\n[[series]]\nverb = \"read\"\n",
            "forever runs one point until stopped, so its experiment has one series",
        ),
    ];
    for (i, (body, needle)) in files.iter().enumerate() {
        let path = dir.join(format!("live{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let p = path.to_str().unwrap();
        let out = run(&["run", p, "--out", dir.to_str().unwrap()]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{body}: {stderr}");
        assert!(stderr.contains(p), "names the file: {stderr}");
        assert!(stderr.contains(needle), "'{stderr}' lacks '{needle}'");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(stdout.is_empty());
    }
}
