//! Experiment files: bad ones are refused naming file, line and key; keys
//! are strictly typed; memory-layout keys reach the run.

use super::*;

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
fn memory_layout_keys_reach_experiment_files() {
    let dir = crate::common::scratch("cli-mem");
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
