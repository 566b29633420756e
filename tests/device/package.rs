//! The .deb that `scripts/package` builds (scripts/test runs it before the
//! device tests): extracted into a scratch directory (the guest's root is
//! read-only), its binary lists the device and measures a latency point, its
//! man page renders and its completion script sources. What it wrote is
//! validated against the schema like every results file a test reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::{bin, read_json, scratch, text};
use super::device;

/// The one package under <target>/debian (the test binary's target dir).
fn deb() -> PathBuf {
    let target = bin()
        .parent()
        .and_then(Path::parent)
        .expect("the binary lives in <target>/<profile>/")
        .to_path_buf();
    let dir = target.join("debian");
    let debs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/package --dev first", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "one package in {}: {debs:?}", dir.display());
    debs.into_iter().next().unwrap()
}

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let out = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .expect("dpkg-deb runs");
    assert!(out.status.success(), "dpkg-deb {args:?}: {}", text(&out).1);
    text(&out).0
}

fn run_installed(root: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(root.join("usr/bin/rdma-bench"))
        .args(args)
        .output()
        .expect("the installed binary runs");
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "installed rdma-bench {args:?}: {stderr}{stdout}"
    );
    (stdout, stderr)
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn installed_package_measures_a_point_and_renders_its_man_page() {
    let deb = deb();
    // The control fields written by hand.
    let depends = dpkg_deb(&["-f"], &deb).replace('\n', " ");
    for dep in [
        "Depends: libibverbs1, librdmacm1, ibverbs-providers",
        "python3, python3-matplotlib",
    ] {
        assert!(depends.contains(dep), "{dep} not in: {depends}");
    }
    let listing = dpkg_deb(&["-c"], &deb);
    for path in [
        "./usr/bin/rdma-bench",
        "./usr/share/man/man1/rdma-bench.1.gz",
        "./usr/share/man/man1/rdma-bench-write.1.gz",
        "./usr/share/bash-completion/completions/rdma-bench",
        "./usr/share/zsh/vendor-completions/_rdma-bench",
        "./usr/share/fish/vendor_completions.d/rdma-bench.fish",
        "./usr/share/rdma-bench/bench-configs/smoke.toml",
        "./usr/share/rdma-bench/scripts/plot_latency.py",
        "./usr/share/rdma-bench/scripts/rdma_results.py",
        "./usr/share/rdma-bench/schema/results.schema.json",
    ] {
        assert!(
            listing.contains(path),
            "{path} not in the package:\n{listing}"
        );
    }
    let root = scratch("deb-root");
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);

    // The package holds this build (a stale one would test old code).
    let (installed, _) = run_installed(&root, &["--version"]);
    let built = text(&Command::new(bin()).arg("--version").output().unwrap()).0;
    assert_eq!(
        installed, built,
        "the package is stale: run scripts/package --dev"
    );

    let (listed, _) = run_installed(&root, &["devices"]);
    assert!(listed.contains(&device()), "{listed}");

    let dir = scratch("deb-point");
    let (json, md) = (dir.join("r.json"), dir.join("r.md"));
    let dev = device();
    run_installed(
        &root,
        &[
            "write",
            "-d",
            &dev,
            "-s",
            "64",
            "-n",
            "300",
            "--warmup",
            "50",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    let doc: rdma_bench::results::ResultsDoc = serde_json::from_value(read_json(&json)).unwrap();
    let r = doc.latency().next().expect("one latency record");
    assert_eq!((r.size, r.iters, r.stats.samples), (64, 300, 300), "{r:?}");
    assert_eq!(
        r.server_received,
        Some(350),
        "the peer saw warm-up and measured messages"
    );
    let table = std::fs::read_to_string(&md).unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with("| - | write | half_rtt | rc | 64 |"))
        .unwrap_or_else(|| panic!("no row for the point:\n{table}"));
    eprintln!("MEASURED (installed copy): {row}");

    // man -l renders the packaged (gzipped) page.
    let man = Command::new("man")
        .arg("-l")
        .arg(root.join("usr/share/man/man1/rdma-bench-write.1.gz"))
        .env("MANPAGER", "cat")
        .env("LC_ALL", "C")
        .output()
        .expect("man runs (man-db)");
    let page = text(&man)
        .0
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(man.status.success(), "man -l: {}", text(&man).1);
    assert!(
        page.contains("rdma-bench write") && page.contains("--markdown"),
        "{page}"
    );

    // The packaged bash completion sources and registers itself.
    let script = format!(
        "source '{}' && complete -p rdma-bench",
        root.join("usr/share/bash-completion/completions/rdma-bench")
            .display()
    );
    let b = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(
        b.status.success() && text(&b).1.is_empty(),
        "{}",
        text(&b).1
    );
}
