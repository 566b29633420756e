//! Host-side tests of where options and experiment keys apply, and of
//! errors naming what the user typed: `[defaults]` taken only by the series
//! whose command line accepts them (and the plan saying so), every
//! experiment key runnable in the context it needs, and refusals that name
//! the option or key. No device is needed.

mod common;
use common::{refused, run, text};

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Writes an experiment file into a scratch directory.
fn toml_file(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// An MPI experiment prints its launch lines (and each series' defaults)
/// without a device.
fn mpi(body: &str) -> String {
    format!("name = \"m\"\nlauncher = \"mpi\"\nranks = 3\n{body}")
}

#[test]
fn defaults_apply_only_where_the_command_line_takes_them() {
    let dir = common::scratch("scope-defaults");
    // (default key = value, the series it does not fit, the reason's needle)
    let cases: &[(&str, &str, &str)] = &[
        (
            "under_load = \"max\"",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "--tput does not apply to --under-load",
        ),
        (
            "region = \"64k\"",
            "verb = \"send\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "--region 65536: a SEND lands",
        ),
        (
            "mr_per_qp = true",
            "verb = \"echo\"\nmetric = \"throughput\"",
            "--mr-per-qp: echo",
        ),
        (
            "interval = 1",
            "verb = \"write\"\nunder_load = \"max\"",
            "--interval: not with --under-load",
        ),
        (
            "srq = true",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "--srq: write posts no receives",
        ),
        (
            "bidirectional = true",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "--bidirectional",
        ),
        (
            "events = true",
            "verb = \"write\"",
            "--events: a write ping-pong",
        ),
        ("imm = true", "verb = \"read\"", "--imm"),
        (
            "offsets = \"random\"",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "--offsets random: needs --region",
        ),
        (
            "burst = 4",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "--burst: needs --rate",
        ),
        (
            "duration = 1",
            "verb = \"write\"\niters = 100",
            "--duration",
        ),
        (
            "direction = \"outbound\"",
            "verb = \"echo\"\nmetric = \"throughput\"",
            "echo throughput takes no direction",
        ),
        (
            "window = 64",
            "verb = \"write\"",
            "--window applies only with --tput",
        ),
        (
            "cm = true",
            "verb = \"echo\"\nmetric = \"throughput\"",
            "--cm",
        ),
    ];
    for (i, (default, series, why)) in cases.iter().enumerate() {
        let key = default.split(' ').next().unwrap();
        // The file's other series takes the default, so it is not pointless.
        let body = format!(
            "name = \"d\"\n[defaults]\n{default}\n[[series]]\nlabel = \"misfit\"\n{series}\n"
        );
        let cfg = toml_file(&dir, &format!("d{i}.toml"), &body);
        let out_dir = dir.join("out").display().to_string();
        let out = run(&["run", &cfg, "--out", &out_dir]);
        let (stdout, stderr) = text(&out);
        // Past every check: only the missing device stops it (exit 1).
        assert_ne!(out.status.code(), Some(2), "{default} / {series}: {stderr}");
        let note = stdout
            .lines()
            .find(|l| l.starts_with("# series 'misfit': [defaults]"))
            .unwrap_or_else(|| panic!("{default}: no defaults line in {stdout}"));
        assert!(
            note.contains(&format!("left out: {key} (")) || note.contains(&format!("; {key} (")),
            "{default}: {note}"
        );
        assert!(note.contains(why), "{default}: '{note}' lacks '{why}'");
    }
}

#[test]
fn the_plan_says_which_defaults_each_series_took() {
    let dir = common::scratch("scope-plan");
    let body = mpi(
        "[defaults]\nsrq = true\nwindow = 64\n\
         [[series]]\nlabel = \"W\"\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n\
         [[series]]\nlabel = \"S\"\nverb = \"send\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n",
    );
    let cfg = toml_file(&dir, "m.toml", &body);
    let out = run(&["run", &cfg]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let w = lines
        .iter()
        .position(|l| l.starts_with("# series 'W'"))
        .unwrap();
    assert!(
        lines[w].contains("applied: window; left out: srq (--srq: write posts no receives"),
        "{}",
        lines[w]
    );
    assert!(!lines[w + 1].contains("--srq"), "{}", lines[w + 1]);
    assert!(lines[w + 1].contains("--window=64"), "{}", lines[w + 1]);
    let s = lines
        .iter()
        .position(|l| l.starts_with("# series 'S'"))
        .unwrap();
    assert!(lines[s].contains("applied: window, srq"), "{}", lines[s]);
    assert!(lines[s + 1].contains("--srq"), "{}", lines[s + 1]);
}

#[test]
fn a_default_value_wrong_where_the_key_applies_is_still_refused() {
    let dir = common::scratch("scope-values");
    let cases: &[(&str, &str, &str)] = &[
        (
            "window = 0",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "key 'window'",
        ),
        (
            "group = 2",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "key 'group'",
        ),
        ("transport = \"ud\"", "verb = \"write\"", "key 'transport'"),
        (
            "region = \"zzz\"",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"",
            "key 'region'",
        ),
    ];
    for (i, (default, series, needle)) in cases.iter().enumerate() {
        let body = format!("name = \"v\"\n[defaults]\n{default}\n[[series]]\n{series}\n");
        let cfg = toml_file(&dir, &format!("v{i}.toml"), &body);
        refused(&["run", &cfg], &[needle, &format!("v{i}.toml:3")]);
    }
}

/// A minimal series using each experiment key, and the context it runs in.
const EVERY_KEY: &[(&str, &str)] = &[
    ("size", "verb = \"write\"\nsize = 64"),
    ("iters", "verb = \"write\"\niters = 100"),
    ("duration", "verb = \"write\"\nduration = 1"),
    ("warmup", "verb = \"write\"\nwarmup = 10"),
    ("inline", "verb = \"write\"\ninline = true"),
    ("inline_size", "verb = \"write\"\ninline_size = 64"),
    ("transport", "verb = \"send\"\ntransport = \"ud\""),
    ("imm", "verb = \"send\"\nimm = true"),
    ("op", "verb = \"atomic\"\nop = \"cas\""),
    ("completion", "verb = \"write\"\ncompletion = true"),
    ("timeout", "verb = \"write\"\ntimeout = 5"),
    ("signal_period", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nsignal_period = [1, 64]"),
    ("qps", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nqps = 2"),
    ("postlist", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\npostlist = 4"),
    ("window", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nwindow = 64"),
    ("threads", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nthreads = 2"),
    ("warmup_time", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nwarmup_time = 0.1"),
    ("req", "verb = \"echo\"\nmetric = \"throughput\"\nreq = \"send\"\nresp = \"send\"\ntransport = \"ud\""),
    ("resp", "verb = \"echo\"\nmetric = \"throughput\"\nresp = \"write\""),
    ("group", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\ngroup = 2"),
    ("sge", "verb = \"write\"\nsge = 2"),
    ("events", "verb = \"send\"\nevents = true"),
    ("post_api", "verb = \"write\"\npost_api = \"ex\""),
    ("tclass", "verb = \"write\"\ntclass = 1"),
    ("sl", "verb = \"write\"\nsl = 1"),
    ("flow_label", "verb = \"write\"\nflow_label = 1"),
    ("mtu", "verb = \"write\"\nmtu = 1024"),
    ("bidirectional", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"outbound\"\nbidirectional = true"),
    ("srq", "verb = \"send\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nsrq = true"),
    ("mr_per_qp", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nmr_per_qp = true"),
    ("region", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nregion = \"64k\""),
    ("offsets", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nregion = \"64k\"\noffsets = \"random\""),
    ("cm", "verb = \"write\"\ncm = true"),
    ("interval", "verb = \"write\"\ninterval = 1"),
    ("forever", "verb = \"write\"\nforever = true"),
    ("rate", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nrate = 1"),
    ("rate_per_qp", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nrate = 1\nrate_per_qp = true"),
    ("burst", "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nrate = 1\nburst = 1"),
    ("under_load", "verb = \"write\"\nunder_load = \"10%,max\""),
];

#[test]
fn every_experiment_key_is_runnable() {
    let dir = common::scratch("scope-keys");
    let out_dir = dir.join("out").display().to_string();
    for (key, series) in EVERY_KEY {
        let body = format!("name = \"k\"\n[[series]]\nlabel = \"{key}\"\n{series}\n");
        let cfg = toml_file(&dir, &format!("{key}.toml"), &body);
        // `group` needs the server its clients share: run gives it with --connect.
        let mut args = vec!["run", cfg.as_str(), "--out", out_dir.as_str()];
        if *key == "group" {
            args.extend(["--connect", "127.0.0.1:1"]);
        }
        let out = run(&args);
        let (_, stderr) = text(&out);
        // Past every check of the file: what stops it is the missing device
        // (or the missing server), exit 1.
        assert_eq!(out.status.code(), Some(1), "{key}: {stderr}");
        assert!(!stderr.contains(&format!("key '{key}'")), "{key}: {stderr}");
    }
    // Under MPI a group is the client ranks, and a tput series runs.
    for series in [
        "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\ngroup = 2",
        "verb = \"echo\"\nmetric = \"throughput\"\nqps = 2",
    ] {
        let cfg = toml_file(&dir, "mpi.toml", &mpi(&format!("[[series]]\n{series}\n")));
        let out = run(&["run", &cfg]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{series}: {stderr}");
        assert!(stdout.contains("mpirun -np 3"), "{stdout}");
    }
}

#[test]
fn keys_that_cannot_run_in_their_context_are_refused_naming_the_key() {
    let dir = common::scratch("scope-context");
    let tput = "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"";
    let cases: &[(String, &[&str], &str)] = &[
        (format!("name = \"g\"\n[[series]]\n{tput}\ngroup = 2\n"), &[], "key 'group'"),
        (mpi(&format!("[[series]]\n{tput}\ngroup = 5\n")), &[], "the group is the 2 client ranks"),
        (mpi(&format!("[[series]]\n{tput}\ncm = true\n")), &[], "key 'cm'"),
        (
            mpi("[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"outbound\"\nbidirectional = true\n"),
            &[],
            "key 'bidirectional'",
        ),
    ];
    for (i, (body, extra, needle)) in cases.iter().enumerate() {
        let cfg = toml_file(&dir, &format!("c{i}.toml"), body);
        let mut args = vec!["run", cfg.as_str()];
        args.extend(extra.iter());
        refused(&args, &[needle]);
    }
}

#[test]
fn errors_name_the_option_or_key_the_user_typed() {
    let cases: &[(&[&str], &str)] = &[
        // Echo's under-load background is a WRITE stream, and says so.
        (
            &["echo", "--under-load", "10%", "--srq"],
            "the --under-load background of echo is a WRITE stream",
        ),
        // Negative values of every kind of value-taking option name it.
        (
            &["write", "--tput", "inbound", "--region", "-1"],
            "--region",
        ),
        (&["write", "--cpu", "-1"], "--cpu"),
        (&["write", "-c", "-1"], "--transport"),
        (&["write", "--tput", "-1"], "--tput -1"),
        (&["echo", "--tput", "--req", "-1"], "--req"),
        (&["atomic", "--op", "-2"], "--op"),
        (&["write", "--post-api", "-1"], "--post-api"),
        (
            &["write", "--tput", "inbound", "--offsets", "-1"],
            "--offsets",
        ),
        (&["serve", "--bind", "-1"], "--bind"),
        (&["write", "--connect", "-1"], "--connect -1"),
        (&["write", "--tput", "inbound", "--rate", "-1"], "--rate -1"),
        (&["write", "--interval", "-1"], "--interval"),
        (&["completions", "-1"], "-1"),
        // A load too small is named as the load, not as --rate.
        (
            &["write", "--under-load", "0.0000001"],
            "--under-load 0.0000001",
        ),
        (&["send", "--under-load", "1e-9,max"], "--under-load"),
    ];
    for (args, needle) in cases {
        let err = refused(args, &[needle]);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
    let err = refused(&["write", "--under-load", "0.0000001"], &["raise the load"]);
    assert!(!err.contains("--rate"), "{err}");
}

#[test]
fn invalid_utf8_names_the_option() {
    let bad = |prefix: &[u8]| {
        let mut v = prefix.to_vec();
        v.extend_from_slice(b"\xffx");
        OsString::from_vec(v)
    };
    let cases: Vec<(Vec<OsString>, &str)> = vec![
        (
            vec!["write".into(), "--connect".into(), bad(b"h")],
            "--connect: the value 'h\\xffx'",
        ),
        (
            vec!["write".into(), bad(b"--connect=h")],
            "--connect: the value 'h\\xffx'",
        ),
        (vec!["write".into(), "-c".into(), bad(b"r")], "--transport"),
        (
            vec![
                "write".into(),
                "--tput".into(),
                "inbound".into(),
                "--qps".into(),
                bad(b"1"),
            ],
            "--qps",
        ),
        (vec!["write".into(), "-s".into(), bad(b"")], "--size"),
        (vec!["serve".into(), "--bind".into(), bad(b"")], "--bind"),
        (vec!["write".into(), bad(b"-d")], "--device"),
        (vec!["completions".into(), bad(b"b")], "<SHELL>"),
    ];
    for (args, needle) in cases {
        let out = std::process::Command::new(common::bin())
            .args(&args)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: '{stderr}' lacks '{needle}'"
        );
        assert!(stdout.is_empty());
    }
}

#[test]
fn top_level_experiment_type_errors_name_the_key() {
    let dir = common::scratch("scope-top");
    let cases: &[(&str, &str)] = &[
        ("name = 5\n", "key 'name'"),
        ("name = \"x\"\ndescription = 1\n", "key 'description'"),
        ("name = \"x\"\nlauncher = 1\n", "key 'launcher'"),
        (
            "name = \"x\"\nlauncher = \"mpi\"\nranks = \"3\"\n",
            "key 'ranks'",
        ),
        (
            "name = \"x\"\nlauncher = \"mpi\"\nranks = -1\n",
            "key 'ranks'",
        ),
        (
            "name = \"x\"\nlauncher = \"mpi\"\nranks = 2.0\n",
            "key 'ranks'",
        ),
        ("name = \"x\"\ncpu = 3\n", "key 'cpu'"),
        ("name = \"x\"\ncpu = [0, 1]\n", "key 'cpu'"),
        ("name = \"x\"\ndefaults = 5\n", "key 'defaults'"),
        ("name = \"x\"\nseries = 5\n", "key 'series'"),
        ("name = \"x\"\nseries = [1]\n", "key 'series'"),
        ("name = \"x\"\n[series]\nverb = \"write\"\n", "key 'series'"),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let cfg = toml_file(&dir, &format!("t{i}.toml"), body);
        refused(&["run", &cfg], &[needle, &format!("t{i}.toml:")]);
    }
}

#[test]
fn the_device_from_the_environment_is_held_to_the_rules_of_d() {
    let cases: Vec<(OsString, &str)> = vec![
        ("a b".into(), "$RDMA_BENCH_DEVICE a b: not a device name"),
        (
            "../rxe0".into(),
            "$RDMA_BENCH_DEVICE ../rxe0: not a device name",
        ),
        ("x".repeat(65).into(), "at most 64 characters"),
        (
            OsString::from_vec(b"rxe\xff".to_vec()),
            "$RDMA_BENCH_DEVICE: the value 'rxe\\xff' is not valid UTF-8",
        ),
    ];
    for (value, needle) in cases {
        for cmd in [&["write"][..], &["serve"], &["read", "--tput", "inbound"]] {
            let out = std::process::Command::new(common::bin())
                .args(cmd)
                .env("RDMA_BENCH_DEVICE", &value)
                .output()
                .unwrap();
            let (stdout, stderr) = text(&out);
            assert_eq!(out.status.code(), Some(2), "{value:?} {cmd:?}: {stderr}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{value:?}: {stderr}");
            assert!(
                stderr.contains(needle),
                "{value:?}: '{stderr}' lacks '{needle}'"
            );
            assert!(stdout.is_empty(), "{value:?}: {stdout}");
        }
    }
}

#[test]
fn whether_a_default_fits_is_the_keys_question_not_its_values() {
    let dir = common::scratch("scope-fit");
    // Left out: the key cannot apply (atomics move 8 bytes; groups do not
    // run outbound), said in the plan line.
    let cases: &[(&str, &str, &[&str], &str)] = &[
        (
            "size = 64",
            "verb = \"atomic\"\nop = \"fadd\"",
            &[],
            "left out: size (--size 64: atomics always move 8 bytes",
        ),
        (
            "group = 2",
            "verb = \"write\"\nmetric = \"throughput\"\ndirection = \"outbound\"",
            &["--connect", "127.0.0.1:1"],
            "left out: group (--group 2: groups run inbound and echo",
        ),
    ];
    for (i, (default, series, extra, needle)) in cases.iter().enumerate() {
        let body = format!("name = \"f\"\n[defaults]\n{default}\n[[series]]\n{series}\n");
        let cfg = toml_file(&dir, &format!("f{i}.toml"), &body);
        let out_dir = dir.join("o");
        let mut args = vec!["run", &cfg, "--out", out_dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = common::run_within(&args, 30);
        let (stdout, stderr) = text(&out);
        assert!(stdout.contains(needle), "{default}: {stdout}{stderr}");
        assert!(stderr.contains("no RDMA device"), "{default}: {stderr}");
    }
    // Refused: the key applies, its value does not fit (a UD --mtu below the
    // size; an MPI group other than the client ranks).
    let refusals: &[(&str, &str, &str)] = &[
        (
            "name = \"f\"\n[defaults]\nmtu = 512\n[[series]]\nverb = \"send\"\ntransport = \"ud\"\nsize = 2048\n",
            "UD MTU of 512",
            "r0.toml",
        ),
        (
            "name = \"f\"\nlauncher = \"mpi\"\nranks = 3\n[defaults]\ngroup = 5\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n",
            "the group is the 2 client ranks",
            "r1.toml",
        ),
    ];
    for (body, needle, name) in refusals {
        let cfg = toml_file(&dir, name, body);
        refused(&["run", &cfg, "--out", "o"], &[needle]);
    }
}

#[test]
fn run_options_an_mpi_files_printed_lines_cannot_carry_are_refused() {
    let dir = common::scratch("mpi-run-opts");
    let cfg = toml_file(
        &dir,
        "m.toml",
        &mpi("[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n"),
    );
    let cases: &[(&[&str], &str)] = &[
        (&["--cpu", "1"], "--cpu: "),
        (&["--resume", "/nonexistent.json"], "--resume: "),
        (&["--connect", "127.0.0.1:1"], "--connect: "),
        (&["-d", "rxe0"], "--device: "),
        (&["--out", "/dev/null"], "--out /dev/null"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", &cfg];
        args.extend_from_slice(extra);
        refused(&args, &[needle]);
    }
}
