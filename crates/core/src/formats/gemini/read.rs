//! A Gemini CLI file read into a [`Conversation`]: its header and its messages in the order
//! they first appeared, each hung off the message before it, with what the log did to them
//! (replaced by a later copy, rewound, compressed) applied.
//!
//! The JSONL form is read line by line as the CLI's own loader reads it: `$rewindTo`, then
//! a message (any object with a string `id`), then `$set`, then a header (`sessionId`).
//! Two rules differ from the loader, which rebuilds the live context and may forget; here
//! the history is kept:
//! - a rewind drops nothing: the messages after the rewind hang off the message before
//!   the one rewound to, so that the rewound ones become an abandoned branch;
//! - a `$set.messages` checkpoint that leaves out messages held is a compression: it
//!   becomes a compaction entry (the new messages before the first one kept are its
//!   summary), and the messages it leaves out stay where they were. A checkpoint that
//!   leaves none out only syncs: the copies held are kept (a masked tool output is not
//!   read over the original) and its new messages are appended.

use std::collections::BTreeMap;

use foldhash::HashMap;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::wire::WireMessage;
use super::GeminiHeader;
use crate::formats::claude_code::parse::{check_line_length, BadLine, LineError};
use crate::json::frame;

/// What a slot of the conversation holds.
#[derive(Debug, Clone)]
pub(super) enum Entry {
    /// A message record.
    Message(Box<WireMessage>),
    /// A compression (a checkpoint that left messages out).
    Compaction {
        /// The summary: the text of the checkpoint's new messages before its first kept one.
        summary: String,
        /// Messages held that the checkpoint left out.
        dropped: usize,
        /// Messages held that it kept.
        kept: usize,
    },
}

/// One message (or compaction) of the conversation.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    /// What it holds (the last copy of a message).
    pub(super) entry: Entry,
    /// Its id: the message's `id`, made unique when a rewound id comes back.
    pub(super) id: String,
    /// The 1-based line it first appeared on.
    pub(super) line: u32,
    /// The slot it follows: the last of the active chain when it first appeared.
    pub(super) parent: Option<usize>,
}

/// A file read: header, slots, and the lines that could not be read.
#[derive(Debug, Default)]
pub(super) struct Conversation {
    /// The header, merged from every header line and `$set`.
    pub(super) header: GeminiHeader,
    /// The slots, in order of first appearance.
    pub(super) slots: Vec<Slot>,
    /// The active chain: slot indices from the first message to the current one.
    chain: Vec<usize>,
    /// Message id -> its slot.
    by_id: HashMap<String, usize>,
    /// Non-blank lines seen.
    pub(super) lines: usize,
    /// Lines that gave nothing.
    pub(super) bad_lines: Vec<BadLine>,
}

/// Reads a Gemini file: JSON lines when its first line is a whole JSON object, else one
/// JSON document (the legacy `.json`, usually pretty-printed).
pub(super) fn read(data: &[u8]) -> Conversation {
    let mut lines = frame::lines(data).peekable();
    let first_is_object = lines
        .peek()
        .is_some_and(|l| serde_json::from_slice::<&RawValue>(l.bytes).is_ok() && l.bytes.starts_with(b"{"));
    if first_is_object {
        read_lines(lines)
    } else {
        read_document(data)
    }
}

/// The JSONL form.
fn read_lines<'a>(lines: impl Iterator<Item = frame::Line<'a>>) -> Conversation {
    let mut c = Conversation::default();
    for line in lines {
        c.lines += 1;
        let read = check_line_length(line.bytes.len()).and_then(|()| object_of(line.bytes));
        match read {
            Ok(object) => {
                if let Err(error) = c.take_line(object, line.number) {
                    c.bad(line.number, error, false);
                }
            }
            Err(error) => c.bad(line.number, error, !line.terminated),
        }
    }
    c
}

/// The JSON object on a line, or why there is none.
fn object_of(bytes: &[u8]) -> Result<Map<String, Value>, LineError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(Value::Array(_)) => Err(LineError::NotAnObject("an array")),
        Ok(_) => Err(LineError::NotAnObject("a scalar")),
        Err(e) if e.is_eof() => Err(LineError::Truncated),
        Err(e) => Err(LineError::Invalid(e.to_string())),
    }
}

/// The header keys of a legacy document that [`GeminiHeader::merge`] reads.
const HEADER_KEYS: [&str; 5] = ["sessionId", "projectHash", "startTime", "kind", "summary"];

/// The legacy form: one JSON object, its messages numbered by the line each starts on.
fn read_document(data: &[u8]) -> Conversation {
    let mut c = Conversation {
        lines: frame::lines(data).count(),
        ..Conversation::default()
    };
    let text = String::from_utf8_lossy(data);
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let document = match serde_json::from_str::<BTreeMap<String, &RawValue>>(body) {
        Ok(d) => d,
        Err(e) => {
            let error = match e.classify() {
                serde_json::error::Category::Eof => LineError::Truncated,
                _ if !body.trim_start().starts_with('{') => LineError::NotAnObject("not an object"),
                _ => LineError::Invalid(e.to_string()),
            };
            c.bad(e.line().max(1) as u32, error, false);
            return c;
        }
    };
    let header: Map<String, Value> = HEADER_KEYS
        .iter()
        .filter_map(|&k| Some((k.to_owned(), serde_json::from_str(document.get(k)?.get()).ok()?)))
        .collect();
    c.header.merge(&header);
    let Some(messages) = document.get("messages") else {
        // A lone message, pretty-printed (a message copied out of a chat).
        if let (Some(_), Ok(Value::Object(o))) = (document.get("id"), serde_json::from_str::<Value>(body)) {
            if o.get("id").is_some_and(Value::is_string) {
                let line = frame::lines(data).next().map_or(1, |l| l.number);
                if let Err(error) = c.take_message(o, line) {
                    c.bad(line, error, false);
                }
            }
        }
        return c;
    };
    let start = body.as_ptr() as usize;
    let line_at = LineCounter::new(body);
    let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(messages.get()) else {
        let line = line_at.line(messages.get().as_ptr() as usize - start);
        c.bad(
            line,
            LineError::Invalid("messages is not an array".to_owned()),
            false,
        );
        return c;
    };
    for item in items {
        let line = line_at.line(item.get().as_ptr() as usize - start);
        match serde_json::from_str::<Value>(item.get()) {
            Ok(Value::Object(o)) => {
                if let Err(error) = c.take_message(o, line) {
                    c.bad(line, error, false);
                }
            }
            _ => c.bad(
                line,
                LineError::NotAnObject("a message that is not an object"),
                false,
            ),
        }
    }
    c
}

/// Line numbers of byte offsets, for offsets asked in increasing order or not.
struct LineCounter {
    /// Offset of each newline.
    newlines: Vec<usize>,
}

impl LineCounter {
    fn new(text: &str) -> LineCounter {
        LineCounter {
            newlines: memchr::memchr_iter(b'\n', text.as_bytes()).collect(),
        }
    }

    /// The 1-based line of byte `offset`.
    fn line(&self, offset: usize) -> u32 {
        (self.newlines.partition_point(|&n| n < offset) + 1) as u32
    }
}

impl Conversation {
    fn bad(&mut self, line: u32, error: LineError, unterminated: bool) {
        self.bad_lines.push(BadLine {
            line,
            error,
            unterminated,
        });
    }

    /// Takes one JSONL object, read on line `line`.
    fn take_line(&mut self, mut object: Map<String, Value>, line: u32) -> Result<(), LineError> {
        if let Some(to) = object.get("$rewindTo") {
            let to = to.as_str().map(str::to_owned);
            self.rewind(to.as_deref());
            return Ok(());
        }
        if object.get("id").is_some_and(Value::is_string) {
            return self.take_message(object, line);
        }
        if let Some(set) = object.remove("$set") {
            let Value::Object(mut set) = set else {
                return Err(LineError::Invalid("$set is not an object".to_owned()));
            };
            if let Some(Value::Array(messages)) = set.remove("messages") {
                self.checkpoint(messages, line);
            }
            self.header.merge(&set);
            return Ok(());
        }
        if object.get("sessionId").is_some_and(Value::is_string) {
            if let Some(Value::Array(messages)) = object.remove("messages") {
                for m in messages {
                    if let Value::Object(m) = m {
                        self.take_message(m, line)?;
                    }
                }
            }
            self.header.merge(&object);
            return Ok(());
        }
        Err(LineError::Invalid(
            "not a Gemini chat record (no id, $set, $rewindTo or sessionId)".to_owned(),
        ))
    }

    /// Takes a message read on line `line`: a new one joins the chain; a copy of one on
    /// the chain replaces it in place.
    fn take_message(&mut self, object: Map<String, Value>, line: u32) -> Result<(), LineError> {
        let message =
            WireMessage::deserialize(Value::Object(object)).map_err(|e| LineError::Invalid(e.to_string()))?;
        let id = message.id.clone().unwrap_or_else(|| format!("line-{line}"));
        if let Some(&slot) = self.by_id.get(&id) {
            if self.chain.contains(&slot) {
                self.slots[slot].entry = Entry::Message(Box::new(message));
                return Ok(());
            }
        }
        // A rewound id that comes back is a new message: its id is made unique.
        let unique = if self.by_id.contains_key(&id) {
            format!("{id}@{line}")
        } else {
            id.clone()
        };
        self.push(Entry::Message(Box::new(message)), unique, line);
        self.by_id.insert(id, self.slots.len() - 1);
        Ok(())
    }

    /// Appends `entry` to the slots and the chain.
    fn push(&mut self, entry: Entry, id: String, line: u32) {
        self.slots.push(Slot {
            entry,
            id,
            line,
            parent: self.chain.last().copied(),
        });
        self.chain.push(self.slots.len() - 1);
    }

    /// `$rewindTo`: the chain goes back to before message `to` (to the start when `to` is
    /// not on it).
    fn rewind(&mut self, to: Option<&str>) {
        let at = to
            .and_then(|id| self.by_id.get(id))
            .and_then(|slot| self.chain.iter().position(|s| s == slot))
            .unwrap_or(0);
        self.chain.truncate(at);
    }

    /// A `$set.messages` checkpoint read on line `line` (see the module's rules).
    fn checkpoint(&mut self, messages: Vec<Value>, line: u32) {
        let ids: Vec<Option<String>> = messages
            .iter()
            .map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let held: Vec<usize> = self.chain.clone();
        let in_checkpoint = |slot: &usize| ids.iter().flatten().any(|id| self.by_id.get(id) == Some(slot));
        let kept = held.iter().filter(|s| in_checkpoint(s)).count();
        let dropped = held.len() - kept;
        let known: Vec<bool> = ids
            .iter()
            .map(|id| id.as_ref().is_some_and(|id| self.by_id.contains_key(id)))
            .collect();
        let first_known = known.iter().position(|&k| k).unwrap_or(ids.len());
        let mut rest = messages.into_iter().zip(known);
        if dropped > 0 {
            let summary: Vec<String> = rest
                .by_ref()
                .take(first_known)
                .filter_map(|(m, _)| serde_json::from_value::<WireMessage>(m).ok())
                .map(|m| m.content.text())
                .collect();
            let id = ids.iter().flatten().next().filter(|_| first_known > 0);
            let id = id.cloned().unwrap_or_else(|| format!("compression-{line}"));
            let summary = summary.join("\n\n");
            self.push(
                Entry::Compaction {
                    summary,
                    dropped,
                    kept,
                },
                id,
                line,
            );
        }
        for (m, known) in rest {
            if !known {
                if let Value::Object(m) = m {
                    // A message the checkpoint could not read is its loss, not the line's.
                    let _ = self.take_message(m, line);
                }
            }
        }
    }
}

impl GeminiHeader {
    /// Takes the header fields of `object` (later values win, as in the CLI's loader; the
    /// first `sessionId` stays the session's).
    fn merge(&mut self, object: &Map<String, Value>) {
        let text = |k: &str| object.get(k).and_then(Value::as_str).map(str::to_owned);
        if self.session_id.is_none() {
            self.session_id = text("sessionId");
        }
        for (field, key) in [
            (&mut self.project_hash, "projectHash"),
            (&mut self.start_time, "startTime"),
            (&mut self.kind, "kind"),
            (&mut self.summary, "summary"),
        ] {
            if let Some(v) = text(key) {
                *field = Some(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::gemini::read::*;

    fn ids(c: &Conversation) -> Vec<(&str, Option<&str>)> {
        c.slots
            .iter()
            .map(|s| (s.id.as_str(), s.parent.map(|p| c.slots[p].id.as_str())))
            .collect()
    }

    #[test]
    fn a_reappended_message_replaces_its_copy_in_place() {
        let c = read(
            concat!(
                r#"{"sessionId":"S","projectHash":"h","kind":"main"}"#,
                "\n",
                r#"{"id":"u","type":"user","content":"hi"}"#,
                "\n",
                r#"{"id":"g","type":"gemini","content":""}"#,
                "\n",
                r#"{"$set":{"lastUpdated":"x","summary":"S1"}}"#,
                "\n",
                r#"{"id":"g","type":"gemini","content":"done"}"#,
                "\n",
            )
            .as_bytes(),
        );
        assert_eq!(ids(&c), vec![("u", None), ("g", Some("u"))]);
        assert!(matches!(&c.slots[1].entry, Entry::Message(m) if m.content.text() == "done"));
        assert_eq!(c.slots[1].line, 3);
        assert_eq!(c.header.summary.as_deref(), Some("S1"));
        assert_eq!(c.header.kind.as_deref(), Some("main"));
        assert!(c.bad_lines.is_empty());
    }

    #[test]
    fn a_rewind_leaves_an_abandoned_branch() {
        let c = read(
            concat!(
                r#"{"sessionId":"S","projectHash":"h"}"#,
                "\n",
                r#"{"id":"u1","type":"user","content":"a"}"#,
                "\n",
                r#"{"id":"g1","type":"gemini","content":"b"}"#,
                "\n",
                r#"{"$rewindTo":"g1"}"#,
                "\n",
                r#"{"id":"g1","type":"gemini","content":"b again"}"#,
                "\n",
            )
            .as_bytes(),
        );
        assert_eq!(
            ids(&c),
            vec![("u1", None), ("g1", Some("u1")), ("g1@5", Some("u1"))]
        );
    }

    #[test]
    fn a_checkpoint_that_drops_messages_is_a_compression() {
        let c = read(
            concat!(
                r#"{"sessionId":"S","projectHash":"h"}"#,
                "\n",
                r#"{"id":"u1","type":"user","content":"a"}"#,
                "\n",
                r#"{"id":"g1","type":"gemini","content":"b"}"#,
                "\n",
                r#"{"id":"u2","type":"user","content":"c"}"#,
                "\n",
                r#"{"$set":{"messages":[{"id":"s1","type":"user","content":"summary"},{"id":"u2","type":"user","content":"c"},{"id":"n","type":"gemini","content":"new"}]}}"#,
                "\n",
            )
            .as_bytes(),
        );
        assert_eq!(
            ids(&c),
            vec![
                ("u1", None),
                ("g1", Some("u1")),
                ("u2", Some("g1")),
                ("s1", Some("u2")),
                ("n", Some("s1"))
            ]
        );
        assert!(matches!(
            &c.slots[3].entry,
            Entry::Compaction { summary, dropped: 2, kept: 1 } if summary == "summary"
        ));
    }

    #[test]
    fn the_legacy_document_numbers_messages_by_their_line() {
        let c = read(b"{\n  \"sessionId\": \"S\",\n  \"messages\": [\n    {\"id\": \"u\", \"type\": \"user\", \"content\": \"hi\"},\n    7,\n    {\n      \"id\": \"g\",\n      \"type\": \"gemini\"\n    }\n  ]\n}\n");
        assert_eq!(c.header.session_id.as_deref(), Some("S"));
        assert_eq!(c.slots.iter().map(|s| s.line).collect::<Vec<_>>(), vec![4, 6]);
        assert_eq!(c.bad_lines.len(), 1);
        assert_eq!(c.bad_lines[0].line, 5);
    }

    #[test]
    fn a_lone_pretty_printed_message_is_read() {
        let c = read(b"{\n  \"id\": \"g\",\n  \"type\": \"gemini\",\n  \"content\": \"hi\"\n}\n");
        assert_eq!(ids(&c), vec![("g", None)]);
    }

    #[test]
    fn bad_lines_are_recorded_and_the_rest_loads() {
        let c = read(b"{\"sessionId\":\"S\",\"projectHash\":\"h\"}\n[1]\n{\"what\":1}\n{\"id\":\"u\",\"type\":\"user\",\"content\":\"x\"}\n{\"id\":\"g\",");
        assert_eq!(c.slots.len(), 1);
        let lines: Vec<u32> = c.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(lines, vec![2, 3, 5]);
        assert_eq!(c.bad_lines[2].error, LineError::Truncated);
        let truncated = read(b"{\n  \"sessionId\": \"S\",\n  \"messages\": [\n");
        assert_eq!(truncated.bad_lines[0].error, LineError::Truncated);
    }
}
