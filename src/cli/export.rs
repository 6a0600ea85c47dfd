//! `sessiongraph export`: prints a view body exactly as the server would return it, without
//! running a server. The views that show labels (annotations, dialog, and diagnostics'
//! orphaned labels) read them from a label store when one is named ([`ExportLabelArgs`]).

use std::io::Write;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::Args;

use super::labels::{ExportLabelArgs, ReadLabelsError, ViewLabels};
use crate::config::MemoryBoundArgs;
use crate::core::pipeline::session::Branch;
use crate::core::pipeline::session::NoConversation;
use crate::core::views::annotations::annotations;
use crate::core::views::branches::{context_body, ContextError};
use crate::core::views::diagnostics::diagnostics;
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
    /// Cut the workflow or graph at this step (as `?step=N`); workflow and graph only.
    #[arg(long)]
    pub step: Option<u64>,
    /// Include sub-agents: sidechain units in annotations and dialog, sub-agent messages in
    /// the chat log; those views only.
    #[arg(long)]
    pub include_subagents: bool,
    /// Fail on the first unreadable line instead of recording it as a diagnostic.
    #[arg(long)]
    pub strict: bool,
    /// Print the (empty) view of a file that holds no conversation instead of failing, as
    /// the server does for a log found in a sessions directory.
    #[arg(long, conflicts_with = "strict")]
    pub lenient: bool,
    /// `active` leaves abandoned branches out of annotations, dialog, workflow and chat log
    /// (those views only); default `all`.
    #[arg(long, value_name = "all|active")]
    pub branch: Option<Branch>,
    /// The graph and metrics as CommuGraph computes them for Claude Code: senders only, no
    /// edges (as `?edges=none`); graph and metrics only.
    #[arg(long)]
    pub no_edges: bool,
    /// With `--view context` (only): the entry whose context to build (default: the
    /// current leaf).
    #[arg(long)]
    pub leaf: Option<String>,
    /// A main session log (its sub-agents are found beside it), a directory holding one
    /// session, or several files of one session.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The memory bound of the session.
    #[command(flatten)]
    pub memory: MemoryBoundArgs,
    /// The label store the views that show labels read.
    #[command(flatten)]
    pub labels: ExportLabelArgs,
}

impl ExportArgs {
    /// Refuses a flag given with a view it does not apply to (the route of the view would
    /// not read its parameter): the message names the flag and the views it applies to.
    pub fn check_flags(&self) -> Result<(), ExportError> {
        type Applies = fn(View) -> bool;
        let mut given: Vec<(&'static str, bool, Applies)> = vec![
            ("--step", self.step.is_some(), View::takes_step),
            ("--branch", self.branch.is_some(), View::takes_branch),
            (
                "--include-subagents",
                self.include_subagents,
                View::takes_subagents,
            ),
            ("--no-edges", self.no_edges, View::takes_edges),
            ("--leaf", self.leaf.is_some(), View::takes_leaf),
        ];
        given.extend(
            self.labels
                .flags_given()
                .map(|(flag, set)| (flag, set, ViewLabels::read_by as Applies)),
        );
        for (flag, set, applies) in given {
            if set && !applies(self.view) {
                let views: Vec<&str> = View::ALL
                    .into_iter()
                    .filter(|v| applies(*v))
                    .map(View::name)
                    .collect();
                return Err(ExportError::FlagNotForView {
                    flag,
                    view: self.view,
                    applies_to: views.join(", "),
                });
            }
        }
        Ok(())
    }
}

/// Reads `--view`: the names come from [`View::NAMES`], so the help lists every view the
/// server has.
fn view_parser() -> impl TypedValueParser<Value = View> {
    clap::builder::PossibleValuesParser::new(View::NAMES).try_map(|name| name.parse::<View>())
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A flag was given with a view it does not apply to.
    #[error("{flag} does not apply to --view {view}: it applies to {applies_to}")]
    FlagNotForView {
        /// The flag.
        flag: &'static str,
        /// The view asked for.
        view: View,
        /// The views it applies to, comma-separated.
        applies_to: String,
    },
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
    /// The label store could not be read.
    #[error(transparent)]
    Labels(#[from] ReadLabelsError),
}

/// Runs `export`, writing the body and a newline to `out`. Returns the session built, for
/// the caller to drop or, when the process ends next, to leave to the operating system:
/// freeing a large session allocation by allocation takes longer than building some of
/// it did.
pub fn export(args: &ExportArgs, out: &mut impl Write) -> Result<Session, ExportError> {
    args.check_flags()?;
    args.labels.check()?;
    let session = build(args)?;
    for (stage, took) in &session.timings {
        tracing::debug!(stage, ms = took.as_secs_f64() * 1000.0, "built");
    }
    if !args.lenient {
        let main = session.files.first().map_or("", |f| f.name.as_str());
        session.require_conversation(main)?;
    }
    let labels = args.labels.read(args.view, &session)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let started = std::time::Instant::now();
    write_body(args, &session, labels, &mut out)?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::debug!(view = %args.view, ms, "written");
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(session)
}

/// The session `args` name, loaded as the view needs it.
fn build(args: &ExportArgs) -> Result<Session, ExportError> {
    let input = disk::read_session(&args.paths)?;
    let options = LoadOptions {
        strict: args.strict,
        format: None,
        memory_bound: Some(args.memory.bound()),
        without_workflow: !args.view.reads_workflow(),
    };
    // The session keeps the files' bytes it needs (its records' text is slices of them);
    // the input goes when this returns.
    Session::build(&input, options).map_err(|e| match e {
        SessionError::TooManyRecords { .. } => ExportError::TooManyRecords(e),
        other => ExportError::Session(other),
    })
}

/// Writes the body of the view `args` ask for, showing `labels`.
fn write_body(
    args: &ExportArgs,
    session: &Session,
    labels: ViewLabels,
    out: &mut impl Write,
) -> Result<(), ExportError> {
    let options = ViewOptions {
        step: args.step,
        include_subagents: args.include_subagents,
        branch: args.branch.unwrap_or_default(),
        graph: if args.no_edges {
            GraphMode::Reference
        } else {
            GraphMode::Edges
        },
    };
    match (&args.view, &args.leaf, labels) {
        (View::Context, Some(leaf), _) => json(out, &context_body(session, Some(leaf))?)?,
        (view, _, ViewLabels::Units(labels)) => {
            let mut body = annotations(session, options.include_subagents, options.branch);
            body.attach_labels(&labels);
            match view {
                View::Dialog => json(out, &body.as_dialog())?,
                _ => json(out, &body)?,
            }
        }
        (_, _, ViewLabels::Orphans(orphans)) => {
            let mut body = serde_json::to_value(diagnostics(session)).map_err(std::io::Error::from)?;
            if let Some(object) = body.as_object_mut() {
                object.insert("orphaned_labels".into(), orphans);
            }
            json(out, &body)?
        }
        (_, _, ViewLabels::None) => views::write(session, args.view, options, out)?,
    }
    Ok(())
}

/// Writes `body` to `out` as JSON.
fn json(out: &mut impl Write, body: &impl serde::Serialize) -> Result<(), ExportError> {
    serde_json::to_writer(out, body).map_err(std::io::Error::from)?;
    Ok(())
}
