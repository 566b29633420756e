//! The option reference and the help it is generated from: the committed
//! docs/reference.md is what the binary generates, the help is grouped and
//! `-h` is one line per option, and every example in a subcommand's help
//! parses (a measuring example also passes the checks a run makes before
//! it opens a device).

mod common;

use std::path::PathBuf;

use common::{run, text};
use rdma_bench::cli::{self, Command};
use rdma_bench::cmd::completions::REFERENCE_COMMAND;
use rdma_bench::cmd::plan::Plan;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn committed_reference_matches_the_option_definitions() {
    let out = run(&["reference-md"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let committed = std::fs::read_to_string(repo().join("docs/reference.md"))
        .unwrap_or_else(|e| panic!("docs/reference.md: {e}; create it with `{REFERENCE_COMMAND}`"));
    assert!(
        committed == stdout,
        "docs/reference.md differs from the option definitions in src/cli.rs and src/cli/; regenerate it with `{REFERENCE_COMMAND}` and commit it"
    );
    for needle in [
        "## rdma-bench write",
        "### Posting",
        "`-t, --window <WINDOW>`",
        "Also: `-Q`.",
        "**Examples:**",
    ] {
        assert!(stdout.contains(needle), "reference lacks {needle}");
    }
    assert!(
        !stdout.contains("reference-md") || stdout.contains(REFERENCE_COMMAND),
        "the hidden subcommands are not listed"
    );
    assert!(!stdout.contains("## rdma-bench manpage"));
    assert!(!stdout.contains("## rdma-bench help"));
}

#[test]
fn reference_depends_on_neither_terminal_nor_version() {
    let page = |columns: &str| {
        let out = std::process::Command::new(common::bin())
            .arg("reference-md")
            .env("COLUMNS", columns)
            .env("LINES", "10")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let narrow = page("40");
    assert_eq!(
        narrow,
        page("300"),
        "the reference follows the terminal width"
    );
    let version = text(&run(&["--version"])).0;
    // "rdma-bench 0.1.0 (git 1a2b3c4d5e6f)": neither the commit nor the version.
    let version = version.trim().trim_start_matches("rdma-bench").trim();
    assert!(!version.is_empty());
    assert!(!narrow.contains(version), "the reference names {version}");
    assert!(!narrow.contains("(git "), "the reference names a commit");
    assert!(
        !narrow.contains('\u{1b}'),
        "the reference has terminal escapes"
    );
}

/// The visible subcommands (not `help`, not the hidden ones).
fn subcommands() -> Vec<clap::Command> {
    let mut cmd = cli::command();
    cmd.build();
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect()
}

#[test]
fn measuring_help_is_grouped_and_short_help_is_one_line_per_option() {
    let headings = [
        "Connection:",
        "Sizes and iterations:",
        "Operation:",
        "Posting:",
        "Path:",
        "Memory:",
        "Throughput shape:",
        "Rate and load:",
        "Live reporting:",
        "Checks:",
        "Output:",
        "Examples:",
    ];
    for verb in ["read", "write", "send", "echo", "atomic"] {
        for flag in ["-h", "--help"] {
            let out = run(&[verb, flag]);
            let (help, stderr) = text(&out);
            assert!(out.status.success(), "{verb} {flag}: {stderr}");
            let found: Vec<usize> = headings
                .iter()
                .map(|h| {
                    help.lines()
                        .position(|l| l == *h)
                        .unwrap_or_else(|| panic!("{verb} {flag} lacks {h}:\n{help}"))
                })
                .collect();
            assert!(
                found.windows(2).all(|w| w[0] < w[1]),
                "{verb} {flag}: groups out of order: {found:?}"
            );
        }
    }
    for sub in subcommands() {
        let name = sub.get_name().to_string();
        let short = sub.clone().render_help().to_string();
        let long = sub.clone().render_long_help().to_string();
        let shown = |a: &&clap::Arg| !a.is_hide_set() && a.get_id() != "help";
        for a in sub.get_arguments().filter(shown) {
            let Some(spelling) = a.get_long().map(|l| format!("--{l}")) else {
                continue;
            };
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                !help.is_empty() && !help.contains('\n'),
                "{name} {spelling}: its short help is not one line: {help:?}"
            );
            // In -h, the option's line holds its short help, and no other
            // line has that help.
            let lines: Vec<&str> = short.lines().filter(|l| l.contains(&help)).collect();
            assert!(
                lines.len() == 1 && lines[0].contains(&spelling),
                "{name} -h: {spelling}'s help is on {lines:?}"
            );
            if let Some(more) = a.get_long_help() {
                let more = more.to_string();
                assert!(more.starts_with(&help), "{name} {spelling}: {more:?}");
                // clap drops the short help's full stop, not the long one's.
                let rest = more[help.len()..].trim_start_matches('.').trim();
                let first = rest.lines().next().unwrap_or_default();
                assert!(!first.is_empty(), "{name} {spelling}: {more:?}");
                assert!(
                    long.contains(first) && !short.contains(first),
                    "{name}: {spelling}'s long help ({first:?}) is in --help only"
                );
            }
        }
    }
}

/// The `rdma-bench ...` command lines of a help's examples, split as a
/// shell would (single and double quotes; up to a redirection, a pipe or
/// a comment).
fn examples(after_help: &str) -> Vec<Vec<String>> {
    let Some((_, block)) = after_help.split_once("Examples:\n") else {
        return Vec::new();
    };
    let block = block.split("\n\n").next().unwrap_or_default();
    let mut lines = Vec::new();
    for line in block.lines() {
        let Some(at) = line.find("rdma-bench ") else {
            continue;
        };
        let mut words = Vec::new();
        let (mut word, mut quote, mut any) = (String::new(), None, false);
        for c in line[at..].chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => (quote, any) = (Some(c), true),
                (None, c) if c.is_whitespace() => {
                    if any || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (None, c) => word.push(c),
            }
        }
        assert!(quote.is_none(), "unclosed quote in {line:?}");
        if any || !word.is_empty() {
            words.push(word);
        }
        if let Some(end) = words
            .iter()
            .position(|w| matches!(w.as_str(), ">" | "|" | "&&" | ";") || w.starts_with('#'))
        {
            words.truncate(end);
        }
        lines.push(words);
    }
    lines
}

#[test]
fn the_example_splitter_splits_as_a_shell_does() {
    let got = examples(
        "Prose.\n\nExamples:\n  rdma-bench write --expect 'p99<=5us' -s \"2,4\"   # a comment\n  sbatch x.sbatch\n  cp a b && rdma-bench schema > s.json\n\nAfter.\n  rdma-bench not-an-example",
    );
    assert_eq!(
        got,
        vec![
            vec!["rdma-bench", "write", "--expect", "p99<=5us", "-s", "2,4"],
            vec!["rdma-bench", "schema"],
        ]
    );
}

#[test]
fn every_subcommand_help_ends_with_examples_that_parse() {
    let mut checked = 0;
    for sub in subcommands() {
        let name = sub.get_name().to_string();
        let after = sub
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        let lines = examples(&after);
        assert!(
            (2..=3).contains(&lines.len()),
            "{name}: {} examples in its help:\n{after}",
            lines.len()
        );
        let long = sub.clone().render_long_help().to_string();
        let tail = long.trim_end();
        let last = after.trim_end().lines().last().unwrap();
        assert!(
            tail.ends_with(last),
            "{name} --help does not end with its examples"
        );
        for argv in lines {
            assert_eq!(argv.get(1), Some(&name), "{name}'s example {argv:?}");
            let cli = cli::parse_from(&argv)
                .unwrap_or_else(|e| panic!("{argv:?} does not parse: {}", cli::one_line(&e)));
            if let Some((verb, args)) = cli.command.measurement() {
                if let Err(e) = Plan::from_args_unresolved(verb, args) {
                    panic!("{argv:?} is refused: {e}");
                }
            }
            if let Command::Run(a) = &cli.command {
                assert!(
                    repo().join(&a.config).is_file(),
                    "{argv:?}: no {}",
                    a.config.display()
                );
            }
            checked += 1;
        }
    }
    // The top-level help's examples, too.
    let top = cli::command()
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    for argv in examples(&top) {
        let cli = cli::parse_from(&argv)
            .unwrap_or_else(|e| panic!("{argv:?} does not parse: {}", cli::one_line(&e)));
        if let Some((verb, args)) = cli.command.measurement() {
            if let Err(e) = Plan::from_args_unresolved(verb, args) {
                panic!("{argv:?} is refused: {e}");
            }
        }
        checked += 1;
    }
    assert!(checked >= 30, "{checked} examples");
}

/// A wrong example fails the checks above: an option that does not exist,
/// and one that does not apply to the run.
#[test]
fn a_broken_example_is_caught() {
    let bad =
        examples("Examples:\n  rdma-bench write --no-such-option 1\n  rdma-bench write --window 4");
    assert!(cli::parse_from(&bad[0]).is_err());
    let cli = cli::parse_from(&bad[1]).unwrap();
    let (verb, args) = cli.command.measurement().unwrap();
    let Err(e) = Plan::from_args_unresolved(verb, args) else {
        panic!("write --window 4 without --tput is accepted");
    };
    assert!(e.to_string().contains("--window"), "{e}");
}
