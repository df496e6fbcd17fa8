//! The `stallwarden` command: `run` puts the watchdog around any command,
//! `check` validates a config, `list` and `describe` read a control socket.

// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; bad flags are ours: 125,
            // so they are never mistaken for the command's status (R8.2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { cli::EXIT_ERROR } else { 0 });
        }
    };
    cli::logging::init(cli.verbose);
    let code = match cli.command {
        cli::args::Command::Run(args) => cli::run::run(*args),
        cli::args::Command::Check { file } => cli::check::run(file),
        cli::args::Command::List(args) => cli::control::list(&args),
        cli::args::Command::Describe { task, control } => {
            cli::control::describe(task.as_deref(), &control)
        }
    };
    ExitCode::from(code)
}
