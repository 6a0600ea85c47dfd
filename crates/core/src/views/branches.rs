//! `GET /api/graph/{id}/branches` and `GET /api/graph/{id}/context?leaf=`: the session as a
//! tree (branch points, the active path) and the context a model sees at a leaf.

use serde::Serialize;

use super::context::{context, ContextMessage};
use crate::pipeline::session::Session;

/// `{current_leaf, active_path_length, abandoned_records, forks, total}`.
#[derive(Debug, Serialize)]
pub struct BranchesBody<'a> {
    /// The current leaf's id (the last record written to the main log).
    pub current_leaf: Option<&'a str>,
    /// Units from the root to the current leaf.
    pub active_path_length: usize,
    /// Records inside abandoned branches (kept in every view; `?branch=active` leaves them out).
    pub abandoned_records: usize,
    /// The branch points, in session order.
    pub forks: Vec<ForkJson<'a>>,
    /// Number of branch points.
    pub total: usize,
}

/// A branch point.
#[derive(Debug, Serialize)]
pub struct ForkJson<'a> {
    /// The id of the record that branches (a turn's last record).
    pub id: &'a str,
    /// Its timestamp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<&'a str>,
    /// Its alternatives.
    pub children: Vec<ForkChildJson<'a>>,
}

/// One alternative.
#[derive(Debug, Serialize)]
pub struct ForkChildJson<'a> {
    /// The id of its first record.
    pub id: &'a str,
    /// The id of the latest leaf below it.
    pub leaf: &'a str,
    /// Records in its subtree.
    pub size: usize,
    /// When it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_timestamp: Option<&'a str>,
    /// Whether it is the active alternative.
    pub active: bool,
}

fn first_id(session: &Session, u: usize) -> &str {
    let r = &session.records[session.units[u].records[0]];
    r.uuid.as_deref().unwrap_or_default()
}

fn last_id(session: &Session, u: usize) -> &str {
    let last = *session.units[u]
        .records
        .last()
        .unwrap_or(&session.units[u].records[0]);
    session.records[last].uuid.as_deref().unwrap_or_default()
}

/// Builds the branches body.
pub fn branches(session: &Session) -> BranchesBody<'_> {
    let tree = &session.tree;
    let forks: Vec<ForkJson> = tree
        .forks
        .iter()
        .map(|f| ForkJson {
            id: last_id(session, f.unit),
            timestamp: session.records[session.units[f.unit].records[0]]
                .timestamp
                .as_deref(),
            children: f
                .children
                .iter()
                .map(|c| ForkChildJson {
                    id: first_id(session, c.unit),
                    leaf: last_id(session, c.leaf),
                    size: c.size,
                    first_timestamp: session.records[session.units[c.unit].records[0]]
                        .timestamp
                        .as_deref(),
                    active: c.active,
                })
                .collect(),
        })
        .collect();
    let abandoned_records = session
        .units
        .iter()
        .enumerate()
        .filter(|(u, _)| tree.abandoned[*u])
        .map(|(_, unit)| unit.records.len())
        .sum();
    BranchesBody {
        current_leaf: tree.leaf.map(|u| last_id(session, u)),
        active_path_length: tree.active_path.len(),
        abandoned_records,
        total: forks.len(),
        forks,
    }
}

/// `{leaf, messages, total}`.
#[derive(Debug, Serialize)]
pub struct ContextBody<'a> {
    /// The leaf the context was built at.
    pub leaf: Option<&'a str>,
    /// The messages, oldest first.
    pub messages: Vec<ContextMessage<'a>>,
    /// Number of messages.
    pub total: usize,
}

/// Why a context could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// No record of the session has this id.
    #[error("no entry with id '{0}' in this session")]
    UnknownLeaf(String),
}

/// The context at the record `leaf` (default: the current leaf).
pub fn context_body<'a>(session: &'a Session, leaf: Option<&str>) -> Result<ContextBody<'a>, ContextError> {
    let unit = match leaf {
        None => session.tree.leaf,
        Some(id) => Some(
            session
                .records
                .iter()
                .enumerate()
                .find(|(_, r)| r.uuid.as_deref() == Some(id))
                .and_then(|(i, _)| session.unit_of_record[i])
                .ok_or_else(|| ContextError::UnknownLeaf(id.to_owned()))?,
        ),
    };
    let messages = unit.map(|u| context(session, u)).unwrap_or_default();
    Ok(ContextBody {
        leaf: unit.map(|u| last_id(session, u)),
        total: messages.len(),
        messages,
    })
}
