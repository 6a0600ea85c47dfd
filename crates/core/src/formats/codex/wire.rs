//! The lines of a Codex rollout as read from disk: the envelope and one flat payload that
//! holds the fields of every item and event the reader looks at. Every field is lenient (a
//! value of another type reads as absent), so a new or changed field never makes a line
//! unreadable; fields of changing shape are kept as [`Value`]s and read where they are used.

use serde::Deserialize;
use serde_json::Value;

use crate::json::lenient::{self, ObjectOr};

/// One line: the envelope of the modern layout (`timestamp`, `type`, `payload`), or a bare
/// response item of the older layout (then `payload` is absent and the item's fields are
/// read from the line again, as a [`Payload`]: rare, and it keeps the common line's read
/// free of serde's buffering of flattened fields), or the older layout's header (`id`,
/// `timestamp`, `instructions`) or `{"record_type":"state"}` marker.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct WireLine {
    /// `timestamp`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) timestamp: Option<String>,
    /// `type`: the rollout item's kind (modern) or the response item's (older).
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    pub(super) kind: Option<String>,
    /// `payload` of the modern layout.
    pub(super) payload: ObjectOr<Payload>,
    /// `record_type` of the older layout's marker lines.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) record_type: Option<String>,
    /// `id` of the older layout's header.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) id: Option<String>,
    /// Whether the line has `instructions` (only the older layout's header has).
    #[serde(deserialize_with = "present")]
    pub(super) instructions: bool,
    /// `role` of a bare message item.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) role: Option<String>,
}

/// A value that is there, whatever it is (`null` included).
pub(super) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

/// The payload of any rollout item: `session_meta`, `turn_context`, `compacted`, a
/// response item or an event (their fields, as far as the reader uses them).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Payload {
    /// `type` of a response item or event.
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    pub(super) kind: Option<String>,
    /// `id`: the session's (session_meta), an item's.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) id: Option<String>,
    /// `role` of a message.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) role: Option<String>,
    /// `content` of a message or reasoning item: content parts (or a string in
    /// Chat-Completions items).
    pub(super) content: Value,
    /// `summary` of a reasoning item (`[{"type":"summary_text","text"}]`).
    pub(super) summary: Value,
    /// `name` of a tool call.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) name: Option<String>,
    /// `namespace` of a tool call (MCP tools).
    #[serde(deserialize_with = "lenient::string")]
    pub(super) namespace: Option<String>,
    /// `arguments` of a function call: a JSON string (an object in a few writers).
    pub(super) arguments: Value,
    /// `input` of a custom tool call (a raw string).
    pub(super) input: Value,
    /// `action` of a local shell, web search call.
    pub(super) action: Value,
    /// `call_id` pairing a call and its output.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) call_id: Option<String>,
    /// `output` of a call output: a string, content items or an object.
    pub(super) output: Value,
    /// `status` of an item or event.
    pub(super) status: Value,
    /// `message` of events (`user_message`, `error`) and of `compacted`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) message: Option<String>,
    /// `images` of a `user_message` event.
    pub(super) images: Value,
    /// `info` of a `token_count` event.
    pub(super) info: ObjectOr<TokenInfo>,
    /// `reason` of `turn_aborted`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) reason: Option<String>,
    /// `exit_code` of `exec_command_end`.
    pub(super) exit_code: Value,
    /// `success` of `patch_apply_end`.
    #[serde(deserialize_with = "lenient::bool")]
    pub(super) success: Option<bool>,
    /// `result` of `mcp_tool_call_end` (`{"Ok":…}` or `{"Err":…}`).
    pub(super) result: Value,
    /// `num_turns` of `thread_rolled_back`.
    #[serde(deserialize_with = "lenient::count")]
    pub(super) num_turns: Option<u64>,
    /// `model` of `turn_context`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) model: Option<String>,
    /// `source` of `session_meta`.
    pub(super) source: Value,
    /// `parent_thread_id` at the top of `session_meta` (newest builds).
    #[serde(deserialize_with = "lenient::string")]
    pub(super) parent_thread_id: Option<String>,
    /// `agent_role` (or `agent_type`) of `session_meta`.
    #[serde(alias = "agent_type", deserialize_with = "lenient::string")]
    pub(super) agent_role: Option<String>,
    /// `agent_nickname` of `session_meta`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) agent_nickname: Option<String>,
    /// `new_thread_id` of `collab_agent_spawn_end`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) new_thread_id: Option<String>,
    /// `replacement_history` of `compacted`.
    pub(super) replacement_history: Value,
    /// `window_id` of `compacted` (newest builds; a number in older ones).
    pub(super) window_id: Value,
    /// `window_number` of `compacted`.
    pub(super) window_number: Value,
    /// `tool_calls` of a Chat-Completions assistant message.
    pub(super) tool_calls: Value,
    /// `tool_call_id` of a Chat-Completions tool message.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) tool_call_id: Option<String>,
}

/// `info` of a `token_count` event.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct TokenInfo {
    /// The tokens of the last model request.
    pub(super) last_token_usage: ObjectOr<TokenUsage>,
}

/// A `TokenUsage`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct TokenUsage {
    /// `input_tokens`.
    #[serde(deserialize_with = "lenient::count")]
    pub(super) input_tokens: Option<u64>,
    /// `output_tokens` (reasoning tokens included).
    #[serde(deserialize_with = "lenient::count")]
    pub(super) output_tokens: Option<u64>,
}
