//! AutoGen logs, read as CommuGraph reads them (`tests/reference/autogen/README.md`): sender
//! and recipient messages, one JSON object per line or a JSON array of them, into
//! [`AgMessage`]s. AutoGen's own dumps (AgentChat, 0.2 / AG2) are told apart and read onto
//! the same messages by [`crate::formats::autogen::agentchat`].
//!
//! The rules, in short: sender = `sender` || `name` || `from` || `unknown`; receiver =
//! `recipient` || `to` (`all` or none: no receiver); text from `message` (a string, or an
//! object's `content`/`text`, else the object as JSON), else `content`, else `text`, and a
//! message with blank text is dropped; the time is the first readable of `timestamp`,
//! `time`, `created_at`, `date` (numbers above 1e12 are milliseconds, others seconds;
//! strings are dates), else 2024-01-01T00:00:00.000Z plus the step in milliseconds; the
//! step is the 0-based line (or array) position; the type is an explicit known `type`, else
//! `system` for role system, `action` for a `function_call`, then keywords, else `response`.

/// Inside an `impl Visitor`: every scalar but `null` (a boolean, a number, a string) reads
/// as `$value`. The readers' visitors look only into objects and arrays. Defined before the
/// readers' modules, which use it by its textual scope.
macro_rules! scalars_read_as {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

pub mod agentchat;
pub mod cost;
pub mod read;
pub mod shape;

use std::borrow::Cow;
use std::ops::Range;

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

pub use crate::formats::autogen::read::ReadError;
use crate::heap::HeapSize;
use crate::memory_bound::RecordBudget;

/// One message of an AutoGen log.
#[derive(Debug, Clone, PartialEq)]
pub struct AgMessage {
    /// The 0-based line (or array) position.
    pub step: usize,
    /// ISO 8601, UTC, milliseconds.
    pub timestamp: String,
    /// Who sends.
    pub sender: String,
    /// Who is addressed (`None`: everyone, or no one named).
    pub receiver: Option<String>,
    /// `thought`, `action`, `observation`, `delegation`, `response` or `system`.
    pub message_type: &'static str,
    /// The text.
    pub content: String,
    /// True when a human speaks: the entry's `role` is `user` (CommuGraph's form), or an
    /// AgentChat `UserProxyAgent` relays what a human typed.
    pub human: bool,
    /// The tool calls (or results) of a tool call (or result) message, one interaction
    /// each in the graph; empty for any other message.
    pub tools: Vec<ToolPart>,
}

/// One tool call, or one tool result, of an AutoGen message: a message may carry several
/// (parallel calls in one request, and their results).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPart {
    /// The call's id (a call's `id`, a result's `call_id` or `tool_call_id`), when given.
    pub call_id: Option<String>,
    /// The tool's name, when given.
    pub name: Option<String>,
    /// Where its text is in the message's `content` (a byte range).
    pub text: Range<usize>,
    /// True for a result the log marks failed (`is_error: true`, or AG2's `Error: ...`).
    pub failed: bool,
}

impl AgMessage {
    /// The text of `part`, one of this message's [`AgMessage::tools`].
    pub fn part_text(&self, part: &ToolPart) -> &str {
        self.content.get(part.text.clone()).unwrap_or(&self.content)
    }

    /// True when one of its tool results failed.
    pub fn failed(&self) -> bool {
        self.tools.iter().any(|p| p.failed)
    }
}

/// Why a log cannot be read; the messages are CommuGraph's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutogenError {
    /// The log holds nothing but whitespace.
    #[error("Log content is empty")]
    Empty,
    /// A JSONL line is not JSON.
    #[error("Invalid JSON on line {0}")]
    Line(usize),
    /// The JSON array does not parse.
    #[error("Invalid JSON array format")]
    Array,
    /// An entry is `null` (CommuGraph fails reading its fields).
    #[error("Failed to parse AutoGen log")]
    Entry(usize),
    /// No entry holds a message.
    #[error("No valid messages found in log")]
    NoMessages,
}

impl AutogenError {
    /// The 1-based line (or array position) at fault, when there is one.
    pub fn line(&self) -> Option<usize> {
        match self {
            AutogenError::Line(n) | AutogenError::Entry(n) => Some(*n),
            _ => None,
        }
    }
}

/// The message types CommuGraph knows.
const TYPES: [&str; 6] = [
    "thought",
    "action",
    "observation",
    "delegation",
    "response",
    "system",
];

/// Reads an AutoGen log: CommuGraph's sender/recipient form, or one of AutoGen's own dumps
/// ([`crate::formats::autogen::agentchat`]), whole-document objects first; without a memory bound (see
/// [`parse_within`]).
pub fn parse(text: &str) -> Result<Vec<AgMessage>, AutogenError> {
    parse_within(text, &RecordBudget::unbounded()).map_err(|e| match e {
        ReadError::Autogen(e) => e,
        ReadError::PastBound { .. } => unreachable!("an unbounded budget never runs out"),
    })
}

/// Reads an AutoGen log as [`parse`] does, one entry at a time, charging each message kept
/// to `budget` ([`cost::message_cost`]) and stopping with
/// [`ReadError::PastBound`] as soon as it runs out ([`crate::formats::autogen::read`]).
pub fn parse_within(text: &str, budget: &RecordBudget) -> Result<Vec<AgMessage>, ReadError> {
    crate::formats::autogen::read::read(text, budget)
}

/// How much of a file [`looks_like`] needs to see.
pub const SNIFF_BYTES: usize = 64 << 10;

/// True when `head` (the start of a file, [`SNIFF_BYTES`] is enough) looks like an AutoGen
/// log: its first message ([`agentchat::first_entry`]: the first line, the first element of
/// a JSON array, or the first message a wrapping object holds) is an object with `sender` or
/// `recipient`, an AgentChat message (`source` and a known `type`) or a 0.2 / AG2 chat
/// message (`role` and `content`, no `type`); never a Claude Code record.
pub fn looks_like(head: &str) -> bool {
    agentchat::first_entry(head).is_some_and(|o| {
        o.contains_key("sender")
            || o.contains_key("recipient")
            || agentchat::is_agentchat_message(&o)
            || agentchat::is_chat_message(&o)
    })
}

/// [`looks_like`] on the first bytes of a file.
pub fn looks_like_bytes(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    looks_like(&String::from_utf8_lossy(head))
}

/// The message of one entry in CommuGraph's form; `None` when it holds no text.
pub(crate) fn message(object: &Map<String, Value>, step: usize) -> Option<AgMessage> {
    let field = |k: &str| object.get(k).filter(|v| truthy(v));
    let sender = ["sender", "name", "from"]
        .iter()
        .find_map(|k| field(k))
        .map_or_else(|| "unknown".to_owned(), js_string);
    let receiver = field("recipient")
        .or_else(|| field("to"))
        .map(js_string)
        .filter(|r| r != "all");
    let content = content(object).filter(|c| !c.trim().is_empty())?;
    Some(AgMessage {
        step,
        timestamp: timestamp(object, step),
        sender,
        receiver,
        message_type: message_type(object, &content),
        content,
        human: matches!(object.get("role"), Some(Value::String(r)) if r.eq_ignore_ascii_case("user")),
        tools: Vec::new(),
    })
}

fn content(object: &Map<String, Value>) -> Option<String> {
    if let Some(message) = object.get("message") {
        return Some(match message {
            Value::Object(m) => m
                .get("content")
                .filter(|v| truthy(v))
                .or_else(|| m.get("text").filter(|v| truthy(v)))
                .map_or_else(|| message.to_string(), js_string),
            Value::Array(_) => message.to_string(),
            other => js_string(other),
        });
    }
    object
        .get("content")
        .or_else(|| object.get("text"))
        .map(js_string)
}

/// The first readable time field, else the step's made-up time.
pub(crate) fn timestamp(object: &Map<String, Value>, step: usize) -> String {
    let read = |v: &Value| -> Option<DateTime<Utc>> {
        match v {
            Value::Number(n) => {
                let x = n.as_f64()?;
                let ms = if x > 1e12 { x } else { x * 1000.0 };
                DateTime::from_timestamp_millis(ms.trunc() as i64)
            }
            Value::String(s) => parse_date(&s.replacen('Z', "+00:00", 1)),
            _ => None,
        }
    };
    ["timestamp", "time", "created_at", "date"]
        .iter()
        .find_map(|k| object.get(*k).and_then(read))
        .unwrap_or_else(|| {
            DateTime::from_timestamp_millis(1_704_067_200_000 + step as i64).unwrap_or_default()
        })
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A date as JavaScript's `Date` reads the usual forms: RFC 3339 (with a space or a `T`),
/// a date and time without offset (read as UTC here), or a date alone (UTC midnight).
fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(&s.replacen(' ', "T", 1)) {
        return Some(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
            return Some(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// The type of a message: an explicit known `type`, else by `role`, `function_call` and
/// keywords.
pub(crate) fn message_type(object: &Map<String, Value>, content: &str) -> &'static str {
    if let Some(Value::String(t)) = object.get("type") {
        let t = t.to_lowercase();
        if let Some(known) = TYPES.iter().find(|k| **k == t) {
            return known;
        }
    }
    if let Some(Value::String(role)) = object.get("role") {
        if role.to_lowercase() == "system" {
            return "system";
        }
    }
    if object.get("function_call").is_some_and(truthy) {
        return "action";
    }
    let lower = content.to_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if any(&["please", "can you", "could you", "implement", "create", "build"]) {
        "delegation"
    } else if any(&["thinking", "analyzing", "considering", "let me think"]) {
        "thought"
    } else if any(&["executing", "running", "calling", "function_call"]) {
        "action"
    } else {
        "response"
    }
}

/// The intent CommuGraph gives a message type.
pub fn intent(message_type: &str) -> &'static str {
    match message_type {
        "delegation" => "delegation",
        "action" => "coordination",
        "response" | "observation" => "information_response",
        _ => "unknown",
    }
}

/// JavaScript's truthiness of a JSON value.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// JavaScript's `String(value)` of a JSON value.
pub(crate) fn js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            serde_json::to_string(&crate::json::jsnum::JsNumber(x)).unwrap_or_default()
        }
        Value::Array(items) => items
            .iter()
            .map(|i| if i.is_null() { String::new() } else { js_string(i) })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// The first `n` UTF-16 units of `s` (JavaScript's `slice(0, n)`, never splitting a
/// character).
pub fn js_prefix(s: &str, n: usize) -> Cow<'_, str> {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > n {
            return Cow::Borrowed(&s[..i]);
        }
    }
    Cow::Borrowed(s)
}

impl HeapSize for AgMessage {
    fn heap_size(&self) -> usize {
        self.timestamp.heap_size()
            + self.sender.heap_size()
            + self.receiver.heap_size()
            + self.content.heap_size()
            + self.tools.heap_size()
    }
}

impl HeapSize for ToolPart {
    fn heap_size(&self) -> usize {
        self.call_id.heap_size() + self.name.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::autogen::*;

    #[test]
    fn fields_fall_back_as_commugraph_reads_them() {
        let log = concat!(
            r#"{"name": "A", "to": "all", "message": {"text": "hello"}, "time": "2024-03-01T08:00:00Z"}"#,
            "\n\n",
            r#"{"from": "B", "recipient": "A", "content": 5, "timestamp": 1709280000123}"#,
            "\n",
            r#"{"sender": "", "text": "   "}"#,
            "\n",
            r#"{"sender": "C", "recipient": "A", "message": "please build it", "role": "user"}"#,
        );
        let m = parse(log).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            (
                m[0].sender.as_str(),
                m[0].receiver.as_deref(),
                m[0].content.as_str()
            ),
            ("A", None, "hello")
        );
        assert_eq!(m[0].timestamp, "2024-03-01T08:00:00.000Z");
        assert_eq!((m[1].step, m[1].content.as_str()), (2, "5"));
        assert_eq!(m[1].timestamp, "2024-03-01T08:00:00.123Z");
        assert_eq!(m[2].step, 4);
        assert_eq!(m[2].timestamp, "2024-01-01T00:00:00.004Z", "no time: the step's");
        assert_eq!(m[2].message_type, "delegation");
        assert_eq!(intent(m[2].message_type), "delegation");
    }

    #[test]
    fn bad_logs_get_commugraphs_errors() {
        assert_eq!(parse("  \n"), Err(AutogenError::Empty));
        assert_eq!(parse("{\"sender\": \"a\"}\n{oops"), Err(AutogenError::Line(2)));
        assert_eq!(parse("[{\"sender\": 1},"), Err(AutogenError::Array));
        assert_eq!(parse("{\"sender\": \"a\"}"), Err(AutogenError::NoMessages));
        assert_eq!(
            parse("{\"sender\": \"a\", \"message\": \"x\"}\nnull"),
            Err(AutogenError::Entry(2))
        );
        assert_eq!(AutogenError::Line(2).to_string(), "Invalid JSON on line 2");
    }

    #[test]
    fn an_autogen_log_is_told_from_its_first_line() {
        assert!(looks_like("{\"sender\": \"a\", \"recipient\": \"b\"}\n"));
        assert!(looks_like(
            "[\n  {\n    \"sender\": \"a\",\n    \"message\": \"hi\"\n  }\n]"
        ));
        assert!(!looks_like("  [ {} ]"));
        assert!(!looks_like("[1,2,3]"));
        assert!(!looks_like("{\"type\": \"user\", \"uuid\": \"u\"}"));
        assert!(!looks_like("{\"type\":\"session\",\"version\":3}"));
    }

    #[test]
    fn previews_cut_at_utf16_units() {
        assert_eq!(js_prefix("abc", 2), "ab");
        assert_eq!(js_prefix("a😀b", 2), "a");
        assert_eq!(js_prefix("a😀b", 3), "a😀");
    }
}
