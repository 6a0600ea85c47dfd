//! Records as they appear on the wire, borrowed from the line they are read from, and
//! their conversion into [`Record`]s.
//!
//! The wire structs are flat and lenient (a field of an unexpected type reads as absent).
//! Text fields are read as the string literals they are (`serde_json` hands a raw value
//! over as the slice of the line it spans), so that [`Record::from_wire`] can keep them as
//! slices of the line's buffer instead of decoding and copying them.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Number;

use super::{
    Block, Content, Id, Image, JsonStr, Message, Position, RawJson, Record, RecordExtra, RecordKind,
    ToolResultBlock, ToolUse, ToolUseResult, Usage,
};
use crate::json::lenient::{self, ObjectOr};
use crate::json::literals::MIN_SHARED_TEXT;
use crate::json::raw::{LoneSurrogate, TextBuffer};

/// The buffer a line was read from. Its records' text stays in it: as slices of it when it
/// is the input's buffer (which the session keeps), as copies when it is a repaired copy of
/// the line (which would otherwise be kept whole for a few strings).
#[derive(Clone, Copy)]
pub(crate) struct LineBuffer<'b> {
    /// The bytes the line lies in.
    pub(crate) bytes: &'b TextBuffer,
    /// The line.
    pub(crate) line: &'b str,
    /// True for an input buffer; false for a repaired copy.
    pub(crate) shared: bool,
}

impl LineBuffer<'_> {
    /// The string literal `literal` (quotes included), which lies in this buffer.
    fn literal(&self, literal: &str) -> Result<JsonStr, LoneSurrogate> {
        if self.shared {
            JsonStr::in_buffer(self.bytes, literal)
        } else {
            JsonStr::copy_of(literal)
        }
    }

    /// The text of a string field as the reader gave it.
    fn text(&self, text: WireText<'_>) -> Result<JsonStr, LoneSurrogate> {
        match text {
            WireText::Inside(inside) => match literal_around(self.bytes, inside) {
                Some(literal) => self.literal(literal),
                None => Ok(JsonStr::new(inside)),
            },
            WireText::Decoded(text) => {
                // The reader decoded the string and dropped where it was. Its literal is in
                // the line: escaped as a writer escapes (canonically), it is found there, and
                // any bytes equal to it are its literal, wherever they are. A short one is
                // kept as a copy: searching costs more than it saves.
                let literal = JsonStr::new(&text);
                if !self.shared || literal.literal().len() < MIN_SHARED_TEXT {
                    return Ok(literal);
                }
                match find_whole(self.line.as_bytes(), literal.literal().as_bytes()) {
                    Some(at) => self.literal(&self.line[at..at + literal.literal().len()]),
                    None => Ok(literal),
                }
            }
        }
    }

    /// The literal of a string field, if it was a string.
    fn string(&self, field: WireStr<'_>) -> Result<Option<JsonStr>, LoneSurrogate> {
        field.0.map(|literal| self.literal(literal)).transpose()
    }

    /// Any JSON value, passed through.
    fn raw(&self, raw: &RawValue) -> RawJson {
        if self.shared {
            RawJson::in_buffer(self.bytes, raw.get())
        } else {
            RawJson::copy_of(raw.get())
        }
    }
}

/// Bytes of a needle that [`find_whole`] searches for: enough to make a false candidate
/// rare, few enough that the searcher is cheap to build.
const NEEDLE_HEAD: usize = 64;

/// Candidates [`find_whole`] compares whole before it searches for the whole needle: each
/// comparison may run the needle's length, so that the search stays linear.
const NEEDLE_TRIES: usize = 4;

/// Where `needle` first occurs in `haystack`. The first candidates are where its first
/// [`NEEDLE_HEAD`] bytes occur, each then compared whole: `memmem::find` of a long needle
/// builds a two-way searcher over all of it first, 5% of a one-thread parse of the x100
/// sample (330 -> 314 ms), where every user message with a line break is searched for.
/// The needle is nearly always the first candidate. Past [`NEEDLE_TRIES`] failed ones
/// (a line repeating the needle's head, such as a run of escaped quotes, would make every
/// position a candidate compared at length) the rest is searched by `memmem::find`.
fn find_whole(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let finder = memchr::memmem::Finder::new(&needle[..needle.len().min(NEEDLE_HEAD)]);
    let mut from = 0;
    for _ in 0..NEEDLE_TRIES {
        let candidate = from + finder.find(haystack.get(from..)?)?;
        if haystack[candidate..].starts_with(needle) {
            return Some(candidate);
        }
        from = candidate + 1;
    }
    memchr::memmem::find(haystack.get(from..)?, needle).map(|at| from + at)
}

/// The literal around `inside`, the inside of a string without escapes that the reader
/// borrowed from `buffer`: `inside` with the quotes on either side of it.
fn literal_around<'b>(buffer: &'b str, inside: &str) -> Option<&'b str> {
    let start = (inside.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
    let end = start.checked_add(inside.len())?;
    let bytes = buffer.as_bytes();
    let quoted = start >= 1 && end < bytes.len() && bytes[start - 1] == b'"' && bytes[end] == b'"';
    quoted.then(|| &buffer[start - 1..end + 1])
}

/// A string content as the reader gave it through a visitor.
pub(crate) enum WireText<'a> {
    /// The inside of a literal without escapes, borrowed from the line.
    Inside(&'a str),
    /// The text, decoded by the reader (a string with escapes).
    Decoded(String),
}

/// The literal of a string field; `None` for any other JSON value.
#[derive(Default)]
pub(crate) struct WireStr<'a>(Option<&'a str>);

impl<'de: 'a, 'a> Deserialize<'de> for WireStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        let json = raw.get();
        Ok(WireStr(json.starts_with('"').then_some(json)))
    }
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
    #[serde(borrow)]
    content: WireStr<'a>,
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
    /// True for a record no view shows and no record can name as its parent: not `user`,
    /// `assistant` or `system`, and without a uuid (snapshots, queue entries, `{}`).
    pub(crate) fn is_inert(&self) -> bool {
        !matches!(self.kind.as_deref(), Some("user" | "assistant" | "system")) && self.uuid.is_none()
    }

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
}

impl Record {
    /// The record `w` read at `pos` from a line of `buffer`. Fails when one of its texts
    /// holds a lone surrogate escape (the line then goes through the repair that replaces
    /// them).
    pub(crate) fn from_wire(
        w: WireRecord<'_>,
        pos: Position,
        buffer: LineBuffer<'_>,
    ) -> Result<Record, LoneSurrogate> {
        let time = w.timestamp.as_deref().and_then(crate::json::time::parse_millis);
        let extra = RecordExtra {
            logical_parent_uuid: w.logical_parent_uuid,
            subtype: w.subtype,
            content: buffer.string(w.content)?,
            compact_metadata: w
                .compact_metadata
                .filter(|r| r.get() != "null")
                .map(|r| buffer.raw(r)),
            tool_use_result: w.tool_use_result.0.map(|t| t.into_result(buffer)).transpose()?,
            first_kept: None,
        };
        Ok(Record {
            pos,
            kind: RecordKind::from_type(w.kind),
            is_sidechain: w.is_sidechain,
            is_meta: w.is_meta,
            is_compact_summary: w.is_compact_summary,
            is_active: w.is_active,
            uuid: w.uuid.map(Id::from),
            parent_uuid: w.parent_uuid.map(|p| p.map(Id::from)),
            timestamp: w.timestamp.map(String::into_boxed_str),
            time,
            session_id: w.session_id.map(Id::from),
            request_id: w.request_id.map(Id::from),
            agent_id: w.agent_id.map(Id::from),
            message: w.message.0.map(|m| m.into_message(buffer)).transpose()?,
            extra: (!extra.is_empty()).then(|| Box::new(extra)),
        })
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
    fn into_message(self, buffer: LineBuffer<'_>) -> Result<Message, LoneSurrogate> {
        Ok(Message {
            id: self.id.map(Id::from),
            model: self.model.map(Id::from),
            content: self.content.into_content(buffer)?,
            usage: self.usage.0.map(|u| {
                Box::new(Usage {
                    input_tokens: u.input_tokens.unwrap_or(0),
                    output_tokens: u.output_tokens.unwrap_or(0),
                })
            }),
        })
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

/// `message.content`: a string, or an array of blocks, read in one pass (an array of
/// blocks is the common case; a string content is read through a visitor, which hands
/// over its literal's inside when it has no escape and the decoded text otherwise).
#[derive(Default)]
enum WireContent<'a> {
    #[default]
    Absent,
    Text(WireText<'a>),
    Blocks(Vec<Option<WireBlock<'a>>>),
}

impl WireContent<'_> {
    fn into_content(self, buffer: LineBuffer<'_>) -> Result<Content, LoneSurrogate> {
        Ok(match self {
            WireContent::Absent => Content::Absent,
            WireContent::Text(text) => Content::Text(buffer.text(text)?),
            WireContent::Blocks(wire) => {
                // Into a vector of its own: collected from `wire`'s, the blocks would keep
                // its allocation, sized for the (larger) wire blocks.
                let mut blocks = Vec::with_capacity(wire.len());
                for b in wire {
                    blocks.push(b.map_or(Ok(Block::Other(None)), |b| b.into_block(buffer))?);
                }
                Content::Blocks(blocks)
            }
        })
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
                Ok(WireContent::Text(WireText::Inside(v)))
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
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
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
    #[serde(borrow)]
    text: WireStr<'a>,
    #[serde(borrow)]
    thinking: WireStr<'a>,
    #[serde(borrow)]
    signature: WireStr<'a>,
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
    fn into_block(self, buffer: LineBuffer<'_>) -> Result<Block, LoneSurrogate> {
        Ok(match self.kind.as_deref() {
            Some("text") => Block::Text(buffer.string(self.text)?.unwrap_or_default()),
            Some("thinking") => Block::Thinking {
                thinking: buffer.string(self.thinking)?.unwrap_or_default(),
                signature: buffer.string(self.signature)?,
            },
            Some("tool_use") => Block::ToolUse(ToolUse {
                id: self.id.unwrap_or_default(),
                name: self.name.unwrap_or_default(),
                input: self.input.map(|r| buffer.raw(r)),
            }),
            Some("tool_result") => Block::ToolResult(ToolResultBlock {
                tool_use_id: self.tool_use_id,
                texts: self.content.into_texts(buffer)?,
                is_error: self.is_error,
            }),
            Some("image") => {
                let source = self.source.0.unwrap_or_default();
                Block::Image(Image {
                    source_type: source.kind,
                    media_type: source.media_type,
                    data: buffer.string(source.data)?,
                })
            }
            _ => Block::Other(self.kind),
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireImageSource<'a> {
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    media_type: Option<String>,
    #[serde(borrow)]
    data: WireStr<'a>,
}

/// `tool_result.content` (or `toolUseResult.content`): a string, or an array whose `text`
/// parts are kept. The flag tells whether the value was an array.
///
/// Read as a raw value first: a string, the common and large case, is then its literal,
/// read once; only an array is read a second time, for its parts.
#[derive(Default)]
struct ResultContent<'a>(Vec<&'a str>, bool);

impl ResultContent<'_> {
    fn into_texts(self, buffer: LineBuffer<'_>) -> Result<Vec<JsonStr>, LoneSurrogate> {
        self.0
            .into_iter()
            .map(|literal| buffer.literal(literal))
            .collect()
    }

    /// The first text, for an array only (Task results), as the reference reads it.
    fn first_of_array(self, buffer: LineBuffer<'_>) -> Result<Option<JsonStr>, LoneSurrogate> {
        match (self.1, self.0.first()) {
            (true, Some(literal)) => buffer.literal(literal).map(Some),
            _ => Ok(None),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ResultContent<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Part<'a> {
            #[serde(rename = "type", deserialize_with = "lenient::string")]
            kind: Option<String>,
            #[serde(borrow)]
            text: WireStr<'a>,
        }

        let raw = <&'de RawValue>::deserialize(d)?;
        let json = raw.get();
        Ok(match json.as_bytes().first() {
            Some(b'"') => ResultContent(vec![json], false),
            Some(b'[') => {
                // A raw value is valid JSON: its second reading cannot fail.
                let parts: Vec<ObjectOr<Part<'de>>> = serde_json::from_str(json).unwrap_or_default();
                let texts = parts
                    .into_iter()
                    .filter_map(|p| p.0)
                    .filter(|p| p.kind.as_deref() == Some("text"))
                    .filter_map(|p| p.text.0)
                    .collect();
                ResultContent(texts, true)
            }
            _ => ResultContent::default(),
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireToolUseResult<'a> {
    #[serde(deserialize_with = "lenient::string")]
    status: Option<String>,
    #[serde(borrow)]
    stdout: WireStr<'a>,
    #[serde(borrow)]
    stderr: WireStr<'a>,
    #[serde(deserialize_with = "lenient::string")]
    agent_id: Option<String>,
    #[serde(borrow)]
    prompt: WireStr<'a>,
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
    #[serde(borrow)]
    content: WireStr<'a>,
}

impl WireToolUseResult<'_> {
    fn into_result(self, buffer: LineBuffer<'_>) -> Result<ToolUseResult, LoneSurrogate> {
        let file = self.file.0.unwrap_or_default();
        Ok(ToolUseResult {
            status: self.status,
            stdout: buffer.string(self.stdout)?,
            stderr: buffer.string(self.stderr)?,
            agent_id: self.agent_id,
            prompt: buffer.string(self.prompt)?,
            file_path: file.file_path,
            file_content: buffer.string(file.content)?,
            // Only an array `content` (Task results) counts, as in the reference.
            first_content_text: self.content.first_of_array(buffer)?,
            total_duration_ms: self.total_duration_ms,
            total_tokens: self.total_tokens,
            total_tool_use_count: self.total_tool_use_count,
            interrupted: self.interrupted,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::records::wire::*;

    #[test]
    fn a_literal_is_found_around_its_borrowed_inside() {
        let buffer = r#"{"a":"plain","b":1}"#;
        assert_eq!(literal_around(buffer, &buffer[6..11]), Some(r#""plain""#));
        assert_eq!(literal_around(buffer, &buffer[7..11]), None, "no quote before it");
        assert_eq!(literal_around(buffer, "elsewhere"), None);
    }

    /// A needle is found where it starts, also when its head occurs earlier, overlapping
    /// the occurrence (a run of the same character), and not where only its head is.
    #[test]
    fn a_long_needle_is_found_whole_past_earlier_heads() {
        let needle = format!("{}b", "a".repeat(NEEDLE_HEAD + 6));
        let haystack = format!("x{}b{}", "a".repeat(NEEDLE_HEAD + 9), "a".repeat(NEEDLE_HEAD));
        assert_eq!(find_whole(haystack.as_bytes(), needle.as_bytes()), Some(4));
        assert_eq!(
            find_whole(haystack.as_bytes(), format!("{needle}c").as_bytes()),
            None
        );
        assert_eq!(find_whole(b"ab", b"b"), Some(1));
        assert_eq!(find_whole(b"", b"b"), None);
    }

    /// Regression: a field before a message repeating an escaped quote made every quote of
    /// it a candidate compared along the whole run, a search quadratic in the run's
    /// length (here 10^12 byte comparisons). The message's text is still found, and as
    /// a slice of the line.
    #[test]
    fn a_run_of_escaped_quotes_before_the_text_is_searched_in_linear_time() {
        let quotes = "\\\"".repeat(1_000_000);
        let line = format!(
            r#"{{"decoy":"{quotes}","type":"user","uuid":"u","message":{{"role":"user","content":"{quotes}x"}}}}"#
        );
        let needle = format!(r#""{quotes}x""#);
        let at = line.find(&needle).unwrap();
        assert!(at > quotes.len(), "the decoy comes first");
        assert_eq!(find_whole(line.as_bytes(), needle.as_bytes()), Some(at));
        let records = crate::formats::claude_code::parse::parse_file(0, line.as_bytes()).records;
        let Some(Content::Text(text)) = records[0].message.as_ref().map(|m| &m.content) else {
            panic!("the message's content is its text");
        };
        assert_eq!(text.text().len(), 1_000_001);
        assert_eq!(text.own_heap_size(), 0, "a slice of the line");
    }
}
