//! The view bodies, as serde types whose JSON matches the reference's shape: keys in its
//! order, absent keys omitted, `null` where it prints `null`, integral numbers without `.0`.
//! Every body borrows from a [`Session`] and is built on demand.

pub mod annotations;
pub mod autogen_graph;
pub mod body;
pub mod branches;
pub mod chatlog;
pub mod context;
pub mod diagnostics;
pub mod graph;
pub mod interactions;
pub mod parsed;
pub mod step;
pub mod summary;
pub mod workflow;

use std::fmt;
use std::str::FromStr;

pub use crate::json::literals::Text;
use crate::pipeline::session::{Branch, Session};
pub use body::{Body, BodyWriter, ChunkWriter, StreamWriter};

/// The views a session can be rendered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// Annotation units.
    Annotations,
    /// The same units as CommuGraph's dialog view (`records` for `annotations`).
    Dialog,
    /// The workflow DAG.
    Workflow,
    /// The chat log.
    Chatlog,
    /// The communication graph.
    Graph,
    /// Graph metrics.
    Metrics,
    /// What loading found.
    Diagnostics,
    /// Branch points and the active path.
    Branches,
    /// The context at the current leaf.
    Context,
}

impl View {
    /// All views, in the order the documentation lists them.
    pub const ALL: [View; 9] = [
        View::Annotations,
        View::Dialog,
        View::Workflow,
        View::Chatlog,
        View::Graph,
        View::Metrics,
        View::Diagnostics,
        View::Branches,
        View::Context,
    ];

    /// The names of [`View::ALL`], in order.
    pub const NAMES: [&'static str; 9] = [
        "annotations",
        "dialog",
        "workflow",
        "chatlog",
        "graph",
        "metrics",
        "diagnostics",
        "branches",
        "context",
    ];

    /// True for the views of annotation units (annotations and dialog): the ones that show
    /// labels.
    pub fn shows_units(self) -> bool {
        matches!(self, View::Annotations | View::Dialog)
    }

    /// True when the view reads the session's workflow DAG (the chat log, the graph and
    /// its metrics derive from it, and the diagnostics count it): a session loaded
    /// [`without_workflow`](crate::pipeline::load::LoadOptions::without_workflow) cannot
    /// render it.
    pub fn reads_workflow(self) -> bool {
        !matches!(
            self,
            View::Annotations | View::Dialog | View::Branches | View::Context
        )
    }

    /// True when a step cuts the view (`?step=N`, `export --step`): the workflow and the
    /// graph.
    pub fn takes_step(self) -> bool {
        matches!(self, View::Workflow | View::Graph)
    }

    /// True when the view can leave out abandoned branches (`?branch=active`,
    /// `export --branch`): annotations, dialog, workflow and chat log.
    pub fn takes_branch(self) -> bool {
        matches!(
            self,
            View::Annotations | View::Dialog | View::Workflow | View::Chatlog
        )
    }

    /// True when the view can add the sub-agents' units or messages
    /// (`?include_sidechains=true`, `?include_subagents=true`, `export --include-subagents`):
    /// annotations, dialog and chat log.
    pub fn takes_subagents(self) -> bool {
        matches!(self, View::Annotations | View::Dialog | View::Chatlog)
    }

    /// True when the view has CommuGraph's edgeless form (`?edges=none`,
    /// `export --no-edges`): the graph and its metrics.
    pub fn takes_edges(self) -> bool {
        matches!(self, View::Graph | View::Metrics)
    }

    /// True when the view is built at an entry of the session (`?leaf=`, `export --leaf`):
    /// the context.
    pub fn takes_leaf(self) -> bool {
        self == View::Context
    }

    /// The view's name (`annotations`, ...).
    pub fn name(self) -> &'static str {
        match self {
            View::Annotations => "annotations",
            View::Dialog => "dialog",
            View::Workflow => "workflow",
            View::Chatlog => "chatlog",
            View::Graph => "graph",
            View::Metrics => "metrics",
            View::Diagnostics => "diagnostics",
            View::Branches => "branches",
            View::Context => "context",
        }
    }
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for View {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        View::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("unknown view '{s}' (expected one of: {})", View::NAMES.join(", ")))
    }
}

/// Options of a view request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewOptions {
    /// Cut the workflow or graph at this step.
    pub step: Option<u64>,
    /// Include sub-agents: sidechain units in annotations, sub-agent messages in the chat log.
    pub include_subagents: bool,
    /// The whole session or its active branch (annotations, workflow, chat log).
    pub branch: Branch,
    /// The graph and its metrics with inferred edges, or CommuGraph's edgeless body.
    pub graph: graph::GraphMode,
}

/// Renders `view` of `session` as compact JSON: the bytes `write` gives, with the
/// workflow's nodes and the chat log's messages rendered in parallel.
pub fn render(session: &Session, view: View, options: ViewOptions) -> Body {
    debug_assert!(
        session.workflow_built || !view.reads_workflow(),
        "{}",
        WorkflowLeftOut(view)
    );
    let mut out = ChunkWriter::new();
    // Writing into memory cannot fail, and serialising these types cannot fail either:
    // every map key is a string and every value is representable in JSON.
    let _ = write_into(session, view, options, &mut out);
    out.finish()
}

/// Writes `view` of `session` as compact JSON to `out`, without building the whole body in
/// memory first: the workflow's nodes and the chat log's messages are rendered in parallel,
/// a window of them at a time while the window before is written, and written in order
/// (the bytes of [`render`]).
pub fn write(
    session: &Session,
    view: View,
    options: ViewOptions,
    out: impl std::io::Write,
) -> std::io::Result<()> {
    write_into(session, view, options, &mut StreamWriter::new(out))
}

/// A view that reads the workflow was asked of a session loaded without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {0} view reads the workflow, which this session was loaded without")]
pub struct WorkflowLeftOut(pub View);

/// Writes `view` of `session` to `out`: the workflow's nodes and the chat log's messages in
/// parallel parts (most of a session's bytes), every other body in one serde pass.
fn write_into(
    session: &Session,
    view: View,
    options: ViewOptions,
    out: &mut impl BodyWriter,
) -> std::io::Result<()> {
    if view.reads_workflow() && !session.workflow_built {
        return Err(std::io::Error::other(WorkflowLeftOut(view)));
    }
    let written = match (view, &session.autogen) {
        (View::Annotations, _) => serde_json::to_writer(
            out,
            &annotations::annotations(session, options.include_subagents, options.branch),
        ),
        (View::Dialog, _) => serde_json::to_writer(
            out,
            &annotations::annotations(session, options.include_subagents, options.branch).as_dialog(),
        ),
        (View::Workflow, None) => {
            let w = session.workflow_for(options.branch);
            let body = workflow::workflow(session, &w, options.step);
            return workflow::write_parallel(&body, out).map(|_| ());
        }
        (View::Workflow, Some(_)) => {
            let w = session.workflow_for(options.branch);
            let body = workflow::workflow(session, &w, options.step);
            serde_json::to_writer(out, &body)
        }
        (View::Chatlog, None) => {
            let w = session.workflow_for(options.branch);
            return chatlog::write_parallel(&chatlog::chatlog(session, &w, options.include_subagents), out);
        }
        (View::Chatlog, Some(messages)) => serde_json::to_writer(out, &autogen_graph::chatlog(messages)),
        (View::Graph, Some(messages)) => {
            serde_json::to_writer(out, &autogen_graph::graph(messages, options.step))
        }
        (View::Graph, None) => {
            serde_json::to_writer(out, &graph::graph(session, options.step, options.graph))
        }
        (View::Metrics, Some(messages)) => serde_json::to_writer(out, &autogen_graph::metrics(messages)),
        (View::Metrics, None) => serde_json::to_writer(out, &graph::metrics(session, options.graph)),
        (View::Diagnostics, _) => serde_json::to_writer(out, &diagnostics::diagnostics(session)),
        (View::Branches, _) => serde_json::to_writer(out, &branches::branches(session)),
        (View::Context, _) => match branches::context_body(session, None) {
            Ok(body) => serde_json::to_writer(out, &body),
            Err(e) => return Err(std::io::Error::other(e)),
        },
    };
    written.map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use crate::views::*;

    #[test]
    fn every_view_is_named_once_in_order() {
        let names: Vec<&str> = View::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names, View::NAMES);
        for name in View::NAMES {
            assert_eq!(name.parse::<View>().map(View::name), Ok(name));
        }
    }
}
