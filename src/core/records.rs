//! Typed Claude Code records.
//!
//! One JSONL line holds one record (rarely two, glued). The types below keep exactly what
//! the views read; every other field is skipped while parsing, and unknown record types are
//! kept as [`RecordKind::Other`] so that they can still serve as parents in the ordering.
//! Tool inputs and compaction metadata are passed through to the views untouched, as raw
//! JSON text.

use serde_json::Number;

use super::json_text::{JsonStr, RawJson};

mod wire;

pub(crate) use wire::WireRecord;

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
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Where it was read.
    pub pos: Position,
    /// Its `type`.
    pub kind: RecordKind,
    /// `uuid`.
    pub uuid: Option<String>,
    /// `parentUuid`: `None` when the key is absent, `Some(None)` when it is `null`.
    pub parent_uuid: Option<Option<String>>,
    /// `logicalParentUuid` (compaction boundaries point at the last record before them).
    pub logical_parent_uuid: Option<String>,
    /// `timestamp`, as written.
    pub timestamp: Option<String>,
    /// `timestamp` in milliseconds since the epoch, when it parses.
    pub time: Option<i64>,
    /// `sessionId`.
    pub session_id: Option<String>,
    /// `requestId`: the API request an assistant chunk belongs to.
    pub request_id: Option<String>,
    /// `agentId`: set on every record of a sub-agent log.
    pub agent_id: Option<String>,
    /// `isSidechain`, when present.
    pub is_sidechain: Option<bool>,
    /// `isMeta` (system-injected context, never shown as a message).
    pub is_meta: bool,
    /// `isCompactSummary`: the summary written after a compaction boundary.
    pub is_compact_summary: bool,
    /// `subtype` of system records (`compact_boundary`, `api_error`, ...).
    pub subtype: Option<String>,
    /// Top-level `content` of system records.
    pub content: Option<JsonStr>,
    /// `compactMetadata` of compaction boundaries, as raw JSON.
    pub compact_metadata: Option<RawJson>,
    /// `message` of user and assistant records.
    pub message: Option<Message>,
    /// `toolUseResult` of tool-result records (only the fields the views read), boxed: few
    /// records have one, and every record would otherwise pay for its size.
    pub tool_use_result: Option<Box<ToolUseResult>>,
    /// `isActive` (or `is_active`): marks the active child of a branch point, when present.
    pub is_active: Option<bool>,
    /// For a pi compaction: the id of the first entry kept in context.
    pub first_kept: Option<String>,
}

impl Record {
    /// The parent the ordering follows: `logicalParentUuid`, else `parentUuid`.
    pub fn logical_or_parent(&self) -> Option<&str> {
        self.logical_parent_uuid.as_deref().or_else(|| self.raw_parent())
    }

    /// `parentUuid` when it is a string.
    pub fn raw_parent(&self) -> Option<&str> {
        self.parent_uuid.as_ref().and_then(|p| p.as_deref())
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

    /// True for a record no view shows and no record can name as its parent: not `user`,
    /// `assistant` or `system`, and without a uuid (snapshots, queue entries, `{}`).
    pub fn is_inert(&self) -> bool {
        !self.kind.is_conversational() && self.uuid.is_none()
    }

    /// True when this is a compaction boundary (`system` with subtype `compact_boundary`).
    pub fn is_compact_boundary(&self) -> bool {
        self.kind == RecordKind::System && self.subtype.as_deref() == Some("compact_boundary")
    }
}

/// `message` of a user or assistant record.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// `message.id` (`msg_...`): the API message a chunk belongs to.
    pub id: Option<String>,
    /// `message.model`.
    pub model: Option<String>,
    /// `message.content`.
    pub content: Content,
    /// `message.usage`: input and output tokens of the API message.
    pub usage: Option<Usage>,
}

/// `message.content`: a string, or an array of blocks.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Content {
    /// No content, or content of another JSON type.
    #[default]
    Absent,
    /// A plain string.
    Text(JsonStr),
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
    Text(JsonStr),
    /// `{"type":"thinking","thinking":...,"signature":...}`.
    Thinking {
        /// The reasoning text.
        thinking: JsonStr,
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
    pub input: Option<RawJson>,
}

impl PartialEq for ToolUse {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.name == other.name && self.input == other.input
    }
}

impl ToolUse {
    /// The input parsed as a JSON value (`null` when absent or unparsable).
    pub fn input_value(&self) -> serde_json::Value {
        self.input
            .as_ref()
            .map_or(serde_json::Value::Null, RawJson::value)
    }
}

/// A tool result block.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultBlock {
    /// `tool_use_id`: the call this answers.
    pub tool_use_id: Option<String>,
    /// The text of `content` (a string, or the `text` parts of an array).
    pub texts: Vec<JsonStr>,
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
    pub data: Option<JsonStr>,
}

/// The fields of `toolUseResult` that the views read. `toolUseResult` may also be a plain
/// string (an error message); then every field is empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolUseResult {
    /// `status` (`completed`, `failed`).
    pub status: Option<String>,
    /// `stdout` of Bash.
    pub stdout: Option<JsonStr>,
    /// `stderr` of Bash.
    pub stderr: Option<JsonStr>,
    /// `agentId` of a Task result: the sub-agent that ran.
    pub agent_id: Option<String>,
    /// `prompt` of a Task result.
    pub prompt: Option<JsonStr>,
    /// `file.filePath` of a Read result.
    pub file_path: Option<String>,
    /// `file.content` of a Read result.
    pub file_content: Option<JsonStr>,
    /// The first `text` block of `content` (Task results).
    pub first_content_text: Option<JsonStr>,
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
