//! The lines of a Codex rollout as read from disk: the envelope and one flat payload that
//! holds the fields of every item and event the reader looks at.
//!
//! Names and ids are read as strings; every other field is borrowed from the line as the
//! raw JSON it is ([`Raw`]), so that a text is kept as the literal it was written as (a
//! slice of the file, see [`super::text`]) instead of being decoded and escaped again,
//! and a field of changing shape is read where it is used. Every field is lenient (a
//! value of another type reads as absent), so a new or changed field never makes a line
//! unreadable.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::Deserialize;

use crate::json::lenient::{self, ObjectOr};
use crate::json::quick::JsonText;

/// A field's JSON as written, borrowed from the line (`None` when absent).
pub(super) type Raw<'a> = Option<JsonText<'a>>;

/// One line: the envelope of the modern layout (`timestamp`, `type`, `payload`), or a bare
/// response item of the older layout (then `payload` is absent and the item's fields are
/// read from the line again, as a [`Payload`]: rare), or the older layout's header (`id`,
/// `timestamp`, `instructions`) or `{"record_type":"state"}` marker.
///
/// The payload is read into the struct of its line's type ([`Body`]): a `turn_context`
/// or a line of a type the reader does not know is not read into the payload of every
/// item, whose size every line would pay for. Writers put `type` before `payload`; a line
/// that does not has its payload read after the rest.
#[derive(Default)]
pub(super) struct WireLine<'a> {
    /// `timestamp`.
    pub(super) timestamp: Option<String>,
    /// `type`: the rollout item's kind (modern) or the response item's (older).
    pub(super) kind: Option<Cow<'a, str>>,
    /// `payload` of the modern layout.
    pub(super) payload: Body<'a>,
    /// `record_type` of the older layout's marker lines.
    pub(super) record_type: Option<String>,
    /// `id` of the older layout's header.
    pub(super) id: Option<String>,
    /// Whether the line has `instructions` (only the older layout's header has).
    pub(super) instructions: bool,
    /// `role` of a bare message item.
    pub(super) role: Option<String>,
}

/// The payload of a modern line, read by the line's type.
#[derive(Default)]
pub(super) enum Body<'a> {
    /// No payload, or one that is not an object.
    #[default]
    Absent,
    /// The payload of a `turn_context`.
    TurnContext(TurnContext),
    /// The payload of a `session_meta`, `response_item`, `event_msg` or `compacted`.
    Item(Box<Payload<'a>>),
    /// The payload of an event whose type is all the reader needs of it (see
    /// [`event_needs_fields`]).
    Event(Cow<'a, str>),
    /// The tokens of a `token_count` event's last request.
    TokenCount(Option<TokenUsage>),
    /// The payload of a line of another type.
    Other,
}

/// The payload of a `turn_context`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct TurnContext {
    /// `model`.
    #[serde(deserialize_with = "lenient::string")]
    pub(super) model: Option<String>,
}

/// The envelope's keys.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Timestamp,
    #[serde(rename = "type")]
    Type,
    Payload,
    RecordType,
    Id,
    Instructions,
    Role,
    #[serde(other)]
    Other,
}

/// A name (a line's or item's `type`): borrowed from the line (names have no escapes),
/// `None` for any value but a string.
#[derive(Default)]
pub(super) struct Name<'a>(pub(super) Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NameVisitor(PhantomData))
    }
}

/// A [`Name`] field.
fn name<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    Name::deserialize(d).map(|n| n.0)
}

/// Reads a [`Name`].
struct NameVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for NameVisitor<'a> {
    type Value = Name<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'a>, E> {
        Ok(Name(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E>(self, v: &str) -> Result<Name<'a>, E> {
        Ok(Name(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Name<'a>, E> {
        Ok(Name(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Name<'a>, E> {
        Ok(Name(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Name<'a>, E> {
        Ok(Name(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Name<'a>, E> {
        Ok(Name(None))
    }
    fn visit_unit<E>(self) -> Result<Name<'a>, E> {
        Ok(Name(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Name<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Name(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Name<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Name(None))
    }
}

/// A lenient string field (see [`lenient::string`]).
struct Text(Option<String>);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient::string(d).map(Text)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for WireLine<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LineVisitor(PhantomData))
    }
}

/// Reads a line's object, its payload by the line's type.
struct LineVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for LineVisitor<'a> {
    type Value = WireLine<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireLine<'a>, A::Error> {
        let mut line = WireLine::default();
        let mut early_payload: Option<JsonText<'de>> = None;
        while let Some(key) = map.next_key::<Field>()? {
            match key {
                Field::Timestamp => line.timestamp = map.next_value::<Text>()?.0,
                Field::Type => line.kind = map.next_value::<Name<'a>>()?.0,
                Field::Payload => match line.kind.as_deref() {
                    Some(kind) => {
                        line.payload = map.next_value_seed(BodySeed {
                            kind,
                            phantom: PhantomData,
                        })?
                    }
                    None => early_payload = Some(map.next_value()?),
                },
                Field::RecordType => line.record_type = map.next_value::<Text>()?.0,
                Field::Id => line.id = map.next_value::<Text>()?.0,
                Field::Instructions => {
                    map.next_value::<IgnoredAny>()?;
                    line.instructions = true;
                }
                Field::Role => line.role = map.next_value::<Text>()?.0,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let Some(raw) = early_payload {
            let kind = line.kind.as_deref().unwrap_or_default();
            let mut read = serde_json::Deserializer::from_str(raw.get());
            line.payload = BodySeed {
                kind,
                phantom: PhantomData,
            }
            .deserialize(&mut read)
            .map_err(de::Error::custom)?;
        }
        Ok(line)
    }
}

/// Reads a payload into the struct of line type `kind`.
struct BodySeed<'k, 'a> {
    kind: &'k str,
    phantom: PhantomData<&'a ()>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for BodySeed<'_, 'a> {
    type Value = Body<'a>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Body<'a>, D::Error> {
        Ok(match self.kind {
            "turn_context" => ObjectOr::<TurnContext>::deserialize(d)?
                .0
                .map_or(Body::Absent, Body::TurnContext),
            "event_msg" => d.deserialize_any(EventVisitor(PhantomData))?,
            "session_meta" | "response_item" | "compacted" => ObjectOr::<Box<Payload<'a>>>::deserialize(d)?
                .0
                .map_or(Body::Absent, Body::Item),
            _ => ObjectOr::<IgnoredAny>::deserialize(d)?
                .0
                .map_or(Body::Absent, |_| Body::Other),
        })
    }
}

/// A value that is there, whatever it is (`null` included).
pub(super) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

/// The payload of any rollout item: `session_meta`, `turn_context`, `compacted`, a
/// response item or an event (their fields, as far as the reader uses them).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Payload<'a> {
    /// `type` of a response item or event.
    #[serde(rename = "type", borrow, deserialize_with = "name")]
    pub(super) kind: Option<Cow<'a, str>>,
    /// `id`: the session's (session_meta), an item's.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) id: Option<Cow<'a, str>>,
    /// `role` of a message.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) role: Option<Cow<'a, str>>,
    /// `content` of a message or reasoning item: content parts (or a string in
    /// Chat-Completions items).
    #[serde(borrow)]
    pub(super) content: Raw<'a>,
    /// `summary` of a reasoning item (`[{"type":"summary_text","text"}]`).
    #[serde(borrow)]
    pub(super) summary: Raw<'a>,
    /// `name` of a tool call.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) name: Option<Cow<'a, str>>,
    /// `namespace` of a tool call (MCP tools).
    #[serde(borrow, deserialize_with = "name")]
    pub(super) namespace: Option<Cow<'a, str>>,
    /// `arguments` of a function call: a JSON string (an object in a few writers).
    #[serde(borrow)]
    pub(super) arguments: Raw<'a>,
    /// `input` of a custom tool call (a raw string).
    #[serde(borrow)]
    pub(super) input: Raw<'a>,
    /// `action` of a local shell, web search call.
    #[serde(borrow)]
    pub(super) action: Raw<'a>,
    /// `call_id` pairing a call and its output.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) call_id: Option<Cow<'a, str>>,
    /// `output` of a call output: a string, content items or an object.
    #[serde(borrow)]
    pub(super) output: Raw<'a>,
    /// `status` of an item or event.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) status: Option<Cow<'a, str>>,
    /// `message` of events (`user_message`, `error`) and of `compacted`.
    #[serde(borrow)]
    pub(super) message: Raw<'a>,
    /// `images` of a `user_message` event.
    #[serde(borrow)]
    pub(super) images: Raw<'a>,
    /// `info` of a `token_count` event.
    pub(super) info: ObjectOr<TokenInfo>,
    /// `reason` of `turn_aborted`.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) reason: Option<Cow<'a, str>>,
    /// `exit_code` of `exec_command_end`.
    #[serde(deserialize_with = "lenient::number")]
    pub(super) exit_code: Option<serde_json::Number>,
    /// `success` of `patch_apply_end`.
    #[serde(deserialize_with = "lenient::bool")]
    pub(super) success: Option<bool>,
    /// `result` of `mcp_tool_call_end` (`{"Ok":…}` or `{"Err":…}`).
    pub(super) result: ObjectOr<McpResult>,
    /// `num_turns` of `thread_rolled_back`.
    #[serde(deserialize_with = "lenient::count")]
    pub(super) num_turns: Option<u64>,
    /// `model` of `turn_context`.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) model: Option<Cow<'a, str>>,
    /// `source` of `session_meta`.
    #[serde(borrow)]
    pub(super) source: Raw<'a>,
    /// `parent_thread_id` at the top of `session_meta` (newest builds).
    #[serde(borrow, deserialize_with = "name")]
    pub(super) parent_thread_id: Option<Cow<'a, str>>,
    /// `agent_role` (or `agent_type`) of `session_meta`.
    #[serde(alias = "agent_type", borrow, deserialize_with = "name")]
    pub(super) agent_role: Option<Cow<'a, str>>,
    /// `agent_nickname` of `session_meta`.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) agent_nickname: Option<Cow<'a, str>>,
    /// `new_thread_id` of `collab_agent_spawn_end`.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) new_thread_id: Option<Cow<'a, str>>,
    /// `replacement_history` of `compacted`.
    #[serde(borrow)]
    pub(super) replacement_history: Raw<'a>,
    /// `window_id` of `compacted` (newest builds; a number in older ones).
    #[serde(borrow)]
    pub(super) window_id: Raw<'a>,
    /// `window_number` of `compacted`.
    #[serde(borrow)]
    pub(super) window_number: Raw<'a>,
    /// `tool_calls` of a Chat-Completions assistant message.
    #[serde(borrow)]
    pub(super) tool_calls: Raw<'a>,
    /// `tool_call_id` of a Chat-Completions tool message.
    #[serde(borrow, deserialize_with = "name")]
    pub(super) tool_call_id: Option<Cow<'a, str>>,
}

/// True for the events whose fields besides `type` the reader reads; any other event is
/// read for its type alone.
pub(super) fn event_needs_fields(kind: &str) -> bool {
    matches!(
        kind,
        "user_message"
            | "token_count"
            | "turn_aborted"
            | "error"
            | "thread_rolled_back"
            | "context_compacted"
            | "collab_agent_spawn_end"
            | "exec_command_end"
            | "patch_apply_end"
            | "mcp_tool_call_end"
    )
}

/// Reads an event's payload by its `type`, which writers put first: an event read for its
/// type alone skips the rest, a `token_count` reads only its tokens, any other event reads
/// into a [`Payload`]. A payload whose first key is another is read whole.
struct EventVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for EventVisitor<'a> {
    type Value = Body<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body<'a>, A::Error> {
        let Some(Name(first)) = map.next_key::<Name<'de>>()? else {
            return Ok(Body::Item(Box::default()));
        };
        let first = first.unwrap_or_default();
        if first != "type" {
            let value: JsonText<'de> = map.next_value()?;
            let rest = FirstThen {
                first: Some((first, value)),
                value: None,
                rest: map,
            };
            let payload = Payload::deserialize(de::value::MapAccessDeserializer::new(rest))?;
            return Ok(Body::Item(Box::new(payload)));
        }
        let kind = map.next_value::<Name<'de>>()?.0;
        match kind.as_deref() {
            Some(name) if !event_needs_fields(name) => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Body::Event(kind.unwrap_or_default()))
            }
            Some("token_count") => {
                let tokens = TokenCount::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Body::TokenCount(tokens.info.0.and_then(|i| i.last_token_usage.0)))
            }
            _ => {
                let mut payload = Payload::deserialize(de::value::MapAccessDeserializer::new(map))?;
                payload.kind = payload.kind.or(kind);
                Ok(Body::Item(Box::new(payload)))
            }
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<Body<'a>, E> {
        Ok(Body::Absent)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Body<'a>, E> {
        Ok(Body::Absent)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Body<'a>, E> {
        Ok(Body::Absent)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Body<'a>, E> {
        Ok(Body::Absent)
    }
    fn visit_str<E>(self, _: &str) -> Result<Body<'a>, E> {
        Ok(Body::Absent)
    }
    fn visit_unit<E>(self) -> Result<Body<'a>, E> {
        Ok(Body::Absent)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Body<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Body::Absent)
    }
}

/// A map whose first entry was already read: that entry again, then the rest.
struct FirstThen<'de, A> {
    first: Option<(Cow<'de, str>, JsonText<'de>)>,
    value: Option<JsonText<'de>>,
    rest: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FirstThen<'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.first.take() {
            Some((key, value)) => {
                self.value = Some(value);
                let key: de::value::CowStrDeserializer<'de, A::Error> = key.into_deserializer();
                seed.deserialize(key).map(Some)
            }
            None => self.rest.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.value.take() {
            Some(raw) => {
                let mut read = serde_json::Deserializer::from_str(raw.get());
                seed.deserialize(&mut read).map_err(de::Error::custom)
            }
            None => self.rest.next_value_seed(seed),
        }
    }
}

/// The payload of a `token_count` event, after its type.
#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenCount {
    info: ObjectOr<TokenInfo>,
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

/// `result` of `mcp_tool_call_end`: `{"Ok": {…, "isError"}}` or `{"Err": …}`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct McpResult {
    /// Whether there is an `Err`.
    #[serde(rename = "Err", deserialize_with = "present")]
    pub(super) err: bool,
    /// `Ok`.
    #[serde(rename = "Ok")]
    pub(super) ok: ObjectOr<McpOk>,
}

/// The `Ok` of an MCP call's result.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct McpOk {
    /// `isError` (or `is_error`).
    #[serde(rename = "isError", alias = "is_error", deserialize_with = "lenient::bool")]
    pub(super) is_error: Option<bool>,
}
