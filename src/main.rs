//! The `sessiongraph` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;
use sessiongraph::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match &cli.command {
        Command::Export(args) => cli::export(args, &mut std::io::stdout().lock()).map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
