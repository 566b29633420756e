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
