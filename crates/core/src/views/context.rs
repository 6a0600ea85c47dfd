//! The context a model sees at a leaf of the session tree: the path from the root to the
//! leaf, as the messages a model would be sent, cut at the latest compaction on it.

use serde::Serialize;

use crate::formats::claude_code::records::{Block, RecordKind};
use crate::json::literals::Text;
use crate::pipeline::classify::{self, prompt_text};
use crate::pipeline::items::ItemKind;
use crate::pipeline::session::Session;

/// One message of a model's context.
#[derive(Debug, Clone, Serialize)]
pub struct ContextMessage<'a> {
    /// The record (or a turn's first record).
    pub id: &'a str,
    /// `user`, `assistant`, `toolResult`, `compactionSummary`, `branchSummary`, `custom`
    /// or `bashExecution`.
    pub role: &'static str,
    /// The text.
    pub text: Text<'a>,
    /// When.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<&'a str>,
    /// An assistant message's tool calls: `[{id, name}]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRef<'a>>,
    /// The calls a tool result answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_call_ids: Vec<&'a str>,
    /// A failed tool result.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Context injected by the agent rather than typed (Claude Code's `isMeta`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub meta: bool,
}

/// A tool call named in an assistant message.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCallRef<'a> {
    /// `tool_use` id.
    pub id: &'a str,
    /// Tool name.
    pub name: &'a str,
}

/// The messages a model would have in context at `leaf` (a unit): the path from the root to
/// the leaf, cut at the latest compaction on it. A Claude Code compaction keeps its summary
/// and what follows; a pi compaction keeps its summary, then the path from its first kept
/// entry, then what follows. A sub-agent's context starts at its own first record.
pub fn context(session: &Session, leaf: usize) -> Vec<ContextMessage<'_>> {
    let failed = failed_results(session);
    let mut path = Vec::new();
    let mut seen = vec![false; session.units.len()];
    let mut at = Some(leaf);
    while let Some(u) = at {
        if std::mem::replace(&mut seen[u], true) {
            break;
        }
        path.push(u);
        at = if session.units[u].parent_is_spawn {
            None
        } else {
            session.units[u].parent
        };
    }
    path.reverse();

    let first_record = |u: usize| &session.records[session.units[u].records[0]];
    let mut out = Vec::new();
    let mut start = 0;
    if let Some(cut) = path.iter().rposition(|&u| first_record(u).is_compact_boundary()) {
        let boundary = first_record(path[cut]);
        match boundary.first_kept() {
            Some(kept) => {
                // pi: the summary, the kept entries before the compaction, then the rest.
                out.push(summary_message(
                    session,
                    path[cut],
                    boundary.system_content().map_or_else(Text::new, Text::json),
                ));
                let kept_at = path[..cut].iter().position(|&u| {
                    session.units[u]
                        .records
                        .iter()
                        .any(|&r| session.records[r].uuid.as_deref() == Some(kept))
                });
                for &u in kept_at.map_or(&path[..0], |k| &path[k..cut]) {
                    out.extend(unit_message(session, u, &failed));
                }
                start = cut + 1;
            }
            None => {
                // Claude Code: the summary record follows the boundary; history before is gone.
                let summary = path[cut + 1..]
                    .iter()
                    .position(|&u| first_record(u).is_compact_summary)
                    .map(|i| cut + 1 + i);
                let text = summary.map_or_else(
                    || {
                        boundary
                            .system_content()
                            .map_or_else(|| Text::from("Context compacted"), Text::json)
                    },
                    |s| prompt_text(first_record(path[s])),
                );
                out.push(summary_message(session, path[cut], text));
                start = summary.map_or(cut + 1, |s| s + 1);
            }
        }
    }
    for &u in &path[start..] {
        out.extend(unit_message(session, u, &failed));
    }
    out
}

/// The message that stands for a compaction: its summary, under the boundary's id.
fn summary_message<'a>(session: &'a Session, u: usize, text: Text<'a>) -> ContextMessage<'a> {
    let r = &session.records[session.units[u].records[0]];
    ContextMessage {
        id: r.uuid.as_deref().unwrap_or_default(),
        role: "compactionSummary",
        text,
        timestamp: r.timestamp.as_deref(),
        tool_calls: Vec::new(),
        tool_call_ids: Vec::new(),
        is_error: false,
        meta: false,
    }
}

/// The context message of one unit, if it is one.
fn unit_message<'a>(session: &'a Session, u: usize, failed: &[bool]) -> Option<ContextMessage<'a>> {
    let unit = &session.units[u];
    let r = &session.records[unit.records[0]];
    let mut m = ContextMessage {
        id: r.uuid.as_deref().unwrap_or_default(),
        role: "user",
        text: Text::default(),
        timestamp: r.timestamp.as_deref(),
        tool_calls: Vec::new(),
        tool_call_ids: Vec::new(),
        is_error: false,
        meta: false,
    };
    if let Some(t) = unit.turn {
        let turn = &session.turns[t];
        m.role = "assistant";
        m.text = turn.joined_texts(&session.records);
        m.tool_calls = turn
            .tool_uses(&session.records)
            .into_iter()
            .map(|(_, _, c)| ToolCallRef {
                id: &c.id,
                name: &c.name,
            })
            .collect();
        return Some(m);
    }
    match &r.kind {
        RecordKind::User if r.is_compact_summary => return None,
        RecordKind::User if r.has_tool_result() => {
            m.role = "toolResult";
            m.text = classify::user_text(r);
            m.is_error = failed[u];
            m.tool_call_ids = r
                .blocks()
                .iter()
                .filter_map(|b| match b {
                    Block::ToolResult(t) => t.tool_use_id.as_deref(),
                    _ => None,
                })
                .collect();
        }
        RecordKind::User => {
            m.text = classify::user_text(r);
            m.meta = r.is_meta;
        }
        RecordKind::System => {
            m.role = match r.subtype() {
                Some("branch_summary") => "branchSummary",
                Some("custom_message") => "custom",
                Some("bash_execution") if !r.is_meta => "bashExecution",
                Some("compaction_summary") => "compactionSummary",
                // Other system records (API errors, hooks) are not sent to the model.
                _ => return None,
            };
            m.text = r.system_content().map_or_else(Text::new, Text::json);
        }
        _ => return None,
    }
    Some(m)
}

/// For each unit: true when it is a tool result the build found failed.
fn failed_results(session: &Session) -> Vec<bool> {
    let mut failed = vec![false; session.units.len()];
    for item in &session.items {
        if let ItemKind::ToolResult { failed: true, .. } = item.kind {
            failed[item.unit] = true;
        }
    }
    failed
}
