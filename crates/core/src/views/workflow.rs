//! `GET /api/graph/{id}/workflow`: the workflow DAG as CommuGraph's frontend reads it.

use foldhash::HashMap;
use serde::Serialize;
use serde_json::Number;

use super::body::{write_elements_indexed, BodyWriter, ObjectMembers};
use crate::formats::claude_code::records::{JsonStr, RawJson, Record, RecordKind};
use crate::json::jsnum::JsNumber;
use crate::json::literals::{Preview, Text};
use crate::json::time::iso_millis;
use crate::pipeline::classify::{self, ImageRef};
use crate::pipeline::items::ItemKind;
use crate::pipeline::session::Session;
use crate::pipeline::subagents::{tool_use_at, Agent};
use crate::pipeline::workflow::{preview, result_preview, Node, NodeType, Workflow};

/// `{"workflow": ...}`.
#[derive(Debug, Serialize)]
pub struct WorkflowBody<'a> {
    /// The snapshot.
    pub workflow: Snapshot<'a>,
}

/// The DAG, optionally cut at a step.
#[derive(Debug, Serialize)]
pub struct Snapshot<'a> {
    /// Nodes with `stepIndex <= step`.
    pub nodes: NodesJson<'a>,
    /// Everything after the nodes.
    #[serde(flatten)]
    pub rest: SnapshotRest<'a>,
}

/// The members of a [`Snapshot`] after its nodes.
#[derive(Debug, Serialize)]
pub struct SnapshotRest<'a> {
    /// Edges between kept nodes.
    pub edges: EdgesJson<'a>,
    /// Everything after the edges.
    #[serde(flatten)]
    pub tail: SnapshotTail<'a>,
}

/// The members of a [`Snapshot`] after its edges.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotTail<'a> {
    /// Lanes with at least one kept node (all lanes when not cut).
    pub lanes: Vec<LaneJson<'a>>,
    /// The session's id.
    pub session_id: &'a str,
    /// The step asked for.
    pub current_step: Option<u64>,
    /// Number of nodes in the whole session.
    pub total_steps: usize,
    /// Earliest node time (ISO), `null` for a session without nodes.
    pub start_time: Option<String>,
    /// Latest node time.
    pub end_time: Option<String>,
    /// `endTime - startTime` in milliseconds.
    pub total_duration_ms: Option<i64>,
    /// Input plus output tokens, each API message counted once.
    pub total_tokens: u64,
    /// Number of tool call nodes.
    pub total_tool_calls: usize,
    /// Successful results over all results; 1 when there are none.
    pub tool_success_rate: JsNumber,
}

/// One node on the wire (keys in the reference's order).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeJson<'a> {
    id: &'a str,
    step_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    node_type: &'static str,
    label: &'a str,
    content: Text<'a>,
    content_preview: Preview,
    lane_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_sidechain: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_input: Option<&'a RawJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result_preview: Option<Preview>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result_status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result_stdout: Option<Preview>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result_stderr: Option<Preview>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uuid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_uuid: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logical_parent_uuid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    parent_node_ids: Vec<&'a str>,
    child_node_ids: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_context_compact: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_summary: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compact_metadata: Option<&'a RawJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<ImageRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_group_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_sub_agent_container: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_agent_info: Option<SubAgentInfo<'a>>,
}

/// The compaction fields of a node: `isContextCompact` (system records only), the summary
/// and the metadata (compactions only).
pub fn node_compaction<'a>(
    session: &'a Session,
    node: &Node,
) -> (Option<bool>, Option<Text<'a>>, Option<&'a RawJson>) {
    let rec = &session.records[node.record];
    match session.items[node.item].kind {
        ItemKind::Compact { summary, .. } => (
            Some(true),
            summary
                .map(|s| classify::prompt_text(&session.records[s]))
                .filter(|s| !s.is_empty()),
            rec.compact_metadata(),
        ),
        _ if rec.kind == RecordKind::System => (Some(false), None, None),
        _ => (None, None, None),
    }
}

/// The base64 images of the user record a node shows (none for model output).
pub fn node_images<'a>(session: &'a Session, node: &Node) -> Vec<ImageRef<'a>> {
    match node.node_type {
        NodeType::AgentReasoning | NodeType::ToolCall => Vec::new(),
        _ => classify::images(&session.records[node.record]),
    }
}

/// What a Task call node says about the sub-agent it spawned.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAgentInfo<'a> {
    agent_id: &'a str,
    subagent_type: &'a str,
    prompt: Text<'a>,
    prompt_preview: Preview,
    total_duration_ms: JsonNumberOr0<'a>,
    total_tokens: JsonNumberOr0<'a>,
    total_tool_calls: JsonNumberOr0<'a>,
    status: &'static str,
}

/// A number passed through as written, or `0`.
#[derive(Debug)]
pub struct JsonNumberOr0<'a>(Option<&'a Number>);

impl Serialize for JsonNumberOr0<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(n) => n.serialize(s),
            None => s.serialize_u64(0),
        }
    }
}

/// The edges between kept nodes, each made as it is written: a session's edges on the
/// wire are as many as its nodes, each with an id of its own.
#[derive(Debug, Clone, Copy)]
pub struct EdgesJson<'a> {
    w: &'a Workflow,
    step: Option<u64>,
}

impl<'a> EdgesJson<'a> {
    /// The edges, in the workflow's order.
    pub fn iter(&self) -> impl Iterator<Item = EdgeJson<'a>> + 'a {
        let (w, step) = (self.w, self.step);
        let keep = move |n: usize| step.is_none_or(|s| (w.nodes[n].step as u64) <= s);
        w.edges
            .iter()
            .filter(move |e| keep(e.source) && keep(e.target))
            .map(move |e| edge_json(w, e))
    }
}

impl Serialize for EdgesJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// One edge on the wire.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeJson<'a> {
    id: String,
    source: &'a str,
    target: &'a str,
    duration_ms: i64,
    duration_class: &'static str,
    is_parallel: bool,
    is_cross_lane: bool,
    step_index: usize,
}

/// One lane on the wire.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneJson<'a> {
    id: &'a str,
    label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subagent_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_duration_ms: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tokens: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tool_use_count: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a str>,
    /// Nesting depth (1 for an agent spawned by the main agent); ours, not the reference's.
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<usize>,
    /// The agent's name: the spawning Task call's `subagent_type`, `unknown` without one
    /// (`docs/spec/claude-code-dag.md`); ours, not the reference's.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_name: Option<&'a str>,
}

/// The reference's duration classes (milliseconds).
pub fn duration_class(ms: i64) -> &'static str {
    match ms {
        ..500 => "fast",
        500..2000 => "medium",
        2000..5000 => "slow",
        _ => "very_slow",
    }
}

/// The node's label (`User Input`, `Thinking + Response`, the tool's name, ...).
pub fn node_label<'a>(session: &'a Session, node: &Node) -> &'a str {
    match node.node_type {
        NodeType::UserInput => "User Input",
        NodeType::AgentReasoning => {
            let ItemKind::Turn(t) = session.items[node.item].kind else {
                return "Agent Response";
            };
            let turn = &session.turns[t];
            match (
                turn.thinking(&session.records).is_empty(),
                turn.texts(&session.records).is_empty(),
            ) {
                (false, false) => "Thinking + Response",
                (false, true) => "Agent Thinking",
                _ => "Agent Response",
            }
        }
        NodeType::ToolCall => match node_tool(session, node).map(|t| t.name.as_str()) {
            Some("Task") => "call-sub-agent",
            Some(name) => name,
            None => "",
        },
        NodeType::ResultSuccess => "Success",
        NodeType::ResultFailure => "Failure",
        NodeType::SystemNotice => match session.items[node.item].kind {
            ItemKind::Compact { .. } => "Context Compact",
            _ => "System",
        },
    }
}

fn node_tool<'a>(
    session: &'a Session,
    node: &Node,
) -> Option<&'a crate::formats::claude_code::records::ToolUse> {
    let t = node.tool?;
    tool_use_at(&session.records, (t.record, t.block))
}

/// The tool name of the call a result answers.
fn answered_tool<'a>(session: &'a Session, record: &Record) -> Option<&'a str> {
    let id = record.first_tool_use_id()?;
    let &n = session.workflow.call_node.get(id)?;
    node_tool(session, &session.workflow.nodes[n]).map(|t| t.name.as_str())
}

/// The tool a node is about: a call's own, a result's call's (`toolName` of the workflow
/// node and of its chat-log entry); `None` for other nodes and for a result whose call is
/// not in the session.
pub fn node_tool_name<'a>(session: &'a Session, node: &Node) -> Option<&'a str> {
    match node.node_type {
        NodeType::ToolCall => node_tool(session, node).map(|t| t.name.as_str()),
        NodeType::ResultSuccess | NodeType::ResultFailure => {
            answered_tool(session, &session.records[node.record])
        }
        _ => None,
    }
}

/// Lane id of a lane index.
pub fn lane_id(session: &Session, lane: usize) -> &str {
    &session.lanes[lane].id
}

/// Where a whole workflow body's nodes and edges are in it (byte offsets).
#[derive(Debug, Clone, Default)]
pub struct WorkflowLayout {
    /// Where the first node starts.
    pub(super) nodes_start: usize,
    /// Where each node ends; the next starts after its comma.
    pub(super) node_ends: Vec<usize>,
    /// Where the first edge starts.
    pub(super) edges_start: usize,
    /// Where each edge ends.
    pub(super) edge_ends: Vec<usize>,
    /// Length of what follows the edges (the lanes and the totals).
    pub(super) tail_len: usize,
}

impl WorkflowLayout {
    pub(super) fn node_range(&self, n: usize) -> std::ops::Range<usize> {
        element_range(self.nodes_start, &self.node_ends, n)
    }

    pub(super) fn edge_range(&self, e: usize) -> std::ops::Range<usize> {
        element_range(self.edges_start, &self.edge_ends, e)
    }

    /// True when it describes a whole body of `w`.
    pub(super) fn describes(&self, w: &Workflow) -> bool {
        self.node_ends.len() == w.nodes.len() && self.edge_ends.len() == w.edges.len()
    }
}

/// Element `i` of a list whose first element starts at `start` and whose elements end at
/// `ends`, each followed by a comma.
fn element_range(start: usize, ends: &[usize], i: usize) -> std::ops::Range<usize> {
    let from = if i == 0 { start } else { ends[i - 1] + 1 };
    from..ends[i]
}

/// The node list, written node by node as it is serialised (a large session's nodes are
/// never all built at once).
#[derive(Debug)]
pub struct NodesJson<'a> {
    pub(super) session: &'a Session,
    pub(super) w: &'a Workflow,
    pub(super) step: Option<u64>,
}

impl<'a> NodesJson<'a> {
    /// True when node `n` is within the step asked for.
    fn keep(&self, n: usize) -> bool {
        self.step.is_none_or(|s| (self.w.nodes[n].step as u64) <= s)
    }

    /// The agent each Task call spawned (one that returned a result), by `tool_use` id.
    pub(super) fn spawned(&self) -> HashMap<&'a str, &'a Agent> {
        self.session
            .agents
            .iter()
            .filter(|a| a.result_record.is_some())
            .filter_map(|a| Some((a.tool_use_id.as_deref()?, a)))
            .rev()
            .collect()
    }

    /// Node `n` on the wire, or `None` when it is cut.
    pub(super) fn node(&self, n: usize, spawned: &HashMap<&'a str, &'a Agent>) -> Option<NodeJson<'a>> {
        let keep = |m: usize| self.keep(m);
        self.keep(n)
            .then(|| node_json(self.session, self.w, n, &keep, spawned))
    }
}

impl Serialize for NodesJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let spawned = self.spawned();
        s.collect_seq((0..self.w.nodes.len()).filter_map(|n| self.node(n, &spawned)))
    }
}

/// What a workflow body starts with, up to its first node.
pub(super) const NODES_OPEN: &[u8] = br#"{"workflow":{"nodes":["#;

/// What comes between a workflow body's last node and its first edge.
pub(super) const EDGES_OPEN: &[u8] = br#"],"edges":["#;

/// Writes `body` as serialising it would, with the nodes rendered in parallel (they are
/// most of a workflow's bytes), into an empty `out`. Returns where its nodes and edges are,
/// for bodies cut at a step to share them (see [`super::step`]).
pub fn write_parallel(body: &WorkflowBody<'_>, out: &mut impl BodyWriter) -> std::io::Result<WorkflowLayout> {
    let nodes = &body.workflow.nodes;
    let spawned = nodes.spawned();
    out.write_all(NODES_OPEN)?;
    let nodes_start = out.written();
    let node_ends = write_elements_indexed(out, nodes.w.nodes.len(), |n| nodes.node(n, &spawned))?;
    out.write_all(EDGES_OPEN)?;
    let edges_start = out.written();
    let mut edge_ends = Vec::with_capacity(nodes.w.edges.len());
    for edge in body.workflow.rest.edges.iter() {
        if !edge_ends.is_empty() {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &edge)?;
        edge_ends.push(out.written());
    }
    out.write_all(b"],")?;
    let tail_start = out.written();
    serde_json::to_writer(ObjectMembers::new(out), &body.workflow.rest.tail)?;
    out.write_all(b"}")?;
    Ok(WorkflowLayout {
        nodes_start,
        node_ends,
        edges_start,
        edge_ends,
        tail_len: out.written() - tail_start,
    })
}

/// Builds the body; with `step`, cut at that step (CONTRACT 3.7: the node lists of the kept
/// nodes are cut too).
pub fn workflow<'a>(session: &'a Session, w: &'a Workflow, step: Option<u64>) -> WorkflowBody<'a> {
    let nodes = NodesJson { session, w, step };
    WorkflowBody {
        workflow: Snapshot {
            nodes,
            rest: SnapshotRest {
                edges: EdgesJson { w, step },
                tail: snapshot_tail(session, w, step),
            },
        },
    }
}

/// An edge on the wire.
fn edge_json<'a>(w: &'a Workflow, e: &crate::pipeline::workflow::Edge) -> EdgeJson<'a> {
    let (s, t) = (&w.nodes[e.source], &w.nodes[e.target]);
    let duration = match (s.time, t.time) {
        (Some(a), Some(b)) => (b - a).max(0),
        _ => 0,
    };
    EdgeJson {
        id: format!("{}->{}", s.id, t.id),
        source: &s.id,
        target: &t.id,
        duration_ms: duration,
        duration_class: duration_class(duration),
        is_parallel: e.parallel,
        is_cross_lane: e.cross_lane,
        step_index: t.step,
    }
}

/// The members after the edges: lanes of kept nodes, and the session's totals.
pub(super) fn snapshot_tail<'a>(session: &'a Session, w: &Workflow, step: Option<u64>) -> SnapshotTail<'a> {
    let keep = |n: usize| step.is_none_or(|s| (w.nodes[n].step as u64) <= s);
    let mut lane_used = vec![step.is_none(); session.lanes.len()];
    for n in w.nodes.iter().filter(|n| keep(n.step)) {
        lane_used[n.lane] = true;
    }
    let lanes = session
        .lane_order
        .iter()
        .filter(|&&l| lane_used[l])
        .map(|&l| lane_json(session, l))
        .collect();

    let times: Vec<i64> = w.nodes.iter().filter_map(|n| n.time).collect();
    let start = times.iter().min().copied();
    let end = times.iter().max().copied();
    let (mut ok, mut failed) = (0usize, 0usize);
    for n in &w.nodes {
        match n.node_type {
            NodeType::ResultSuccess => ok += 1,
            NodeType::ResultFailure => failed += 1,
            _ => {}
        }
    }
    SnapshotTail {
        lanes,
        session_id: session.session_id.as_deref().unwrap_or("unknown"),
        current_step: step,
        total_steps: w.nodes.len(),
        start_time: start.map(iso_millis),
        end_time: end.map(iso_millis),
        total_duration_ms: start.zip(end).map(|(a, b)| b - a),
        total_tokens: w.total_tokens,
        total_tool_calls: w
            .nodes
            .iter()
            .filter(|n| n.node_type == NodeType::ToolCall)
            .count(),
        tool_success_rate: JsNumber(if ok + failed == 0 {
            1.0
        } else {
            ok as f64 / (ok + failed) as f64
        }),
    }
}

fn lane_json(session: &Session, l: usize) -> LaneJson<'_> {
    let lane = &session.lanes[l];
    let Some(agent) = lane.agent.map(|a| &session.agents[a]) else {
        return LaneJson {
            id: &lane.id,
            label: "Main Agent".to_owned(),
            agent_id: None,
            tool_use_id: None,
            subagent_type: None,
            prompt: None,
            total_duration_ms: None,
            total_tokens: None,
            total_tool_use_count: None,
            status: None,
            depth: None,
            agent_name: None,
        };
    };
    LaneJson {
        id: &lane.id,
        label: format!(
            "Sub-agent: {}",
            agent.subagent_type.as_deref().unwrap_or(&agent.agent_id)
        ),
        agent_id: Some(&agent.agent_id),
        tool_use_id: agent.tool_use_id.as_deref(),
        subagent_type: agent.subagent_type.as_deref(),
        prompt: agent.prompt.as_ref().map(Text::json),
        total_duration_ms: agent.total_duration_ms.as_ref(),
        total_tokens: agent.total_tokens.as_ref(),
        total_tool_use_count: agent.total_tool_use_count.as_ref(),
        status: agent.status.as_deref(),
        depth: agent.depth,
        agent_name: Some(agent.subagent_type.as_deref().unwrap_or("unknown")),
    }
}

/// Node `n` on the wire: the fields every node has, then those of its type, its compaction
/// fields and its images. `keep` says which nodes are within the step asked for, `spawned`
/// is the agent each Task call spawned, by `tool_use` id.
fn node_json<'a>(
    session: &'a Session,
    w: &'a Workflow,
    n: usize,
    keep: &dyn Fn(usize) -> bool,
    spawned: &HashMap<&str, &'a Agent>,
) -> NodeJson<'a> {
    let node = &w.nodes[n];
    let mut json = common_node_json(session, w, n, keep);
    match (node.node_type, session.items[node.item].kind) {
        (NodeType::AgentReasoning, ItemKind::Turn(t)) => add_reasoning_fields(session, t, &mut json),
        (NodeType::ToolCall, ItemKind::Turn(t)) => add_tool_call_fields(session, w, n, t, spawned, &mut json),
        (NodeType::ResultSuccess | NodeType::ResultFailure, _) => add_result_fields(session, node, &mut json),
        _ => {}
    }
    (
        json.is_context_compact,
        json.compact_summary,
        json.compact_metadata,
    ) = node_compaction(session, node);
    json.images = node_images(session, node);
    json
}

/// Node `n` with the fields every node has (its parents and children among the nodes
/// `keep` keeps), the others empty.
fn common_node_json<'a>(
    session: &'a Session,
    w: &'a Workflow,
    n: usize,
    keep: &dyn Fn(usize) -> bool,
) -> NodeJson<'a> {
    let node = &w.nodes[n];
    let records = &session.records;
    let rec = &records[node.record];
    let label = node_label(session, node);
    let content = session.node_content(node);
    let content_preview = preview(&content);
    let ids = |edges: &mut dyn Iterator<Item = usize>,
               pick: fn(&crate::pipeline::workflow::Edge) -> usize|
     -> Vec<&'a str> {
        edges
            .map(|e| pick(&w.edges[e]))
            .filter(|&m| keep(m))
            .map(|m| &*w.nodes[m].id)
            .collect()
    };
    NodeJson {
        id: &node.id,
        step_index: node.step,
        timestamp: records[node.time_record].timestamp.as_deref(),
        node_type: node.node_type.as_str(),
        label,
        content,
        content_preview,
        lane_id: lane_id(session, node.lane),
        is_sidechain: rec.is_sidechain,
        agent_id: rec.agent_id.as_deref(),
        tool_name: None,
        tool_input: None,
        tool_use_id: None,
        tool_result_preview: None,
        tool_result_status: None,
        tool_result_stdout: None,
        tool_result_stderr: None,
        input_tokens: None,
        output_tokens: None,
        duration_ms: None,
        uuid: rec.uuid.as_deref(),
        parent_uuid: rec.parent_uuid.as_ref().map(|p| p.as_deref()),
        logical_parent_uuid: rec.logical_parent_uuid(),
        request_id: None,
        parent_node_ids: ids(&mut w.incoming.of(n), |e| e.source),
        child_node_ids: ids(&mut w.outgoing.of(n), |e| e.target),
        is_context_compact: None,
        compact_summary: None,
        compact_metadata: None,
        images: Vec::new(),
        parallel_group_id: None,
        parallel_index: None,
        parallel_count: None,
        is_sub_agent_container: None,
        sub_agent_info: None,
    }
}

/// The fields of the reasoning node of turn `t`: the turn's tokens, request and parent.
fn add_reasoning_fields<'a>(session: &'a Session, t: usize, json: &mut NodeJson<'a>) {
    let records = &session.records;
    let turn = &session.turns[t];
    let usage = turn.usage(records).unwrap_or_default();
    json.input_tokens = Some(usage.input_tokens);
    json.output_tokens = Some(usage.output_tokens);
    json.request_id = turn.request_id.as_deref();
    json.parent_uuid = records[turn.head].parent_uuid.as_ref().map(|p| p.as_deref());
}

/// The fields of node `n`, a tool call of turn `t`: the tool, the request, the parent, the
/// calls made with it, and the sub-agent it spawned.
fn add_tool_call_fields<'a>(
    session: &'a Session,
    w: &'a Workflow,
    n: usize,
    t: usize,
    spawned: &HashMap<&str, &'a Agent>,
    json: &mut NodeJson<'a>,
) {
    let node = &w.nodes[n];
    let records = &session.records;
    let turn = &session.turns[t];
    let tool = node_tool(session, node);
    json.tool_name = tool.map(|t| t.name.as_str());
    json.tool_input = tool.and_then(|t| t.input.as_ref());
    json.tool_use_id = tool.map(|t| t.id.as_str());
    json.request_id = turn.request_id.as_deref();
    // A call hangs off its turn's reasoning node, else off the turn's parent.
    let reasoning = w.nodes[..n]
        .iter()
        .rev()
        .take_while(|m| m.item == node.item)
        .find(|m| m.node_type == NodeType::AgentReasoning);
    json.parent_uuid = match reasoning {
        Some(r) => Some(records[r.record].uuid.as_deref()),
        None => records[turn.head].parent_uuid.as_ref().map(|p| p.as_deref()),
    };
    if let Some(call) = node.tool.filter(|c| c.count > 1) {
        json.parallel_group_id = turn.request_id.as_deref().or(turn.message_id.as_deref());
        json.parallel_index = Some(call.index);
        json.parallel_count = Some(call.count);
    }
    if let Some(tool) = tool {
        if let Some(agent) = spawned.get(tool.id.as_str()) {
            add_sub_agent_info(agent, json);
        }
    }
}

/// The fields of a result node: the tool answered, the result's previews and status, and
/// its duration.
fn add_result_fields<'a>(session: &'a Session, node: &Node, json: &mut NodeJson<'a>) {
    let rec = &session.records[node.record];
    let tur = rec.tool_use_result();
    json.tool_name = answered_tool(session, rec);
    json.tool_use_id = rec.first_tool_use_id();
    let nonempty = |s: Option<&'a JsonStr>| s.filter(|s| !s.is_empty()).map(Text::json);
    let stdout = tur.and_then(|t| nonempty(t.stdout.as_ref()));
    let stderr = tur.and_then(|t| nonempty(t.stderr.as_ref()));
    let first = tur.and_then(|t| nonempty(t.first_content_text.as_ref()));
    let shown = first
        .as_ref()
        .or(stdout.as_ref())
        .or(stderr.as_ref())
        .unwrap_or(&json.content);
    json.tool_result_preview = Some(result_preview(shown));
    let failed = node.node_type == NodeType::ResultFailure
        || tur.is_some_and(|t| t.status.as_deref() == Some("failed"));
    json.tool_result_status = Some(if failed { "failure" } else { "success" });
    json.tool_result_stdout = stdout.as_ref().map(result_preview);
    json.tool_result_stderr = stderr.as_ref().map(result_preview);
    json.duration_ms = tur.and_then(|t| t.total_duration_ms.as_ref());
}

fn add_sub_agent_info<'a>(agent: &'a Agent, json: &mut NodeJson<'a>) {
    let kind = agent.subagent_type.as_deref().unwrap_or("unknown");
    let prompt = agent.prompt.as_ref().map_or_else(Text::new, Text::json);
    json.is_sub_agent_container = Some(true);
    json.sub_agent_info = Some(SubAgentInfo {
        agent_id: &agent.agent_id,
        subagent_type: kind,
        prompt_preview: preview(&prompt),
        prompt,
        total_duration_ms: JsonNumberOr0(agent.total_duration_ms.as_ref()),
        total_tokens: JsonNumberOr0(agent.total_tokens.as_ref()),
        total_tool_calls: JsonNumberOr0(agent.total_tool_use_count.as_ref()),
        status: if agent.status.as_deref() == Some("completed") {
            "completed"
        } else {
            "failed"
        },
    });
}
