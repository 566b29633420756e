//! Host-side tests of the command line: bad input is refused with exit code
//! 2, one line naming the option, and no panic. No device is needed: every
//! case here is refused before a verbs object is created.

mod common;
use common::{run, text};
use std::path::Path;

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
        let out = run(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: '{stderr}' lacks '{needle}'"
        );
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(stdout.is_empty(), "{args:?}: printed to stdout: {stdout}");
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
fn bad_experiment_files_exit_2_naming_file_line_and_key() {
    let dir = common::scratch("badcfg");
    let cases: &[(&str, &str)] = &[
        ("name = \"t\"\n[[series]]\nverb = \"read\"\nsizes = 4\n", ":4: unknown key 'sizes'"),
        ("name = \"t\"\n[[series]]\nverb = \"teleport\"\n", ":3: key 'verb'"),
        ("name = \"t\"\n[[series]]\nverb = \"read\"\ntransport = \"uc\"\n", ":4: key 'transport'"),
        (
            "name = \"t\"\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nsignal_period = 2\npostlist = 8\n",
            ":7: key 'postlist'",
        ),
        ("name = \"t\"\n[[series]]\nverb = \"atomic\"\nop = \"xor\"\n", ":4: key 'op'"),
        ("name = \"t\"\n[[series]]\nverb = \"write\"\niters = \"many\"\n", ":4: key 'iters'"),
        ("name = \"t\"\n[[series]\nverb = \"write\"\n", ":2:"),
        ("name = \"t\"\n[[series]]\nverb = \"write\"\nmtu = 3000\n", ":4: key 'mtu'"),
        ("name = \"t\"\n[defaults]\nsl = 16\n[[series]]\nverb = \"write\"\n", "key 'sl'"),
        ("[[series]]\nverb = \"write\"\n", "name"),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let p = path.to_str().unwrap();
        let out = run(&["run", p, "--out", dir.to_str().unwrap()]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{body}: {stderr}");
        assert!(stderr.contains(p), "names the file: {stderr}");
        assert!(stderr.contains(needle), "'{stderr}' lacks '{needle}'");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(stdout.is_empty());
    }
    let missing = run(&["run", "/nonexistent/x.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing).1.contains("/nonexistent/x.toml"));
}

/// A direct (non-MPI) experiment: loading it needs no device.
const DIRECT_TOML: &str = "name = \"t\"\n[[series]]\nverb = \"write\"\n";

#[test]
fn special_files_as_input_are_refused_without_blocking() {
    let dir = common::scratch("special-in");
    let d = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let good = common::results_file(&dir, "good.json", |_| {});
    let good = good.to_str().unwrap();
    let cfg = d("direct.toml");
    std::fs::write(&cfg, DIRECT_TOML).unwrap();
    let fifo = d("fifo");
    common::mkfifo(Path::new(&fifo));
    let link_to_fifo = d("link-to-fifo");
    std::os::unix::fs::symlink(&fifo, &link_to_fifo).unwrap();
    let sock = d("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let big_cfg = d("big.toml");
    std::fs::File::create(&big_cfg)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    let big_json = d("big.json");
    std::fs::File::create(&big_json)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let binary = d("binary.toml");
    std::fs::write(&binary, b"name = \"\xff\xfe\"\n").unwrap();
    let subdir = d("subdir");
    std::fs::create_dir(&subdir).unwrap();
    #[allow(clippy::type_complexity)]
    let cases: &[(&[&str], &[&str])] = &[
        (&["run", &fifo], &[&fifo, "named pipe"]),
        (&["run", &link_to_fifo], &[&link_to_fifo, "named pipe"]),
        (&["compare", &fifo, good], &[&fifo, "named pipe"]),
        (&["compare", good, &fifo], &[&fifo, "named pipe"]),
        (
            &["run", &cfg, "--resume", &fifo],
            &["--resume", "named pipe"],
        ),
        (&["run", "/dev/zero"], &["/dev/zero", "character device"]),
        (
            &["run", "/dev/urandom"],
            &["/dev/urandom", "character device"],
        ),
        (&["run", "/dev/null"], &["/dev/null", "character device"]),
        (
            &["compare", "/dev/zero", good],
            &["/dev/zero", "character device"],
        ),
        (
            &["run", &cfg, "--resume", "/dev/urandom"],
            &["--resume", "character device"],
        ),
        (&["run", &subdir], &[&subdir, "directory"]),
        (&["compare", good, &subdir], &[&subdir, "directory"]),
        (&["run", &sock], &[&sock, "socket"]),
        (&["compare", &sock, good], &[&sock, "socket"]),
        (&["run", &big_cfg], &[&big_cfg, "limit of 1048576 bytes"]),
        (
            &["compare", good, &big_json],
            &[&big_json, "limit of 268435456 bytes"],
        ),
        (&["run", &binary], &[&binary, "not UTF-8"]),
    ];
    for (args, needles) in cases {
        common::refused(args, needles);
    }
}

#[test]
fn foreign_results_files_are_refused_naming_file_and_field() {
    let dir = common::scratch("foreign");
    let good = common::results_file(&dir, "good.json", |_| {});
    let good = good.to_str().unwrap().to_string();
    let cfg = dir.join("direct.toml");
    std::fs::write(&cfg, DIRECT_TOML).unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    let set = |k: &'static str, v: serde_json::Value| move |doc: &mut serde_json::Value| doc[k] = v;
    let drop_key = |k: &'static str| {
        move |doc: &mut serde_json::Value| {
            doc.as_object_mut().unwrap().remove(k);
        }
    };
    use serde_json::json;
    type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
    let files: Vec<(&str, Edit, &str)> = vec![
        (
            "v3.json",
            Box::new(set("schema_version", json!(3))),
            "schema_version",
        ),
        (
            "v0.json",
            Box::new(set("schema_version", json!(0))),
            "schema_version",
        ),
        (
            "vneg.json",
            Box::new(set("schema_version", json!(-1))),
            "schema_version",
        ),
        (
            "vstr.json",
            Box::new(set("schema_version", json!("1"))),
            "schema_version",
        ),
        (
            "vfloat.json",
            Box::new(set("schema_version", json!(1.5))),
            "schema_version",
        ),
        (
            "vnull.json",
            Box::new(set("schema_version", json!(null))),
            "schema_version",
        ),
        (
            "vnone.json",
            Box::new(drop_key("schema_version")),
            "schema_version",
        ),
        (
            "perftest.json",
            Box::new(set("tool", json!("perftest"))),
            "tool",
        ),
        (
            "upper.json",
            Box::new(set("tool", json!("RDMA-BENCH"))),
            "tool",
        ),
        ("empty-tool.json", Box::new(set("tool", json!(""))), "tool"),
        ("num-tool.json", Box::new(set("tool", json!(42))), "tool"),
        ("no-tool.json", Box::new(drop_key("tool")), "tool"),
    ];
    for (name, f, field) in files {
        let path = common::results_file(&dir, name, f);
        let p = path.to_str().unwrap();
        common::refused(&["compare", &good, p], &[p, field]);
        common::refused(&["compare", p, &good], &[p, field]);
        common::refused(&["run", &cfg, "--resume", p], &["--resume", p, field]);
    }
    for (name, body) in [
        ("array.json", "[]"),
        ("text.json", "hello"),
        ("empty.json", ""),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        let p = path.to_str().unwrap();
        common::refused(
            &["compare", &good, p],
            &[p, "not an rdma-bench results file"],
        );
    }
}

/// An MPI experiment: `run` prints its launcher lines and opens no device,
/// so it shows through the binary what an experiment file is turned into.
fn mpi_toml(body: &str) -> String {
    format!("name = \"m\"\nlauncher = \"mpi\"\nranks = 3\n{body}")
}

/// Where a child's stdout goes in the stdout tests.
enum Sink {
    /// A closed pipe: its reading end is already gone.
    Closed,
    /// /dev/full: every write fails with ENOSPC.
    Full,
}

fn run_into(args: &[&str], sink: &Sink) -> std::process::Output {
    use std::process::{Command, Stdio};
    let stdout = match sink {
        Sink::Closed => {
            // A connected socket whose other end is gone: writes fail with EPIPE.
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            drop(ours);
            Stdio::from(std::os::fd::OwnedFd::from(theirs))
        }
        Sink::Full => Stdio::from(std::fs::File::create("/dev/full").unwrap()),
    };
    Command::new(common::bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn stdout_closed_ends_quietly_and_other_write_errors_are_one_line() {
    let dir = common::scratch("stdout");
    let a = common::results_file(&dir, "a.json", |_| {});
    let b = common::results_file(&dir, "b.json", |d| d["host"]["hostname"] = "other".into());
    let c = common::results_file(&dir, "c.json", |d| d["device"]["name"] = "mlx5_0".into());
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    let cfg = dir.join("mpi.toml");
    std::fs::write(
        &cfg,
        mpi_toml(
            "[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n",
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let out_json = dir.join("cmp.json");
    let out_json = out_json.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["compare", a, b],
        &["compare", a, b, c],
        &["compare", a, b, "--json", out_json],
        &["run", cfg, "--out", dir.to_str().unwrap()],
        &["--help"],
        &["--version"],
        &["write", "--help"],
        &["help", "compare"],
    ];
    let mut cases = 0;
    for args in commands {
        let out = run_into(args, &Sink::Closed);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?} into a closed pipe: {stderr}"
        );
        assert!(
            stderr.is_empty(),
            "{args:?} into a closed pipe said: {stderr}"
        );
        let out = run_into(args, &Sink::Full);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?} into /dev/full: {stderr}"
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("stdout"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        cases += 2;
    }
    // The comparison file is written before the table, so a closed pipe keeps it.
    assert!(common::read_json(Path::new(out_json))["rows"].is_array());
    // `compare A B | head -1`: one line, and rdma-bench itself exits 0.
    let out = std::process::Command::new("bash")
        .args([
            "-c",
            "set -o pipefail; \"$0\" compare \"$1\" \"$2\" | head -1",
        ])
        .args([common::bin().to_str().unwrap(), a, b])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 1);
    assert!(stderr.is_empty(), "{stderr}");
    assert!(cases + 1 >= 10);
}

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
fn output_targets_are_checked_before_any_work() {
    let dir = common::scratch("targets");
    let d = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let a = common::results_file(&dir, "a.json", |_| {});
    let b = common::results_file(&dir, "b.json", |_| {});
    let (a, b) = (
        a.to_str().unwrap().to_string(),
        b.to_str().unwrap().to_string(),
    );
    let a_bytes = std::fs::read(&a).unwrap();
    let file = d("file.txt");
    std::fs::write(&file, "keep me").unwrap();
    let link = d("link.json");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let dangling = d("dangling.json");
    std::os::unix::fs::symlink(d("nowhere"), &dangling).unwrap();
    let fifo = d("fifo");
    common::mkfifo(Path::new(&fifo));
    let hard = d("hard.json");
    std::fs::hard_link(&a, &hard).unwrap();
    let subdir = d("sub");
    std::fs::create_dir(&subdir).unwrap();
    let cfg = d("c.csv");
    std::fs::write(&cfg, "name = \"t\"\n[[series]]\nverb = \"write\"\n").unwrap();
    let resume = common::results_file(&dir, "c.json", |d| d["experiment"] = "t".into());
    let resume = resume.to_str().unwrap().to_string();
    let a_dot = format!("{}/./a.json", dir.display());
    let in_file = format!("{file}/x.json");
    let missing = d("missing/x.json");
    let trailing = d("new/");
    let same = d("same.out");
    #[allow(clippy::type_complexity)]
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["write", "--json", "/dev/null"],
            vec!["--json /dev/null", "character device"],
        ),
        (
            vec!["write", "--csv", "/dev/full"],
            vec!["--csv /dev/full", "character device"],
        ),
        (
            vec!["write", "--json", &subdir],
            vec!["--json", "directory"],
        ),
        (
            vec!["write", "--json", &trailing],
            vec!["--json", "directory"],
        ),
        (
            vec!["write", "--json", &link],
            vec!["--json", "symbolic link"],
        ),
        (
            vec!["write", "--csv", &dangling],
            vec!["--csv", "symbolic link"],
        ),
        (vec!["write", "--json", &fifo], vec!["--json", "named pipe"]),
        (
            vec!["write", "--json", &missing],
            vec!["--json", "does not exist"],
        ),
        (
            vec!["write", "--json", &in_file],
            vec!["--json", "not a directory"],
        ),
        (vec!["write", "--json", ""], vec!["--json <FILE>"]),
        (
            vec!["write", "--json", &same, "--csv", &same],
            vec!["--csv", "same file as --json"],
        ),
        (
            vec!["compare", &a, &b, "--json", &a],
            vec!["--json", "also an input"],
        ),
        (
            vec!["compare", &a, &b, "--csv", &b],
            vec!["--csv", "also an input"],
        ),
        (
            vec!["compare", &a, &b, "--json", &hard],
            vec!["--json", "also an input"],
        ),
        (
            vec!["compare", &a, &b, "--json", &a_dot],
            vec!["--json", "also an input"],
        ),
        (
            vec!["compare", &a, &b, "--json", &subdir],
            vec!["--json", "directory"],
        ),
        (
            vec!["compare", &a, &b, "--csv", "/dev/null"],
            vec!["--csv /dev/null", "character device"],
        ),
        (
            vec!["compare", &a, &b, "--json", &link],
            vec!["--json", "symbolic link"],
        ),
        (
            vec!["run", &cfg, "--out", &file],
            vec!["--out", "not a directory"],
        ),
        (
            vec!["run", &cfg, "--resume", &resume],
            vec!["--resume", "also an input"],
        ),
    ];
    let before: Vec<_> = listing(&dir);
    for (args, needles) in &cases {
        common::refused(args, needles);
        assert_eq!(listing(&dir), before, "{args:?} left or removed files");
    }
    assert_eq!(
        std::fs::read(&a).unwrap(),
        a_bytes,
        "an input was rewritten"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // An accepted target is written whole, with no temporary file left behind.
    let (j, c) = (d("out.json"), d("out.csv"));
    let out = common::run_within(&["compare", &a, &b, "--json", &j, "--csv", &c], 10);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let mut after = before.clone();
    after.extend(["out.csv".to_string(), "out.json".to_string()]);
    after.sort();
    assert_eq!(listing(&dir), after);
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
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

#[test]
fn experiment_files_are_strictly_typed() {
    let dir = common::scratch("types");
    let s = |body: &str| format!("name = \"t\"\n[[series]]\n{body}");
    let cases: Vec<(String, &str)> = vec![
        (s("verb = \"read\"\niters = false\n"), ":4: key 'iters'"),
        (s("verb = \"write\"\nsize = 64.0\n"), ":4: key 'size'"),
        (s("verb = \"read\"\niters = 1e3\n"), ":4: key 'iters'"),
        (s("verb = \"read\"\niters = \"--help\"\n"), ":4: key 'iters'"),
        (s("verb = \"read\"\nwarmup = \"--json=x\"\n"), ":4: key 'warmup'"),
        (s("verb = \"write\"\ninline = 1\n"), ":4: key 'inline'"),
        (s("verb = \"write\"\ninline_size = true\n"), ":4: key 'inline_size'"),
        (s("verb = \"read\"\ninline_size = 64\n"), ":4: key 'inline_size'"),
        // inline_size over sizes on both sides of it passes; --sl 16 is what is refused.
        (s("verb = \"write\"\nsize = [16, 1024]\ninline_size = 64\nsl = 16\n"), ":6: key 'sl'"),
        (s("verb = \"write\"\ntransport = 5\n"), ":4: key 'transport'"),
        (s("verb = \"atomic\"\nop = true\n"), ":4: key 'op'"),
        (s("verb = \"write\"\nlabel = 5\n"), ":4: key 'label'"),
        (s("verb = [\"write\"]\n"), ":3: key 'verb'"),
        (s("verb = \"write\"\ntimeout = \"30\"\n"), ":4: key 'timeout'"),
        (s("verb = \"write\"\nsize = [64, 1.5]\n"), ":4: key 'size'"),
        (s("verb = \"write\"\nsize = []\n"), ":4: key 'size'"),
        (s("verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nthreads = true\n"), ":6: key 'threads'"),
        (s("verb = \"read\"\nwindow = 4\n"), ":4: key 'window'"),
        (s("verb = \"write\"\nwarmup_time = 0.5\n"), ":4: key 'warmup_time'"),
        (s("verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nwarmup = 3\n"), ":6: key 'warmup'"),
        (s("verb = \"send\"\nop = \"fadd\"\n"), ":4: key 'op'"),
        (s("label = \"A\"\nverb = \"read\"\n[[series]]\nverb = \"write\"\nlabel = \"A\"\n"), ":7: key 'label'"),
        (s("verb = \"read\"\n[[series]]\nlabel = \"read #1\"\nverb = \"write\"\n"), ":5: key 'label'"),
        (s("verb = \"read\"\n\n[[series]]\n\n[[series]]\nverb = \"write\"\n"), ":5: series 2"),
        (s("verb = \"read\"\nlabel = \"\"\n"), ":4: key 'label'"),
        (s("verb = \"write\"\nsge = true\n"), ":4: key 'sge'"),
        (s("verb = \"write\"\nsge = \"4\"\n"), ":4: key 'sge'"),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let path = dir.join(format!("t{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let p = path.to_str().unwrap();
        common::refused(&["run", p], &[&format!("{p}{needle}")]);
    }
    // [defaults] keys apply only where they make sense, and are never refused for it.
    let path = dir.join("defaults.toml");
    std::fs::write(
        &path,
        mpi_toml("[defaults]\nwarmup = 5\nop = \"fadd\"\nwindow = 8\ndirection = \"inbound\"\ncompletion = true\nimm = true\n\
[[series]]\nverb = \"write\"\nmetric = \"throughput\"\n[[series]]\nverb = \"echo\"\nmetric = \"throughput\"\ntransport = \"uc\"\n[[series]]\nverb = \"atomic\"\nmetric = \"throughput\"\n"),
    )
    .unwrap();
    let out = common::run_within(&["run", path.to_str().unwrap(), "--out", "o"], 10);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("mpirun")).collect();
    assert_eq!(
        lines[0],
        "mpirun -np 3 rdma-bench write --tput=inbound --window=8 --json o/m-1.json"
    );
    assert_eq!(
        lines[1],
        "mpirun -np 3 rdma-bench echo --tput --transport=uc --window=8 --json o/m-2.json"
    );
    assert_eq!(
        lines[2],
        "mpirun -np 3 rdma-bench atomic --tput=inbound --op=fadd --window=8 --json o/m-3.json"
    );
    // Under mpirun only throughput runs: a latency series is refused before
    // any launch line, naming the key that would make it run.
    let path = dir.join("mpi-latency.toml");
    std::fs::write(&path, mpi_toml("[[series]]\nverb = \"read\"\n")).unwrap();
    let p = path.to_str().unwrap();
    common::refused(
        &["run", p, "--out", "o"],
        &[
            &format!("{p}:5: key 'metric'"),
            "only throughput series run",
        ],
    );
    // `sge` is an experiment key; a [defaults] sge skips verbs it does not apply to.
    let path = dir.join("sge.toml");
    std::fs::write(
        &path,
        mpi_toml("[defaults]\nsge = 4\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nsize = 0\nsge = 1\n\
[[series]]\nverb = \"send\"\nmetric = \"throughput\"\ndirection = \"outbound\"\n[[series]]\nverb = \"echo\"\nmetric = \"throughput\"\n"),
    )
    .unwrap();
    let out = common::run_within(&["run", path.to_str().unwrap(), "--out", "o"], 10);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("mpirun")).collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0].contains("--size=0") && lines[0].contains("--sge=1"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("--sge=4"), "{}", lines[1]);
    assert!(!lines[2].contains("--sge"), "{}", lines[2]);
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

#[test]
fn text_from_files_is_printed_escaped_and_quoted() {
    let dir = common::scratch("escape");
    let nasty = "x\n$(touch pwned)'\x1b[31m\x07\r";
    // Launcher lines: labels in comments escaped, every word shell-quoted.
    let cfg = dir.join("m.toml");
    std::fs::write(
        &cfg,
        mpi_toml(&format!(
            "[[series]]\nlabel = {}\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n",
            toml_string(nasty)
        )),
    )
    .unwrap();
    let out_dir = dir.join("out dir\n$(touch pwned)'s");
    let out = common::run_within(
        &[
            "run",
            cfg.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
        10,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let mut cases = 0;
    for line in stdout.lines() {
        assert!(
            line.starts_with('#') || line.starts_with("mpirun ") || line.starts_with("srun "),
            "a line broke out: {line:?}"
        );
        assert!(!line.chars().any(char::is_control), "{line:?}");
        cases += 1;
    }
    assert!(
        stdout.contains("# series 'x\\n$(touch pwned)'\\x1b[31m\\x07\\r'"),
        "{stdout}"
    );
    // The srun line, run by bash with printf in place of srun, gives back the words.
    let srun = stdout.lines().find(|l| l.starts_with("srun ")).unwrap();
    let words = std::process::Command::new("bash")
        .args(["-c", &srun.replacen("srun -n 3", "printf '%s\\n'", 1)])
        .current_dir(&dir)
        .output()
        .unwrap();
    let words = String::from_utf8(words.stdout).unwrap();
    let expected = format!("{}/m-1.json", out_dir.display());
    assert!(words.ends_with(&format!("{expected}\n")), "{words:?}");
    assert!(!dir.join("pwned").exists());
    cases += 2;
    // compare: hostnames, devices, verbs and file names from files are escaped.
    let mut files = Vec::new();
    for (i, field) in ["hostname", "device", "verb", "started_utc", "file"]
        .iter()
        .enumerate()
    {
        let name = if *field == "file" {
            format!("f{i}\n\x1b[2J.json")
        } else {
            format!("f{i}.json")
        };
        let path = common::results_file(&dir, &name, |d| match *field {
            "hostname" => d["host"]["hostname"] = nasty.into(),
            "device" => d["device"]["name"] = nasty.into(),
            "verb" => d["results"][0]["verb"] = nasty.into(),
            "started_utc" => d["started_utc"] = nasty.into(),
            _ => {}
        });
        files.push(path.to_str().unwrap().to_string());
    }
    let mut args = vec!["compare"];
    args.extend(files.iter().map(String::as_str));
    let out = common::run_within(&args, 10);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for line in stdout.lines() {
        assert!(!line.chars().any(char::is_control), "{line:?}");
        cases += 1;
    }
    assert!(stdout.contains("\\x1b[31m"), "{stdout}");
    // Column labels past Z, and no overflow at 200 files.
    let one = common::results_file(&dir, "one.json", |_| {});
    let one = one.to_str().unwrap().to_string();
    for (n, last) in [(30, "[AD]"), (200, "[GR]")] {
        let mut args = vec!["compare".to_string()];
        args.extend(std::iter::repeat(one.clone()).take(n));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::run_within(&args, 10);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stdout.contains(last) && stdout.contains("[Z]") && stdout.contains("[AA]"));
        assert!(
            !stdout.contains("[[") && !stdout.contains("[\\"),
            "punctuation labels"
        );
        cases += 1;
    }
    // Errors quoting file text stay one line, escaped.
    for body in [
        format!("name = \"t\"\n[[series]]\nverb = {}\n", toml_string(nasty)),
        format!(
            "name = {}\n[[series]]\nverb = \"read\"\n",
            toml_string(nasty)
        ),
        format!(
            "name = \"t\"\n[[series]]\nlabel = {}\nverb = \"read\"\nwindow = 3\n",
            toml_string(nasty)
        ),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, body).unwrap();
        let err = common::refused(&["run", path.to_str().unwrap()], &["\\x1b[31m"]);
        assert!(!err.trim_end().chars().any(char::is_control), "{err:?}");
        cases += 1;
    }
    assert!(cases >= 10);
}

/// A TOML basic string holding `s` (control characters as \u escapes).
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

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
fn markdown_targets_are_checked_before_any_work() {
    use common::refused;
    refused(
        &["write", "--markdown", "/nonexistent-dir/x.md"],
        &["--markdown", "/nonexistent-dir"],
    );
    let dir = common::scratch("markdown-targets");
    let a = common::results_file(&dir, "a.json", |_| {});
    let b = common::results_file(&dir, "b.json", |_| {});
    refused(
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--markdown",
            "/nonexistent-dir/x.md",
        ],
        &["--markdown", "/nonexistent-dir"],
    );
    refused(
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--markdown",
            a.to_str().unwrap(),
        ],
        &["--markdown"],
    );
    refused(
        &["write", "--markdown", dir.to_str().unwrap()],
        &["--markdown"],
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
fn memory_layout_keys_reach_experiment_files() {
    let dir = std::env::temp_dir().join(format!("rdma-bench-cli-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\noffsets = \"random\"\n", "--offsets random: needs --region"),
        ("verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nregion = \"1k\"\nsize = 4096\n", "--region 1024 --size 4096"),
        ("verb = \"write\"\nmr_per_qp = \"yes\"\n", "key 'mr_per_qp'"),
        ("verb = \"write\"\nhugepages = 1\n", "key 'hugepages'"),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let path = dir.join(format!("mem{i}.toml"));
        std::fs::write(&path, format!("name = \"t\"\n[[series]]\n{body}")).unwrap();
        let out = run(&[
            "run",
            path.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ]);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{body}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{body}: '{stderr}' lacks '{needle}'"
        );
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
        let out = run(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: '{stderr}' lacks '{needle}'"
        );
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(stdout.is_empty(), "{args:?}: printed to stdout: {stdout}");
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
        let out = run(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: '{stderr}' lacks '{needle}'"
        );
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(stdout.is_empty(), "{args:?}: printed to stdout: {stdout}");
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
