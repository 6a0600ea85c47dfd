//! The reading of one rollout file: the acts of its lines (see [`super::act`]) taken in
//! file order, each line counted by its type, and the records made with ids derived from
//! the file (`<thread id>:<line>`), so that a session reads the same on every load.

use foldhash::{HashMap, HashMapExt};

use super::act::{Act, Prepared, Stamp};
use super::verdict::Outcome;
use super::CodexMeta;
use crate::formats::claude_code::parse::{BadLine, LineError, ParsedFile};
use crate::formats::claude_code::records::{
    Block, Content, Id, JsonStr, Message, Position, Record, RecordKind, ToolResultBlock, ToolUseResult, Usage,
};
use crate::json::frame;

/// A tool call whose result the log never writes (a web search, an image generation):
/// its result is made from the call's status when the model response ends.
pub(super) struct Pending {
    /// The call's id.
    pub(super) call_id: String,
    /// Where the call was read (the result takes its line, record 1 of it).
    pub(super) pos: Position,
    /// The call's time.
    pub(super) stamp: Stamp,
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
    /// Where record ids are written before they are made into [`Id`]s.
    id_buffer: String,
    /// The time of lines that have none (the older layout's header's).
    pub(super) default_time: Stamp,
    /// The model of the current turn (`turn_context.model`).
    model: Option<Id>,
    /// The id of the model response being read, while one is open.
    response: Option<Id>,
    /// The last assistant record: the one a `token_count` event gives its tokens to.
    last_assistant: Option<usize>,
    /// Results to make when the model response ends.
    pending: Vec<Pending>,
    /// Call id -> the records holding its result.
    outputs: HashMap<String, Vec<usize>>,
    /// Call ids of `spawn_agent` calls.
    spawn_calls: Vec<String>,
    /// The verdicts of events that end a call: (call id, failed).
    verdicts: Vec<(String, bool)>,
    /// The threads `collab_agent_spawn_end` names: (call id, new thread id).
    spawned: Vec<(String, String)>,
    /// True when the last record made is a compaction boundary (a `context_compacted`
    /// right after a `compacted` line is the same compaction).
    after_compaction: bool,
    /// The lines and records read so far.
    pub(super) parsed: ParsedFile,
}

impl Reading {
    /// A reading of file number `file`.
    pub(super) fn new(file: u32) -> Reading {
        Reading {
            file,
            meta: CodexMeta::default(),
            has_meta: false,
            thread: Id::from("codex"),
            previous: None,
            id_buffer: String::new(),
            default_time: Stamp::default(),
            model: None,
            response: None,
            last_assistant: None,
            pending: Vec::new(),
            outputs: HashMap::new(),
            spawn_calls: Vec::new(),
            verdicts: Vec::new(),
            spawned: Vec::new(),
            after_compaction: false,
            parsed: ParsedFile::default(),
        }
    }

    /// Takes line `line`, as [`super::act::prepare_line`] read it: a bad one is noted, a
    /// good one counted by its type and its act done.
    pub(super) fn line(&mut self, line: &frame::Line<'_>, read: Result<Prepared, LineError>) {
        self.parsed.lines += 1;
        match read {
            Ok(prepared) => {
                let pos = Position {
                    file: self.file,
                    line: line.number,
                    seq: 0,
                };
                self.take(prepared, pos);
            }
            Err(error) => self.parsed.bad_lines.push(BadLine {
                line: line.number,
                error,
                unterminated: !line.terminated,
            }),
        }
    }

    /// Takes a line (or item) read at `pos`: counts it and does its act.
    pub(super) fn take(&mut self, prepared: Prepared, pos: Position) {
        let Prepared { count, stamp, act } = prepared;
        self.parsed.records_read += 1;
        if matches!(act, Act::Header(_)) && self.has_meta {
            self.count("(missing)");
            return;
        }
        self.count(&count);
        let ts = if stamp.text.is_some() {
            stamp
        } else {
            self.default_time.clone()
        };
        match act {
            Act::Nothing => {}
            Act::Meta(meta) => {
                if !self.has_meta {
                    self.take_meta(meta);
                }
            }
            Act::Header(meta) => {
                self.take_meta(meta);
                self.default_time = ts;
            }
            Act::TurnContext(model) => {
                self.close_response();
                if let Some(model) = model {
                    self.model = Some(Id::from(model));
                }
            }
            Act::EndResponse => self.close_response(),
            Act::User(blocks) => {
                self.user(pos, ts, blocks);
            }
            Act::Assistant { blocks, spawn_calls } => {
                self.spawn_calls.extend(spawn_calls);
                self.assistant(pos, ts, blocks);
            }
            Act::ServerCall {
                call,
                call_id,
                status,
                failed,
            } => {
                self.assistant(pos, ts.clone(), vec![call]);
                self.pending.push(Pending {
                    call_id,
                    pos,
                    stamp: ts,
                    text: status,
                    failed,
                });
            }
            Act::Output { call_id, outcome } => self.output(&call_id, outcome, pos, ts),
            Act::System { subtype, text } => {
                self.system(pos, ts, subtype, text);
            }
            Act::Compaction {
                text,
                metadata,
                from_event,
            } => {
                if !(from_event && self.after_compaction) {
                    let i = self.system(pos, ts, "compact_boundary", text);
                    self.parsed.records[i].extra_mut().compact_metadata = Some(metadata);
                    self.after_compaction = true;
                }
            }
            Act::Tokens(usage) => self.tokens(usage),
            Act::Verdict { call_id, failed } => self.verdicts.push((call_id, failed)),
            Act::Spawned { call_id, thread } => self.spawned.push((call_id, thread)),
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
    fn record(&mut self, kind: RecordKind, pos: Position, stamp: Stamp, message: Option<Message>) -> usize {
        if kind != RecordKind::Assistant {
            self.close_response();
        }
        self.after_compaction = false;
        let uuid = self.record_id(pos);
        let subagent = self.meta.parent_thread_id.is_some() || self.meta.subagent.is_some();
        let record = Record {
            pos,
            kind,
            uuid: Some(uuid.clone()),
            parent_uuid: Some(self.previous.replace(uuid)),
            time: stamp.millis,
            timestamp: stamp.text,
            session_id: Some(self.thread.clone()),
            agent_id: subagent.then(|| self.thread.clone()),
            message,
            ..Record::default()
        };
        self.parsed.records.push(record);
        self.parsed.records.len() - 1
    }

    /// The id of the record read at `pos`: `<thread>:<line>`, and `:<seq>` after it for a
    /// line's second record. Written into one buffer kept for the purpose, so that an id
    /// costs one allocation.
    fn record_id(&mut self, pos: Position) -> Id {
        use std::fmt::Write;
        let buffer = &mut self.id_buffer;
        buffer.clear();
        // Writing into a String cannot fail.
        let _ = match pos.seq {
            0 => write!(buffer, "{}:{}", self.thread, pos.line),
            seq => write!(buffer, "{}:{}:{seq}", self.thread, pos.line),
        };
        Id::from(buffer.as_str())
    }

    /// Makes an assistant record holding `blocks`, in the open model response (one is
    /// opened, named after this line, when none is).
    fn assistant(&mut self, pos: Position, stamp: Stamp, blocks: Vec<Block>) -> usize {
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
        let i = self.record(RecordKind::Assistant, pos, stamp, Some(message));
        self.parsed.records[i].request_id = Some(response);
        self.last_assistant = Some(i);
        i
    }

    /// Makes a `system` record of `subtype` showing `text`.
    fn system(&mut self, pos: Position, stamp: Stamp, subtype: &str, text: JsonStr) -> usize {
        let i = self.record(RecordKind::System, pos, stamp, None);
        let extra = self.parsed.records[i].extra_mut();
        extra.subtype = Some(subtype.to_owned());
        extra.content = Some(text);
        i
    }

    /// Makes a user record (a prompt) holding `blocks`.
    fn user(&mut self, pos: Position, stamp: Stamp, blocks: Vec<Block>) -> usize {
        let message = Message {
            content: Content::Blocks(blocks),
            ..Message::default()
        };
        self.record(RecordKind::User, pos, stamp, Some(message))
    }

    /// A `token_count`'s tokens, given to the last assistant record when it has none yet.
    fn tokens(&mut self, usage: Usage) {
        let Some(i) = self.last_assistant else {
            return;
        };
        if let Some(m) = self.parsed.records[i]
            .message
            .as_mut()
            .filter(|m| m.usage.is_none())
        {
            m.usage = Some(Box::new(usage));
        }
    }

    /// The output of call `call_id`: a result whose failure is the output's verdict, and
    /// which names the agent a `spawn_agent` call started.
    fn output(&mut self, call_id: &str, outcome: Outcome, pos: Position, ts: Stamp) {
        let i = self.tool_result(call_id, pos, ts, outcome.text, outcome.failed);
        let spawned = outcome
            .agent_id
            .filter(|_| self.spawn_calls.iter().any(|c| c == call_id));
        if let Some(agent) = spawned {
            self.parsed.records[i].extra_mut().tool_use_result = Some(ToolUseResult {
                agent_id: Some(agent),
                ..ToolUseResult::default()
            });
        }
    }

    /// Ends the open model response, making the results of its calls that have none.
    fn close_response(&mut self) {
        if self.response.take().is_none() {
            return;
        }
        for p in std::mem::take(&mut self.pending) {
            let pos = Position { seq: 1, ..p.pos };
            self.tool_result(&p.call_id, pos, p.stamp, JsonStr::new(&p.text), p.failed);
        }
    }

    /// Makes a user record holding the result of call `call_id`.
    fn tool_result(
        &mut self,
        call_id: &str,
        pos: Position,
        stamp: Stamp,
        text: JsonStr,
        failed: bool,
    ) -> usize {
        let texts = if text.is_empty() { Vec::new() } else { vec![text] };
        let block = Block::ToolResult(ToolResultBlock {
            tool_use_id: Some(call_id.to_owned()),
            texts,
            is_error: failed,
        });
        let message = Message {
            content: Content::Blocks(vec![block]),
            ..Message::default()
        };
        let i = self.record(RecordKind::User, pos, stamp, Some(message));
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
        self.parsed.observe_identities();
        self.parsed
    }
}
