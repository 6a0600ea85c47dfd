//! Typed Claude Code records.
//!
//! One JSONL line holds one record (rarely two, glued). The types below keep exactly what
//! the views read; every other field is skipped while parsing, and unknown record types are
//! kept as [`RecordKind::Other`] so that they can still serve as parents in the ordering.
//!
//! Text (message content, tool output, file contents) is kept as the JSON it was read as,
//! sharing the file's buffer ([`JsonStr`]); tool inputs and compaction metadata are passed
//! through to the views untouched ([`RawJson`]). Ids and names are short and are copied, once
//! for all the records that repeat them ([`Id`]).

mod wire;

use std::sync::Arc;

use crate::heap::HeapSize;
use serde_json::Number;

pub use crate::json::raw::{JsonStr, RawJson};
pub(crate) use wire::{LineBuffer, WireRecord};

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

/// An id or name that records repeat from the records before them (the session's id, the
/// parent's uuid, the API message's id and model): one allocation that all of them share
/// (`RepeatedIds`), 16 bytes in the record like a `Box<str>`.
pub type Id = Arc<str>;

/// One parsed record.
///
/// Its size is paid once per record, and logs of millions of tiny records exist:
/// strings are boxed (`Box<str>` or [`Id`], 16 bytes against `String`'s 24), and the
/// fields few records have live in [`RecordExtra`], behind one pointer.
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
    pub uuid: Option<Id>,
    /// `parentUuid`: `None` when the key is absent, `Some(None)` when it is `null`.
    pub parent_uuid: Option<Option<Id>>,
    /// `timestamp`, as written.
    pub timestamp: Option<Box<str>>,
    /// `timestamp` in milliseconds since the epoch, when it parses.
    pub time: Option<i64>,
    /// `sessionId`.
    pub session_id: Option<Id>,
    /// `requestId`: the API request an assistant chunk belongs to.
    pub request_id: Option<Id>,
    /// `agentId`: set on every record of a sub-agent log.
    pub agent_id: Option<Id>,
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
    pub content: Option<JsonStr>,
    /// `compactMetadata` of compaction boundaries, as raw JSON.
    pub compact_metadata: Option<RawJson>,
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
    pub fn system_content(&self) -> Option<&JsonStr> {
        self.extra.as_ref()?.content.as_ref()
    }

    /// `compactMetadata`, as raw JSON.
    pub fn compact_metadata(&self) -> Option<&RawJson> {
        self.extra.as_ref()?.compact_metadata.as_ref()
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

/// The ids of the records read last, which the next records mostly repeat: a record's
/// session id, agent id, API request id, message id and model are usually those of the
/// record before it, and its parent is usually that record. [`RepeatedIds::share`] points
/// a record's copies at the ones already held, so that a long log holds each once (on the
/// x100 sample, 70,700 records: ~8 MiB less).
#[derive(Debug, Default)]
pub(crate) struct RepeatedIds {
    session_id: Option<Id>,
    agent_id: Option<Id>,
    request_id: Option<Id>,
    message_id: Option<Id>,
    model: Option<Id>,
    uuid: Option<Id>,
}

impl RepeatedIds {
    /// Replaces each id of `record` equal to one held by the one held, and holds
    /// `record`'s ids for the records after it.
    pub(crate) fn share(&mut self, record: &mut Record) {
        share_one(&mut self.session_id, &mut record.session_id);
        share_one(&mut self.agent_id, &mut record.agent_id);
        share_one(&mut self.request_id, &mut record.request_id);
        if let Some(m) = &mut record.message {
            share_one(&mut self.message_id, &mut m.id);
            share_one(&mut self.model, &mut m.model);
        }
        if let Some(Some(parent)) = &mut record.parent_uuid {
            if let Some(last) = self.uuid.as_ref().filter(|last| **last == *parent) {
                *parent = last.clone();
            }
        }
        if record.uuid.is_some() {
            self.uuid.clone_from(&record.uuid);
        }
    }
}

/// `id` pointed at `held` when they are equal; else `held` becomes `id` (when it is set).
fn share_one(held: &mut Option<Id>, id: &mut Option<Id>) {
    match (held.as_ref(), id.as_mut()) {
        (Some(h), Some(i)) if *h == *i => *i = h.clone(),
        (_, Some(i)) => *held = Some(i.clone()),
        _ => {}
    }
}

/// `message` of a user or assistant record.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// `message.id` (`msg_...`): the API message a chunk belongs to.
    pub id: Option<Id>,
    /// `message.model`.
    pub model: Option<Id>,
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
        signature: Option<JsonStr>,
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

impl HeapSize for Record {
    fn heap_size(&self) -> usize {
        self.kind.heap_size()
            + self.uuid.heap_size()
            + self.parent_uuid.heap_size()
            + self.timestamp.heap_size()
            + self.session_id.heap_size()
            + self.request_id.heap_size()
            + self.agent_id.heap_size()
            + self.message.heap_size()
            + self.extra.heap_size()
    }
}

impl HeapSize for RecordExtra {
    fn heap_size(&self) -> usize {
        self.logical_parent_uuid.heap_size()
            + self.subtype.heap_size()
            + self.content.heap_size()
            + self.compact_metadata.heap_size()
            + self.tool_use_result.heap_size()
            + self.first_kept.heap_size()
    }
}

impl HeapSize for RecordKind {
    fn heap_size(&self) -> usize {
        match self {
            RecordKind::Other(name) => name.heap_size(),
            _ => 0,
        }
    }
}

impl HeapSize for Message {
    fn heap_size(&self) -> usize {
        self.id.heap_size()
            + self.model.heap_size()
            + self.content.heap_size()
            + self.usage.as_ref().map_or(0, |_| size_of::<Usage>())
    }
}

impl HeapSize for Content {
    fn heap_size(&self) -> usize {
        match self {
            Content::Absent => 0,
            Content::Text(t) => t.heap_size(),
            Content::Blocks(blocks) => blocks.heap_size(),
        }
    }
}

impl HeapSize for Block {
    fn heap_size(&self) -> usize {
        match self {
            Block::Text(t) => t.heap_size(),
            Block::Thinking { thinking, signature } => thinking.heap_size() + signature.heap_size(),
            Block::ToolUse(t) => t.heap_size(),
            Block::ToolResult(r) => r.heap_size(),
            Block::Image(i) => i.heap_size(),
            Block::Other(name) => name.heap_size(),
        }
    }
}

impl HeapSize for ToolUse {
    fn heap_size(&self) -> usize {
        self.id.heap_size() + self.name.heap_size() + self.input.heap_size()
    }
}

impl HeapSize for ToolResultBlock {
    fn heap_size(&self) -> usize {
        self.tool_use_id.heap_size() + self.texts.heap_size()
    }
}

impl HeapSize for Image {
    fn heap_size(&self) -> usize {
        self.source_type.heap_size() + self.media_type.heap_size() + self.data.heap_size()
    }
}

impl HeapSize for ToolUseResult {
    fn heap_size(&self) -> usize {
        self.status.heap_size()
            + self.stdout.heap_size()
            + self.stderr.heap_size()
            + self.agent_id.heap_size()
            + self.prompt.heap_size()
            + self.file_path.heap_size()
            + self.file_content.heap_size()
            + self.first_content_text.heap_size()
    }
}

crate::heap::owns_nothing!(Position);

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::records::*;

    /// a record was 424 bytes before its first string; logs of millions of
    /// tiny records paid that per line. Rare fields now live behind one pointer. (232 bytes
    /// when a string content was a `Box<str>` of its own; 240 since it is a slice of the
    /// input, which saves that allocation.)
    #[test]
    fn d1_a_record_stays_small() {
        let size = std::mem::size_of::<Record>();
        eprintln!(
            "Record: {size} bytes, Message: {}, JsonStr: {}",
            std::mem::size_of::<Message>(),
            std::mem::size_of::<JsonStr>()
        );
        assert!(size <= 240, "a Record is {size} bytes");
    }
}
