//! `preloop-hooks`: the operator CLI. Exit codes are documented on
//! [`preloop_shared::Error::exit_code`] (0 ok, 1 failure, 2 usage, 3 note
//! undeliverable/expired, 4 wait timed out).

mod notes;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "preloop-hooks", version, about = "Steer a running coding agent: send operator notes and manage the preloop hooks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Send, list, track and cancel operator notes.
    #[command(subcommand)]
    Notes(notes::NotesCmd),
    /// List the sessions the hooks have registered.
    #[command(subcommand)]
    Sessions(notes::SessionsCmd),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Notes(c) => notes::run_notes(c),
        Command::Sessions(c) => notes::run_sessions(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("preloop-hooks: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
