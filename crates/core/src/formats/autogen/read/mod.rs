//! Reading an AutoGen log without holding it whole (review finding F10: a 28 MiB JSON array
//! of `{}` took 1.63 GB, a million small messages 906 MB, read whole as `serde_json::Value`s
//! before their messages were charged). Two passes: the first ([`crate::formats::autogen::shape`])
//! learns the log's shape and keeps nothing of it; the second reads its messages one entry
//! at a time (a line, an element of the array or of the list a whole document wraps, each
//! read into a map of the keys a message is read from) and charges each message kept to
//! the session's [`RecordBudget`] ([`message_cost`]), stopping as soon as it runs out. Both
//! read the log as the whole-document reader did, so the messages are the same.

use std::fmt;

use foldhash::HashMap;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::formats::autogen::agentchat::{self, AgentChatReading, Draft, Form};
use crate::formats::autogen::cost::{message_cost, receiver_cost};
use crate::formats::autogen::shape::{
    self as shape, read_whole, through_raw_value, KeySeed, PathStep, Peer, Plan, Target, MESSAGE_KEYS,
    RAW_VALUE_TOKEN,
};
use crate::formats::autogen::{self, AgMessage, AutogenError};
use crate::memory_bound::RecordBudget;

/// Why an AutoGen log was not read within a memory bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The log cannot be read (CommuGraph's errors).
    #[error(transparent)]
    Autogen(#[from] AutogenError),
    /// Its messages cost more than the budget has room for: reading stopped there.
    #[error("the messages read cost more than the memory bound leaves them")]
    PastBound {
        /// The messages kept when reading stopped.
        messages: usize,
    },
}

/// Reads an AutoGen log (see [`autogen::parse`]), charging what it keeps to `budget`.
pub fn read(text: &str, budget: &RecordBudget) -> Result<Vec<AgMessage>, ReadError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(AutogenError::Empty.into());
    }
    let mut charges = Charges { budget, kept: 0 };
    let plan = if trimmed.starts_with('{') {
        shape::document(trimmed, budget).map_err(|_| charges.past())?
    } else {
        None
    };
    let messages = match plan {
        Some(plan) => read_document(trimmed, &plan, &mut charges)?,
        None if trimmed.starts_with('[') => read_array(text, &mut charges)?,
        None => read_lines(text, &mut charges)?,
    };
    if messages.is_empty() {
        return Err(AutogenError::NoMessages.into());
    }
    Ok(messages)
}

/// The budget messages are charged to as they are kept, and how many were.
struct Charges<'b> {
    budget: &'b RecordBudget,
    kept: usize,
}

impl Charges<'_> {
    /// Charges `cost` for a message kept.
    fn keep(&mut self, cost: usize) -> Result<(), ReadError> {
        self.kept += 1;
        self.add(cost)
    }

    /// Charges `cost` for what reading holds besides the messages kept.
    fn add(&mut self, cost: usize) -> Result<(), ReadError> {
        if self.budget.charge(cost) {
            Ok(())
        } else {
            Err(self.past())
        }
    }

    /// The error of a reading stopped by the budget.
    fn past(&self) -> ReadError {
        ReadError::PastBound { messages: self.kept }
    }

    /// The error a pass that stopped early gives: past the budget, or `otherwise`.
    fn stopped(&self, otherwise: AutogenError) -> ReadError {
        if self.budget.is_exhausted() {
            self.past()
        } else {
            otherwise.into()
        }
    }
}

/// The messages of JSON lines, their steps the 0-based line numbers.
fn read_lines(text: &str, charges: &mut Charges<'_>) -> Result<Vec<AgMessage>, ReadError> {
    let shape = shape::lines(text)?;
    charges.add(shape.largest_entry)?;
    let mut reading = ListReading::new(shape.form(), None, charges);
    for (i, line) in shape::nonblank_lines(text) {
        let entry = read_whole(line, EntrySeed).map_err(|_| AutogenError::Line(i + 1))?;
        if let Some(object) = entry {
            reading.entry(i, &object, line.len())?;
        }
    }
    reading.finish()
}

/// The messages of a JSON array, their steps the 0-based positions.
fn read_array(text: &str, charges: &mut Charges<'_>) -> Result<Vec<AgMessage>, ReadError> {
    let shape = shape::array(text)?;
    charges.add(shape.largest_entry)?;
    let reading = ListReading::new(shape.form(), None, charges);
    let seed = EntriesSeed {
        reading,
        first_step: 0,
    };
    match read_whole(text, seed) {
        Ok(reading) => reading.finish(),
        Err(_) => Err(charges.stopped(AutogenError::Array)),
    }
}

/// The messages of a whole-document object, where `plan` says they are.
fn read_document(trimmed: &str, plan: &Plan, charges: &mut Charges<'_>) -> Result<Vec<AgMessage>, ReadError> {
    if let Some(error) = first_null(&plan.target) {
        return Err(error.into());
    }
    charges.add(largest_entry(&plan.target))?;
    let read = match &plan.target {
        Target::List(list) => {
            let reading = ListReading::new(list.form(), None, charges);
            let then = EntriesSeed {
                reading,
                first_step: 0,
            };
            read_whole(trimmed, Navigate::document(&plan.path, then)).map(|r| r.map(ListReading::finish))
        }
        Target::Peers(peers) => {
            let then = PeersSeed {
                peers,
                charges,
                raw_values: !plan.path.is_empty(),
            };
            if plan.path.is_empty() {
                read_whole(trimmed, then).map(Some)
            } else {
                read_whole(trimmed, Navigate::document(&plan.path, then))
            }
        }
    };
    // The first pass found the document whole and the members the plan names.
    match read {
        Ok(Some(messages)) => messages,
        _ => Err(charges.stopped(AutogenError::Line(1))),
    }
}

/// CommuGraph's error for the first `null` entry of what a document wraps.
fn first_null(target: &Target) -> Option<AutogenError> {
    let at = match target {
        Target::List(list) => list.first_null,
        Target::Peers(peers) => peers
            .iter()
            .find_map(|p| p.shape.first_null.map(|i| p.first_step + i)),
    };
    at.map(|i| AutogenError::Entry(i + 1))
}

/// The most one entry of what a document wraps holds while it is read.
fn largest_entry(target: &Target) -> usize {
    match target {
        Target::List(list) => list.largest_entry,
        Target::Peers(peers) => peers.iter().map(|p| p.shape.largest_entry).max().unwrap_or(0),
    }
}

/// One list's messages, read entry by entry in the list's form and charged as they are kept:
/// CommuGraph's messages at once, AutoGen's own as drafts until the list's end gives them
/// their receivers.
struct ListReading<'c, 'b> {
    form: Form,
    /// The `chat_messages` key the list was saved under.
    peer: Option<&'c str>,
    charges: &'c mut Charges<'b>,
    messages: Vec<AgMessage>,
    drafts: Vec<Draft>,
    /// What reading an AgentChat list remembers between entries.
    agentchat: AgentChatReading,
}

impl<'c, 'b> ListReading<'c, 'b> {
    fn new(form: Form, peer: Option<&'c str>, charges: &'c mut Charges<'b>) -> Self {
        ListReading {
            form,
            peer,
            charges,
            messages: Vec::new(),
            drafts: Vec::new(),
            agentchat: AgentChatReading::default(),
        }
    }

    /// Reads the entry at `step`, an object read from `input_bytes` bytes of the log.
    fn entry(
        &mut self,
        step: usize,
        object: &Map<String, Value>,
        input_bytes: usize,
    ) -> Result<(), ReadError> {
        let draft = match self.form {
            Form::CommuGraph => {
                let Some(message) = autogen::message(object, step) else {
                    return Ok(());
                };
                self.charges.keep(message_cost(&message, input_bytes))?;
                self.messages.push(message);
                return Ok(());
            }
            Form::AgentChat => self.agentchat.draft(object, step),
            Form::ChatList => agentchat::chat_draft(object, step, self.peer),
        };
        if let Some(draft) = draft {
            self.charges.keep(message_cost(&draft.message, input_bytes))?;
            self.drafts.push(draft);
        }
        Ok(())
    }

    /// The messages, the drafts given their receivers (each charged).
    fn finish(self) -> Result<Vec<AgMessage>, ReadError> {
        if self.form == Form::CommuGraph {
            return Ok(self.messages);
        }
        let charges = self.charges;
        agentchat::route(self.drafts, self.peer, |receiver| {
            charges.add(receiver_cost(receiver)).is_ok()
        })
        .ok_or_else(|| charges.past())
    }
}

/// Reads an entry as `serde_json::Value` reads it, keeping only an object's
/// [`MESSAGE_KEYS`] (what its message is read from): `None` for anything but an object.
#[derive(Clone, Copy)]
struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Option<Map<String, Value>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an entry")
    }

    scalars_read_as!(None);

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut key = map.next_key_seed(KeySeed)?;
        if key.as_deref() == Some(RAW_VALUE_TOKEN) {
            return through_raw_value(&mut map, EntrySeed).map(|(entry, _)| entry);
        }
        let mut object = Map::new();
        while let Some(k) = key {
            if MESSAGE_KEYS.contains(&k.as_ref()) {
                let value: Value = map.next_value()?;
                object.insert(k.into_owned(), value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            key = map.next_key_seed(KeySeed)?;
        }
        Ok(Some(object))
    }
}

/// Reads a list's entries into a [`ListReading`], the first at `first_step`.
struct EntriesSeed<'c, 'b> {
    reading: ListReading<'c, 'b>,
    first_step: usize,
}

impl<'de, 'c, 'b> DeserializeSeed<'de> for EntriesSeed<'c, 'b> {
    type Value = ListReading<'c, 'b>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'c, 'b> Visitor<'de> for EntriesSeed<'c, 'b> {
    type Value = ListReading<'c, 'b>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut step = self.first_step;
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            let json = raw.get();
            if let Some(object) = read_whole(json, EntrySeed).map_err(de::Error::custom)? {
                self.reading
                    .entry(step, &object, json.len())
                    .map_err(de::Error::custom)?;
            }
            step += 1;
        }
        Ok(self.reading)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        match map.next_key_seed(KeySeed)? {
            Some(key) if key == RAW_VALUE_TOKEN => {
                through_raw_value(&mut map, self).map(|(reading, _)| reading)
            }
            _ => Err(de::Error::custom("not a list of messages")),
        }
    }
}

/// Reads a `chat_messages` dict: each peer's conversation (the last member of its key) as a
/// 0.2 / AG2 list, its steps after those of the peers before it; the messages in the
/// peers' order.
struct PeersSeed<'p, 'c, 'b> {
    peers: &'p [Peer],
    charges: &'c mut Charges<'b>,
    /// True when the dict is a value within the document, which may stand for a raw value.
    raw_values: bool,
}

impl<'de> DeserializeSeed<'de> for PeersSeed<'_, '_, '_> {
    type Value = Result<Vec<AgMessage>, ReadError>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PeersSeed<'_, '_, '_> {
    type Value = Result<Vec<AgMessage>, ReadError>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chat_messages dict")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut key = map.next_key_seed(KeySeed)?;
        if self.raw_values && key.as_deref() == Some(RAW_VALUE_TOKEN) {
            return through_raw_value(&mut map, self).map(|(messages, _)| messages);
        }
        let index: HashMap<&str, usize> = self
            .peers
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let mut seen = vec![0usize; self.peers.len()];
        let mut conversations: Vec<Vec<AgMessage>> = vec![Vec::new(); self.peers.len()];
        while let Some(k) = key {
            let Some(&p) = index.get(k.as_ref()) else {
                map.next_value::<IgnoredAny>()?;
                key = map.next_key_seed(KeySeed)?;
                continue;
            };
            let peer = &self.peers[p];
            seen[p] += 1;
            if seen[p] - 1 == peer.occurrence && peer.shape.len > 0 {
                let reading = ListReading::new(Form::ChatList, Some(&peer.name), self.charges);
                let seed = EntriesSeed {
                    reading,
                    first_step: peer.first_step,
                };
                match map.next_value_seed(seed)?.finish() {
                    Ok(messages) => conversations[p] = messages,
                    Err(stopped) => return Ok(Err(stopped)),
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            key = map.next_key_seed(KeySeed)?;
        }
        // A group chat manager keeps the conversation once per agent: each message counts
        // once.
        let mut conversations: Vec<(usize, Vec<AgMessage>)> = self
            .peers
            .iter()
            .map(|p| p.first_step)
            .zip(conversations)
            .collect();
        agentchat::drop_copies(&mut conversations);
        Ok(Ok(conversations.into_iter().flat_map(|(_, c)| c).collect()))
    }
}

/// Goes into the members `path` names, one level at a time, and reads the last one's value
/// with `then`; `None` when a member is missing.
struct Navigate<'p, T> {
    path: &'p [PathStep],
    then: T,
    /// True below the document: an object there may stand for a raw value.
    raw_values: bool,
}

impl<'p, T> Navigate<'p, T> {
    /// From the document down (`path` is not empty).
    fn document(path: &'p [PathStep], then: T) -> Self {
        Navigate {
            path,
            then,
            raw_values: false,
        }
    }
}

impl<'de, T, R> DeserializeSeed<'de> for Navigate<'_, T>
where
    T: for<'j> DeserializeSeed<'j, Value = R>,
{
    type Value = Option<R>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T, R> Visitor<'de> for Navigate<'_, T>
where
    T: for<'j> DeserializeSeed<'j, Value = R>,
{
    type Value = Option<R>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut key = map.next_key_seed(KeySeed)?;
        if self.raw_values && key.as_deref() == Some(RAW_VALUE_TOKEN) {
            return through_raw_value(&mut map, self).map(|(read, _)| read);
        }
        let Some((step, rest)) = self.path.split_first() else {
            return Err(de::Error::custom("an empty path"));
        };
        let (mut then, mut seen, mut read) = (Some(self.then), 0, None);
        while let Some(k) = key {
            let here = k == step.key.as_str() && seen == step.occurrence;
            seen += usize::from(k == step.key.as_str());
            match then.take_if(|_| here) {
                Some(then) if rest.is_empty() => read = Some(map.next_value_seed(then)?),
                Some(then) => {
                    let deeper = Navigate {
                        path: rest,
                        then,
                        raw_values: true,
                    };
                    read = map.next_value_seed(deeper)?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            key = map.next_key_seed(KeySeed)?;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod whole_document;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::formats::autogen::read::*;
    use crate::formats::autogen::shape::LIST_KEYS;

    /// A JSON value to be written as text: an object may repeat a key, and a number is
    /// written as given.
    #[derive(Debug, Clone)]
    enum Json {
        Raw(&'static str),
        Str(String),
        Array(Vec<Json>),
        Object(Vec<(String, Json)>),
    }

    impl Json {
        fn object(members: &[(&str, Json)]) -> Json {
            Json::Object(
                members
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
            )
        }

        /// Written compactly, or with a line per member and element.
        fn write(&self, out: &mut String, pretty: bool) {
            let gap = if pretty { "\n" } else { "" };
            match self {
                Json::Raw(raw) => out.push_str(raw),
                Json::Str(s) => out.push_str(&serde_json::to_string(s).unwrap()),
                Json::Array(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        out.push_str(if i == 0 { "" } else { "," });
                        out.push_str(gap);
                        item.write(out, pretty);
                    }
                    out.push_str(gap);
                    out.push(']');
                }
                Json::Object(members) => {
                    out.push('{');
                    for (i, (key, value)) in members.iter().enumerate() {
                        out.push_str(if i == 0 { gap } else { "," });
                        out.push_str(gap);
                        out.push_str(&serde_json::to_string(key).unwrap());
                        out.push(':');
                        value.write(out, pretty);
                    }
                    out.push_str(gap);
                    out.push('}');
                }
            }
        }

        fn text(&self, pretty: bool) -> String {
            let mut out = String::new();
            self.write(&mut out, pretty);
            out
        }
    }

    const ENTRY_KEYS: [&str; 21] = [
        "sender",
        "recipient",
        "to",
        "message",
        "content",
        "text",
        "source",
        "type",
        "role",
        "name",
        "target",
        "tool_calls",
        "function_call",
        "created_at",
        "uuid",
        "extra",
        "id",
        "call_id",
        "is_error",
        "tool_call_id",
        "tool_responses",
    ];

    const STRINGS: [&str; 30] = [
        "a",
        "b",
        "user",
        "tools",
        "assistant",
        "tool",
        "all",
        "hi",
        "please build it",
        " ",
        "",
        "TextMessage",
        "HandoffMessage",
        "ToolCallRequestEvent",
        "ToolCallExecutionEvent",
        "SelectSpeakerEvent",
        "AssistantMessage",
        "FunctionExecutionResultMessage",
        "ModelClientStreamingChunkEvent",
        "SelectorEvent",
        "ThoughtEvent",
        "UserInputRequestedEvent",
        "StopMessage",
        "ToolCallSummaryMessage",
        "TERMINATE",
        "Error: x",
        "c1",
        "thought",
        "2024-03-01T08:00:00Z",
        "x\u{1}y\"",
    ];

    const NUMBERS: [&str; 5] = ["0", "7", "-2.5", "1709280000123", "1e300"];

    const DOCUMENT_KEYS: [&str; 12] = [
        "messages",
        "message_thread",
        "chat_history",
        "llm_messages",
        "task_result",
        "llm_context",
        "agent_states",
        "critic",
        "chat_manager",
        "stop_reason",
        "sender",
        RAW_VALUE_TOKEN,
    ];

    fn leaf() -> impl Strategy<Value = Json> {
        prop_oneof![
            4 => prop::sample::select(NUMBERS.to_vec()).prop_map(Json::Raw),
            4 => prop::sample::select(vec!["null", "true", "false"]).prop_map(Json::Raw),
            16 => prop::sample::select(STRINGS.to_vec()).prop_map(|s| Json::Str(s.to_owned())),
        ]
    }

    /// A value within an entry: a leaf, or a list or object of them.
    fn member_value() -> impl Strategy<Value = Json> {
        leaf().prop_recursive(2, 12, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
                prop::collection::vec((prop::sample::select(ENTRY_KEYS.to_vec()), inner), 0..4)
                    .prop_map(|m| Json::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    /// An entry: mostly an object of message keys (which may repeat), else `null` or a
    /// scalar, or an object standing for a raw value.
    fn entry() -> impl Strategy<Value = Json> {
        let object = || {
            prop::collection::vec((prop::sample::select(ENTRY_KEYS.to_vec()), member_value()), 0..6)
                .prop_map(|m| Json::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
        };
        prop_oneof![
            8 => object(),
            1 => leaf(),
            1 => object().prop_map(|o| Json::object(&[(RAW_VALUE_TOKEN, Json::Str(o.text(false)))])),
        ]
    }

    /// A 0.2 / AG2 chat message (or, now and then, `null`): with or without a name, tool
    /// calls (with ids, one or two) or tool responses (their text in the content, or not).
    fn chat_entry() -> impl Strategy<Value = Json> {
        let text = || prop::sample::select(STRINGS.to_vec()).prop_map(|s| Json::Str(s.to_owned()));
        let role = prop::sample::select(vec!["user", "assistant", "tool", "function", "system"]);
        // A few names, so that conversations of two (and peers' names) come up.
        let name = prop_oneof![
            3 => prop::sample::select(vec!["a", "b", "critic"]).prop_map(|s| Json::Str(s.to_owned())),
            1 => text(),
        ];
        let message = (role, text(), proptest::option::of(name), 0u8..3, any::<bool>()).prop_map(
            |(role, content, name, calls, responses)| {
                let mut members = vec![("role", Json::Str(role.to_owned())), ("content", content.clone())];
                members.extend(name.map(|n| ("name", n)));
                if calls > 0 {
                    let call = |k: u8| {
                        let function = Json::object(&[
                            ("name", Json::Str("run".to_owned())),
                            ("arguments", Json::Raw("{}")),
                        ]);
                        Json::object(&[("id", Json::Str(format!("c{k}"))), ("function", function)])
                    };
                    members.push(("tool_calls", Json::Array((0..calls).map(call).collect())));
                }
                if responses {
                    let response = |said: Json| {
                        Json::object(&[("tool_call_id", Json::Str("c0".to_owned())), ("content", said)])
                    };
                    let said = vec![response(content), response(Json::Str("Error: x".to_owned()))];
                    members.push(("tool_responses", Json::Array(said)));
                }
                Json::object(&members)
            },
        );
        prop_oneof![8 => message, 1 => Just(Json::Raw("null"))]
    }

    /// An AgentChat message of a team of a few agents: text (ending the run now and then),
    /// a thought, a handoff, a speaker selection, an input request, tool calls (one or two)
    /// and their results (failed or not).
    fn agentchat_entry() -> impl Strategy<Value = Json> {
        let agent = || prop::sample::select(vec!["user", "a", "b", "c", "user_proxy"]);
        let kind = prop::sample::select(vec![
            "TextMessage",
            "TextMessage",
            "ToolCallSummaryMessage",
            "StopMessage",
            "ThoughtEvent",
            "HandoffMessage",
            "SelectorEvent",
            "SelectSpeakerEvent",
            "UserInputRequestedEvent",
            "ToolCallRequestEvent",
            "ToolCallExecutionEvent",
            "FunctionExecutionResultMessage",
        ]);
        let text = prop::sample::select(vec!["hi", "done. TERMINATE", "please build it", ""]);
        (agent(), agent(), kind, text, 1u8..3, any::<bool>()).prop_map(
            |(source, target, kind, text, n, failed)| {
                let content = match kind {
                    "ToolCallRequestEvent" => Json::Array(
                        (0..n)
                            .map(|k| {
                                Json::object(&[
                                    ("id", Json::Str(format!("c{k}"))),
                                    ("name", Json::Str("run".to_owned())),
                                    ("arguments", Json::Str("{}".to_owned())),
                                ])
                            })
                            .collect(),
                    ),
                    "ToolCallExecutionEvent" | "FunctionExecutionResultMessage" => Json::Array(
                        (0..n)
                            .map(|k| {
                                Json::object(&[
                                    ("call_id", Json::Str(format!("c{k}"))),
                                    ("content", Json::Str(format!("r{k}"))),
                                    (
                                        "is_error",
                                        Json::Raw(if failed && k == 0 { "true" } else { "false" }),
                                    ),
                                ])
                            })
                            .collect(),
                    ),
                    "SelectSpeakerEvent" => Json::Array(vec![Json::Str(target.to_owned())]),
                    _ => Json::Str(text.to_owned()),
                };
                let mut members = vec![
                    ("source", Json::Str(source.to_owned())),
                    ("type", Json::Str(kind.to_owned())),
                    ("content", content),
                ];
                if kind == "HandoffMessage" {
                    members.push(("target", Json::Str(target.to_owned())));
                }
                Json::object(&members)
            },
        )
    }

    /// A log: a list of entries as an array or JSON lines, or wrapped in a document in one
    /// of the ways AutoGen dumps are (keys repeated, raw values, other members), or cut
    /// short.
    fn log() -> impl Strategy<Value = String> {
        let list = || prop::collection::vec(entry(), 0..7).prop_map(Json::Array);
        let other = (prop::sample::select(DOCUMENT_KEYS.to_vec()), member_value());
        let chats = || prop::collection::vec(chat_entry(), 0..5).prop_map(Json::Array);
        let team = || prop::collection::vec(agentchat_entry(), 0..12).prop_map(Json::Array);
        (
            prop_oneof![list(), chats(), team()],
            prop_oneof![list(), chats()],
            0u8..9,
            prop::collection::vec(other, 0..3),
            any::<bool>(),
            0usize..40,
        )
            .prop_map(|(list, second, shape, others, pretty, cut)| {
                let others: Vec<(String, Json)> =
                    others.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                let with_others = |members: Vec<(String, Json)>| {
                    let mut all = others.clone();
                    all.extend(members);
                    Json::Object(all)
                };
                let key = |k: &str| k.to_owned();
                let document = match shape {
                    0 => list,
                    1 => {
                        let Json::Array(entries) = list else {
                            unreachable!()
                        };
                        let lines: Vec<String> = entries.iter().map(|e| e.text(false)).collect();
                        return lines.join(if pretty { "\n\n" } else { "\n" });
                    }
                    2 => with_others(vec![(key(LIST_KEYS[cut % 4]), list)]),
                    3 => with_others(vec![(key("task_result"), Json::object(&[("messages", list)]))]),
                    4 => with_others(vec![(
                        key("agent_states"),
                        Json::object(&[
                            ("m", Json::object(&[("x", Json::Raw("1"))])),
                            ("n", Json::object(&[("message_thread", list)])),
                        ]),
                    )]),
                    5 => with_others(vec![(key("critic"), list), (key("chat_manager"), second)]),
                    6 => Json::object(&[
                        ("critic", list),
                        ("chat_manager", second.clone()),
                        ("critic", second),
                    ]),
                    7 => with_others(vec![(
                        key("messages"),
                        Json::object(&[(RAW_VALUE_TOKEN, Json::Str(list.text(false)))]),
                    )]),
                    _ => Json::object(&[("messages", second), ("messages", list)]),
                };
                let text = document.text(pretty);
                match cut {
                    0..=2 => text.chars().take(text.chars().count() * cut / 3).collect(),
                    // A number out of range: the log, or the line holding it, does not parse.
                    3 => text.replacen('7', "1e400", 1),
                    _ => text,
                }
            })
    }

    /// A log read whole and streamed gives the same messages, or the same error.
    fn same_as_whole(text: &str) {
        assert_eq!(autogen::parse(text), whole_document::parse(text), "{text}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        /// F10: the log read one entry at a time gives exactly what reading it whole gave,
        /// in every form and on every error.
        #[test]
        fn f10_streaming_reads_every_log_as_reading_it_whole_did(text in log()) {
            same_as_whole(&text);
        }
    }

    /// The nesting limit (128 levels, as `serde_json::Value` reads) holds at every depth an
    /// entry can be at: in JSON lines, in an array, in a wrapped list, a dict and a raw value.
    #[test]
    fn nesting_is_refused_where_reading_whole_refused_it() {
        for depth in 120..=130 {
            let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            let entry = format!(r#"{{"sender":"a","message":"x","d":{deep}}}"#);
            let chat = format!(r#"{{"role":"user","content":"x","d":{deep}}}"#);
            for text in [
                entry.clone(),
                format!("[{entry}]"),
                format!(r#"{{"messages":[{entry}]}}"#),
                format!(r#"{{"task_result":{{"messages":[{entry}]}}}}"#),
                format!(r#"{{"critic":[{chat}]}}"#),
                format!(r#"{{"agent_states":{{"m":{{"message_thread":[{entry}]}}}}}}"#),
                format!(
                    r#"{{"messages":{{"{RAW_VALUE_TOKEN}":{}}}}}"#,
                    serde_json::to_string(&format!("[{entry}]")).unwrap()
                ),
            ] {
                same_as_whole(&text);
            }
        }
    }

    /// serde_json reads an object whose first key is its raw-value token as the JSON its
    /// string holds: the streaming reader must too (a list, an entry, a `null` entry).
    #[test]
    fn an_object_standing_for_a_raw_value_reads_as_the_json_it_holds() {
        let token = |json: &str| {
            format!(
                r#"{{"{RAW_VALUE_TOKEN}":{}}}"#,
                serde_json::to_string(json).unwrap()
            )
        };
        assert_eq!(
            serde_json::from_str::<Value>(&token("[1]")).unwrap(),
            serde_json::json!([1]),
            "serde_json's token"
        );
        let entry = r#"{"sender":"a","recipient":"b","message":"x"}"#;
        for text in [
            format!("[{}]", token(entry)),
            token(entry),
            format!(r#"{{"messages":{}}}"#, token(&format!("[{entry}]"))),
            format!(r#"{{"messages":[{}]}}"#, token("null")),
            format!(
                r#"{{"messages":[{}, 1]}}"#,
                token(entry).replace('}', r#","extra":1}"#)
            ),
            format!(r#"{{"messages":[{}]}}"#, token("[")),
        ] {
            same_as_whole(&text);
        }
        assert_eq!(
            autogen::parse(&token(entry)).unwrap()[0].receiver.as_deref(),
            Some("b")
        );
    }
}
