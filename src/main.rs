#![deny(unsafe_code)]

use clap::Parser;

use rdma_bench::cli::{Cli, Command};
use rdma_bench::cmd;
use rdma_bench::spec::VerbKind;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                );
            }
            // One line: clap's first line names the option and what is wrong.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("error: bad arguments");
            eprintln!("{first}");
            std::process::exit(2);
        }
    };
    if let Err(e) = rdma_bench::abort::stop_on_signals() {
        eprintln!("error: cannot install signal handlers: {e}");
        std::process::exit(1);
    }
    let result = match &cli.command {
        Command::Devices(a) => cmd::devices::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Read(a) => cmd::measure::run(VerbKind::Read, a),
        Command::Write(a) => cmd::measure::run(VerbKind::Write, a),
        Command::Send(a) => cmd::measure::run(VerbKind::Send, a),
        Command::Echo(a) => cmd::measure::run(VerbKind::Echo, a),
        Command::Atomic(a) => cmd::measure::run(VerbKind::Atomic, a),
        Command::Run(a) => cmd::run::run(a),
        Command::Compare(a) => cmd::compare::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
