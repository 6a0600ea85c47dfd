//! Who talks to whom in a Claude Code or pi session: one interaction per workflow node that
//! addresses another party, inferred from the one order and grouping every view uses
//! (`docs/spec/graph-nodes-edges.md`, "Potential Edge Inference", made real).
//!
//! The parties are the graph's nodes: `user`, `assistant`, `agent-<id>` (a sub-agent),
//! `system` and `system - context compact`. Each workflow node (a message, at its step)
//! gives at most one interaction:
//!
//! | node | from | to | intent (message type) |
//! |---|---|---|---|
//! | a prompt (main lane) | `user` | `assistant` | `delegation` (`delegation`) |
//! | a response with text (main lane) | `assistant` | `user` | `information_response` (`response`) |
//! | a tool call answered by a result | its sender | `user` (the harness that runs tools) | `coordination` (`action`) |
//! | a Task call whose sub-agent is loaded | its sender | `agent-<id>` | `delegation` (`delegation`) |
//! | a tool result (not a Task's with its sub-agent loaded) | `user` | the call's sender | `information_response` (`observation`) |
//! | a sub-agent's last node | `agent-<id>` | the Task call's sender | `information_response` (`response`) |
//! | a compaction | `system - context compact` | `assistant` | `coordination` (`system`) |
//! | a `system` record's notice (main lane) | `system` | `user` | `information_response` (`system`) |
//!
//! Nothing else addresses anyone: thinking, a sub-agent's own prompt (the Task call is its
//! delegation), its responses before the last (its last one is what returns), a Task's own
//! result when its sub-agent is loaded (the sub-agent's last node returns instead), and a
//! call nobody answered. An interaction never goes from a party to itself: a notice written
//! as a user record (a slash command, local command output, a bash notification) is sent by
//! `user` and gives none.

use std::borrow::Cow;

use foldhash::{HashMap, HashMapExt};
use rayon::prelude::*;

use crate::json::literals::Preview;
use crate::pipeline::items::ItemKind;
use crate::pipeline::session::Session;
use crate::pipeline::workflow::{preview, Node, NodeType};

/// One message from one party to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction<'a> {
    /// The node's step (0-based), also the message's id.
    pub step: usize,
    /// The node's timestamp.
    pub timestamp: Option<&'a str>,
    /// Who speaks.
    pub source: Cow<'a, str>,
    /// Who is addressed.
    pub target: Cow<'a, str>,
    /// `delegation`, `coordination` or `information_response`.
    pub intent: &'static str,
    /// `delegation`, `action`, `observation`, `response` or `system`.
    pub message_type: &'static str,
    /// The first 100 characters of the node's content.
    pub content_preview: Preview,
}

/// Whether [`interactions`] cuts each node's content for its preview (the graph shows them;
/// its metrics only count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Previews {
    /// Each interaction's `content_preview` is the node's content cut.
    Made,
    /// Every `content_preview` is empty.
    Skipped,
}

/// Every interaction of `session`, in step order (see the module's table); `senders` is
/// the sender of each workflow node ([`super::graph::senders`]).
pub fn interactions<'a>(
    session: &'a Session,
    senders: &[String],
    previews: Previews,
) -> Vec<Interaction<'a>> {
    let returns = returns(session);
    let spawned = spawned_lanes(session);
    let w = &session.workflow;
    let mut out = Vec::new();
    // The node of each interaction, for its preview.
    let mut nodes = Vec::new();
    for (n, node) in w.nodes.iter().enumerate() {
        let sender = senders[n].as_str();
        let addressed = match returns.get(&n) {
            Some(&call) => Some((
                Cow::Owned(sender.to_owned()),
                Cow::Owned(senders[call].clone()),
                ("information_response", "response"),
            )),
            None => addressed(session, node, sender, senders, &spawned),
        };
        let Some((source, target, (intent, message_type))) = addressed else {
            continue;
        };
        if source == target {
            continue;
        }
        out.push(Interaction {
            step: node.step,
            timestamp: session.records[node.time_record].timestamp.as_deref(),
            source,
            target,
            intent,
            message_type,
            content_preview: Preview::of_str(""),
        });
        nodes.push(n);
    }
    if previews == Previews::Made {
        // Most of the work: each node's content, cut. In parallel, each into its own slot.
        out.par_iter_mut().zip(nodes).for_each(|(interaction, n)| {
            interaction.content_preview = preview(&session.node_content(&w.nodes[n]));
        });
    }
    out
}

type Addressed<'a> = (Cow<'a, str>, Cow<'a, str>, (&'static str, &'static str));

/// Whom node `node` (sent by `sender`) addresses, by the module's table (returns aside).
fn addressed<'a>(
    session: &'a Session,
    node: &Node,
    sender: &str,
    senders: &[String],
    spawned: &HashMap<&str, &'a str>,
) -> Option<Addressed<'a>> {
    let main = session.lanes[node.lane].agent.is_none();
    let from: Cow<'a, str> = Cow::Owned(sender.to_owned());
    match node.node_type {
        NodeType::UserInput if main => Some((from, "assistant".into(), ("delegation", "delegation"))),
        NodeType::AgentReasoning if main && has_text(session, node) => {
            Some((from, "user".into(), ("information_response", "response")))
        }
        NodeType::ToolCall => {
            let id = tool_use_id(session, node)?;
            if let Some(&lane) = spawned.get(id) {
                return Some((from, Cow::Borrowed(lane), ("delegation", "delegation")));
            }
            session.workflow.result_node.contains_key(id).then_some((
                from,
                "user".into(),
                ("coordination", "action"),
            ))
        }
        NodeType::ResultSuccess | NodeType::ResultFailure => {
            let id = session.records[node.record].first_tool_use_id()?;
            if spawned.contains_key(id) {
                return None;
            }
            let &call = session.workflow.call_node.get(id)?;
            let caller = Cow::Owned(senders[call].clone());
            Some(("user".into(), caller, ("information_response", "observation")))
        }
        NodeType::SystemNotice => match session.items[node.item].kind {
            ItemKind::Compact { .. } => Some((from, "assistant".into(), ("coordination", "system"))),
            _ if main => Some((from, "user".into(), ("information_response", "system"))),
            _ => None,
        },
        _ => None,
    }
}

/// For each sub-agent lane tied to a Task call: its last node -> that call's node.
fn returns(session: &Session) -> HashMap<usize, usize> {
    let w = &session.workflow;
    let mut last: Vec<Option<usize>> = vec![None; session.lanes.len()];
    for (n, node) in w.nodes.iter().enumerate() {
        last[node.lane] = Some(n);
    }
    let mut out = HashMap::new();
    for (l, lane) in session.lanes.iter().enumerate() {
        let agent = lane.agent.map(|a| &session.agents[a]);
        let call = agent
            .and_then(|a| a.tool_use_id.as_deref())
            .and_then(|id| w.call_node.get(id));
        if let (Some(&call), Some(last)) = (call, last[l]) {
            out.insert(last, call);
        }
    }
    out
}

/// The lane id of each sub-agent with nodes, by the `tool_use` id of the Task call that
/// spawned it.
fn spawned_lanes(session: &Session) -> HashMap<&str, &str> {
    let mut has_nodes = vec![false; session.lanes.len()];
    for node in &session.workflow.nodes {
        has_nodes[node.lane] = true;
    }
    session
        .lanes
        .iter()
        .enumerate()
        .filter(|&(l, _)| has_nodes[l])
        .filter_map(|(_, lane)| {
            let id = session.agents[lane.agent?].tool_use_id.as_deref()?;
            Some((id, lane.id.as_str()))
        })
        .collect()
}

/// The `tool_use` id of a tool call node.
fn tool_use_id<'a>(session: &'a Session, node: &Node) -> Option<&'a str> {
    let t = node.tool?;
    crate::pipeline::subagents::tool_use_at(&session.records, (t.record, t.block)).map(|u| u.id.as_str())
}

/// True when the turn behind a reasoning node has text (not thinking alone).
fn has_text(session: &Session, node: &Node) -> bool {
    match session.items[node.item].kind {
        ItemKind::Turn(t) => !session.turns[t].texts(&session.records).is_empty(),
        _ => false,
    }
}
