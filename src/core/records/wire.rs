//! Records as they appear on the wire, borrowed from the line they are read from.
//!
//! The wire structs are flat and lenient (a field of an unexpected type reads as absent).
//! Text fields stay where they are in the line's buffer ([`WireText`]); converting a wire
//! record into a [`Record`] shares them with the buffer instead of copying them.

use std::fmt;

use bytes::Bytes;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Number;

use super::{
    Block, Content, Image, Message, Position, Record, RecordKind, ToolResultBlock, ToolUse, ToolUseResult,
    Usage,
};
use crate::core::json_text::{has_lone_surrogate, JsonStr, RawJson};
use crate::core::lenient::{self, ObjectOr};

/// A string field as read.
enum WireText<'a> {
    /// The string's literal (quotes and escapes included), inside the line.
    Literal(&'a str),
    /// The text of a literal without escapes, inside the line.
    Unescaped(&'a str),
    /// Text the reader decoded from a literal with escapes.
    Decoded(String),
}

impl WireText<'_> {
    fn into_json_str(self, buffer: &Bytes) -> JsonStr {
        match self {
            WireText::Literal(l) => JsonStr::from_literal(buffer, l),
            WireText::Unescaped(t) => JsonStr::from_unescaped(buffer, t),
            WireText::Decoded(t) => JsonStr::new(&t),
        }
    }
}

/// A string's literal, or `None` for any other value. A literal that does not decode (a
/// lone surrogate escape) is an error, so that its line goes through the repair for it.
fn literal<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WireText<'de>>, D::Error> {
    let raw = <&'de RawValue>::deserialize(d)?.get();
    if !raw.starts_with('"') {
        return Ok(None);
    }
    if has_lone_surrogate(raw.as_bytes()) {
        return Err(de::Error::custom("lone leading surrogate in hex escape"));
    }
    Ok(Some(WireText::Literal(raw)))
}

/// A record as it appears on the wire.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WireRecord<'a> {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    uuid: Option<String>,
    #[serde(deserialize_with = "lenient::nullable_string")]
    parent_uuid: Option<Option<String>>,
    #[serde(deserialize_with = "lenient::string")]
    logical_parent_uuid: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    session_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    request_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    agent_id: Option<String>,
    #[serde(deserialize_with = "lenient::bool")]
    is_sidechain: Option<bool>,
    #[serde(deserialize_with = "lenient::flag")]
    is_meta: bool,
    #[serde(deserialize_with = "lenient::flag")]
    is_compact_summary: bool,
    #[serde(deserialize_with = "lenient::string")]
    subtype: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    content: Option<WireText<'a>>,
    #[serde(borrow)]
    compact_metadata: Option<&'a RawValue>,
    #[serde(borrow)]
    message: ObjectOr<WireMessage<'a>>,
    #[serde(borrow)]
    tool_use_result: ObjectOr<WireToolUseResult<'a>>,
    #[serde(deserialize_with = "lenient::bool", alias = "is_active")]
    is_active: Option<bool>,
}

impl WireRecord<'_> {
    /// True for what a writer puts at the top level of a line: a conversational record with
    /// a uuid, or a snapshot / queue / summary entry. Used to tell a real record glued after
    /// a truncated one from an object nested inside the truncated record.
    pub(crate) fn looks_like_top_level(&self) -> bool {
        match self.kind.as_deref() {
            Some("user" | "assistant" | "system") => self.uuid.is_some(),
            Some("file-history-snapshot" | "queue-operation" | "summary") => true,
            _ => false,
        }
    }

    /// The record, its text shared with `buffer` (the bytes the line was read from).
    pub(crate) fn into_record(self, pos: Position, buffer: &Bytes) -> Record {
        let time = self
            .timestamp
            .as_deref()
            .and_then(crate::core::time::parse_millis);
        Record {
            pos,
            kind: RecordKind::from_type(self.kind),
            uuid: self.uuid,
            parent_uuid: self.parent_uuid,
            logical_parent_uuid: self.logical_parent_uuid,
            timestamp: self.timestamp,
            time,
            session_id: self.session_id,
            request_id: self.request_id,
            agent_id: self.agent_id,
            is_sidechain: self.is_sidechain,
            is_meta: self.is_meta,
            is_compact_summary: self.is_compact_summary,
            subtype: self.subtype,
            content: self.content.map(|c| c.into_json_str(buffer)),
            compact_metadata: self
                .compact_metadata
                .filter(|r| r.get() != "null")
                .map(|r| RawJson::from_json(buffer, r.get())),
            message: self.message.0.map(|m| m.into_message(buffer)),
            tool_use_result: self.tool_use_result.0.map(|t| Box::new(t.into_result(buffer))),
            is_active: self.is_active,
            first_kept: None,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessage<'a> {
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    model: Option<String>,
    #[serde(borrow)]
    content: WireContent<'a>,
    usage: ObjectOr<WireUsage>,
}

impl WireMessage<'_> {
    fn into_message(self, buffer: &Bytes) -> Message {
        Message {
            id: self.id,
            model: self.model,
            content: self.content.into_content(buffer),
            usage: self.usage.0.map(|u| Usage {
                input_tokens: u.input_tokens.unwrap_or(0),
                output_tokens: u.output_tokens.unwrap_or(0),
            }),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    #[serde(deserialize_with = "lenient::count")]
    input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::count")]
    output_tokens: Option<u64>,
}

/// `message.content` as read.
#[derive(Default)]
enum WireContent<'a> {
    #[default]
    Absent,
    Text(WireText<'a>),
    Blocks(Vec<Option<WireBlock<'a>>>),
}

impl WireContent<'_> {
    fn into_content(self, buffer: &Bytes) -> Content {
        match self {
            WireContent::Absent => Content::Absent,
            WireContent::Text(t) => Content::Text(t.into_json_str(buffer)),
            WireContent::Blocks(blocks) => Content::Blocks(
                blocks
                    .into_iter()
                    .map(|b| b.map_or(Block::Other(None), |b| b.into_block(buffer)))
                    .collect(),
            ),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for WireContent<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ContentVisitor;

        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = WireContent<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(WireContent::Text(WireText::Unescaped(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(WireContent::Text(WireText::Decoded(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(WireContent::Text(WireText::Decoded(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(64));
                while let Some(block) = seq.next_element::<ObjectOr<WireBlock<'de>>>()? {
                    blocks.push(block.0);
                }
                Ok(WireContent::Blocks(blocks))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(WireContent::Absent)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(WireContent::Absent)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(WireContent::Absent)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(WireContent::Absent)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(WireContent::Absent)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(WireContent::Absent)
            }
        }

        d.deserialize_any(ContentVisitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireBlock<'a> {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    text: Option<WireText<'a>>,
    #[serde(borrow, deserialize_with = "literal")]
    thinking: Option<WireText<'a>>,
    #[serde(deserialize_with = "lenient::string")]
    signature: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    name: Option<String>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(deserialize_with = "lenient::string")]
    tool_use_id: Option<String>,
    #[serde(borrow)]
    content: ResultContent<'a>,
    #[serde(deserialize_with = "lenient::flag")]
    is_error: bool,
    #[serde(borrow)]
    source: ObjectOr<WireImageSource<'a>>,
}

impl WireBlock<'_> {
    fn into_block(self, buffer: &Bytes) -> Block {
        let text = |t: Option<WireText<'_>>| t.map(|t| t.into_json_str(buffer)).unwrap_or_default();
        match self.kind.as_deref() {
            Some("text") => Block::Text(text(self.text)),
            Some("thinking") => Block::Thinking {
                thinking: text(self.thinking),
                signature: self.signature,
            },
            Some("tool_use") => Block::ToolUse(ToolUse {
                id: self.id.unwrap_or_default(),
                name: self.name.unwrap_or_default(),
                input: self.input.map(|r| RawJson::from_json(buffer, r.get())),
            }),
            Some("tool_result") => Block::ToolResult(ToolResultBlock {
                tool_use_id: self.tool_use_id,
                texts: self.content.into_texts(buffer),
                is_error: self.is_error,
            }),
            Some("image") => {
                let source = self.source.0.unwrap_or_default();
                Block::Image(Image {
                    source_type: source.kind,
                    media_type: source.media_type,
                    data: source.data.map(|d| d.into_json_str(buffer)),
                })
            }
            _ => Block::Other(self.kind),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireImageSource<'a> {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    media_type: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    data: Option<WireText<'a>>,
}

/// `tool_result.content`: a string, or an array whose `text` parts are kept. The flag tells
/// whether the value was an array.
#[derive(Default)]
struct ResultContent<'a>(Vec<WireText<'a>>, bool);

impl ResultContent<'_> {
    fn into_texts(self, buffer: &Bytes) -> Vec<JsonStr> {
        self.0.into_iter().map(|t| t.into_json_str(buffer)).collect()
    }
}

/// One part of an array `content`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ResultPart<'a> {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    text: Option<WireText<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for ResultContent<'a> {
    /// Read as the raw value first: a string (the usual case) is then kept as the literal
    /// it is, and only an array is read a second time, for its parts.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?.get();
        match raw.as_bytes().first() {
            Some(b'"') => {
                if has_lone_surrogate(raw.as_bytes()) {
                    return Err(de::Error::custom("lone leading surrogate in hex escape"));
                }
                Ok(ResultContent(vec![WireText::Literal(raw)], false))
            }
            Some(b'[') => {
                let parts: Vec<ObjectOr<ResultPart<'de>>> =
                    serde_json::from_str(raw).map_err(de::Error::custom)?;
                let texts = parts
                    .into_iter()
                    .filter_map(|p| match p.0 {
                        Some(ResultPart {
                            kind: Some(kind),
                            text: Some(text),
                        }) if kind == "text" => Some(text),
                        _ => None,
                    })
                    .collect();
                Ok(ResultContent(texts, true))
            }
            _ => Ok(ResultContent::default()),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireToolUseResult<'a> {
    #[serde(deserialize_with = "lenient::string")]
    status: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    stdout: Option<WireText<'a>>,
    #[serde(borrow, deserialize_with = "literal")]
    stderr: Option<WireText<'a>>,
    #[serde(deserialize_with = "lenient::string")]
    agent_id: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    prompt: Option<WireText<'a>>,
    #[serde(borrow)]
    file: ObjectOr<WireFile<'a>>,
    #[serde(borrow)]
    content: ResultContent<'a>,
    #[serde(deserialize_with = "lenient::number")]
    total_duration_ms: Option<Number>,
    #[serde(deserialize_with = "lenient::number")]
    total_tokens: Option<Number>,
    #[serde(deserialize_with = "lenient::number")]
    total_tool_use_count: Option<Number>,
    #[serde(deserialize_with = "lenient::flag")]
    interrupted: bool,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireFile<'a> {
    #[serde(deserialize_with = "lenient::string")]
    file_path: Option<String>,
    #[serde(borrow, deserialize_with = "literal")]
    content: Option<WireText<'a>>,
}

impl WireToolUseResult<'_> {
    fn into_result(self, buffer: &Bytes) -> ToolUseResult {
        let text = |t: Option<WireText<'_>>| t.map(|t| t.into_json_str(buffer));
        let file = self.file.0.unwrap_or_default();
        ToolUseResult {
            status: self.status,
            stdout: text(self.stdout),
            stderr: text(self.stderr),
            agent_id: self.agent_id,
            prompt: text(self.prompt),
            file_path: file.file_path,
            file_content: text(file.content),
            // Only an array `content` (Task results) counts, as in the reference.
            first_content_text: if self.content.1 {
                text(self.content.0.into_iter().next())
            } else {
                None
            },
            total_duration_ms: self.total_duration_ms,
            total_tokens: self.total_tokens,
            total_tool_use_count: self.total_tool_use_count,
            interrupted: self.interrupted,
        }
    }
}
