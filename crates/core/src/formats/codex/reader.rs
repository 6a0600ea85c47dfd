//! The reading of one rollout file: line by line, the envelope told apart from the older
//! layout's bare lines, each line counted by its type, and the records made with ids
//! derived from the file (`<thread id>:<line>`), so that a session reads the same on every
//! load.

use foldhash::{HashMap, HashMapExt};

use super::wire::{Payload, WireLine};
use super::CodexMeta;
use crate::formats::claude_code::parse::{check_line_length, BadLine, LineError, ParsedFile};
use crate::formats::claude_code::records::{
    Block, Content, Id, JsonStr, Message, Position, RawJson, Record, RecordKind, ToolUse,
};
use crate::json::frame;
use crate::json::time::parse_millis;

/// Reads one line's envelope (no state: lines are read in parallel, then taken in order).
pub(super) fn read_wire(bytes: &[u8]) -> Result<WireLine, LineError> {
    check_line_length(bytes.len()).and_then(|()| {
        serde_json::from_slice::<WireLine>(bytes).map_err(|e| LineError::of_object_line(bytes, &e))
    })
}

/// A tool call whose result the log never writes (a web search, an image generation):
/// its result is made from the call's status when the model response ends.
pub(super) struct Pending {
    /// The call's id.
    pub(super) call_id: String,
    /// Where the call was read (the result takes its line, record 1 of it).
    pub(super) pos: Position,
    /// The call's timestamp.
    pub(super) timestamp: Option<String>,
    /// The text of the result (the call's status).
    pub(super) text: String,
    /// True when the status says the call failed.
    pub(super) failed: bool,
}

/// What reading a rollout carries from line to line.
pub(super) struct Reading {
    /// The file's number in its session.
    pub(super) file: u32,
    /// The first `session_meta` (or the older layout's header).
    pub(super) meta: CodexMeta,
    /// Whether a `session_meta` or header was taken.
    pub(super) has_meta: bool,
    /// The prefix of the file's record ids: its thread id, `codex` until it is known.
    thread: Id,
    /// The uuid of the last record made: the next one's parent.
    previous: Option<Id>,
    /// The time of lines that have none (the older layout's header's).
    pub(super) default_time: Option<String>,
    /// The model of the current turn (`turn_context.model`).
    pub(super) model: Option<Id>,
    /// The id of the model response being read, while one is open.
    response: Option<Id>,
    /// The last assistant record: the one a `token_count` event gives its tokens to.
    pub(super) last_assistant: Option<usize>,
    /// True when the typed prompts are the `user_message` events (the user messages of
    /// the response items then only repeat them, among injected context).
    pub(super) prompts_from_events: bool,
    /// Results to make when the model response ends.
    pub(super) pending: Vec<Pending>,
    /// Call id -> the records holding its result.
    pub(super) outputs: HashMap<String, Vec<usize>>,
    /// Call ids of `spawn_agent` calls.
    pub(super) spawn_calls: Vec<String>,
    /// The verdicts of events that end a call: (call id, failed).
    pub(super) verdicts: Vec<(String, bool)>,
    /// The threads `collab_agent_spawn_end` names: (call id, new thread id).
    pub(super) spawned: Vec<(String, String)>,
    /// True when the last record made is a compaction boundary (a `context_compacted`
    /// right after a `compacted` line is the same compaction).
    pub(super) after_compaction: bool,
    /// The lines and records read so far.
    pub(super) parsed: ParsedFile,
}

impl Reading {
    /// A reading of file number `file`; `prompts_from_events` as in [`Reading`].
    pub(super) fn new(file: u32, prompts_from_events: bool) -> Reading {
        Reading {
            file,
            meta: CodexMeta::default(),
            has_meta: false,
            thread: Id::from("codex"),
            previous: None,
            default_time: None,
            model: None,
            response: None,
            last_assistant: None,
            prompts_from_events,
            pending: Vec::new(),
            outputs: HashMap::new(),
            spawn_calls: Vec::new(),
            verdicts: Vec::new(),
            spawned: Vec::new(),
            after_compaction: false,
            parsed: ParsedFile::default(),
        }
    }

    /// Takes one line, as [`read_wire`] read it: a bad one is noted, a good one counted by
    /// its type and turned into the records it makes (none for most).
    pub(super) fn line(&mut self, line: &frame::Line<'_>, read: Result<WireLine, LineError>) {
        self.parsed.lines += 1;
        let wire = match read {
            Ok(wire) => wire,
            Err(error) => {
                self.parsed.bad_lines.push(BadLine {
                    line: line.number,
                    error,
                    unterminated: !line.terminated,
                });
                return;
            }
        };
        self.parsed.records_read += 1;
        let pos = Position {
            file: self.file,
            line: line.number,
            seq: 0,
        };
        let timestamp = wire.timestamp.clone().or_else(|| self.default_time.clone());
        self.wire_line(wire, line.bytes, pos, timestamp);
    }

    /// Dispatches a line read: an envelope by its type, else the older layout's header,
    /// marker or bare item.
    fn wire_line(&mut self, wire: WireLine, bytes: &[u8], pos: Position, timestamp: Option<String>) {
        let WireLine {
            kind,
            payload,
            record_type,
            id,
            instructions,
            role,
            ..
        } = wire;
        match (payload.0, kind) {
            (Some(payload), Some(kind)) => self.rollout_item(&kind, payload, pos, timestamp),
            (None, _) if record_type.is_some() => {
                self.count(&format!("record_type:{}", record_type.unwrap_or_default()))
            }
            (None, None) if id.is_some() && role.is_none() && !self.has_meta => {
                // The older layout's header: `{id, timestamp, instructions, git?}`.
                let _ = instructions;
                self.count("header");
                self.take_meta(CodexMeta {
                    id,
                    ..CodexMeta::default()
                });
                self.default_time = timestamp;
            }
            (None, kind) if kind.is_some() || role.is_some() => {
                // The line was read as an envelope already, so it reads as an item too.
                let mut bare: Payload = serde_json::from_slice(bytes).unwrap_or_default();
                bare.kind = kind;
                bare.id = id;
                self.response_item(bare, pos, timestamp);
            }
            _ => self.count("(missing)"),
        }
    }

    /// A modern line of type `kind`.
    fn rollout_item(&mut self, kind: &str, payload: Payload, pos: Position, timestamp: Option<String>) {
        match kind {
            "session_meta" => {
                self.count(kind);
                if !self.has_meta {
                    self.take_meta(CodexMeta::of_payload(&payload));
                }
            }
            "turn_context" => {
                self.count(kind);
                self.close_response();
                if let Some(model) = payload.model {
                    self.model = Some(Id::from(model));
                }
            }
            "response_item" => self.response_item(payload, pos, timestamp),
            "event_msg" => self.event(payload, pos, timestamp),
            "compacted" => {
                self.count(kind);
                self.compaction(&payload, pos, timestamp);
            }
            other => self.count(other),
        }
    }

    /// Takes the session's first `session_meta`: its id names the file's records.
    pub(super) fn take_meta(&mut self, meta: CodexMeta) {
        self.has_meta = true;
        if let Some(id) = meta.id.as_deref().filter(|id| !id.is_empty()) {
            self.thread = Id::from(id);
        }
        self.meta = meta;
    }

    /// Counts a line of type `name`.
    pub(super) fn count(&mut self, name: &str) {
        self.parsed.types.count(name);
    }

    /// Makes a record of `kind` read at `pos`, parented to the record before it, and
    /// returns its index. Any record but an assistant one ends the model response.
    pub(super) fn record(
        &mut self,
        kind: RecordKind,
        pos: Position,
        timestamp: Option<String>,
        message: Option<Message>,
    ) -> usize {
        if kind != RecordKind::Assistant {
            self.close_response();
        }
        self.after_compaction = false;
        let uuid = Id::from(match pos.seq {
            0 => format!("{}:{}", self.thread, pos.line),
            seq => format!("{}:{}:{seq}", self.thread, pos.line),
        });
        let subagent = self.meta.parent_thread_id.is_some() || self.meta.subagent.is_some();
        let record = Record {
            pos,
            kind,
            uuid: Some(uuid.clone()),
            parent_uuid: Some(self.previous.replace(uuid)),
            time: timestamp.as_deref().and_then(parse_millis),
            timestamp: timestamp.map(String::into_boxed_str),
            session_id: Some(self.thread.clone()),
            agent_id: subagent.then(|| self.thread.clone()),
            message,
            ..Record::default()
        };
        self.parsed.records.push(record);
        self.parsed.records.len() - 1
    }

    /// Makes an assistant record holding `blocks`, in the open model response (one is
    /// opened, named after this line, when none is).
    pub(super) fn assistant(
        &mut self,
        pos: Position,
        timestamp: Option<String>,
        blocks: Vec<Block>,
    ) -> usize {
        let response = self
            .response
            .get_or_insert_with(|| Id::from(format!("{}:{}", self.thread, pos.line)))
            .clone();
        let message = Message {
            id: Some(response.clone()),
            model: self.model.clone(),
            content: Content::Blocks(blocks),
            usage: None,
        };
        let i = self.record(RecordKind::Assistant, pos, timestamp, Some(message));
        self.parsed.records[i].request_id = Some(response);
        self.last_assistant = Some(i);
        i
    }

    /// Makes a `system` record of `subtype` showing `text`.
    pub(super) fn system(
        &mut self,
        pos: Position,
        timestamp: Option<String>,
        subtype: &str,
        text: &str,
    ) -> usize {
        let i = self.record(RecordKind::System, pos, timestamp, None);
        let extra = self.parsed.records[i].extra_mut();
        extra.subtype = Some(subtype.to_owned());
        extra.content = Some(JsonStr::new(text));
        i
    }

    /// Ends the open model response, making the results of its calls that have none.
    pub(super) fn close_response(&mut self) {
        if self.response.take().is_none() {
            return;
        }
        for p in std::mem::take(&mut self.pending) {
            let pos = Position { seq: 1, ..p.pos };
            self.tool_result(&p.call_id, pos, p.timestamp, &p.text, p.failed);
        }
    }

    /// Makes a user record holding the result of call `call_id`.
    pub(super) fn tool_result(
        &mut self,
        call_id: &str,
        pos: Position,
        timestamp: Option<String>,
        text: &str,
        failed: bool,
    ) -> usize {
        let texts = if text.is_empty() {
            Vec::new()
        } else {
            vec![JsonStr::new(text)]
        };
        let block = Block::ToolResult(crate::formats::claude_code::records::ToolResultBlock {
            tool_use_id: Some(call_id.to_owned()),
            texts,
            is_error: failed,
        });
        let message = Message {
            content: Content::Blocks(vec![block]),
            ..Message::default()
        };
        let i = self.record(RecordKind::User, pos, timestamp, Some(message));
        self.outputs.entry(call_id.to_owned()).or_default().push(i);
        i
    }

    /// The file read: open calls given their results, the events' verdicts and spawned
    /// threads given to the results of their calls, and the records counted.
    pub(super) fn finish(mut self) -> ParsedFile {
        self.close_response();
        for (call, failed) in std::mem::take(&mut self.verdicts) {
            for &i in self.outputs.get(&call).into_iter().flatten() {
                if let Some(Content::Blocks(blocks)) =
                    self.parsed.records[i].message.as_mut().map(|m| &mut m.content)
                {
                    for b in blocks {
                        if let Block::ToolResult(t) = b {
                            t.is_error = failed;
                        }
                    }
                }
            }
        }
        for (call, thread) in std::mem::take(&mut self.spawned) {
            if let Some(&i) = self.outputs.get(&call).and_then(|v| v.first()) {
                let result = self.parsed.records[i]
                    .extra_mut()
                    .tool_use_result
                    .get_or_insert_with(Default::default);
                result.agent_id.get_or_insert(thread);
            }
        }
        let mut parsed = self.parsed;
        for r in &parsed.records {
            parsed
                .identity
                .observe(r.session_id.as_deref(), r.agent_id.as_deref());
        }
        parsed
    }
}

/// A tool call block: `input` is the call's arguments when they are JSON, else the
/// arguments as a JSON string.
pub(super) fn tool_use(id: String, name: String, input: Option<&str>) -> Block {
    let input = input.map(|text| match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => RawJson::copy_of(text.trim()),
        _ => RawJson::copy_of(&serde_json::Value::String(text.to_owned()).to_string()),
    });
    Block::ToolUse(ToolUse { id, name, input })
}
