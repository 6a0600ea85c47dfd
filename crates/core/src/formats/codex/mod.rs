//! OpenAI Codex CLI sessions ("rollouts"), read into the same [`Record`]s as Claude Code so
//! that one pipeline serves both.
//!
//! Three layouts are read (told apart per file, by its start):
//! - **envelope** lines `{"timestamp", "type", "payload"}` (Codex ≥ 0.3x): `session_meta`
//!   (possibly several after a resume or fork: the first names the session),
//!   `turn_context`, `response_item`, `event_msg`, `compacted`;
//! - **bare** lines (2025): a header `{id, timestamp, instructions, git?}`, then response
//!   items without envelope and `{"record_type":"state"}` markers;
//! - **single object** `.json` sessions of the TypeScript CLI (`{"session", "items"}`),
//!   whose items may also be Chat-Completions messages.
//!
//! How lines map onto records:
//!
//! | line | record |
//! |---|---|
//! | `event_msg` `user_message` | `user` prompt: the typed text and images (when the file has any such event) |
//! | `response_item` `message`, role `user` | `user` prompt only in files without `user_message` events, and only when it is not injected context (`<environment_context>`, `<user_instructions>`, `# AGENTS.md instructions`, `<turn_aborted>`, ...) |
//! | `message`, role `assistant` | `assistant` text |
//! | `reasoning` | `assistant` thinking: the summary, then readable content |
//! | `function_call`, `custom_tool_call`, `local_shell_call`, `tool_search_call` | `assistant` `tool_use` (id: `call_id`) |
//! | `web_search_call`, `image_generation_call` | `assistant` `tool_use`, and a result made from its status when the response ends |
//! | `function_call_output`, `custom_tool_call_output`, `tool_search_output` | `user` holding a `tool_result` (failing on a non-zero exit code or `success: false`) |
//! | `message`, role `developer` or `system` | `system`, subtype `developer_message` |
//! | `compacted`; `context_compacted` without one before it | `system` `compact_boundary` with `compact_metadata` |
//! | `event_msg` `turn_aborted`, `error`, `thread_rolled_back` | `system` of that subtype |
//! | `exec_command_end`, `patch_apply_end`, `mcp_tool_call_end` | the verdict of their call's result |
//! | `token_count` | the tokens of the last assistant record |
//! | `turn_context` | the model of the records after it |
//!
//! The assistant records of one model response (the reasoning, text and calls between two
//! tool outputs or prompts) share a message id, so that they group into one turn. Every
//! record's uuid is `<thread id>:<line>`, its parent the record before it. Every line is
//! counted by its type (`response_item:function_call`, `event_msg:token_count`, ...); the
//! types [`is_known_type`] does not know are reported in the diagnostics.

mod act;
mod events;
mod items;
mod legacy;
mod prepare;
mod reader;
mod text;
mod verdict;
mod wire;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use crate::formats::claude_code::cost::fixed_cost;
use crate::formats::claude_code::parse::{LineError, ParsedFile};
use crate::formats::claude_code::records::Position;
#[cfg(doc)]
use crate::formats::claude_code::records::Record;
use crate::formats::input::FileRole;
use crate::json::frame;
use crate::json::lenient;
use crate::json::quick;
use crate::memory_bound::RecordBudget;
use act::{LineContext, Prepared};
use prepare::{prepare_line, LineText};
use rayon::prelude::*;
use reader::Reading;
use text::Texts;
use wire::Payload;

/// What a rollout says of its thread (its first `session_meta`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodexMeta {
    /// The thread's id.
    pub id: Option<String>,
    /// The thread that spawned this one (`source.subagent.thread_spawn.parent_thread_id`,
    /// or `parent_thread_id` at the top).
    pub parent_thread_id: Option<String>,
    /// The kind of sub-agent this thread is (`thread_spawn`, `review`, `compact`, ...),
    /// when its source is a sub-agent.
    pub subagent: Option<String>,
    /// `agent_role` (or `agent_type`) of a spawned agent.
    pub agent_role: Option<String>,
    /// `agent_nickname` of a spawned agent.
    pub agent_nickname: Option<String>,
}

impl CodexMeta {
    /// The meta of a `session_meta` payload.
    fn of_payload(p: &Payload<'_>) -> CodexMeta {
        let source: Value = p
            .source
            .and_then(|raw| quick::from_str(raw.get()).ok())
            .unwrap_or_default();
        let sub = source.get("subagent");
        let spawn = sub.and_then(|s| s.get("thread_spawn"));
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let subagent = sub.map(|s| match s {
            Value::String(kind) => kind.clone(),
            Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
            _ => String::new(),
        });
        CodexMeta {
            id: p.id.as_deref().map(str::to_owned),
            parent_thread_id: text(spawn.and_then(|s| s.get("parent_thread_id")))
                .or_else(|| p.parent_thread_id.as_deref().map(str::to_owned)),
            subagent,
            agent_role: text(spawn.and_then(|s| s.get("agent_role").or_else(|| s.get("agent_type"))))
                .or_else(|| p.agent_role.as_deref().map(str::to_owned)),
            agent_nickname: text(spawn.and_then(|s| s.get("agent_nickname")))
                .or_else(|| p.agent_nickname.as_deref().map(str::to_owned)),
        }
    }
}

/// A rollout read: what it says of its thread, and its records.
pub struct CodexFile {
    /// The first `session_meta` (or header).
    pub meta: CodexMeta,
    /// The records, lines, bad lines and counts.
    pub parsed: ParsedFile,
}

/// The first line's fields that tell a rollout.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Probe {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    payload: Option<serde::de::IgnoredAny>,
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "wire::present")]
    instructions: bool,
    #[serde(deserialize_with = "lenient::string")]
    timestamp: Option<String>,
}

/// True when `data` is a Codex rollout: its first line is an envelope of a rollout type,
/// or the older layout's header (`id`, `timestamp` and `instructions`, no `type`), or the
/// whole file is one `{"session", "items"}` object.
pub fn looks_like(data: &[u8]) -> bool {
    let first = frame::lines(data).next();
    let probe = first.and_then(|l| serde_json::from_slice::<Probe>(l.bytes).ok());
    if let Some(p) = probe {
        let envelope = matches!(
            p.kind.as_deref(),
            Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
        ) && p.payload.is_some();
        let header = p.kind.is_none() && p.id.is_some() && p.timestamp.is_some() && p.instructions;
        if envelope || header {
            return true;
        }
    }
    legacy::is_single_object(data)
}

/// What the first line of a rollout says of its thread (`None` when it says nothing).
pub fn read_meta(data: &[u8]) -> Option<CodexMeta> {
    let first = frame::lines(data).next()?;
    let line: wire::WireLine<'_> = serde_json::from_slice(first.bytes).ok()?;
    match (line.kind.as_deref(), line.payload) {
        (Some("session_meta"), wire::Body::Item(p)) => Some(CodexMeta::of_payload(&p)),
        (None, wire::Body::Absent) if line.id.is_some() => Some(CodexMeta {
            id: line.id,
            ..CodexMeta::default()
        }),
        _ => None,
    }
}

/// The main rollout among a session's files and each file's role: the main one is the
/// first whose thread was not spawned by another given thread; every other file is a
/// sub-agent's.
pub fn session_roles(files: &[&[u8]]) -> (usize, Vec<FileRole>) {
    let metas: Vec<Option<CodexMeta>> = files.iter().map(|f| read_meta(f)).collect();
    let ids: Vec<&str> = metas.iter().flatten().filter_map(|m| m.id.as_deref()).collect();
    let main = metas
        .iter()
        .position(|m| {
            m.as_ref()
                .and_then(|m| m.parent_thread_id.as_deref())
                .is_none_or(|p| !ids.contains(&p))
        })
        .unwrap_or(0);
    let roles = (0..files.len())
        .map(|i| {
            if i == main {
                FileRole::Main
            } else {
                FileRole::SubAgent
            }
        })
        .collect();
    (main, roles)
}

/// True when the typed prompts of `data` are its `user_message` events.
fn prompts_from_events(data: &[u8]) -> bool {
    memchr::memmem::find(data, br#""type":"user_message""#).is_some()
}

/// The bytes of a rollout read as one batch: an eighth of the file, at least
/// [`MIN_BATCH_BYTES`] and at most [`MAX_BATCH_BYTES`]. A batch's lines are prepared on
/// every core while the batch before is taken, and the cores wait for each other between
/// batches: a large file in few batches spends little time waiting, a small one still
/// has several batches to overlap.
fn batch_bytes(file_len: usize) -> usize {
    (file_len / 8).clamp(MIN_BATCH_BYTES, MAX_BATCH_BYTES)
}

/// The smallest batch (see [`batch_bytes`]).
const MIN_BATCH_BYTES: usize = 256 * 1024;

/// The largest batch (see [`batch_bytes`]): what a batch's lines and acts hold stays small
/// whatever the file.
const MAX_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// The most lines in one batch, whatever its bytes: a file of tiny lines holds no more
/// lines and acts at once than a file of ordinary ones.
const MAX_BATCH_LINES: usize = 16 * 1024;

/// Reads the lines of a JSONL rollout into `reading`: the file framed a batch at a time,
/// each batch's lines prepared on every core while the batch before is taken, in order
/// (the result is that of a sequential read); stops once `budget` is exhausted. Only two
/// batches' lines are held at a time.
fn read_lines<'a>(
    reading: &mut Reading,
    cx: &LineContext<'_>,
    data: &'a [u8],
    text: Option<&'a str>,
    budget: &RecordBudget,
) {
    // About one record per line of a kilobyte (a rollout's lines average more), never
    // more than the file could make: no vector of records grown (and moved) again and
    // again as the file is read, and no room set aside for records a file of tiny lines
    // will never be let to make.
    reading.parsed.records.reserve(data.len() / 1024);
    let size = batch_bytes(data.len());
    let file = reading.file;
    let line_text = |bytes: &[u8]| -> Option<&str> {
        let start = (bytes.as_ptr() as usize).checked_sub(text?.as_ptr() as usize)?;
        text?.get(start..start.checked_add(bytes.len())?)
    };
    // The next batch framed (by the one framing of the whole file, pulled a batch at a
    // time) and prepared; `None` once the file has no more lines.
    let prepare = |framing: &mut frame::Lines<'a>, mut batch: Batch<'a>| -> Option<Batch<'a>> {
        batch.lines.clear();
        next_batch_lines(framing, size, MAX_BATCH_LINES, &mut batch.lines);
        if batch.lines.is_empty() {
            return None;
        }
        batch
            .lines
            .par_iter()
            .map(|line| {
                let pos = Position {
                    file,
                    line: line.number,
                    seq: 0,
                };
                let read = line_text(line.bytes).map_or(LineText::Bytes(line.bytes), LineText::Text);
                prepare_line(cx, read, pos)
            })
            .collect_into_vec(&mut batch.prepared);
        Some(batch)
    };
    let mut framing = frame::lines(data);
    let mut spare = Batch::default();
    let mut ready = prepare(&mut framing, Batch::default());
    while let Some(mut batch) = ready.take() {
        // The taking starts at once on this thread; another takes up the preparing, which
        // this one joins when it is done.
        let recycled = std::mem::take(&mut spare);
        let (taken, next) = rayon::join(
            || take_batch(reading, &mut batch, budget),
            || prepare(&mut framing, recycled),
        );
        if !taken {
            return;
        }
        spare = batch;
        ready = next;
    }
}

/// A batch's lines and what each was read as; emptied batches are filled again, so the
/// vectors of a file's batches are allocated once.
#[derive(Default)]
struct Batch<'a> {
    lines: Vec<frame::Line<'a>>,
    prepared: Vec<Result<Prepared, LineError>>,
}

/// Adds the next lines of `framing` to `lines` (empty): at most `max_lines`, and none
/// after the one that takes the framing `size` bytes past where it was. The file is cut
/// into batches as it is framed, with no pass over it beforehand to find where they
/// start or how many lines come before each.
fn next_batch_lines<'a>(
    framing: &mut frame::Lines<'a>,
    size: usize,
    max_lines: usize,
    lines: &mut Vec<frame::Line<'a>>,
) {
    let end = framing.offset().saturating_add(size);
    while lines.len() < max_lines && framing.offset() < end {
        match framing.next() {
            Some(line) => lines.push(line),
            None => break,
        }
    }
}

/// `data` cut into pieces of about `size` bytes, each ending just after a `\n` (the last
/// at the end of the data): a character never spans two pieces.
fn pieces(data: &[u8], size: usize) -> Vec<&[u8]> {
    let mut pieces = Vec::with_capacity(data.len() / size.max(1) + 1);
    let mut rest = data;
    while !rest.is_empty() {
        let by_size = memchr::memchr(b'\n', rest.get(size..).unwrap_or_default())
            .map_or(rest.len(), |at| size + at + 1);
        let (piece, after) = rest.split_at(by_size.min(rest.len()));
        pieces.push(piece);
        rest = after;
    }
    pieces
}

/// `data` as text when it is UTF-8 throughout, checked piece by piece on every core.
fn utf8_text_parallel(data: &Bytes) -> Option<bytestring::ByteString> {
    let valid = pieces(data, data.len() / UTF8_PIECES + 1)
        .par_iter()
        .all(|piece| simdutf8::basic::from_utf8(piece).is_ok());
    // SAFETY: every piece was just checked to be valid UTF-8, and the pieces are the whole
    // of `data` cut at line ends (no character is cut); `Bytes` never changes its bytes.
    valid.then(|| unsafe { bytestring::ByteString::from_bytes_unchecked(data.clone()) })
}

/// Pieces a file's UTF-8 is checked in, on every core.
const UTF8_PIECES: usize = 8;

/// Takes a batch of lines as they were prepared; false once `budget` is exhausted.
fn take_batch(reading: &mut Reading, batch: &mut Batch<'_>, budget: &RecordBudget) -> bool {
    for (line, read) in batch.lines.iter().zip(batch.prepared.drain(..)) {
        let before = reading.parsed.records.len();
        reading.line(line, read);
        let cost = reading.parsed.records[before..].iter().map(fixed_cost).sum();
        if !budget.charge(cost) {
            return false;
        }
    }
    true
}

/// Reads a rollout (file number `file` of its session).
pub fn parse_codex_file(file: u32, data: &[u8]) -> CodexFile {
    parse_codex_file_within(file, &Bytes::copy_from_slice(data), &RecordBudget::unbounded())
}

/// [`parse_codex_file`] of `data` itself (its records keep slices of it), charging the
/// records kept to `budget` and stopping once it is exhausted (the result is then
/// incomplete: the caller refuses the session).
pub fn parse_codex_file_within(file: u32, data: &Bytes, budget: &RecordBudget) -> CodexFile {
    let mut reading = Reading::new(file);
    // A file that is not UTF-8 throughout has its texts copied (its bad lines are
    // reported as such); any other keeps them as slices of itself.
    let buffer = utf8_text_parallel(data).map(std::sync::Arc::new);
    let cx = LineContext {
        texts: Texts::in_buffer(buffer.as_ref()),
        prompts_from_events: prompts_from_events(data),
    };
    if legacy::is_single_object(data) {
        legacy::read(&mut reading, &cx, data);
        let cost = reading.parsed.records.iter().map(fixed_cost).sum();
        budget.charge(cost);
    } else {
        read_lines(&mut reading, &cx, data, buffer.as_deref().map(|b| &**b), budget);
    }
    let meta = reading.meta.clone();
    CodexFile {
        meta,
        parsed: reading.finish(),
    }
}

/// The line types a rollout may hold that the reader knows (a line of any other type is
/// kept only as a count, reported in the diagnostics as unknown).
pub fn is_known_type(name: &str) -> bool {
    const ITEMS: [&str; 16] = [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
        "tool_search_output",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
        "agent_message",
        "additional_tools",
    ];
    const EVENTS: [&str; 36] = [
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
        "token_count",
        "turn_aborted",
        "error",
        "thread_rolled_back",
        "context_compacted",
        "task_started",
        "task_complete",
        "turn_started",
        "turn_complete",
        "exec_command_end",
        "patch_apply_end",
        "mcp_tool_call_end",
        "web_search_end",
        "image_generation_end",
        "view_image_tool_call",
        "collab_agent_spawn_end",
        "collab_agent_interaction_end",
        "collab_waiting_end",
        "collab_close_end",
        "entered_review_mode",
        "exited_review_mode",
        "undo_completed",
        "item_completed",
        "sub_agent_activity",
        "thread_goal_updated",
        "thread_name_updated",
        "thread_settings_applied",
        "guardian_assessment",
        "dynamic_tool_call_request",
        "dynamic_tool_call_response",
        "stream_error",
    ];
    if let Some(item) = name.strip_prefix("response_item:") {
        return ITEMS.contains(&item);
    }
    if let Some(event) = name.strip_prefix("event_msg:") {
        return EVENTS.contains(&event);
    }
    matches!(
        name,
        "session_meta" | "turn_context" | "compacted" | "header" | "session" | "record_type:state"
    )
}

#[cfg(test)]
mod tests;
