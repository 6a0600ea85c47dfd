//! `sessiongraph export`: prints a view body exactly as the server would return it, without
//! running a server.

use std::io::Write;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::Args;

use crate::config::MemoryBoundArgs;
use crate::core::pipeline::session::Branch;
use crate::core::pipeline::session::NoConversation;
use crate::core::views::branches::{context_body, ContextError};
use crate::core::views::graph::GraphMode;
use crate::core::views::{self, View, ViewOptions};
use crate::core::{LoadOptions, Session, SessionError};
use crate::store::disk::{self, DiskError};

/// Arguments of `sessiongraph export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The view to print.
    #[arg(long, value_parser = view_parser())]
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
    /// Print the (empty) view of a file that holds no conversation instead of failing, as
    /// the server does for a log found in a sessions directory.
    #[arg(long, conflicts_with = "strict")]
    pub lenient: bool,
    /// `active` leaves abandoned branches out of annotations, workflow and chat log.
    #[arg(long, default_value = "all")]
    pub branch: Branch,
    /// The graph and metrics as CommuGraph computes them for Claude Code: senders only, no
    /// edges (as `?edges=none`).
    #[arg(long)]
    pub no_edges: bool,
    /// With `--view context`: the entry whose context to build (default: the current leaf).
    #[arg(long)]
    pub leaf: Option<String>,
    /// A main session log (its sub-agents are found beside it), a directory holding one
    /// session, or several files of one session.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The memory bound of the session.
    #[command(flatten)]
    pub memory: MemoryBoundArgs,
}

/// Reads `--view`: the names come from [`View::NAMES`], so the help lists every view the
/// server has.
fn view_parser() -> impl TypedValueParser<Value = View> {
    clap::builder::PossibleValuesParser::new(View::NAMES).try_map(|name| name.parse::<View>())
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
    /// The session's records would pass the memory bound.
    #[error("{0}; --memory-per-input-byte and --memory-allowance set the bound")]
    TooManyRecords(SessionError),
    /// The files hold no conversation (the upload route's 400, word for word).
    #[error(transparent)]
    NoConversation(#[from] NoConversation),
    /// The output could not be written.
    #[error("failed to write the output: {0}")]
    Output(#[from] std::io::Error),
    /// `--leaf` names no entry of the session.
    #[error(transparent)]
    Leaf(#[from] ContextError),
}

/// Runs `export`, writing the body and a newline to `out`. Returns the session built, for
/// the caller to drop or, when the process ends next, to leave to the operating system:
/// freeing a large session allocation by allocation takes longer than building some of
/// it did.
pub fn export(args: &ExportArgs, out: &mut impl Write) -> Result<Session, ExportError> {
    let input = disk::read_session(&args.paths)?;
    let options = LoadOptions {
        strict: args.strict,
        format: None,
        memory_bound: Some(args.memory.bound()),
        without_workflow: !args.view.reads_workflow(),
    };
    let session = Session::build(&input, options).map_err(|e| match e {
        SessionError::TooManyRecords { .. } => ExportError::TooManyRecords(e),
        other => ExportError::Session(other),
    })?;
    // The session keeps the files' bytes it needs (its records' text is slices of them).
    drop(input);
    for (stage, took) in &session.timings {
        tracing::debug!(stage, ms = took.as_secs_f64() * 1000.0, "built");
    }
    if !args.lenient {
        let main = session.files.first().map_or("", |f| f.name.as_str());
        session.require_conversation(main)?;
    }
    let options = ViewOptions {
        step: args.step,
        include_subagents: args.include_subagents,
        branch: args.branch,
        graph: if args.no_edges {
            GraphMode::Reference
        } else {
            GraphMode::Edges
        },
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    match (&args.view, &args.leaf) {
        (View::Context, Some(leaf)) => {
            let body = context_body(&session, Some(leaf))?;
            serde_json::to_writer(&mut out, &body).map_err(std::io::Error::from)?;
        }
        _ => {
            let started = std::time::Instant::now();
            views::write(&session, args.view, options, &mut out)?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            tracing::debug!(view = %args.view, ms, "written");
        }
    }
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(session)
}
