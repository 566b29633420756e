//! `rdma-bench completions SHELL` and the hidden `rdma-bench manpage DIR`:
//! both generated from the clap definitions in `cli.rs`, so they cannot
//! drift from the options the binary accepts.

use std::path::Path;

use crate::error::{Error, Result};
use crate::export::write_atomically;

/// The completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut cmd = crate::cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "rdma-bench", &mut out);
    let mut text =
        String::from_utf8(out).map_err(|e| Error::io("completions", std::io::Error::other(e)))?;
    if shell == clap_complete::Shell::Bash {
        text = fix_hyphenated_bash(&text);
    }
    crate::output::print_line(text.trim_end())
}

/// clap_complete's bash script (4.6) spells a subcommand's state two ways
/// when the binary's name has a hyphen: the word loop sets
/// `rdma__bench__subcmd__write`, the case arms wait for
/// `rdma__subcmd__bench__subcmd__write`, so no option after a subcommand
/// ever completes (clap-rs/clap#6421). The arms are renamed to the loop's
/// spelling; once upstream is fixed this changes nothing.
fn fix_hyphenated_bash(script: &str) -> String {
    script.replace("rdma__subcmd__bench", "rdma__bench")
}

/// `rdma-bench.1` and one `rdma-bench-<subcommand>.1` per visible
/// subcommand, written into `dir` (which must exist).
pub fn manpages(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(Error::usage(format!(
            "manpage {}: not an existing directory",
            dir.display()
        )));
    }
    let cmd = crate::cli::command();
    let mut pages = vec![("rdma-bench".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("rdma-bench-{}", sub.get_name());
        let bin = format!("rdma-bench {}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name).bin_name(bin)));
    }
    for (name, page) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut out)
            .map_err(|e| Error::io(format!("rendering {name}.1"), e))?;
        write_atomically(&dir.join(format!("{name}.1")), &out)?;
    }
    Ok(())
}

/// The command that regenerates `docs/reference.md`.
pub const REFERENCE_COMMAND: &str = "cargo run -q -- reference-md > docs/reference.md";

/// `docs/reference.md` on stdout: every visible subcommand's options, in
/// their help groups, with their long help, defaults and examples.
pub fn reference_md() -> Result<()> {
    crate::output::print_line(reference().trim_end())
}

/// The Markdown reference of the command tree. It reads only the clap
/// definitions, never the terminal or the version (which names the git
/// commit), so the same definitions give the same page.
pub fn reference() -> String {
    let mut cmd = crate::cli::command();
    cmd.build();
    let mut md = String::new();
    md.push_str("# rdma-bench command-line reference\n\n");
    md.push_str(&format!(
        "Generated from the option definitions (`{REFERENCE_COMMAND}`); \
         `rdma-bench <subcommand> --help` prints the same text. \
         `-h` prints one line per option.\n\n"
    ));
    md.push_str(&sentence(&text(&paragraphs(cmd.get_about()))));
    md.push_str("\n\n| Subcommand | What it does |\n|---|---|\n");
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    for sub in &subs {
        let name = sub.get_name();
        md.push_str(&format!(
            "| [`{name}`](#rdma-bench-{name}) | {} |\n",
            text(&paragraphs(sub.get_about())).replace('|', "\\|")
        ));
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        md.push_str(&after_help(&after.to_string()));
    }
    // Subcommands with the same options (read, write, send, echo, atomic)
    // list them once, at the first.
    let mut listed: Vec<(String, &str)> = Vec::new();
    for sub in subs {
        let options = options(sub);
        let first = listed.iter().find(|(o, _)| *o == options).map(|(_, n)| *n);
        md.push_str(&subcommand(sub, &options, first));
        if first.is_none() {
            listed.push((options, sub.get_name()));
        }
    }
    // One blank line between blocks (sections end with one of their own).
    while md.contains("\n\n\n") {
        md = md.replace("\n\n\n", "\n\n");
    }
    md
}

fn paragraphs(text: Option<&clap::builder::StyledStr>) -> String {
    text.map(|t| t.to_string().trim().to_string())
        .unwrap_or_default()
}

/// The text after a command's options: its prose as paragraphs, and its
/// examples (each line an indented command) as a code block.
fn after_help(after: &str) -> String {
    let mut md = String::new();
    for block in after.split("\n\n") {
        let mut lines = block.lines();
        match lines.next() {
            Some("Examples:") => {
                md.push_str("\n**Examples:**\n\n```sh\n");
                for l in lines {
                    md.push_str(l.strip_prefix("  ").unwrap_or(l));
                    md.push('\n');
                }
                md.push_str("```\n");
            }
            _ => md.push_str(&format!("\n{}\n", text(block.trim()))),
        }
    }
    md
}

/// A subcommand's section; `same_as` names an earlier subcommand whose
/// options are these.
fn subcommand(sub: &clap::Command, options: &str, same_as: Option<&str>) -> String {
    let name = sub.get_name();
    let mut md = format!("\n## rdma-bench {name}\n\n");
    md.push_str(&sentence(&text(&paragraphs(
        sub.get_long_about().or(sub.get_about()),
    ))));
    let usage = sub.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    md.push_str(&format!("\n\nUsage: `{usage}`\n"));
    match same_as {
        Some(other) => md.push_str(&format!(
            "\nThe options are those of [`{other}`](#rdma-bench-{other}).\n"
        )),
        None => md.push_str(options),
    }
    if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
        md.push_str(&after_help(&after.to_string()));
    }
    md
}

/// A subcommand's arguments, under their help headings in help's order.
fn options(sub: &clap::Command) -> String {
    let args: Vec<&clap::Arg> = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    let mut headings: Vec<&str> = Vec::new();
    for a in &args {
        let h = heading(a);
        if !headings.contains(&h) {
            headings.push(h);
        }
    }
    let mut md = String::new();
    for h in headings {
        md.push_str(&format!("\n### {h}\n\n"));
        for a in args.iter().filter(|a| heading(a) == h) {
            md.push_str(&argument(a));
        }
    }
    md
}

fn heading(a: &clap::Arg) -> &str {
    match a.get_help_heading() {
        Some(h) => h,
        None if a.is_positional() => "Arguments",
        None => "Options",
    }
}

/// One argument as a list item: its spellings, its help (long if it has
/// one), its default, aliases and possible values.
fn argument(a: &clap::Arg) -> String {
    let value = || {
        let names: Vec<String> = match a.get_value_names() {
            Some(v) => v.iter().map(|n| n.to_string()).collect(),
            None => vec![a.get_id().as_str().to_uppercase()],
        };
        let v = format!("<{}>", names.join("> <"));
        let optional = a.get_num_args().is_some_and(|n| n.min_values() == 0);
        if optional {
            format!("[{v}]")
        } else {
            v
        }
    };
    let mut spelling = Vec::new();
    if let Some(s) = a.get_short() {
        spelling.push(format!("-{s}"));
    }
    if let Some(l) = a.get_long() {
        spelling.push(format!("--{l}"));
    }
    let mut name = spelling.join(", ");
    if a.is_positional() {
        name = value();
    } else if a.get_action().takes_values() {
        name = format!("{name} {}", value());
    }
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut item = format!("- `{name}`");
    let mut body: Vec<String> = help.trim().split("\n\n").map(str::to_string).collect();
    let mut notes = Vec::new();
    let aliases: Vec<String> = a
        .get_visible_short_aliases()
        .unwrap_or_default()
        .iter()
        .map(|s| format!("`-{s}`"))
        .chain(
            a.get_visible_aliases()
                .unwrap_or_default()
                .iter()
                .map(|l| format!("`--{l}`")),
        )
        .collect();
    if !aliases.is_empty() {
        notes.push(format!("Also: {}.", aliases.join(", ")));
    }
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && !a.is_hide_default_value_set() && a.get_action().takes_values() {
        notes.push(format!("Default: `{}`.", defaults.join(",")));
    }
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| match v.get_help() {
            Some(h) => format!(
                "`{}` ({})",
                v.get_name(),
                h.to_string().trim_end_matches('.')
            ),
            None => format!("`{}`", v.get_name()),
        })
        .collect();
    if !values.is_empty() && !a.is_hide_possible_values_set() {
        notes.push(format!("Values: {}.", values.join(", ")));
    }
    body.retain(|p| !p.trim().is_empty());
    if !notes.is_empty() {
        body.push(notes.join(" "));
    }
    let body: Vec<String> = body
        .iter()
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .map(|p| sentence(&text(&p)))
        .collect();
    if let Some((first, rest)) = body.split_first() {
        item.push_str(&format!(": {first}\n"));
        for p in rest {
            item.push_str(&format!("\n  {p}\n"));
        }
        item.push('\n');
    } else {
        item.push_str("\n\n");
    }
    item
}

/// A paragraph ends with a full stop (clap drops a one-line help's).
fn sentence(p: &str) -> String {
    if p.is_empty() || p.ends_with('.') {
        p.to_string()
    } else {
        format!("{p}.")
    }
}

/// Help text as Markdown prose: outside code spans, a `<` that would open
/// an HTML tag and every `*` are escaped, so `<experiment>` or
/// `bench-configs/*.toml` show as written.
fn text(p: &str) -> String {
    let mut out = String::new();
    for (i, part) in p.split('`').enumerate() {
        if i % 2 == 1 {
            out.push('`');
            out.push_str(part);
            out.push('`');
            continue;
        }
        let mut chars = part.chars().peekable();
        while let Some(c) = chars.next() {
            let tag = c == '<'
                && chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '/');
            if tag || c == '*' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}
