//! The units of the order (CONTRACT 3.1): an assistant turn, or one other kept record, each
//! with the parents it names; ordered by [`order_units`], then resolved to the record each
//! record's parent names.

use foldhash::{HashMap, HashMapExt};

use super::dedup::Dedup;
use super::group::Turn;
use super::order::{order_units, OrderUnit, Ordering, ParentLink, ParentSlot, SortKey};
use super::subagents::Agent;
use crate::formats::claude_code::records::Record;
use crate::heap::HeapSize;

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

/// Each uuid of a kept record -> the first kept record with it.
pub(crate) fn kept_uuid_index(records: &[Record], kept: impl Fn(usize) -> bool) -> HashMap<&str, usize> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if let (true, Some(u)) = (kept(i), r.uuid.as_deref()) {
            index.entry(u).or_insert(i);
        }
    }
    index
}

/// The units to order, with the records and the turn of each.
pub(crate) struct Units<'a> {
    pub(crate) order: Vec<OrderUnit<'a>>,
    pub(crate) records: Vec<Vec<usize>>,
    pub(crate) turn: Vec<Option<usize>>,
}

/// The unit a unit's parent resolved to, and whether that parent is the spawning call.
pub(crate) fn unit_parent(link: ParentLink) -> (Option<usize>, bool) {
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

/// What the order stage gives: the units, their order, and record-level order and parents.
pub(crate) struct Ordered<'a> {
    /// The units, with the parents each names (borrowed from the records).
    pub(crate) units: Units<'a>,
    /// The units' order, and the parent each resolved to.
    pub(crate) ordering: Ordering,
    /// For each record: the record its parent id names (for edges).
    pub(crate) record_parent: Vec<Option<usize>>,
    /// Every ordered record, in session order (a turn's records are together).
    pub(crate) record_sequence: Vec<usize>,
    /// For each record, its unit (kept, ordered records only).
    pub(crate) unit_of_record: Vec<Option<usize>>,
}

/// Orders the kept records: one unit per turn or other record, sorted parents first
/// (a sub-agent log's roots under the Task call that spawned it), then each record's
/// own parent and place in the sequence.
pub(crate) fn order_records<'a>(
    records: &'a [Record],
    kept: impl Fn(usize) -> bool,
    dedup: &Dedup,
    agents: &[Agent],
    turns: &[Turn],
    turn_of: &[Option<usize>],
    uuid_index: &HashMap<&str, usize>,
) -> Ordered<'a> {
    // The spawning call of each sub-agent log, for the log's roots.
    let mut spawn_of_file: HashMap<u32, &str> = HashMap::new();
    for agent in agents {
        if let (Some(f), Some(t)) = (agent.file, agent.task_record) {
            if let Some(uuid) = records[t].uuid.as_deref() {
                spawn_of_file.insert(f as u32, dedup.resolve(records, uuid));
            }
        }
    }
    let candidates = |i: usize| parent_candidates(&records[i], records, dedup, &spawn_of_file);
    let units = build_units(records, kept, turns, turn_of, candidates);
    let ordering = order_units(&units.order);

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
    Ordered {
        units,
        ordering,
        record_parent,
        record_sequence,
        unit_of_record,
    }
}

impl Units<'_> {
    /// The units as the session keeps them (records, turn, resolved parent), once the
    /// order no longer needs the ids they name.
    pub(crate) fn into_session_units(self, ordering: &Ordering) -> Vec<Unit> {
        self.records
            .into_iter()
            .zip(self.turn)
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
            .collect()
    }
}

impl HeapSize for Unit {
    fn heap_size(&self) -> usize {
        self.records.heap_size()
    }
}
