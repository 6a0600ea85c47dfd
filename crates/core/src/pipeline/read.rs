//! The parse stage: the session's files framed and parsed (in parallel) into one list of
//! records under the memory bound, with each file's counts and its bad lines recorded.

use rayon::prelude::*;

use super::load::{compressed_kind, LoadOptions, SessionError};
use crate::diagnostics::{Diagnostics, LineIssue, TypeCounts};
use crate::formats::autogen::{AgMessage, ReadError};
use crate::formats::claude_code::parse::{parse_file_parts, FileIdentity, ParsedFile};
use crate::formats::claude_code::records::Record;
use crate::formats::codex::{parse_codex_file_within, session_roles};
use crate::formats::gemini::{parse_gemini_file_within, GeminiHeader};
use crate::formats::input::{FileRole, Format, SessionInput, SourceFile};
use crate::formats::pi::{parse_pi_file_within, PiHeader};
use crate::heap::HeapSize;
use crate::memory_bound::{MemoryBound, RecordBudget};

/// One file of a loaded session.
#[derive(Debug, Clone)]
pub struct FileInfo {
    /// The name it was given under.
    pub name: String,
    /// Main log, sub-agent log or meta file.
    pub role: FileRole,
    /// Size in bytes.
    pub bytes: usize,
    /// Whether its records take part (a sub-agent log of another session does not).
    pub included: bool,
}

/// What the parse stage gives.
pub(crate) struct ReadSession<'i> {
    /// The files, main log first (dedup keeps first copies).
    pub(crate) sources: Vec<&'i SourceFile>,
    /// The log format.
    pub(crate) format: Format,
    /// Every record read, file by file.
    pub(crate) records: Vec<Record>,
    /// Each file's counts, as `sources`.
    pub(crate) file_stats: Vec<FileStats>,
    /// The pi header, for pi sessions.
    pub(crate) pi_header: Option<PiHeader>,
    /// The main chat's header, for Gemini sessions.
    pub(crate) gemini_header: Option<GeminiHeader>,
    /// Each file's role, as `sources`: by its name ([`SourceFile::role`]), but for Codex by
    /// its content (the rollouts of spawned threads are sub-agent logs) and for Gemini by
    /// its header (a `kind: "subagent"` chat is a sub-agent's).
    pub(crate) roles: Vec<FileRole>,
    /// The session's id: the pi or Gemini header's, an AutoGen log's name without its
    /// extension, else the main log's first `sessionId`.
    pub(crate) session_id: Option<String>,
    /// The messages of an AutoGen log.
    pub(crate) autogen: Option<Vec<AgMessage>>,
    /// The bad and repaired lines found.
    pub(crate) diagnostics: Diagnostics,
}

/// Reads every file of `input`: refuses compressed files and a session without a main log,
/// tells the format (unless `options` names it), and parses the logs within the memory
/// bound.
pub(crate) fn read_session(
    input: &SessionInput,
    options: LoadOptions,
) -> Result<ReadSession<'_>, SessionError> {
    if let Some((f, kind)) = input
        .files
        .iter()
        .find_map(|f| compressed_kind(&f.bytes).map(|k| (f, k)))
    {
        return Err(SessionError::Compressed {
            file: f.name.clone(),
            kind,
        });
    }
    let named_main = input.main_index().ok_or(SessionError::NoMainFile)?;
    let format = options.format.unwrap_or_else(|| input.detect_format());
    let (main_input, mut input_roles) = match format {
        Format::Codex => {
            let bytes: Vec<&[u8]> = input.files.iter().map(|f| &f.bytes[..]).collect();
            session_roles(&bytes)
        }
        Format::Gemini => (
            gemini_main(input).unwrap_or(named_main),
            input.files.iter().map(SourceFile::role).collect(),
        ),
        _ => (named_main, input.files.iter().map(SourceFile::role).collect()),
    };
    // The main log is file 0: it comes first in the stream (dedup keeps first copies).
    let order: Vec<usize> = std::iter::once(main_input)
        .chain((0..input.files.len()).filter(|&i| i != main_input))
        .collect();
    let sources: Vec<&SourceFile> = order.iter().map(|&i| &input.files[i]).collect();
    let roles: Vec<FileRole> = order
        .iter()
        .map(|&i| std::mem::replace(&mut input_roles[i], FileRole::Main))
        .collect();
    let budget = record_budget(&sources, options.memory_bound);
    let autogen = match format {
        Format::Autogen => Some(budget.read_autogen(&input.files[main_input].bytes)?),
        _ => None,
    };
    let mut diagnostics = Diagnostics::default();
    let (mut records, mut file_stats, headers) =
        read_files(&sources, format, options, &budget, &mut diagnostics)?;
    let roles = file_roles(roles, &headers);
    if format == Format::Codex {
        // A spawned thread's records are a sidechain, as a Claude Code sub-agent's are.
        for r in &mut records {
            if roles[r.pos.file as usize] == FileRole::SubAgent {
                r.is_sidechain = Some(true);
            }
        }
    }
    let (pi_header, gemini_header) = match headers.into_iter().next().flatten() {
        Some(FileHeader::Pi(h)) => (Some(h), None),
        Some(FileHeader::Gemini(h)) => (None, Some(h)),
        None => (None, None),
    };
    let session_id = match (&pi_header, &gemini_header, &autogen) {
        (Some(h), _, _) => h.id.clone(),
        (_, Some(h), _) => h.session_id.clone(),
        (None, None, Some(messages)) => {
            file_stats[0].count_autogen(&sources[0].bytes, messages.len());
            autogen_session_id(sources[0].base_name())
        }
        (None, None, None) => file_stats[0].identity.nonempty_session_id.clone(),
    };
    Ok(ReadSession {
        sources,
        format,
        records,
        file_stats,
        pi_header,
        gemini_header,
        roles,
        session_id,
        autogen,
        diagnostics,
    })
}

/// Per file: non-blank lines seen, records read (kept or only counted), records by type,
/// and the ids the file gives itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileStats {
    pub(crate) lines: usize,
    pub(crate) records: usize,
    pub(crate) types: TypeCounts,
    pub(crate) identity: FileIdentity,
}

impl FileStats {
    /// An AutoGen log's counts: its non-blank lines, and its messages as its records (the
    /// log is read whole, not line by line, and an entry without text is no message).
    fn count_autogen(&mut self, log: &[u8], messages: usize) {
        self.lines = crate::json::frame::lines(log).count();
        self.records = messages;
    }
}

/// The id of an AutoGen session, whose log names none: its main log's name without the
/// extension (`swarm_handoffs` for `swarm_handoffs.json`), as a sessions directory names
/// it (unless two logs share the name). `None` for a name that is only an extension.
fn autogen_session_id(main_log: &str) -> Option<String> {
    let stem = main_log.rsplit_once('.').map_or(main_log, |(stem, _)| stem);
    (!stem.is_empty()).then(|| stem.to_owned())
}

/// The header a file of a pi or Gemini session starts with.
pub(crate) enum FileHeader {
    /// A pi session's.
    Pi(PiHeader),
    /// A Gemini chat's.
    Gemini(GeminiHeader),
}

/// What reading the files gives: the records, each file's counts, and each file's header.
type ReadFiles = (Vec<Record>, Vec<FileStats>, Vec<Option<FileHeader>>);

/// What reading one file gives: its counts, its records in the parts they were read in,
/// and its header.
type FileRead = (ParsedFile, Vec<Vec<Record>>, Option<FileHeader>);

/// The main chat of a Gemini session: the first file that is no sub-agent's chat.
fn gemini_main(input: &SessionInput) -> Option<usize> {
    input.files.iter().position(|f| {
        f.role() != FileRole::SubAgentMeta
            && crate::formats::gemini::sniff(&f.bytes).is_none_or(|h| !h.is_subagent())
    })
}

/// Each file's role: `roles` (by its name, or a Codex rollout's by its content), but in a
/// Gemini session a file other than the main chat is a sub-agent's when its header says
/// `kind: "subagent"` (another main chat stays a main log, which linking leaves out).
fn file_roles(roles: Vec<FileRole>, headers: &[Option<FileHeader>]) -> Vec<FileRole> {
    roles
        .into_iter()
        .zip(headers)
        .enumerate()
        .map(|(fi, (role, header))| match header {
            Some(FileHeader::Gemini(h)) if fi > 0 && h.is_subagent() => FileRole::SubAgent,
            Some(FileHeader::Gemini(_)) => FileRole::Main,
            _ => role,
        })
        .collect()
}

/// Frames and parses every log (meta files are read by linking), recording bad and
/// repaired lines. Returns the records and each file's counts.
fn read_files(
    sources: &[&SourceFile],
    format: Format,
    options: LoadOptions,
    budget: &SessionBudget,
    diagnostics: &mut Diagnostics,
) -> Result<ReadFiles, SessionError> {
    // Files are independent: parse them in parallel (each also splits its lines across
    // cores), then take them in session order.
    let parsed_files: Vec<Option<FileRead>> = sources
        .par_iter()
        .enumerate()
        .map(|(fi, f)| {
            let skip = f.role() == FileRole::SubAgentMeta
                || (format == Format::Pi && fi > 0)
                || format == Format::Autogen;
            (!skip).then(|| match format {
                Format::ClaudeCode | Format::Autogen => {
                    let (parsed, parts) = parse_file_parts(fi as u32, &f.bytes, &budget.records);
                    (parsed, parts, None)
                }
                Format::Pi => {
                    let mut pi = parse_pi_file_within(fi as u32, &f.bytes, &budget.records);
                    let records = std::mem::take(&mut pi.parsed.records);
                    (pi.parsed, vec![records], Some(FileHeader::Pi(pi.header)))
                }
                Format::Gemini => {
                    let mut chat = parse_gemini_file_within(fi as u32, &f.bytes, &budget.records);
                    let records = std::mem::take(&mut chat.parsed.records);
                    (chat.parsed, vec![records], Some(FileHeader::Gemini(chat.header)))
                }
                Format::Codex => {
                    let mut codex = parse_codex_file_within(fi as u32, &f.bytes, &budget.records);
                    let records = std::mem::take(&mut codex.parsed.records);
                    (codex.parsed, vec![records], None)
                }
            })
        })
        .collect();
    let kept: usize = parsed_files
        .iter()
        .flatten()
        .flat_map(|(_, parts, _)| parts.iter().map(Vec::len))
        .sum();
    budget.refuse_past_room(kept)?;
    // Each record is moved once, from the part it was read in.
    let mut records = Vec::with_capacity(kept);
    let mut file_stats = Vec::with_capacity(sources.len());
    let mut headers = Vec::with_capacity(sources.len());
    for (f, parsed) in sources.iter().zip(parsed_files) {
        let Some((mut parsed, parts, header)) = parsed else {
            file_stats.push(FileStats::default());
            headers.push(None);
            continue;
        };
        headers.push(header);
        if let (true, Some(bad)) = (options.strict, parsed.bad_lines.samples.first()) {
            return Err(SessionError::InvalidLine {
                file: f.name.clone(),
                line: bad.line,
                reason: bad.error.to_string(),
            });
        }
        record_line_issues(&f.name, &mut parsed, diagnostics);
        file_stats.push(FileStats {
            lines: parsed.lines,
            records: parsed.records_read,
            types: parsed.types,
            identity: parsed.identity,
        });
        for mut part in parts {
            records.append(&mut part);
        }
    }
    Ok((records, file_stats, headers))
}

/// The [`RecordBudget`] of a session's reading, and what it is measured against.
struct SessionBudget {
    records: RecordBudget,
    input_bytes: usize,
}

impl SessionBudget {
    /// [`SessionError::TooManyRecords`] once the charges (of `records` records) passed the
    /// room.
    fn refuse_past_room(&self, records: usize) -> Result<(), SessionError> {
        if !self.records.is_exhausted() {
            return Ok(());
        }
        Err(SessionError::TooManyRecords {
            records,
            input_bytes: self.input_bytes,
            room: self.records.room(),
        })
    }

    /// The messages of an AutoGen log, each charged as it is read.
    fn read_autogen(&self, log: &[u8]) -> Result<Vec<AgMessage>, SessionError> {
        let text = String::from_utf8_lossy(log);
        crate::formats::autogen::parse_within(&text, &self.records).map_err(|e| match e {
            ReadError::Autogen(e) => SessionError::Autogen(e),
            ReadError::PastBound { messages } => SessionError::TooManyRecords {
                records: messages,
                input_bytes: self.input_bytes,
                room: self.records.room(),
            },
        })
    }
}

/// The budget for the records of `sources` under `bound` (unbounded without one).
fn record_budget(sources: &[&SourceFile], bound: Option<MemoryBound>) -> SessionBudget {
    let input_bytes = sources.iter().map(|f| f.bytes.len()).sum();
    let records = match bound {
        Some(bound) => RecordBudget::new(bound.fixed_cost_room(input_bytes)),
        None => RecordBudget::unbounded(),
    };
    SessionBudget { records, input_bytes }
}

/// Records a file's bad and repaired lines in the diagnostics (counts, and examples while
/// there is room).
fn record_line_issues(file: &str, parsed: &mut ParsedFile, diagnostics: &mut Diagnostics) {
    diagnostics
        .bad_lines
        .absorb(std::mem::take(&mut parsed.bad_lines), |bad| {
            let mut reason = bad.error.to_string();
            if bad.unterminated {
                reason.push_str(" (last line, no newline: the file may still be being written)");
            }
            LineIssue {
                file: file.to_owned(),
                line: bad.line,
                reason,
            }
        });
    diagnostics
        .repaired_lines
        .absorb(std::mem::take(&mut parsed.repaired), |fixed| LineIssue {
            file: file.to_owned(),
            line: fixed.line,
            reason: fixed.repair.to_owned(),
        });
}

impl HeapSize for FileInfo {
    fn heap_size(&self) -> usize {
        self.name.heap_size()
    }
}
