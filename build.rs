//! Names the git commit in `--version` (and in results files' `tool_version`)
//! when building from a repository: `0.1.0 (git 1a2b3c4d5e6f)`. Without git
//! or outside a repository (a crate tarball), the version is just the
//! package's. Nothing here fails the build.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let pkg = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let version = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => format!("{pkg} (git {commit})"),
        None => pkg,
    };
    println!("cargo:rustc-env=RDMA_BENCH_VERSION={version}");
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it
    // points to (a commit), in this worktree's and the common git directory.
    let dirs: Vec<PathBuf> = ["--git-dir", "--git-common-dir"]
        .iter()
        .filter_map(|a| git(&["rev-parse", a]))
        .map(|d| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(d))
        .collect();
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for d in &dirs {
        for f in ["HEAD", "packed-refs"] {
            let p = d.join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
        if let Some(b) = &branch {
            let p = d.join(b);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
