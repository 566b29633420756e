//! Output targets: a closed stdout ends quietly, other write errors are one
//! line, and targets are checked before any work.

use super::*;

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
