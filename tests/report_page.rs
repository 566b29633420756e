//! Host tests of scripts/check-report-page, which renders an `rdma-bench report` page in Debian's
//! headless Chromium: the committed good fixture (tests/fixtures/report-page.html, made by
//! tests/fixtures/make_report_page.py) passes, and pages made from it with one fault each are
//! refused with a line naming the fault. No device is needed; /usr/bin/chromium, node and
//! tests/browser's playwright-core are (scripts/install-deps), and their absence fails the tests.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use common::{scratch, text};

/// The checker's viewport width, which a full-page screenshot keeps.
const VIEWPORT_WIDTH: u32 = 1280;

/// One browser at a time: the machine has two cores, and each check starts a Chromium.
static BROWSER: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn good_page() -> String {
    let path = repo().join("tests/fixtures/report-page.html");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn check_with_env(page: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo().join("scripts/check-report-page");
    Command::new(&script)
        .arg(page)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{} does not run (node missing?): {e}", script.display()))
}

fn check(page: &Path, args: &[&str]) -> Output {
    check_with_env(page, args, &[])
}

/// Writes `html` as `name` in a scratch directory of its own.
fn page(test: &str, html: &str) -> PathBuf {
    let path = scratch(test).join("page.html");
    std::fs::write(&path, html).unwrap();
    path
}

/// `html` with `from` (which must occur exactly once) replaced by `to`.
fn replace_once(html: &str, from: &str, to: &str) -> String {
    assert_eq!(
        html.matches(from).count(),
        1,
        "the fixture holds {from:?} once"
    );
    html.replacen(from, to, 1)
}

/// The problem lines of a refused page; it must have exited 1 and printed nothing on stdout.
fn refusal(o: &Output) -> Vec<String> {
    let (out, err) = text(o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "refused with exit 1\nstdout: {out}\nstderr: {err}"
    );
    assert!(out.is_empty(), "nothing on stdout when refused: {out}");
    let lines: Vec<String> = err.lines().map(str::to_owned).collect();
    assert!(!lines.is_empty(), "a refusal names a problem");
    for l in &lines {
        assert!(
            l.starts_with("check-report-page: "),
            "every line is the checker's: {l}"
        );
    }
    lines
}

fn assert_passes(o: &Output) -> String {
    let (out, err) = text(o);
    assert!(
        o.status.success(),
        "the page passes\nstdout: {out}\nstderr: {err}"
    );
    assert!(err.is_empty(), "nothing on stderr when it passes: {err}");
    assert_eq!(out.lines().count(), 1, "one summary line: {out}");
    out
}

/// (width, height) from a PNG's IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        b.len() > 24 && b.starts_with(b"\x89PNG\r\n\x1a\n") && &b[12..16] == b"IHDR",
        "{} is a PNG",
        path.display()
    );
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The text of the headline cell `key` of profile 0 in `html`.
fn cell_text<'a>(html: &'a str, key: &str) -> &'a str {
    let open = format!("data-key=\"{key}\" data-profile=\"0\">");
    let start = html.find(&open).unwrap_or_else(|| panic!("no cell {key}")) + open.len();
    let len = html[start..].find('<').unwrap();
    &html[start..start + len]
}

#[test]
fn the_good_fixture_passes_with_a_full_page_screenshot() {
    let html = good_page();
    let p = page("good", &html);
    let shot = p.with_file_name("shot.png");
    let out = assert_passes(&check(&p, &["--screenshot", shot.to_str().unwrap()]));
    assert!(
        out.contains("ok: 2 figures, 4 headlines, "),
        "what was checked: {out}"
    );
    let (w, h) = png_size(&shot);
    assert_eq!(w, VIEWPORT_WIDTH, "the screenshot is the viewport's width");
    // The fixture is taller than the 800 px viewport: a full-page shot shows all of it.
    assert!(h > 800, "full page, not only the viewport: {w}x{h}");
}

#[test]
fn an_external_image_is_refused_naming_the_request() {
    let html = replace_once(
        &good_page(),
        "</body>",
        "<img src=\"http://127.0.0.1:9/x.png\">\n</body>",
    );
    let lines = refusal(&check(&page("img", &html), &[]));
    assert_eq!(lines.len(), 1, "only the request is wrong: {lines:?}");
    assert!(
        lines[0].contains("request left the page: http://127.0.0.1:9/x.png"),
        "{lines:?}"
    );
}

#[test]
fn a_fetch_the_csp_blocks_and_a_request_without_csp_are_both_refused() {
    // With the page's CSP the fetch never reaches the network layer: the checker sees the
    // policy's violation. Without a CSP the image request is made, and the checker aborts it.
    let blocked = replace_once(
        &good_page(),
        "</body>",
        "<script>fetch('http://127.0.0.1:9/f').catch(() => {});</script>\n</body>",
    );
    let lines = refusal(&check(&page("fetch", &blocked), &[]));
    assert_eq!(lines.len(), 1, "only the fetch is wrong: {lines:?}");
    assert!(
        lines[0].contains("request left the page: http://127.0.0.1:9/f (blocked by the page's CSP"),
        "{lines:?}"
    );

    let html = good_page();
    let csp_start = html
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let csp_len = html[csp_start..].find('>').unwrap() + 1;
    let open = format!(
        "{}{}",
        &html[..csp_start],
        &html[csp_start + csp_len..].replacen(
            "</body>",
            "<img src=\"http://127.0.0.1:9/open.png\">\n</body>",
            1
        )
    );
    let lines = refusal(&check(&page("nocsp", &open), &[]));
    assert_eq!(lines.len(), 2, "the request and the missing CSP: {lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("request left the page: http://127.0.0.1:9/open.png")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("no Content-Security-Policy meta with default-src 'none'")),
        "{lines:?}"
    );
}

#[test]
fn an_altered_headline_is_refused_naming_its_key() {
    let html = good_page();
    let shown = cell_text(&html, "read-p50-4");
    let number = shown.split(' ').next().unwrap();
    let digits = number.split('.').nth(1).map_or(0, str::len);
    let altered = format!(
        "{:.*}",
        digits,
        number.parse::<f64>().unwrap() + 10f64.powi(-(digits as i32))
    );
    let bad = replace_once(
        &html,
        &format!("data-key=\"read-p50-4\" data-profile=\"0\">{shown}<"),
        &format!(
            "data-key=\"read-p50-4\" data-profile=\"0\">{}<",
            shown.replacen(number, &altered, 1)
        ),
    );
    let lines = refusal(&check(&page("headline", &bad), &[]));
    assert_eq!(lines.len(), 1, "only that headline is wrong: {lines:?}");
    assert!(
        lines[0].contains(&format!(
            "headline read-p50-4 (profile 0): shows {altered}, the raw data give {number}"
        )),
        "{lines:?}"
    );
}

#[test]
fn a_headline_with_other_decimals_or_other_raw_data_is_refused() {
    let html = good_page();
    // The same value with one decimal fewer than the entry's `digits`.
    let shown = cell_text(&html, "read-min");
    let number = shown.split(' ').next().unwrap();
    assert!(
        number.ends_with('0'),
        "read-min's fixture value ends in 0: {number}"
    );
    let short = replace_once(
        &html,
        &format!(">{shown}<"),
        &format!(
            ">{}<",
            shown.replacen(number, &number[..number.len() - 1], 1)
        ),
    );
    let lines = refusal(&check(&page("decimals", &short), &[]));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("headline read-min (profile 0): shows "),
        "{lines:?}"
    );
    assert!(lines[0].contains("rb-data says 2"), "{lines:?}");

    // The cell is untouched, but the raw record it comes from says otherwise: the checker reads
    // the value from the embedded document, not from the page's text.
    let raw = replace_once(&html, "\"p50_ns\":53823.0,", "\"p50_ns\":54823.0,");
    let lines = refusal(&check(&page("raw", &raw), &[]));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("headline read-p50-4 (profile 0): shows 53.8, the raw data give 54.8"),
        "{lines:?}"
    );
}

#[test]
fn an_emptied_figure_is_refused_naming_it() {
    let html = good_page();
    let fig = html
        .find("<figure class=\"rb-figure\" data-figure=\"throughput\">")
        .unwrap();
    let svg_open = fig + html[fig..].find("<svg").unwrap();
    let inner = svg_open + html[svg_open..].find('>').unwrap() + 1;
    let close = inner + html[inner..].find("</svg>").unwrap();
    let emptied = format!("{}{}", &html[..inner], &html[close..]);
    let lines = refusal(&check(&page("empty-svg", &emptied), &[]));
    assert_eq!(lines.len(), 1, "only that figure is wrong: {lines:?}");
    assert!(
        lines[0].contains("figure throughput: svg holds 0 elements"),
        "{lines:?}"
    );
}

#[test]
fn a_figure_drawn_too_small_is_refused_naming_it() {
    let html = replace_once(
        &good_page(),
        "</head>",
        "<style>figure[data-figure=\"latency\"] svg { width: 200px; }</style>\n</head>",
    );
    let lines = refusal(&check(&page("small-svg", &html), &[]));
    assert_eq!(lines.len(), 1, "only that figure is wrong: {lines:?}");
    assert!(
        lines[0].contains("figure latency: svg drew 200x"),
        "{lines:?}"
    );
    assert!(lines[0].ends_with("CSS px, under 300x150"), "{lines:?}");
}

#[test]
fn a_missing_browser_fails_loudly() {
    let p = page("nobrowser", &good_page());
    let o = check_with_env(
        &p,
        &[],
        &[("CHECK_REPORT_PAGE_CHROMIUM", "/nonexistent/chromium")],
    );
    let lines = refusal(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("no browser at /nonexistent/chromium")
            && lines[0].contains("scripts/install-deps"),
        "{lines:?}"
    );
}

#[test]
fn bad_arguments_exit_2_naming_the_option() {
    let p = page("args", &good_page());
    for (args, says) in [
        (&["--bogus"][..], "unknown option --bogus"),
        (&["--screenshot"][..], "--screenshot needs a file name"),
        (&["second.html"][..], "one page only"),
    ] {
        let o = check(&p, args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: exit 2\n{out}{err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

fn report(profiles: &[&str], extra: &[&str], html: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdma-bench"))
        .current_dir(repo())
        .arg("report")
        .args(profiles)
        .args(extra)
        .arg("-o")
        .arg(html)
        .output()
        .expect("rdma-bench runs")
}

#[test]
fn real_report_renders() {
    let dir = scratch("real-report");
    let html = dir.join("report.html");
    // The committed loopback profile (every figure of the set), the
    // two-host one measured against `serve` on another guest, and a HERD
    // file (a profile of one file), so the page carries overlays and B/A
    // tables too.
    let profiles = [
        "results/profile-rxe0-loopback",
        "results/profile-rxe0-two-host",
        "results/herd-fig3-inbound-rxe0-vm-qemu-20261129T113919Z.json",
    ];
    let o = report(&profiles, &[], &html);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("in peer mode: tcp vs loopback") && err.contains("--force"),
        "{err}"
    );
    assert!(!html.exists(), "a refused report writes no page");
    let o = report(&profiles, &["--force"], &html);
    let (out, err) = text(&o);
    assert!(
        o.status.success(),
        "rdma-bench report\nstdout: {out}\nstderr: {err}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<td>tcp: rxe0 on h2, 10.98.0.2:18515</td>"),
        "the header names the peer of the two-host profile"
    );
    let shot = dir.join("report.png");
    let summary = assert_passes(&check(&html, &["--screenshot", shot.to_str().unwrap()]));
    // The profile's nine figures (the HERD file's inbound overlays one).
    assert!(summary.contains(": ok: 9 figures"), "{summary}");
    assert!(!summary.contains(" 0 headlines"), "{summary}");
    assert_eq!(
        png_size(&shot).0,
        VIEWPORT_WIDTH,
        "the screenshot is the viewport's width"
    );
}
