//! `GET /api/graph/{id}` and `GET /api/graph/{id}/metrics`: CommuGraph's communication
//! graph. One node per party (every sender, and every party addressed), and one directed
//! edge per (source, target) pair carrying its interactions, inferred as
//! [`super::interactions`] describes; metrics from those edges (CONTRACT 3.13).
//!
//! Claude Code logs name no receivers, so CommuGraph's own graph has one node per sender
//! and no edges (`docs/spec/graph-nodes-edges.md`); `?edges=none` gives exactly that body
//! ([`GraphMode::Reference`]).
//!
//! `?step=N`, as CommuGraph does for AutoGen: each edge keeps its interactions up to step N
//! (its weight recounted), edges left empty go and so do the nodes left without an edge;
//! node counts are recounted up to N, while `first_appearance`, `last_activity` and the
//! graph's `message_count` keep their whole-session values.

use std::borrow::Cow;
use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};
use serde::Serialize;

use super::interactions::{interactions, Interaction, Previews};
use crate::formats::claude_code::records::RecordKind;
use crate::json::jsnum::JsNumber;
use crate::json::literals::Preview;
use crate::pipeline::items::ItemKind;
use crate::pipeline::session::Session;

/// `{"graph": ...}`.
#[derive(Debug, Serialize)]
pub struct GraphBody<'a> {
    /// The snapshot.
    pub graph: GraphSnapshot<'a>,
}

/// The communication graph.
#[derive(Debug, Serialize)]
pub struct GraphSnapshot<'a> {
    /// One node per party, in order of first appearance (cut at a step: those with an
    /// edge).
    pub nodes: Vec<SenderNode<'a>>,
    /// One per (source, target) pair, by source node then first appearance.
    pub edges: Vec<EdgeJson<'a>>,
    /// The step asked for.
    pub current_step: Option<u64>,
    /// Highest step index.
    pub total_steps: usize,
    /// Counts.
    pub metadata: GraphMetadata,
}

/// How the graph is built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GraphMode {
    /// With the inferred edges (ours).
    #[default]
    Edges,
    /// CommuGraph's body for Claude Code: senders only, no edges (`?edges=none`).
    Reference,
}

/// One directed edge: every interaction from `source` to `target`.
#[derive(Debug, Serialize)]
pub struct EdgeJson<'a> {
    pub(super) source: Cow<'a, str>,
    pub(super) target: Cow<'a, str>,
    pub(super) interactions: Vec<InteractionJson<'a>>,
    pub(super) weight: usize,
}

/// One interaction on the wire, as CommuGraph's AutoGen graph shows them.
#[derive(Debug, Serialize)]
pub(super) struct InteractionJson<'a> {
    pub(super) step_index: usize,
    pub(super) timestamp: Option<&'a str>,
    pub(super) intent: &'static str,
    pub(super) message_id: usize,
    pub(super) metadata: InteractionMetadata<'a>,
}

/// An interaction's metadata: the full content only for AutoGen (as CommuGraph gives it),
/// and `is_error: true` only for an AutoGen tool result the log marks failed.
#[derive(Debug, Serialize)]
pub(super) struct InteractionMetadata<'a> {
    pub(super) message_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) content: Option<&'a str>,
    pub(super) content_preview: Preview,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) is_error: bool,
}

/// A sender.
#[derive(Debug, Serialize)]
pub struct SenderNode<'a> {
    pub(super) id: String,
    pub(super) label: String,
    pub(super) message_count: usize,
    pub(super) messages_sent: usize,
    pub(super) messages_received: usize,
    pub(super) first_appearance: Option<&'a str>,
    pub(super) last_activity: Option<&'a str>,
    pub(super) metadata: BTreeMap<(), ()>,
}

/// Graph counts.
#[derive(Debug, Serialize)]
pub struct GraphMetadata {
    pub(super) node_count: usize,
    pub(super) edge_count: usize,
    pub(super) message_count: usize,
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
        SenderStats::of_senders(session, &senders(session))
    }

    /// Tallies `senders`, the sender of each of the session's workflow nodes.
    fn of_senders(session: &Session, senders: &[String]) -> Self {
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
        for (n, sender) in senders.iter().enumerate() {
            let s = match index.get(sender) {
                Some(&s) => s,
                None => {
                    index.insert(sender.clone(), stats.ids.len());
                    stats.ids.push(sender.clone());
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

impl SenderStats {
    /// The node of sender `s` with the counts given (`first_appearance` and
    /// `last_activity` are the whole session's).
    fn node<'a>(&self, session: &'a Session, s: usize, sent: usize, received: usize) -> SenderNode<'a> {
        let ts = |n: Option<usize>| {
            n.and_then(|n| {
                session.records[session.workflow.nodes[n].time_record]
                    .timestamp
                    .as_deref()
            })
        };
        SenderNode {
            id: self.ids[s].clone(),
            label: self.ids[s].clone(),
            message_count: sent,
            messages_sent: sent,
            messages_received: received,
            first_appearance: ts(self.first[s]),
            last_activity: ts(self.last[s]),
            metadata: BTreeMap::new(),
        }
    }
}

/// Builds the body in `mode`.
pub fn graph(session: &Session, step: Option<u64>, mode: GraphMode) -> GraphBody<'_> {
    match mode {
        GraphMode::Reference => reference_graph(session, step),
        GraphMode::Edges => graph_with_edges(session, step),
    }
}

/// CommuGraph's body: with `step`, every node is isolated and so none is kept.
fn reference_graph(session: &Session, step: Option<u64>) -> GraphBody<'_> {
    let stats = SenderStats::of(session);
    let message_count = session.workflow.nodes.len();
    let nodes: Vec<SenderNode> = if step.is_some() {
        Vec::new()
    } else {
        (0..stats.ids.len())
            .map(|s| stats.node(session, s, stats.counts[s], 0))
            .collect()
    };
    snapshot(
        nodes,
        Vec::new(),
        step,
        message_count.saturating_sub(1),
        message_count,
    )
}

/// The graph with the inferred edges, cut at `step` if given.
fn graph_with_edges(session: &Session, step: Option<u64>) -> GraphBody<'_> {
    let message_count = session.workflow.nodes.len();
    let upto = |s: usize| step.is_none_or(|n| (s as u64) <= n);
    let parties = Parties::of(session, Previews::Made);
    let kept: Vec<&Interaction> = parties.interactions.iter().filter(|i| upto(i.step)).collect();
    let edges = edges_of(&parties, &kept);
    let linked: Vec<bool> = (0..parties.ids.len())
        .map(|p| step.is_none() || edges.iter().any(|(s, t, _)| *s == p || *t == p))
        .collect();
    let mut sent = vec![0usize; parties.ids.len()];
    for (n, sender) in parties.senders.iter().enumerate() {
        if upto(n) {
            sent[parties.index[sender.as_str()]] += 1;
        }
    }
    let mut received = vec![0usize; parties.ids.len()];
    for i in &kept {
        received[parties.index[i.target.as_ref()]] += 1;
    }
    let nodes: Vec<SenderNode> = (0..parties.ids.len())
        .filter(|&p| linked[p])
        .map(|p| parties.node(session, p, sent[p], received[p]))
        .collect();
    let edges: Vec<EdgeJson> = edges
        .into_iter()
        .map(|(s, t, list)| edge_json(&parties, s, t, list))
        .collect();
    snapshot(nodes, edges, step, message_count.saturating_sub(1), message_count)
}

/// The body of a snapshot: its nodes and edges, with their counts.
pub(super) fn snapshot<'a>(
    nodes: Vec<SenderNode<'a>>,
    edges: Vec<EdgeJson<'a>>,
    step: Option<u64>,
    total_steps: usize,
    message_count: usize,
) -> GraphBody<'a> {
    GraphBody {
        graph: GraphSnapshot {
            metadata: GraphMetadata {
                node_count: nodes.len(),
                edge_count: edges.len(),
                message_count,
            },
            nodes,
            edges,
            current_step: step,
            total_steps,
        },
    }
}

/// The parties of a session: the senders (with their tallies) and the parties only
/// addressed, in order of first appearance; and the interactions between them.
struct Parties<'a> {
    /// The sender of each workflow node.
    senders: Vec<String>,
    stats: SenderStats,
    ids: Vec<String>,
    index: HashMap<String, usize>,
    interactions: Vec<Interaction<'a>>,
}

impl<'a> Parties<'a> {
    fn of(session: &'a Session, previews: Previews) -> Parties<'a> {
        let senders = senders(session);
        let stats = SenderStats::of_senders(session, &senders);
        let interactions = interactions(session, &senders, previews);
        let mut parties = Parties {
            senders: Vec::new(),
            stats,
            ids: Vec::new(),
            index: HashMap::new(),
            interactions: Vec::new(),
        };
        let mut next = interactions.iter().peekable();
        for (n, sender) in senders.iter().enumerate() {
            parties.add(sender);
            while let Some(i) = next.next_if(|i| i.step <= n) {
                parties.add(&i.source);
                parties.add(&i.target);
            }
        }
        for i in next {
            parties.add(&i.source);
            parties.add(&i.target);
        }
        parties.interactions = interactions;
        parties.senders = senders;
        parties
    }

    fn add(&mut self, id: &str) {
        if !self.index.contains_key(id) {
            self.index.insert(id.to_owned(), self.ids.len());
            self.ids.push(id.to_owned());
        }
    }

    /// The node of party `p`, with the counts given; a party that never sends has no
    /// message and no times.
    fn node(&self, session: &'a Session, p: usize, sent: usize, received: usize) -> SenderNode<'a> {
        let id = &self.ids[p];
        match self.stats.ids.iter().position(|s| s == id) {
            Some(s) => self.stats.node(session, s, sent, received),
            None => SenderNode {
                id: id.clone(),
                label: id.clone(),
                message_count: 0,
                messages_sent: 0,
                messages_received: received,
                first_appearance: None,
                last_activity: None,
                metadata: BTreeMap::new(),
            },
        }
    }
}

/// The edges of `kept`: (source, target, interactions), by source party, then by the first
/// appearance of the pair.
fn edges_of<'i, 'a>(
    parties: &Parties<'a>,
    kept: &[&'i Interaction<'a>],
) -> Vec<(usize, usize, Vec<&'i Interaction<'a>>)> {
    let mut by_pair: HashMap<(usize, usize), usize> = HashMap::new();
    let mut edges: Vec<(usize, usize, Vec<&Interaction>)> = Vec::new();
    for &i in kept {
        let pair = (parties.index[i.source.as_ref()], parties.index[i.target.as_ref()]);
        let e = *by_pair.entry(pair).or_insert_with(|| {
            edges.push((pair.0, pair.1, Vec::new()));
            edges.len() - 1
        });
        edges[e].2.push(i);
    }
    // Stable: within a source, pairs stay in order of first appearance.
    edges.sort_by_key(|(s, _, _)| *s);
    edges
}

fn edge_json<'a>(parties: &Parties<'a>, s: usize, t: usize, list: Vec<&Interaction<'a>>) -> EdgeJson<'a> {
    EdgeJson {
        source: Cow::Owned(parties.ids[s].clone()),
        target: Cow::Owned(parties.ids[t].clone()),
        weight: list.len(),
        interactions: list
            .into_iter()
            .map(|i| InteractionJson {
                step_index: i.step,
                timestamp: i.timestamp,
                intent: i.intent,
                message_id: i.step,
                metadata: InteractionMetadata {
                    message_type: i.message_type,
                    content: None,
                    content_preview: i.content_preview.clone(),
                    is_error: false,
                },
            })
            .collect(),
    }
}

/// `GET /api/graph/{id}/metrics`.
#[derive(Debug, Serialize)]
pub struct MetricsBody {
    pub(super) node_count: usize,
    pub(super) edge_count: usize,
    density: JsNumber,
    centrality: Centrality,
    in_degree_centrality: Centrality,
    out_degree_centrality: Centrality,
}

/// Centrality by node id, in node order.
#[derive(Debug)]
pub struct Centrality(Vec<(String, f64)>);

impl Serialize for Centrality {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (id, value) in &self.0 {
            map.serialize_entry(id, &JsNumber(*value))?;
        }
        map.end()
    }
}

/// Builds the metrics body in `mode`, as CommuGraph computes it from the graph's edges:
/// density E / (n(n-1)); centrality (in + out degree) / (2(n-1)); in and out degree over
/// n-1 (distinct neighbours, not weights); a graph of at most one node has density 0 and
/// empty maps.
pub fn metrics(session: &Session, mode: GraphMode) -> MetricsBody {
    let (ids, pairs): (Vec<String>, Vec<(usize, usize)>) = match mode {
        GraphMode::Reference => (SenderStats::of(session).ids, Vec::new()),
        GraphMode::Edges => {
            let parties = Parties::of(session, Previews::Skipped);
            let kept: Vec<&Interaction> = parties.interactions.iter().collect();
            let pairs = edges_of(&parties, &kept)
                .into_iter()
                .map(|(s, t, _)| (s, t))
                .collect();
            (parties.ids, pairs)
        }
    };
    metrics_of(ids, &pairs)
}

/// The metrics of a graph of parties `ids` and distinct edges `pairs` (indices into `ids`).
pub(super) fn metrics_of(ids: Vec<String>, pairs: &[(usize, usize)]) -> MetricsBody {
    let n = ids.len();
    let (mut indeg, mut outdeg) = (vec![0usize; n], vec![0usize; n]);
    for &(s, t) in pairs {
        outdeg[s] += 1;
        indeg[t] += 1;
    }
    let scale = n.saturating_sub(1) as f64;
    let map = |value: &dyn Fn(usize) -> f64| {
        Centrality(if n <= 1 {
            Vec::new()
        } else {
            ids.iter()
                .enumerate()
                .map(|(i, id)| (id.clone(), value(i)))
                .collect()
        })
    };
    MetricsBody {
        node_count: n,
        edge_count: pairs.len(),
        density: JsNumber(if n <= 1 {
            0.0
        } else {
            pairs.len() as f64 / (n as f64 * scale)
        }),
        centrality: map(&|i| (indeg[i] + outdeg[i]) as f64 / (2.0 * scale)),
        in_degree_centrality: map(&|i| indeg[i] as f64 / scale),
        out_degree_centrality: map(&|i| outdeg[i] as f64 / scale),
    }
}
