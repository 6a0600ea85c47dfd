//! The pipeline: from a [`SessionInput`] to an analysed [`Session`] that every view reads.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::dedup::{dedup_records, Dedup};
use super::findings::Findings;
use super::group::{group_turns, Turn};
use super::items::{build_items, Item};
use super::lanes::{assign_lanes, Lane};
use super::load::{LoadOptions, SessionError};
use super::read::{read_session, FileInfo, FileStats, ReadSession};
use super::subagents::{
    finish_gemini_linking, index_tool_uses, link_subagents, Agent, LinkFile, Linking, ToolUseIndex,
};
use super::tree::Tree;
use super::units::{kept_uuid_index, order_records, Ordered, Unit};
use super::workflow::{build_workflow, order_lanes, Node, Workflow, WorkflowInput};
use crate::diagnostics::{Diagnostics, LineIssue};
use crate::formats::claude_code::records::Record;
use crate::formats::gemini::GeminiHeader;
use crate::formats::input::{FileRole, Format, SessionInput, SourceFile};
use crate::formats::pi::PiHeader;
use crate::heap::HeapSize;

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
    /// The main log's `sessionId` (its first record that has one); a pi session's header's
    /// id; an AutoGen log's file name without its extension (the log names no session).
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
    /// The main chat's header, for Gemini sessions.
    pub gemini_header: Option<GeminiHeader>,
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
    /// Runs the whole pipeline on `input`, stage by stage: parse, link, dedup, group,
    /// order, items, then the tree beside the workflow. Each stage's time is kept in
    /// [`Session::timings`]. (Past the house's 80 lines only by the fields it moves into
    /// the session: every stage is a call.)
    pub fn build(input: &SessionInput, options: LoadOptions) -> Result<Session, SessionError> {
        let mut timings = Timings::start();
        let read = read_session(input, options)?;
        timings.mark("parse");
        let ReadSession {
            sources,
            format,
            records,
            file_stats,
            pi_header,
            gemini_header,
            roles,
            session_id,
            autogen,
            mut diagnostics,
        } = read;

        let linking = link_files(
            &records,
            &sources,
            &roles,
            &file_stats,
            format,
            session_id.as_deref(),
        );
        let included = &linking.file_included;
        let participates = |i: usize| included[records[i].pos.file as usize];
        for (stats, _) in file_stats.iter().zip(included).filter(|(_, &inc)| inc) {
            diagnostics.count_types(&stats.types, |name| is_known_type(format, name));
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
        let mut agents = linking.agents.clone();
        let (lanes, record_lane) = assign_lanes(&records, &mut agents, sources.len());
        timings.mark("group");

        let ordered = order_records(&records, kept, &dedup, &agents, &turns, &turn_of, &uuid_index);
        timings.mark("order");

        let items = build_items(
            &records,
            kept,
            &dedup,
            &uuid_index,
            &turns,
            &ordered,
            &record_lane,
        );
        drop(uuid_index);
        timings.mark("items");

        let files = file_infos(&sources, &roles, included);
        Findings {
            files: &files,
            records: &records,
            dedup: &dedup,
            file_stats: &file_stats,
            ordering: &ordered.ordering,
            units: &ordered.units.order,
            unit_records: &ordered.units.records,
        }
        .record(&mut diagnostics, &linking);
        // The units move into the session; what only the order needed goes now, before the
        // workflow allocates.
        let Ordered {
            units,
            ordering,
            record_parent,
            record_sequence,
            unit_of_record,
        } = ordered;
        let units = units.into_session_units(&ordering);

        let workflow_input = WorkflowInput {
            records: &records,
            turns: &turns,
            items: &items,
            include: None,
            agents: &agents,
            lanes: &lanes,
            record_sequence: &record_sequence,
            record_parent: &record_parent,
        };
        let (workflow, tree) = build_workflow_and_tree(&workflow_input, &units, &ordering.sequence, options);
        let lane_order = order_lanes(&lanes, &agents, &workflow);
        timings.mark("workflow");

        Ok(Session {
            input: kept_input(&sources, format),
            format,
            pi_header,
            gemini_header,
            units,
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
            timings: timings.stages,
            autogen,
        })
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

/// Ties each sub-agent log to the Task call that spawned it (see [`link_subagents`]). A pi
/// session is one file: every other file given with it is left out. A Gemini session is
/// its main chat and its sub-agents' chats: another main chat given with it is left out.
fn link_files(
    records: &[Record],
    sources: &[&SourceFile],
    roles: &[FileRole],
    file_stats: &[FileStats],
    format: Format,
    session_id: Option<&str>,
) -> Linking {
    let files: Vec<LinkFile> = sources
        .iter()
        .zip(roles)
        .zip(file_stats)
        .map(|((f, &role), stats)| LinkFile {
            name: &f.name,
            role,
            bytes: &f.bytes,
            session_id: stats.identity.session_id.as_deref(),
            agent_id: stats.identity.agent_id.as_deref(),
        })
        .collect();
    let mut linking = link_subagents(records, &files, 0, session_id);
    if format == Format::Pi {
        for (fi, f) in sources.iter().enumerate().skip(1) {
            if linking.file_included[fi] || f.role() != FileRole::SubAgentMeta {
                linking.file_included[fi] = false;
                linking.ignored.push((fi, "a pi session is one file".to_owned()));
            }
        }
        linking.agents.clear();
        linking.unlinked.clear();
    }
    if format == Format::Gemini {
        for (fi, role) in roles.iter().enumerate().skip(1) {
            if *role == FileRole::Main {
                linking.file_included[fi] = false;
                linking
                    .ignored
                    .push((fi, "another Gemini session's main chat".to_owned()));
            }
        }
        finish_gemini_linking(&mut linking, records);
    }
    linking
}

/// The session's files as it reports them, each in its `roles`; `included` says which
/// logs take part.
fn file_infos(sources: &[&SourceFile], roles: &[FileRole], included: &[bool]) -> Vec<FileInfo> {
    sources
        .iter()
        .zip(roles)
        .enumerate()
        .map(|(fi, (f, &role))| FileInfo {
            name: f.name.clone(),
            role,
            bytes: f.bytes.len(),
            included: role == FileRole::SubAgentMeta || included[fi],
        })
        .collect()
}

/// The input the session keeps: a Claude Code session's records borrow the text of its
/// logs; pi, Codex, Gemini and AutoGen sessions own theirs.
fn kept_input(sources: &[&SourceFile], format: Format) -> Vec<Bytes> {
    match format {
        Format::ClaudeCode => sources
            .iter()
            .filter(|f| f.role() != FileRole::SubAgentMeta)
            .map(|f| f.bytes.clone())
            .collect(),
        Format::Pi | Format::Autogen | Format::Codex | Format::Gemini => Vec::new(),
    }
}

/// The workflow (unless `options` leaves it out) and the tree, built side by side (the tree
/// needs the units alone).
fn build_workflow_and_tree(
    input: &WorkflowInput<'_>,
    units: &[Unit],
    sequence: &[usize],
    options: LoadOptions,
) -> (Workflow, Tree) {
    let tree = || Tree::of(input.records, units, sequence);
    if options.without_workflow {
        (Workflow::default(), tree())
    } else {
        rayon::join(|| build_workflow(input), tree)
    }
}

/// Types the pipeline understands, by name (the others load, and may be parents, but show
/// nowhere); a Codex rollout's line types are [`crate::formats::codex::is_known_type`]'s.
fn is_known_type(format: Format, name: &str) -> bool {
    if format == Format::Codex {
        return crate::formats::codex::is_known_type(name);
    }
    matches!(
        name,
        "user" | "assistant" | "system"
            // Claude Code
            | "file-history-snapshot" | "queue-operation" | "summary"
            // pi
            | "session" | "model_change" | "thinking_level_change" | "custom" | "label" | "session_info"
    )
}

impl HeapSize for Session {
    fn heap_size(&self) -> usize {
        self.heap_breakdown().iter().map(|(_, bytes)| bytes).sum()
    }
}

impl Session {
    /// [`HeapSize::heap_size`] by part: what each of the session's structures holds, so
    /// that a measurement can say where the bytes go.
    pub fn heap_breakdown(&self) -> Vec<(&'static str, usize)> {
        let records = self.records.capacity() * size_of::<Record>()
            + self.records.iter().map(HeapSize::heap_size).sum::<usize>();

        vec![
            ("input", self.input.iter().map(|b| b.len()).sum()),
            ("records", records),
            ("files", self.files.heap_size()),
            ("dedup", self.dedup.heap_size()),
            ("session id", self.session_id.heap_size()),
            ("turns", self.turns.heap_size()),
            ("agents", self.agents.heap_size()),
            ("lanes", self.lanes.heap_size() + self.lane_order.heap_size()),
            ("pi header", self.pi_header.heap_size()),
            ("gemini header", self.gemini_header.heap_size()),
            ("units", self.units.heap_size()),
            (
                "order",
                self.unit_sequence.heap_size()
                    + self.unit_of_record.heap_size()
                    + self.record_sequence.heap_size()
                    + self.record_parent.heap_size(),
            ),
            ("items", self.items.heap_size()),
            ("tool uses", self.tool_uses.heap_size()),
            ("workflow", self.workflow.heap_size()),
            ("diagnostics", self.diagnostics.heap_size()),
            ("tree", self.tree.heap_size()),
            (
                "timings",
                self.timings.capacity() * size_of::<(&str, std::time::Duration)>(),
            ),
            ("autogen", self.autogen.heap_size()),
        ]
    }
}
