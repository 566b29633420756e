//! Host-side tests of the command line: bad input is refused with exit code
//! 2, one line naming the option, and no panic. No device is needed: every
//! case here is refused before a verbs object is created.

mod common;

#[path = "cli/bad_options.rs"]
mod bad_options;
#[path = "cli/checked_first.rs"]
mod checked_first;
#[path = "cli/experiment_files.rs"]
mod experiment_files;
#[path = "cli/inputs.rs"]
mod inputs;
#[path = "cli/option_families.rs"]
mod option_families;
#[path = "cli/outputs.rs"]
mod outputs;
use common::{refused, run, text};
use std::path::Path;

/// A direct (non-MPI) experiment: loading it needs no device.
const DIRECT_TOML: &str = "name = \"t\"\n[[series]]\nverb = \"write\"\n";

/// An MPI experiment: `run` prints its launcher lines and opens no device,
/// so it shows through the binary what an experiment file is turned into.
fn mpi_toml(body: &str) -> String {
    format!("name = \"m\"\nlauncher = \"mpi\"\nranks = 3\n{body}")
}

/// Where a child's stdout goes in the stdout tests.
enum Sink {
    /// A closed pipe: its reading end is already gone.
    Closed,
    /// /dev/full: every write fails with ENOSPC.
    Full,
}

fn run_into(args: &[&str], sink: &Sink) -> std::process::Output {
    use std::process::{Command, Stdio};
    let stdout = match sink {
        Sink::Closed => {
            // A connected socket whose other end is gone: writes fail with EPIPE.
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            drop(ours);
            Stdio::from(std::os::fd::OwnedFd::from(theirs))
        }
        Sink::Full => Stdio::from(std::fs::File::create("/dev/full").unwrap()),
    };
    Command::new(common::bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A TOML basic string holding `s` (control characters as \u escapes).
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
