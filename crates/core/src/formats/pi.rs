//! pi agent sessions (`docs/spec/pi/session.md`, `docs/spec/session-tree-format.md`), read into the
//! same [`Record`]s as Claude Code so that one pipeline serves both.
//!
//! A pi session is one JSONL file: a `{"type":"session"}` header, then entries. Versions:
//! - **v1**: linear, no ids. Migrated in memory (the file is never rewritten): entry `i`
//!   gets id `%08x` of its line index, its parent is the entry before it, and a compaction's
//!   `firstKeptEntryIndex` (a line index, the header being 0) becomes `firstKeptEntryId`.
//! - **v2**: a tree, with `id`/`parentId` (pi's shipped format) or `uuid`/`parentUuid` (the
//!   design document's; there the header has a uuid too and is the root).
//! - **v3**: v2 with the `hookMessage` role renamed `custom`.
//!
//! How entries map onto records:
//!
//! | entry | record |
//! |---|---|
//! | `message`, role `user` | `user` with the message's content |
//! | `message`, role `assistant` | `assistant`: text, thinking and `toolCall` blocks (as `tool_use`); an empty aborted message shows its `errorMessage` |
//! | `message`, role `toolResult` | `user` holding a `tool_result` block (`toolCallId`, `isError`) |
//! | `message`, role `bashExecution` | `system`, subtype `bash_execution` (`$ command` and output) |
//! | `message`, role `custom` / `hookMessage`, `custom_message` | `system`, subtype `custom_message` |
//! | `compaction` | `system`, subtype `compact_boundary`, the summary as content |
//! | `branch_summary`, `stack_summary` | `system`, subtype `branch_summary` |
//! | `model_change`, `thinking_level_change`, `custom`, `label`, `session_info` | kept in the tree, shown nowhere |

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::claude_code::parse::{check_line_length, BadLine, LineError, ParsedFile};
use super::claude_code::records::{
    Block, Content, Id, Image, JsonStr, Message, Position, RawJson, Record, RecordKind, ToolResultBlock,
    ToolUse, Usage,
};
use crate::formats::claude_code::cost::fixed_cost;
use crate::heap::HeapSize;
use crate::json::frame;
use crate::json::lenient::{self, ObjectOr};
use crate::json::time::{iso_millis, parse_millis};
use crate::memory_bound::RecordBudget;

/// The header line of a pi session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PiHeader {
    /// `version` (1 when absent).
    pub version: u32,
    /// The session's id.
    pub id: Option<String>,
    /// Its working directory.
    pub cwd: Option<String>,
}

/// True when `first_line` is a pi session header (`"type":"session"`).
pub fn is_pi_header(first_line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "type", default, deserialize_with = "lenient::string")]
        kind: Option<String>,
    }
    serde_json::from_slice::<Probe>(first_line).is_ok_and(|p| p.kind.as_deref() == Some("session"))
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireEntry {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::nullable_string")]
    parent_id: Option<Option<String>>,
    #[serde(deserialize_with = "lenient::string")]
    uuid: Option<String>,
    #[serde(deserialize_with = "lenient::nullable_string")]
    parent_uuid: Option<Option<String>>,
    #[serde(deserialize_with = "timestamp")]
    timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::count")]
    version: Option<u64>,
    #[serde(deserialize_with = "lenient::string")]
    cwd: Option<String>,
    message: ObjectOr<WireMessage>,
    #[serde(deserialize_with = "lenient::string")]
    summary: Option<String>,
    #[serde(deserialize_with = "lenient::count")]
    first_kept_entry_index: Option<u64>,
    #[serde(deserialize_with = "lenient::string")]
    first_kept_entry_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    first_kept_entry_uuid: Option<String>,
    tokens_before: Option<Box<RawValue>>,
    #[serde(deserialize_with = "lenient::string")]
    custom_type: Option<String>,
    content: PiContent,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireMessage {
    #[serde(deserialize_with = "lenient::string")]
    role: Option<String>,
    content: PiContent,
    #[serde(deserialize_with = "lenient::string")]
    tool_call_id: Option<String>,
    #[serde(deserialize_with = "lenient::flag")]
    is_error: bool,
    #[serde(deserialize_with = "lenient::string")]
    command: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    output: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    model: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    error_message: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    summary: Option<String>,
    #[serde(deserialize_with = "lenient::flag")]
    exclude_from_context: bool,
    usage: ObjectOr<WireUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    #[serde(deserialize_with = "lenient::count")]
    input: Option<u64>,
    #[serde(deserialize_with = "lenient::count")]
    output: Option<u64>,
}

/// pi content: a string or an array of pi blocks.
#[derive(Default)]
struct PiContent(Option<Content>);

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireBlock {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    thinking: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    name: Option<String>,
    arguments: Option<Box<RawValue>>,
    #[serde(deserialize_with = "lenient::string")]
    data: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    mime_type: Option<String>,
}

impl WireBlock {
    fn into_block(self) -> Block {
        match self.kind.as_deref() {
            Some("text") => Block::Text(JsonStr::new(self.text.as_deref().unwrap_or_default())),
            Some("thinking") => Block::Thinking {
                thinking: JsonStr::new(self.thinking.as_deref().unwrap_or_default()),
                signature: None,
            },
            Some("toolCall") => Block::ToolUse(ToolUse {
                id: self.id.unwrap_or_default(),
                name: self.name.unwrap_or_default(),
                input: self.arguments.map(|r| RawJson::copy_of(r.get())),
            }),
            Some("image") => Block::Image(Image {
                source_type: Some("base64".to_owned()),
                media_type: self.mime_type,
                data: self.data.as_deref().map(JsonStr::new),
            }),
            _ => Block::Other(self.kind),
        }
    }
}

impl<'de> Deserialize<'de> for PiContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PiContent;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E>(self, v: &str) -> Result<PiContent, E> {
                Ok(PiContent(Some(Content::Text(JsonStr::new(v)))))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PiContent, A::Error> {
                let mut blocks = Vec::new();
                while let Some(b) = seq.next_element::<ObjectOr<WireBlock>>()? {
                    blocks.push(b.0.map_or(Block::Other(None), WireBlock::into_block));
                }
                Ok(PiContent(Some(Content::Blocks(blocks))))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<PiContent, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(PiContent(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<PiContent, E> {
                Ok(PiContent(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<PiContent, E> {
                Ok(PiContent(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<PiContent, E> {
                Ok(PiContent(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<PiContent, E> {
                Ok(PiContent(None))
            }
            fn visit_unit<E>(self) -> Result<PiContent, E> {
                Ok(PiContent(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An ISO string, or milliseconds since the epoch (pi writes both).
fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v: Option<Value> = Option::deserialize(d).unwrap_or(None);
    Ok(match v {
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => n.as_f64().map(|ms| iso_millis(ms as i64)),
        _ => None,
    })
}

/// The text of pi content (string, or text blocks joined with newlines).
fn content_text(c: &Option<Content>) -> String {
    match c {
        Some(Content::Text(s)) => s.text().into_owned(),
        Some(Content::Blocks(b)) => b
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.text()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Content::Absent) | None => String::new(),
    }
}

/// A pi file read: its header and records.
pub struct PiFile {
    /// The header (version 1 when the file has none).
    pub header: PiHeader,
    /// The records, lines, bad lines.
    pub parsed: ParsedFile,
}

/// Reads a pi session file (file number `file` of its session).
pub fn parse_pi_file(file: u32, data: &[u8]) -> PiFile {
    parse_pi_file_within(file, data, &RecordBudget::unbounded())
}

/// [`parse_pi_file`], charging the records kept to `budget` and stopping once it is
/// exhausted (the result is then incomplete: the caller refuses the session).
pub fn parse_pi_file_within(file: u32, data: &[u8], budget: &RecordBudget) -> PiFile {
    let mut reading = PiReading::new(file);
    for (this_index, line) in frame::lines(data).enumerate() {
        let Some(record) = reading.line_record(this_index, &line) else {
            continue;
        };
        let within = budget.charge(fixed_cost(&record));
        reading.parsed.records.push(record);
        if !within {
            break;
        }
    }
    reading.finish()
}

/// What reading a pi file carries from line to line.
struct PiReading {
    /// The file's number in its session.
    file: u32,
    /// The header (version 1 until a header says otherwise).
    header: PiHeader,
    /// True when the header has a uuid, which makes it the root.
    header_is_root: bool,
    /// The id of the last entry read: a v1 entry's parent.
    previous_id: Option<String>,
    /// The v1 compactions that name their first kept entry by line index: (record, line
    /// index).
    pending_first_kept: Vec<(usize, usize)>,
    /// The id of each line index's entry, if any; v1 ids: one per line index (the header is
    /// line index 0).
    id_of_index: Vec<Option<String>>,
    /// The lines and records read so far.
    parsed: ParsedFile,
}

impl PiReading {
    fn new(file: u32) -> Self {
        PiReading {
            file,
            header: PiHeader {
                version: 1,
                ..PiHeader::default()
            },
            header_is_root: false,
            previous_id: None,
            pending_first_kept: Vec::new(),
            id_of_index: Vec::new(),
            parsed: ParsedFile::default(),
        }
    }

    /// Reads `line`, at line index `this_index`: the record of its entry, or `None` when
    /// the line is bad (it is noted) or is the header (it is taken).
    fn line_record(&mut self, this_index: usize, line: &frame::Line<'_>) -> Option<Record> {
        self.parsed.lines += 1;
        self.id_of_index.push(None);
        let read = check_line_length(line.bytes.len()).and_then(|()| {
            serde_json::from_slice::<WireEntry>(line.bytes)
                .map_err(|e| LineError::of_object_line(line.bytes, &e))
        });
        let entry = match read {
            Ok(entry) => entry,
            Err(error) => {
                self.parsed.bad_lines.push(BadLine {
                    line: line.number,
                    error,
                    unterminated: !line.terminated,
                });
                return None;
            }
        };
        let pos = Position {
            file: self.file,
            line: line.number,
            seq: 0,
        };
        if entry.kind.as_deref() == Some("session")
            && self.header.id.is_none()
            && self.parsed.records.is_empty()
        {
            self.take_header(entry, pos, this_index);
            return None;
        }
        Some(self.record_with_ids(entry, pos, this_index))
    }

    /// Takes the header, read at `pos` from line index `this_index`.
    fn take_header(&mut self, entry: WireEntry, pos: Position, this_index: usize) {
        self.header.version = entry.version.map_or(1, |v| v as u32);
        self.header.id = entry.id.clone().or(entry.uuid.clone());
        self.header.cwd = entry.cwd.clone();
        // The design document's v2 gives the header a uuid and makes it the root.
        if let Some(uuid) = entry.uuid.clone() {
            self.header_is_root = true;
            self.id_of_index[this_index] = Some(uuid.clone());
            self.previous_id = Some(uuid.clone());
            self.parsed.records.push(other_record(
                pos,
                "session",
                Some(uuid),
                Some(None),
                entry.timestamp,
            ));
        }
    }

    /// The record of `entry`, read at `pos` from line index `this_index`, with its ids.
    fn record_with_ids(&mut self, entry: WireEntry, pos: Position, this_index: usize) -> Record {
        // Ids: v2/v3 carry them; v1 gets them from its line index, chained linearly.
        let explicit = entry.id.clone().or(entry.uuid.clone());
        let (uuid, parent) = match explicit {
            Some(id) => {
                let parent = entry
                    .parent_id
                    .clone()
                    .or(entry.parent_uuid.clone())
                    .unwrap_or(None);
                (id, parent)
            }
            None => (format!("{this_index:08x}"), self.previous_id.clone()),
        };
        self.id_of_index[this_index] = Some(uuid.clone());
        self.previous_id = Some(uuid.clone());
        let record_index = self.parsed.records.len();
        let (mut record, first_kept_index) = entry_record(entry, pos, uuid, parent);
        if let Some(index) = first_kept_index {
            self.pending_first_kept.push((record_index, index));
        }
        if self.header_is_root && record.parent_uuid.is_none() {
            record.parent_uuid = Some(None);
        }
        record
    }

    /// The file read, once every line is: the v1 compactions' first kept entries named by
    /// id, and the records counted.
    fn finish(self) -> PiFile {
        let PiReading {
            header,
            pending_first_kept,
            id_of_index,
            mut parsed,
            ..
        } = self;
        // v1 compactions name their first kept entry by line index.
        for (record, index) in pending_first_kept {
            if let Some(Some(id)) = id_of_index.get(index) {
                let extra = parsed.records[record].extra_mut();
                extra.first_kept = Some(id.clone());
                extra.compact_metadata = compact_metadata(extra.compact_metadata.take(), Some(id));
            }
        }
        parsed.count_kept_records();
        PiFile { header, parsed }
    }
}

fn other_record(
    pos: Position,
    kind: &str,
    uuid: Option<String>,
    parent: Option<Option<String>>,
    ts: Option<String>,
) -> Record {
    Record {
        pos,
        kind: RecordKind::Other(Some(kind.to_owned())),
        uuid: uuid.map(Id::from),
        parent_uuid: parent.map(|p| p.map(Id::from)),
        time: ts.as_deref().and_then(parse_millis),
        timestamp: ts.map(String::into_boxed_str),
        ..Record::default()
    }
}

/// `{"tokensBefore": ..., "firstKeptEntryId": ...}` as raw JSON, keeping `tokensBefore` as
/// written.
fn compact_metadata(previous: Option<RawJson>, first_kept: Option<&str>) -> Option<RawJson> {
    let mut map = serde_json::Map::new();
    if let Some(prev) =
        previous.and_then(|p| serde_json::from_str::<serde_json::Map<String, Value>>(p.get()).ok())
    {
        map = prev;
    }
    if let Some(id) = first_kept {
        map.insert("firstKeptEntryId".to_owned(), Value::String(id.to_owned()));
    }
    Some(RawJson::copy_of(&Value::Object(map).to_string()))
}

/// The record of `entry`, not the header, given its ids; with the line index of its first
/// kept entry when it is a compaction that names that entry by line index only (v1), to be
/// named by id once every line is read.
fn entry_record(
    mut entry: WireEntry,
    pos: Position,
    uuid: String,
    parent: Option<String>,
) -> (Record, Option<usize>) {
    let kind = entry.kind.take();
    let ts = entry.timestamp.clone();
    let mut r = other_record(
        pos,
        kind.as_deref().unwrap_or("(missing)"),
        Some(uuid),
        Some(parent),
        ts,
    );
    if kind.is_none() {
        r.kind = RecordKind::Other(None);
    }
    let mut first_kept_index = None;
    match kind.as_deref() {
        Some("message") => make_message(&mut r, entry.message.0.unwrap_or_default()),
        Some("compaction") => first_kept_index = make_compaction(&mut r, entry),
        Some("branch_summary" | "stack_summary") => {
            make_system(&mut r, "branch_summary", entry.summary.unwrap_or_default())
        }
        Some("custom_message") => make_system(&mut r, "custom_message", content_text(&entry.content.0)),
        _ => {}
    }
    (r, first_kept_index)
}

/// Makes `r` a `system` record of subtype `subtype` showing `text`.
fn make_system(r: &mut Record, subtype: &str, text: String) {
    r.kind = RecordKind::System;
    let extra = r.extra_mut();
    extra.subtype = Some(subtype.to_owned());
    extra.content = Some(JsonStr::new(&text));
}

/// Makes `r` the record of message `m`, by its role (an unknown role leaves it as it is).
fn make_message(r: &mut Record, mut m: WireMessage) {
    let role = m.role.take();
    match role.as_deref() {
        Some("user") => {
            r.kind = RecordKind::User;
            r.message = Some(Message {
                content: m.content.0.unwrap_or_default(),
                ..Message::default()
            });
        }
        Some("assistant") => {
            r.kind = RecordKind::Assistant;
            r.message = Some(assistant_message(m));
        }
        Some("toolResult") => {
            r.kind = RecordKind::User;
            r.message = Some(tool_result_message(m));
        }
        Some("bashExecution") => {
            let text = format!(
                "$ {}\n{}",
                m.command.unwrap_or_default(),
                m.output.unwrap_or_default()
            );
            make_system(r, "bash_execution", text);
            r.is_meta = m.exclude_from_context;
        }
        Some("custom" | "hookMessage") => make_system(r, "custom_message", content_text(&m.content.0)),
        Some("branchSummary") => make_system(r, "branch_summary", m.summary.unwrap_or_default()),
        Some("compactionSummary") => make_system(r, "compaction_summary", m.summary.unwrap_or_default()),
        _ => {}
    }
}

/// The message of an assistant turn: its blocks, model and usage.
fn assistant_message(m: WireMessage) -> Message {
    // A turn reads blocks: string content (the design document's examples)
    // is one text block.
    let mut content = match m.content.0 {
        Some(Content::Text(t)) => Content::Blocks(vec![Block::Text(t)]),
        Some(c) => c,
        None => Content::Blocks(Vec::new()),
    };
    let empty = match &content {
        Content::Blocks(b) => b.is_empty(),
        Content::Text(t) => t.is_empty(),
        Content::Absent => true,
    };
    if let (true, Some(err)) = (empty, m.error_message) {
        content = Content::Blocks(vec![Block::Text(JsonStr::new(&format!("[error] {err}")))]);
    }
    Message {
        id: None,
        model: m.model.map(Id::from),
        content,
        usage: m.usage.0.map(|u| {
            Box::new(Usage {
                input_tokens: u.input.unwrap_or(0),
                output_tokens: u.output.unwrap_or(0),
            })
        }),
    }
}

/// The message of a tool result: one `tool_result` block holding the result's texts.
fn tool_result_message(m: WireMessage) -> Message {
    let texts = match m.content.0 {
        Some(Content::Text(t)) => vec![t],
        Some(Content::Blocks(b)) => b
            .into_iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Message {
        content: Content::Blocks(vec![Block::ToolResult(ToolResultBlock {
            tool_use_id: m.tool_call_id,
            texts,
            is_error: m.is_error,
        })]),
        ..Message::default()
    }
}

/// Makes `r` the `compact_boundary` record of compaction `entry`. Returns the line index of
/// the first kept entry when the compaction names it by line index only.
fn make_compaction(r: &mut Record, entry: WireEntry) -> Option<usize> {
    make_system(r, "compact_boundary", entry.summary.unwrap_or_default());
    let first_kept = entry.first_kept_entry_id.or(entry.first_kept_entry_uuid);
    let tokens = entry
        .tokens_before
        .map(|t| RawJson::copy_of(&format!(r#"{{"tokensBefore":{}}}"#, t.get())));
    let extra = r.extra_mut();
    extra.compact_metadata = compact_metadata(tokens, first_kept.as_deref());
    extra.first_kept = first_kept;
    match (&extra.first_kept, entry.first_kept_entry_index) {
        (None, Some(i)) => Some(i as usize),
        _ => None,
    }
}

impl HeapSize for PiHeader {
    fn heap_size(&self) -> usize {
        self.id.heap_size() + self.cwd.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::pi::*;

    fn parse(text: &str) -> PiFile {
        parse_pi_file(0, text.as_bytes())
    }

    #[test]
    fn detects_the_header() {
        assert!(is_pi_header(br#"{"type":"session","id":"x"}"#));
        assert!(!is_pi_header(br#"{"type":"user"}"#));
        assert!(!is_pi_header(b"[1]"));
    }

    #[test]
    fn v1_is_migrated_to_a_linear_tree() {
        let f = parse(concat!(
            r#"{"type":"session","id":"S","timestamp":"2025-01-01T00:00:00Z"}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}}],"usage":{"input":5,"output":7}}}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:03Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"A"}],"isError":false}}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04Z","summary":"S1","firstKeptEntryIndex":2,"tokensBefore":100}"#,
        ));
        assert_eq!(
            f.header,
            PiHeader {
                version: 1,
                id: Some("S".into()),
                cwd: None
            }
        );
        let r = &f.parsed.records;
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].uuid.as_deref(), Some("00000001"));
        assert_eq!(r[0].parent_uuid, Some(None));
        assert_eq!(r[1].raw_parent(), Some("00000001"));
        assert_eq!(r[1].kind, RecordKind::Assistant);
        assert!(
            matches!(&r[1].blocks()[0], Block::ToolUse(t) if t.id == "c1" && t.input.as_ref().unwrap().get() == r#"{"path":"a"}"#)
        );
        assert_eq!(
            r[1].message.as_ref().unwrap().usage.as_deref(),
            Some(&Usage {
                input_tokens: 5,
                output_tokens: 7
            })
        );
        assert_eq!(r[2].first_tool_use_id(), Some("c1"));
        assert!(r[3].is_compact_boundary());
        assert_eq!(r[3].system_content().unwrap().text(), "S1");
        assert_eq!(r[3].first_kept(), Some("00000002"));
        assert_eq!(
            r[3].compact_metadata().unwrap().get(),
            r#"{"tokensBefore":100,"firstKeptEntryId":"00000002"}"#
        );
    }

    #[test]
    fn v3_keeps_its_ids_and_maps_every_entry() {
        let f = parse(concat!(
            r#"{"type":"session","version":3,"id":"S"}"#,
            "\n",
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","data":"AA==","mimeType":"image/png"}]}}"#,
            "\n",
            r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"2025-01-01T00:00:02Z","fromId":"x","summary":"tried A"}"#,
            "\n",
            r#"{"type":"message","id":"c","parentId":"b","timestamp":1735689603000,"message":{"role":"bashExecution","command":"ls","output":"x","exitCode":0}}"#,
            "\n",
            r#"{"type":"model_change","id":"d","parentId":"c","timestamp":"2025-01-01T00:00:04Z","provider":"p","modelId":"m"}"#,
            "\n",
            r#"{"type":"message","id":"e","parentId":"d","timestamp":"2025-01-01T00:00:05Z","message":{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request was aborted."}}"#,
        ));
        assert_eq!(f.header.version, 3);
        let r = &f.parsed.records;
        assert_eq!(r[0].uuid.as_deref(), Some("a"));
        assert!(matches!(&r[0].blocks()[1], Block::Image(i) if i.media_type.as_deref() == Some("image/png")));
        assert_eq!(
            (r[1].kind.clone(), r[1].subtype()),
            (RecordKind::System, Some("branch_summary"))
        );
        assert_eq!(r[2].system_content().unwrap().text(), "$ ls\nx");
        assert_eq!(r[2].timestamp.as_deref(), Some("2025-01-01T00:00:03.000Z"));
        assert_eq!(r[3].kind, RecordKind::Other(Some("model_change".into())));
        assert!(matches!(&r[4].blocks()[0], Block::Text(t) if t == "[error] Request was aborted."));
    }

    #[test]
    fn the_design_documents_v2_makes_the_header_the_root() {
        let f = parse(concat!(
            r#"{"type":"session","version":2,"uuid":"ses1","parentUuid":null,"id":"abc"}"#,
            "\n",
            r#"{"type":"message","uuid":"m1","parentUuid":"ses1","message":{"role":"user","content":"Build a CLI"}}"#,
        ));
        let r = &f.parsed.records;
        assert_eq!(r[0].kind, RecordKind::Other(Some("session".into())));
        assert_eq!(r[1].raw_parent(), Some("ses1"));
        assert_eq!(f.header.id.as_deref(), Some("abc"));
    }
}

/// What [`migrate_to_v3`] holds at its peak for a file of `len` bytes and `newlines` line
/// ends, its input included, at most: the input, the output (the entries as written, each
/// with an id and a parent id added, in a buffer that may have doubled once past its first
/// capacity) and each entry's ids from the first pass (measured by
/// the test `pi_v3_migration_peak_is_within_its_estimate`). The server reserves this much
/// of its render budget before it reads the file.
pub fn migration_estimate(len: usize, newlines: usize) -> usize {
    /// Per line: its ids (a tuple of strings) and the id fields written.
    const PER_LINE: usize = 160;
    len.saturating_mul(4)
        .saturating_add(newlines.saturating_add(1).saturating_mul(PER_LINE))
}

/// The session file in pi's current format (v3), for download: a v1 file gets the ids it
/// was read with (`%08x` of the line index, each entry's parent the one before it) and
/// `firstKeptEntryId` for `firstKeptEntryIndex`; `uuid`/`parentUuid` become `id`/`parentId`
/// (a header that was the root stops being one: its children become roots); the
/// `hookMessage` role becomes `custom`; the header says `version: 3`. Every other field is
/// kept as written. Unreadable lines are left out (they are in the diagnostics).
pub fn migrate_to_v3(data: &[u8]) -> Vec<u8> {
    let ids = V3Ids::of(data);
    let mut out = Vec::with_capacity(data.len() + data.len() / 8);
    for (this, line) in frame::lines(data).enumerate() {
        let Ok(Value::Object(entry)) = serde_json::from_slice::<Value>(line.bytes) else {
            continue;
        };
        out.extend_from_slice(Value::Object(ids.rewrite(this, entry)).to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The ids a file's entries get in v3, found in a first pass so that the second can write
/// each entry as soon as it is read (holding one entry, not the file's).
struct V3Ids {
    /// The line of the header (the first entry, when it is of type `session`).
    header: Option<usize>,
    /// Per line: the entry's id and parent id (None for the header and unreadable lines).
    ids: Vec<Option<(String, Option<String>)>>,
}

impl V3Ids {
    /// Every entry's id and parent: its `id` (else `uuid`) and `parentId` (else
    /// `parentUuid`; none when that is the header's uuid), or for an entry with neither
    /// the `%08x` of its line and the entry before it.
    fn of(data: &[u8]) -> V3Ids {
        let (mut header, mut header_uuid, mut any) = (None, None, false);
        let mut previous: Option<String> = None;
        let mut ids = Vec::new();
        for (this, line) in frame::lines(data).enumerate() {
            ids.push(None);
            let Ok(Value::Object(entry)) = serde_json::from_slice::<Value>(line.bytes) else {
                continue;
            };
            if entry.get("type").and_then(Value::as_str) == Some("session") && !any {
                header = Some(this);
                header_uuid = entry.get("uuid").and_then(Value::as_str).map(str::to_owned);
                any = true;
                continue;
            }
            any = true;
            let text = |keys: [&str; 2]| keys.iter().find_map(|k| entry.get(*k).and_then(Value::as_str));
            let (id, parent) = match text(["id", "uuid"]) {
                Some(id) => {
                    let parent = ["parentId", "parentUuid"]
                        .iter()
                        .find_map(|k| entry.get(*k))
                        .and_then(Value::as_str)
                        .filter(|p| Some(*p) != header_uuid.as_deref())
                        .map(str::to_owned);
                    (id.to_owned(), parent)
                }
                None => (format!("{this:08x}"), previous.clone()),
            };
            previous = Some(id.clone());
            ids[this] = Some((id, parent));
        }
        V3Ids { header, ids }
    }

    /// The entry of line `this` as v3 writes it.
    fn rewrite(
        &self,
        this: usize,
        mut entry: serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        entry.remove("uuid");
        entry.remove("parentUuid");
        if Some(this) == self.header {
            entry.insert("version".to_owned(), Value::from(3));
        } else if let Some(Some((id, parent))) = self.ids.get(this) {
            entry.insert("id".to_owned(), Value::String(id.clone()));
            entry.insert(
                "parentId".to_owned(),
                parent.clone().map_or(Value::Null, Value::String),
            );
            if let Some(kept) = entry.remove("firstKeptEntryUuid") {
                entry.insert("firstKeptEntryId".to_owned(), kept);
            }
            if let Some(Value::Object(m)) = entry.get_mut("message") {
                if m.get("role").and_then(Value::as_str) == Some("hookMessage") {
                    m.insert("role".to_owned(), Value::String("custom".to_owned()));
                }
            }
        }
        if let Some(i) = entry.remove("firstKeptEntryIndex").and_then(|v| v.as_u64()) {
            if let Some(Some((id, _))) = usize::try_from(i).ok().and_then(|i| self.ids.get(i)) {
                entry.insert("firstKeptEntryId".to_owned(), Value::String(id.clone()));
            }
        }
        entry
    }
}

#[cfg(test)]
mod migration_tests {
    use crate::formats::pi::*;

    #[test]
    fn v1_migrates_to_v3_with_the_ids_it_was_read_with() {
        let v1 = concat!(
            r#"{"type":"session","id":"S","timestamp":"2025-01-01T00:00:00Z"}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:02Z","message":{"role":"hookMessage","content":"x"}}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:03Z","summary":"S1","firstKeptEntryIndex":1,"tokensBefore":9}"#,
            "\n",
        );
        let v3 = String::from_utf8(migrate_to_v3(v1.as_bytes())).unwrap();
        let lines: Vec<Value> = v3.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["version"], 3);
        assert_eq!(lines[1]["id"], "00000001");
        assert_eq!(lines[1]["parentId"], Value::Null);
        assert_eq!(lines[2]["parentId"], "00000001");
        assert_eq!(lines[2]["message"]["role"], "custom");
        assert_eq!(lines[3]["firstKeptEntryId"], "00000001");
        assert!(lines[3].get("firstKeptEntryIndex").is_none());
        // Reading the migrated file gives the same tree as reading the original.
        let a = parse_pi_file(0, v1.as_bytes()).parsed.records;
        let b = parse_pi_file(0, v3.as_bytes()).parsed.records;
        let shape = |r: &[Record]| {
            r.iter()
                .map(|r| {
                    (
                        r.uuid.clone(),
                        r.raw_parent().map(str::to_owned),
                        r.first_kept().map(str::to_owned),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(&a), shape(&b));
    }
}
