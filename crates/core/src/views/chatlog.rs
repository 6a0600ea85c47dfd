//! `GET /api/graph/{id}/chatlog`: the ordered chat log that CommuGraph's chat panel derives
//! in the browser from the workflow, computed here from the same nodes.

use crate::formats::claude_code::records::RawJson;
use foldhash::{HashMap, HashMapExt};
use serde::Serialize;

use super::body::{write_elements, BodyWriter};
use super::workflow::{lane_id, node_compaction, node_images, node_label, node_tool_name};
use crate::json::literals::Text;
use crate::pipeline::classify::ImageRef;
use crate::pipeline::session::Session;
use crate::pipeline::workflow::{NodeType, Workflow};

/// `{"messages": [...], "total": n}`.
#[derive(Debug, Serialize)]
pub struct ChatLogBody<'a> {
    /// The messages, in session order.
    pub messages: Messages<'a>,
    /// Number of messages.
    pub total: usize,
}

/// The message list, built message by message as it is serialised.
#[derive(Debug)]
pub struct Messages<'a> {
    session: &'a Session,
    w: &'a Workflow,
    include_subagents: bool,
}

impl<'a> Messages<'a> {
    /// Each node's number in its lane (`#n` in the main lane, `sub-<id>-<n>` in a
    /// sub-agent's), counted over every node whether or not it is shown.
    fn numbers(&self) -> Vec<usize> {
        let mut next: HashMap<usize, usize> = HashMap::new();
        self.w
            .nodes
            .iter()
            .map(|node| {
                let n = next.entry(node.lane).or_default();
                *n += 1;
                *n
            })
            .collect()
    }

    /// The message of node `i` (numbered `number` in its lane), or `None` when it is not
    /// shown.
    fn message(&self, i: usize, number: usize) -> Option<ChatMessage<'a>> {
        let (session, node) = (self.session, &self.w.nodes[i]);
        let agent = session.lanes[node.lane].agent.map(|a| &session.agents[a]);
        if agent.is_some() && !self.include_subagents {
            return None;
        }
        let display = match agent {
            None => format!("#{number}"),
            Some(a) => {
                let short: String = a.agent_id.chars().take(4).collect();
                format!("sub-{short}-{number}")
            }
        };
        let label = node_label(session, node);
        let sender = match (node.node_type, agent) {
            (NodeType::UserInput, _) => "User Input".to_owned(),
            (_, None) => format!("Main Agent - {label}"),
            (_, Some(a)) => format!(
                "{}-{} - {label}",
                a.subagent_type.as_deref().unwrap_or("Agent"),
                a.agent_id
            ),
        };
        let content = session.node_content(node);
        let content = if content.is_empty() {
            Text::from(label)
        } else {
            content
        };
        let (is_context_compact, compact_summary, compact_metadata) = node_compaction(session, node);
        Some(ChatMessage {
            step_index: node.step,
            display_step_label: display,
            sender,
            receiver: None,
            content,
            timestamp: session.records[node.time_record].timestamp.as_deref(),
            node_type: node.node_type.as_str(),
            lane_id: lane_id(session, node.lane),
            tool_name: node_tool_name(session, node),
            is_context_compact,
            compact_summary,
            compact_metadata,
            images: node_images(session, node),
            id: &node.id,
        })
    }
}

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let numbers = self.numbers();
        s.collect_seq((0..numbers.len()).filter_map(|i| self.message(i, numbers[i])))
    }
}

/// Writes `body` as serialising it would, with the messages rendered in parallel.
pub fn write_parallel(body: &ChatLogBody<'_>, out: &mut impl BodyWriter) -> std::io::Result<()> {
    let numbers = body.messages.numbers();
    out.write_all(br#"{"messages":["#)?;
    write_elements(out, numbers.len(), |i| body.messages.message(i, numbers[i]))?;
    write!(out, r#"],"total":{}}}"#, body.total)
}

/// One chat-log entry (keys in the reference's order, then `id`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage<'a> {
    step_index: usize,
    display_step_label: String,
    sender: String,
    receiver: Option<()>,
    content: Text<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    node_type: &'static str,
    lane_id: &'a str,
    /// The tool of a call, or of the call a result answers (CommuGraph's chat log since
    /// f28ce03).
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_context_compact: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_summary: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_metadata: Option<&'a RawJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<ImageRef<'a>>,
    /// The workflow node this entry shows.
    id: &'a str,
}

/// Builds the chat log: the main lane's nodes, or every node with `include_subagents`.
pub fn chatlog<'a>(session: &'a Session, w: &'a Workflow, include_subagents: bool) -> ChatLogBody<'a> {
    let total = w
        .nodes
        .iter()
        .filter(|n| include_subagents || session.lanes[n.lane].agent.is_none())
        .count();
    ChatLogBody {
        messages: Messages {
            session,
            w,
            include_subagents,
        },
        total,
    }
}
