//! The reader as it was before F10: the whole log read into `serde_json::Value`s, then its
//! messages. Kept as the reference the streaming reader must agree with on every log
//! (`autogen::read`'s tests); the messages of one entry and the drafts are the shared
//! functions, the forms, unwrapping and routing this reader's own.

use serde_json::{Map, Value};

use crate::formats::autogen::agentchat::{
    chat_draft, drop_copies_by_search, route_by_names, AgentChatReading, Form,
};
use crate::formats::autogen::{message, AgMessage, AutogenError};

const TYPES: [&str; 20] = [
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
    "UserMessage",
    "AssistantMessage",
    "SystemMessage",
    "FunctionExecutionResultMessage",
];
const ROLES: [&str; 5] = ["user", "assistant", "system", "tool", "function"];
const COMMUGRAPH_KEYS: [&str; 4] = ["sender", "recipient", "from", "to"];
const CLAUDE_KEYS: [&str; 3] = ["uuid", "sessionId", "parentUuid"];

fn is_agentchat_message(object: &Map<String, Value>) -> bool {
    let known = matches!(object.get("type"), Some(Value::String(t)) if TYPES.contains(&t.as_str()));
    known && object.get("source").is_some_and(Value::is_string) && !is_claude(object)
}

fn is_chat_message(object: &Map<String, Value>) -> bool {
    let role = matches!(object.get("role"), Some(Value::String(r)) if ROLES.contains(&r.as_str()));
    role && object.contains_key("content") && !object.contains_key("type") && !is_claude(object)
}

fn names_parties(object: &Map<String, Value>) -> bool {
    COMMUGRAPH_KEYS.iter().any(|k| object.contains_key(*k))
}

fn is_claude(object: &Map<String, Value>) -> bool {
    CLAUDE_KEYS.iter().any(|k| object.contains_key(*k))
}

fn form_of<'a>(entries: impl Iterator<Item = &'a Value> + Clone) -> Form {
    let mut objects = entries.filter_map(Value::as_object);
    if objects.clone().any(names_parties) {
        return Form::CommuGraph;
    }
    match objects.next() {
        Some(o) if is_agentchat_message(o) => Form::AgentChat,
        Some(o) if is_chat_message(o) => Form::ChatList,
        _ => Form::CommuGraph,
    }
}

enum Wrapped<'a> {
    List(&'a [Value]),
    Dict(Vec<(&'a str, &'a [Value])>),
}

fn unwrap(object: &Map<String, Value>) -> Option<Wrapped<'_>> {
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

/// The log's messages, read whole.
pub(super) fn parse(text: &str) -> Result<Vec<AgMessage>, AutogenError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(AutogenError::Empty);
    }
    let document = trimmed
        .starts_with('{')
        .then(|| serde_json::from_str::<Map<String, Value>>(trimmed).ok())
        .flatten();
    let messages = match document.as_ref().and_then(unwrap) {
        Some(wrapped) => read_wrapped(&wrapped)?,
        None if trimmed.starts_with('[') => read_array(text)?,
        None => read_lines(text)?,
    };
    if messages.is_empty() {
        return Err(AutogenError::NoMessages);
    }
    Ok(messages)
}

fn read_array(text: &str) -> Result<Vec<AgMessage>, AutogenError> {
    let list: Vec<Value> = serde_json::from_str(text).map_err(|_| AutogenError::Array)?;
    if let Some(i) = list.iter().position(Value::is_null) {
        return Err(AutogenError::Entry(i + 1));
    }
    let entries: Vec<(usize, &Value)> = list.iter().enumerate().collect();
    Ok(read_entries(&entries))
}

fn read_lines(text: &str) -> Result<Vec<AgMessage>, AutogenError> {
    let mut kept: Vec<(usize, Value)> = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let entry: Value = serde_json::from_str(line).map_err(|_| AutogenError::Line(i + 1))?;
        if entry.is_null() {
            return Err(AutogenError::Entry(i + 1));
        }
        if entry.is_object() {
            kept.push((i, entry));
        }
    }
    let entries: Vec<(usize, &Value)> = kept.iter().map(|(step, v)| (*step, v)).collect();
    Ok(read_entries(&entries))
}

fn read_entries(entries: &[(usize, &Value)]) -> Vec<AgMessage> {
    let objects = entries
        .iter()
        .filter_map(|(step, v)| Some((*step, v.as_object()?)));
    match form_of(entries.iter().map(|(_, v)| *v)) {
        Form::AgentChat => {
            let mut reading = AgentChatReading::default();
            let drafts = objects.filter_map(|(step, o)| reading.draft(o, step)).collect();
            route_by_names(drafts, None)
        }
        Form::ChatList => route_by_names(
            objects
                .filter_map(|(step, o)| chat_draft(o, step, None))
                .collect(),
            None,
        ),
        Form::CommuGraph => objects.filter_map(|(step, o)| message(o, step)).collect(),
    }
}

fn read_wrapped(wrapped: &Wrapped<'_>) -> Result<Vec<AgMessage>, AutogenError> {
    match wrapped {
        Wrapped::List(list) => {
            let entries = indexed(list, 0)?;
            Ok(read_entries(&entries))
        }
        Wrapped::Dict(peers) => {
            let mut conversations = Vec::new();
            let mut first_step = 0;
            for (peer, list) in peers {
                let entries = indexed(list, first_step)?;
                let drafts = entries
                    .iter()
                    .filter_map(|(step, v)| chat_draft(v.as_object()?, *step, Some(peer)))
                    .collect();
                conversations.push((first_step, route_by_names(drafts, Some(peer))));
                first_step += list.len();
            }
            drop_copies_by_search(&mut conversations);
            Ok(conversations.into_iter().flat_map(|(_, c)| c).collect())
        }
    }
}

fn indexed(list: &[Value], first_step: usize) -> Result<Vec<(usize, &Value)>, AutogenError> {
    list.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Null => Err(AutogenError::Entry(first_step + i + 1)),
            v => Ok((first_step + i, v)),
        })
        .collect()
}
