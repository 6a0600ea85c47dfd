//! What a line of a rollout does, worked out from the line alone.
//!
//! Reading a rollout is a state machine (a model response runs until the next output or
//! prompt; the first `session_meta` names every record), but almost all of a line's work
//! needs no state: reading its JSON, deciding what it is, making its texts and its tool
//! call's input, reading an output's verdict. That part runs on many lines at once
//! ([`prepare_line`]) and gives an [`Act`] per line; the reading then takes the acts in
//! file order (`Reading::take`), which only numbers, links and groups records.

use std::borrow::Cow;

use super::events::{event_act, prepare_event, tokens_of};
use super::items::prepare_item;
use super::text::Texts;
use super::verdict::Outcome;
use super::wire::{Body, Payload, WireLine};
use super::CodexMeta;
use crate::formats::claude_code::parse::{check_line_length, LineError};
use crate::formats::claude_code::records::{Block, JsonStr, Position, RawJson, Usage};
use crate::json::time::parse_millis;

/// A line read: its type (as counted in the diagnostics), its time, and what it does.
pub(super) struct Prepared {
    /// The line's type: `session_meta`, `response_item:function_call`, ...
    pub(super) count: String,
    /// The line's `timestamp`.
    pub(super) stamp: Stamp,
    /// What the line does to the reading.
    pub(super) act: Act,
}

/// A line's time: its `timestamp` as written, and in milliseconds since the epoch when it
/// reads as one (read with the line, off the reading's one thread).
#[derive(Clone, Default)]
pub(super) struct Stamp {
    /// The timestamp as written.
    pub(super) text: Option<Box<str>>,
    /// The time it says.
    pub(super) millis: Option<i64>,
}

impl Stamp {
    /// The stamp of `timestamp`.
    pub(super) fn of(timestamp: Option<String>) -> Stamp {
        Stamp {
            millis: timestamp.as_deref().and_then(parse_millis),
            text: timestamp.map(String::into_boxed_str),
        }
    }
}

/// What a line does to the reading.
pub(super) enum Act {
    /// Nothing: the line is only counted.
    Nothing,
    /// A `session_meta`: names the file's records when it is the first.
    Meta(CodexMeta),
    /// The older layout's header: names the file's records and gives its time to the lines
    /// without one, when the file has no thread yet (else the line is counted as
    /// `(missing)`).
    Header(CodexMeta),
    /// A `turn_context`: ends the model response; its model is that of the records after.
    TurnContext(Option<String>),
    /// `task_started` or `task_complete`: ends the model response.
    EndResponse,
    /// A user record: a typed prompt.
    User(Vec<Block>),
    /// An assistant record in the model response (opened when none is), holding `blocks`;
    /// `spawn_calls` are the ids of its `spawn_agent` calls.
    Assistant {
        /// The record's blocks (none for a reasoning item with only encrypted content).
        blocks: Vec<Block>,
        /// The ids of its calls that spawn agents.
        spawn_calls: Vec<String>,
    },
    /// A call the model's provider runs (a web search, an image generation): its record,
    /// and a result made from its status when the response ends.
    ServerCall {
        /// The `tool_use` block.
        call: Block,
        /// The call's id.
        call_id: String,
        /// Its status, the text of its result.
        status: String,
        /// True when the status says it failed.
        failed: bool,
    },
    /// A call's output: a user record holding its result.
    Output {
        /// The call the output is of.
        call_id: String,
        /// Its text and verdict.
        outcome: Outcome,
    },
    /// A `system` record of `subtype` showing `text`.
    System {
        /// The record's subtype (`developer_message`, `turn_aborted`, ...).
        subtype: &'static str,
        /// What it shows.
        text: JsonStr,
    },
    /// A compaction boundary. One from a `context_compacted` event right after a
    /// `compacted` line is the same compaction, and is dropped.
    Compaction {
        /// The summary.
        text: JsonStr,
        /// Its `compact_metadata`.
        metadata: RawJson,
        /// True for a `context_compacted` event.
        from_event: bool,
    },
    /// A `token_count`: the tokens of the last assistant record.
    Tokens(Usage),
    /// An event that ends a call, with its verdict.
    Verdict {
        /// The call.
        call_id: String,
        /// True when the call failed.
        failed: bool,
    },
    /// `collab_agent_spawn_end`: the thread a call spawned.
    Spawned {
        /// The call.
        call_id: String,
        /// The thread it started.
        thread: String,
    },
}

/// How the lines of a file are read: where their texts lie, and whether the typed prompts
/// are its `user_message` events (the user messages of the response items then only
/// repeat them, among injected context).
#[derive(Clone, Copy)]
pub(super) struct LineContext<'b> {
    /// Where the texts lie.
    pub(super) texts: Texts<'b>,
    /// True when the prompts are the `user_message` events.
    pub(super) prompts_from_events: bool,
}

/// A line of the file: its text when the file is UTF-8 throughout (read without checking
/// its strings again), else its bytes.
#[derive(Clone, Copy)]
pub(super) enum LineText<'a> {
    /// The line, valid UTF-8.
    Text(&'a str),
    /// The line's bytes.
    Bytes(&'a [u8]),
}

impl<'a> LineText<'a> {
    /// The line's bytes.
    fn bytes(self) -> &'a [u8] {
        match self {
            LineText::Text(t) => t.as_bytes(),
            LineText::Bytes(b) => b,
        }
    }

    /// The line read as a `T`.
    fn read<T: serde::Deserialize<'a>>(self) -> serde_json::Result<T> {
        match self {
            LineText::Text(t) => serde_json::from_str(t),
            LineText::Bytes(b) => serde_json::from_slice(b),
        }
    }
}

/// Reads `line`, read at `pos`.
pub(super) fn prepare_line(
    cx: &LineContext<'_>,
    line: LineText<'_>,
    pos: Position,
) -> Result<Prepared, LineError> {
    let bytes = line.bytes();
    check_line_length(bytes.len())?;
    let mut wire: WireLine<'_> = line.read().map_err(|e| LineError::of_object_line(bytes, &e))?;
    let stamp = Stamp::of(wire.timestamp.take());
    let (count, act) = match (std::mem::take(&mut wire.payload), wire.kind.take()) {
        (Body::Absent, kind) => bare_line(cx, line, kind, wire, pos),
        (_, None) => ("(missing)".to_owned(), Act::Nothing),
        (payload, Some(kind)) => rollout_item(cx, kind, payload, pos),
    };
    Ok(Prepared { count, stamp, act })
}

/// A line without a payload (`wire`, its `type` being `kind`): the older layout's marker,
/// header or bare item.
fn bare_line<'a>(
    cx: &LineContext<'_>,
    line: LineText<'a>,
    kind: Option<Cow<'a, str>>,
    wire: WireLine<'a>,
    pos: Position,
) -> (String, Act) {
    match (kind, wire.record_type) {
        (None, Some(record_type)) => (format!("record_type:{record_type}"), Act::Nothing),
        (None, None) if wire.id.is_some() && wire.role.is_none() => {
            let meta = CodexMeta {
                id: wire.id,
                ..CodexMeta::default()
            };
            ("header".to_owned(), Act::Header(meta))
        }
        (kind, _) if kind.is_some() || wire.role.is_some() => {
            // The line was read as an envelope already, so it reads as an item too.
            let mut bare: Box<Payload<'_>> = line.read().unwrap_or_default();
            bare.kind = kind;
            bare.id = wire.id;
            prepare_item(cx, bare, pos)
        }
        _ => ("(missing)".to_owned(), Act::Nothing),
    }
}

/// A modern line of type `kind`.
fn rollout_item(cx: &LineContext<'_>, kind: Cow<'_, str>, payload: Body<'_>, pos: Position) -> (String, Act) {
    let act = match (&*kind, payload) {
        ("turn_context", Body::TurnContext(context)) => Act::TurnContext(context.model),
        ("session_meta", Body::Item(p)) => Act::Meta(CodexMeta::of_payload(&p)),
        ("response_item", Body::Item(p)) => return prepare_item(cx, p, pos),
        ("event_msg", Body::Item(p)) => return prepare_event(cx, p),
        ("event_msg", Body::Event(name)) => return (format!("event_msg:{name}"), event_act(&name)),
        ("event_msg", Body::TokenCount(usage)) => {
            let act = usage.map_or(Act::Nothing, |u| Act::Tokens(tokens_of(&u)));
            return ("event_msg:token_count".to_owned(), act);
        }
        ("compacted", Body::Item(p)) => super::events::compaction(&cx.texts, &p, None),
        _ => Act::Nothing,
    };
    (kind.into_owned(), act)
}
