//! The pipeline: from a [`SessionInput`] to an analysed [`Session`] that every view reads.

use std::collections::HashMap;

use super::classify::{self, NoticeKind, UserClass};
use super::dedup::{dedup_records, Dedup, DropReason};
use super::diagnostics::{Diagnostics, FileSummary, LineIssue, RecordIssue};
use super::group::{group_turns, Turn};
use super::input::{agent_id_from_name, FileRole, SessionInput};
use super::order::{order_units, OrderUnit, Ordering, ParentLink, ParentSlot, SortKey};
use super::parse::parse_file;
use super::records::{Record, RecordKind};
use super::subagents::{index_tool_uses, link_subagents, Agent, LinkFile, ToolUseIndex};
use super::workflow::{build_workflow, Workflow, WorkflowInput};

/// How to load a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Fail on the first line that holds no readable record, instead of recording it.
    pub strict: bool,
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
        /// The `compact_boundary` record.
        boundary: usize,
        /// The `isCompactSummary` record that follows it, if any.
        summary: Option<usize>,
    },
}

/// One entry of the session, in order: what views turn into units, nodes and messages.
#[derive(Debug, Clone)]
pub struct Item {
    /// What it is.
    pub kind: ItemKind,
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
    /// What loading found and did.
    pub diagnostics: Diagnostics,
}

impl Session {
    /// Runs the whole pipeline on `input`.
    pub fn build(input: &SessionInput, options: LoadOptions) -> Result<Session, SessionError> {
        let main_input = input.main_index().ok_or(SessionError::NoMainFile)?;
        // The main log is file 0: it comes first in the stream (dedup keeps first copies).
        let order: Vec<usize> = std::iter::once(main_input)
            .chain((0..input.files.len()).filter(|&i| i != main_input))
            .collect();
        let sources: Vec<&super::input::SourceFile> = order.iter().map(|&i| &input.files[i]).collect();

        let mut diagnostics = Diagnostics::default();
        let mut records: Vec<Record> = Vec::new();
        let mut file_stats: Vec<(usize, usize)> = Vec::new();
        for (fi, f) in sources.iter().enumerate() {
            if f.role() == FileRole::SubAgentMeta {
                file_stats.push((0, 0));
                continue;
            }
            let parsed = parse_file(fi as u32, &f.bytes);
            if options.strict {
                if let Some(bad) = parsed.bad_lines.first() {
                    return Err(SessionError::InvalidLine {
                        file: f.name.clone(),
                        line: bad.line,
                        reason: bad.error.to_string(),
                    });
                }
            }
            for bad in &parsed.bad_lines {
                let mut reason = bad.error.to_string();
                if bad.unterminated {
                    reason.push_str(" (last line, no newline: the file may still be being written)");
                }
                diagnostics.bad_lines.push(LineIssue {
                    file: f.name.clone(),
                    line: bad.line,
                    reason,
                });
            }
            for fixed in &parsed.repaired {
                diagnostics.repaired_lines.push(LineIssue {
                    file: f.name.clone(),
                    line: fixed.line,
                    reason: fixed.repair.to_owned(),
                });
            }
            file_stats.push((parsed.lines, parsed.records.len()));
            records.extend(parsed.records);
        }

        let session_id = records
            .iter()
            .filter(|r| r.pos.file == 0)
            .find_map(|r| r.session_id.clone().filter(|s| !s.is_empty()));

        let link_files: Vec<LinkFile> = sources
            .iter()
            .map(|f| LinkFile {
                name: &f.name,
                role: f.role(),
                bytes: &f.bytes,
            })
            .collect();
        let linking = link_subagents(&records, &link_files, 0, session_id.as_deref());
        let included = linking.file_included.clone();
        let participates = |i: usize| included[records[i].pos.file as usize];

        for (i, r) in records.iter().enumerate() {
            if participates(i) {
                diagnostics.count_type(r.kind.name(), is_known_type(&r.kind));
            }
        }

        let dedup = dedup_records(&records, participates);
        let kept = |i: usize| participates(i) && dedup.is_kept(i);
        let tool_uses = index_tool_uses(&records, kept);
        let (turns, turn_of) = group_turns(&records, kept);
        let mut agents = linking.agents;

        // Lanes: main, then one per agent (sorted by position once the order is known).
        let mut lane_of_agent: HashMap<String, usize> = HashMap::new();
        let mut lanes = vec![Lane {
            id: "main".to_owned(),
            agent: None,
        }];
        for (a, agent) in agents.iter().enumerate() {
            lane_of_agent.insert(agent.agent_id.clone(), lanes.len());
            lanes.push(Lane {
                id: format!("agent-{}", agent.agent_id),
                agent: Some(a),
            });
        }
        let mut file_lane = vec![0usize; sources.len()];
        for (a, agent) in agents.iter().enumerate() {
            if let Some(f) = agent.file {
                file_lane[f] = lane_of_agent[&agents[a].agent_id];
            }
        }
        let mut record_lane = vec![0usize; records.len()];
        for (i, r) in records.iter().enumerate() {
            let fl = file_lane[r.pos.file as usize];
            record_lane[i] = if fl != 0 {
                fl
            } else if let (Some(true), Some(id)) = (r.is_sidechain, r.agent_id.as_deref()) {
                // A sidechain record inside the main log: its agent's lane.
                *lane_of_agent.entry(id.to_owned()).or_insert_with(|| {
                    agents.push(Agent {
                        agent_id: id.to_owned(),
                        ..Agent::default()
                    });
                    lanes.push(Lane {
                        id: format!("agent-{id}"),
                        agent: Some(agents.len() - 1),
                    });
                    lanes.len() - 1
                })
            } else {
                0
            };
        }

        // The spawning call of each sub-agent log, for the log's roots.
        let mut spawn_of_file: HashMap<u32, &str> = HashMap::new();
        for agent in &agents {
            if let (Some(f), Some(t)) = (agent.file, agent.task_record) {
                if let Some(uuid) = records[t].uuid.as_deref() {
                    spawn_of_file.insert(f as u32, dedup.resolve(&records, uuid));
                }
            }
        }

        // Compaction summaries merge into their boundary.
        let mut uuid_index: HashMap<&str, usize> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            if kept(i) {
                if let Some(u) = r.uuid.as_deref() {
                    uuid_index.entry(u).or_insert(i);
                }
            }
        }
        let mut summary_of: HashMap<usize, usize> = HashMap::new();
        let mut is_summary = vec![false; records.len()];
        for (i, r) in records.iter().enumerate() {
            if !kept(i) || r.kind != RecordKind::User || !r.is_compact_summary {
                continue;
            }
            let parent = r.raw_parent().map(|p| dedup.resolve(&records, p));
            if let Some(&b) = parent.and_then(|p| uuid_index.get(p)) {
                if records[b].is_compact_boundary() {
                    if let Some(previous) = summary_of.insert(b, i) {
                        is_summary[previous] = false;
                    }
                    is_summary[i] = true;
                }
            }
        }

        // Units: one per turn, one per other ordered record.
        let mut units: Vec<OrderUnit> = Vec::new();
        let mut unit_records: Vec<Vec<usize>> = Vec::new();
        let mut unit_turn: Vec<Option<usize>> = Vec::new();
        let candidates = |i: usize| parent_candidates(&records[i], &records, &dedup, &spawn_of_file);
        let mut turn_unit_done = vec![false; turns.len()];
        for (i, r) in records.iter().enumerate() {
            if !kept(i) || !(r.kind.is_conversational() || r.uuid.is_some()) {
                continue;
            }
            if let Some(t) = turn_of[i] {
                if turn_unit_done[t] {
                    continue;
                }
                turn_unit_done[t] = true;
                let turn = &turns[t];
                let ids: Vec<&str> = turn
                    .chunks
                    .iter()
                    .filter_map(|&c| records[c].uuid.as_deref())
                    .collect();
                let anchor = turn
                    .chunks
                    .iter()
                    .copied()
                    .find(|&c| {
                        candidates(c)
                            .iter()
                            .flatten()
                            .next()
                            .is_none_or(|p| !ids.contains(p))
                    })
                    .unwrap_or(turn.anchor());
                let a = &records[turn.anchor()];
                units.push(OrderUnit {
                    parents: candidates(anchor),
                    ids,
                    key: SortKey::new(a.time, a.pos),
                });
                unit_records.push(turn.chunks.clone());
                unit_turn.push(Some(t));
            } else {
                units.push(OrderUnit {
                    ids: r.uuid.as_deref().into_iter().collect(),
                    parents: candidates(i),
                    key: SortKey::new(r.time, r.pos),
                });
                unit_records.push(vec![i]);
                unit_turn.push(None);
            }
        }
        let ordering = order_units(&units);

        // Record-level parents (for edges): the record each record's parent id names.
        let mut record_parent = vec![None; records.len()];
        for recs in &unit_records {
            for &i in recs {
                let found = candidates(i)
                    .iter()
                    .flatten()
                    .find_map(|p| uuid_index.get(p).copied());
                record_parent[i] = found.filter(|&p| p != i);
            }
        }

        let mut record_sequence = Vec::with_capacity(records.len());
        let mut items = Vec::new();
        for &u in &ordering.sequence {
            record_sequence.extend_from_slice(&unit_records[u]);
            let (parent_record, parent_is_spawn) = match ordering.links[u] {
                ParentLink::Unit(p, slot) => {
                    let parent_id = units[u].parents[slot as usize];
                    let rec = parent_id
                        .and_then(|id| uuid_index.get(id).copied())
                        .or_else(|| unit_records[p].first().copied());
                    (rec, slot == ParentSlot::Spawn)
                }
                _ => (None, false),
            };
            let first = unit_records[u][0];
            let kind = match unit_turn[u] {
                Some(t) => {
                    let turn = &turns[t];
                    let has_content = !turn.thinking(&records).is_empty()
                        || !turn.texts(&records).is_empty()
                        || !turn.tool_uses(&records).is_empty();
                    has_content.then_some(ItemKind::Turn(t))
                }
                None => item_kind(&records[first], first, &summary_of, &is_summary),
            };
            if let Some(kind) = kind {
                let lane_record = match kind {
                    ItemKind::Turn(t) => turns[t].anchor(),
                    _ => first,
                };
                items.push(Item {
                    kind,
                    lane: record_lane[lane_record],
                    parent_record,
                    parent_is_spawn,
                });
            }
        }

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
        let found = Findings {
            files: &files,
            records: &records,
            dedup: &dedup,
            file_stats: &file_stats,
            ordering: &ordering,
            units: &units,
            unit_records: &unit_records,
        };
        found.record(
            &mut diagnostics,
            &linking.missing,
            &linking.unlinked,
            &linking.ignored,
        );

        let workflow = build_workflow(&WorkflowInput {
            records: &records,
            turns: &turns,
            items: &items,
            agents: &agents,
            lanes: &lanes,
            record_sequence: &record_sequence,
            record_parent: &record_parent,
        });
        let lane_order = order_lanes(&lanes, &agents, &workflow);

        Ok(Session {
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
            diagnostics,
        })
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

/// What the diagnostics need from the pipeline's intermediate results.
struct Findings<'a> {
    files: &'a [FileInfo],
    records: &'a [Record],
    dedup: &'a Dedup,
    file_stats: &'a [(usize, usize)],
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
            uuid: r.uuid.clone(),
            related_uuid: related.map(str::to_owned),
            reason: reason.to_owned(),
        }
    }

    fn record(
        &self,
        d: &mut Diagnostics,
        missing: &[String],
        unlinked: &[String],
        ignored: &[(usize, String)],
    ) {
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
                    .then(|| agent_id_from_name(super::input::base_name(&f.name)).map(str::to_owned))
                    .flatten(),
                bytes: f.bytes,
                lines: self.file_stats[fi].0,
                records: self.file_stats[fi].1,
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
        d.subagents_missing = missing.to_vec();
        d.subagents_unlinked = unlinked.to_vec();
        for (fi, reason) in ignored {
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
    let logical = resolve(r.logical_parent_uuid.as_deref());
    let raw = resolve(r.raw_parent());
    let spawn = if logical.is_none() && raw.is_none() {
        spawn_of_file.get(&r.pos.file).copied()
    } else {
        None
    };
    [logical, raw, spawn]
}

/// Types the pipeline understands (the others load, and may be parents, but show nowhere).
fn is_known_type(kind: &RecordKind) -> bool {
    match kind {
        RecordKind::Other(Some(t)) => {
            matches!(
                t.as_str(),
                "file-history-snapshot" | "queue-operation" | "summary"
            )
        }
        RecordKind::Other(None) => false,
        _ => true,
    }
}

fn item_kind(
    r: &Record,
    i: usize,
    summary_of: &HashMap<usize, usize>,
    is_summary: &[bool],
) -> Option<ItemKind> {
    match r.kind {
        RecordKind::User => {
            if is_summary[i] || r.message.is_none() {
                return None;
            }
            match classify::classify_user(r) {
                UserClass::ToolResult { failed } => Some(ItemKind::ToolResult { record: i, failed }),
                UserClass::Meta => None,
                UserClass::Notice(kind) => Some(ItemKind::Notice { record: i, kind }),
                UserClass::Prompt => {
                    let shown = !classify::user_text(r).trim().is_empty() || !classify::images(r).is_empty();
                    shown.then_some(ItemKind::Prompt(i))
                }
            }
        }
        RecordKind::System if r.is_compact_boundary() => Some(ItemKind::Compact {
            boundary: i,
            summary: summary_of.get(&i).copied(),
        }),
        RecordKind::System => Some(ItemKind::Notice {
            record: i,
            kind: NoticeKind::System,
        }),
        _ => None,
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
