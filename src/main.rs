#![deny(unsafe_code)]

use std::io::Write;

use rdma_bench::cli::{self, Command};
use rdma_bench::cmd;
use rdma_bench::escape::printable;
use rdma_bench::output::is_closed_stdout;

/// Says `msg` on stderr (best effort: stderr may be closed too) and exits.
fn fail(msg: &str, code: i32) -> ! {
    let _ = writeln!(std::io::stderr(), "{}", printable(msg));
    std::process::exit(code)
}

fn main() {
    let cli = match cli::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => 2,
                // One line that names the option and what is wrong.
                _ => fail(&cli::one_line(&e), 2),
            };
            if let Err(w) = e.print() {
                if w.kind() == std::io::ErrorKind::BrokenPipe {
                    std::process::exit(code);
                }
                fail(&format!("error: writing to stdout: {w}"), 1);
            }
            std::process::exit(code);
        }
    };
    if let Err(e) = rdma_bench::abort::stop_on_signals() {
        fail(&format!("error: cannot install signal handlers: {e}"), 1);
    }
    let result = match (&cli.command, cli.command.measurement()) {
        (_, Some((verb, a))) => cmd::measure::run(verb, a),
        (Command::Devices(a), _) => cmd::devices::run(a),
        (Command::Serve(a), _) => cmd::serve::run(a),
        (Command::Run(a), _) => cmd::run::run(a),
        (Command::Compare(a), _) => cmd::compare::run(a),
        (Command::Fabric(a), _) => cmd::fabric::run(a),
        (Command::Profile(a), _) => cmd::profile::run(a),
        (Command::Report(a), _) => cmd::report::run(a),
        (Command::Completions(a), _) => cmd::completions::completions(a.shell),
        (Command::Manpage(a), _) => cmd::completions::manpages(&a.dir),
        (Command::ReferenceMd, _) => cmd::completions::reference_md(),
        (Command::Schema, _) => cmd::schema::run(),
        (_, None) => unreachable!("every measuring subcommand names its verb"),
    };
    if let Err(e) = result {
        // Whoever read our output has stopped reading: end quietly (like ripgrep).
        if is_closed_stdout(&e) {
            std::process::exit(0);
        }
        fail(&format!("error: {e}"), e.exit_code());
    }
}
