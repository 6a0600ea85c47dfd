//! `GET /api/graph/{id}/chatlog`: the ordered chat log that CommuGraph's chat panel derives
//! in the browser from the workflow, computed here from the same nodes.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::core::classify::ImageRef;
use crate::core::session::Session;
use crate::core::views::workflow::{lane_id, node_compaction, node_images, node_label};
use crate::core::workflow::{NodeType, Workflow};

/// `{"messages": [...], "total": n}`.
#[derive(Debug, Serialize)]
pub struct ChatLogBody<'a> {
    /// The messages, in step order.
    pub messages: Vec<ChatMessage<'a>>,
    /// Number of messages.
    pub total: usize,
}

/// One chat-log entry (keys in the reference's order, then `id`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage<'a> {
    step_index: usize,
    display_step_label: String,
    sender: String,
    receiver: Option<()>,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    node_type: &'static str,
    lane_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_context_compact: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_metadata: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<ImageRef<'a>>,
    /// The workflow node this entry shows.
    id: &'a str,
}

/// Builds the chat log: the main lane's nodes, or every node with `include_subagents`.
pub fn chatlog<'a>(session: &'a Session, w: &'a Workflow, include_subagents: bool) -> ChatLogBody<'a> {
    let mut main_seq = 0usize;
    let mut agent_seq: HashMap<usize, usize> = HashMap::new();
    let mut messages = Vec::new();
    for node in &w.nodes {
        let lane = &session.lanes[node.lane];
        let agent = lane.agent.map(|a| &session.agents[a]);
        let label = node_label(session, node);
        let display = match agent {
            None => {
                main_seq += 1;
                format!("#{main_seq}")
            }
            Some(a) => {
                let seq = agent_seq.entry(node.lane).or_default();
                *seq += 1;
                let short: String = a.agent_id.chars().take(4).collect();
                format!("sub-{short}-{seq}")
            }
        };
        if agent.is_some() && !include_subagents {
            continue;
        }
        let sender = match (node.node_type, agent) {
            (NodeType::UserInput, _) => "User Input".to_owned(),
            (_, None) => format!("Main Agent - {label}"),
            (_, Some(a)) => format!(
                "{}-{} - {label}",
                a.subagent_type.as_deref().unwrap_or("Agent"),
                a.agent_id
            ),
        };
        let content = if !node.content.is_empty() {
            node.content.as_str()
        } else {
            label
        };
        let (is_context_compact, compact_summary, compact_metadata) = node_compaction(session, node);
        messages.push(ChatMessage {
            step_index: node.step,
            display_step_label: display,
            sender,
            receiver: None,
            content,
            timestamp: session.records[node.time_record].timestamp.as_deref(),
            node_type: node.node_type.as_str(),
            lane_id: lane_id(session, node.lane),
            is_context_compact,
            compact_summary,
            compact_metadata,
            images: node_images(session, node),
            id: &node.id,
        });
    }
    ChatLogBody {
        total: messages.len(),
        messages,
    }
}
