//! `GET /api/graph/{id}/diagnostics`: what loading found and did.

use serde::Serialize;

use crate::diagnostics::{Diagnostics, DiagnosticsSummary};
use crate::pipeline::session::Session;

/// The diagnostics body: the session id, the counts, then the details.
#[derive(Debug, Serialize)]
pub struct DiagnosticsBody<'a> {
    /// The main log's `sessionId`.
    pub session_id: Option<&'a str>,
    /// Records read and kept.
    pub records: RecordCounts,
    /// Counts of each kind of finding.
    pub summary: DiagnosticsSummary,
    /// The details, with samples.
    #[serde(flatten)]
    pub details: &'a Diagnostics,
}

/// How many records were read and how many the views use. An AutoGen log's records are
/// its messages, each one unit of the views; its workflow is empty (its graph is the
/// graph view's).
#[derive(Debug, Serialize)]
pub struct RecordCounts {
    /// Records read from the files that take part.
    pub read: usize,
    /// Records left after dedup.
    pub kept: usize,
    /// Items (units of the views) derived from them.
    pub items: usize,
    /// Workflow nodes.
    pub nodes: usize,
    /// Workflow edges.
    pub edges: usize,
}

/// Builds the body.
pub fn diagnostics(session: &Session) -> DiagnosticsBody<'_> {
    DiagnosticsBody {
        session_id: session.session_id.as_deref(),
        records: RecordCounts::of(session),
        summary: session.diagnostics.summary(),
        details: &session.diagnostics,
    }
}

impl RecordCounts {
    /// The counts of `session`.
    fn of(session: &Session) -> RecordCounts {
        let workflow = (session.workflow.nodes.len(), session.workflow.edges.len());
        if let Some(messages) = &session.autogen {
            return RecordCounts {
                read: messages.len(),
                kept: messages.len(),
                items: messages.len(),
                nodes: workflow.0,
                edges: workflow.1,
            };
        }
        let included = |i: usize| session.files[session.records[i].pos.file as usize].included;
        let read = (0..session.records.len()).filter(|&i| included(i)).count();
        let kept = (0..session.records.len())
            .filter(|&i| included(i) && session.dedup.is_kept(i))
            .count();
        RecordCounts {
            read,
            kept,
            items: session.items.len(),
            nodes: workflow.0,
            edges: workflow.1,
        }
    }
}
