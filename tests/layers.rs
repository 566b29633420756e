//! scripts/check-layers on small source trees written to a scratch
//! directory: it must fail on an upward import, on a cycle, on a module
//! missing from the table and on a source file over 600 lines, and pass a
//! clean tree (whose test module and comments name an upper layer, which
//! must not count).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{scratch, text};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-layers")
}

/// Writes ARCHITECTURE.md with `layers` and the given files, then runs the checker.
fn check(name: &str, layers: &str, files: &[(&str, &str)]) -> Output {
    let dir = scratch(&format!("layers-{name}"));
    std::fs::write(
        dir.join("ARCHITECTURE.md"),
        format!("# Fixture\n\n```layers\n{layers}\n```\n"),
    )
    .unwrap();
    for (path, body) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    Command::new(script())
        .arg("--root")
        .arg(&dir)
        .output()
        .expect("scripts/check-layers runs")
}

#[test]
fn an_upward_import_fails_naming_the_file() {
    let out = check(
        "upward",
        "app\nlow",
        &[
            ("src/lib.rs", "pub mod app;\npub mod low;\n"),
            ("src/app.rs", "pub struct App;\n"),
            (
                "src/low.rs",
                "pub fn f() -> crate::app::App {\n    crate::app::App\n}\n",
            ),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("src/low.rs: imports src/app.rs (layer app above layer low)"),
        "{stdout}"
    );
    assert!(stdout.contains("1 upward, 0 cycles"), "{stdout}");
}

#[test]
fn a_two_file_cycle_fails_naming_the_cycle() {
    let out = check(
        "cycle",
        "a, b",
        &[
            ("src/lib.rs", "pub mod a;\npub mod b;\n"),
            ("src/a.rs", "use crate::{b::{B, Other}};\npub struct A;\n"),
            (
                "src/b.rs",
                "pub struct B;\npub struct Other;\npub fn f() {\n    let _ = crate::a::A;\n}\n",
            ),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("cycle: src/a.rs -> src/b.rs -> src/a.rs"),
        "{stdout}"
    );
    assert!(stdout.contains("0 upward, 1 cycles"), "{stdout}");
}

#[test]
fn a_module_missing_from_the_table_fails() {
    let out = check(
        "unlisted",
        "app",
        &[
            ("src/lib.rs", "pub mod app;\npub mod extra;\n"),
            ("src/app.rs", "pub struct App;\n"),
            ("src/extra.rs", "pub struct Extra;\n"),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("src/extra.rs: module extra is not in the layer table"),
        "{stdout}"
    );
}

#[test]
fn a_clean_tree_passes_and_tests_may_import_anything() {
    let out = check(
        "clean",
        "main\napp\nlow",
        &[
            ("src/main.rs", "use rdma_bench::app::run;\nfn main() {\n    run()\n}\n"),
            ("src/lib.rs", "pub mod app;\npub mod low;\n"),
            (
                "src/app.rs",
                "use crate::low::{Thing, util::{helper, Other}};\npub fn run() {\n    helper(Thing, Other);\n}\n",
            ),
            (
                "src/low/mod.rs",
                "mod util;\npub use util::helper;\npub use self::util::Other;\npub struct Thing;\n",
            ),
            (
                "src/low/util.rs",
                "// use crate::app::run;\nuse super::Thing;\npub struct Other;\n\
                 pub fn helper(_: Thing, _: Other) {\n    let _ = \"crate::app::run\";\n}\n\n\
                 #[cfg(test)]\nmod tests {\n    use crate::app::run;\n}\n",
            ),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "check-layers: 5 files, 4 imports, 0 upward, 0 cycles, 0 unsafe outside its modules\n"
    );
}

/// A tree whose `src/app/part.rs` has `lines` lines (comments but its last).
fn check_lines(lines: usize) -> Output {
    let part = "// a line\n".repeat(lines - 1) + "pub struct Part;\n";
    check(
        &format!("lines-{lines}"),
        "app",
        &[
            ("src/lib.rs", "pub mod app;\n"),
            ("src/app/mod.rs", "mod part;\n"),
            ("src/app/part.rs", &part),
        ],
    )
}

#[test]
fn a_file_over_600_lines_fails_naming_it_and_600_pass() {
    let out = check_lines(601);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("src/app/part.rs: 601 lines, over the limit of 600\n"),
        "{stdout}"
    );
    assert!(stdout.contains(", 1 over 600 lines"), "{stdout}");
    let out = check_lines(600);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stdout.contains("lines"), "{stdout}");
}

#[test]
fn unsafe_outside_its_modules_fails() {
    let dir = scratch("layers-unsafe");
    std::fs::write(
        dir.join("ARCHITECTURE.md"),
        "# Fixture\n\n```layers\napp\nffi\n```\n\n```unsafe\nffi\n```\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "#![deny(unsafe_code)]\npub mod app;\n#[allow(unsafe_code)]\npub mod ffi;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/ffi.rs"),
        "pub fn f() -> u8 {\n    // SAFETY: a fixture.\n    unsafe { *std::ptr::null::<u8>() }\n}\n",
    )
    .unwrap();
    // In a comment or a string "unsafe" does not count; in code it does.
    std::fs::write(
        dir.join("src/app.rs"),
        "// unsafe\npub const S: &str = \"unsafe\";\n#[allow(unsafe_code)]\npub fn g() -> u8 {\n    unsafe { crate::ffi::f() }\n}\n",
    )
    .unwrap();
    let out = Command::new(script())
        .arg("--root")
        .arg(&dir)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("src/app.rs: allow(unsafe_code) outside src/lib.rs"),
        "{stdout}"
    );
    assert!(
        stdout.contains("src/app.rs: unsafe code outside the modules allowed it (ffi)"),
        "{stdout}"
    );
    assert!(!stdout.contains("src/ffi.rs:"), "{stdout}");
    assert!(stdout.contains("2 unsafe outside its modules"), "{stdout}");
}

#[test]
fn help_describes_the_checker() {
    let out = Command::new(script()).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(text(&out).0.contains("ARCHITECTURE.md"));
}
