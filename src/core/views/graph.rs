//! `GET /api/graph/{id}` and `GET /api/graph/{id}/metrics`: CommuGraph's communication
//! graph. Claude Code logs name no receivers, so the graph has one node per sender and no
//! edges (`docs/spec/graph-nodes-edges.md`); it is kept for the frontend's sake, as the reference
//! computes it.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};
use serde::Serialize;

use crate::core::jsnum::JsNumber;
use crate::core::records::RecordKind;
use crate::core::session::{ItemKind, Session};

/// `{"graph": ...}`.
#[derive(Debug, Serialize)]
pub struct GraphBody<'a> {
    /// The snapshot.
    pub graph: GraphSnapshot<'a>,
}

/// The communication graph.
#[derive(Debug, Serialize)]
pub struct GraphSnapshot<'a> {
    /// One node per sender, in order of first message (none when cut at a step: every node
    /// is isolated, as in the reference).
    pub nodes: Vec<SenderNode<'a>>,
    /// Always empty for Claude Code.
    pub edges: [(); 0],
    /// The step asked for.
    pub current_step: Option<u64>,
    /// Highest step index.
    pub total_steps: usize,
    /// Counts.
    pub metadata: GraphMetadata,
}

/// A sender.
#[derive(Debug, Serialize)]
pub struct SenderNode<'a> {
    id: String,
    label: String,
    message_count: usize,
    messages_sent: usize,
    messages_received: usize,
    first_appearance: Option<&'a str>,
    last_activity: Option<&'a str>,
    metadata: BTreeMap<(), ()>,
}

/// Graph counts.
#[derive(Debug, Serialize)]
pub struct GraphMetadata {
    node_count: usize,
    edge_count: usize,
    message_count: usize,
}

/// The sender of every workflow node, in step order: `user`, `assistant`, `system`,
/// `system - context compact`, or `agent-<id>` for a sub-agent's records.
pub fn senders(session: &Session) -> Vec<String> {
    session
        .workflow
        .nodes
        .iter()
        .map(|n| {
            let rec = &session.records[n.record];
            if let ItemKind::Compact { .. } = session.items[n.item].kind {
                return "system - context compact".to_owned();
            }
            match (&rec.kind, rec.agent_id.as_deref()) {
                (RecordKind::System, _) => "system".to_owned(),
                (_, Some(id)) => format!("agent-{id}"),
                (RecordKind::Assistant, None) => "assistant".to_owned(),
                _ => "user".to_owned(),
            }
        })
        .collect()
}

/// Per-sender tallies, in order of first message.
pub struct SenderStats {
    /// Sender ids in order of first appearance.
    pub ids: Vec<String>,
    counts: Vec<usize>,
    first: Vec<Option<usize>>,
    last: Vec<Option<usize>>,
}

impl SenderStats {
    /// Tallies the session's senders.
    pub fn of(session: &Session) -> Self {
        let mut stats = SenderStats {
            ids: Vec::new(),
            counts: Vec::new(),
            first: Vec::new(),
            last: Vec::new(),
        };
        let ts = |n: usize| {
            session.records[session.workflow.nodes[n].time_record]
                .timestamp
                .as_deref()
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        for (n, sender) in senders(session).into_iter().enumerate() {
            let s = match index.get(&sender) {
                Some(&s) => s,
                None => {
                    index.insert(sender.clone(), stats.ids.len());
                    stats.ids.push(sender);
                    stats.counts.push(0);
                    stats.first.push(None);
                    stats.last.push(None);
                    stats.ids.len() - 1
                }
            };
            stats.counts[s] += 1;
            if stats.first[s].is_none() && ts(n).is_some() {
                stats.first[s] = Some(n);
            }
            // The reference keeps the lexicographically greatest timestamp string.
            if ts(n) > stats.last[s].and_then(ts) {
                stats.last[s] = Some(n);
            }
        }
        stats
    }
}

/// Builds the body; with `step`, every node is isolated and so none is kept (reference).
pub fn graph(session: &Session, step: Option<u64>) -> GraphBody<'_> {
    let stats = SenderStats::of(session);
    let message_count = session.workflow.nodes.len();
    let ts = |n: Option<usize>| {
        n.and_then(|n| {
            session.records[session.workflow.nodes[n].time_record]
                .timestamp
                .as_deref()
        })
    };
    let nodes: Vec<SenderNode> = if step.is_some() {
        Vec::new()
    } else {
        (0..stats.ids.len())
            .map(|s| SenderNode {
                id: stats.ids[s].clone(),
                label: stats.ids[s].clone(),
                message_count: stats.counts[s],
                messages_sent: stats.counts[s],
                messages_received: 0,
                first_appearance: ts(stats.first[s]),
                last_activity: ts(stats.last[s]),
                metadata: BTreeMap::new(),
            })
            .collect()
    };
    GraphBody {
        graph: GraphSnapshot {
            metadata: GraphMetadata {
                node_count: nodes.len(),
                edge_count: 0,
                message_count,
            },
            nodes,
            edges: [],
            current_step: step,
            total_steps: message_count.saturating_sub(1),
        },
    }
}

/// `GET /api/graph/{id}/metrics`.
#[derive(Debug, Serialize)]
pub struct MetricsBody {
    node_count: usize,
    edge_count: usize,
    density: JsNumber,
    centrality: Centrality,
    in_degree_centrality: Centrality,
    out_degree_centrality: Centrality,
}

/// Centrality by node id, in node order. No edges, so every value is 0.
#[derive(Debug)]
pub struct Centrality(Vec<String>);

impl Serialize for Centrality {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for id in &self.0 {
            map.serialize_entry(id, &0)?;
        }
        map.end()
    }
}

/// Builds the metrics body (graph density and centralities; empty maps for one node).
pub fn metrics(session: &Session) -> MetricsBody {
    let ids = SenderStats::of(session).ids;
    let n = ids.len();
    let keyed = if n <= 1 { Vec::new() } else { ids };
    MetricsBody {
        node_count: n,
        edge_count: 0,
        density: JsNumber(0.0),
        centrality: Centrality(keyed.clone()),
        in_degree_centrality: Centrality(keyed.clone()),
        out_degree_centrality: Centrality(keyed),
    }
}
