//! The workflow DAG (CONTRACT 3.7): reasoning, tool call, result, prompt and notice nodes,
//! in session order, with edges that only ever point forward.
//!
//! Edges, for each node:
//! - a reasoning node hangs off its turn's parent; a turn's tool calls hang off its reasoning
//!   node (or off the turn's parent when it has none), flagged parallel when there are
//!   several;
//! - a result hangs off the call it answers (matched by `tool_use_id`), else off its parent;
//! - prompts, notices and compactions hang off their parent (a compaction off its logical
//!   parent);
//! - when a turn made several calls, every result joins into what follows the last result;
//! - a sub-agent lane starts from its Task call and returns into the Task result;
//! - a node still without an incoming edge continues from the previous node of its lane.
//!
//! Records without a node of their own (meta records, unknown types) pass their parent on,
//! so nothing hangs in the air. Every edge goes from a lower step to a higher one, so the
//! graph is acyclic, has no self-loops and has unique ids.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use foldhash::{HashMap, HashSet, HashSetExt};

use super::classify::{self, tool_description};
use super::group::Turn;
use super::items::{Item, ItemKind};
use super::lanes::Lane;
use super::subagents::Agent;
use crate::formats::claude_code::records::{Block, Id, Record};
use crate::heap::HeapSize;
use crate::json::literals::{Preview, Text};

/// The kind of a workflow node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    /// A user prompt.
    UserInput,
    /// A model response's thinking and text.
    AgentReasoning,
    /// One tool call.
    ToolCall,
    /// A tool result that succeeded.
    ResultSuccess,
    /// A tool result that failed.
    ResultFailure,
    /// A system notice or a compaction.
    SystemNotice,
}

impl NodeType {
    /// The wire name (`user_input`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::UserInput => "user_input",
            NodeType::AgentReasoning => "agent_reasoning",
            NodeType::ToolCall => "tool_call",
            NodeType::ResultSuccess => "result_success",
            NodeType::ResultFailure => "result_failure",
            NodeType::SystemNotice => "system_notice",
        }
    }
}

/// One node.
#[derive(Debug, Clone)]
pub struct Node {
    /// Unique id: the record's uuid (shared with the record); for a second node from the
    /// same record, `<uuid>/<tool_use_id>`.
    pub id: Id,
    /// Position in session order (0-based, dense).
    pub step: usize,
    /// The item it comes from.
    pub item: usize,
    /// Its kind.
    pub node_type: NodeType,
    /// Its lane (index into the session's lanes).
    pub lane: usize,
    /// The record it stands for (a turn's reasoning node: the first chunk with thinking or
    /// text; a tool call: the chunk holding it).
    pub record: usize,
    /// The record whose `timestamp` the node shows (a turn's nodes show the turn's).
    pub time_record: usize,
    /// Milliseconds since the epoch.
    pub time: Option<i64>,
    /// For tool calls: (record, block) of the `tool_use`, its index among the turn's calls
    /// and the number of calls in the turn.
    pub tool: Option<ToolCallRef>,
    /// A tool call's one-line description (its content), made by the first body that shows
    /// it: the workflow, the chat log and the graph all show it, and making it reads the
    /// call's input, often a whole file's text, long out of the cache.
    pub description: OnceLock<Box<str>>,
}

/// Where a tool call node's `tool_use` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolCallRef {
    /// Record holding the `tool_use`.
    pub record: usize,
    /// Block index within the record.
    pub block: usize,
    /// 0-based index among the turn's calls.
    pub index: usize,
    /// Number of calls in the turn.
    pub count: usize,
}

/// One edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Source node.
    pub source: usize,
    /// Target node.
    pub target: usize,
    /// A fork into several tool calls of one turn.
    pub parallel: bool,
    /// Between lanes (spawning or returning from a sub-agent).
    pub cross_lane: bool,
}

/// The workflow DAG of a session.
#[derive(Debug, Clone, Default)]
pub struct Workflow {
    /// Nodes in step order.
    pub nodes: Vec<Node>,
    /// Edges, ordered by target step, then source step.
    pub edges: Vec<Edge>,
    /// For each node, its incoming edges (indices into `edges`), in edge order.
    pub incoming: Adjacency,
    /// For each node, its outgoing edges, in edge order.
    pub outgoing: Adjacency,
    /// `tool_use` id -> its tool call node.
    pub call_node: HashMap<String, usize>,
    /// `tool_use` id -> the (last) result node answering it.
    pub result_node: HashMap<String, usize>,
    /// Input plus output tokens of every API message, each counted once.
    pub total_tokens: u64,
}

/// For each node, a list of edges (indices into [`Workflow::edges`]), all lists in one
/// array: a `Vec` per node cost 56 bytes and an allocation even for one edge.
/// Indices are `u32`: four billion edges would not fit in memory anyway.
#[derive(Debug, Clone, Default)]
pub struct Adjacency {
    /// Where each node's list starts in `edges`; one more entry than nodes.
    starts: Vec<u32>,
    /// The lists, one after the other.
    edges: Vec<u32>,
}

impl Adjacency {
    /// The lists of `nodes` nodes, where `node_of(e)` is the node edge `e` belongs to;
    /// each list keeps edge order.
    fn build(nodes: usize, edges: usize, node_of: impl Fn(usize) -> usize) -> Adjacency {
        let mut starts = vec![0u32; nodes + 1];
        for e in 0..edges {
            starts[node_of(e) + 1] += 1;
        }
        for n in 0..nodes {
            starts[n + 1] += starts[n];
        }
        let mut next = starts.clone();
        let mut list = vec![0u32; edges];
        for e in 0..edges {
            let slot = &mut next[node_of(e)];
            list[*slot as usize] = e as u32;
            *slot += 1;
        }
        Adjacency { starts, edges: list }
    }

    /// The edges of `node`, in edge order.
    pub fn of(&self, node: usize) -> impl ExactSizeIterator<Item = usize> + '_ {
        let (start, end) = (self.starts[node] as usize, self.starts[node + 1] as usize);
        self.edges[start..end].iter().map(|&e| e as usize)
    }
}

impl crate::heap::HeapSize for Adjacency {
    fn heap_size(&self) -> usize {
        self.starts.heap_size() + self.edges.heap_size()
    }
}

/// What building the workflow reads.
pub struct WorkflowInput<'a> {
    /// All records.
    pub records: &'a [Record],
    /// The turns.
    pub turns: &'a [Turn],
    /// The items, in order.
    pub items: &'a [Item],
    /// Which items to draw (all when `None`); node `item` indices stay the session's.
    pub include: Option<&'a [bool]>,
    /// The sub-agents.
    pub agents: &'a [Agent],
    /// The lanes.
    pub lanes: &'a [Lane],
    /// Ordered records.
    pub record_sequence: &'a [usize],
    /// Each record's parent record.
    pub record_parent: &'a [Option<usize>],
}

/// The ids given to nodes so far, held as the indices of the nodes that carry them: a set
/// of ids without a second copy of each (a `HashSet<String>` of them cost
/// about 70 bytes per node while the DAG was built).
#[derive(Default)]
struct NodeIds {
    table: hashbrown::HashTable<usize>,
    hasher: foldhash::fast::RandomState,
    /// For an id given more than once: the suffix below which every `{id}#{n}` is taken.
    /// Trying `#2, #3, ...` from 2 each time was quadratic in the repeats (a record with
    /// 20,000 tool calls sharing one id: 18.8 s to export).
    next_suffix: foldhash::HashMap<Id, u32>,
}

impl NodeIds {
    /// `id` when no node has it yet, else `{id}#{n}` for the least `n` from 2 on that none
    /// has.
    fn free(&mut self, nodes: &[Node], id: Id) -> Id {
        if !self.contains(nodes, &id) {
            return id;
        }
        let mut n = self.next_suffix.get(&id).copied().unwrap_or(2);
        let mut suffixed = format!("{id}#{n}");
        while self.contains(nodes, &suffixed) {
            n += 1;
            suffixed = format!("{id}#{n}");
        }
        self.next_suffix.insert(id, n + 1);
        Id::from(suffixed)
    }

    /// True when one of `nodes` already has `id`.
    fn contains(&self, nodes: &[Node], id: &str) -> bool {
        self.table
            .find(self.hasher.hash_one(id), |&n| &*nodes[n].id == id)
            .is_some()
    }

    /// Adds the id of `nodes[n]` (not already in the set).
    fn insert(&mut self, nodes: &[Node], n: usize) {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(&*nodes[n].id);
        self.table
            .insert_unique(hash, n, |&m| hasher.hash_one(&*nodes[m].id));
    }
}

/// Builds the DAG: the nodes of every item, in order, then the edges, rule by rule (see
/// the module's documentation).
pub fn build_workflow(input: &WorkflowInput<'_>) -> Workflow {
    let planned = node_capacity(input);
    let mut placement = NodePlacement::new(input, planned);
    for (item_index, item) in input.items.iter().enumerate() {
        let included = input.include.is_none_or(|inc| inc[item_index]);
        let nodes = if included {
            placement.place(item_index, item)
        } else {
            Vec::new()
        };
        placement.item_nodes.push(nodes);
    }
    let NodePlacement {
        mut w,
        record_node,
        item_nodes,
        ..
    } = placement;

    let effective = effective_nodes(input, &record_node);
    drop(record_node);
    let mut rules = EdgeRules {
        input,
        w: &w,
        item_nodes: &item_nodes,
        effective: &effective,
        edges: Vec::new(),
        primary_parent: vec![None; w.nodes.len()],
    };
    rules.add_primary_edges();
    rules.add_joins();
    rules.add_subagent_lanes();
    rules.keep_forward_edges_once();
    rules.add_lane_continuity();
    let mut edges = rules.edges;

    for e in &mut edges {
        e.cross_lane = e.cross_lane || w.nodes[e.source].lane != w.nodes[e.target].lane;
    }
    edges.sort_by_key(|e| (e.target, e.source));
    w.incoming = Adjacency::build(w.nodes.len(), edges.len(), |e| edges[e].target);
    w.outgoing = Adjacency::build(w.nodes.len(), edges.len(), |e| edges[e].source);
    debug_assert!(w.nodes.len() <= planned, "node_capacity is a bound");
    // Held for the session's life: give back what the bound left spare.
    w.nodes.shrink_to_fit();
    edges.shrink_to_fit();
    w.edges = edges;
    w
}

/// The first half of the build: each item's nodes, with unique ids, and the node each
/// record stands for.
struct NodePlacement<'i, 'a> {
    input: &'i WorkflowInput<'a>,
    /// The workflow so far (nodes, call and result indices, tokens).
    w: Workflow,
    /// For each record: the node it stands for, if it has one of its own.
    record_node: Vec<Option<usize>>,
    used_ids: NodeIds,
    /// For each item: its nodes (a turn's reasoning node first, then its calls).
    item_nodes: Vec<Vec<usize>>,
}

impl<'i, 'a> NodePlacement<'i, 'a> {
    fn new(input: &'i WorkflowInput<'a>, planned: usize) -> Self {
        NodePlacement {
            input,
            w: Workflow {
                nodes: Vec::with_capacity(planned),
                ..Workflow::default()
            },
            record_node: vec![None; input.records.len()],
            used_ids: NodeIds::default(),
            item_nodes: Vec::with_capacity(input.items.len()),
        }
    }

    /// A node of `item_index` for `record`, not yet placed.
    fn node(&self, item_index: usize, record: usize, node_type: NodeType) -> Node {
        Node {
            id: Id::from(""),
            step: 0,
            item: item_index,
            node_type,
            lane: self.input.items[item_index].lane,
            record,
            time_record: record,
            time: self.input.records[record].time,
            tool: None,
            description: OnceLock::new(),
        }
    }

    /// Places `node` at the next step under `base_id` (made unique); returns its index.
    fn push(&mut self, mut node: Node, base_id: Id) -> usize {
        let w = &mut self.w;
        node.id = self.used_ids.free(&w.nodes, base_id);
        node.step = w.nodes.len();
        w.nodes.push(node);
        self.used_ids.insert(&w.nodes, w.nodes.len() - 1);
        w.nodes.len() - 1
    }

    /// Places the node of a record that is an item of its own, standing for `records`;
    /// returns it.
    fn push_record(
        &mut self,
        item_index: usize,
        record: usize,
        node_type: NodeType,
        records: &[usize],
    ) -> usize {
        let node = self.node(item_index, record, node_type);
        let n = self.push(node, record_id(self.input.records, record));
        for &r in records {
            self.record_node[r] = Some(n);
        }
        n
    }

    /// Places the nodes of `item`; returns them.
    fn place(&mut self, item_index: usize, item: &Item) -> Vec<usize> {
        let n = match item.kind {
            ItemKind::Turn(t) => return self.place_turn(item_index, t),
            ItemKind::Prompt(r) => self.push_record(item_index, r, NodeType::UserInput, &[r]),
            ItemKind::ToolResult { record: r, failed } => {
                let kind = if failed {
                    NodeType::ResultFailure
                } else {
                    NodeType::ResultSuccess
                };
                let n = self.push_record(item_index, r, kind, &[r]);
                for t in answered_ids(&self.input.records[r]) {
                    self.w.result_node.insert(t.to_owned(), n);
                }
                n
            }
            ItemKind::Notice { record: r, .. } => {
                self.push_record(item_index, r, NodeType::SystemNotice, &[r])
            }
            ItemKind::Compact { boundary, summary } => {
                let n = self.push_record(item_index, boundary, NodeType::SystemNotice, &[boundary]);
                if let Some(s) = summary {
                    self.record_node[s] = Some(n);
                }
                n
            }
        };
        vec![n]
    }

    /// Places an assistant turn: its reasoning node (when it thinks or writes), then one
    /// node per tool call; returns them.
    fn place_turn(&mut self, item_index: usize, t: usize) -> Vec<usize> {
        let records = self.input.records;
        let turn = &self.input.turns[t];
        let anchor = turn.anchor();
        if let Some(usage) = turn.usage(records) {
            self.w.total_tokens += usage.input_tokens + usage.output_tokens;
        }
        let mut nodes = Vec::new();
        let reasoning = self.place_reasoning(item_index, turn);
        nodes.extend(reasoning);
        let calls = turn.tool_uses(records);
        let count = calls.len();
        for (index, (rec, block, tool)) in calls.into_iter().enumerate() {
            let mut node = self.node(item_index, rec, NodeType::ToolCall);
            node.time_record = anchor;
            node.time = records[anchor].time;
            node.tool = Some(ToolCallRef {
                record: rec,
                block,
                index,
                count,
            });
            let mut id = record_id(records, rec);
            if self.used_ids.contains(&self.w.nodes, &id) {
                id = Id::from(format!("{id}/{}", tool.id));
            }
            let n = self.push(node, id);
            if !tool.id.is_empty() {
                self.w.call_node.entry(tool.id.clone()).or_insert(n);
            }
            if self.record_node[rec].is_none() {
                self.record_node[rec] = Some(n);
            }
            nodes.push(n);
        }
        // Chunks holding reasoning (or nothing) stand for the reasoning node; a
        // chunk holding a call stands for its first call unless it also reasons.
        for &c in &turn.chunks {
            let reasons = records[c]
                .blocks()
                .iter()
                .any(|b| matches!(b, Block::Thinking { .. } | Block::Text(_)));
            let mapped = if reasons { reasoning } else { None };
            self.record_node[c] = mapped
                .or(self.record_node[c])
                .or(reasoning)
                .or(nodes.first().copied());
        }
        nodes
    }

    /// Places a turn's reasoning node, at its first chunk that thinks or writes, when it
    /// does either.
    fn place_reasoning(&mut self, item_index: usize, turn: &Turn) -> Option<usize> {
        let records = self.input.records;
        let anchor = turn.anchor();
        if turn.thinking(records).is_empty() && turn.texts(records).is_empty() {
            return None;
        }
        let chunk = turn
            .chunks
            .iter()
            .copied()
            .find(|&c| {
                records[c].blocks().iter().any(|b| match b {
                    Block::Thinking { thinking, .. } => !thinking.is_empty(),
                    Block::Text(t) => !t.is_empty(),
                    _ => false,
                })
            })
            .unwrap_or(anchor);
        let mut node = self.node(item_index, chunk, NodeType::AgentReasoning);
        node.time_record = anchor;
        node.time = records[anchor].time;
        Some(self.push(node, record_id(records, chunk)))
    }
}

/// The effective node of every ordered record: its own, else its parent's (records
/// without a node of their own pass their parent on).
fn effective_nodes(input: &WorkflowInput<'_>, record_node: &[Option<usize>]) -> Vec<Option<usize>> {
    let mut effective: Vec<Option<usize>> = vec![None; input.records.len()];
    for &r in input.record_sequence {
        effective[r] = record_node[r].or_else(|| input.record_parent[r].and_then(|p| effective[p]));
    }
    effective
}

/// The second half of the build: the edges between the placed nodes, one rule at a time.
struct EdgeRules<'w, 'a> {
    input: &'w WorkflowInput<'a>,
    w: &'w Workflow,
    item_nodes: &'w [Vec<usize>],
    effective: &'w [Option<usize>],
    edges: Vec<Edge>,
    /// For each node: the source of its primary edge (the node it hangs off).
    primary_parent: Vec<Option<usize>>,
}

impl EdgeRules<'_, '_> {
    fn push(&mut self, source: usize, target: usize, parallel: bool, cross_lane: bool) {
        self.edges.push(Edge {
            source,
            target,
            parallel,
            cross_lane,
        });
    }

    /// Each item's nodes hang off its parent: a turn's reasoning off the parent and its
    /// calls off the reasoning (flagged parallel when several), a result off the calls it
    /// answers, anything else off its parent. A sub-agent's first item hangs off nothing
    /// here (see [`EdgeRules::add_subagent_lanes`]).
    fn add_primary_edges(&mut self) {
        for (i, item) in self.input.items.iter().enumerate() {
            let from_parent = if item.parent_is_spawn {
                None
            } else {
                item.parent_record.and_then(|p| self.effective[p])
            };
            let nodes = &self.item_nodes[i];
            if nodes.is_empty() {
                continue;
            }
            match item.kind {
                ItemKind::Turn(_) => self.add_turn_edges(nodes, from_parent),
                ItemKind::ToolResult { record, .. } => self.add_result_edges(nodes[0], record, from_parent),
                _ => {
                    if let Some(p) = from_parent {
                        self.push(p, nodes[0], false, false);
                        self.primary_parent[nodes[0]] = Some(p);
                    }
                }
            }
        }
    }

    /// A turn: reasoning off the parent, each call off the reasoning (or the parent).
    fn add_turn_edges(&mut self, nodes: &[usize], from_parent: Option<usize>) {
        let w = self.w;
        let reasoning = nodes
            .first()
            .copied()
            .filter(|&n| w.nodes[n].node_type == NodeType::AgentReasoning);
        let calls: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|&n| w.nodes[n].node_type == NodeType::ToolCall)
            .collect();
        let parallel = calls.len() > 1;
        if let (Some(r), Some(p)) = (reasoning, from_parent) {
            self.push(p, r, false, false);
            self.primary_parent[r] = Some(p);
        }
        for &c in &calls {
            if let Some(p) = reasoning.or(from_parent) {
                self.push(p, c, parallel, false);
                self.primary_parent[c] = Some(p);
            }
        }
    }

    /// A result answers every call named by its blocks (batched results), else hangs off
    /// its parent.
    fn add_result_edges(&mut self, n: usize, record: usize, from_parent: Option<usize>) {
        let w = self.w;
        let mut calls: Vec<usize> = answered_ids(&self.input.records[record])
            .filter_map(|t| w.call_node.get(t).copied())
            .filter(|&c| c < n)
            .collect();
        calls.sort_unstable();
        calls.dedup();
        if calls.is_empty() {
            calls.extend(from_parent);
        }
        for &p in &calls {
            self.push(p, n, false, false);
        }
        self.primary_parent[n] = calls.first().copied();
    }

    /// Joins: the results of a turn's parallel calls all lead to what follows the last one.
    fn add_joins(&mut self) {
        let (w, records) = (self.w, self.input.records);
        let mut first_child: Vec<Option<usize>> = vec![None; w.nodes.len()];
        for (n, p) in self.primary_parent.iter().enumerate() {
            if let Some(p) = *p {
                first_child[p] = Some(first_child[p].map_or(n, |c: usize| c.min(n)));
            }
        }
        for (i, item) in self.input.items.iter().enumerate() {
            if !matches!(item.kind, ItemKind::Turn(_)) {
                continue;
            }
            let mut results: Vec<usize> = self.item_nodes[i]
                .iter()
                .filter_map(|&n| {
                    let tool = records[w.nodes[n].tool?.record]
                        .blocks()
                        .get(w.nodes[n].tool?.block)?;
                    match tool {
                        Block::ToolUse(t) => w.result_node.get(&t.id).copied(),
                        _ => None,
                    }
                })
                .collect();
            results.sort_unstable();
            results.dedup();
            if results.len() < 2 {
                continue;
            }
            let last = *results.iter().max().unwrap_or(&0);
            if let Some(join) = first_child[last] {
                for &r in &results {
                    if r != last {
                        self.push(r, join, false, false);
                    }
                }
            }
        }
    }

    /// Sub-agent lanes: Task call -> the lane's first node; its last node -> Task result.
    fn add_subagent_lanes(&mut self) {
        let (w, input) = (self.w, self.input);
        let mut lane_first: Vec<Option<usize>> = vec![None; input.lanes.len()];
        let mut lane_last: Vec<Option<usize>> = vec![None; input.lanes.len()];
        for n in &w.nodes {
            lane_first[n.lane].get_or_insert(n.step);
            lane_last[n.lane] = Some(n.step);
        }
        for (l, lane) in input.lanes.iter().enumerate() {
            let Some(agent) = lane.agent.map(|a| &input.agents[a]) else {
                continue;
            };
            let Some(tool_use) = agent.tool_use_id.as_deref() else {
                continue;
            };
            if let (Some(&call), Some(first)) = (w.call_node.get(tool_use), lane_first[l]) {
                self.push(call, first, false, true);
            }
            if let (Some(&result), Some(last)) = (w.result_node.get(tool_use), lane_last[l]) {
                self.push(last, result, false, true);
            }
        }
    }

    /// Keeps forward edges only, once each.
    fn keep_forward_edges_once(&mut self) {
        let mut seen: HashSet<(usize, usize)> = HashSet::new();
        self.edges
            .retain(|e| e.source < e.target && seen.insert((e.source, e.target)));
    }

    /// Continuity: a node with no incoming edge continues from the previous node of its lane.
    fn add_lane_continuity(&mut self) {
        let w = self.w;
        let mut has_incoming = vec![false; w.nodes.len()];
        for e in &self.edges {
            has_incoming[e.target] = true;
        }
        let mut previous_in_lane: Vec<Option<usize>> = vec![None; self.input.lanes.len()];
        for (n, incoming) in has_incoming.iter().enumerate() {
            let lane = w.nodes[n].lane;
            if !incoming {
                if let Some(p) = previous_in_lane[lane] {
                    self.push(p, n, false, false);
                }
            }
            previous_in_lane[lane] = Some(n);
        }
    }
}

/// The order lanes are shown in: main, then sub-agents in the order they start (by the
/// step of the Task call, else of the Task result, else of the lane's first node).
pub(crate) fn order_lanes(lanes: &[Lane], agents: &[Agent], workflow: &Workflow) -> Vec<usize> {
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

/// At least the number of nodes `input` gives (a turn: a reasoning node and one per call;
/// any other item: one), so that the nodes are allocated once: grown by doubling, the
/// vector and its copy were both alive at the build's peak.
fn node_capacity(input: &WorkflowInput<'_>) -> usize {
    input
        .items
        .iter()
        .enumerate()
        .filter(|&(i, _)| input.include.is_none_or(|include| include[i]))
        .map(|(_, item)| match item.kind {
            ItemKind::Turn(t) => 1 + input.turns[t].tool_use_count(input.records),
            _ => 1,
        })
        .sum()
}

/// The `tool_use_id`s a result record answers, in block order.
fn answered_ids(r: &Record) -> impl Iterator<Item = &str> {
    r.blocks().iter().filter_map(|b| match b {
        Block::ToolResult(t) => t.tool_use_id.as_deref(),
        _ => None,
    })
}

/// The id a record gives its node: its uuid, or its position when it has none.
fn record_id(records: &[Record], r: usize) -> Id {
    let rec = &records[r];
    match &rec.uuid {
        Some(u) if !u.is_empty() => u.clone(),
        _ => Id::from(format!("line-{}-{}-{}", rec.pos.file, rec.pos.line, rec.pos.seq)),
    }
}

/// A compaction's text: its summary, else the boundary's content, else a fixed phrase.
pub fn compact_text(records: &[Record], boundary: usize, summary: Option<usize>) -> Text<'_> {
    summary
        .map(|s| classify::prompt_text(&records[s]))
        .filter(|s| !s.is_empty())
        .or_else(|| {
            records[boundary]
                .system_content()
                .filter(|s| !s.is_empty())
                .map(Text::json)
        })
        .unwrap_or_else(|| Text::from("Context compacted"))
}

/// The text a node shows (its `content`). Computed when a body is rendered rather than
/// stored, so that a session holds each text once, in its records.
///
/// A reasoning node shows its turn's thinking (`[Thinking]` then the blocks joined by blank
/// lines) and text (`[Response]` ...); a tool call the one-line description of the call; a
/// prompt or result the record's user text; a notice its notice text; a compaction its
/// summary.
pub fn node_content<'a>(records: &'a [Record], turns: &[Turn], items: &[Item], node: &'a Node) -> Text<'a> {
    match (node.node_type, items[node.item].kind) {
        (NodeType::AgentReasoning, ItemKind::Turn(t)) => reasoning_content(records, &turns[t]),
        (NodeType::ToolCall, _) => {
            let Some(tool) = node
                .tool
                .and_then(|t| super::subagents::tool_use_at(records, (t.record, t.block)))
            else {
                return Text::default();
            };
            let description = node
                .description
                .get_or_init(|| tool_description(tool).into_boxed_str());
            Text::from(&**description)
        }
        (_, ItemKind::Compact { boundary, summary }) => compact_text(records, boundary, summary),
        (NodeType::SystemNotice, _) => classify::notice_text(&records[node.record]),
        _ => classify::user_text(&records[node.record]),
    }
}

/// A reasoning node's content: `[Thinking]` and the thinking blocks joined by blank lines,
/// then `[Response]` and the text blocks.
fn reasoning_content<'a>(records: &'a [Record], turn: &Turn) -> Text<'a> {
    let sections = [
        ("[Thinking]\n", turn.joined_thinking(records)),
        ("[Response]\n", turn.joined_texts(records)),
    ];
    let mut content = Text::new();
    for (heading, blocks) in sections.into_iter().filter(|(_, blocks)| !blocks.is_empty()) {
        if !content.is_empty() {
            content.push_str("\n\n");
        }
        content.push_str(heading);
        content.push_text(blocks);
    }
    content
}

/// `content` cut for previews: 100 UTF-16 units, the last three being `...` when cut.
pub fn preview(s: &Text<'_>) -> Preview {
    s.preview(100)
}

/// A result preview, cut at 200 units.
pub fn result_preview(s: &Text<'_>) -> Preview {
    s.preview(200)
}

impl HeapSize for Node {
    fn heap_size(&self) -> usize {
        self.id.heap_size() + self.description.get().map_or(0, |d| d.len())
    }
}

impl HeapSize for Workflow {
    fn heap_size(&self) -> usize {
        self.nodes.heap_size()
            + self.edges.heap_size()
            + self.incoming.heap_size()
            + self.outgoing.heap_size()
            + self.call_node.heap_size()
            + self.result_node.heap_size()
    }
}

crate::heap::owns_nothing!(Edge);
