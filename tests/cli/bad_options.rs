//! Bad options are refused with exit 2 and one line naming the option and
//! the limit; help and version exit 0.

use super::*;

#[test]
fn bad_input_exits_2_with_one_line_naming_the_option() {
    #[allow(clippy::type_complexity)]
    let cases: &[(&[&str], &str)] = &[
        (&["write", "--size", "0"], "--size"),
        // A valid --cpu list is read into the arguments (it once panicked there).
        (&["write", "--cpu", "0-1", "--size", "0"], "--size"),
        (&["write", "--cpu", "0,x"], "--cpu"),
        (&["write", "--sge", "0"], "--sge 0"),
        (&["write", "--sge", "5", "-s", "4"], "--sge 5 --size 4"),
        (&["write", "--sge", "99999"], "--sge 99999"),
        (&["send", "--sge", "-1"], "--sge"),
        (
            &["write", "--completion", "-s", "0", "--sge", "2"],
            "--sge 2 --size 0",
        ),
        (
            &["write", "--tput", "inbound", "-s", "2", "--sge", "3"],
            "--sge 3 --size 2",
        ),
        (&["echo", "--sge", "2"], "--sge"),
        (&["write", "--events"], "--events: a write ping-pong"),
        (&["write", "-e"], "--events: a write ping-pong"),
        (&["echo", "--events"], "--events"),
        (
            &["echo", "--tput", "-e"],
            "--events: echo --tput sleeps on completions, and a WRITE request or response is seen in memory, not in a completion: --events needs --req send --resp send",
        ),
        (
            &["echo", "--tput", "--req", "write", "--resp", "send", "-e"],
            "--events needs --req send --resp send",
        ),
        (
            &["echo", "--events"],
            "--events applies only to echo --tput (--req send --resp send) and to latency runs",
        ),
        (&["write", "--post-api", "fast"], "--post-api"),
        (
            &["write", "--post-api", "ex", "--inline", "--sge", "2"],
            "--post-api ex --inline --sge 2",
        ),
        (&["write", "--post-api"], "--post-api"),
        (&["atomic", "--op", "fadd", "--sge", "2"], "--sge"),
        (&["write", "-b"], "--bidirectional applies only with --tput"),
        (&["send", "--srq"], "--srq applies only with --tput"),
        (&["send", "--use-srq"], "--srq applies only with --tput"),
        (
            &["write", "--tput", "inbound", "-b"],
            "--bidirectional: each side issues outbound to the other",
        ),
        (
            // -b: each side is offered the rate, and checked like one side.
            &[
                "write",
                "--tput",
                "outbound",
                "-b",
                "--rate",
                "0.0000001",
                "-D",
                "1",
            ],
            "fewer than one refill",
        ),
        (
            &["echo", "--tput", "--bidirectional"],
            "--bidirectional: echo already runs both ways",
        ),
        (
            &["write", "--tput", "outbound", "--srq"],
            "--srq: write posts no receives",
        ),
        (
            &["echo", "--tput", "--use-srq"],
            "--srq: the echo server receives only SEND requests",
        ),
        (
            &["write", "--tput", "outbound", "-b", "--forever", "-D", "1"],
            "--forever runs until Ctrl-C/SIGTERM",
        ),
        (
            &["send", "--tput", "inbound", "--srq", "--mr-per-qp"],
            "--srq: not with --mr-per-qp",
        ),
        (
            &["write", "-s", "0"],
            "--size 0: a ping-pong detects arrival by the payload's last byte",
        ),
        (&["send", "-s", "0"], "--size 0: a ping-pong"),
        (&["read", "-s", "0"], "--size 0: a READ"),
        (
            &["read", "--tput", "inbound", "-s", "0"],
            "--size 0: a READ",
        ),
        (&["echo", "-s", "0"], "--size 0: echo"),
        (&["echo", "--tput", "-s", "0"], "--size 0: echo"),
        (&["atomic", "--op", "fadd", "-s", "0"], "--size 0"),
        (&["write", "--size", "abc"], "--size"),
        (&["write", "--size", "64..2"], "--size"),
        (&["write", "--size", "2,,4"], "--size"),
        (&["write", "--iters", "0"], "--iters"),
        (&["write", "--iters", "-5"], "--iters"),
        (&["write", "--transport", "xx"], "--transport"),
        (&["write", "-c", "ud"], "--transport ud"),
        (&["read", "-c", "uc"], "--transport uc"),
        (&["atomic", "-c", "uc", "--op", "fadd"], "--transport uc"),
        (&["read", "--inline"], "--inline"),
        (&["atomic", "--op", "fadd", "--inline"], "--inline"),
        (&["atomic", "--op", "cas", "--size", "64"], "--size 64"),
        (&["atomic"], "--op"),
        (&["write", "--op", "fadd"], "--op"),
        (&["echo", "--imm"], "--imm"),
        (&["read", "--imm"], "--imm"),
        (&["write", "--imm"], "--imm"),
        (&["echo", "--completion"], "--completion"),
        (&["write", "--timeout", "0"], "--timeout"),
        (&["write", "--duration", "0"], "--duration"),
        (&["write", "--duration", "1", "--iters", "5"], "--duration"),
        (&["write", "--size", "2g"], "--size"),
        (&["write", "--warmup", "x"], "--warmup"),
        (&["write", "--ib-port", "300"], "--ib-port"),
        (&["serve", "--max-clients", "0"], "--max-clients"),
        (&["bogus"], "bogus"),
        (
            &["write", "--json", "/nonexistent-dir/x.json"],
            "/nonexistent-dir",
        ),
        (&["write", "-c", "rc,uc"], "one transport"),
        // QoS and path, before any device is opened.
        (&["write", "--sl", "16"], "--sl 16: must be 0..=15"),
        (&["write", "--sl", "-1"], "--sl -1: must be 0..=15"),
        (
            &["write", "--tclass", "256"],
            "--tclass 256: must be 0..=255",
        ),
        (&["send", "--tclass", "-3"], "--tclass -3: must be 0..=255"),
        (
            &["write", "--flow-label", "1048576"],
            "--flow-label 1048576: must be 0..=1048575",
        ),
        (
            &["write", "--mtu", "3000"],
            "--mtu 3000: must be one of 256, 512, 1024, 2048, 4096",
        ),
        (&["write", "--mtu", "-512"], "--mtu -512: must be one of"),
        (&["write", "--mtu", "abc"], "--mtu"),
        (
            &["write", "--tput", "inbound", "--sl", "99"],
            "--sl 99: must be 0..=15",
        ),
        // --cm: rdma_cm connects RC QP pairs only, before any device is opened.
        (
            &["write", "--cm", "-c", "uc"],
            "--cm -c uc: librdmacm has no UC",
        ),
        (
            &["send", "-R", "-c", "ud"],
            "--cm -c ud: rdma-bench connects only RC",
        ),
        (
            &["write", "--tput", "inbound", "--cm", "-c", "rc,uc"],
            "--cm -c uc: librdmacm has no UC",
        ),
        (&["echo", "--tput", "--cm"], "--cm: echo throughput"),
        (&["serve", "--cm-port", "0"], "--cm-port"),
        (&["serve", "--cm-port", "70000"], "--cm-port"),
        // Throughput validation, before any device is opened.
        (&["write", "--tput", "sideways"], "--tput sideways"),
        (&["write", "--tput"], "--tput"),
        (&["echo", "--tput", "outbound"], "--tput outbound"),
        (
            &["write", "--tput", "inbound", "-S", "4", "--postlist", "8"],
            "--postlist 8",
        ),
        (
            &[
                "write",
                "--tput",
                "inbound",
                "--window",
                "2",
                "--postlist",
                "4",
            ],
            "--window 2",
        ),
        (&["write", "--tput", "inbound", "--window", "0"], "--window"),
        (&["write", "--tput", "inbound", "-q", "0"], "--qps"),
        (&["write", "--tput", "inbound", "-q", "100000"], "--qps"),
        (
            &["write", "--tput", "inbound", "--threads", "65"],
            "--threads 65",
        ),
        (
            &["write", "--tput", "inbound", "-S", "0"],
            "--signal-period",
        ),
        (&["read", "--tput", "inbound", "-c", "uc"], "--transport uc"),
        (
            &["atomic", "--op", "cas", "--tput", "outbound", "-c", "rc,ud"],
            "--transport ud",
        ),
        (
            &["write", "--tput", "outbound", "-c", "ud"],
            "--transport ud",
        ),
        (
            &["write", "--tput", "inbound", "-c", "xx"],
            "--transport xx",
        ),
        (&["write", "--tput", "inbound", "--imm"], "--imm"),
        (
            &["write", "--tput", "inbound", "--completion"],
            "--completion",
        ),
        (&["write", "--tput", "inbound", "--group", "2"], "--group 2"),
        (
            &[
                "write",
                "--tput",
                "outbound",
                "--group",
                "2",
                "--connect",
                "h",
            ],
            "--group 2",
        ),
        (
            &["echo", "--tput", "--req", "send", "-c", "rc"],
            "--req send",
        ),
        (&["echo", "--tput", "-c", "ud"], "-c ud"),
        (&["write", "--tput", "inbound", "-D", "0"], "--duration"),
        (
            &["write", "--tput", "inbound", "--warmup-time", "-1"],
            "--warmup-time",
        ),
        (
            &["write", "--tput", "inbound", "-n", "100", "-D", "1"],
            "--duration",
        ),
        (
            &["write", "--tput", "inbound", "-S", "1", "--postlist", "2,4"],
            "contradictory",
        ),
    ];
    for (args, needle) in cases {
        refused(args, &[needle]);
    }
}

#[test]
fn help_and_version_exit_0() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let (stdout, _) = text(&out);
    for verb in [
        "devices", "serve", "read", "write", "send", "echo", "atomic",
    ] {
        assert!(stdout.contains(verb), "help lacks {verb}");
    }
    assert_eq!(run(&["--version"]).status.code(), Some(0));
}

#[test]
fn unclear_errors_name_the_option_and_the_argument() {
    let cases: &[(&[&str], &str)] = &[
        (&["write", "-s", "-5"], "--size"),
        (&["serve", "-p", "-1"], "--port"),
        (&["write", "-x", "-1"], "--gid-index"),
        (&["write", "-x", "256"], "--gid-index"),
        (&["write", "-n", "-5"], "--iters"),
        (&["write", "--warmup", "-1"], "--warmup"),
        (&["write", "--timeout", "-1"], "--timeout"),
        (&["write", "-D", "1e-300"], "--duration 1e-300"),
        (&["write", "-D", "-1"], "--duration"),
        (&["write", "-D", "inf"], "--duration"),
        (&["write", "-i", "0"], "--ib-port"),
        (&["write", "-i", "256"], "--ib-port"),
        (&["serve", "--max-clients", "-3"], "--max-clients"),
        (&["serve", "--timeout", "nan"], "--timeout"),
        (&["write", "--tput", "inbound", "-q", "-1"], "--qps"),
        (
            &["write", "--tput", "inbound", "--window", "-4"],
            "--window",
        ),
        (&["write", "--tput", "inbound", "--group", "-2"], "--group"),
        (&["run"], "<CONFIG>"),
        (&["compare", "a.json"], "<FILES>"),
        (&["write", "--json"], "--json <FILE>"),
    ];
    for (args, needle) in cases {
        let err = common::refused(args, &[needle]);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
}
