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
            "v2.json",
            Box::new(set("schema_version", json!(2))),
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
