//! The pipeline: from a [`SessionInput`] to an analysed [`Session`] that every view reads.

use std::time::{Duration, Instant};

use bytes::Bytes;
use foldhash::{HashMap, HashMapExt};
use rayon::prelude::*;

use super::classify::{self, NoticeKind, UserClass};
use super::dedup::{dedup_records, Dedup, DropReason};
use super::group::{group_turns, Turn};
use super::order::{order_units, OrderUnit, Ordering, ParentLink, ParentSlot, SortKey};
use super::subagents::{index_tool_uses, link_subagents, Agent, LinkFile, Linking, ToolUseIndex};
use super::tree::Tree;
use super::workflow::{build_workflow, Node, Workflow, WorkflowInput};
use crate::diagnostics::{Diagnostics, FileSummary, LineIssue, RecordIssue, TypeCounts};
use crate::formats::autogen::ReadError;
use crate::formats::claude_code::parse::{parse_file_parts, FileIdentity, ParsedFile};
use crate::formats::claude_code::records::{Record, RecordKind};
use crate::formats::input::{agent_id_from_name, FileRole, Format, SessionInput, SourceFile};
use crate::formats::pi::{parse_pi_file_within, PiHeader};
use crate::memory_bound::{MemoryBound, RecordBudget, MESSAGE_COST, RECORD_COST};

/// How to load a session.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadOptions {
    /// Fail on the first line that holds no readable record, instead of recording it.
    pub strict: bool,
    /// The format; `None` tells it from the main file's first line.
    pub format: Option<Format>,
    /// Refuse the session when its records' fixed costs would take it past this bound
    /// ([`SessionError::TooManyRecords`]); `None` loads whatever it costs.
    pub memory_bound: Option<MemoryBound>,
    /// Leave the workflow DAG out, for a caller that shows only views that do not read it
    /// ([`View::reads_workflow`](crate::views::View::reads_workflow)): building it is
    /// the build's longest serial stage. The session's `workflow` is then empty and its
    /// `workflow_built` false.
    pub without_workflow: bool,
}

/// Why a session could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// Every file is a sub-agent log or meta file.
    #[error("no main session file found (expected a file not named agent-*)")]
    NoMainFile,
    /// Strict loading met a bad line.
    #[error("invalid JSON in {file} on line {line}: {reason}")]
    InvalidLine {
        /// The file's name.
        file: String,
        /// 1-based physical line number.
        line: u32,
        /// What was wrong.
        reason: String,
    },
    /// An AutoGen log cannot be read (CommuGraph's messages).
    #[error(transparent)]
    Autogen(#[from] crate::formats::autogen::AutogenError),
    /// The records are too many for the input's size: loading them would pass the memory
    /// bound (issue 15, D1). Reading stopped when the bound was reached. (An AutoGen log's
    /// records are its messages.)
    #[error(
        "too many records for the session's size: the {records} records read from its \
         {input} of input already cost more than the {room} its memory bound leaves them \
         (a record costs about {record_cost} bytes beyond its text, an AutoGen message \
         {message_cost})",
        input = mebibytes(*input_bytes),
        room = mebibytes(*room),
        record_cost = RECORD_COST,
        message_cost = MESSAGE_COST
    )]
    TooManyRecords {
        /// Records (or AutoGen messages) kept when reading stopped.
        records: usize,
        /// Bytes of input (all files).
        input_bytes: usize,
        /// The bytes the bound leaves the records' fixed costs.
        room: usize,
    },
    /// A file is compressed or an archive, not JSON lines.
    #[error("{file} is {kind}, not JSON lines: decompress it first")]
    Compressed {
        /// The file's name.
        file: String,
        /// What it is (`gzip-compressed`, `a zip archive`, ...).
        kind: &'static str,
    },
}

/// `bytes` in MiB, for messages.
fn mebibytes(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// A session given to be read (an upload, a file named on the command line) that holds no
/// conversation: only snapshots, summaries or blank lines, or lines that could not be read.
/// The server's upload route and `sessiongraph export` refuse it with this same message; a
/// session found in a sessions directory is served empty instead (a log may be new).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoConversation {
    /// The file's name.
    pub file: String,
    /// Lines that held no readable record.
    pub unreadable: usize,
    /// The first of them, if any.
    pub first: Option<LineIssue>,
}

impl std::fmt::Display for NoConversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "No conversational records found in {}", self.file)?;
        if self.unreadable == 0 {
            return f.write_str(" (it holds only snapshots, summaries or blank lines)");
        }
        write!(f, ": {} line(s) could not be read", self.unreadable)?;
        match &self.first {
            Some(first) => write!(f, ": line {}: {}", first.line, first.reason),
            None => Ok(()),
        }
    }
}

impl std::error::Error for NoConversation {}

/// What a file's first bytes say it is when it is a compressed file or an archive.
pub fn compressed_kind(bytes: &[u8]) -> Option<&'static str> {
    const KINDS: [(&[u8], &str); 5] = [
        (&[0x1f, 0x8b], "gzip-compressed"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd-compressed"),
        (b"BZh", "bzip2-compressed"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz-compressed"),
        (b"PK\x03\x04", "a zip archive"),
    ];
    KINDS
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|&(_, kind)| kind)
}

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

/// A lane of the workflow: the main agent, or one sub-agent.
#[derive(Debug, Clone)]
pub struct Lane {
    /// `main` or `agent-<id>`.
    pub id: String,
    /// The sub-agent, for sub-agent lanes.
    pub agent: Option<usize>,
}

/// What an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// A user prompt (record index).
    Prompt(usize),
    /// An assistant turn (turn index).
    Turn(usize),
    /// A tool result (record index).
    ToolResult {
        /// The record.
        record: usize,
        /// Whether it reports a failure.
        failed: bool,
    },
    /// A system notice (record index).
    Notice {
        /// The record.
        record: usize,
        /// Which kind.
        kind: NoticeKind,
    },
    /// A compaction: the boundary record and its summary record.
    Compact {
        /// The `compact_boundary` record; for a summary logged without one (Claude Code
        /// 1.0.x), the summary itself.
        boundary: usize,
        /// The `isCompactSummary` record that follows it, if any (the same record as
        /// `boundary` for a summary alone).
        summary: Option<usize>,
    },
}

/// One unit of the order: an assistant turn, or one other record.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Its records (a turn's in chunk order).
    pub records: Vec<usize>,
    /// The turn, for assistant turns.
    pub turn: Option<usize>,
    /// The unit its parent resolved to.
    pub parent: Option<usize>,
    /// True when that parent is the Task call that spawned this sub-agent log.
    pub parent_is_spawn: bool,
}

/// One entry of the session, in order: what views turn into units, nodes and messages.
#[derive(Debug, Clone)]
pub struct Item {
    /// What it is.
    pub kind: ItemKind,
    /// The unit it comes from.
    pub unit: usize,
    /// Index into [`Session::lanes`].
    pub lane: usize,
    /// The record its parent resolved to (through logical parent, parent or spawning call).
    pub parent_record: Option<usize>,
    /// True when the parent is the Task call that spawned this sub-agent.
    pub parent_is_spawn: bool,
}

/// An analysed session: the records and everything derived from them, in one order.
#[derive(Debug)]
pub struct Session {
    /// The files, main log first.
    pub files: Vec<FileInfo>,
    /// The bytes of the logs read: the records' text is kept as slices of them
    /// ([`crate::json::raw::JsonStr`]), so the session holds them for its life.
    pub input: Vec<Bytes>,
    /// Every record read, kept or not (see [`Session::dedup`] and [`FileInfo::included`]).
    pub records: Vec<Record>,
    /// Which records were removed as duplicates.
    pub dedup: Dedup,
    /// The main log's `sessionId` (its first record that has one).
    pub session_id: Option<String>,
    /// The assistant turns.
    pub turns: Vec<Turn>,
    /// The sub-agents.
    pub agents: Vec<Agent>,
    /// The lanes: `main` first, then one per sub-agent (indices used by items and nodes).
    pub lanes: Vec<Lane>,
    /// Lane indices in display order: main, then sub-agents in the order they start.
    pub lane_order: Vec<usize>,
    /// The log format.
    pub format: Format,
    /// The pi header, for pi sessions.
    pub pi_header: Option<PiHeader>,
    /// The units of the order.
    pub units: Vec<Unit>,
    /// Unit indices in session order.
    pub unit_sequence: Vec<usize>,
    /// For each record, its unit (kept, ordered records only).
    pub unit_of_record: Vec<Option<usize>>,
    /// Every ordered record, in session order (a turn's records are together).
    pub record_sequence: Vec<usize>,
    /// For each record: the record its parent resolved to.
    pub record_parent: Vec<Option<usize>>,
    /// The items, in session order.
    pub items: Vec<Item>,
    /// Where each `tool_use` is.
    pub tool_uses: ToolUseIndex,
    /// The workflow DAG, from which the chat log and the communication graph derive too.
    pub workflow: Workflow,
    /// False when the session was loaded [`LoadOptions::without_workflow`]: `workflow` is
    /// empty then, and the views that read it refuse to render.
    pub workflow_built: bool,
    /// What loading found and did.
    pub diagnostics: Diagnostics,
    /// Branch points, the active path and abandoned branches.
    pub tree: Tree,
    /// How long each stage of the build took, in order.
    pub timings: Vec<(&'static str, Duration)>,
    /// The messages of an AutoGen log (its records, turns and workflow are empty).
    pub autogen: Option<Vec<crate::formats::autogen::AgMessage>>,
}

/// Stage timings of a build.
struct Timings {
    last: Instant,
    stages: Vec<(&'static str, Duration)>,
}

impl Timings {
    fn start() -> Timings {
        Timings {
            last: Instant::now(),
            stages: Vec::with_capacity(10),
        }
    }

    /// Ends the stage called `name`.
    fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.stages.push((name, now - self.last));
        self.last = now;
    }
}

/// Which part of a session a view shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Branch {
    /// Everything, abandoned branches included.
    #[default]
    All,
    /// Everything but the abandoned branches.
    Active,
}

impl std::str::FromStr for Branch {
    type Err = String;

    fn from_str(s: &str) -> Result<Branch, String> {
        match s {
            "all" => Ok(Branch::All),
            "active" => Ok(Branch::Active),
            other => Err(format!("unknown branch '{other}' (expected active or all)")),
        }
    }
}

impl Session {
    /// Runs the whole pipeline on `input`.
    pub fn build(input: &SessionInput, options: LoadOptions) -> Result<Session, SessionError> {
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
        let main_input = input.main_index().ok_or(SessionError::NoMainFile)?;
        // The main log is file 0: it comes first in the stream (dedup keeps first copies).
        let sources: Vec<&SourceFile> = std::iter::once(main_input)
            .chain((0..input.files.len()).filter(|&i| i != main_input))
            .map(|i| &input.files[i])
            .collect();

        let format = options.format.unwrap_or_else(|| input.detect_format());
        let budget = record_budget(&sources, options.memory_bound);
        let autogen = match format {
            Format::Autogen => Some(budget.read_autogen(&input.files[main_input].bytes)?),
            _ => None,
        };
        let mut timings = Timings::start();
        let mut diagnostics = Diagnostics::default();
        let (records, file_stats, pi_header) =
            read_files(&sources, format, options, &budget, &mut diagnostics)?;
        timings.mark("parse");
        let session_id = match &pi_header {
            Some(h) => h.id.clone(),
            None => file_stats[0].identity.nonempty_session_id.clone(),
        };

        let link_files: Vec<LinkFile> = sources
            .iter()
            .zip(&file_stats)
            .map(|(f, stats)| LinkFile {
                name: &f.name,
                role: f.role(),
                bytes: &f.bytes,
                session_id: stats.identity.session_id.as_deref(),
                agent_id: stats.identity.agent_id.as_deref(),
            })
            .collect();
        let mut linking = link_subagents(&records, &link_files, 0, session_id.as_deref());
        if format == Format::Pi {
            // A pi session is one file: every other file given with it is left out.
            for (fi, f) in sources.iter().enumerate().skip(1) {
                if linking.file_included[fi] || f.role() != FileRole::SubAgentMeta {
                    linking.file_included[fi] = false;
                    linking.ignored.push((fi, "a pi session is one file".to_owned()));
                }
            }
            linking.agents.clear();
            linking.unlinked.clear();
        }
        let included = &linking.file_included;
        let participates = |i: usize| included[records[i].pos.file as usize];
        for (stats, _) in file_stats.iter().zip(included).filter(|(_, &inc)| inc) {
            diagnostics.count_types(&stats.types, is_known_type);
        }

        timings.mark("link");
        let dedup = dedup_records(&records, participates);
        timings.mark("dedup");
        let kept = |i: usize| participates(i) && dedup.is_kept(i);
        // Three independent passes over the kept records.
        let ((tool_uses, (turns, turn_of)), uuid_index) = rayon::join(
            || rayon::join(|| index_tool_uses(&records, kept), || group_turns(&records, kept)),
            || kept_uuid_index(&records, kept),
        );
        timings.mark("group");
        let mut agents = linking.agents.clone();
        let (lanes, record_lane) = assign_lanes(&records, &mut agents, sources.len());

        let summaries = compaction_summaries(&records, kept, &dedup, &uuid_index);

        // The spawning call of each sub-agent log, for the log's roots.
        let mut spawn_of_file: HashMap<u32, &str> = HashMap::new();
        for agent in &agents {
            if let (Some(f), Some(t)) = (agent.file, agent.task_record) {
                if let Some(uuid) = records[t].uuid.as_deref() {
                    spawn_of_file.insert(f as u32, dedup.resolve(&records, uuid));
                }
            }
        }
        let candidates = |i: usize| parent_candidates(&records[i], &records, &dedup, &spawn_of_file);
        let units = build_units(&records, kept, &turns, &turn_of, candidates);
        let ordering = order_units(&units.order);
        timings.mark("order");

        // Record-level parents (for edges): the record each record's parent id names.
        let mut record_parent = vec![None; records.len()];
        for &i in units.records.iter().flatten() {
            let found = candidates(i)
                .iter()
                .flatten()
                .find_map(|p| uuid_index.get(p).copied());
            record_parent[i] = found.filter(|&p| p != i);
        }
        let record_sequence: Vec<usize> = ordering
            .sequence
            .iter()
            .flat_map(|&u| units.records[u].iter().copied())
            .collect();
        let mut unit_of_record = vec![None; records.len()];
        for (u, unit_records) in units.records.iter().enumerate() {
            for &r in unit_records {
                unit_of_record[r] = Some(u);
            }
        }
        let mut items = ordering
            .sequence
            .iter()
            .filter_map(|&u| {
                let kind = match units.turn[u] {
                    Some(t) => turns[t].has_content(&records).then_some(ItemKind::Turn(t)),
                    None => item_kind(&records, units.records[u][0], &summaries),
                }?;
                let parent_record = match ordering.links[u] {
                    ParentLink::Unit(p, slot) => {
                        let named = units.order[u].parents[slot as usize].and_then(|id| uuid_index.get(id));
                        named.copied().or(units.records[p].first().copied())
                    }
                    _ => None,
                };
                let lane_record = match kind {
                    ItemKind::Turn(t) => turns[t].anchor(),
                    _ => units.records[u][0],
                };
                Some(Item {
                    kind,
                    unit: u,
                    lane: record_lane[lane_record],
                    parent_record,
                    parent_is_spawn: unit_parent(ordering.links[u]).1,
                })
            })
            .collect::<Vec<Item>>();
        items.shrink_to_fit();
        drop((uuid_index, summaries));

        timings.mark("items");
        let files: Vec<FileInfo> = sources
            .iter()
            .enumerate()
            .map(|(fi, f)| FileInfo {
                name: f.name.clone(),
                role: f.role(),
                bytes: f.bytes.len(),
                included: f.role() == FileRole::SubAgentMeta || included[fi],
            })
            .collect();
        Findings {
            files: &files,
            records: &records,
            dedup: &dedup,
            file_stats: &file_stats,
            ordering: &ordering,
            units: &units.order,
            unit_records: &units.records,
        }
        .record(&mut diagnostics, &linking);
        // The units move into the session; what only the order needed goes now, before the
        // workflow allocates (issue 15, D1: these were alive to the end of the build).
        let session_units: Vec<Unit> = units
            .records
            .into_iter()
            .zip(units.turn)
            .zip(&ordering.links)
            .map(|((records, turn), &link)| {
                let (parent, parent_is_spawn) = unit_parent(link);
                Unit {
                    records,
                    turn,
                    parent,
                    parent_is_spawn,
                }
            })
            .collect();
        drop(units.order);

        // The tree needs the units alone: it is analysed beside the workflow.
        let tree = || Tree::of(&records, &session_units, &ordering.sequence);
        let (workflow, tree) = if options.without_workflow {
            (Workflow::default(), tree())
        } else {
            rayon::join(
                || {
                    build_workflow(&WorkflowInput {
                        records: &records,
                        turns: &turns,
                        items: &items,
                        include: None,
                        agents: &agents,
                        lanes: &lanes,
                        record_sequence: &record_sequence,
                        record_parent: &record_parent,
                    })
                },
                tree,
            )
        };
        let lane_order = order_lanes(&lanes, &agents, &workflow);
        timings.mark("workflow");

        let input = match format {
            Format::ClaudeCode => sources
                .iter()
                .filter(|f| f.role() != FileRole::SubAgentMeta)
                .map(|f| f.bytes.clone())
                .collect(),
            Format::Pi | Format::Autogen => Vec::new(),
        };
        let mut session = Session {
            input,
            format,
            pi_header,
            units: session_units,
            unit_sequence: ordering.sequence,
            unit_of_record,
            files,
            records,
            dedup,
            session_id,
            turns,
            agents,
            lanes,
            lane_order,
            record_sequence,
            record_parent,
            items,
            tool_uses,
            workflow,
            workflow_built: !options.without_workflow,
            diagnostics,
            tree,
            timings: Vec::new(),
            autogen,
        };
        session.timings = timings.stages;
        Ok(session)
    }

    /// True when item `i` is shown for `branch`.
    pub fn shows(&self, branch: Branch, i: usize) -> bool {
        branch == Branch::All || !self.tree.abandoned[self.items[i].unit]
    }

    /// The workflow for `branch`: the whole session's, or one built from the active
    /// branch's items only (steps renumbered densely).
    pub fn workflow_for(&self, branch: Branch) -> std::borrow::Cow<'_, Workflow> {
        match branch {
            Branch::All => std::borrow::Cow::Borrowed(&self.workflow),
            Branch::Active => {
                let include: Vec<bool> = (0..self.items.len()).map(|i| self.shows(branch, i)).collect();
                std::borrow::Cow::Owned(build_workflow(&WorkflowInput {
                    records: &self.records,
                    turns: &self.turns,
                    items: &self.items,
                    include: Some(&include),
                    agents: &self.agents,
                    lanes: &self.lanes,
                    record_sequence: &self.record_sequence,
                    record_parent: &self.record_parent,
                }))
            }
        }
    }

    /// Refuses a session that shows nothing (no prompt, turn, result or notice): see
    /// [`NoConversation`]. `file` names it in the message.
    pub fn require_conversation(&self, file: &str) -> Result<(), NoConversation> {
        if !self.items.is_empty() || self.autogen.is_some() {
            return Ok(());
        }
        let bad = &self.diagnostics.bad_lines;
        Err(NoConversation {
            file: file.to_owned(),
            unreadable: bad.count,
            first: bad.samples.first().cloned(),
        })
    }

    /// The text a workflow node shows (see [`super::workflow::node_content`]).
    pub fn node_content<'a>(&'a self, node: &'a Node) -> crate::json::literals::Text<'a> {
        super::workflow::node_content(&self.records, &self.turns, &self.items, node)
    }

    /// The name of the file record `i` was read from.
    pub fn file_name(&self, i: usize) -> &str {
        &self.files[self.records[i].pos.file as usize].name
    }

    /// Number of sub-agent logs that take part in the session.
    pub fn subagents_loaded(&self) -> usize {
        self.files
            .iter()
            .filter(|f| f.role == FileRole::SubAgent && f.included)
            .count()
    }
}

/// Per file: non-blank lines seen, records read (kept or only counted), records by type,
/// and the ids the file gives itself.
#[derive(Debug, Clone, Default)]
struct FileStats {
    lines: usize,
    records: usize,
    types: TypeCounts,
    identity: FileIdentity,
}

/// Each uuid of a kept record -> the first kept record with it.
fn kept_uuid_index(records: &[Record], kept: impl Fn(usize) -> bool) -> HashMap<&str, usize> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if let (true, Some(u)) = (kept(i), r.uuid.as_deref()) {
            index.entry(u).or_insert(i);
        }
    }
    index
}

/// What reading the files gives: the records, each file's counts, and a pi session's header.
type ReadFiles = (Vec<Record>, Vec<FileStats>, Option<PiHeader>);

/// What reading one file gives: its counts, its records in the parts they were read in,
/// and a pi session's header.
type FileRead = (ParsedFile, Vec<Vec<Record>>, Option<PiHeader>);

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
                    (pi.parsed, vec![records], Some(pi.header))
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
    let mut pi_header = None;
    for (f, parsed) in sources.iter().zip(parsed_files) {
        let Some((mut parsed, parts, header)) = parsed else {
            file_stats.push(FileStats::default());
            continue;
        };
        if header.is_some() {
            pi_header = header;
        }
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
    Ok((records, file_stats, pi_header))
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
    fn read_autogen(&self, log: &[u8]) -> Result<Vec<crate::formats::autogen::AgMessage>, SessionError> {
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

/// The lanes (main, then one per agent) and each record's lane: a sub-agent log's records
/// are its agent's; a sidechain record of the main log with an `agentId` is that agent's
/// (an agent created for it if linking had none).
fn assign_lanes(records: &[Record], agents: &mut Vec<Agent>, files: usize) -> (Vec<Lane>, Vec<usize>) {
    let mut lanes = vec![Lane {
        id: "main".to_owned(),
        agent: None,
    }];
    let mut lane_of_agent: HashMap<String, usize> = HashMap::new();
    let mut file_lane = vec![0usize; files];
    for (a, agent) in agents.iter().enumerate() {
        lane_of_agent.insert(agent.agent_id.clone(), lanes.len());
        if let Some(f) = agent.file {
            file_lane[f] = lanes.len();
        }
        lanes.push(Lane {
            id: format!("agent-{}", agent.agent_id),
            agent: Some(a),
        });
    }
    let record_lane = records
        .iter()
        .map(|r| {
            match (
                file_lane[r.pos.file as usize],
                r.is_sidechain,
                r.agent_id.as_deref(),
            ) {
                (0, Some(true), Some(id)) => *lane_of_agent.entry(id.to_owned()).or_insert_with(|| {
                    agents.push(Agent {
                        agent_id: id.to_owned(),
                        ..Agent::default()
                    });
                    lanes.push(Lane {
                        id: format!("agent-{id}"),
                        agent: Some(agents.len() - 1),
                    });
                    lanes.len() - 1
                }),
                (lane, ..) => lane,
            }
        })
        .collect();
    (lanes, record_lane)
}

/// Compaction summaries: for each boundary, its summary (the last `isCompactSummary`
/// record pointing at it), and which records are summaries (they merge into their
/// boundary and show nowhere else).
struct Summaries {
    of_boundary: HashMap<usize, usize>,
    is_summary: Vec<bool>,
}

fn compaction_summaries(
    records: &[Record],
    kept: impl Fn(usize) -> bool,
    dedup: &Dedup,
    uuid_index: &HashMap<&str, usize>,
) -> Summaries {
    let mut out = Summaries {
        of_boundary: HashMap::new(),
        is_summary: vec![false; records.len()],
    };
    for (i, r) in records.iter().enumerate() {
        if !kept(i) || r.kind != RecordKind::User || !r.is_compact_summary {
            continue;
        }
        let parent = r.raw_parent().map(|p| dedup.resolve(records, p));
        if let Some(&b) = parent.and_then(|p| uuid_index.get(p)) {
            if records[b].is_compact_boundary() {
                out.of_boundary.insert(b, i);
                out.is_summary[i] = true;
            }
        }
    }
    out
}

/// The units to order, with the records and the turn of each.
struct Units<'a> {
    order: Vec<OrderUnit<'a>>,
    records: Vec<Vec<usize>>,
    turn: Vec<Option<usize>>,
}

/// The unit a unit's parent resolved to, and whether that parent is the spawning call.
fn unit_parent(link: ParentLink) -> (Option<usize>, bool) {
    match link {
        ParentLink::Unit(p, slot) => (Some(p), slot == ParentSlot::Spawn),
        _ => (None, false),
    }
}

/// One unit per turn (at its first record) and one per other kept record that takes part
/// in the order: conversational records, and any record with a uuid (it may be a parent).
fn build_units<'a>(
    records: &'a [Record],
    kept: impl Fn(usize) -> bool,
    turns: &[Turn],
    turn_of: &[Option<usize>],
    candidates: impl Fn(usize) -> [Option<&'a str>; 3],
) -> Units<'a> {
    let mut units = Units {
        order: Vec::new(),
        records: Vec::new(),
        turn: Vec::new(),
    };
    let mut turn_done = vec![false; turns.len()];
    for (i, r) in records.iter().enumerate() {
        if !kept(i) || !(r.kind.is_conversational() || r.uuid.is_some()) {
            continue;
        }
        match turn_of[i] {
            Some(t) if turn_done[t] => {}
            Some(t) => {
                turn_done[t] = true;
                let turn = &turns[t];
                let anchor = &records[turn.anchor()];
                units.order.push(OrderUnit {
                    ids: turn
                        .chunks
                        .iter()
                        .filter_map(|&c| records[c].uuid.as_deref())
                        .collect(),
                    parents: candidates(turn.head),
                    key: SortKey::new(anchor.time, anchor.pos),
                });
                units.records.push(turn.chunks.clone());
                units.turn.push(Some(t));
            }
            None => {
                units.order.push(OrderUnit {
                    ids: r.uuid.as_deref().into_iter().collect(),
                    parents: candidates(i),
                    key: SortKey::new(r.time, r.pos),
                });
                units.records.push(vec![i]);
                units.turn.push(None);
            }
        }
    }
    units
}

/// What the diagnostics need from the pipeline's intermediate results.
struct Findings<'a> {
    files: &'a [FileInfo],
    records: &'a [Record],
    dedup: &'a Dedup,
    file_stats: &'a [FileStats],
    ordering: &'a Ordering,
    units: &'a [OrderUnit<'a>],
    unit_records: &'a [Vec<usize>],
}

impl Findings<'_> {
    fn issue(&self, i: usize, related: Option<&str>, reason: &str) -> RecordIssue {
        let r = &self.records[i];
        RecordIssue {
            file: self.files[r.pos.file as usize].name.clone(),
            line: r.pos.line,
            uuid: r.uuid.as_deref().map(str::to_owned),
            related_uuid: related.map(str::to_owned),
            reason: reason.to_owned(),
        }
    }

    fn record(&self, d: &mut Diagnostics, linking: &Linking) {
        for (fi, f) in self.files.iter().enumerate() {
            let role = match (f.role, f.included) {
                (_, false) => "ignored",
                (FileRole::Main, _) => "main",
                (FileRole::SubAgent, _) => "subagent",
                (FileRole::SubAgentMeta, _) => "subagent_meta",
            };
            d.files.push(FileSummary {
                name: f.name.clone(),
                role,
                agent_id: (f.role != FileRole::Main)
                    .then(|| agent_id_from_name(crate::formats::input::base_name(&f.name)).map(str::to_owned))
                    .flatten(),
                bytes: f.bytes,
                lines: self.file_stats[fi].lines,
                records: self.file_stats[fi].records,
            });
        }
        for (i, reason) in self.dedup.dropped.iter().enumerate() {
            let Some(reason) = reason else { continue };
            let twin = self.dedup.twin[i].and_then(|t| self.records[t].uuid.as_deref());
            let found = self.issue(i, twin, reason.describe());
            match reason {
                DropReason::SameUuid => d.duplicates_removed.same_uuid += 1,
                DropReason::AssistantSignature => d.duplicates_removed.assistant_signature += 1,
                DropReason::UserPartialCopy => d.duplicates_removed.user_partial_copy += 1,
                DropReason::PhantomBranch => {
                    d.phantom_branch_removed.push(found);
                    continue;
                }
            }
            d.duplicate_samples.push(found);
        }
        for &u in &self.ordering.orphans {
            let missing_parent = self.units[u].parents.iter().flatten().next().copied();
            d.orphans.push(self.issue(
                self.unit_records[u][0],
                missing_parent,
                "parent not in the session; ordered as a new root",
            ));
        }
        for &u in &self.ordering.dangling_logical {
            let logical = self.units[u].parents[ParentSlot::Logical as usize];
            d.dangling_logical_parents.push(self.issue(
                self.unit_records[u][0],
                logical,
                "logicalParentUuid names a record never written; parentUuid used",
            ));
        }
        for &u in &self.ordering.cycles_broken {
            let parent = self.units[u].parents.iter().flatten().next().copied();
            d.cycles_broken.push(self.issue(
                self.unit_records[u][0],
                parent,
                "on a parent cycle; ordered as a root",
            ));
        }
        d.subagents_missing = linking.missing.clone();
        d.subagents_unlinked = linking.unlinked.clone();
        for (fi, reason) in &linking.ignored {
            d.ignored_files.push(LineIssue {
                file: self.files[*fi].name.clone(),
                line: 0,
                reason: reason.clone(),
            });
        }
    }
}

/// A record's parent candidates (see [`OrderUnit::parents`]), with removed duplicates
/// replaced by their kept twins. The spawning call counts only for a root.
fn parent_candidates<'a>(
    r: &'a Record,
    records: &'a [Record],
    dedup: &Dedup,
    spawn_of_file: &HashMap<u32, &'a str>,
) -> [Option<&'a str>; 3] {
    let resolve = |u: Option<&'a str>| u.map(|u| dedup.resolve(records, u));
    let logical = resolve(r.logical_parent_uuid());
    let raw = resolve(r.raw_parent());
    let spawn = if logical.is_none() && raw.is_none() {
        spawn_of_file.get(&r.pos.file).copied()
    } else {
        None
    };
    [logical, raw, spawn]
}

/// Types the pipeline understands, by name (the others load, and may be parents, but show
/// nowhere).
fn is_known_type(name: &str) -> bool {
    matches!(
        name,
        "user" | "assistant" | "system"
            // Claude Code
            | "file-history-snapshot" | "queue-operation" | "summary"
            // pi
            | "session" | "model_change" | "thinking_level_change" | "custom" | "label" | "session_info"
    )
}

fn item_kind(records: &[Record], i: usize, summaries: &Summaries) -> Option<ItemKind> {
    let r = &records[i];
    match r.kind {
        RecordKind::User => {
            if summaries.is_summary[i] || r.message.is_none() {
                return None;
            }
            if r.is_compact_summary && !r.has_tool_result() {
                // A summary without its boundary (Claude Code 1.0.x wrote none): the
                // system's compaction, never the human's words.
                return Some(ItemKind::Compact {
                    boundary: i,
                    summary: Some(i),
                });
            }
            match classify::classify_user(r) {
                UserClass::ToolResult { failed } => Some(ItemKind::ToolResult { record: i, failed }),
                UserClass::Meta => None,
                UserClass::Notice(kind) => Some(ItemKind::Notice { record: i, kind }),
                UserClass::Prompt => {
                    let shown = classify::trimmed_reaches(&classify::user_text(r), 1)
                        || !classify::images(r).is_empty();
                    shown.then_some(ItemKind::Prompt(i))
                }
            }
        }
        RecordKind::System if r.is_compact_boundary() => Some(ItemKind::Compact {
            boundary: i,
            summary: summaries.of_boundary.get(&i).copied(),
        }),
        RecordKind::System => Some(ItemKind::Notice {
            record: i,
            kind: NoticeKind::System,
        }),
        RecordKind::Assistant | RecordKind::Other(_) => None,
    }
}

/// The order lanes are shown in: main, then sub-agents in the order they start (by the
/// step of the Task call, else of the Task result, else of the lane's first node).
fn order_lanes(lanes: &[Lane], agents: &[Agent], workflow: &Workflow) -> Vec<usize> {
    let mut first_step: Vec<Option<usize>> = vec![None; lanes.len()];
    for n in &workflow.nodes {
        let s = &mut first_step[n.lane];
        if s.is_none() {
            *s = Some(n.step);
        }
    }
    let mut keyed: Vec<(usize, usize)> = lanes
        .iter()
        .enumerate()
        .map(|(l, lane)| {
            let key = match lane.agent {
                None => 0,
                Some(a) => {
                    let agent = &agents[a];
                    let call = agent
                        .tool_use_id
                        .as_deref()
                        .and_then(|t| workflow.call_node.get(t))
                        .map(|&n| workflow.nodes[n].step);
                    let result = agent
                        .tool_use_id
                        .as_deref()
                        .and_then(|t| workflow.result_node.get(t))
                        .map(|&n| workflow.nodes[n].step);
                    1 + call.or(result).or(first_step[l]).unwrap_or(usize::MAX - 1)
                }
            };
            (key, l)
        })
        .collect();
    keyed.sort_by_key(|&(k, l)| (k, l));
    keyed.into_iter().map(|(_, l)| l).collect()
}
