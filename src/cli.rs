//! `sessiongraph export`: prints a view body exactly as the server would return it, without
//! running a server.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::core::views::{self, View, ViewOptions};
use crate::core::{LoadOptions, Session, SessionError};
use crate::store::disk::{self, DiskError};

/// Arguments of `sessiongraph export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The view: annotations, workflow, chatlog, graph, metrics or diagnostics.
    #[arg(long)]
    pub view: View,
    /// Cut the workflow or graph at this step (as `?step=N`).
    #[arg(long)]
    pub step: Option<u64>,
    /// Include sub-agents: sidechain units in annotations, sub-agent messages in the chat log.
    #[arg(long)]
    pub include_subagents: bool,
    /// Fail on the first unreadable line instead of recording it as a diagnostic.
    #[arg(long)]
    pub strict: bool,
    /// A main session log (its sub-agents are found beside it), a directory holding one
    /// session, or several files of one session.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The session's files could not be read.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// The session could not be loaded.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The output could not be written.
    #[error("failed to write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs `export`, writing the body and a newline to `out`.
pub fn export(args: &ExportArgs, out: &mut impl Write) -> Result<(), ExportError> {
    let input = disk::read_session(&args.paths)?;
    let session = Session::build(&input, LoadOptions { strict: args.strict })?;
    // The records own their text: the files' bytes are no longer needed.
    drop(input);
    let options = ViewOptions {
        step: args.step,
        include_subagents: args.include_subagents,
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    views::write(&session, args.view, options, &mut out)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}
