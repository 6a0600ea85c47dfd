//! AutoGen's own message dumps, read onto the same [`AgMessage`]s as CommuGraph's
//! sender/recipient form: AgentChat (0.4+) message lists (`source`, `type`, `content`), bare
//! or wrapped in a `TaskResult` (`messages`), a `task_result`, or a team state's
//! `message_thread` (autogen-core's model-context messages, `UserMessage`, `AssistantMessage`,
//! `FunctionExecutionResultMessage`, `SystemMessage`, as an agent's state keeps them, are read
//! the same way); and the older (0.2 / AG2) `{role, name?, content}` lists: a GroupChat's
//! `messages`, a `ChatResult`'s `chat_history`, or an agent's `chat_messages` (a dict keyed by
//! the peer agent).
//!
//! Neither names a receiver, so one is derived the way the frameworks run a conversation
//! (CONTRACT 3.14): a handoff goes to its `target`, a tool call to whoever answers it (the
//! [`TOOLS`] party, or AG2's named executor) and its result back to the caller, a thought
//! to no one, the answer that ends the run to the task giver; in a swarm, by who holds
//! control; any other message to the next speaker in turn order (the sender of the next
//! message from someone else), the last one to the previous speaker, and a log with one
//! speaker to `user`. A speaker selection is no message. Each tool call (and result) of a
//! message is a [`ToolPart`] of it, a failed result marked so. A `chat_messages` list that
//! repeats an earlier one (a group chat manager's copy per agent) counts once.

use serde_json::{Map, Value};

use crate::formats::autogen::{js_string, message_type, timestamp, truthy, AgMessage, ToolPart};

/// The party tool calls go to and tool results come from.
pub const TOOLS: &str = "tools";

/// The AgentChat message and event types (autogen-agentchat 0.4+) that mark a dump as one.
pub const AGENTCHAT_TYPES: [&str; 16] = [
    "TextMessage",
    "MultiModalMessage",
    "StopMessage",
    "HandoffMessage",
    "StructuredMessage",
    "ToolCallRequestEvent",
    "ToolCallExecutionEvent",
    "ToolCallSummaryMessage",
    "UserInputRequestedEvent",
    "MemoryQueryEvent",
    "ModelClientStreamingChunkEvent",
    "ThoughtEvent",
    "SelectSpeakerEvent",
    "SelectorEvent",
    "CodeGenerationEvent",
    "CodeExecutionEvent",
];

/// The model-context message types (autogen-core's `LLMMessage`s, as an agent's state and
/// chat history files keep them), read as AgentChat messages are.
pub const MODEL_CONTEXT_TYPES: [&str; 4] = [
    "UserMessage",
    "AssistantMessage",
    "SystemMessage",
    "FunctionExecutionResultMessage",
];

/// The roles of a 0.2 / AG2 chat message.
const ROLES: [&str; 5] = ["user", "assistant", "system", "tool", "function"];

/// Keys that make an entry CommuGraph's sender/recipient form.
pub(crate) const COMMUGRAPH_KEYS: [&str; 4] = ["sender", "recipient", "from", "to"];

/// Keys of a Claude Code record, which is never an AutoGen message.
pub(crate) const CLAUDE_KEYS: [&str; 3] = ["uuid", "sessionId", "parentUuid"];

/// The form of a list of entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// CommuGraph's sender/recipient messages.
    CommuGraph,
    /// AgentChat messages and events (`source`, `type`).
    AgentChat,
    /// 0.2 / AG2 chat messages (`role`, `content`, `name`).
    ChatList,
}

/// What the rules telling the forms apart look at in an object: which of a few keys it has,
/// and what `type`, `source` and `role` hold. Read from a map ([`ObjectTraits::of`]) or
/// member by member as an object is parsed ([`ObjectTraits::note`]), with the same rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectTraits {
    names_parties: bool,
    claude: bool,
    has_type: bool,
    known_type: bool,
    string_source: bool,
    known_role: bool,
    has_content: bool,
}

/// What those rules need of a member's value: whether it is a string, and if so whether it
/// is a known AgentChat (or model-context) type and a known 0.2 / AG2 role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberValue {
    /// A string.
    String {
        /// One of [`AGENTCHAT_TYPES`] or [`MODEL_CONTEXT_TYPES`].
        known_type: bool,
        /// One of the 0.2 / AG2 roles.
        known_role: bool,
    },
    /// Anything else.
    Other,
}

impl MemberValue {
    /// What `s` is to the rules.
    pub fn of_str(s: &str) -> MemberValue {
        MemberValue::String {
            known_type: AGENTCHAT_TYPES.contains(&s) || MODEL_CONTEXT_TYPES.contains(&s),
            known_role: ROLES.contains(&s),
        }
    }

    /// What `value` is to the rules.
    pub fn of(value: &Value) -> MemberValue {
        match value {
            Value::String(s) => MemberValue::of_str(s),
            _ => MemberValue::Other,
        }
    }
}

impl ObjectTraits {
    /// The traits of `object`.
    pub fn of(object: &Map<String, Value>) -> ObjectTraits {
        let mut traits = ObjectTraits::default();
        for (key, value) in object {
            traits.note(key, MemberValue::of(value));
        }
        traits
    }

    /// Notes a member; a later member of a key overrides an earlier one, as in a map.
    pub fn note(&mut self, key: &str, value: MemberValue) {
        let string = matches!(value, MemberValue::String { .. });
        match key {
            "type" => {
                self.has_type = true;
                self.known_type = matches!(value, MemberValue::String { known_type: true, .. });
            }
            "source" => self.string_source = string,
            "role" => self.known_role = matches!(value, MemberValue::String { known_role: true, .. }),
            "content" => self.has_content = true,
            _ if COMMUGRAPH_KEYS.contains(&key) => self.names_parties = true,
            _ if CLAUDE_KEYS.contains(&key) => self.claude = true,
            _ => {}
        }
    }

    /// True for an AgentChat message: a string `source` and a known AgentChat (or
    /// model-context) `type`, and no key of a Claude Code record.
    pub fn is_agentchat_message(self) -> bool {
        self.known_type && self.string_source && !self.claude
    }

    /// True for a 0.2 / AG2 chat message: a known `role` and a `content` key, no `type`, and
    /// no key of a Claude Code record.
    pub fn is_chat_message(self) -> bool {
        self.known_role && self.has_content && !self.has_type && !self.claude
    }

    /// True for an entry of CommuGraph's form: it has a `sender`, `recipient`, `from` or `to`.
    pub fn names_parties(self) -> bool {
        self.names_parties
    }
}

/// True for an AgentChat message ([`ObjectTraits::is_agentchat_message`]).
pub fn is_agentchat_message(object: &Map<String, Value>) -> bool {
    ObjectTraits::of(object).is_agentchat_message()
}

/// True for a 0.2 / AG2 chat message ([`ObjectTraits::is_chat_message`]).
pub fn is_chat_message(object: &Map<String, Value>) -> bool {
    ObjectTraits::of(object).is_chat_message()
}

/// True for an entry of CommuGraph's form: it has a `sender`, `recipient`, `from` or `to`.
pub fn names_parties(object: &Map<String, Value>) -> bool {
    COMMUGRAPH_KEYS.iter().any(|k| object.contains_key(*k))
}

fn is_claude(object: &Map<String, Value>) -> bool {
    CLAUDE_KEYS.iter().any(|k| object.contains_key(*k))
}

/// What a whole-document JSON object holds.
#[derive(Debug)]
pub enum Wrapped<'a> {
    /// One list of messages (`messages`, `message_thread`, `chat_history`).
    List(&'a [Value]),
    /// `chat_messages`: the peer's name and the conversation with it, per peer.
    Dict(Vec<(&'a str, &'a [Value])>),
}

/// The messages a whole-document object wraps: a `TaskResult` or `{"messages": [...]}`, a
/// `{"task_result": {...}}`, a manager's or a team's state (`message_thread`, also under
/// `agent_states`), an agent's state (`llm_messages`, `llm_context.messages`), a `ChatResult`
/// (`chat_history`), or a `chat_messages` dict; `None` for anything else (a CommuGraph
/// entry, a Claude Code record). This reads a file's head to tell its format; the reader
/// follows the same rules without holding the document (`autogen::shape`'s plan).
pub fn unwrap(object: &Map<String, Value>) -> Option<Wrapped<'_>> {
    if is_claude(object) || names_parties(object) {
        return None;
    }
    for key in ["messages", "message_thread", "chat_history", "llm_messages"] {
        if let Some(Value::Array(list)) = object.get(key) {
            return Some(Wrapped::List(list));
        }
    }
    for key in ["task_result", "llm_context"] {
        if let Some(Value::Object(inner)) = object.get(key) {
            return unwrap(inner);
        }
    }
    if let Some(Value::Object(states)) = object.get("agent_states") {
        return states
            .values()
            .filter_map(|s| match s.get("message_thread") {
                Some(Value::Array(list)) => Some(Wrapped::List(list)),
                _ => None,
            })
            .next();
    }
    chat_messages(object).map(Wrapped::Dict)
}

/// A `chat_messages` dict: every value a list of chat messages (or `null`s), one holding a
/// message. (An object whose lists hold only `null`s, `{"source":[null]}`, is no dump: it
/// is read as the one entry it is, as it would be in an array.)
fn chat_messages(object: &Map<String, Value>) -> Option<Vec<(&str, &[Value])>> {
    let mut peers = Vec::with_capacity(object.len());
    for (peer, list) in object {
        let list = list.as_array()?;
        let chat = |v: &Value| v.is_null() || v.as_object().is_some_and(is_chat_message);
        if !list.iter().all(chat) {
            return None;
        }
        peers.push((peer.as_str(), list.as_slice()));
    }
    peers
        .iter()
        .any(|(_, list)| list.iter().any(|v| !v.is_null()))
        .then_some(peers)
}

/// The first message of a file's head (the first [`crate::formats::autogen::SNIFF_BYTES`]), for
/// telling its format: the first element of a JSON array, the first line's object (or, if
/// that wraps a list, its first message), or the first message of a wrapping object that
/// spans lines, even when the head cuts it short.
pub fn first_entry(head: &str) -> Option<Map<String, Value>> {
    let head = head.trim_start();
    if let Some(rest) = head.strip_prefix('[') {
        return first_object(rest);
    }
    if !head.starts_with('{') {
        return None;
    }
    let line: Option<Map<String, Value>> = serde_json::from_str(head.lines().next().unwrap_or("")).ok();
    if let Some(object) = line {
        return Some(first_of_wrapped(&object).unwrap_or(object));
    }
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(head) {
        return first_of_wrapped(&object);
    }
    let first_line = head.lines().next().unwrap_or("");
    if CLAUDE_KEYS
        .iter()
        .any(|k| first_line.contains(&format!("\"{k}\"")))
    {
        return None;
    }
    first_in_cut_object(head)
}

fn first_of_wrapped(object: &Map<String, Value>) -> Option<Map<String, Value>> {
    let first = match unwrap(object)? {
        Wrapped::List(list) => list.iter().find_map(Value::as_object),
        Wrapped::Dict(peers) => peers
            .iter()
            .flat_map(|(_, l)| l.iter())
            .find_map(Value::as_object),
    };
    first.cloned()
}

/// The first message of a wrapping object the head cuts short: the first element of the
/// list under a `messages`, `message_thread`, `chat_history` or `llm_messages` key, or under
/// the object's first key (a `chat_messages` dict).
fn first_in_cut_object(head: &str) -> Option<Map<String, Value>> {
    for key in [
        "\"messages\"",
        "\"message_thread\"",
        "\"chat_history\"",
        "\"llm_messages\"",
    ] {
        let found = head
            .match_indices(key)
            .find_map(|(at, _)| first_in_list_value(&head[at + key.len()..]));
        if found.is_some() {
            return found;
        }
    }
    let body = head.strip_prefix('{')?;
    let mut keys = serde_json::Deserializer::from_str(body).into_iter::<String>();
    keys.next()?.ok()?;
    let after_key = &body[keys.byte_offset()..];
    first_in_list_value(after_key).filter(is_chat_message)
}

/// `s` is `: [ {...}` (with any whitespace): the object.
fn first_in_list_value(s: &str) -> Option<Map<String, Value>> {
    let s = s.trim_start().strip_prefix(':')?.trim_start().strip_prefix('[')?;
    first_object(s)
}

fn first_object(s: &str) -> Option<Map<String, Value>> {
    serde_json::Deserializer::from_str(s)
        .into_iter::<Map<String, Value>>()
        .next()
        .and_then(Result::ok)
}

/// How a message's receiver is found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// The next speaker in turn order (in a swarm, by who holds control).
    Turn,
    /// A named party.
    To(String),
    /// A handoff: to its target, who holds control from then on.
    Handoff(String),
    /// Tool calls: to whoever answers them (the sender of the next tool result), which is
    /// the [`TOOLS`] party unless the result is named.
    Call,
    /// A tool result: back to the sender of the last tool call.
    Caller,
    /// No one: a thought.
    Nobody,
}

/// A message read, its receiver not yet known.
#[derive(Debug)]
pub(crate) struct Draft {
    /// The message, without its receiver.
    pub(crate) message: AgMessage,
    route: Route,
    /// True when the sender takes a turn (not a tool result, not a thought).
    speaks: bool,
    /// True when the message carries the termination: a `StopMessage`, or text that
    /// mentions `TERMINATE` (AgentChat's `TextMentionTermination`, AG2's convention).
    terminates: bool,
    /// True for a 0.2 / AG2 tool call without a `name` (AG2 drops it from calls): its
    /// sender is the role until routing works out who made it.
    unnamed_call: bool,
}

/// What reading an AgentChat list remembers between entries: the `UserProxyAgent` whose
/// input request (`UserInputRequestedEvent`) its next message answers.
#[derive(Debug, Default)]
pub(crate) struct AgentChatReading {
    awaiting_input: Option<String>,
}

impl AgentChatReading {
    /// The draft of one AgentChat entry ([`agentchat_draft`]); a message that answers an
    /// input request is the human's.
    pub(crate) fn draft(&mut self, object: &Map<String, Value>, step: usize) -> Option<Draft> {
        if object.get("type").and_then(Value::as_str) == Some("UserInputRequestedEvent") {
            self.awaiting_input = object.get("source").filter(|v| truthy(v)).map(js_string);
            return None;
        }
        let mut draft = agentchat_draft(object, step)?;
        if self.awaiting_input.as_deref() == Some(draft.message.sender.as_str()) {
            self.awaiting_input = None;
            draft.message.human = true;
        }
        Some(draft)
    }
}

/// The AgentChat events that are no message: a streamed chunk (the whole message follows
/// it), and a speaker selection (a `SelectorGroupChat`'s model answering whose turn it is,
/// `SelectorEvent`, and the team's note of it, `SelectSpeakerEvent`): the selected
/// speaker's message answers the previous speaker's as in any turn.
const NOT_MESSAGES: [&str; 3] = [
    "ModelClientStreamingChunkEvent",
    "SelectorEvent",
    "SelectSpeakerEvent",
];

/// The draft of one AgentChat message, or `None` when it holds no text or is no message
/// ([`NOT_MESSAGES`]).
fn agentchat_draft(object: &Map<String, Value>, step: usize) -> Option<Draft> {
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
    if NOT_MESSAGES.contains(&kind) {
        return None;
    }
    let source = object
        .get("source")
        .filter(|v| truthy(v))
        .map_or_else(|| "unknown".to_owned(), js_string);
    let calls = kind == "AssistantMessage" && object.get("content").is_some_and(Value::is_array);
    let tool_list = calls
        || matches!(
            kind,
            "ToolCallRequestEvent" | "ToolCallExecutionEvent" | "FunctionExecutionResultMessage"
        );
    let results = matches!(kind, "ToolCallExecutionEvent" | "FunctionExecutionResultMessage");
    let (content, tools) = match object.get("content") {
        Some(Value::Array(items)) if tool_list => tool_parts(items, results),
        Some(content) => (render(content), Vec::new()),
        None => (String::new(), Vec::new()),
    };
    if content.trim().is_empty() {
        return None;
    }
    let (sender, route, message_type) = match kind {
        "AssistantMessage" if calls => (source, Route::Call, "action"),
        "FunctionExecutionResultMessage" => (TOOLS.to_owned(), Route::Caller, "observation"),
        "SystemMessage" => ("system".to_owned(), Route::Turn, "system"),
        "HandoffMessage" => match object.get("target").filter(|v| truthy(v)) {
            Some(target) => (source, Route::Handoff(js_string(target)), "delegation"),
            None => (source, Route::Turn, "delegation"),
        },
        "ToolCallRequestEvent" => (source, Route::Call, "action"),
        "ToolCallExecutionEvent" => (TOOLS.to_owned(), Route::To(source), "observation"),
        "ThoughtEvent" => (source, Route::Nobody, "thought"),
        "StopMessage" => (source, Route::Turn, "system"),
        _ => (source, Route::Turn, message_type(object, &content)),
    };
    let speaks = sender != TOOLS && route != Route::Nobody;
    let terminates = route == Route::Turn && (kind == "StopMessage" || mentions_termination(&content));
    Some(Draft {
        message: AgMessage {
            step,
            timestamp: timestamp(object, step),
            sender,
            receiver: None,
            message_type,
            content,
            human: false,
            tools,
        },
        route,
        speaks,
        terminates,
        unnamed_call: false,
    })
}

/// The word AgentChat's `TextMentionTermination` and AG2's agents end a conversation with.
const TERMINATE: &str = "TERMINATE";

fn mentions_termination(text: &str) -> bool {
    text.contains(TERMINATE)
}

/// The text of a list of function calls (`name(arguments)`) or results (their `content`),
/// one a line as [`render`] writes it, and a [`ToolPart`] per line: its id and tool name,
/// and for a result whether it failed (`is_error: true`).
fn tool_parts(items: &[Value], results: bool) -> (String, Vec<ToolPart>) {
    let mut lines = ToolLines::default();
    for item in items {
        let field = |key: &str| item.get(key).filter(|v| truthy(v)).map(js_string);
        let call_id = match results {
            true => field("call_id").or_else(|| field("tool_call_id")),
            false => field("id"),
        };
        let failed = results && item.get("is_error") == Some(&Value::Bool(true));
        lines.push(render_item(item), call_id, field("name"), failed);
    }
    (lines.text, lines.parts)
}

/// Tool calls or results written one a line, with a part per line.
#[derive(Default)]
struct ToolLines {
    text: String,
    parts: Vec<ToolPart>,
}

impl ToolLines {
    /// Adds `line` (nothing if it is empty) as a part.
    fn push(&mut self, line: String, call_id: Option<String>, name: Option<String>, failed: bool) {
        if line.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        let start = self.text.len();
        self.text.push_str(&line);
        self.parts.push(ToolPart {
            call_id,
            name,
            text: start..self.text.len(),
            failed,
        });
    }
}

/// The text of an AgentChat `content`: a string; a list of function calls (`name(arguments)`),
/// of function results (their `content`), of strings and images (`[image]`), one a line; any
/// other value as JSON.
fn render(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items
            .iter()
            .map(render_item)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn render_item(item: &Value) -> String {
    let Value::Object(o) = item else {
        return match item {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
    };
    if let (Some(name), Some(arguments)) = (o.get("name"), o.get("arguments")) {
        let arguments = match arguments {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        return format!("{}({arguments})", js_string(name));
    }
    if o.contains_key("call_id") || o.contains_key("tool_call_id") {
        return o.get("content").map(render).unwrap_or_default();
    }
    if o.contains_key("data") || o.get("type").and_then(Value::as_str) == Some("image") {
        return "[image]".to_owned();
    }
    item.to_string()
}

/// How AG2 writes a tool's failure in its result: `execute_function` answers an exception,
/// a missing function or bad arguments with `Error: ...`.
const AG2_ERROR: &str = "Error: ";

/// The draft of one 0.2 / AG2 message, or `None` when it holds no text. The sender is `name`
/// (but a `function` result's `name` is its function's), else by role: `user` the peer (or
/// `user`), `tool`/`function` the tools, any other the role (the agent who saved the list,
/// whose name it does not hold, is `assistant`; a call without a name is worked out when
/// routing). `peer` is the `chat_messages` key the list was saved under, if any.
pub(crate) fn chat_draft(object: &Map<String, Value>, step: usize, peer: Option<&str>) -> Option<Draft> {
    let role = object.get("role").and_then(Value::as_str).unwrap_or("");
    let named = object.get("name").filter(|v| truthy(v)).map(js_string);
    let result = matches!(role, "tool" | "function");
    let sender = match (role, named.clone()) {
        ("tool", Some(name)) => name,
        ("tool" | "function", _) => TOOLS.to_owned(),
        (_, Some(name)) => name,
        ("user", None) => peer.unwrap_or("user").to_owned(),
        ("", None) => "unknown".to_owned(),
        (other, None) => other.to_owned(),
    };
    let text = object.get("content").map(render).unwrap_or_default();
    let (content, tools) = if result {
        chat_results(object, text, named.filter(|_| role == "function"))
    } else {
        match chat_calls(object) {
            Some((calls, parts)) => with_calls(text, calls, parts),
            None => (text, Vec::new()),
        }
    };
    if content.trim().is_empty() {
        return None;
    }
    let calls = !result && !tools.is_empty();
    let (route, kind) = match (result, calls) {
        (true, _) => (Route::Caller, "observation"),
        (false, true) => (Route::Call, "action"),
        (false, false) => (Route::Turn, message_type(object, &content)),
    };
    Some(Draft {
        speaks: !result,
        terminates: route == Route::Turn && mentions_termination(&content),
        unnamed_call: calls && !object.get("name").is_some_and(truthy),
        message: AgMessage {
            step,
            timestamp: timestamp(object, step),
            sender,
            receiver: None,
            message_type: kind,
            content,
            human: false,
            tools,
        },
        route,
    })
}

/// A message's text followed by its calls, one a line (the parts moved to follow it).
fn with_calls(text: String, calls: String, mut parts: Vec<ToolPart>) -> (String, Vec<ToolPart>) {
    if text.trim().is_empty() {
        return (calls, parts);
    }
    let shift = text.len() + 1;
    for part in &mut parts {
        part.text = part.text.start + shift..part.text.end + shift;
    }
    (format!("{text}\n{calls}"), parts)
}

/// A message's tool or function calls as `name(arguments)` lines, and a part per call, if
/// it makes any.
fn chat_calls(object: &Map<String, Value>) -> Option<(String, Vec<ToolPart>)> {
    let mut lines = ToolLines::default();
    if let Some(Value::Array(tool_calls)) = object.get("tool_calls") {
        for call in tool_calls {
            if let Some(function) = call.get("function") {
                let id = call.get("id").filter(|v| truthy(v)).map(js_string);
                let name = function.get("name").filter(|v| truthy(v)).map(js_string);
                lines.push(render_item(function), id, name, false);
            }
        }
    }
    if let Some(call) = object.get("function_call").filter(|v| truthy(v)) {
        let name = call.get("name").filter(|v| truthy(v)).map(js_string);
        lines.push(render_item(call), None, name, false);
    }
    (!lines.parts.is_empty()).then_some((lines.text, lines.parts))
}

/// The text of a 0.2 / AG2 tool (or function) result message and a part per result: each of
/// its `tool_responses` (found in its text, which AG2 writes as theirs joined), else the
/// whole message is one; a part fails when its text starts with AG2's `Error: `. `function` is the
/// function a `function` result names.
fn chat_results(
    object: &Map<String, Value>,
    text: String,
    function: Option<String>,
) -> (String, Vec<ToolPart>) {
    let responses = match object.get("tool_responses") {
        Some(Value::Array(responses)) if !responses.is_empty() => responses.as_slice(),
        _ => {
            let text = match text.trim().is_empty() {
                true => object.get("tool_responses").map(render).unwrap_or_default(),
                false => text,
            };
            let whole = ToolPart {
                call_id: object.get("tool_call_id").filter(|v| truthy(v)).map(js_string),
                name: function,
                text: 0..text.len(),
                failed: text.trim_start().starts_with(AG2_ERROR),
            };
            let parts = if text.trim().is_empty() {
                Vec::new()
            } else {
                vec![whole]
            };
            return (text, parts);
        }
    };
    if text.trim().is_empty() {
        let (text, mut parts) = tool_parts(responses, true);
        for part in &mut parts {
            part.failed |= text[part.text.clone()].trim_start().starts_with(AG2_ERROR);
        }
        return (text, parts);
    }
    let mut parts = Vec::with_capacity(responses.len());
    let mut from = 0;
    for response in responses {
        let said = response.get("content").map(render).unwrap_or_default();
        let found = (!said.is_empty())
            .then(|| text.get(from..)?.find(&said))
            .flatten()
            .map(|at| from + at..from + at + said.len());
        if let Some(range) = &found {
            from = range.end;
        }
        parts.push(ToolPart {
            call_id: response.get("tool_call_id").filter(|v| truthy(v)).map(js_string),
            name: None,
            // Not found as AG2 writes it: the part has no text of its own (so that the
            // parts' texts never add up to more than the message's).
            text: found.unwrap_or(from..from),
            failed: said.trim_start().starts_with(AG2_ERROR),
        });
    }
    (text, parts)
}

/// Gives every draft its receiver (the rules are CONTRACT 3.14's):
///
/// - a handoff goes to its target; a tool call to the sender of the tool result that
///   answers it (the next one), which is [`TOOLS`] unless the result is named, and a result
///   back to the sender of the last call; a thought to no one;
/// - the message that ends the conversation carrying its termination (a `StopMessage`, or
///   `TERMINATE` in its text, with no one speaking after it) goes to the task giver (the
///   first speaker), unless a human or the task giver itself sends it;
/// - in a swarm (a list with a handoff), the agent that holds control (the target of the
///   last handoff) answers whoever handed it control, and anyone else addresses the agent
///   holding control; before any handoff, the first agent answers the task giver;
/// - any other message goes to the next speaker other than the sender, else the previous
///   one, else `user` (none for `user` itself).
///
/// A call without a name (AG2 drops it) is first given its sender: in a conversation of two,
/// the party that did not answer it; in a `chat_messages` list, the `peer` unless the peer
/// answered it. Nothing goes from a party to itself. Each receiver given is passed to
/// `charge`; `None` as soon as it answers false.
pub(crate) fn route(
    mut drafts: Vec<Draft>,
    peer: Option<&str>,
    mut charge: impl FnMut(&str) -> bool,
) -> Option<Vec<AgMessage>> {
    let answers = answering_results(&drafts);
    name_unnamed_callers(&mut drafts, &answers, peer);
    let next = next_speakers(&drafts);
    let giver = drafts.iter().position(|d| d.speaks);
    let swarm = drafts.iter().any(|d| matches!(d.route, Route::Handoff(_)));
    let mut before = Speakers::default();
    let mut caller: Option<usize> = None;
    let mut handoff: Option<usize> = None;
    for (i, next) in next.into_iter().enumerate() {
        let sender = |j: usize| drafts[j].message.sender.as_str();
        let previous = before.other_than(sender(i), &drafts);
        before.see(i, &drafts);
        let turn = || {
            next.or(previous)
                .map(|j| sender(j).to_owned())
                .or_else(|| (sender(i) != "user").then(|| "user".to_owned()))
        };
        let draft = &drafts[i];
        let final_answer = draft.terminates
            && next.is_none()
            && !draft.message.human
            && giver.is_some_and(|g| sender(g) != sender(i));
        let receiver = match &draft.route {
            Route::Nobody => None,
            Route::To(party) | Route::Handoff(party) => Some(party.clone()),
            Route::Call => Some(answers[i].map_or(TOOLS, sender).to_owned()),
            Route::Caller => caller.map(|c| sender(c).to_owned()).or_else(turn),
            Route::Turn if final_answer => giver.map(|g| sender(g).to_owned()),
            Route::Turn if swarm => in_control(&drafts, i, handoff, giver).or_else(turn),
            Route::Turn => turn(),
        };
        match draft.route {
            Route::Call => caller = Some(i),
            Route::Handoff(_) => handoff = Some(i),
            _ => {}
        }
        let message = &mut drafts[i].message;
        message.receiver = receiver.filter(|r| *r != message.sender);
        if !message.receiver.as_deref().is_none_or(&mut charge) {
            return None;
        }
    }
    Some(drafts.into_iter().map(|d| d.message).collect())
}

/// Whom draft `i` addresses in a swarm, `handoff` the last handoff before it: the agent
/// holding control answers whoever handed it control, anyone else addresses the agent
/// holding it; before any handoff, an agent other than the task giver answers the task
/// giver (`None` for the task giver then: its turn decides).
fn in_control(drafts: &[Draft], i: usize, handoff: Option<usize>, giver: Option<usize>) -> Option<String> {
    let sender = drafts[i].message.sender.as_str();
    match handoff {
        Some(h) => {
            let Route::Handoff(holder) = &drafts[h].route else {
                return None;
            };
            Some(match holder == sender {
                true => drafts[h].message.sender.clone(),
                false => holder.clone(),
            })
        }
        None => giver
            .map(|g| drafts[g].message.sender.as_str())
            .filter(|g| *g != sender)
            .map(str::to_owned),
    }
}

/// For each tool call draft, the next tool result after it (an index of `drafts`).
fn answering_results(drafts: &[Draft]) -> Vec<Option<usize>> {
    let mut answers = vec![None; drafts.len()];
    let mut result = None;
    for i in (0..drafts.len()).rev() {
        match drafts[i].route {
            Route::Caller => result = Some(i),
            Route::Call => answers[i] = result,
            _ => {}
        }
    }
    answers
}

/// Gives each call without a name its sender, where the result answering it is named: the
/// other party of a conversation of two, else the `peer` of a `chat_messages` list when the
/// peer did not answer it; else it keeps its role.
fn name_unnamed_callers(drafts: &mut [Draft], answers: &[Option<usize>], peer: Option<&str>) {
    if !drafts.iter().any(|d| d.unnamed_call) {
        return;
    }
    let pair = two_parties(drafts, peer);
    for i in 0..drafts.len() {
        if !drafts[i].unnamed_call {
            continue;
        }
        let Some(executor) = answers[i].map(|r| drafts[r].message.sender.as_str()) else {
            continue;
        };
        if executor == TOOLS {
            continue;
        }
        let other = match &pair {
            Some((a, b)) if a == executor => Some(b.clone()),
            Some((a, b)) if b == executor => Some(a.clone()),
            _ => peer.filter(|p| *p != executor).map(str::to_owned),
        };
        if let Some(other) = other {
            drafts[i].message.sender = other;
        }
    }
}

/// The two parties of a conversation of two: the senders of the messages that take a turn
/// (calls without a name aside) and the `peer`, when there are exactly two.
fn two_parties(drafts: &[Draft], peer: Option<&str>) -> Option<(String, String)> {
    let mut seen: Vec<&str> = peer.into_iter().collect();
    for d in drafts.iter().filter(|d| d.speaks && !d.unnamed_call) {
        let sender = d.message.sender.as_str();
        if !seen.contains(&sender) {
            if seen.len() == 2 {
                return None;
            }
            seen.push(sender);
        }
    }
    match seen[..] {
        [a, b] => Some((a.to_owned(), b.to_owned())),
        _ => None,
    }
}

/// For each draft, the nearest speaker after it whose name differs from its sender (an
/// index of `drafts`).
fn next_speakers(drafts: &[Draft]) -> Vec<Option<usize>> {
    let mut after = Speakers::default();
    let mut next = vec![None; drafts.len()];
    for i in (0..drafts.len()).rev() {
        next[i] = after.other_than(&drafts[i].message.sender, drafts);
        after.see(i, drafts);
    }
    next
}

/// The speakers seen so far, walking drafts in one direction: the nearest, and the nearest
/// whose name differs from the nearest's (indices of the drafts).
#[derive(Debug, Default, Clone, Copy)]
struct Speakers {
    nearest: Option<usize>,
    other_than_nearest: Option<usize>,
}

impl Speakers {
    /// True when the nearest speaker seen is called `sender`.
    fn is_nearest(self, sender: &str, drafts: &[Draft]) -> bool {
        self.nearest.is_some_and(|n| drafts[n].message.sender == sender)
    }

    /// The nearest speaker seen whose name differs from `sender`.
    fn other_than(self, sender: &str, drafts: &[Draft]) -> Option<usize> {
        match self.is_nearest(sender, drafts) {
            true => self.other_than_nearest,
            false => self.nearest,
        }
    }

    /// Sees draft `i`: a speaker whose name differs from the nearest's becomes the nearest.
    fn see(&mut self, i: usize, drafts: &[Draft]) {
        let draft = &drafts[i];
        if draft.speaks && !self.is_nearest(&draft.message.sender, drafts) {
            self.other_than_nearest = self.nearest;
            self.nearest = Some(i);
        }
    }
}

/// Empties every conversation of a `chat_messages` dict that repeats one before it (a group
/// chat manager keeps the whole conversation once per agent): the same senders and texts at
/// the same places in the list. `conversations` are the peers' messages in the dict's
/// order, each with the step of its list's first entry.
pub(crate) fn drop_copies(conversations: &mut [(usize, Vec<AgMessage>)]) {
    use std::hash::{BuildHasher, Hash, Hasher};
    let hasher = foldhash::fast::FixedState::default();
    let key = |(first, messages): &(usize, Vec<AgMessage>)| {
        let mut h = hasher.build_hasher();
        for m in messages {
            (m.step - first, &m.sender, &m.content).hash(&mut h);
        }
        messages.len().hash(&mut h);
        h.finish()
    };
    let same = |(f1, a): &(usize, Vec<AgMessage>), (f2, b): &(usize, Vec<AgMessage>)| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.step - f1 == y.step - f2 && x.sender == y.sender && x.content == y.content)
    };
    // The first conversation of each hash: another of the same hash (a copy, or, very
    // rarely, a collision) is compared with it, and only on a collision with the rest.
    let mut seen: foldhash::HashMap<u64, usize> = foldhash::HashMap::default();
    for q in 0..conversations.len() {
        if conversations[q].1.is_empty() {
            continue;
        }
        let first = *seen.entry(key(&conversations[q])).or_insert(q);
        let copy = first != q
            && (same(&conversations[first], &conversations[q])
                || (0..q).any(|p| same(&conversations[p], &conversations[q])));
        if copy {
            conversations[q].1 = Vec::new();
        }
    }
}

#[cfg(test)]
mod reference;
#[cfg(test)]
pub(crate) use reference::{drop_copies_by_search, route_by_names};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::formats::autogen::agentchat::*;
    use crate::formats::autogen::{parse, AutogenError};

    fn pairs(text: &str) -> Vec<(String, Option<String>)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|m| (m.sender, m.receiver))
            .collect()
    }

    fn pair(sender: &str, receiver: &str) -> (String, Option<String>) {
        (sender.to_owned(), Some(receiver.to_owned()))
    }

    /// Regression (found by the fuzz test): a line `{"source":[null]}` was read as a
    /// `chat_messages` dict with one null message (an error naming entry 1), the same entry
    /// in an array as an entry without a sender (no messages).
    #[test]
    fn an_object_of_null_lists_reads_as_the_entry_it_is() {
        let line = r#"{"source":[null]}"#;
        assert_eq!(parse(line), parse(&format!("[{line}]")));
        assert!(matches!(
            parse(line),
            Err(crate::formats::autogen::AutogenError::NoMessages)
        ));
    }

    #[test]
    fn a_handoff_goes_to_its_target() {
        let log = json!([
            {"source": "planner", "type": "HandoffMessage", "target": "writer", "content": "over to you"},
            {"source": "writer", "type": "TextMessage", "content": "done"},
        ]);
        let got = pairs(&log.to_string());
        assert_eq!(got, vec![pair("planner", "writer"), pair("writer", "planner")]);
        assert_eq!(parse(&log.to_string()).unwrap()[0].message_type, "delegation");
    }

    fn nobody(sender: &str) -> (String, Option<String>) {
        (sender.to_owned(), None)
    }

    #[test]
    fn a_speaker_selection_is_no_message() {
        let log = json!([
            {"source": "user", "type": "TextMessage", "content": "task"},
            {"source": "manager", "type": "SelectorEvent", "content": "coder"},
            {"source": "manager", "type": "SelectSpeakerEvent", "content": ["coder"]},
            {"source": "coder", "type": "TextMessage", "content": "code"},
        ]);
        let messages = parse(&log.to_string()).unwrap();
        assert_eq!(
            messages.iter().map(|m| m.step).collect::<Vec<_>>(),
            [0, 3],
            "steps stay the places in the list"
        );
        assert_eq!(
            pairs(&log.to_string()),
            vec![pair("user", "coder"), pair("coder", "user")]
        );
    }

    #[test]
    fn turn_order_skips_the_senders_own_messages_and_a_thought_addresses_no_one() {
        let log = json!([
            {"source": "user", "type": "TextMessage", "content": "task"},
            {"source": "a", "type": "ThoughtEvent", "content": "hmm"},
            {"source": "a", "type": "TextMessage", "content": "part one"},
            {"source": "b", "type": "TextMessage", "content": "part two"},
        ]);
        assert_eq!(
            pairs(&log.to_string()),
            vec![pair("user", "a"), nobody("a"), pair("a", "b"), pair("b", "a")]
        );
    }

    #[test]
    fn tool_calls_go_to_the_tools_and_results_come_back_to_the_caller() {
        let log = json!({"messages": [
            {"source": "user", "type": "TextMessage", "content": "weather?"},
            {"source": "agent", "type": "ToolCallRequestEvent",
             "content": [{"id": "c1", "name": "get_weather", "arguments": "{\"city\":\"NYC\"}"}]},
            {"source": "agent", "type": "ToolCallExecutionEvent",
             "content": [{"call_id": "c1", "content": "sunny", "is_error": false}]},
            {"source": "agent", "type": "ToolCallSummaryMessage", "content": "sunny"},
        ]});
        let messages = parse(&log.to_string()).unwrap();
        let got: Vec<_> = messages
            .iter()
            .map(|m| (m.sender.as_str(), m.receiver.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("user", Some("agent")),
                ("agent", Some(TOOLS)),
                (TOOLS, Some("agent")),
                ("agent", Some("user")),
            ]
        );
        assert_eq!(messages[1].content, "get_weather({\"city\":\"NYC\"})");
        assert_eq!(messages[2].content, "sunny");
        assert_eq!(
            (messages[1].message_type, messages[2].message_type),
            ("action", "observation")
        );
    }

    #[test]
    fn the_last_message_goes_back_to_the_previous_speaker_and_a_lone_one_to_user() {
        let log = json!([
            {"source": "a", "type": "TextMessage", "content": "one"},
            {"source": "b", "type": "TextMessage", "content": "two"},
            {"source": "b", "type": "StopMessage", "content": "stop"},
        ]);
        assert_eq!(
            pairs(&log.to_string()),
            vec![pair("a", "b"), pair("b", "a"), pair("b", "a")]
        );
        let lone = json!([{"source": "a", "type": "TextMessage", "content": "hi"}]);
        assert_eq!(pairs(&lone.to_string()), vec![pair("a", "user")]);
        let user = json!([{"source": "user", "type": "TextMessage", "content": "hi"}]);
        assert_eq!(pairs(&user.to_string()), vec![("user".to_owned(), None)]);
    }

    #[test]
    fn created_at_is_the_time_and_blank_events_are_dropped() {
        let log = concat!(
            r#"{"source": "user", "type": "TextMessage", "content": "hi", "created_at": "2025-01-02T03:04:05.678Z"}"#,
            "\n",
            r#"{"source": "user_proxy", "type": "UserInputRequestedEvent", "content": ""}"#,
            "\n",
            r#"{"source": "a", "type": "MultiModalMessage", "content": ["look", {"data": "iVBOR"}]}"#,
        );
        let m = parse(log).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].timestamp, "2025-01-02T03:04:05.678Z");
        assert_eq!((m[1].step, m[1].content.as_str()), (2, "look\n[image]"));
        assert_eq!(m[1].timestamp, "2024-01-01T00:00:00.002Z", "no time: the step's");
    }

    /// Review finding: an agent state cut short by the sniff limit was not told apart,
    /// its `llm_messages` key not being searched for.
    #[test]
    fn an_agent_state_cut_short_is_told_by_its_llm_messages() {
        let head = format!(
            r#"{{"type":"AssistantAgentState","version":"1.0.0","llm_messages":[{{"source":"user","type":"UserMessage","content":"Write a poem"}},{{"source":"assistant","type":"AssistantMessage","content":"{}"#,
            "x".repeat(crate::formats::autogen::SNIFF_BYTES)
        );
        assert!(crate::formats::autogen::looks_like_bytes(head.as_bytes()));
    }

    #[test]
    fn a_team_state_is_read_from_its_managers_message_thread() {
        // Trimmed from the team state printed in AutoGen's "Managing State" tutorial
        // (microsoft/autogen, python/docs/src/user-guide/agentchat-user-guide/tutorial/state.ipynb).
        let state = json!({"type": "TeamState", "version": "1.0.0", "agent_states": {
            "group_chat_manager/a55364ad": {"type": "RoundRobinManagerState", "version": "1.0.0",
                "message_thread": [
                    {"source": "user", "models_usage": null, "content": "Write a poem", "type": "TextMessage"},
                    {"source": "assistant_agent", "models_usage": {"prompt_tokens": 29, "completion_tokens": 36},
                     "content": "In Tanganyika's depths", "type": "TextMessage"}],
                "current_turn": 0, "next_speaker_index": 0},
            "assistant_agent/a55364ad": {"type": "ChatAgentContainerState", "agent_state": {"llm_messages": []}}}});
        let text = serde_json::to_string_pretty(&state).unwrap();
        assert_eq!(
            pairs(&text),
            vec![pair("user", "assistant_agent"), pair("assistant_agent", "user")]
        );
        assert!(crate::formats::autogen::looks_like(&text));
        assert!(
            crate::formats::autogen::looks_like(&text[..text.len() / 2]),
            "cut short"
        );
    }

    #[test]
    fn model_context_messages_are_read_as_agentchat_messages_are() {
        // The shape of microsoft/autogen's
        // python/samples/core_streaming_handoffs_fastapi/chat_history/history-*.json.
        let history = json!({"messages": [
            {"content": "my unicycle exploded", "source": "User", "type": "UserMessage"},
            {"content": [{"id": "c", "arguments": "{}", "name": "transfer_to_repairs"}],
             "thought": null, "source": "TriageAgent", "type": "AssistantMessage"},
            {"content": [{"content": "Transferred", "name": "transfer_to_repairs", "call_id": "c",
                          "is_error": false}], "type": "FunctionExecutionResultMessage"},
            {"content": "What happened?", "source": "RepairsAgent", "type": "AssistantMessage"},
            {"content": "chunk", "source": "RepairsAgent", "type": "ModelClientStreamingChunkEvent"},
        ]});
        let text = serde_json::to_string_pretty(&history).unwrap();
        assert!(crate::formats::autogen::looks_like(&text));
        assert_eq!(
            pairs(&text),
            vec![
                pair("User", "TriageAgent"),
                pair("TriageAgent", TOOLS),
                pair(TOOLS, "TriageAgent"),
                pair("RepairsAgent", "TriageAgent"),
            ]
        );
    }

    #[test]
    fn a_group_chat_list_takes_its_senders_from_names_and_turn_order() {
        let log = json!([
            {"role": "user", "name": "Admin", "content": "plan it"},
            {"role": "user", "name": "Planner", "content": "a plan"},
            {"role": "assistant", "content": null,
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
            {"role": "tool", "content": "ok", "tool_responses": [{"tool_call_id": "c", "content": "ok"}]},
            {"role": "user", "name": "Engineer", "content": "built"},
        ]);
        assert_eq!(
            pairs(&log.to_string()),
            vec![
                pair("Admin", "Planner"),
                pair("Planner", "assistant"),
                pair("assistant", TOOLS),
                pair(TOOLS, "assistant"),
                pair("Engineer", "assistant"),
            ]
        );
    }

    #[test]
    fn chat_messages_are_read_per_peer_with_the_peer_as_the_unnamed_user() {
        let dump = json!({
            "critic": [
                {"role": "assistant", "content": "draft"},
                {"role": "user", "content": "fix it"},
            ],
            "chat_manager": [
                {"role": "user", "name": "A1", "content": "one"},
                {"role": "assistant", "content": "two"},
            ],
        });
        let messages = parse(&serde_json::to_string_pretty(&dump).unwrap()).unwrap();
        let got: Vec<_> = messages
            .iter()
            .map(|m| (m.step, m.sender.as_str(), m.receiver.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "assistant", Some("critic")),
                (1, "critic", Some("assistant")),
                (2, "A1", Some("assistant")),
                (3, "assistant", Some("A1")),
            ]
        );
    }

    #[test]
    fn sender_recipient_logs_keep_commugraphs_form() {
        let log = json!([
            {"sender": "a", "recipient": "b", "message": "hi"},
            {"source": "x", "type": "TextMessage", "content": "no receiver here"},
        ]);
        let m = parse(&log.to_string()).unwrap();
        assert_eq!(
            (m[1].sender.as_str(), m[1].receiver.as_deref()),
            ("unknown", None)
        );
    }

    #[test]
    fn a_sender_on_any_line_makes_json_lines_commugraphs_form() {
        let log = concat!(
            r#"{"source": "x", "type": "TextMessage", "content": "first"}"#,
            "\n",
            r#"{"sender": "a", "recipient": "b", "message": "hi"}"#,
        );
        let m = parse(log).unwrap();
        assert_eq!(
            (m[0].sender.as_str(), m[0].receiver.as_deref()),
            ("unknown", None)
        );
        assert_eq!((m[1].sender.as_str(), m[1].receiver.as_deref()), ("a", Some("b")));
    }

    #[test]
    fn agentchat_and_chat_lists_are_told_without_taking_claude_code() {
        use crate::formats::autogen::looks_like;
        assert!(looks_like(
            r#"[{"source": "user", "type": "TextMessage", "content": "x"}]"#
        ));
        assert!(looks_like(
            r#"{"source": "user", "type": "TextMessage", "content": "x"}"#
        ));
        assert!(looks_like(
            "{\n  \"messages\": [\n    {\"source\": \"u\", \"type\": \"TextMessage\"}"
        ));
        assert!(looks_like(
            "[{\"role\": \"user\", \"name\": \"A\", \"content\": \"x\"}]"
        ));
        assert!(looks_like(
            "{\n \"chat_manager\": [\n  {\"role\": \"user\", \"content\": \"x\"},"
        ));
        assert!(!looks_like(
            r#"{"type": "user", "uuid": "u", "message": {"role": "user", "content": "x"}}"#
        ));
        assert!(!looks_like(r#"{"source": "x", "type": "user", "uuid": "u"}"#));
        assert!(!looks_like(r#"{"type": "session", "version": 3, "id": "x"}"#));
        assert!(!looks_like(
            r#"{"messages": [{"role": "user", "content": "x", "uuid": "u"}]}"#
        ));
        assert!(!looks_like(
            "{\n \"a\": 1,\n \"b\": [\n {\"role\": \"user\", \"content\": \"x\"}"
        ));
        let long_claude_line = r#"{"parentUuid": null, "sessionId": "s", "x": {"messages": [{"role": "user", "content": "x"}]}, "cut"#;
        assert!(
            !looks_like(long_claude_line),
            "a Claude Code line the head cuts short"
        );
    }

    #[test]
    fn a_null_message_in_a_wrapped_list_is_commugraphs_entry_error() {
        let dump = r#"{"messages": [{"source": "a", "type": "TextMessage", "content": "x"}, null]}"#;
        assert_eq!(parse(dump), Err(AutogenError::Entry(2)));
        assert_eq!(parse(r#"{"messages": []}"#), Err(AutogenError::NoMessages));
    }
}
