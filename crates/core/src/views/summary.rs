//! The counts an upload response, `info` and the session list report.

use serde::Serialize;

use super::annotations::annotations;
use super::graph::GraphMode;
use crate::pipeline::session::{Branch, Session};

/// A session's counts, as CommuGraph reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Workflow nodes (the reference's messages).
    pub message_count: usize,
    /// Communication-graph nodes: distinct senders.
    pub node_count: usize,
    /// Communication-graph edges: distinct sender -> receiver pairs of the graph with
    /// inferred edges (CONTRACT 3.13; CommuGraph says 0 for Claude Code).
    pub edge_count: usize,
    /// Highest step index (0 without nodes).
    pub total_steps: usize,
    /// Nodes whose record is not a sidechain's.
    pub main_agent_steps: usize,
    /// Annotation units of the main chain.
    pub annotation_count: usize,
}

/// Counts `session`.
pub fn counts(session: &Session) -> Counts {
    if let Some(messages) = &session.autogen {
        let metrics = super::autogen_graph::metrics(messages);
        return Counts {
            message_count: messages.len(),
            node_count: metrics.node_count,
            edge_count: metrics.edge_count,
            total_steps: messages.iter().map(|m| m.step).max().unwrap_or(0),
            main_agent_steps: messages.len(),
            annotation_count: messages.len(),
        };
    }
    let nodes = &session.workflow.nodes;
    let graph = super::graph::metrics(session, GraphMode::Edges);
    Counts {
        message_count: nodes.len(),
        node_count: graph.node_count,
        edge_count: graph.edge_count,
        total_steps: nodes.len().saturating_sub(1),
        main_agent_steps: nodes
            .iter()
            .filter(|n| session.records[n.record].is_sidechain != Some(true))
            .count(),
        annotation_count: annotations(session, false, Branch::All).total,
    }
}
