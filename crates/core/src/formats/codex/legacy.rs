//! The TypeScript CLI's single-object sessions (`rollout-YYYY-MM-DD-<id>.json`): one JSON
//! object `{"session": {timestamp, id, instructions}, "items": [...]}`, its items Responses
//! API items or Chat-Completions messages (`role`, `content`, `tool_calls`,
//! `tool_call_id`). Each item is read as a bare response item; its line is its index in
//! `items` plus one (the file has no line per item).

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::act::{LineContext, Prepared, Stamp};
use super::items::prepare_item;
use super::reader::Reading;
use super::wire::Payload;
use super::CodexMeta;
use crate::formats::claude_code::parse::{BadLine, LineError};
use crate::formats::claude_code::records::Position;
use crate::json::lenient::{self, ObjectOr};

#[derive(Deserialize, Default)]
#[serde(default)]
struct Session {
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    timestamp: Option<String>,
}

#[derive(Deserialize)]
struct File<'a> {
    session: ObjectOr<Session>,
    #[serde(borrow)]
    items: Vec<ObjectOr<Box<Payload<'a>>>>,
}

#[derive(Deserialize)]
struct Probe {
    #[allow(dead_code)]
    session: IgnoredAny,
    #[allow(dead_code)]
    items: Vec<IgnoredAny>,
}

/// True when `data` is one JSON object with `session` and an `items` array.
pub(super) fn is_single_object(data: &[u8]) -> bool {
    let start = data.iter().position(|b| !b.is_ascii_whitespace());
    start.is_some_and(|s| data[s] == b'{') && serde_json::from_slice::<Probe>(data).is_ok()
}

/// Reads a single-object session into `reading`.
pub(super) fn read(reading: &mut Reading, cx: &LineContext<'_>, data: &[u8]) {
    let file = match serde_json::from_slice::<File<'_>>(data) {
        Ok(file) => file,
        Err(e) => {
            reading.parsed.bad_lines.push(BadLine {
                line: e.line() as u32,
                error: LineError::Invalid(e.to_string()),
                unterminated: false,
            });
            return;
        }
    };
    let session = file.session.0.unwrap_or_default();
    reading.take_meta(CodexMeta {
        id: session.id,
        ..CodexMeta::default()
    });
    reading.default_time = Stamp::of(session.timestamp);
    reading.count("session");
    for (n, item) in file.items.into_iter().enumerate() {
        let pos = Position {
            file: reading.file,
            line: n as u32 + 1,
            seq: 0,
        };
        reading.parsed.lines += 1;
        match item.0 {
            Some(payload) => {
                let (count, act) = prepare_item(cx, payload, pos);
                let prepared = Prepared {
                    count,
                    stamp: Stamp::default(),
                    act,
                };
                reading.take(prepared, pos);
            }
            None => {
                reading.parsed.records_read += 1;
                reading.parsed.bad_lines.push(BadLine {
                    line: pos.line,
                    error: LineError::NotAnObject("another JSON value"),
                    unterminated: false,
                })
            }
        }
    }
}
