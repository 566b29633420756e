//! Host-side tests of what fits rdma-bench into the ecosystem: the results
//! JSON Schema (committed, generated from the types, and every committed
//! results file valid against it), shell completions, man pages, the
//! version string, and Markdown export.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, scratch, text, validate_results};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const REGENERATE: &str = "cargo run -q -- schema > schema/results.schema.json";

#[test]
fn committed_schema_matches_the_rust_types() {
    let out = run(&["schema"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let committed = std::fs::read_to_string(repo().join("schema/results.schema.json"))
        .unwrap_or_else(|e| {
            panic!("schema/results.schema.json: {e}; create it with `{REGENERATE}`")
        });
    assert!(
        committed == stdout,
        "schema/results.schema.json differs from the types in src/results.rs (and what they hold); regenerate it with `{REGENERATE}` and commit it"
    );
    let schema: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // It covers every version compare reads, and both spellings of schema 1.
    assert_eq!(
        schema["properties"]["schema_version"]["enum"],
        serde_json::json!(rdma_bench::results::READABLE_SCHEMAS)
    );
    for field in ["peer", "clock"] {
        let any = schema["properties"][field]["anyOf"].as_array().unwrap();
        assert!(
            any.iter().any(|s| s["type"] == "string"),
            "{field}: {any:?}"
        );
    }
}

/// Every results file under `dir`, recursively.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

#[test]
fn every_committed_results_file_validates_against_the_schema() {
    let mut files = Vec::new();
    json_files(&repo().join("results"), &mut files);
    let mut results = Vec::new();
    for f in &files {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        match v["tool"].as_str() {
            Some("rdma-bench") => results.push(f.as_path()),
            // scripts/vs-perftest's summary and a profile's plan are their
            // own formats, not results files.
            Some("scripts/vs-perftest" | "rdma-bench profile") => {}
            other => panic!("{}: unknown tool {other:?}", f.display()),
        }
    }
    assert!(results.len() >= 5, "{results:?}");
    validate_results(&results);
}

#[test]
fn the_schema_refuses_what_rdma_bench_would_not_write() {
    let dir = scratch("schema-refuses");
    let bad = [
        ("version.json", serde_json::json!({"schema_version": 99})),
        (
            "kind.json",
            serde_json::json!({"results": [{"kind": "bogus"}]}),
        ),
        (
            "size.json",
            serde_json::json!({"device": {"max_inline": "big"}}),
        ),
    ];
    for (name, patch) in bad {
        let path = common::results_file(&dir, name, |v| {
            for (k, val) in patch.as_object().unwrap() {
                v[k] = val.clone();
            }
        });
        let out = Command::new("python3")
            .arg(repo().join("scripts/validate-results"))
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name} validated");
        assert!(String::from_utf8_lossy(&out.stderr).contains(name));
    }
}

#[test]
fn bash_completion_sources_cleanly_and_completes_subcommands_and_options() {
    let bin = common::bin();
    let script = format!(
        r#"set -u
source <("{bin}" completions bash) || exit 9
complete -p rdma-bench >/dev/null || exit 8
COMP_WORDS=(rdma-bench ""); COMP_CWORD=1
_rdma__bench rdma-bench "" rdma-bench
echo "top: ${{COMPREPLY[*]}}"
COMP_WORDS=(rdma-bench com); COMP_CWORD=1
_rdma__bench rdma-bench com rdma-bench
echo "com: ${{COMPREPLY[*]}}"
COMP_WORDS=(rdma-bench write --win); COMP_CWORD=2
_rdma__bench rdma-bench --win write
echo "write: ${{COMPREPLY[*]}}"
COMP_WORDS=(rdma-bench completions ""); COMP_CWORD=2
_rdma__bench rdma-bench "" completions
echo "shells: ${{COMPREPLY[*]}}"
"#,
        bin = bin.display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}{stdout}");
    assert!(stderr.is_empty(), "sourcing printed: {stderr}");
    let line = |tag: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| panic!("{tag} missing in {stdout}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let top = line("top: ");
    for sub in [
        "devices",
        "serve",
        "read",
        "write",
        "send",
        "echo",
        "atomic",
        "run",
        "compare",
        "completions",
        "schema",
    ] {
        assert!(top.iter().any(|w| w == sub), "{sub} not completed: {top:?}");
    }
    assert_eq!(line("com: "), ["compare", "completions"]);
    assert_eq!(line("write: "), ["--window"]);
    let shells = line("shells: ");
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|w| w == shell), "{shells:?}");
    }
    for shell in ["zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert!(out.status.success());
        assert!(text(&out).0.contains("signal-period"), "{shell}");
    }
    common::refused(&["completions", "tcsh"], &["tcsh"]);
}

#[test]
fn man_pages_render_and_list_every_option() {
    let dir = scratch("manpages");
    let out = run(&["manpage", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out).1);
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert!(pages.contains(&"rdma-bench.1".to_string()), "{pages:?}");
    assert!(
        pages.contains(&"rdma-bench-write.1".to_string()),
        "{pages:?}"
    );
    assert!(!pages.iter().any(|p| p.contains("manpage")), "{pages:?}");
    let man = Command::new("man")
        .arg("-l")
        .arg(dir.join("rdma-bench-write.1"))
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C")
        .env("MANPAGER", "cat")
        .output()
        .expect("man runs (scripts/install-deps installs man-db)");
    // Words only: man justifies lines and hyphenates long words.
    let page = String::from_utf8_lossy(&man.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        man.status.success(),
        "{}",
        String::from_utf8_lossy(&man.stderr)
    );
    for needle in [
        "rdma-bench write",
        "--markdown",
        "-t, --window",
        "-Q",
        "--inline-size",
    ] {
        assert!(page.contains(needle), "man page lacks {needle}:\n{page}");
    }
    common::refused(&["manpage", "/nonexistent-dir"], &["/nonexistent-dir"]);
}

#[test]
fn version_names_the_git_commit() {
    let out = run(&["--version"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(stdout.starts_with(&format!("rdma-bench {}", env!("CARGO_PKG_VERSION"))));
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo())
        .output();
    match head {
        Ok(h) if h.status.success() => {
            let commit = String::from_utf8_lossy(&h.stdout).trim().to_string();
            assert!(
                stdout.contains(&format!("(git {commit})")),
                "{stdout} lacks {commit}"
            );
        }
        // Built outside a repository: the plain version, no made-up commit.
        _ => assert!(!stdout.contains("git"), "{stdout}"),
    }
}

#[test]
fn markdown_export_is_a_table_with_units_and_the_environment() {
    use rdma_bench::export::{Exporter, MarkdownExporter};
    let doc: rdma_bench::results::ResultsDoc =
        serde_json::from_value(common::sample_results()).unwrap();
    let md = String::from_utf8(MarkdownExporter.serialize(&doc).unwrap()).unwrap();
    assert!(
        md.contains(&format!("Device: {}", doc.device.name)) || md.contains("Device: "),
        "{md}"
    );
    assert!(md.contains("environment: soft-RoCE"), "{md}");
    assert!(md.contains("Clock: "), "{md}");
    let rows = md.lines().filter(|l| l.starts_with("| ")).count();
    let separators = md.lines().filter(|l| l.starts_with("| ---")).count();
    // One header and one separator per table, one row per record.
    assert_eq!(rows - 2 * separators, doc.results.len(), "{md}");
    if doc.latency().next().is_some() {
        assert!(md.contains("| p50 [µs] |"), "{md}");
    }
    if doc.throughput().next().is_some() {
        assert!(
            md.contains("Mops [10^6 op/s]") && md.contains("Gb/s [10^9 bit/s]"),
            "{md}"
        );
    }
}

#[test]
fn compare_writes_markdown() {
    let dir = scratch("compare-markdown");
    let a = common::results_file(&dir, "a.json", |_| {});
    let b = common::results_file(&dir, "b.json", |v| {
        v["host"]["hostname"] = "other|host".into();
    });
    let md = dir.join("cmp.md");
    let out = run(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out).1);
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("| point | [A] | [B] | B/A |"), "{text}");
    assert!(
        text.contains("other\\|host"),
        "a | in a host name is escaped: {text}"
    );
    assert!(text.contains("environment: soft-RoCE"), "{text}");
    assert!(
        text.contains("p50 in µs") && text.contains("Mops"),
        "{text}"
    );
    let points = rdma_bench::results::load(&a).unwrap().results.len();
    let body = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| point") && !l.starts_with("| ---"))
        .count();
    assert_eq!(body, points, "{text}");
    assert!(
        text.contains("| 1.000 |"),
        "identical figures give ratio 1: {text}"
    );
}
