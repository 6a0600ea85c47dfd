//! Items: one classified entry per unit that shows, in session order (prompts, assistant
//! turns, tool results, notices, compactions). Every view reads them; what an item is and
//! whether it is labelable is decided here, once.

use foldhash::{HashMap, HashMapExt};

use super::classify::{self, NoticeKind, UserClass};
use super::dedup::Dedup;
use super::group::Turn;
use super::order::ParentLink;
use super::units::{unit_parent, Ordered};
use crate::formats::claude_code::records::{Record, RecordKind};

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

/// One entry of the session, in order: what views turn into units, nodes and messages.
#[derive(Debug, Clone)]
pub struct Item {
    /// What it is.
    pub kind: ItemKind,
    /// The unit it comes from.
    pub unit: usize,
    /// Index into [`Session::lanes`](crate::Session::lanes).
    pub lane: usize,
    /// The record its parent resolved to (through logical parent, parent or spawning call).
    pub parent_record: Option<usize>,
    /// True when the parent is the Task call that spawned this sub-agent.
    pub parent_is_spawn: bool,
    /// True when the item holds words a person typed that are an annotation unit: a prompt
    /// with text that is not blank or an image, or such words beside a tool result (the
    /// user wrote while the tool ran). Decided once here, read by the
    /// annotations.
    pub labelable: bool,
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

/// What record `i`, a unit of its own, shows as: a prompt, a tool result, a notice or a
/// compaction, or nothing (meta records, summaries merged into their boundary, blank
/// prompts).
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

/// The items of the ordered units, in their order. `record_lane` gives each record's lane.
pub(crate) fn build_items(
    records: &[Record],
    kept: impl Fn(usize) -> bool,
    dedup: &Dedup,
    uuid_index: &HashMap<&str, usize>,
    turns: &[Turn],
    ordered: &Ordered<'_>,
    record_lane: &[usize],
) -> Vec<Item> {
    let summaries = compaction_summaries(records, kept, dedup, uuid_index);
    let (units, ordering) = (&ordered.units, &ordered.ordering);
    let mut items = ordering
        .sequence
        .iter()
        .filter_map(|&u| {
            let kind = match units.turn[u] {
                Some(t) => turns[t].has_content(records).then_some(ItemKind::Turn(t)),
                None => item_kind(records, units.records[u][0], &summaries),
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
            let labelable = match kind {
                ItemKind::Prompt(r) | ItemKind::ToolResult { record: r, .. } => {
                    classify::is_labelable_prompt(&records[r])
                }
                _ => false,
            };
            Some(Item {
                kind,
                unit: u,
                lane: record_lane[lane_record],
                parent_record,
                parent_is_spawn: unit_parent(ordering.links[u]).1,
                labelable,
            })
        })
        .collect::<Vec<Item>>();
    items.shrink_to_fit();
    items
}

crate::heap::owns_nothing!(Item);
