//! Parsing: each framed line into zero or more typed records.
//!
//! A line normally holds one JSON object. Real logs also hold a truncated last line (the
//! writer was still appending), two records glued together (a write lost its newline), a
//! truncated record followed by a complete one, and strings cut in the middle of a UTF-16
//! surrogate pair. Each is repaired where the data allows and recorded; a line that cannot
//! be read becomes a [`LineError`] and the lines after it still load.

use bytes::Bytes;
use std::ops::Range;
use std::sync::Arc;

use bytestring::ByteString;
use rayon::prelude::*;
use serde_json::Deserializer;

use super::cost::fixed_cost;
use super::records::{LineBuffer, Position, Record, RepeatedIds, WireRecord};
use crate::diagnostics::{Samples, TypeCounts};
use crate::json::frame;
use crate::json::raw::TextBuffer;
use crate::memory_bound::RecordBudget;

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
    /// The line is longer than 4 GiB; it is not read (a record's texts are spans of 32-bit
    /// lengths).
    #[error("a line of {0} bytes, longer than the 4 GiB a record's text can be")]
    TooLong(usize),
}

impl LineError {
    /// Why the line `bytes` did not read as one JSON object, given serde's error `e`: not an
    /// object at all, cut short, or otherwise invalid. (Formats read a line as one object
    /// whose fields they pick; Claude Code's reader tells the kind of value apart itself.)
    pub fn of_object_line(bytes: &[u8], e: &serde_json::Error) -> LineError {
        if bytes.first() != Some(&b'{') {
            LineError::Invalid("not a JSON object".to_owned())
        } else if e.is_eof() {
            LineError::Truncated
        } else {
            LineError::Invalid(e.to_string())
        }
    }
}

/// The longest line read. A record's texts are spans with 32-bit lengths: a text longer
/// than 4 GiB, which only a longer line can hold, could not be kept.
const MAX_LINE_BYTES: usize = u32::MAX as usize;

/// [`LineError::TooLong`] for a line of `len` bytes past [`MAX_LINE_BYTES`].
pub(crate) fn check_line_length(len: usize) -> Result<(), LineError> {
    if len > MAX_LINE_BYTES {
        Err(LineError::TooLong(len))
    } else {
        Ok(())
    }
}

/// A record read from a line, with what the file's counts need to know of it.
pub(crate) struct LineRecord {
    /// The record (its position is the caller's to set).
    pub(crate) record: Record,
    /// No view shows it and no record can name it as its parent: it is only counted.
    pub(crate) inert: bool,
}

/// How a line was read.
#[derive(Default)]
pub(crate) struct LineRecords {
    /// The records found, in line order.
    pub(crate) records: Vec<LineRecord>,
    /// Set when the line needed a repair to be read; says which.
    pub(crate) repair: Option<&'static str>,
}

/// Reads one line, a copy of `bytes` (for tests).
#[cfg(test)]
pub(crate) fn parse_line(bytes: &[u8]) -> Result<LineRecords, LineError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let buffer = Arc::new(ByteString::from(text));
            parse_line_in(&buffer, &buffer)
        }
        Err(_) => parse_invalid_utf8(bytes),
    }
}

/// Reads a line that is not valid UTF-8. The bytes that are not may lie in a field no view
/// reads, which the reader skips without looking: such a line reads as it is (its texts
/// are valid), from a copy with the bad bytes replaced. Otherwise it is repaired.
fn parse_invalid_utf8(bytes: &[u8]) -> Result<LineRecords, LineError> {
    if let Err(error) = parse_objects_slice(bytes) {
        return repair_line(bytes, error);
    }
    let buffer = Arc::new(ByteString::from(String::from_utf8_lossy(bytes).into_owned()));
    let copies = LineBuffer {
        bytes: &buffer,
        line: &buffer,
        shared: false,
    };
    match read_objects(&buffer, copies) {
        Ok(records) => Ok(LineRecords {
            repair: (records.len() > 1).then_some("two or more records glued on one line"),
            records,
        }),
        Err(error) => repair_line(bytes, error),
    }
}

/// Reads `line`, which lies in `buffer` (an input buffer the records keep slices of). At
/// most one repair is applied per line, and only when the plain parse fails, so
/// well-formed input pays nothing for them.
fn parse_line_in(buffer: &TextBuffer, line: &str) -> Result<LineRecords, LineError> {
    let shared = LineBuffer {
        bytes: buffer,
        line,
        shared: true,
    };
    match read_objects(line, shared) {
        Ok(records) => Ok(LineRecords {
            repair: (records.len() > 1).then_some("two or more records glued on one line"),
            records,
        }),
        Err(error) => repair_line(line.as_bytes(), error),
    }
}

/// Reads a line that did not read as it is (`error` says why): tries each repair in turn,
/// and gives the first error when none applies.
fn repair_line(bytes: &[u8], error: LineError) -> Result<LineRecords, LineError> {
    if let LineError::NotAnObject(_) = error {
        return Err(error);
    }
    let repaired = |repair: &'static str, fixed: String| -> Option<LineRecords> {
        let buffer = Arc::new(ByteString::from(fixed));
        let copies = LineBuffer {
            bytes: &buffer,
            line: &buffer,
            shared: false,
        };
        read_objects(&buffer, copies).ok().map(|records| LineRecords {
            records,
            repair: Some(repair),
        })
    };
    if let LineError::Invalid(message) = &error {
        if message.starts_with("duplicate field") {
            if let Some(fixed) = keep_last_duplicate(bytes) {
                if let Some(read) = repaired(
                    "duplicate keys: the last value of each was kept, as JSON.parse does",
                    fixed,
                ) {
                    return Ok(read);
                }
            }
        }
    }
    if std::str::from_utf8(bytes).is_err() {
        let fixed = String::from_utf8_lossy(bytes).into_owned();
        if let Some(read) = repaired("invalid UTF-8 replaced with U+FFFD", fixed) {
            return Ok(read);
        }
    }
    if let Some(fixed) = replace_lone_surrogates(bytes).and_then(|f| String::from_utf8(f).ok()) {
        if let Some(read) = repaired("lone UTF-16 surrogate escape replaced with U+FFFD", fixed) {
            return Ok(read);
        }
    }
    if let Some(read) = recover_glued_tail(bytes) {
        return Ok(read);
    }
    Err(error)
}

/// Every JSON object on `line` (which lies in `buffer`), as records; fails on the first
/// problem.
///
/// Each record is given its own bytes of the line to find its decoded strings in: given the
/// whole line, every record glued on it searched all of it, quadratic in the line's length.
fn read_objects(line: &str, buffer: LineBuffer<'_>) -> Result<Vec<LineRecord>, LineError> {
    parse_objects(line)?
        .into_iter()
        .map(|(wire, span)| {
            let inert = wire.is_inert();
            let own = LineBuffer {
                line: line.get(span).unwrap_or(line),
                ..buffer
            };
            Record::from_wire(wire, Position::default(), own)
                .map(|record| LineRecord { record, inert })
                .map_err(|_| LineError::Invalid("lone UTF-16 surrogate escape".to_owned()))
        })
        .collect()
}

/// Tells a line that is JSON but no object, by its first byte.
fn not_an_object(bytes: &[u8]) -> Result<(), LineError> {
    match bytes.first() {
        Some(b'[') => Err(LineError::NotAnObject("an array")),
        Some(b'"') => Err(LineError::NotAnObject("a string")),
        Some(b't' | b'f') if is_json(bytes) => Err(LineError::NotAnObject("a boolean")),
        Some(b'n') if is_json(bytes) => Err(LineError::NotAnObject("null")),
        Some(b'-' | b'0'..=b'9') if is_json(bytes) => Err(LineError::NotAnObject("a number")),
        _ => Ok(()),
    }
}

/// The reader's error for a problem it met.
fn line_error(e: serde_json::Error) -> LineError {
    if e.is_eof() {
        LineError::Truncated
    } else {
        LineError::Invalid(e.to_string())
    }
}

/// Parses every JSON object on the line, each with the bytes of the line it was read from
/// (whitespace before it included); fails on the first problem.
fn parse_objects(line: &str) -> Result<Vec<(WireRecord<'_>, Range<usize>)>, LineError> {
    not_an_object(line.as_bytes())?;
    let mut records = Vec::with_capacity(1);
    let mut objects = Deserializer::from_str(line).into_iter::<WireRecord<'_>>();
    let mut start = 0;
    while let Some(item) = objects.next() {
        let end = objects.byte_offset();
        records.push((item.map_err(line_error)?, start..end));
        start = end;
    }
    Ok(records)
}

/// [`parse_objects`] on bytes that may not be UTF-8, for its error only.
fn parse_objects_slice(bytes: &[u8]) -> Result<(), LineError> {
    not_an_object(bytes)?;
    for item in Deserializer::from_slice(bytes).into_iter::<WireRecord<'_>>() {
        item.map_err(line_error)?;
    }
    Ok(())
}

fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// Reads an object with repeated keys as JavaScript's `JSON.parse` does: the last value of
/// each key wins. The typed reader refuses repeated fields, so the line goes through a
/// generic value (which keeps the last) and back.
fn keep_last_duplicate(bytes: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    serde_json::to_string(&value).ok()
}

/// How many start positions [`recover_glued_tail`] tries before giving up.
const GLUE_CANDIDATES: usize = 8;

/// For `{"a":"trunc{"b":1}`: finds the last complete record(s) at the end of the line. Tries
/// the `{"` positions nearest the end first.
fn recover_glued_tail(bytes: &[u8]) -> Option<LineRecords> {
    let starts = memchr::memmem::find_iter(bytes, b"{\"").filter(|&p| p > 0);
    let starts: Vec<usize> = starts.collect();
    starts.iter().rev().take(GLUE_CANDIDATES).rev().find_map(|&p| {
        let tail = std::str::from_utf8(&bytes[p..]).ok()?;
        let wires = parse_objects(tail).ok()?;
        if wires.is_empty() || !wires.iter().all(|(wire, _)| wire.looks_like_top_level()) {
            return None;
        }
        let buffer = Arc::new(ByteString::from(tail));
        let records = read_objects(
            &buffer,
            LineBuffer {
                bytes: &buffer,
                line: &buffer,
                shared: false,
            },
        )
        .ok()?;
        Some(LineRecords {
            records,
            repair: Some("truncated record glued to a complete one; the complete one was kept"),
        })
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

/// What a file says about itself in its first records: the first `sessionId` and
/// `agentId` written, whichever record carries them (a snapshot or queue entry included).
/// Linking ties sub-agent logs to sessions with these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileIdentity {
    /// The first `sessionId` of the file (possibly empty).
    pub session_id: Option<String>,
    /// The first non-empty `sessionId` of the file.
    pub nonempty_session_id: Option<String>,
    /// The first `agentId` of the file.
    pub agent_id: Option<String>,
}

impl FileIdentity {
    /// Takes what `session_id` and `agent_id` add to what is known (earlier values win).
    pub fn observe(&mut self, session_id: Option<&str>, agent_id: Option<&str>) {
        if let (None, Some(s)) = (&self.session_id, session_id) {
            self.session_id = Some(s.to_owned());
        }
        if let (None, Some(s)) = (&self.nonempty_session_id, session_id.filter(|s| !s.is_empty())) {
            self.nonempty_session_id = Some(s.to_owned());
        }
        if let (None, Some(a)) = (&self.agent_id, agent_id) {
            self.agent_id = Some(a.to_owned());
        }
    }

    /// Fills what is still unknown from `later` (a later part of the same file).
    fn follow(&mut self, later: FileIdentity) {
        self.session_id = self.session_id.take().or(later.session_id);
        self.nonempty_session_id = self.nonempty_session_id.take().or(later.nonempty_session_id);
        self.agent_id = self.agent_id.take().or(later.agent_id);
    }
}

/// The result of reading one file.
///
/// Memory is bounded by what the file holds: a line whose object is no conversational
/// record and has no uuid (a snapshot, a queue entry, `{}`) can be no view's content and
/// no record's parent, so it is counted (its type, and the ids it names in
/// [`ParsedFile::identity`]) and not kept; bad and repaired lines keep a count and their
/// first [`SAMPLE_LIMIT`](crate::diagnostics::SAMPLE_LIMIT) examples.
#[derive(Default)]
pub struct ParsedFile {
    /// The records kept, in file order.
    pub records: Vec<Record>,
    /// Records read, the ones counted and not kept included (a glued line gives two).
    pub records_read: usize,
    /// Non-blank lines seen.
    pub lines: usize,
    /// Lines that gave no record.
    pub bad_lines: Samples<BadLine>,
    /// Lines read after a repair.
    pub repaired: Samples<RepairedLine>,
    /// Records read, by `type`.
    pub types: TypeCounts,
    /// The file's first `sessionId` and `agentId`.
    pub identity: FileIdentity,
    /// The [`fixed_cost`] of the records kept, not yet charged to the reading's budget.
    uncharged: usize,
    /// The ids of the records kept last, shared with the next ones.
    repeated: RepeatedIds,
}

impl ParsedFile {
    /// Notes the session and agent ids of every record kept (for a reader that made its
    /// records all at once, not through [`ParsedFile::take`]).
    pub(crate) fn observe_identities(&mut self) {
        for r in &self.records {
            self.identity
                .observe(r.session_id.as_deref(), r.agent_id.as_deref());
        }
    }

    /// Counts every record kept as read, by its kind, and notes their ids: the tally of a
    /// reader whose records are one per entry it read.
    pub(crate) fn count_kept_records(&mut self) {
        self.records_read = self.records.len();
        for r in &self.records {
            self.types.count(r.kind.name());
        }
        self.observe_identities();
    }

    /// Takes a record read at `pos`: keeps it, or only counts it when it is inert.
    fn take(&mut self, read: LineRecord, pos: Position) {
        let LineRecord { mut record, inert } = read;
        self.records_read += 1;
        self.types.count(record.kind.name());
        self.identity
            .observe(record.session_id.as_deref(), record.agent_id.as_deref());
        if !inert {
            record.pos = pos;
            self.repeated.share(&mut record);
            self.uncharged += fixed_cost(&record);
            self.records.push(record);
        }
    }

    /// Adds what `later`, the next part of the same file, counted (its line numbers start
    /// after `lines_before` physical lines); its records are the caller's to move.
    fn append_counts(&mut self, later: ParsedFile, lines_before: u32) {
        debug_assert!(later.records.is_empty(), "records are moved by the caller");
        self.records_read += later.records_read;
        self.lines += later.lines;
        self.bad_lines.absorb(later.bad_lines, |mut b| {
            b.line = b.line.saturating_add(lines_before);
            b
        });
        self.repaired.absorb(later.repaired, |mut r| {
            r.line = r.line.saturating_add(lines_before);
            r
        });
        self.types.absorb(later.types);
        self.identity.follow(later.identity);
    }
}

/// Bytes of a file handed to one parallel task: large enough to amortise the scheduling,
/// small enough that a session of a few hundred kilobytes still uses every core, and that
/// no per-line structure is ever held for the whole file.
const SEGMENT_BYTES: usize = 128 * 1024;

/// Reads every line of `data`, which is file number `file` of its session (a copy of it is
/// what the records keep slices of; [`parse_file_within`] shares the caller's buffer).
///
/// The file is cut at line ends into segments of about `SEGMENT_BYTES`, which are
/// parsed in parallel and joined in file order: the result is the same as a sequential
/// read.
pub fn parse_file(file: u32, data: &[u8]) -> ParsedFile {
    parse_file_within(file, &Bytes::copy_from_slice(data), &RecordBudget::unbounded())
}

/// [`parse_file`] of `data` itself (its records keep slices of it), charging the records
/// kept to `budget`: once it is exhausted (by this file or another read at the same time)
/// the segments not yet read are skipped, and the result is incomplete (the caller refuses
/// the session).
pub fn parse_file_within(file: u32, data: &Bytes, budget: &RecordBudget) -> ParsedFile {
    let (mut parsed, parts) = parse_file_parts(file, data, budget);
    parsed.records = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for mut part in parts {
        parsed.records.append(&mut part);
    }
    parsed
}

/// [`parse_file_within`], with the records left in the parts they were read in (in file
/// order; the result's own `records` is empty): a caller joining several files moves each
/// record once, into its own vector, instead of once per file and once more.
pub fn parse_file_parts(file: u32, data: &Bytes, budget: &RecordBudget) -> (ParsedFile, Vec<Vec<Record>>) {
    let segments = segment_bounds(data);
    let parsed: Vec<(ParsedFile, u32)> = segments
        .par_iter()
        .enumerate()
        .map(|(i, &(start, end))| {
            if budget.is_exhausted() {
                return (ParsedFile::default(), 0);
            }
            let (mut part, lines) = parse_segment(file, data.slice(start..end), i == 0, budget);
            budget.charge(std::mem::take(&mut part.uncharged));
            (part, lines)
        })
        .collect();
    let mut out = ParsedFile::default();
    let mut parts = Vec::with_capacity(parsed.len());
    let mut lines_before = 0u32;
    for (mut part, physical_lines) in parsed {
        let mut records = std::mem::take(&mut part.records);
        for r in &mut records {
            r.pos.line = r.pos.line.saturating_add(lines_before);
        }
        parts.push(records);
        out.append_counts(part, lines_before);
        lines_before = lines_before.saturating_add(physical_lines);
    }
    (out, parts)
}

/// Where `data` is cut into segments: ranges ending just after a newline (the last one at
/// the end of the data).
fn segment_bounds(data: &[u8]) -> Vec<(usize, usize)> {
    let mut bounds = Vec::with_capacity(data.len() / SEGMENT_BYTES + 1);
    let mut start = 0;
    while start < data.len() {
        let cut = (start + SEGMENT_BYTES).min(data.len());
        let end = match memchr::memchr(b'\n', &data[cut..]) {
            Some(at) if cut < data.len() => cut + at + 1,
            _ => data.len(),
        };
        bounds.push((start, end));
        start = end;
    }
    bounds
}

/// `data` as text, when it is valid UTF-8. Checked with SIMD instructions (`simdutf8`): the
/// check reads every byte of the input, and the standard library's takes about three times as
/// long on text that is not all ASCII.
fn utf8_text(data: &Bytes) -> Option<ByteString> {
    simdutf8::basic::from_utf8(data).ok()?;
    // SAFETY: `data` was just checked to be valid UTF-8, and `Bytes` never changes its
    // bytes.
    Some(unsafe { ByteString::from_bytes_unchecked(data.clone()) })
}

/// The text of `part`, a slice of `text`'s bytes, as a slice of `text`.
fn sub_str<'t>(text: &'t str, part: &[u8]) -> Option<&'t str> {
    let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    text.get(start..start.checked_add(part.len())?)
}

/// Charges a segment's records pay to the budget as they are read, every this many bytes
/// of charges. Paid only at the segment's end, a segment of tiny records (128 KiB of
/// input, thousands of records, megabytes) was read whole past an exhausted budget.
const CHARGE_EVERY: usize = 64 << 10;

/// Reads one segment; line numbers count from its start. Returns the result and the number
/// of physical lines the segment spans. Stops early, leaving the result incomplete, once
/// `budget` is exhausted (the session is refused).
///
/// The segment's UTF-8 is checked once, and its lines read as slices of it; a segment that
/// is not all UTF-8 is read line by line.
fn parse_segment(file: u32, data: Bytes, starts_file: bool, budget: &RecordBudget) -> (ParsedFile, u32) {
    let text = utf8_text(&data).map(Arc::new);
    let mut lines = if starts_file {
        frame::lines(&data)
    } else {
        frame::continued_lines(&data)
    };
    let mut out = ParsedFile::default();
    for line in lines.by_ref() {
        out.lines += 1;
        let read = check_line_length(line.bytes.len()).and_then(|()| {
            match text.as_ref().and_then(|t| Some((t, sub_str(t, line.bytes)?))) {
                Some((buffer, line_text)) => parse_line_in(buffer, line_text),
                None => match ByteString::try_from(data.slice_ref(line.bytes)) {
                    Ok(buffer) => {
                        let buffer = Arc::new(buffer);
                        parse_line_in(&buffer, &buffer)
                    }
                    Err(_) => parse_invalid_utf8(line.bytes),
                },
            }
        });
        match read {
            Ok(LineRecords { records, repair }) => {
                if let Some(repair) = repair {
                    out.repaired.push(RepairedLine {
                        line: line.number,
                        repair,
                    });
                }
                for (seq, record) in records.into_iter().enumerate() {
                    let pos = Position {
                        file,
                        line: line.number,
                        seq: seq as u32,
                    };
                    out.take(record, pos);
                }
                if out.uncharged >= CHARGE_EVERY && !budget.charge(std::mem::take(&mut out.uncharged)) {
                    break;
                }
            }
            Err(error) => out.bad_lines.push(BadLine {
                line: line.number,
                error,
                unterminated: !line.terminated,
            }),
        }
    }
    (out, lines.physical_lines())
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::parse::*;

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

    /// A line past 4 GiB is a bad line (its texts could not be held); one of exactly 4 GiB
    /// is read. (The decision alone: a test cannot allocate such a line.)
    #[test]
    fn a_line_longer_than_4_gib_is_not_read() {
        assert_eq!(check_line_length(MAX_LINE_BYTES), Ok(()));
        let past = MAX_LINE_BYTES + 1;
        assert_eq!(check_line_length(past), Err(LineError::TooLong(past)));
        assert!(LineError::TooLong(past).to_string().contains("4294967296 bytes"));
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
        let rec = got.records.into_iter().next().unwrap().record;
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
        let rec = got.records.into_iter().next().unwrap().record;
        assert_eq!(rec.system_content().unwrap().text(), "x\u{FFFD} y \u{FFFD} ok 😀");
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let line = r#"{"uuid":"a","uuid":"b","message":{"content":"one","content":"two"}}"#;
        let got = parse_line(line.as_bytes()).unwrap();
        assert!(got.repair.unwrap().contains("duplicate keys"));
        let rec = got.records.into_iter().next().unwrap().record;
        assert_eq!(rec.uuid.as_deref(), Some("b"));
        assert_eq!(
            rec.message.map(|m| m.content),
            Some(crate::formats::claude_code::records::Content::Text(
                crate::formats::claude_code::records::JsonStr::new("two")
            ))
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
        let uuids: Vec<_> = parsed
            .records
            .iter()
            .map(|r| r.uuid.as_deref().unwrap())
            .collect();
        assert_eq!(uuids, ["a", "b"]);
        assert_eq!(parsed.lines, 4);
        let bad = &parsed.bad_lines.samples;
        assert_eq!(parsed.bad_lines.count, 2);
        assert_eq!(bad[0].line, 2);
        assert!(!bad[0].unterminated);
        assert_eq!(bad[1].line, 5);
        assert_eq!(bad[1].error, LineError::Truncated);
        assert!(bad[1].unterminated);
    }

    /// 5,000,000 lines of `{}` after one prompt took 8.5 GB; a line that is
    /// not a record must cost a counter, not a struct.
    #[test]
    fn d1_objects_that_are_no_record_are_counted_not_kept() {
        let data = "{\"type\":\"user\",\"uuid\":\"a\",\"message\":{\"content\":\"hi\"}}\n{}\n{\"type\":\"queue-operation\",\"sessionId\":\"S\"}\n{\"type\":\"progress\",\"uuid\":\"p\"}\n";
        let parsed = parse_file(0, data.as_bytes());
        let kept: Vec<_> = parsed
            .records
            .iter()
            .map(|r| r.uuid.as_deref().unwrap())
            .collect();
        assert_eq!(
            kept,
            ["a", "p"],
            "a record with a uuid may be a parent: it is kept"
        );
        assert_eq!(parsed.records_read, 4);
        let types: Vec<_> = parsed.types.iter().collect();
        assert_eq!(
            types,
            [
                ("(missing)", 1),
                ("progress", 1),
                ("queue-operation", 1),
                ("user", 1)
            ]
        );
        assert_eq!(
            parsed.identity.session_id.as_deref(),
            Some("S"),
            "ids of entries not kept still count"
        );
    }

    #[test]
    fn bad_and_repaired_lines_keep_a_count_and_bounded_examples() {
        let data = "nope\n".repeat(10_000);
        let parsed = parse_file(0, data.as_bytes());
        assert_eq!(parsed.bad_lines.count, 10_000);
        assert_eq!(parsed.bad_lines.samples.len(), crate::diagnostics::SAMPLE_LIMIT);
        assert_eq!(parsed.bad_lines.samples[99].line, 100);
    }

    #[test]
    fn type_names_are_bounded() {
        let data: String = (0..1000).map(|i| format!("{{\"type\":\"t{i}\"}}\n")).collect();
        let parsed = parse_file(0, data.as_bytes());
        let types: Vec<_> = parsed.types.iter().collect();
        assert_eq!(types.len(), crate::diagnostics::TYPE_NAME_LIMIT + 1);
        let other = types.iter().find(|(n, _)| *n == crate::diagnostics::OTHER_TYPES);
        assert_eq!(
            other.map(|(_, c)| *c),
            Some(1000 - crate::diagnostics::TYPE_NAME_LIMIT)
        );
    }

    /// Segments are cut at line ends and joined in order: line numbers, blank lines, a
    /// byte order mark and a last line without newline read as in one sequential pass.
    #[test]
    fn segments_read_as_one_sequential_pass() {
        let mut data = b"\xEF\xBB\xBF".to_vec();
        let mut want = Vec::new();
        let mut line = 1u32;
        for i in 0..40_000 {
            if i % 7 == 0 {
                data.extend_from_slice(b"\n");
                line += 1;
            }
            data.extend_from_slice(format!("{{\"type\":\"user\",\"uuid\":\"u{i}\"}}\n").as_bytes());
            want.push((format!("u{i}"), line));
            line += 1;
        }
        data.extend_from_slice(b"{\"type\":\"user\",\"uuid\":\"last\"");
        assert!(segment_bounds(&data).len() > 4, "the test spans several segments");
        let parsed = parse_file(3, &data);
        let got: Vec<(String, u32)> = parsed
            .records
            .iter()
            .map(|r| (r.uuid.as_deref().unwrap().to_owned(), r.pos.line))
            .collect();
        assert_eq!(got, want);
        assert!(parsed.records.iter().all(|r| r.pos.file == 3));
        assert_eq!(parsed.bad_lines.count, 1);
        assert_eq!(parsed.bad_lines.samples[0].line, line);
        assert!(parsed.bad_lines.samples[0].unterminated);
    }

    /// Regression: every record glued on one line searched the whole line for its decoded
    /// strings, quadratic in the line's length (a 6.4 MB line of such records took 8.3 s;
    /// this one would take minutes). Each record searches its own bytes now, and still keeps
    /// its text as a slice of the line.
    #[test]
    fn records_glued_on_one_line_search_their_own_bytes() {
        let glued = 20_000;
        let line: String = (0..glued)
            .map(|i| {
                let text = format!(r"{i:08} line\n{}", "x".repeat(300));
                format!(r#"{{"type":"user","uuid":"u{i}","message":{{"role":"user","content":"{text}"}}}}"#)
            })
            .collect();
        let records = parse_file(0, line.as_bytes()).records;
        assert_eq!(records.len(), glued);
        for (i, record) in records.iter().enumerate() {
            let Some(crate::formats::claude_code::records::Content::Text(text)) =
                record.message.as_ref().map(|m| &m.content)
            else {
                panic!("record {i} has its text");
            };
            assert!(text.text().starts_with(&format!("{i:08} line\n")));
            assert_eq!(
                text.own_heap_size(),
                0,
                "record {i}'s text is a slice of the line"
            );
        }
    }

    /// The ids a record repeats from the one before (session, parent, API message) are
    /// one allocation, and ids that differ stay apart.
    #[test]
    fn repeated_ids_are_held_once() {
        use crate::formats::claude_code::records::Id;
        let data = concat!(
            r#"{"type":"user","uuid":"a","sessionId":"s","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"b","parentUuid":"a","sessionId":"s","requestId":"r","message":{"id":"m","model":"x","role":"assistant","content":"1"}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"c","parentUuid":"b","sessionId":"s","requestId":"r","message":{"id":"m","model":"x","role":"assistant","content":"2"}}"#,
            "\n",
            r#"{"type":"user","uuid":"d","parentUuid":"a","sessionId":"t","message":{"role":"user","content":"again"}}"#,
        );
        let r = parse_file(0, data.as_bytes()).records;
        let same = |a: &Option<Id>, b: &Option<Id>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let parent = |i: usize| r[i].parent_uuid.clone().flatten();
        assert!(same(&r[0].session_id, &r[2].session_id));
        assert!(same(&r[0].uuid, &parent(1)));
        assert!(same(&r[1].uuid, &parent(2)));
        assert!(same(&r[1].request_id, &r[2].request_id));
        let message = |i: usize| r[i].message.as_ref().unwrap();
        assert!(same(&message(1).id, &message(2).id));
        assert!(same(&message(1).model, &message(2).model));
        // Not the record before: a copy of its own, equal.
        assert_eq!(parent(3).as_deref(), Some("a"));
        assert!(!same(&r[0].uuid, &parent(3)));
        assert_eq!(r[3].session_id.as_deref(), Some("t"));
    }
}
