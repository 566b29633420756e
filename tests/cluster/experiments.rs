//! An experiment file run against `serve` on the other host, and `compare`
//! of that result with the same file run in loopback here: refused unless
//! `--force` (their figures measure different things: one crosses the wire).

use std::path::{Path, PathBuf};

use super::common::{read_json, run_within, scratch, text};
use super::hosts::peer;
use rdma_bench::results::ResultsDoc;

/// The one results file `run --out DIR` wrote.
fn results_in(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one results file in {}: {files:?}",
        dir.display()
    );
    files.pop().unwrap()
}

#[test]
#[ignore = "needs the soft-RoCE cluster: run via scripts/test"]
fn run_connects_to_the_other_host_and_compare_refuses_mixing_it_with_loopback() {
    let b = peer();
    let _serve = b.serve(18730, &[]);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-configs/smoke.toml");
    let config = config.to_str().unwrap();
    let dir = scratch("exp");
    let (remote, local) = (dir.join("remote"), dir.join("local"));
    let connect = format!("{}:18730", b.addr);
    for (out, extra) in [
        (&remote, vec!["--connect", connect.as_str()]),
        (&local, vec![]),
    ] {
        std::fs::create_dir_all(out).unwrap();
        let mut args = vec![
            "run",
            config,
            "-d",
            "rxe0",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = run_within(&args, 600);
        assert!(o.status.success(), "{args:?}: {:?}", text(&o));
    }
    let (rfile, lfile) = (results_in(&remote), results_in(&local));
    let rdoc: ResultsDoc = serde_json::from_value(read_json(&rfile)).unwrap();
    let ldoc: ResultsDoc = serde_json::from_value(read_json(&lfile)).unwrap();
    assert_eq!(rdoc.peer.mode, "tcp");
    assert_eq!(rdoc.peer.host.as_deref(), Some(b.name.as_str()));
    assert_eq!(ldoc.peer.mode, "loopback");
    assert_eq!(
        rdoc.results.len(),
        ldoc.results.len(),
        "every series ran both ways"
    );
    assert!(rdoc.results.len() >= 4, "{}", rdoc.results.len());

    let (l, r) = (lfile.to_str().unwrap(), rfile.to_str().unwrap());
    let o = run_within(&["compare", l, r], 60);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}{stdout}");
    assert!(
        stderr.contains("peer mode differs") && stderr.contains("--force"),
        "{stderr}"
    );
    let o = run_within(&["compare", l, r, "--force"], 60);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}{stdout}");
    // Every point of the loopback file found its two-host twin.
    let summary = stdout
        .lines()
        .find(|l| l.contains("matched in every file"))
        .unwrap_or_default();
    assert!(
        summary.ends_with(", 0 present in some files only"),
        "compare's table: {stdout}"
    );
}
