//! What a line of a rollout does, worked out from the line alone.
//!
//! Reading a rollout is a state machine (a model response runs until the next output or
//! prompt; the first `session_meta` names every record), but almost all of a line's work
//! needs no state: reading its JSON, deciding what it is, making its texts and its tool
//! call's input, reading an output's verdict. That part runs on many lines at once
//! (`super::prepare`) and gives an [`Act`] per line; the reading then takes the acts in
//! file order (`Reading::take`), which only numbers, links and groups records.

use super::text::Texts;
use super::verdict::Outcome;
use super::CodexMeta;
use crate::formats::claude_code::records::{Block, JsonStr, RawJson, Usage};
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
