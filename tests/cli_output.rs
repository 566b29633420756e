//! Host-side tests of what a measuring command writes for scripts:
//! `--output`'s figure must fit the run, `-H`/`-U` apply to latency runs
//! and need somewhere to write, and their samples file is vetted like
//! every output target. Each refusal comes before any device opens.

mod common;
use common::refused;

#[test]
fn an_output_figure_must_fit_the_run() {
    refused(
        &["write", "--tput", "inbound", "--output", "latency"],
        &["--output latency", "throughput run", "bandwidth"],
    );
    refused(
        &["write", "--output", "bandwidth"],
        &["--output bandwidth", "latency run"],
    );
    refused(
        &["send", "--output", "message_rate"],
        &["--output message_rate", "latency run"],
    );
    refused(
        &["write", "--under-load", "max", "--output", "message_rate"],
        &["--output message_rate", "--under-load"],
    );
    refused(&["write", "--output", "mops"], &["--output"]);
}

#[test]
fn raw_samples_are_latency_only_and_need_a_file() {
    refused(
        &[
            "write",
            "--tput",
            "inbound",
            "-H",
            "--samples-file",
            "/tmp/x",
        ],
        &["-H/--report-histogram", "latency runs"],
    );
    refused(
        &["echo", "--tput", "-U", "--json", "/tmp/x.json"],
        &["-U/--report-unsorted", "latency runs"],
    );
    refused(
        &["write", "-H"],
        &["-H/--report-histogram", "--samples-file FILE"],
    );
    refused(
        &["write", "-H", "-U", "--samples-file", "/tmp/x"],
        &["choose one"],
    );
    refused(
        &["write", "--forever", "-U", "--samples-file", "/tmp/x"],
        &["-U/--report-unsorted", "--forever"],
    );
    refused(
        &[
            "write",
            "--under-load",
            "max",
            "-H",
            "--samples-file",
            "/tmp/x",
        ],
        &["-H/--report-histogram", "--under-load"],
    );
    refused(
        &["write", "--samples-file", "/tmp/x"],
        &["--samples-file", "needs -H"],
    );
    // perftest's misspelling is accepted as -H (and so refused the same way here).
    refused(
        &[
            "write",
            "--tput",
            "inbound",
            "--report-histogrm",
            "--json",
            "/tmp/x.json",
        ],
        &["-H/--report-histogram"],
    );
}

#[test]
fn a_bad_samples_file_is_refused_naming_it() {
    let dir = common::scratch("cli-output-samples");
    let d = dir.display().to_string();
    refused(
        &["write", "-H", "--samples-file", &d],
        &["--samples-file", "directory"],
    );
    refused(
        &["write", "-U", "--samples-file", "/dev/null"],
        &["--samples-file /dev/null"],
    );
    let link = dir.join("link");
    std::os::unix::fs::symlink(dir.join("target"), &link).unwrap();
    refused(
        &["write", "-H", "--samples-file", &link.display().to_string()],
        &["--samples-file", "symbolic link"],
    );
    let same = dir.join("same.csv").display().to_string();
    refused(
        &["write", "-H", "--samples-file", &same, "--csv", &same],
        &["same file"],
    );
    refused(
        &["write", "-H", "--samples-file", "/nonexistent-dir/s.tsv"],
        &["--samples-file", "/nonexistent-dir"],
    );
    // Beside --json by default: that default is vetted too, and named.
    let json = dir.join("r.json").display().to_string();
    let beside = dir.join("r.samples.tsv");
    std::fs::create_dir(&beside).unwrap();
    refused(
        &["write", "-U", "--json", &json],
        &["-U/--report-unsorted", "r.samples.tsv"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
