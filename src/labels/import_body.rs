//! An import body, split into its records before any is parsed, then read a batch at a
//! time, so that what an import holds is bounded by its body, not by what its JSON builds.
//!
//! - JSONL (our records, or CommuGraph's speech-act tags): the lines are found with memchr
//!   and counted (blank lines skipped); a body of more than [`MAX_IMPORT_LINES`] is refused
//!   before a line is parsed.
//! - Label Studio: the top-level array is walked a task at a time (serde's `SeqAccess`),
//!   each task kept as its place in the body, never as a `Value`; the task past the limit
//!   ends the walk and refuses the body.
//!
//! Either way a record costs the split a few machine words. A record is then parsed only
//! when its batch is read ([`SplitBody::batch`]), after its JSON values are counted without
//! building them: a record of more than [`MAX_LINE_VALUES`] values (an array of a million
//! `{}` is 3 MB of JSON and was 840 MB of `Value`) is refused as a line, unbuilt.

use std::cell::Cell;
use std::fmt;

use bytes::Bytes;
use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::import::{
    check_records, is_round_header_line, parse_jsonl_line, MAX_IMPORT_LINES, MAX_LINE_VALUES,
};
use super::labelstudio::parse_task_at;
use super::model::ImportItem;
use super::speechact::{parse_tagged_line, SpeechActImport};
use super::validate::{invalid, Invalid};

/// A batch ends once it holds this many records (sets and suggestions): what the import
/// parses, validates and holds at once.
pub const BATCH_RECORDS: usize = 500;

/// A batch ends once its lines hold this many bytes of the body: what a batch parses at
/// once is bounded by it (and one line's values by [`MAX_LINE_VALUES`]).
pub const BATCH_BYTES: usize = 1 << 20;

/// A batch ends after this many lines (or tasks), refused ones included.
pub const BATCH_LINES: usize = 1_000;

/// How an import body is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportFormat {
    /// One record per line.
    Jsonl,
    /// Label Studio's JSON export: an array of tasks.
    LabelStudio,
    /// CommuGraph's speech-act tags, one unit per line: the suggestions of the model the
    /// import names (see [`super::speechact`]).
    SpeechAct(SpeechActImport),
}

/// Why an import body cannot be imported at all (nothing of it is stored).
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// A JSONL body that is not UTF-8.
    #[error("body: not UTF-8 ({0})")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// A Label Studio body that is not JSON.
    #[error("body: not JSON: {0}")]
    NotJson(serde_json::Error),
    /// A Label Studio body that is JSON but no array.
    #[error("body: a Label Studio export is a JSON array of tasks")]
    NotAnArray,
    /// More JSONL lines than one import takes.
    #[error("body: {lines} records, more than the {MAX_IMPORT_LINES} one import takes")]
    TooManyLines {
        /// The body's lines, blank ones left out.
        lines: usize,
    },
    /// More Label Studio tasks than one import takes (not counted further).
    #[error(
        "body: more than the {MAX_IMPORT_LINES} records one import takes (the array was read \
         up to the task past the limit)"
    )]
    TooManyTasks,
}

/// Where one record is in the body, and what the answer calls it: its line number (from
/// 1) or its task index (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    name: usize,
    start: usize,
    end: usize,
}

/// An import body and where its records are. Holds the body (shared, not copied) and three
/// words per record.
#[derive(Debug)]
pub struct SplitBody {
    bytes: Bytes,
    format: ImportFormat,
    records: Vec<Record>,
}

/// The records of a batch, parsed, by line number (or task index), from record `from` of
/// the body up to record `next`.
#[derive(Debug)]
pub struct Batch {
    /// Each record's items, or why it is refused.
    pub records: Vec<(usize, Result<Vec<ImportItem>, Invalid>)>,
    /// The index of the first record after the batch (the body's length after the last).
    pub next: usize,
}

impl SplitBody {
    /// Splits `bytes` into records, refusing a body that cannot be read or holds more than
    /// [`MAX_IMPORT_LINES`] records. Parses no record.
    pub fn split(bytes: Bytes, format: ImportFormat) -> Result<SplitBody, BodyError> {
        let records = match format {
            ImportFormat::Jsonl | ImportFormat::SpeechAct(_) => jsonl_lines(&bytes)?,
            ImportFormat::LabelStudio => label_studio_tasks(&bytes)?,
        };
        Ok(SplitBody {
            bytes,
            format,
            records,
        })
    }

    /// How many records the body holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when the body holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The format.
    pub fn format(&self) -> &ImportFormat {
        &self.format
    }

    /// The line number (or task index) of record `index`.
    pub fn name_of(&self, index: usize) -> Option<usize> {
        self.records.get(index).map(|r| r.name)
    }

    /// Parses the records from index `from` on, until the batch holds [`BATCH_RECORDS`]
    /// records, [`BATCH_BYTES`] bytes of the body or [`BATCH_LINES`] lines (at least one
    /// line, whole: a line is never split between batches).
    pub fn batch(&self, from: usize) -> Batch {
        let mut records = Vec::new();
        let (mut items, mut bytes) = (0, 0);
        let mut next = from;
        for record in self.records.iter().skip(from) {
            let parsed = self.parse(record);
            items += parsed.as_ref().map_or(0, Vec::len);
            bytes += record.end - record.start;
            records.push((record.name, parsed));
            next += 1;
            if items >= BATCH_RECORDS || bytes >= BATCH_BYTES || records.len() >= BATCH_LINES {
                break;
            }
        }
        Batch { records, next }
    }

    /// One record's items: its values counted, then parsed, then its records counted.
    fn parse(&self, record: &Record) -> Result<Vec<ImportItem>, Invalid> {
        // Split on UTF-8 text (JSONL) or on what serde_json read as a borrowed `str`.
        let text = std::str::from_utf8(&self.bytes[record.start..record.end])
            .map_err(|e| invalid(self.field(), format!("not UTF-8 ({e})")))?;
        let what = match self.format {
            ImportFormat::Jsonl | ImportFormat::SpeechAct(_) => "the line".to_owned(),
            ImportFormat::LabelStudio => format!("task {}", record.name),
        };
        if self.format == ImportFormat::Jsonl && record.name == 1 && is_round_header_line(text) {
            // A round export's first line: the route stores the round; no labels here.
            return Ok(Vec::new());
        }
        if matches!(within_values(text, MAX_LINE_VALUES), Ok(false)) {
            return Err(invalid(
                self.field(),
                format!("{what} holds more than {MAX_LINE_VALUES} JSON values; it was not read"),
            ));
        }
        let items = match &self.format {
            ImportFormat::Jsonl => parse_jsonl_line(text)?,
            ImportFormat::LabelStudio => label_studio_task(record.name, text)?,
            ImportFormat::SpeechAct(import) => vec![parse_tagged_line(text, import)?],
        };
        check_records(self.field(), &what, items.len())?;
        Ok(items)
    }

    /// The field a refused record's answer names.
    fn field(&self) -> &'static str {
        match self.format {
            ImportFormat::Jsonl | ImportFormat::SpeechAct(_) => "line",
            ImportFormat::LabelStudio => "task",
        }
    }
}

/// The items of Label Studio task `index`, whose JSON is `text`; refused before they are
/// built when the task has more annotations than a line may hold records (each annotation
/// is at least one set).
fn label_studio_task(index: usize, text: &str) -> Result<Vec<ImportItem>, Invalid> {
    let task: Value =
        serde_json::from_str(text).map_err(|e| invalid("task", format!("task {index}: {e}")))?;
    let annotations = task
        .get("annotations")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    check_records("task", &format!("task {index}"), annotations)?;
    parse_task_at(index, &task).map_err(|message| invalid("task", message))
}

/// The non-blank lines of a JSONL body (a trailing `\r` left out), found with memchr;
/// refuses more than [`MAX_IMPORT_LINES`] (counting them all, for the message).
fn jsonl_lines(body: &[u8]) -> Result<Vec<Record>, BodyError> {
    let text = std::str::from_utf8(body)?;
    let mut records = Vec::new();
    let mut lines = 0;
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', body).chain(std::iter::once(body.len()));
    for (number, end) in ends.enumerate() {
        let line = text[start..end].trim_end_matches('\r');
        if !line.trim().is_empty() {
            lines += 1;
            if lines <= MAX_IMPORT_LINES {
                records.push(Record {
                    name: number + 1,
                    start,
                    end: start + line.len(),
                });
            }
        }
        start = end + 1;
    }
    if lines > MAX_IMPORT_LINES {
        return Err(BodyError::TooManyLines { lines });
    }
    Ok(records)
}

/// The tasks of a Label Studio export: the top-level array walked a task at a time, each
/// kept as its place in `body`; refuses the task past [`MAX_IMPORT_LINES`] without reading
/// further.
fn label_studio_tasks(body: &[u8]) -> Result<Vec<Record>, BodyError> {
    let too_many = Cell::new(false);
    let mut reader = serde_json::Deserializer::from_slice(body);
    let tasks = reader
        .deserialize_seq(TaskPlaces {
            body,
            too_many: &too_many,
        })
        .and_then(|tasks| reader.end().map(|()| tasks));
    match tasks {
        Ok(tasks) => Ok(tasks),
        Err(_) if too_many.get() => Err(BodyError::TooManyTasks),
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(BodyError::NotAnArray),
        Err(e) => Err(BodyError::NotJson(e)),
    }
}

/// Visits the top-level array of a Label Studio export: each task is read as a
/// `RawValue` (checked JSON, borrowed from the body, nothing built) and kept as its range.
struct TaskPlaces<'b> {
    body: &'b [u8],
    too_many: &'b Cell<bool>,
}

impl<'de> Visitor<'de> for TaskPlaces<'_> {
    type Value = Vec<Record>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array of tasks")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut tasks: A) -> Result<Vec<Record>, A::Error> {
        let mut places = Vec::new();
        while let Some(task) = tasks.next_element::<&'de RawValue>()? {
            if places.len() == MAX_IMPORT_LINES {
                self.too_many.set(true);
                return Err(de::Error::custom("too many tasks"));
            }
            // A borrowed `RawValue` is a slice of the body the reader was made from.
            let start = task.get().as_ptr() as usize - self.body.as_ptr() as usize;
            places.push(Record {
                name: places.len(),
                start,
                end: start + task.get().len(),
            });
        }
        Ok(places)
    }
}

/// Whether `text` holds at most `cap` JSON values (scalars, arrays and objects, nested
/// ones included), counted without building any; `Err` when it is not JSON (the parse that
/// follows says why).
pub(crate) fn within_values(text: &str, cap: usize) -> Result<bool, serde_json::Error> {
    let left = Cell::new(cap);
    let mut reader = serde_json::Deserializer::from_str(text);
    match (ValueCounter { left: &left }).deserialize(&mut reader) {
        Ok(()) => Ok(true),
        Err(e) if e.classify() == serde_json::error::Category::Data => Ok(false),
        Err(e) => Err(e),
    }
}

/// Counts the values it visits down from `left`, failing (a data error) past zero.
#[derive(Clone, Copy)]
struct ValueCounter<'c> {
    left: &'c Cell<usize>,
}

impl ValueCounter<'_> {
    fn take<E: de::Error>(self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(E::custom("too many values")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for ValueCounter<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueCounter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.take()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.take()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.take()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.take()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.take()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.take()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        self.take()?;
        while items.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        self.take()?;
        while entries.next_key::<IgnoredAny>()?.is_some() {
            entries.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::import::MAX_RECORDS_PER_LINE;
    use crate::labels::model::ImportKind;

    fn names(body: &SplitBody) -> Vec<usize> {
        body.records.iter().map(|r| r.name).collect()
    }

    #[test]
    fn jsonl_lines_are_numbered_from_one_and_blank_ones_skipped() {
        let body = Bytes::from_static(b"{\"a\":1}\r\n\n  \r\n{\"b\":2}\n\n{\"c\":3}");
        let split = SplitBody::split(body.clone(), ImportFormat::Jsonl).unwrap();
        assert_eq!(names(&split), [1, 4, 6]);
        let texts: Vec<&[u8]> = split.records.iter().map(|r| &body[r.start..r.end]).collect();
        assert_eq!(texts, [&b"{\"a\":1}"[..], b"{\"b\":2}", b"{\"c\":3}"]);
        assert!(matches!(
            SplitBody::split(Bytes::from_static(b"\xff\n"), ImportFormat::Jsonl),
            Err(BodyError::NotUtf8(_))
        ));
    }

    #[test]
    fn speech_act_tags_are_lines_each_one_suggestion_of_the_imports_model() {
        let import = SpeechActImport {
            model: "tagger".to_owned(),
            session_id: Some("s".to_owned()),
        };
        let body = Bytes::from_static(
            b"{\"event_id\":\"U:1\",\"speech_act\":{\"primary_type\":\"DIRECTIVE\"}}\n\n{\"event_id\":\"U:2\",\"speech_act\":{\"primary_type\":\"chat\"}}\n",
        );
        let split = SplitBody::split(body, ImportFormat::SpeechAct(import)).unwrap();
        assert_eq!(names(&split), [1, 3]);
        let batch = split.batch(0);
        let (line, first) = &batch.records[0];
        let first = first.as_ref().unwrap();
        assert_eq!((*line, first.len(), first[0].event_id.as_str()), (1, 1, "U:1"));
        assert!(matches!(&first[0].kind, ImportKind::Suggestion { model, .. } if model == "tagger"));
        let (line, second) = &batch.records[1];
        assert_eq!(
            (*line, second.as_ref().unwrap_err().field.as_str()),
            (3, "speech_act.primary_type")
        );
    }

    #[test]
    fn a_body_over_the_record_limit_is_refused_when_split() {
        let lines = Bytes::from("{}\n".repeat(MAX_IMPORT_LINES + 1));
        let refused = SplitBody::split(lines, ImportFormat::Jsonl).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "body: {} records, more than the {MAX_IMPORT_LINES} one import takes",
                MAX_IMPORT_LINES + 1
            )
        );
        let at_limit = Bytes::from("{}\n\n".repeat(MAX_IMPORT_LINES));
        assert_eq!(
            SplitBody::split(at_limit, ImportFormat::Jsonl).unwrap().len(),
            MAX_IMPORT_LINES
        );
        let tasks = Bytes::from(format!("[{}{{}}]", "{},".repeat(MAX_IMPORT_LINES)));
        let refused = SplitBody::split(tasks, ImportFormat::LabelStudio).unwrap_err();
        assert!(matches!(refused, BodyError::TooManyTasks));
        let tasks = Bytes::from(format!("[{}{{}}]", "{},".repeat(MAX_IMPORT_LINES - 1)));
        assert_eq!(
            SplitBody::split(tasks, ImportFormat::LabelStudio).unwrap().len(),
            MAX_IMPORT_LINES
        );
    }

    #[test]
    fn label_studio_tasks_are_their_places_in_the_array() {
        let body = Bytes::from_static(b" [ {\"id\": 1} ,\n{\"data\": {\"x\": [1, 2]}}, 3 ] ");
        let split = SplitBody::split(body.clone(), ImportFormat::LabelStudio).unwrap();
        assert_eq!(names(&split), [0, 1, 2]);
        let texts: Vec<&[u8]> = split.records.iter().map(|r| &body[r.start..r.end]).collect();
        assert_eq!(texts, [&b"{\"id\": 1}"[..], b"{\"data\": {\"x\": [1, 2]}}", b"3"]);
        for (body, refusal) in [
            (&b"{}"[..], "body: a Label Studio export is a JSON array of tasks"),
            (
                b"[{}",
                "body: not JSON: EOF while parsing a list at line 1 column 3",
            ),
            (b"[] []", "body: not JSON: trailing characters at line 1 column 4"),
            (b"x", "body: not JSON: expected value at line 1 column 1"),
        ] {
            let refused = SplitBody::split(Bytes::from_static(body), ImportFormat::LabelStudio).unwrap_err();
            assert_eq!(refused.to_string(), refusal);
        }
    }

    #[test]
    fn values_are_counted_without_building_them() {
        let object = r#"{"a": [1, {"b": null}], "c": "x"}"#;
        assert!(matches!(within_values(object, 6), Ok(true)));
        assert!(matches!(within_values(object, 5), Ok(false)));
        assert!(matches!(within_values("[]", 1), Ok(true)));
        assert!(within_values("[1,", 10).is_err());
    }

    #[test]
    fn a_batch_ends_at_its_record_byte_or_line_bound_and_never_splits_a_line() {
        let set = r#"{"session_id":"s","event_id":"e","annotator":"a","labels":[]}"#;
        let body = Bytes::from(format!("{set}\n").repeat(BATCH_RECORDS + 10));
        let split = SplitBody::split(body, ImportFormat::Jsonl).unwrap();
        let first = split.batch(0);
        assert_eq!((first.records.len(), first.next), (BATCH_RECORDS, BATCH_RECORDS));
        let second = split.batch(first.next);
        assert_eq!(
            (second.records[0].0, second.next),
            (BATCH_RECORDS + 1, BATCH_RECORDS + 10)
        );

        let refused = Bytes::from("{\n".repeat(BATCH_LINES + 1));
        let split = SplitBody::split(refused, ImportFormat::Jsonl).unwrap();
        assert_eq!(split.batch(0).next, BATCH_LINES, "refused lines count as lines");

        let note = "n".repeat(BATCH_BYTES / 2);
        let long =
            format!(r#"{{"session_id":"s","event_id":"e","annotator":"a","labels":[],"note":"{note}"}}"#);
        let split =
            SplitBody::split(Bytes::from(format!("{long}\n").repeat(3)), ImportFormat::Jsonl).unwrap();
        assert_eq!(split.batch(0).next, 2, "a batch ends past its bytes");

        let exported: Vec<String> = (0..BATCH_RECORDS + 1)
            .map(|i| format!(r#"{{"annotator":"a{i}"}}"#))
            .collect();
        let line = format!(
            r#"{{"session_id":"s","event_id":"e","annotations":[{}]}}"#,
            exported.join(",")
        );
        let split = SplitBody::split(Bytes::from(format!("{line}\n{line}\n")), ImportFormat::Jsonl).unwrap();
        let batch = split.batch(0);
        assert_eq!(batch.next, 1, "one line, whole, past the records bound");
        assert_eq!(batch.records[0].1.as_ref().map(Vec::len), Ok(BATCH_RECORDS + 1));
    }

    #[test]
    fn a_line_past_its_values_or_records_is_refused_as_a_line() {
        let values = format!(
            r#"{{"session_id":"s","event_id":"e","labels":[{}0]}}"#,
            "0,".repeat(MAX_LINE_VALUES)
        );
        let sets: Vec<String> = (0..=MAX_RECORDS_PER_LINE)
            .map(|i| format!(r#"{{"annotator":"a{i}"}}"#))
            .collect();
        let records = format!(
            r#"{{"session_id":"s","event_id":"e","annotations":[{}]}}"#,
            sets.join(",")
        );
        let split =
            SplitBody::split(Bytes::from(format!("{values}\n{records}\n")), ImportFormat::Jsonl).unwrap();
        let batch = split.batch(0);
        let refused: Vec<&Invalid> = batch
            .records
            .iter()
            .map(|(_, r)| r.as_ref().unwrap_err())
            .collect();
        assert_eq!(refused[0].field, "line");
        assert!(
            refused[0].message.contains("more than 200000 JSON values"),
            "{}",
            refused[0]
        );
        assert_eq!(refused[1].field, "line");
        assert!(
            refused[1].message.contains("1001 records, more than the 1000"),
            "{}",
            refused[1]
        );

        let task = format!(
            r#"[{{"data":{{"session_id":"s","event_id":"e"}},"x":[{}0]}}]"#,
            "0,".repeat(MAX_LINE_VALUES)
        );
        let split = SplitBody::split(Bytes::from(task), ImportFormat::LabelStudio).unwrap();
        let refused = split.batch(0).records.remove(0).1.unwrap_err();
        assert_eq!(refused.field, "task");
        assert!(refused.message.starts_with("task 0 holds more than"), "{refused}");

        // Each annotation is at least one set: too many are refused before any is read.
        let annotations = vec![r#"{"completed_by":1,"result":[]}"#; MAX_RECORDS_PER_LINE + 1];
        let task = format!(
            r#"[{{"data":{{"session_id":"s","event_id":"e"}},"annotations":[{}]}}]"#,
            annotations.join(",")
        );
        let split = SplitBody::split(Bytes::from(task), ImportFormat::LabelStudio).unwrap();
        let refused = split.batch(0).records.remove(0).1.unwrap_err();
        assert_eq!(refused.field, "task");
        assert!(
            refused.message.starts_with("task 0 holds at least 1001 records"),
            "{refused}"
        );
    }
}
