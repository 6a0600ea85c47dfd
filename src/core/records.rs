//! Typed Claude Code records.
//!
//! One JSONL line holds one record (rarely two, glued). The types below keep exactly what
//! the views read; every other field is skipped while parsing, and unknown record types are
//! kept as [`RecordKind::Other`] so that they can still serve as parents in the ordering.
//! Tool inputs and compaction metadata are passed through to the views untouched, as raw
//! JSON text.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Number;

use super::lenient::{self, ObjectOr};

/// Where a record was read: file index within the session, 1-based physical line, and the
/// index of the record within its line (non-zero only for glued records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// Index of the file in the session's file list.
    pub file: u32,
    /// 1-based physical line number.
    pub line: u32,
    /// Index of the record among the records glued on the same line.
    pub seq: u32,
}

/// The record's `type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKind {
    /// `user`: prompts, tool results, compaction summaries, local command output.
    User,
    /// `assistant`: one content block of a model response.
    Assistant,
    /// `system`: compaction boundaries, API errors, informational notices.
    System,
    /// Any other type (`file-history-snapshot`, `queue-operation`, `summary`, `progress`,
    /// `attachment`, ...), or none when the `type` key is missing.
    Other(Option<String>),
}

impl Default for RecordKind {
    fn default() -> Self {
        RecordKind::Other(None)
    }
}

impl RecordKind {
    fn from_type(t: Option<String>) -> Self {
        match t.as_deref() {
            Some("user") => RecordKind::User,
            Some("assistant") => RecordKind::Assistant,
            Some("system") => RecordKind::System,
            _ => RecordKind::Other(t),
        }
    }

    /// The `type` string as written (`"(missing)"` when there was none).
    pub fn name(&self) -> &str {
        match self {
            RecordKind::User => "user",
            RecordKind::Assistant => "assistant",
            RecordKind::System => "system",
            RecordKind::Other(Some(t)) => t,
            RecordKind::Other(None) => "(missing)",
        }
    }

    /// True for the three conversational types.
    pub fn is_conversational(&self) -> bool {
        !matches!(self, RecordKind::Other(_))
    }
}

/// One parsed record.
///
/// Its size is paid once per record, and logs of millions of tiny records exist (issue 15,
/// D1): strings are boxed (`Box<str>`, 16 bytes against `String`'s 24), and the fields few
/// records have live in [`RecordExtra`], behind one pointer.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Where it was read.
    pub pos: Position,
    /// Its `type`.
    pub kind: RecordKind,
    /// `isSidechain`, when present.
    pub is_sidechain: Option<bool>,
    /// `isMeta` (system-injected context, never shown as a message).
    pub is_meta: bool,
    /// `isCompactSummary`: the summary written after a compaction boundary.
    pub is_compact_summary: bool,
    /// `isActive` (or `is_active`): marks the active child of a branch point, when present.
    pub is_active: Option<bool>,
    /// `uuid`.
    pub uuid: Option<Box<str>>,
    /// `parentUuid`: `None` when the key is absent, `Some(None)` when it is `null`.
    pub parent_uuid: Option<Option<Box<str>>>,
    /// `timestamp`, as written.
    pub timestamp: Option<Box<str>>,
    /// `timestamp` in milliseconds since the epoch, when it parses.
    pub time: Option<i64>,
    /// `sessionId`.
    pub session_id: Option<Box<str>>,
    /// `requestId`: the API request an assistant chunk belongs to.
    pub request_id: Option<Box<str>>,
    /// `agentId`: set on every record of a sub-agent log.
    pub agent_id: Option<Box<str>>,
    /// `message` of user and assistant records.
    pub message: Option<Message>,
    /// The fields few records have; `None` when the record has none of them.
    pub extra: Option<Box<RecordExtra>>,
}

/// The fields of a record that only some kinds of records have (compaction boundaries,
/// system notices, tool results, pi compactions), kept out of [`Record`] so that the others
/// do not pay for their size.
#[derive(Debug, Clone, Default)]
pub struct RecordExtra {
    /// `logicalParentUuid` (compaction boundaries point at the last record before them).
    pub logical_parent_uuid: Option<String>,
    /// `subtype` of system records (`compact_boundary`, `api_error`, ...).
    pub subtype: Option<String>,
    /// Top-level `content` of system records.
    pub content: Option<String>,
    /// `compactMetadata` of compaction boundaries, as raw JSON.
    pub compact_metadata: Option<Box<RawValue>>,
    /// `toolUseResult` of tool-result records (only the fields the views read).
    pub tool_use_result: Option<ToolUseResult>,
    /// For a pi compaction: the id of the first entry kept in context.
    pub first_kept: Option<String>,
}

impl RecordExtra {
    /// True when it holds nothing (the record then needs no extra at all).
    fn is_empty(&self) -> bool {
        self.logical_parent_uuid.is_none()
            && self.subtype.is_none()
            && self.content.is_none()
            && self.compact_metadata.is_none()
            && self.tool_use_result.is_none()
            && self.first_kept.is_none()
    }
}

impl Record {
    /// The parent the ordering follows: `logicalParentUuid`, else `parentUuid`.
    pub fn logical_or_parent(&self) -> Option<&str> {
        self.logical_parent_uuid().or_else(|| self.raw_parent())
    }

    /// `parentUuid` when it is a string.
    pub fn raw_parent(&self) -> Option<&str> {
        self.parent_uuid.as_ref().and_then(|p| p.as_deref())
    }

    /// `logicalParentUuid`.
    pub fn logical_parent_uuid(&self) -> Option<&str> {
        self.extra.as_ref()?.logical_parent_uuid.as_deref()
    }

    /// `subtype` of system records.
    pub fn subtype(&self) -> Option<&str> {
        self.extra.as_ref()?.subtype.as_deref()
    }

    /// The top-level `content` of system records (not `message.content`).
    pub fn system_content(&self) -> Option<&str> {
        self.extra.as_ref()?.content.as_deref()
    }

    /// `compactMetadata`, as raw JSON.
    pub fn compact_metadata(&self) -> Option<&RawValue> {
        self.extra.as_ref()?.compact_metadata.as_deref()
    }

    /// `toolUseResult`.
    pub fn tool_use_result(&self) -> Option<&ToolUseResult> {
        self.extra.as_ref()?.tool_use_result.as_ref()
    }

    /// For a pi compaction: the id of the first entry kept in context.
    pub fn first_kept(&self) -> Option<&str> {
        self.extra.as_ref()?.first_kept.as_deref()
    }

    /// The rare fields, to set one (made empty when the record had none).
    pub fn extra_mut(&mut self) -> &mut RecordExtra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// The message's content blocks (empty for string or missing content).
    pub fn blocks(&self) -> &[Block] {
        match self.message.as_ref().map(|m| &m.content) {
            Some(Content::Blocks(b)) => b,
            _ => &[],
        }
    }

    /// `message.id`.
    pub fn message_id(&self) -> Option<&str> {
        self.message.as_ref().and_then(|m| m.id.as_deref())
    }

    /// True when the message content is an array holding a `tool_result` block.
    pub fn has_tool_result(&self) -> bool {
        self.blocks().iter().any(|b| matches!(b, Block::ToolResult(_)))
    }

    /// The first `tool_result` block's `tool_use_id`.
    pub fn first_tool_use_id(&self) -> Option<&str> {
        self.blocks().iter().find_map(|b| match b {
            Block::ToolResult(r) => r.tool_use_id.as_deref(),
            _ => None,
        })
    }

    /// True when this is a compaction boundary (`system` with subtype `compact_boundary`).
    pub fn is_compact_boundary(&self) -> bool {
        self.kind == RecordKind::System && self.subtype() == Some("compact_boundary")
    }
}

/// `message` of a user or assistant record.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// `message.id` (`msg_...`): the API message a chunk belongs to.
    pub id: Option<Box<str>>,
    /// `message.model`.
    pub model: Option<Box<str>>,
    /// `message.content`.
    pub content: Content,
    /// `message.usage`: input and output tokens of the API message (assistant messages
    /// only, hence boxed).
    pub usage: Option<Box<Usage>>,
}

/// `message.content`: a string, or an array of blocks.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Content {
    /// No content, or content of another JSON type.
    #[default]
    Absent,
    /// A plain string (boxed: the enum is then no larger than the `Vec` of blocks).
    Text(Box<str>),
    /// An array of content blocks.
    Blocks(Vec<Block>),
}

/// `message.usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// `input_tokens`.
    pub input_tokens: u64,
    /// `output_tokens`.
    pub output_tokens: u64,
}

/// One content block.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// `{"type":"text","text":...}`.
    Text(String),
    /// `{"type":"thinking","thinking":...,"signature":...}`.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The block's signature (used to spot duplicated assistant chunks).
        signature: Option<String>,
    },
    /// `{"type":"tool_use","id":...,"name":...,"input":{...}}`.
    ToolUse(ToolUse),
    /// `{"type":"tool_result","tool_use_id":...,"content":...,"is_error":...}`.
    ToolResult(ToolResultBlock),
    /// `{"type":"image","source":{...}}`.
    Image(Image),
    /// A block of another type (`redacted_thinking`, `document`, ...), or not an object.
    Other(Option<String>),
}

/// A tool invocation.
#[derive(Debug, Clone)]
pub struct ToolUse {
    /// `id` (`toolu_...`), matched by `tool_result.tool_use_id`.
    pub id: String,
    /// `name` (`Read`, `Bash`, `Task`, ...).
    pub name: String,
    /// `input`, as raw JSON (passed through to the views).
    pub input: Option<Box<RawValue>>,
}

impl PartialEq for ToolUse {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.name == other.name
            && self.input.as_ref().map(|r| r.get()) == other.input.as_ref().map(|r| r.get())
    }
}

impl ToolUse {
    /// The input parsed as a JSON value (`null` when absent or unparsable).
    pub fn input_value(&self) -> serde_json::Value {
        self.input
            .as_ref()
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or(serde_json::Value::Null)
    }
}

/// A tool result block.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultBlock {
    /// `tool_use_id`: the call this answers.
    pub tool_use_id: Option<String>,
    /// The text of `content` (a string, or the `text` parts of an array).
    pub texts: Vec<String>,
    /// `is_error`.
    pub is_error: bool,
}

/// An image block.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// `source.type` (`base64` or `url`).
    pub source_type: Option<String>,
    /// `source.media_type`.
    pub media_type: Option<String>,
    /// `source.data` (base64).
    pub data: Option<String>,
}

/// The fields of `toolUseResult` that the views read. `toolUseResult` may also be a plain
/// string (an error message); then every field is empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolUseResult {
    /// `status` (`completed`, `failed`).
    pub status: Option<String>,
    /// `stdout` of Bash.
    pub stdout: Option<String>,
    /// `stderr` of Bash.
    pub stderr: Option<String>,
    /// `agentId` of a Task result: the sub-agent that ran.
    pub agent_id: Option<String>,
    /// `prompt` of a Task result.
    pub prompt: Option<String>,
    /// `file.filePath` of a Read result.
    pub file_path: Option<String>,
    /// `file.content` of a Read result.
    pub file_content: Option<String>,
    /// The first `text` block of `content` (Task results).
    pub first_content_text: Option<String>,
    /// `totalDurationMs` (Task results).
    pub total_duration_ms: Option<Number>,
    /// `totalTokens` (Task results).
    pub total_tokens: Option<Number>,
    /// `totalToolUseCount` (Task results).
    pub total_tool_use_count: Option<Number>,
    /// `interrupted` (Bash: the user stopped the command).
    pub interrupted: bool,
}

impl ToolUseResult {
    /// True when the tool reported a failure: `status == "failed"` or `interrupted: true`.
    ///
    /// A non-empty `stderr` is not one: Claude Code writes its own notices there ("Shell cwd
    /// was reset to ...") and commands that exit 0 write warnings; a failed command's output
    /// is in the result's content, marked `is_error: true` (CONTRACT 3.4).
    pub fn reports_failure(&self) -> bool {
        self.status.as_deref() == Some("failed") || self.interrupted
    }
}

// ---------------------------------------------------------------------------------------
// Deserialization. The wire structs are flat and lenient; `Record::from_wire` converts.

/// A record as it appears on the wire.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WireRecord {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    uuid: Option<String>,
    #[serde(deserialize_with = "lenient::nullable_string")]
    parent_uuid: Option<Option<String>>,
    #[serde(deserialize_with = "lenient::string")]
    logical_parent_uuid: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    session_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    request_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    agent_id: Option<String>,
    #[serde(deserialize_with = "lenient::bool")]
    is_sidechain: Option<bool>,
    #[serde(deserialize_with = "lenient::flag")]
    is_meta: bool,
    #[serde(deserialize_with = "lenient::flag")]
    is_compact_summary: bool,
    #[serde(deserialize_with = "lenient::string")]
    subtype: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    content: Option<String>,
    compact_metadata: Option<Box<RawValue>>,
    message: ObjectOr<WireMessage>,
    tool_use_result: ObjectOr<WireToolUseResult>,
    #[serde(deserialize_with = "lenient::bool", alias = "is_active")]
    is_active: Option<bool>,
}

impl WireRecord {
    /// The `type` as counted in diagnostics (`"(missing)"` when there is none).
    pub(crate) fn type_name(&self) -> &str {
        self.kind.as_deref().unwrap_or("(missing)")
    }

    /// `sessionId`.
    pub(crate) fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// `agentId`.
    pub(crate) fn agent_id(&self) -> Option<&str> {
        self.agent_id.as_deref()
    }

    /// True for a record no view shows and no record can name as its parent: not `user`,
    /// `assistant` or `system`, and without a uuid (snapshots, queue entries, `{}`).
    pub(crate) fn is_inert(&self) -> bool {
        !matches!(self.kind.as_deref(), Some("user" | "assistant" | "system")) && self.uuid.is_none()
    }

    /// True for what a writer puts at the top level of a line: a conversational record with
    /// a uuid, or a snapshot / queue / summary entry. Used to tell a real record glued after
    /// a truncated one from an object nested inside the truncated record.
    pub(crate) fn looks_like_top_level(&self) -> bool {
        match self.kind.as_deref() {
            Some("user" | "assistant" | "system") => self.uuid.is_some(),
            Some("file-history-snapshot" | "queue-operation" | "summary") => true,
            _ => false,
        }
    }
}

impl Record {
    pub(crate) fn from_wire(w: WireRecord, pos: Position) -> Record {
        let time = w.timestamp.as_deref().and_then(super::time::parse_millis);
        let extra = RecordExtra {
            logical_parent_uuid: w.logical_parent_uuid,
            subtype: w.subtype,
            content: w.content,
            compact_metadata: w.compact_metadata.filter(|r| r.get() != "null"),
            tool_use_result: w.tool_use_result.0.map(WireToolUseResult::into_result),
            first_kept: None,
        };
        Record {
            pos,
            kind: RecordKind::from_type(w.kind),
            is_sidechain: w.is_sidechain,
            is_meta: w.is_meta,
            is_compact_summary: w.is_compact_summary,
            is_active: w.is_active,
            uuid: w.uuid.map(String::into_boxed_str),
            parent_uuid: w.parent_uuid.map(|p| p.map(String::into_boxed_str)),
            timestamp: w.timestamp.map(String::into_boxed_str),
            time,
            session_id: w.session_id.map(String::into_boxed_str),
            request_id: w.request_id.map(String::into_boxed_str),
            agent_id: w.agent_id.map(String::into_boxed_str),
            message: w.message.0.map(WireMessage::into_message),
            extra: (!extra.is_empty()).then(|| Box::new(extra)),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessage {
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    model: Option<String>,
    content: Content,
    usage: ObjectOr<WireUsage>,
}

impl WireMessage {
    fn into_message(self) -> Message {
        Message {
            id: self.id.map(String::into_boxed_str),
            model: self.model.map(String::into_boxed_str),
            content: self.content,
            usage: self.usage.0.map(|u| {
                Box::new(Usage {
                    input_tokens: u.input_tokens.unwrap_or(0),
                    output_tokens: u.output_tokens.unwrap_or(0),
                })
            }),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    #[serde(deserialize_with = "lenient::count")]
    input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::count")]
    output_tokens: Option<u64>,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ContentVisitor;

        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.into()))
            }
            fn visit_string<E>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v.into_boxed_str()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(64));
                while let Some(block) = seq.next_element::<ObjectOr<WireBlock>>()? {
                    blocks.push(block.0.map_or(Block::Other(None), WireBlock::into_block));
                }
                Ok(Content::Blocks(blocks))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Content::Absent)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Content, E> {
                Ok(Content::Absent)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Content, E> {
                Ok(Content::Absent)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Content, E> {
                Ok(Content::Absent)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Content, E> {
                Ok(Content::Absent)
            }
            fn visit_unit<E>(self) -> Result<Content, E> {
                Ok(Content::Absent)
            }
        }

        d.deserialize_any(ContentVisitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireBlock {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    thinking: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    signature: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    name: Option<String>,
    input: Option<Box<RawValue>>,
    #[serde(deserialize_with = "lenient::string")]
    tool_use_id: Option<String>,
    content: ResultContent,
    #[serde(deserialize_with = "lenient::flag")]
    is_error: bool,
    source: ObjectOr<WireImageSource>,
}

impl WireBlock {
    fn into_block(self) -> Block {
        match self.kind.as_deref() {
            Some("text") => Block::Text(self.text.unwrap_or_default()),
            Some("thinking") => Block::Thinking {
                thinking: self.thinking.unwrap_or_default(),
                signature: self.signature,
            },
            Some("tool_use") => Block::ToolUse(ToolUse {
                id: self.id.unwrap_or_default(),
                name: self.name.unwrap_or_default(),
                input: self.input,
            }),
            Some("tool_result") => Block::ToolResult(ToolResultBlock {
                tool_use_id: self.tool_use_id,
                texts: self.content.0,
                is_error: self.is_error,
            }),
            Some("image") => {
                let source = self.source.0.unwrap_or_default();
                Block::Image(Image {
                    source_type: source.kind,
                    media_type: source.media_type,
                    data: source.data,
                })
            }
            _ => Block::Other(self.kind),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireImageSource {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    media_type: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    data: Option<String>,
}

/// `tool_result.content`: a string, or an array whose `text` parts are kept. The flag tells
/// whether the value was an array.
#[derive(Default)]
struct ResultContent(Vec<String>, bool);

impl<'de> Deserialize<'de> for ResultContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Part {
            #[serde(rename = "type", deserialize_with = "lenient::string")]
            kind: Option<String>,
            #[serde(deserialize_with = "lenient::string")]
            text: Option<String>,
        }

        struct ResultVisitor;

        impl<'de> Visitor<'de> for ResultVisitor {
            type Value = ResultContent;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tool result content")
            }
            fn visit_str<E>(self, v: &str) -> Result<ResultContent, E> {
                Ok(ResultContent(vec![v.to_owned()], false))
            }
            fn visit_string<E>(self, v: String) -> Result<ResultContent, E> {
                Ok(ResultContent(vec![v], false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ResultContent, A::Error> {
                let mut texts = Vec::new();
                while let Some(part) = seq.next_element::<ObjectOr<Part>>()? {
                    if let Some(Part {
                        kind: Some(kind),
                        text: Some(text),
                    }) = part.0
                    {
                        if kind == "text" {
                            texts.push(text);
                        }
                    }
                }
                Ok(ResultContent(texts, true))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ResultContent, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ResultContent::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<ResultContent, E> {
                Ok(ResultContent::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<ResultContent, E> {
                Ok(ResultContent::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<ResultContent, E> {
                Ok(ResultContent::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<ResultContent, E> {
                Ok(ResultContent::default())
            }
            fn visit_unit<E>(self) -> Result<ResultContent, E> {
                Ok(ResultContent::default())
            }
        }

        d.deserialize_any(ResultVisitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireToolUseResult {
    #[serde(deserialize_with = "lenient::string")]
    status: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    stdout: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    stderr: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    agent_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    prompt: Option<String>,
    file: ObjectOr<WireFile>,
    content: ResultContent,
    #[serde(deserialize_with = "lenient::number")]
    total_duration_ms: Option<Number>,
    #[serde(deserialize_with = "lenient::number")]
    total_tokens: Option<Number>,
    #[serde(deserialize_with = "lenient::number")]
    total_tool_use_count: Option<Number>,
    #[serde(deserialize_with = "lenient::flag")]
    interrupted: bool,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireFile {
    #[serde(deserialize_with = "lenient::string")]
    file_path: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    content: Option<String>,
}

impl WireToolUseResult {
    fn into_result(self) -> ToolUseResult {
        let file = self.file.0.unwrap_or_default();
        ToolUseResult {
            status: self.status,
            stdout: self.stdout,
            stderr: self.stderr,
            agent_id: self.agent_id,
            prompt: self.prompt,
            file_path: file.file_path,
            file_content: file.content,
            // Only an array `content` (Task results) counts, as in the reference.
            first_content_text: if self.content.1 {
                self.content.0.into_iter().next()
            } else {
                None
            },
            total_duration_ms: self.total_duration_ms,
            total_tokens: self.total_tokens,
            total_tool_use_count: self.total_tool_use_count,
            interrupted: self.interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// D1 (issue 15): a record was 424 bytes before its first string; logs of millions of
    /// tiny records paid that per line. Rare fields now live behind one pointer.
    #[test]
    fn d1_a_record_stays_small() {
        let size = std::mem::size_of::<Record>();
        eprintln!(
            "Record: {size} bytes, Message: {}",
            std::mem::size_of::<Message>()
        );
        assert!(size <= 232, "a Record is {size} bytes");
    }
}
