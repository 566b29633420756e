//! scripts/check-links on the repository's own Markdown (every relative link
//! and image resolves, every anchor names a heading) and, as negative
//! controls, on a scratch copy of it with a broken link, a broken image and
//! broken anchors, which must fail naming each.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{scratch, text};

/// Generated from the clap definitions on another branch; until it is here,
/// links to it are allowed to dangle and nothing else is.
const REFERENCE: &str = "docs/reference.md";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(root: &Path, extra: &[&str]) -> Output {
    Command::new(repo().join("scripts/check-links"))
        .arg("--root")
        .arg(root)
        .args(extra)
        .output()
        .expect("scripts/check-links runs")
}

/// The flag the checks pass: `--allow-missing docs/reference.md` only while
/// that file is absent from `root`.
fn allow_reference(root: &Path) -> Vec<&'static str> {
    if root.join(REFERENCE).exists() {
        vec![]
    } else {
        vec!["--allow-missing", REFERENCE]
    }
}

/// The checked Markdown copied into a scratch root; everything else the
/// docs link to (plots, results, scripts, sources) symlinked, not copied.
fn copy_of_repo(name: &str) -> PathBuf {
    let dir = scratch(&format!("links-{name}"));
    for entry in std::fs::read_dir(repo()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name = name.to_str().unwrap();
        if matches!(
            name,
            "target" | ".git" | "docs" | "README.md" | "ARCHITECTURE.md"
        ) {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), dir.join(name)).unwrap();
    }
    std::fs::copy(repo().join("README.md"), dir.join("README.md")).unwrap();
    std::fs::copy(repo().join("ARCHITECTURE.md"), dir.join("ARCHITECTURE.md")).unwrap();
    std::fs::create_dir(dir.join("docs")).unwrap();
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join("docs").join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn append(path: &Path, text: &str) -> usize {
    let mut body = std::fs::read_to_string(path).unwrap();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    let first = body.lines().count() + 1;
    body.push_str(text);
    std::fs::write(path, body).unwrap();
    first
}

#[test]
fn the_repository_docs_pass() {
    let out = run(repo(), &allow_reference(repo()));
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("check-links: ok"), "{stdout}");
    // The README links into docs/ and shows at least one picture.
    let summary = stdout.lines().last().unwrap();
    assert!(!summary.contains(" 0 images"), "{summary}");
    assert!(!summary.contains(" 0 links"), "{summary}");
}

#[test]
fn the_unchanged_copy_passes() {
    // Positive control for the copy the negative controls break.
    let dir = copy_of_repo("clean");
    let out = run(&dir, &allow_reference(&dir));
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
}

#[test]
fn a_broken_link_image_and_anchor_each_fail_by_name() {
    let dir = copy_of_repo("broken");
    let line = append(
        &dir.join("README.md"),
        "See [gone](docs/no-such-page.md).\n\
         ![gone](plots/no-such-plot.png)\n\
         Also [here](#no-such-heading) and [there](ARCHITECTURE.md#no-such-room).\n\
         `[in code](nowhere.md)` is not a link.\n\
         ```\n[in a fence](nowhere.md)\n```\n",
    );
    let out = run(&dir, &allow_reference(&dir));
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let expect = [
        format!("README.md:{line}: broken link: docs/no-such-page.md (no file docs/no-such-page.md)"),
        format!(
            "README.md:{}: broken image: plots/no-such-plot.png (no file plots/no-such-plot.png)",
            line + 1
        ),
        format!(
            "README.md:{}: broken anchor: #no-such-heading (no heading 'no-such-heading' in README.md)",
            line + 2
        ),
        format!(
            "README.md:{}: broken anchor: ARCHITECTURE.md#no-such-room \
             (no heading 'no-such-room' in ARCHITECTURE.md)",
            line + 2
        ),
    ];
    for e in &expect {
        assert!(stdout.contains(e.as_str()), "missing {e:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("nowhere.md"),
        "code was read as a link:\n{stdout}"
    );
    assert!(stdout.contains("check-links: 4 broken"), "{stdout}");
}

#[test]
fn a_broken_link_in_a_docs_page_is_named_with_its_page() {
    let dir = copy_of_repo("docs-page");
    let page = std::fs::read_dir(dir.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("a docs page");
    let name = page.file_name().unwrap().to_str().unwrap().to_owned();
    // Relative to docs/: ../plots/ resolves, plots/ (relative to the root) does not.
    let line = append(
        &page,
        "![ok](../plots/vs-perftest.png) ![wrong base](plots/vs-perftest.png)\n",
    );
    let out = run(&dir, &allow_reference(&dir));
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "docs/{name}:{line}: broken image: plots/vs-perftest.png (no file docs/plots/vs-perftest.png)"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("check-links: 1 broken"), "{stdout}");
}

#[test]
fn anchors_follow_githubs_slug_rules() {
    let dir = scratch("links-slugs");
    std::fs::write(dir.join("ARCHITECTURE.md"), "# A\n").unwrap();
    std::fs::write(
        dir.join("README.md"),
        "# Errors, interruptions and the server's exposure\n\
         ## Profiling a NIC: `profile` and `report`\n\
         ## Same\n## Same\n\
         ### snake_case and dash-case (v2.0)\n\
         [a](#errors-interruptions-and-the-servers-exposure)\n\
         [b](#profiling-a-nic-profile-and-report)\n\
         [c](#same) [d](#same-1)\n\
         [e](#snake_case-and-dash-case-v20)\n\
         [f](#same-2)\n\
         [g](#Same)\n",
    )
    .unwrap();
    let out = run(&dir, &[]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("README.md:10: broken anchor: #same-2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("README.md:11: broken anchor: #Same"),
        "{stdout}"
    );
    assert!(stdout.contains("check-links: 2 broken"), "{stdout}");
}

#[test]
fn allow_missing_accepts_only_the_named_absent_file() {
    let dir = scratch("links-allow");
    std::fs::create_dir(dir.join("docs")).unwrap();
    std::fs::write(dir.join("ARCHITECTURE.md"), "# A\n").unwrap();
    std::fs::write(
        dir.join("README.md"),
        "# R\n[options](docs/reference.md) [one](docs/reference.md#options)\n[other](docs/other.md)\n",
    )
    .unwrap();
    let out = run(&dir, &[]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("README.md:2: broken link: docs/reference.md"),
        "{stdout}"
    );
    assert!(stdout.contains("check-links: 3 broken"), "{stdout}");

    let out = run(&dir, &["--allow-missing", REFERENCE]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("README.md:3: broken link: docs/other.md"),
        "{stdout}"
    );
    assert!(stdout.contains("check-links: 1 broken"), "{stdout}");

    // Once the file exists it is checked like any other, anchors included.
    std::fs::write(dir.join(REFERENCE), "# Reference\n").unwrap();
    std::fs::write(dir.join("docs/other.md"), "# Other\n").unwrap();
    let out = run(&dir, &["--allow-missing", REFERENCE]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("README.md:2: broken anchor: docs/reference.md#options"),
        "{stdout}"
    );
    assert!(stdout.contains("check-links: 1 broken"), "{stdout}");
}
