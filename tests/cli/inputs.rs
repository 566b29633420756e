//! Inputs that are not what they seem: special files, foreign results
//! files, and text from files printed escaped and quoted.

use super::*;

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
