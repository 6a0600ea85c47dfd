//! The communication graph and metrics of an AutoGen log, by CommuGraph's rules
//! (`tests/reference/autogen/README.md`): every sender and receiver is a node from its
//! first message (`first_appearance`; `last_activity` the greatest time it sent at);
//! one directed edge per (sender, receiver) pair with an interaction per message, messages
//! without a receiver adding none; nodes in order of first appearance, edges by source then
//! target in order of first appearance; `?step=N` as for every framework. Past CommuGraph,
//! a message carrying several tool calls (or results) is an interaction per call (or
//! result), with the call's text, and a failed result's says `is_error: true`; a node
//! receives an interaction's worth each.

use std::borrow::Cow;
use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};

use super::graph::{
    metrics_of, snapshot, EdgeJson, GraphBody, InteractionJson, InteractionMetadata, MetricsBody, SenderNode,
};
use crate::formats::autogen::{intent, js_prefix, AgMessage, ToolPart};
use crate::json::literals::Preview;

/// A party's whole-log tallies.
struct Party<'a> {
    id: &'a str,
    sent: usize,
    received: usize,
    first: &'a str,
    last: &'a str,
}

/// One interaction: a message, or one of its tool calls (or results).
type Said<'a> = (&'a AgMessage, Option<&'a ToolPart>);

/// The interactions of a message that has a receiver: one per tool part, else one.
fn said(m: &AgMessage) -> impl Iterator<Item = Said<'_>> {
    let whole = m.tools.is_empty().then_some((m, None));
    whole.into_iter().chain(m.tools.iter().map(move |p| (m, Some(p))))
}

/// The parties (in order of first appearance) and the edges (source, target,
/// interactions).
struct Built<'a> {
    parties: Vec<Party<'a>>,
    index: HashMap<&'a str, usize>,
    edges: Vec<(usize, usize, Vec<Said<'a>>)>,
}

fn build(messages: &[AgMessage]) -> Built<'_> {
    let mut built = Built {
        parties: Vec::new(),
        index: HashMap::new(),
        edges: Vec::new(),
    };
    let mut pairs: HashMap<(usize, usize), usize> = HashMap::new();
    for m in messages {
        let s = built.party(&m.sender, m);
        built.parties[s].sent += 1;
        if m.timestamp.as_str() > built.parties[s].last {
            built.parties[s].last = &m.timestamp;
        }
        let Some(receiver) = m.receiver.as_deref() else {
            continue;
        };
        let r = built.party(receiver, m);
        let e = *pairs.entry((s, r)).or_insert_with(|| {
            built.edges.push((s, r, Vec::new()));
            built.edges.len() - 1
        });
        let before = built.edges[e].2.len();
        built.edges[e].2.extend(said(m));
        built.parties[r].received += built.edges[e].2.len() - before;
    }
    built.edges.sort_by_key(|(s, _, _)| *s);
    built
}

impl<'a> Built<'a> {
    /// The party called `id`, added (first seen in `m`) if it is new.
    fn party(&mut self, id: &'a str, m: &'a AgMessage) -> usize {
        let parties = &mut self.parties;
        *self.index.entry(id).or_insert_with(|| {
            parties.push(Party {
                id,
                sent: 0,
                received: 0,
                first: &m.timestamp,
                last: &m.timestamp,
            });
            parties.len() - 1
        })
    }

    /// For each party, true when an edge starts or ends at it.
    fn linked(&self) -> Vec<bool> {
        let mut linked = vec![false; self.parties.len()];
        for &(s, t, _) in &self.edges {
            linked[s] = true;
            linked[t] = true;
        }
        linked
    }
}

/// The graph body of `messages` (in step order, as the reader gives them), cut at `step` if
/// given.
pub fn graph(messages: &[AgMessage], step: Option<u64>) -> GraphBody<'_> {
    let total_steps = messages.last().map_or(0, |m| m.step);
    let (built, linked) = match step {
        None => (build(messages), None),
        Some(n) => {
            let (built, linked) = cut(messages, n);
            (built, Some(linked))
        }
    };
    let nodes: Vec<SenderNode> = built
        .parties
        .iter()
        .enumerate()
        .filter(|(i, _)| linked.as_ref().is_none_or(|linked| linked[*i]))
        .map(|(_, p)| SenderNode {
            id: p.id.to_owned(),
            label: p.id.to_owned(),
            message_count: p.sent,
            messages_sent: p.sent,
            messages_received: p.received,
            first_appearance: Some(p.first),
            last_activity: Some(p.last),
            metadata: BTreeMap::new(),
        })
        .collect();
    let edges: Vec<EdgeJson> = built
        .edges
        .iter()
        .map(|(s, t, list)| edge_json(&built, *s, *t, list))
        .collect();
    snapshot(nodes, edges, step, total_steps, messages.len())
}

/// The graph of the messages up to step `n` (the edges and the parties' counts are theirs),
/// and which parties it keeps: those an edge starts or ends at. A kept party's
/// `last_activity` is the whole log's, as CommuGraph keeps it, so the later messages are
/// looked through for their senders' times: one look-up each, nothing kept.
fn cut(messages: &[AgMessage], n: u64) -> (Built<'_>, Vec<bool>) {
    let upto = messages.partition_point(|m| m.step as u64 <= n);
    let mut built = build(&messages[..upto]);
    let linked = built.linked();
    for m in &messages[upto..] {
        if let Some(&p) = built.index.get(m.sender.as_str()) {
            let party = &mut built.parties[p];
            if linked[p] && m.timestamp.as_str() > party.last {
                party.last = &m.timestamp;
            }
        }
    }
    (built, linked)
}

fn edge_json<'a>(built: &Built<'a>, s: usize, t: usize, list: &[Said<'a>]) -> EdgeJson<'a> {
    EdgeJson {
        source: Cow::Owned(built.parties[s].id.to_owned()),
        target: Cow::Owned(built.parties[t].id.to_owned()),
        weight: list.len(),
        interactions: list
            .iter()
            .map(|&(m, part)| {
                let content = part.map_or(m.content.as_str(), |p| m.part_text(p));
                InteractionJson {
                    step_index: m.step,
                    timestamp: Some(&m.timestamp),
                    intent: intent(m.message_type),
                    message_id: m.step,
                    metadata: InteractionMetadata {
                        message_type: m.message_type,
                        content: Some(content),
                        content_preview: Preview::of_str(&js_prefix(content, 100)),
                        is_error: part.is_some_and(|p| p.failed),
                    },
                }
            })
            .collect(),
    }
}

/// The metrics body of `messages`.
pub fn metrics(messages: &[AgMessage]) -> MetricsBody {
    let built = build(messages);
    let pairs: Vec<(usize, usize)> = built.edges.iter().map(|(s, t, _)| (*s, *t)).collect();
    metrics_of(built.parties.iter().map(|p| p.id.to_owned()).collect(), &pairs)
}

/// One entry of an AutoGen chat log.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatEntry<'a> {
    step_index: usize,
    display_step_label: String,
    sender: &'a str,
    receiver: &'a str,
    content: &'a str,
    timestamp: &'a str,
}

/// An AutoGen chat log body: the same shape as a Claude Code session's.
#[derive(Debug, serde::Serialize)]
pub struct ChatLog<'a> {
    messages: Vec<ChatEntry<'a>>,
    total: usize,
}

/// The chat log of an AutoGen log as CommuGraph's interface builds it from the graph's
/// edges: one entry per message with a receiver, in step order, labelled `#<step>`.
pub fn chatlog(messages: &[AgMessage]) -> ChatLog<'_> {
    let entries: Vec<ChatEntry> = messages
        .iter()
        .filter_map(|m| {
            Some(ChatEntry {
                step_index: m.step,
                display_step_label: format!("#{}", m.step),
                sender: &m.sender,
                receiver: m.receiver.as_deref()?,
                content: &m.content,
                timestamp: &m.timestamp,
            })
        })
        .collect();
    ChatLog {
        total: entries.len(),
        messages: entries,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::views::autogen_graph::*;

    /// The graph as it was cut before (every party matched against every kept edge): the
    /// reference a cut must render byte for byte.
    fn graph_cut_by_search(messages: &[AgMessage], step: Option<u64>) -> GraphBody<'_> {
        let built = build(messages);
        let upto = |s: usize| step.is_none_or(|n| (s as u64) <= n);
        let edges: Vec<(usize, usize, Vec<Said>)> = built
            .edges
            .iter()
            .map(|(s, t, list)| {
                (
                    *s,
                    *t,
                    list.iter()
                        .copied()
                        .filter(|(m, _)| upto(m.step))
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, _, list)| !list.is_empty())
            .collect();
        let (mut sent, mut received) = (
            vec![0usize; built.parties.len()],
            vec![0usize; built.parties.len()],
        );
        for m in messages.iter().filter(|m| upto(m.step)) {
            sent[built.index[m.sender.as_str()]] += 1;
            if let Some(r) = m.receiver.as_deref() {
                received[built.index[r]] += m.tools.len().max(1);
            }
        }
        let nodes: Vec<SenderNode> = built
            .parties
            .iter()
            .enumerate()
            .filter(|(i, _)| step.is_none() || edges.iter().any(|(s, t, _)| s == i || t == i))
            .map(|(i, p)| {
                let (sent, received) = if step.is_some() {
                    (sent[i], received[i])
                } else {
                    (p.sent, p.received)
                };
                SenderNode {
                    id: p.id.to_owned(),
                    label: p.id.to_owned(),
                    message_count: sent,
                    messages_sent: sent,
                    messages_received: received,
                    first_appearance: Some(p.first),
                    last_activity: Some(p.last),
                    metadata: BTreeMap::new(),
                }
            })
            .collect();
        let edges: Vec<EdgeJson> = edges
            .into_iter()
            .map(|(s, t, list)| edge_json(&built, s, t, &list))
            .collect();
        let total_steps = messages.iter().map(|m| m.step).max().unwrap_or(0);
        snapshot(nodes, edges, step, total_steps, messages.len())
    }

    /// Messages among a few parties, some addressing nobody, some carrying tool parts (a
    /// failed one now and then), with times out of order.
    fn messages() -> impl Strategy<Value = Vec<AgMessage>> {
        let party = || prop::sample::select(vec!["a", "b", "c", "d", "user"]);
        let message = (
            party(),
            proptest::option::of(party()),
            0u8..5,
            any::<bool>(),
            prop::collection::vec(any::<bool>(), 0..3),
        );
        prop::collection::vec(message, 0..24).prop_map(|drawn| {
            let mut step = 0;
            drawn
                .into_iter()
                .map(|(sender, receiver, time, gap, parts)| {
                    step += 1 + usize::from(gap);
                    let content = format!("m{step}:{}", "p".repeat(parts.len()));
                    let tools = parts
                        .iter()
                        .enumerate()
                        .map(|(k, &failed)| ToolPart {
                            call_id: Some(format!("c{k}")),
                            name: None,
                            text: content.len() - k - 1..content.len() - k,
                            failed,
                        })
                        .collect();
                    AgMessage {
                        step,
                        timestamp: format!("2024-01-01T00:00:0{time}.000Z"),
                        sender: sender.to_owned(),
                        receiver: receiver.filter(|r| *r != sender).map(str::to_owned),
                        message_type: "response",
                        content,
                        human: false,
                        tools,
                    }
                })
                .collect()
        })
    }

    proptest! {
        /// A cut at any step (and the whole graph) is the body the search rendered.
        #[test]
        fn a_cut_renders_what_matching_every_party_against_every_edge_rendered(
            messages in messages(),
            step in 0u64..60,
        ) {
            for step in [None, Some(step)] {
                let got = serde_json::to_string(&graph(&messages, step)).unwrap();
                let want = serde_json::to_string(&graph_cut_by_search(&messages, step)).unwrap();
                prop_assert_eq!(got, want);
            }
        }
    }
}
