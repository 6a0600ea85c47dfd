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

/// How many records were read and how many the views use.
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
    let included = |i: usize| session.files[session.records[i].pos.file as usize].included;
    let read = (0..session.records.len()).filter(|&i| included(i)).count();
    let kept = (0..session.records.len())
        .filter(|&i| included(i) && session.dedup.is_kept(i))
        .count();
    DiagnosticsBody {
        session_id: session.session_id.as_deref(),
        records: RecordCounts {
            read,
            kept,
            items: session.items.len(),
            nodes: session.workflow.nodes.len(),
            edges: session.workflow.edges.len(),
        },
        summary: session.diagnostics.summary(),
        details: &session.diagnostics,
    }
}
