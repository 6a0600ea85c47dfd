//! Parsing: each framed line into zero or more typed records.
//!
//! A line normally holds one JSON object. Real logs also hold a truncated last line (the
//! writer was still appending), two records glued together (a write lost its newline), a
//! truncated record followed by a complete one, and strings cut in the middle of a UTF-16
//! surrogate pair. Each is repaired where the data allows and recorded; a line that cannot
//! be read becomes a [`LineError`] and the lines after it still load.

use rayon::prelude::*;
use serde_json::Deserializer;

use super::frame::{self, Line};
use super::records::{Position, Record, WireRecord};

/// Why a line gave no record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line is valid JSON but not an object.
    #[error("not a JSON object: found {0}")]
    NotAnObject(&'static str),
    /// The line ends inside a record.
    #[error("truncated record (the line ends inside it)")]
    Truncated,
    /// Any other JSON syntax or encoding error.
    #[error("invalid JSON: {0}")]
    Invalid(String),
}

/// How a line was read.
#[derive(Default)]
pub(crate) struct LineRecords {
    /// The records found, in line order.
    pub(crate) records: Vec<WireRecord>,
    /// Set when the line needed a repair to be read; says which.
    pub(crate) repair: Option<&'static str>,
}

/// Reads one line. At most one repair is applied per line, and only when the plain parse
/// fails, so well-formed input pays nothing for them.
pub(crate) fn parse_line(bytes: &[u8]) -> Result<LineRecords, LineError> {
    let error = match parse_objects(bytes) {
        Ok(records) if records.len() > 1 => {
            return Ok(LineRecords {
                records,
                repair: Some("two or more records glued on one line"),
            })
        }
        Ok(records) => {
            return Ok(LineRecords {
                records,
                repair: None,
            })
        }
        Err(e) => e,
    };
    if let LineError::NotAnObject(_) = error {
        return Err(error);
    }
    if let LineError::Invalid(message) = &error {
        if message.starts_with("duplicate field") {
            if let Some(records) = keep_last_duplicate(bytes) {
                return Ok(LineRecords {
                    records,
                    repair: Some("duplicate keys: the last value of each was kept, as JSON.parse does"),
                });
            }
        }
    }
    if std::str::from_utf8(bytes).is_err() {
        let fixed = String::from_utf8_lossy(bytes).into_owned();
        if let Ok(records) = parse_objects(fixed.as_bytes()) {
            return Ok(LineRecords {
                records,
                repair: Some("invalid UTF-8 replaced with U+FFFD"),
            });
        }
    }
    if let Some(fixed) = replace_lone_surrogates(bytes) {
        if let Ok(records) = parse_objects(&fixed) {
            return Ok(LineRecords {
                records,
                repair: Some("lone UTF-16 surrogate escape replaced with U+FFFD"),
            });
        }
    }
    if let Some(records) = recover_glued_tail(bytes) {
        return Ok(LineRecords {
            records,
            repair: Some("truncated record glued to a complete one; the complete one was kept"),
        });
    }
    Err(error)
}

/// Parses every JSON object on the line; fails on the first problem.
fn parse_objects(bytes: &[u8]) -> Result<Vec<WireRecord>, LineError> {
    match bytes.first() {
        Some(b'{') => {}
        Some(b'[') => return Err(LineError::NotAnObject("an array")),
        Some(b'"') => return Err(LineError::NotAnObject("a string")),
        Some(b't' | b'f') if is_json(bytes) => return Err(LineError::NotAnObject("a boolean")),
        Some(b'n') if is_json(bytes) => return Err(LineError::NotAnObject("null")),
        Some(b'-' | b'0'..=b'9') if is_json(bytes) => return Err(LineError::NotAnObject("a number")),
        _ => {}
    }
    let mut records = Vec::with_capacity(1);
    for item in Deserializer::from_slice(bytes).into_iter::<WireRecord>() {
        match item {
            Ok(r) => records.push(r),
            Err(e) if e.is_eof() => return Err(LineError::Truncated),
            Err(e) => return Err(LineError::Invalid(e.to_string())),
        }
    }
    Ok(records)
}

fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// Reads an object with repeated keys as JavaScript's `JSON.parse` does: the last value of
/// each key wins. The typed reader refuses repeated fields, so the line goes through a
/// generic value (which keeps the last) and back.
fn keep_last_duplicate(bytes: &[u8]) -> Option<Vec<WireRecord>> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let rewritten = serde_json::to_vec(&value).ok()?;
    parse_objects(&rewritten).ok()
}

/// How many start positions [`recover_glued_tail`] tries before giving up.
const GLUE_CANDIDATES: usize = 8;

/// For `{"a":"trunc{"b":1}`: finds the last complete record(s) at the end of the line. Tries
/// the `{"` positions nearest the end first.
fn recover_glued_tail(bytes: &[u8]) -> Option<Vec<WireRecord>> {
    let starts = memchr::memmem::find_iter(bytes, b"{\"").filter(|&p| p > 0);
    let starts: Vec<usize> = starts.collect();
    starts.iter().rev().take(GLUE_CANDIDATES).rev().find_map(|&p| {
        parse_objects(&bytes[p..])
            .ok()
            .filter(|r| !r.is_empty() && r.iter().all(WireRecord::looks_like_top_level))
    })
}

/// Rewrites `\uD800`..`\uDFFF` escapes that are not part of a valid pair to `\uFFFD`.
/// Returns `None` when there is nothing to rewrite.
fn replace_lone_surrogates(bytes: &[u8]) -> Option<Vec<u8>> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            if bytes[i + 1] != b'u' {
                out.extend_from_slice(&bytes[i..i + 2]);
                i += 2;
                continue;
            }
            if let Some(unit) = hex4(&bytes[i + 2..]) {
                let is_high = (0xD800..0xDC00).contains(&unit);
                let is_low = (0xDC00..0xE000).contains(&unit);
                let next_low = bytes.get(i + 6..i + 8) == Some(b"\\u")
                    && hex4(&bytes[i + 8..]).is_some_and(|u| (0xDC00..0xE000).contains(&u));
                if is_high && next_low {
                    out.extend_from_slice(&bytes[i..i + 12]);
                    i += 12;
                    continue;
                }
                if is_high || is_low {
                    out.extend_from_slice(b"\\uFFFD");
                    changed = true;
                    i += 6;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    changed.then_some(out)
}

/// A line that gave no record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based physical line number.
    pub line: u32,
    /// Why.
    pub error: LineError,
    /// True when it is the file's last line and has no newline (still being written).
    pub unterminated: bool,
}

/// A line that was read after a repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedLine {
    /// 1-based physical line number.
    pub line: u32,
    /// Which repair.
    pub repair: &'static str,
}

/// The result of reading one file.
#[derive(Default)]
pub struct ParsedFile {
    /// The records, in file order.
    pub records: Vec<Record>,
    /// Non-blank lines seen.
    pub lines: usize,
    /// Lines that gave no record.
    pub bad_lines: Vec<BadLine>,
    /// Lines read after a repair.
    pub repaired: Vec<RepairedLine>,
}

/// Lines handed to one parallel task at a time: enough to amortise the scheduling, few
/// enough that a session of a few hundred lines still uses every core.
const LINES_PER_TASK: usize = 64;

/// How one line was read, before it is put in file order.
type LineOutcome = Result<(Vec<Record>, Option<&'static str>), LineError>;

/// Reads every line of `data`, which is file number `file` of its session.
///
/// Lines are parsed in parallel (they are independent) and assembled in file order, so the
/// result is the same as a sequential read.
pub fn parse_file(file: u32, data: &[u8]) -> ParsedFile {
    let lines: Vec<Line<'_>> = frame::lines(data).collect();
    let outcomes: Vec<LineOutcome> = lines
        .par_iter()
        .with_min_len(LINES_PER_TASK)
        .map(|line| {
            parse_line(line.bytes).map(|LineRecords { records, repair }| {
                let records = records
                    .into_iter()
                    .enumerate()
                    .map(|(seq, wire)| {
                        let pos = Position {
                            file,
                            line: line.number,
                            seq: seq as u32,
                        };
                        Record::from_wire(wire, pos)
                    })
                    .collect();
                (records, repair)
            })
        })
        .collect();

    let mut out = ParsedFile {
        records: Vec::with_capacity(outcomes.len()),
        lines: lines.len(),
        ..ParsedFile::default()
    };
    for (line, outcome) in lines.iter().zip(outcomes) {
        match outcome {
            Ok((records, repair)) => {
                if let Some(repair) = repair {
                    out.repaired.push(RepairedLine {
                        line: line.number,
                        repair,
                    });
                }
                out.records.extend(records);
            }
            Err(error) => out.bad_lines.push(BadLine {
                line: line.number,
                error,
                unterminated: !line.terminated,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(line: &str) -> Result<(usize, Option<&'static str>), LineError> {
        parse_line(line.as_bytes()).map(|r| (r.records.len(), r.repair))
    }

    #[test]
    fn reads_one_object() {
        assert_eq!(kinds(r#"{"type":"user"}"#), Ok((1, None)));
    }

    #[test]
    fn non_objects_are_named() {
        assert_eq!(kinds("[1,2]"), Err(LineError::NotAnObject("an array")));
        assert_eq!(kinds("42"), Err(LineError::NotAnObject("a number")));
        assert_eq!(kinds("null"), Err(LineError::NotAnObject("null")));
        assert_eq!(kinds(r#""x""#), Err(LineError::NotAnObject("a string")));
        assert_eq!(kinds("true"), Err(LineError::NotAnObject("a boolean")));
    }

    #[test]
    fn truncated_records_are_told_apart_from_garbage() {
        assert_eq!(kinds(r#"{"type":"us"#), Err(LineError::Truncated));
        assert!(matches!(kinds("{not json"), Err(LineError::Invalid(_))));
        assert!(matches!(kinds("nope"), Err(LineError::Invalid(_))));
    }

    #[test]
    fn glued_records_are_both_kept() {
        let (n, repair) = kinds(r#"{"uuid":"a"}{"uuid":"b"}"#).unwrap();
        assert_eq!(n, 2);
        assert!(repair.unwrap().contains("glued"));
    }

    #[test]
    fn a_truncated_record_glued_to_a_complete_one_keeps_the_complete_one() {
        let line = r#"{"uuid":"a","message":{"content":"cut her{"uuid":"b","type":"user"}"#;
        let got = parse_line(line.as_bytes()).unwrap();
        assert_eq!(got.records.len(), 1);
        let rec = Record::from_wire(got.records.into_iter().next().unwrap(), Position::default());
        assert_eq!(rec.uuid.as_deref(), Some("b"));
    }

    #[test]
    fn an_object_nested_in_a_truncated_record_is_not_taken_for_a_record() {
        let line = r#"{"type":"user","uuid":"a","message":{"content":[{"type":"text","text":"x"}]"#;
        assert_eq!(kinds(line), Err(LineError::Truncated));
    }

    #[test]
    fn lone_surrogates_are_replaced() {
        let line = r#"{"uuid":"a","content":"x\ud83d y \udc00 ok \ud83d\ude00"}"#;
        let got = parse_line(line.as_bytes()).unwrap();
        assert!(got.repair.unwrap().contains("surrogate"));
        let rec = Record::from_wire(got.records.into_iter().next().unwrap(), Position::default());
        assert_eq!(rec.content.as_deref(), Some("x\u{FFFD} y \u{FFFD} ok 😀"));
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let line = r#"{"uuid":"a","uuid":"b","message":{"content":"one","content":"two"}}"#;
        let got = parse_line(line.as_bytes()).unwrap();
        assert!(got.repair.unwrap().contains("duplicate keys"));
        let rec = Record::from_wire(got.records.into_iter().next().unwrap(), Position::default());
        assert_eq!(rec.uuid.as_deref(), Some("b"));
        assert_eq!(
            rec.message.map(|m| m.content),
            Some(crate::core::records::Content::Text("two".into()))
        );
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let line = b"{\"uuid\":\"a\",\"content\":\"x\xff\"}";
        let got = parse_line(line).unwrap();
        assert!(got.repair.unwrap().contains("UTF-8"));
    }

    #[test]
    fn deep_nesting_never_overflows_the_stack() {
        // Skipped fields are skipped iteratively: the record loads.
        let ignored = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(kinds(&ignored), Ok((1, None)));
        // So are unexpected shapes inside the fields that are read.
        let read = format!(
            "{{\"message\":{{\"content\":[{{\"type\":\"tool_use\",\"input\":{}{}}}]}}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(kinds(&read), Ok((1, None)));
    }

    #[test]
    fn parse_file_keeps_going_after_a_bad_line() {
        let data = b"{\"uuid\":\"a\"}\n{oops\n\n{\"uuid\":\"b\"}\n{\"uuid\":\"c\"";
        let parsed = parse_file(0, data);
        let uuids: Vec<_> = parsed.records.iter().map(|r| r.uuid.clone().unwrap()).collect();
        assert_eq!(uuids, ["a", "b"]);
        assert_eq!(parsed.lines, 4);
        assert_eq!(parsed.bad_lines.len(), 2);
        assert_eq!(parsed.bad_lines[0].line, 2);
        assert!(!parsed.bad_lines[0].unterminated);
        assert_eq!(parsed.bad_lines[1].line, 5);
        assert_eq!(parsed.bad_lines[1].error, LineError::Truncated);
        assert!(parsed.bad_lines[1].unterminated);
    }
}
