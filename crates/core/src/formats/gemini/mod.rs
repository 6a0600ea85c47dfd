//! Google Gemini CLI chat recordings (`~/.gemini/tmp/<project>/chats/session-*.json` and
//! `.jsonl`), read into the same
//! [`Record`](crate::formats::claude_code::records::Record)s as Claude Code so that one pipeline serves
//! both.
//!
//! Two layouts:
//! - **legacy** (up to v0.38): one JSON object, usually pretty-printed, rewritten whole on
//!   every change: `sessionId`, `projectHash`, `startTime`, `lastUpdated`, `messages`, later
//!   `summary`, `directories` and `kind` (`main` or `subagent`);
//! - **JSONL** (from v0.39): a header line, then message lines (a message appended again
//!   with the same `id` replaces the earlier copy), `{"$set": {...}}` lines (header
//!   updates; `messages` there is a checkpoint of the whole list) and `{"$rewindTo": id}`
//!   lines (the `read` module says how each is taken).
//!
//! A sub-agent's chat is a file of its own (`chats/<parent session id>/<agent id>.jsonl`,
//! header `kind: "subagent"`, its `sessionId` the agent's id): its records carry that id as
//! their `agentId` and are sidechain records; the parent's delegating tool call carries the
//! same `agentId` (from v0.39), which its result record passes on as
//! `toolUseResult.agentId`, so that linking ties the agent to the call as it ties a Claude
//! Code Task.
//!
//! | message | record |
//! |---|---|
//! | `user` | `user`: the prompt as typed (`displayContent` when it holds text, else `content`) and its images; one whose `displayContent` is only a tool's response is the CLI's, not the human's: `system`, subtype `continuation` |
//! | `gemini` | `assistant` (`message.id` = the message id): a thinking block per thought, the text, a `tool_use` per tool call (`args` as input); `model`; usage `input`, `output` + `thoughts` |
//! | each answered tool call of it | `user` holding a `tool_result` (`tool_use_id` = the call id, `is_error` by the log's verdict, CONTRACT 3.17), uuid `<call id>:result` |
//! | `info`, `warning`, `error` | `system` with that subtype |
//! | a compression checkpoint | `system`, subtype `compact_boundary`, its summary as content |
//! | any other type | kept by its type (a parent in the order), shown nowhere |

mod read;
mod records;
mod wire;

#[cfg(test)]
mod properties;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::formats::claude_code::cost::fixed_cost;
use crate::formats::claude_code::parse::ParsedFile;
use crate::heap::HeapSize;
use crate::json::frame;
use crate::memory_bound::RecordBudget;

/// What a Gemini file says of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeminiHeader {
    /// `sessionId`: the session's id (a sub-agent's: the agent's id).
    pub session_id: Option<String>,
    /// `projectHash`: SHA-256 of the project's root path.
    pub project_hash: Option<String>,
    /// `startTime`.
    pub start_time: Option<String>,
    /// `kind`: `main` or `subagent` (absent before v0.31).
    pub kind: Option<String>,
    /// `summary`: the CLI's one-line summary of the session.
    pub summary: Option<String>,
}

impl GeminiHeader {
    /// True for a sub-agent's chat (`kind: "subagent"`).
    pub fn is_subagent(&self) -> bool {
        self.kind.as_deref() == Some("subagent")
    }
}

/// A Gemini file read: its header and records.
pub struct GeminiFile {
    /// The header (empty fields when the file has none).
    pub header: GeminiHeader,
    /// The records, lines, bad lines.
    pub parsed: ParsedFile,
}

/// Reads a Gemini file (file number `file` of its session).
pub fn parse_gemini_file(file: u32, data: &[u8]) -> GeminiFile {
    parse_gemini_file_within(file, data, &RecordBudget::unbounded())
}

/// [`parse_gemini_file`], charging the records kept to `budget` and stopping once it is
/// exhausted (the result is then incomplete: the caller refuses the session).
pub fn parse_gemini_file_within(file: u32, data: &[u8], budget: &RecordBudget) -> GeminiFile {
    let conversation = read::read(data);
    let mut parsed = ParsedFile::default();
    parsed.lines = conversation.lines;
    for r in records::records_of(&conversation, file) {
        let within = budget.charge(fixed_cost(&r));
        parsed.records.push(r);
        if !within {
            break;
        }
    }
    for bad in conversation.bad_lines {
        parsed.bad_lines.push(bad);
    }
    parsed.count_kept_records();
    GeminiFile {
        header: conversation.header,
        parsed,
    }
}

/// How much of a file [`sniff`] reads.
pub const SNIFF_BYTES: usize = 64 << 10;

/// The header of a Gemini file, told from its start (the first [`SNIFF_BYTES`] are
/// enough), or `None` when it is not one. A Gemini file starts with a header line, or is
/// one JSON object, with a string `sessionId` beside `projectHash` or `messages` (and no
/// `type` or `uuid`: never a Claude Code record); a file whose first object is a lone
/// Gemini message (a string `id`, `type` `user`, `gemini`, `info`, `warning` or `error`,
/// no `uuid` or `message`) is one too. Its `kind` is known when the start holds it.
pub fn sniff(head: &[u8]) -> Option<GeminiHeader> {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    let first = frame::lines(head).next()?;
    let keys = match serde_json::from_slice::<Value>(first.bytes) {
        Ok(Value::Object(o)) => TopKeys::of_object(&o),
        Ok(_) => return None,
        Err(_) => TopKeys::of_prefix(head),
    };
    keys.header()
}

/// True when `head` starts a Gemini file ([`sniff`]).
pub fn looks_like(head: &[u8]) -> bool {
    sniff(head).is_some()
}

/// The top-level keys [`sniff`] looks at.
#[derive(Default, Debug)]
struct TopKeys {
    strings: Vec<(String, String)>,
    others: Vec<String>,
}

impl TopKeys {
    fn of_object(o: &serde_json::Map<String, Value>) -> TopKeys {
        let mut keys = TopKeys::default();
        for (k, v) in o {
            match v {
                Value::String(s) => keys.strings.push((k.clone(), s.clone())),
                Value::Array(_) if k == "messages" => keys.strings.push((k.clone(), String::new())),
                _ => keys.others.push(k.clone()),
            }
        }
        keys
    }

    /// The keys of the object `head` starts, as far as it reads (a long document's start).
    fn of_prefix(head: &[u8]) -> TopKeys {
        let mut keys = TopKeys::default();
        let text = String::from_utf8_lossy(head);
        let mut de = serde_json::Deserializer::from_str(&text);
        // The head usually ends inside the document: what was read before that counts.
        let _ = (&mut de).deserialize_map(PrefixKeys(&mut keys));
        keys
    }

    fn string(&self, key: &str) -> Option<&str> {
        self.strings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn has(&self, key: &str) -> bool {
        self.string(key).is_some() || self.others.iter().any(|k| k == key)
    }

    fn header(&self) -> Option<GeminiHeader> {
        let header = self.has("sessionId") && (self.has("projectHash") || self.has("messages"));
        let session = self.string("sessionId").is_some() && header && !self.has("type") && !self.has("uuid");
        let message = self.string("id").is_some()
            && !self.has("uuid")
            && !self.has("message")
            && matches!(
                self.string("type"),
                Some("user" | "gemini" | "info" | "warning" | "error")
            );
        let update = self.has("$set") || self.has("$rewindTo");
        (session || message || update).then(|| GeminiHeader {
            session_id: self.string("sessionId").filter(|_| session).map(str::to_owned),
            project_hash: self.string("projectHash").map(str::to_owned),
            start_time: self.string("startTime").map(str::to_owned),
            kind: self.string("kind").map(str::to_owned),
            summary: self.string("summary").map(str::to_owned),
        })
    }
}

/// Reads an object's keys into a [`TopKeys`], values skipped unless strings.
struct PrefixKeys<'k>(&'k mut TopKeys);

impl<'de> Visitor<'de> for PrefixKeys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            map.next_value_seed(PrefixValue { keys: self.0, key })?;
        }
        Ok(())
    }
}

/// One value of [`PrefixKeys`]: kept when a string, noted (and skipped) otherwise.
struct PrefixValue<'k> {
    keys: &'k mut TopKeys,
    key: String,
}

impl<'de> DeserializeSeed<'de> for PrefixValue<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        // Noted before the value is read: a value the head cuts off still names its key.
        let PrefixValue { keys, key } = self;
        let at = keys.others.len();
        keys.others.push(key.clone());
        if let Value::String(s) = d.deserialize_any(StringOrSkip)? {
            keys.others.remove(at);
            keys.strings.push((key, s));
        } else if key == "messages" {
            keys.strings.push((key, String::new()));
        }
        Ok(())
    }
}

/// A string value as itself; any other skipped (read as null).
struct StringOrSkip;

impl<'de> Visitor<'de> for StringOrSkip {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

impl HeapSize for GeminiHeader {
    fn heap_size(&self) -> usize {
        self.session_id.heap_size()
            + self.project_hash.heap_size()
            + self.start_time.heap_size()
            + self.kind.heap_size()
            + self.summary.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::gemini::*;

    #[test]
    fn sniffs_both_layouts_and_never_claude_code() {
        let jsonl = br#"{"sessionId":"S","projectHash":"h","startTime":"t","kind":"main"}"#;
        assert_eq!(sniff(jsonl).unwrap().kind.as_deref(), Some("main"));
        let legacy = b"{\n  \"sessionId\": \"S\",\n  \"projectHash\": \"h\",\n  \"messages\": [\n    {\"id\": \"u\", \"ty";
        assert_eq!(sniff(legacy).unwrap().session_id.as_deref(), Some("S"));
        let sorted = b"{\n \"lastUpdated\": \"x\",\n \"messages\": [],\n \"sessionId\": \"S\"\n}";
        assert!(looks_like(sorted));
        let sub = b"{\n \"sessionId\": \"A\",\n \"projectHash\": \"h\",\n \"kind\": \"subagent\",\n \"messages\": [";
        assert!(sniff(sub).unwrap().is_subagent());
        assert!(looks_like(br#"{"id":"m","type":"gemini","content":"x"}"#));
        assert!(!looks_like(
            br#"{"type":"user","uuid":"u","sessionId":"S","message":{"content":"x"}}"#
        ));
        assert!(!looks_like(br#"{"type":"session","id":"x"}"#));
        assert!(!looks_like(
            br#"[{"source":"user","type":"TextMessage","content":"x"}]"#
        ));
        assert!(!looks_like(b""));
    }
}
