//! Session trees (`docs/spec/claude-code-dag.md`, `docs/spec/session-tree-format.md`): branch points,
//! the active path, abandoned branches, and the context a model sees at a leaf.
//!
//! Branches come from regenerating a response, editing a prompt, rewinding, or pi's `/tree`:
//! a unit whose conversation continues in two or more ways. Not every second child is a
//! branch: a turn's tool results and the sub-agents its Task calls spawn belong to the
//! turn, and a compaction's summary to its boundary; only the other children are
//! *alternatives*.
//!
//! The current leaf is the last record written to the main log (pi: "the last entry is
//! always the current leaf"); the active path runs from it to the root. At a branch point
//! the active child is the one on the active path; off that path, the child marked
//! `is_active`, else the last written. The other alternatives start abandoned branches:
//! they stay in every view (nothing is lost) and are left out with `?branch=active`.

use serde::Serialize;

use super::classify::{self, prompt_text};
use super::session::{Session, Unit};
use crate::formats::claude_code::records::{Block, Record, RecordKind};
use crate::json::literals::Text;

/// The tree analysis of a session.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// The current leaf unit.
    pub leaf: Option<usize>,
    /// Units from the root to the current leaf.
    pub active_path: Vec<usize>,
    /// The branch points, in session order.
    pub forks: Vec<Fork>,
    /// For each unit: inside an abandoned branch.
    pub abandoned: Vec<bool>,
}

/// A branch point.
#[derive(Debug, Clone)]
pub struct Fork {
    /// The unit that branches.
    pub unit: usize,
    /// Its alternatives, in session order.
    pub children: Vec<ForkChild>,
}

/// One alternative at a branch point.
#[derive(Debug, Clone)]
pub struct ForkChild {
    /// The unit that starts it.
    pub unit: usize,
    /// The latest leaf below it.
    pub leaf: usize,
    /// Records in its subtree.
    pub size: usize,
    /// Whether it is the active one.
    pub active: bool,
}

impl Tree {
    /// Analyses a session's units: `units`, made of `records`, in their order `sequence`
    /// (parents before children). Takes the parts rather than the session so that it can
    /// be built beside the workflow.
    pub fn of(records: &[Record], units: &[Unit], sequence: &[usize]) -> Tree {
        let n = units.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &u in sequence {
            if let Some(p) = units[u].parent {
                children[p].push(u);
            }
        }
        let first_pos = |u: usize| records[units[u].records[0]].pos;

        // The current leaf: the last record of the main log (pi: the last entry).
        let leaf = units
            .iter()
            .enumerate()
            .filter(|(_, unit)| {
                let r = &records[unit.records[0]];
                r.pos.file == 0 && r.is_sidechain != Some(true)
            })
            .max_by_key(|(_, unit)| unit.records.iter().map(|&r| records[r].pos).max())
            .map(|(u, _)| u);
        let mut active_path = Vec::new();
        let mut on_path = vec![false; n];
        let mut at = leaf;
        while let Some(u) = at {
            if on_path[u] {
                break;
            }
            on_path[u] = true;
            active_path.push(u);
            at = units[u].parent;
        }
        active_path.reverse();

        // Subtree sizes and latest leaves, children before parents.
        let mut size = vec![0usize; n];
        let mut latest = (0..n).collect::<Vec<_>>();
        for &u in sequence.iter().rev() {
            size[u] += units[u].records.len();
            if let Some(p) = units[u].parent {
                size[p] += size[u];
                let candidate = latest[u];
                if latest[p] == p || first_pos(candidate) > first_pos(latest[p]) {
                    latest[p] = candidate;
                }
            }
        }

        let mut forks = Vec::new();
        let mut inactive_start = vec![false; n];
        for &u in sequence {
            let alternatives: Vec<usize> = children[u]
                .iter()
                .copied()
                .filter(|&c| is_alternative(records, units, c))
                .collect();
            if alternatives.len() < 2 {
                continue;
            }
            let active = alternatives
                .iter()
                .copied()
                .find(|&c| on_path[c])
                .or_else(|| {
                    alternatives
                        .iter()
                        .copied()
                        .find(|&c| records[units[c].records[0]].is_active == Some(true))
                })
                .or_else(|| alternatives.iter().copied().max_by_key(|&c| first_pos(c)));
            for &c in &alternatives {
                inactive_start[c] = Some(c) != active;
            }
            forks.push(Fork {
                unit: u,
                children: alternatives
                    .iter()
                    .map(|&c| ForkChild {
                        unit: c,
                        leaf: latest[c],
                        size: size[c],
                        active: Some(c) == active,
                    })
                    .collect(),
            });
        }
        let mut abandoned = vec![false; n];
        for &u in sequence {
            let parent_abandoned = units[u].parent.is_some_and(|p| abandoned[p]);
            abandoned[u] = parent_abandoned || inactive_start[u];
        }
        Tree {
            leaf,
            active_path,
            forks,
            abandoned,
        }
    }
}

/// True when unit `c` continues the conversation in its own way (it is not a tool result,
/// a spawned sub-agent, or a compaction summary, which belong to their parent).
fn is_alternative(records: &[Record], units: &[Unit], c: usize) -> bool {
    let unit = &units[c];
    if unit.parent_is_spawn {
        return false;
    }
    let r = &records[unit.records[0]];
    !(r.kind == RecordKind::User && (r.has_tool_result() || r.is_compact_summary))
}

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
                    out.extend(unit_message(session, u));
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
        out.extend(unit_message(session, u));
    }
    out
}

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
fn unit_message(session: &Session, u: usize) -> Option<ContextMessage<'_>> {
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
            m.is_error = classify::tool_result_failed(r);
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
