//! `GET /api/graph/{id}/annotations`: the labeling units.
//!
//! One unit per item of the main chain (or of every lane with `include_sidechains`), in
//! session order: `user_turn` for prompts that are not blank (or carry an image),
//! `assistant_turn` for model responses, `system_turn` for compactions and system notices.
//! The dialog body ([`DialogBody`]) is the same units under the key `records`.

use std::borrow::Cow;

use crate::json::literals::Text;

use foldhash::{HashMap, HashMapExt, HashSet};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::formats::claude_code::records::{Block, RawJson, Record, RecordKind};
use crate::pipeline::classify::{self, ImageRef};
use crate::pipeline::items::ItemKind;
use crate::pipeline::session::{Branch, Session};
use crate::pipeline::workflow::compact_text;

/// The annotations body.
#[derive(Debug, Serialize)]
pub struct AnnotationsBody<'a> {
    /// The units, in session order.
    pub annotations: Vec<AnnotationUnit<'a>>,
    /// Number of units.
    pub total: usize,
    /// Number of `user_turn` units.
    pub user_turn_count: usize,
    /// Number of `assistant_turn` units.
    pub assistant_turn_count: usize,
    /// Number of `system_turn` units.
    pub system_turn_count: usize,
}

/// One annotation unit.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum AnnotationUnit<'a> {
    /// A prompt.
    User(UserTurn<'a>),
    /// A model response.
    Assistant(AssistantTurn<'a>),
    /// A compaction or system notice.
    System(SystemTurn<'a>),
    /// A message of an AutoGen log.
    Message(MessageUnit<'a>),
}

impl<'a> AnnotationUnit<'a> {
    /// The unit's id (what labels are keyed by, with the session's id).
    pub fn event_id(&self) -> &str {
        match self {
            AnnotationUnit::User(u) => &u.event_id,
            AnnotationUnit::Assistant(u) => &u.event_id,
            AnnotationUnit::System(u) => &u.event_id,
            AnnotationUnit::Message(u) => &u.event_id,
        }
    }

    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub fn unit_type(&self) -> &'static str {
        match self {
            AnnotationUnit::User(u) => u.unit_type,
            AnnotationUnit::Assistant(u) => u.unit_type,
            AnnotationUnit::System(u) => u.unit_type,
            AnnotationUnit::Message(u) => u.unit_type,
        }
    }

    fn labels_mut(&mut self) -> &mut ShownLabels<'a> {
        match self {
            AnnotationUnit::User(u) => &mut u.labels,
            AnnotationUnit::Assistant(u) => &mut u.labels,
            AnnotationUnit::System(u) => &mut u.labels,
            AnnotationUnit::Message(u) => &mut u.labels,
        }
    }

    /// The unit's text (`text_or_artifact_ref.text`; empty for a response without text):
    /// what an evidence quote must occur in.
    pub fn text(&self) -> Cow<'a, str> {
        match self {
            AnnotationUnit::User(u) => u.text_or_artifact_ref.text.to_text(),
            AnnotationUnit::Assistant(u) => u
                .text_or_artifact_ref
                .text
                .as_ref()
                .map_or(Cow::Borrowed(""), Text::to_text),
            AnnotationUnit::System(u) => u.text_or_artifact_ref.text.to_text(),
            AnnotationUnit::Message(u) => u.text_or_artifact_ref.text.to_text(),
        }
    }

    /// Who speaks: `human`, `assistant`, `agent-<id>` (a sub-agent, or the agent that
    /// delegated a sub-agent's prompt), `system`, or an AutoGen message's sender.
    pub fn actor_id(&self) -> &str {
        match self {
            AnnotationUnit::User(u) => &u.actor_id,
            AnnotationUnit::Assistant(u) => &u.actor_id,
            AnnotationUnit::System(u) => u.actor_id,
            AnnotationUnit::Message(u) => u.actor_id,
        }
    }

    /// `human`, `agent` or `system`.
    pub fn actor_type(&self) -> &'static str {
        match self {
            AnnotationUnit::User(u) => u.actor_type,
            AnnotationUnit::Assistant(u) => u.actor_type,
            AnnotationUnit::System(u) => u.actor_type,
            AnnotationUnit::Message(u) => u.actor_type,
        }
    }

    /// The timestamp as the log wrote it, if it has one.
    pub fn timestamp(&self) -> Option<&str> {
        match self {
            AnnotationUnit::User(u) => u.timestamp,
            AnnotationUnit::Assistant(u) => u.timestamp,
            AnnotationUnit::System(u) => u.timestamp,
            AnnotationUnit::Message(u) => Some(u.timestamp).filter(|t| !t.is_empty()),
        }
    }

    /// The tool calls the unit makes, each with the log's verdict as its `tool_summary`
    /// shows it (none for a unit without calls).
    pub fn tool_calls(&self) -> Vec<UnitToolCall<'_>> {
        match self {
            AnnotationUnit::Assistant(AssistantTurn {
                tool_summary: Some(summary),
                ..
            }) => summary
                .tool_calls
                .iter()
                .map(|c| UnitToolCall {
                    tool_name: Some(c.tool_name),
                    is_error: c.is_error,
                    started_agent: c.started_agent,
                })
                .collect(),
            AnnotationUnit::Message(MessageUnit {
                tool_summary: Some(summary),
                ..
            }) => summary
                .tool_calls
                .iter()
                .map(|c| UnitToolCall {
                    tool_name: c.tool_name,
                    is_error: c.is_error,
                    started_agent: false,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// True when the unit shows a failed tool call: one of its calls whose result the log
    /// marked as an error (`tool_summary.tool_calls[].is_error`), or an AutoGen tool result
    /// that failed (`is_error`).
    pub fn shows_failed_tool_call(&self) -> bool {
        let failed_result = matches!(self, AnnotationUnit::Message(m) if m.is_error);
        failed_result || self.tool_calls().iter().any(|c| c.is_error)
    }

    /// True when the unit delegates work to a sub-agent: a response calling a tool that
    /// starts one (Claude Code's `Task`, Codex's `spawn_agent`, Gemini CLI's
    /// `delegate_to_agent`), or any call that started one of the session's sub-agents (a
    /// Gemini CLI agent's call is named after the agent), or an AutoGen message of type
    /// `delegation` (a hand-off).
    pub fn delegates(&self) -> bool {
        match self {
            AnnotationUnit::Message(m) => m.message_type == "delegation",
            _ => self
                .tool_calls()
                .iter()
                .any(|c| c.started_agent || c.tool_name.is_some_and(|name| DELEGATING_TOOLS.contains(&name))),
        }
    }
}

/// The tools that start a sub-agent, whatever their result says: Claude Code's, Codex
/// CLI's and Gemini CLI's.
const DELEGATING_TOOLS: [&str; 3] = ["Task", "spawn_agent", "delegate_to_agent"];

/// One tool call of a unit (see [`AnnotationUnit::tool_calls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitToolCall<'s> {
    /// The tool's name (an AutoGen log may not give it).
    pub tool_name: Option<&'s str>,
    /// True when a result of the call is marked as an error.
    pub is_error: bool,
    /// True when the call started one of the session's sub-agents (linking tied the
    /// agent to it, by the id its result names or by time).
    pub started_agent: bool,
}

/// The labels each unit shows, by `event_id`: a JSON array of label records each (see
/// the server's `labels::consensus` for which).
pub type UnitLabels = HashMap<String, Box<RawValue>>;

/// A unit's `labels`: `[]`, or the JSON array the labeling side chose.
#[derive(Debug, Clone, Copy)]
pub struct ShownLabels<'a>(Option<&'a RawValue>);

impl ShownLabels<'_> {
    /// No labels (`[]`).
    pub const NONE: ShownLabels<'static> = ShownLabels(None);
}

impl Serialize for ShownLabels<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(raw) => raw.serialize(serializer),
            None => serializer.collect_seq(std::iter::empty::<()>()),
        }
    }
}

impl<'a> AnnotationsBody<'a> {
    /// The same units as the dialog body (`GET /api/graph/{id}/dialog`).
    pub fn as_dialog(&self) -> DialogBody<'_, 'a> {
        DialogBody(self)
    }

    /// Shows `labels` on the units they are for (units without any keep `[]`).
    pub fn attach_labels(&mut self, labels: &'a UnitLabels) {
        for unit in &mut self.annotations {
            if let Some(raw) = labels.get(unit.event_id()) {
                *unit.labels_mut() = ShownLabels(Some(raw));
            }
        }
    }
}

/// The dialog body: `{records, total, user_turn_count, assistant_turn_count,
/// system_turn_count}`, the annotations body with its units under `records` (CommuGraph's
/// "Dialog" view, which renamed the annotation view).
#[derive(Debug)]
pub struct DialogBody<'b, 'a>(&'b AnnotationsBody<'a>);

impl Serialize for DialogBody<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let body = self.0;
        let mut map = s.serialize_map(Some(5))?;
        map.serialize_entry("records", &body.annotations)?;
        map.serialize_entry("total", &body.total)?;
        map.serialize_entry("user_turn_count", &body.user_turn_count)?;
        map.serialize_entry("assistant_turn_count", &body.assistant_turn_count)?;
        map.serialize_entry("system_turn_count", &body.system_turn_count)?;
        map.end()
    }
}

/// The dialog body made from a rendered annotations body, sharing its bytes: the first
/// key renamed, nothing copied (a server keeps one body for both views). `None` when
/// `annotations` is not an annotations body.
pub fn dialog_of(annotations: &super::Body) -> Option<super::Body> {
    const ANNOTATIONS: &[u8] = br#"{"annotations":"#;
    let head = annotations
        .slices(0..ANNOTATIONS.len())
        .fold(Vec::new(), |mut head, b| {
            head.extend_from_slice(&b);
            head
        });
    if head != ANNOTATIONS {
        return None;
    }
    let mut out = super::ChunkWriter::new();
    std::io::Write::write_all(&mut out, br#"{"records":"#).ok()?;
    out.append_range(annotations, ANNOTATIONS.len()..annotations.len());
    Some(out.finish())
}

/// A unit of an AutoGen log: one message (`event_id` `M:<step>`, `session_id` the session's
/// as a Claude Code unit carries it: for AutoGen, the log's name without its extension),
/// a `user_turn` when a
/// human speaks (the sender is `user`, any case, the entry's role is user, or a
/// `UserProxyAgent` relays a human's input) and an `assistant_turn` otherwise, with whom it
/// addresses, its type and its intent. A tool call's unit says how each call went
/// (`tool_summary`, as a Claude Code turn's), a failed result's `is_error: true`.
#[derive(Debug, Serialize)]
pub struct MessageUnit<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    event_id: String,
    actor_id: &'a str,
    actor_type: &'static str,
    unit_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    receiver: Option<&'a str>,
    message_type: &'static str,
    intent: &'static str,
    source: MessageSource<'a>,
    timestamp: &'a str,
    text_or_artifact_ref: MessageText<'a>,
    labels: ShownLabels<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_summary: Option<MessageToolSummary<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    is_error: bool,
}

/// How each tool call of an AutoGen message went, in the shape of a Claude Code turn's
/// `tool_summary` (an id or a name the log does not give is left out).
#[derive(Debug, Serialize)]
struct MessageToolSummary<'a> {
    tool_calls: Vec<MessageToolOutcome<'a>>,
}

#[derive(Debug, Serialize)]
struct MessageToolOutcome<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    success: bool,
    is_error: bool,
    result_count: usize,
}

/// For each message (by index) that makes tool calls, the [`Outcome`] of each call: its
/// results are matched by call id to the latest call with that id, else by place to the
/// last call message's calls.
fn call_outcomes(messages: &[crate::formats::autogen::AgMessage]) -> HashMap<usize, Vec<Outcome>> {
    let mut outcomes: HashMap<usize, Vec<Outcome>> = HashMap::new();
    let mut by_id: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut last_call: Option<usize> = None;
    for (i, m) in messages.iter().enumerate() {
        if m.tools.is_empty() {
            continue;
        }
        match m.message_type {
            "action" => {
                outcomes.insert(i, vec![Outcome::default(); m.tools.len()]);
                for (k, part) in m.tools.iter().enumerate() {
                    if let Some(id) = part.call_id.as_deref() {
                        by_id.insert(id, (i, k));
                    }
                }
                last_call = Some(i);
            }
            "observation" => {
                for (k, part) in m.tools.iter().enumerate() {
                    let by_place = last_call.map(|c| (c, k));
                    let call = part.call_id.as_deref().and_then(|id| by_id.get(id).copied());
                    let Some((c, at)) = call.or(by_place) else {
                        continue;
                    };
                    if let Some(o) = outcomes.get_mut(&c).and_then(|o| o.get_mut(at)) {
                        o.count += 1;
                        o.failed |= part.failed;
                    }
                }
            }
            _ => {}
        }
    }
    outcomes
}

#[derive(Debug, Serialize)]
struct MessageSource<'a> {
    raw_file: &'a str,
    raw_line_range: [usize; 2],
}

#[derive(Debug, Serialize)]
struct MessageText<'a> {
    text: Text<'a>,
}

/// The units of an AutoGen session's messages, in step order.
fn message_units<'a>(
    session: &'a Session,
    messages: &'a [crate::formats::autogen::AgMessage],
) -> AnnotationsBody<'a> {
    let file = session.files.first().map_or("", |f| f.name.as_str());
    let outcomes = call_outcomes(messages);
    let annotations: Vec<AnnotationUnit> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let human = m.sender.eq_ignore_ascii_case("user") || m.human;
            let line = m.step + 1;
            AnnotationUnit::Message(MessageUnit {
                session_id: session.session_id.as_deref(),
                event_id: format!("M:{}", m.step),
                actor_id: &m.sender,
                actor_type: if human { "human" } else { "agent" },
                unit_type: if human { "user_turn" } else { "assistant_turn" },
                receiver: m.receiver.as_deref(),
                message_type: m.message_type,
                intent: crate::formats::autogen::intent(m.message_type),
                source: MessageSource {
                    raw_file: file,
                    raw_line_range: [line, line],
                },
                timestamp: &m.timestamp,
                text_or_artifact_ref: MessageText {
                    text: Text::from(m.content.as_str()),
                },
                labels: ShownLabels::NONE,
                tool_summary: outcomes.get(&i).map(|o| MessageToolSummary {
                    tool_calls: m
                        .tools
                        .iter()
                        .zip(o)
                        .map(|(part, o)| MessageToolOutcome {
                            tool_use_id: part.call_id.as_deref(),
                            tool_name: part.name.as_deref(),
                            success: o.count > 0 && !o.failed,
                            is_error: o.failed,
                            result_count: o.count,
                        })
                        .collect(),
                }),
                is_error: m.message_type == "observation" && m.failed(),
            })
        })
        .collect();
    let users = annotations
        .iter()
        .filter(|u| u.unit_type() == "user_turn")
        .count();
    AnnotationsBody {
        total: annotations.len(),
        user_turn_count: users,
        assistant_turn_count: annotations.len() - users,
        system_turn_count: 0,
        annotations,
    }
}

/// Where a unit comes from.
#[derive(Debug, Serialize)]
pub struct Source<'a> {
    /// The file's name.
    pub raw_file: &'a str,
    /// First and last physical line.
    pub raw_line_range: [u32; 2],
    /// The records' uuids.
    pub raw_uuids: Vec<&'a str>,
    /// `requestId` (assistant turns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<&'a str>,
    /// `message.id` (assistant turns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<&'a str>,
    /// Whether the records are a sidechain's.
    pub is_sidechain: bool,
    /// The parent uuid: `null` when the record's parent is `null`, absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_uuid: Option<Option<&'a str>>,
    /// The tool calls' ids (assistant turns with calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_ids: Option<Vec<&'a str>>,
}

/// A `user_turn`.
#[derive(Debug, Serialize)]
pub struct UserTurn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    event_id: String,
    actor_id: String,
    actor_type: &'static str,
    unit_type: &'static str,
    source: Source<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    text_or_artifact_ref: PromptRef<'a>,
    labels: ShownLabels<'a>,
}

#[derive(Debug, Serialize)]
struct PromptRef<'a> {
    text: Text<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<ImageRef<'a>>,
}

/// An `assistant_turn`.
#[derive(Debug, Serialize)]
pub struct AssistantTurn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    event_id: String,
    actor_id: String,
    actor_type: &'static str,
    agent_kind: &'static str,
    unit_type: &'static str,
    source: Source<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    text_or_artifact_ref: ResponseRef<'a>,
    labels: ShownLabels<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_summary: Option<ToolSummary<'a>>,
}

#[derive(Debug, Serialize)]
struct ResponseRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<ToolCall<'a>>>,
}

#[derive(Debug, Serialize)]
struct ToolCall<'a> {
    tool_use_id: &'a str,
    tool_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a RawJson>,
}

#[derive(Debug, Serialize)]
struct ToolSummary<'a> {
    tool_calls: Vec<ToolOutcome<'a>>,
}

#[derive(Debug, Serialize)]
struct ToolOutcome<'a> {
    tool_use_id: &'a str,
    tool_name: &'a str,
    success: bool,
    is_error: bool,
    result_count: usize,
    /// True when the call started one of the session's sub-agents (not in the body).
    #[serde(skip)]
    started_agent: bool,
}

/// A `system_turn`.
#[derive(Debug, Serialize)]
pub struct SystemTurn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    event_id: String,
    actor_id: &'static str,
    actor_type: &'static str,
    unit_type: &'static str,
    source: Source<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    text_or_artifact_ref: TextRef<'a>,
    labels: ShownLabels<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_metadata: Option<CompactMetadata<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_subtype: Option<&'a str>,
}

/// A compaction's metadata: as its boundary logged it, or `{}` for a summary that came
/// without a boundary (Claude Code 1.0.x), so that every compaction unit carries the key.
#[derive(Debug)]
enum CompactMetadata<'a> {
    Logged(&'a RawJson),
    NotLogged,
}

impl Serialize for CompactMetadata<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            CompactMetadata::Logged(raw) => raw.serialize(s),
            CompactMetadata::NotLogged => s.serialize_map(Some(0))?.end(),
        }
    }
}

#[derive(Debug, Serialize)]
struct TextRef<'a> {
    text: Text<'a>,
}

/// How many results answered a call, and whether any failed.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    count: usize,
    failed: bool,
}

/// Builds the body. With `include_sidechains`, sub-agent units are included too; with
/// [`Branch::Active`], abandoned branches are left out.
pub fn annotations(session: &Session, include_sidechains: bool, branch: Branch) -> AnnotationsBody<'_> {
    if let Some(messages) = &session.autogen {
        return message_units(session, messages);
    }
    let records = &session.records;
    let outcomes = result_outcomes(session);
    let spawning = session
        .agents
        .iter()
        .filter_map(|a| a.tool_use_id.as_deref())
        .collect();
    let builder = UnitBuilder {
        session,
        outcomes,
        spawning,
    };
    let mut body = AnnotationsBody {
        annotations: Vec::new(),
        total: 0,
        user_turn_count: 0,
        assistant_turn_count: 0,
        system_turn_count: 0,
    };
    for (i, item) in session.items.iter().enumerate() {
        if !session.shows(branch, i) {
            continue;
        }
        let first = match item.kind {
            ItemKind::Turn(t) => session.turns[t].anchor(),
            ItemKind::Prompt(r)
            | ItemKind::ToolResult { record: r, .. }
            | ItemKind::Notice { record: r, .. } => r,
            ItemKind::Compact { boundary, .. } => boundary,
        };
        let on_main_chain = item.lane == 0 && records[first].is_sidechain != Some(true);
        if !include_sidechains && !on_main_chain {
            continue;
        }
        let unit = match item.kind {
            // Words typed beside a tool result (the user wrote while the tool ran) are the
            // human's turn too; the result still counts for its call.
            ItemKind::Prompt(r) | ItemKind::ToolResult { record: r, .. } if item.labelable => {
                body.user_turn_count += 1;
                AnnotationUnit::User(builder.user_turn(r, item.lane))
            }
            ItemKind::Turn(t) => {
                body.assistant_turn_count += 1;
                AnnotationUnit::Assistant(builder.assistant_turn(t, item.lane))
            }
            ItemKind::Notice { record, kind } => {
                body.system_turn_count += 1;
                let subtype = if records[record].kind == RecordKind::System {
                    records[record].subtype()
                } else {
                    kind.subtype()
                };
                AnnotationUnit::System(builder.notice_turn(record, subtype))
            }
            ItemKind::Compact { boundary, summary } => {
                body.system_turn_count += 1;
                AnnotationUnit::System(builder.compact_turn(boundary, summary))
            }
            ItemKind::Prompt(_) | ItemKind::ToolResult { .. } => continue,
        };
        body.annotations.push(unit);
    }
    body.total = body.annotations.len();
    body
}

/// For each call id: how many results answered it, and whether any failed.
fn result_outcomes(session: &Session) -> HashMap<&str, Outcome> {
    let records = &session.records;
    let mut outcomes: HashMap<&str, Outcome> = HashMap::new();
    for item in &session.items {
        if let ItemKind::ToolResult { record, .. } = item.kind {
            let r = &records[record];
            let reported = r.tool_use_result().is_some_and(|t| t.reports_failure());
            // Each id once per record (a map: a record answering thousands of calls made a
            // list's lookups quadratic).
            let mut ids: HashMap<&str, bool> = HashMap::new();
            for b in r.blocks() {
                if let Block::ToolResult(t) = b {
                    if let Some(id) = t.tool_use_id.as_deref() {
                        *ids.entry(id).or_default() |= t.is_error;
                    }
                }
            }
            for (id, is_error) in ids {
                let o = outcomes.entry(id).or_default();
                o.count += 1;
                o.failed |= is_error || reported;
            }
        }
    }
    outcomes
}

struct UnitBuilder<'a> {
    session: &'a Session,
    outcomes: HashMap<&'a str, Outcome>,
    /// The calls that started the session's sub-agents, as linking tied them.
    spawning: HashSet<&'a str>,
}

impl<'a> UnitBuilder<'a> {
    fn record(&self, i: usize) -> &'a Record {
        &self.session.records[i]
    }

    fn session_id(&self) -> Option<&'a str> {
        self.session.session_id.as_deref()
    }

    fn parent_of(&self, i: usize) -> Option<Option<&'a str>> {
        self.record(i).parent_uuid.as_ref().map(|p| p.as_deref())
    }

    fn source(&self, records: &[usize]) -> Source<'a> {
        let first = records[0];
        let lines = records.iter().map(|&i| self.record(i).pos.line);
        let low = lines.clone().min().unwrap_or(0);
        let high = lines.max().unwrap_or(0);
        Source {
            raw_file: self.session.file_name(first),
            raw_line_range: [low, high],
            raw_uuids: records
                .iter()
                .filter_map(|&i| self.record(i).uuid.as_deref())
                .collect(),
            request_id: None,
            message_id: None,
            is_sidechain: self.record(first).is_sidechain.unwrap_or(false),
            parent_uuid: self.parent_of(first),
            tool_use_ids: None,
        }
    }

    /// The agent a lane belongs to (`None` for the main lane).
    fn lane_agent(&self, lane: usize) -> Option<&'a str> {
        let lane = &self.session.lanes[lane];
        lane.agent.map(|a| self.session.agents[a].agent_id.as_str())
    }

    fn user_turn(&self, r: usize, lane: usize) -> UserTurn<'a> {
        let rec = self.record(r);
        let (actor_id, actor_type) = match self.lane_agent(lane) {
            // In a sidechain the prompt comes from the agent that delegated the task.
            Some(_) => (self.delegator(lane), "agent"),
            None => ("human".to_owned(), "human"),
        };
        UserTurn {
            session_id: self.session_id(),
            event_id: format!("U:{}", rec.uuid.as_deref().unwrap_or_default()),
            actor_id,
            actor_type,
            unit_type: "user_turn",
            source: self.source(&[r]),
            timestamp: rec.timestamp.as_deref(),
            text_or_artifact_ref: PromptRef {
                text: classify::prompt_text(rec),
                images: classify::images(rec),
            },
            labels: ShownLabels::NONE,
        }
    }

    /// The actor that spawned the sub-agent of `lane`: `assistant`, or `agent-<id>` for a
    /// nested agent.
    fn delegator(&self, lane: usize) -> String {
        let agent = self.session.lanes[lane].agent.map(|a| &self.session.agents[a]);
        let parent_file = agent
            .and_then(|a| a.task_record)
            .map(|t| self.record(t).pos.file as usize);
        let parent_agent = parent_file.and_then(|f| self.session.agents.iter().find(|a| a.file == Some(f)));
        match parent_agent {
            Some(a) => format!("agent-{}", a.agent_id),
            None => "assistant".to_owned(),
        }
    }

    fn assistant_turn(&self, t: usize, lane: usize) -> AssistantTurn<'a> {
        let records = &self.session.records;
        let turn = &self.session.turns[t];
        let anchor = self.record(turn.anchor());
        let calls = turn.tool_uses(records);
        let thinking = turn.joined_thinking(records);
        let texts = turn.joined_texts(records);
        let mut source = self.source(&turn.chunks);
        source.request_id = turn.request_id.as_deref();
        source.message_id = turn.message_id.as_deref();
        source.parent_uuid = self.parent_of(turn.head);
        source.is_sidechain = anchor.is_sidechain.unwrap_or(false);
        if !calls.is_empty() {
            source.tool_use_ids = Some(calls.iter().map(|(_, _, c)| c.id.as_str()).collect());
        }
        let key = turn
            .message_id
            .as_deref()
            .or(anchor.uuid.as_deref())
            .unwrap_or_default();
        let (actor_id, agent_kind) = match self.lane_agent(lane) {
            Some(id) => (format!("agent-{id}"), "sub"),
            None => ("assistant".to_owned(), "main"),
        };
        let tool_summary = (!calls.is_empty()).then(|| ToolSummary {
            tool_calls: calls
                .iter()
                .map(|(_, _, c)| {
                    let o = self.outcomes.get(c.id.as_str()).copied().unwrap_or_default();
                    ToolOutcome {
                        tool_use_id: &c.id,
                        tool_name: &c.name,
                        success: o.count > 0 && !o.failed,
                        is_error: o.failed,
                        result_count: o.count,
                        started_agent: self.spawning.contains(c.id.as_str()),
                    }
                })
                .collect(),
        });
        AssistantTurn {
            session_id: self.session_id(),
            event_id: format!("A:{}:{}", turn.request_id.as_deref().unwrap_or_default(), key),
            actor_id,
            actor_type: "agent",
            agent_kind,
            unit_type: "assistant_turn",
            source,
            timestamp: anchor.timestamp.as_deref(),
            text_or_artifact_ref: ResponseRef {
                thinking: (!thinking.is_empty()).then_some(thinking),
                text: (!texts.is_empty()).then_some(texts),
                tool_calls: (!calls.is_empty()).then(|| {
                    calls
                        .iter()
                        .map(|(_, _, c)| ToolCall {
                            tool_use_id: &c.id,
                            tool_name: &c.name,
                            input: c.input.as_ref(),
                        })
                        .collect()
                }),
            },
            labels: ShownLabels::NONE,
            tool_summary,
        }
    }

    fn system_parent(&self, r: usize) -> Option<Option<&'a str>> {
        match self.record(r).logical_parent_uuid() {
            Some(l) => Some(Some(l)),
            None => self.parent_of(r),
        }
    }

    fn notice_turn(&self, r: usize, subtype: Option<&'a str>) -> SystemTurn<'a> {
        let rec = self.record(r);
        let mut source = self.source(&[r]);
        source.parent_uuid = self.system_parent(r);
        let text = classify::notice_text(rec);
        SystemTurn {
            session_id: self.session_id(),
            event_id: format!("S:{}", rec.uuid.as_deref().unwrap_or_default()),
            actor_id: "system",
            actor_type: "system",
            unit_type: "system_turn",
            source,
            timestamp: rec.timestamp.as_deref(),
            text_or_artifact_ref: TextRef { text },
            labels: ShownLabels::NONE,
            compact_metadata: None,
            system_subtype: subtype,
        }
    }

    /// A compaction: its boundary and summary, or a summary alone (`boundary` is then the
    /// summary, a user record).
    fn compact_turn(&self, boundary: usize, summary: Option<usize>) -> SystemTurn<'a> {
        let rec = self.record(boundary);
        let parts: Vec<usize> = std::iter::once(boundary)
            .chain(summary.filter(|&s| s != boundary))
            .collect();
        let compact_metadata = match rec.compact_metadata() {
            Some(logged) => Some(CompactMetadata::Logged(logged)),
            None if rec.kind == RecordKind::User => Some(CompactMetadata::NotLogged),
            None => None,
        };
        let mut source = self.source(&parts);
        source.parent_uuid = self.system_parent(boundary);
        SystemTurn {
            session_id: self.session_id(),
            event_id: format!("S:{}", rec.uuid.as_deref().unwrap_or_default()),
            actor_id: "system",
            actor_type: "system",
            unit_type: "system_turn",
            source,
            timestamp: rec.timestamp.as_deref(),
            text_or_artifact_ref: TextRef {
                text: compact_text(&self.session.records, boundary, summary),
            },
            labels: ShownLabels::NONE,
            compact_metadata,
            system_subtype: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::input::{SessionInput, SourceFile};
    use crate::pipeline::load::LoadOptions;

    fn session_of(name: &str, lines: &[&str]) -> Session {
        let input = SessionInput {
            files: vec![SourceFile::new(name, lines.join("\n").into_bytes())],
        };
        Session::build(&input, LoadOptions::default()).expect("the session loads")
    }

    /// A prompt, a response delegating to a sub-agent (`Task`) and running `Bash`, the
    /// Bash result failed, the Task's fine.
    const CLAUDE: [&str; 3] = [
        r#"{"type":"user","uuid":"u0","parentUuid":null,"sessionId":"S","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"Split the work"}}"#,
        r#"{"type":"assistant","uuid":"a0","parentUuid":"u0","sessionId":"S","requestId":"r0","timestamp":"2026-01-05T10:00:01.000Z","message":{"id":"m0","role":"assistant","content":[{"type":"text","text":"On it"},{"type":"tool_use","id":"t1","name":"Task","input":{"prompt":"Explore"}},{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"false"}}]}}"#,
        r#"{"type":"user","uuid":"r1","parentUuid":"a0","sessionId":"S","timestamp":"2026-01-05T10:00:02.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done"},{"type":"tool_result","tool_use_id":"t2","content":"exit 1","is_error":true}]}}"#,
    ];

    #[test]
    fn a_claude_code_unit_says_who_speaks_its_tools_failures_and_delegation() {
        let session = session_of("11111111-2222-4333-8444-555555555555.jsonl", &CLAUDE);
        let body = annotations(&session, true, Branch::All);
        let [prompt, response] = &body.annotations[..] else {
            panic!("two units: {:?}", body.annotations);
        };
        assert_eq!((prompt.actor_id(), prompt.actor_type()), ("human", "human"));
        assert_eq!(prompt.timestamp(), Some("2026-01-05T10:00:00.000Z"));
        assert!(prompt.tool_calls().is_empty());
        assert!(!prompt.shows_failed_tool_call() && !prompt.delegates());

        assert_eq!(
            (response.actor_id(), response.actor_type()),
            ("assistant", "agent")
        );
        let calls = response.tool_calls();
        let names: Vec<Option<&str>> = calls.iter().map(|c| c.tool_name).collect();
        assert_eq!(names, [Some("Task"), Some("Bash")]);
        assert_eq!(
            calls.iter().map(|c| c.is_error).collect::<Vec<_>>(),
            [false, true]
        );
        assert!(response.shows_failed_tool_call(), "the Bash result failed");
        assert!(response.delegates(), "a Task call");
    }

    #[test]
    fn an_autogen_message_unit_says_its_sender_and_delegation() {
        let session = session_of(
            "chat.jsonl",
            &[
                r#"{"sender": "User", "recipient": "Manager", "message": "Hello there", "timestamp": 1709280000}"#,
                r#"{"sender": "Manager", "recipient": "Coder", "message": "Please implement the scraper", "timestamp": 1709280005}"#,
            ],
        );
        let body = annotations(&session, true, Branch::All);
        let [user, manager] = &body.annotations[..] else {
            panic!("two units: {:?}", body.annotations);
        };
        assert_eq!((user.actor_id(), user.actor_type()), ("User", "human"));
        assert!(user.timestamp().is_some());
        assert!(!user.delegates());
        assert_eq!(manager.actor_id(), "Manager");
        assert!(manager.delegates(), "typed delegation by its content");
        assert!(!manager.shows_failed_tool_call());
    }

    /// Item 13 of the labeling team's report: an AutoGen log's units lacked the
    /// `session_id` a Claude Code unit carries, and its diagnostics counted no record read.
    #[test]
    fn item13_autogen_units_carry_the_session_id_and_diagnostics_count_the_messages() {
        let session = session_of(
            "runs/chat.jsonl",
            &[
                r#"{"sender": "User", "recipient": "Manager", "message": "Hello there"}"#,
                "",
                r#"{"sender": "Manager", "recipient": "User", "message": "   "}"#,
                r#"{"sender": "Manager", "recipient": "Coder", "message": "Please implement it"}"#,
            ],
        );
        let body = serde_json::to_value(annotations(&session, false, Branch::All)).unwrap();
        let ids: Vec<&serde_json::Value> = body["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| &u["session_id"])
            .collect();
        assert_eq!(ids, ["chat", "chat"], "{body}");
        let diagnostics = serde_json::to_value(crate::views::diagnostics::diagnostics(&session)).unwrap();
        assert_eq!(diagnostics["session_id"], "chat");
        assert_eq!(
            diagnostics["records"],
            serde_json::json!({"read": 2, "kept": 2, "items": 2, "nodes": 0, "edges": 0}),
            "two messages (the blank one is none)"
        );
        assert_eq!(diagnostics["files"][0]["lines"], 3, "{diagnostics}");
        assert_eq!(diagnostics["files"][0]["records"], 2);
    }
}
