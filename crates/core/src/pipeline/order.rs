//! Ordering: the parent-uuid topological sort of `docs/spec/record-ordering.md` (CONTRACT 3.1).
//!
//! The sort runs over *units*: an assistant turn (all chunks of one API message) is one
//! unit, every other record is a unit of its own. A unit registers all its uuids, so a
//! child may hang off any chunk of a turn. Each unit names its parent candidates in order of
//! preference (`logicalParentUuid`, `parentUuid`, and for a sub-agent's root the Task call
//! that spawned it); the first candidate present in the session is the parent.
//!
//! Roots (no parent) are visited in (timestamp, file position) order, each followed by its
//! subtree depth-first with siblings in the same order (a spawned sub-agent first: it runs
//! inside its Task call, before the call's result); then orphans (a parent named but
//! absent), likewise; then whatever is left, which can only sit on a parent cycle: the
//! earliest such unit is taken as a root (the cycle is broken there and reported), until
//! none is left. The walk uses an explicit stack, so a chain of a million records is fine;
//! it is O(n log n) and emits every unit exactly once.

use foldhash::{HashMap, HashMapExt};

use crate::formats::claude_code::records::Position;

/// How units compare among siblings: by time (missing times last), then file position.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SortKey {
    /// Milliseconds since the epoch; `i64::MAX` when the unit has no readable timestamp.
    pub time: i64,
    /// Where the unit's first record was read.
    pub pos: Position,
}

impl SortKey {
    /// The key of a unit read at `pos` with time `time`.
    pub fn new(time: Option<i64>, pos: Position) -> Self {
        Self {
            time: time.unwrap_or(i64::MAX),
            pos,
        }
    }
}

/// Which parent candidate a unit names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentSlot {
    /// `logicalParentUuid`.
    Logical = 0,
    /// `parentUuid`.
    Raw = 1,
    /// The Task call that spawned a sub-agent (for the sub-agent's roots only).
    Spawn = 2,
}

/// One unit to order.
#[derive(Debug, Clone, Default)]
pub struct OrderUnit<'a> {
    /// Every id the unit answers to (its records' uuids).
    pub ids: Vec<&'a str>,
    /// Parent candidates by [`ParentSlot`]: logical, raw, spawn.
    pub parents: [Option<&'a str>; 3],
    /// Sibling order.
    pub key: SortKey,
}

/// How a unit's parent was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentLink {
    /// No parent named: a root.
    Root,
    /// The parent is the unit at this index, found through this candidate.
    Unit(usize, ParentSlot),
    /// A parent was named but is not in the session.
    Missing,
    /// The unit names itself as its parent.
    SelfParent,
}

/// The result of ordering.
#[derive(Debug, Clone, Default)]
pub struct Ordering {
    /// Unit indices in order; every unit appears exactly once.
    pub sequence: Vec<usize>,
    /// Each unit's parent resolution.
    pub links: Vec<ParentLink>,
    /// Units with a named but absent parent (ordered as roots after the real roots).
    pub orphans: Vec<usize>,
    /// Units whose `logicalParentUuid` is absent from the session.
    pub dangling_logical: Vec<usize>,
    /// Units at which a parent cycle was broken (each was ordered as a root).
    pub cycles_broken: Vec<usize>,
}

impl Ordering {
    /// The parent unit of `unit` when it has one in the session.
    pub fn parent(&self, unit: usize) -> Option<usize> {
        match self.links[unit] {
            ParentLink::Unit(p, _) => Some(p),
            _ => None,
        }
    }
}

/// Orders `units` (see the module docs).
pub fn order_units(units: &[OrderUnit<'_>]) -> Ordering {
    let n = units.len();
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (u, unit) in units.iter().enumerate() {
        for id in &unit.ids {
            by_id.entry(id).or_insert(u);
        }
    }

    let mut out = Ordering {
        sequence: Vec::with_capacity(n),
        links: Vec::with_capacity(n),
        ..Ordering::default()
    };
    let mut roots = Vec::new();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (u, unit) in units.iter().enumerate() {
        if let Some(l) = unit.parents[ParentSlot::Logical as usize] {
            if !by_id.contains_key(l) {
                out.dangling_logical.push(u);
            }
        }
        let slots = [ParentSlot::Logical, ParentSlot::Raw, ParentSlot::Spawn];
        let found = slots.iter().find_map(|&slot| {
            unit.parents[slot as usize]
                .and_then(|p| by_id.get(p))
                .map(|&p| (p, slot))
        });
        let link = match found {
            Some((p, _)) if p == u => ParentLink::SelfParent,
            Some((p, slot)) => {
                children[p].push(u);
                ParentLink::Unit(p, slot)
            }
            // A dangling logical parent falls back to `parentUuid`; only a named raw parent
            // that is absent makes an orphan.
            None if unit.parents[ParentSlot::Raw as usize].is_some() => {
                out.orphans.push(u);
                ParentLink::Missing
            }
            None => {
                roots.push(u);
                ParentLink::Root
            }
        };
        out.links.push(link);
    }

    let key = |u: &usize| units[*u].key;
    roots.sort_by_key(key);
    out.orphans.sort_by_key(key);
    // A sub-agent runs inside the Task call that spawned it: its root comes before the
    // call's other children (the results, and the conversation that continues after them).
    let spawned = |u: &usize| matches!(out.links[*u], ParentLink::Unit(_, ParentSlot::Spawn));
    for list in &mut children {
        if list.len() > 1 {
            list.sort_by_key(|u| (!spawned(u), key(u)));
        }
    }

    let mut visited = vec![false; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut walk = |start: usize, visited: &mut Vec<bool>, sequence: &mut Vec<usize>| {
        visited[start] = true;
        sequence.push(start);
        stack.push((start, 0));
        while let Some(top) = stack.last_mut() {
            let (u, next) = *top;
            match children[u].get(next) {
                Some(&c) => {
                    top.1 += 1;
                    if !visited[c] {
                        visited[c] = true;
                        sequence.push(c);
                        stack.push((c, 0));
                    }
                }
                None => {
                    stack.pop();
                }
            }
        }
    };

    for &r in &roots {
        if !visited[r] {
            walk(r, &mut visited, &mut out.sequence);
        }
    }
    for &o in &out.orphans {
        if !visited[o] {
            walk(o, &mut visited, &mut out.sequence);
        }
    }
    if out.sequence.len() < n {
        // What is left hangs off parent cycles (self-parents included). Each cycle is broken
        // at its smallest member by key, which is then ordered like a root, followed by the
        // rest of the cycle and everything below it: a child is never ordered before the
        // cycle it hangs from.
        let mut start_of = vec![usize::MAX; n];
        let mut on_path = vec![false; n];
        let mut path = Vec::new();
        for u in 0..n {
            if visited[u] || start_of[u] != usize::MAX {
                continue;
            }
            let mut c = u;
            let start = loop {
                if start_of[c] != usize::MAX {
                    break start_of[c];
                }
                if on_path[c] {
                    let from = path.iter().position(|&x| x == c).unwrap_or(0);
                    let cycle = &path[from..];
                    break cycle.iter().copied().min_by_key(|&x| (key(&x), x)).unwrap_or(c);
                }
                on_path[c] = true;
                path.push(c);
                match out.links[c] {
                    ParentLink::Unit(p, _) if !visited[p] => c = p,
                    _ => break c,
                }
            };
            for x in path.drain(..) {
                start_of[x] = start;
                on_path[x] = false;
            }
        }
        let mut starts: Vec<usize> = (0..n).filter(|&u| !visited[u] && start_of[u] == u).collect();
        starts.sort_by_key(|&u| (key(&u), u));
        for u in starts {
            if !visited[u] {
                out.cycles_broken.push(u);
                walk(u, &mut visited, &mut out.sequence);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::pipeline::order::*;

    fn unit<'a>(id: &'a str, parent: Option<&'a str>, time: i64, line: u32) -> OrderUnit<'a> {
        OrderUnit {
            ids: vec![id],
            parents: [None, parent, None],
            key: SortKey::new(
                Some(time),
                Position {
                    file: 0,
                    line,
                    seq: 0,
                },
            ),
        }
    }

    fn ids<'a>(units: &[OrderUnit<'a>], o: &Ordering) -> Vec<&'a str> {
        o.sequence.iter().map(|&u| units[u].ids[0]).collect()
    }

    #[test]
    fn siblings_by_time_then_depth_first() {
        let units = vec![
            unit("a", None, 0, 1),
            unit("d", Some("a"), 3, 2),
            unit("b", Some("a"), 1, 3),
            unit("c", Some("b"), 2, 4),
        ];
        assert_eq!(ids(&units, &order_units(&units)), ["a", "b", "c", "d"]);
    }

    #[test]
    fn orphans_come_after_roots_each_with_its_subtree() {
        let units = vec![
            unit("o2", Some("gone"), 5, 1),
            unit("r", None, 9, 2),
            unit("o1", Some("gone"), 1, 3),
            unit("o1c", Some("o1"), 2, 4),
        ];
        let o = order_units(&units);
        assert_eq!(ids(&units, &o), ["r", "o1", "o1c", "o2"]);
        assert_eq!(o.orphans.len(), 2);
    }

    #[test]
    fn logical_parent_wins_and_falls_back_when_dangling() {
        let mut boundary = unit("b", None, 5, 3);
        boundary.parents[ParentSlot::Logical as usize] = Some("x");
        let units = vec![unit("x", None, 0, 1), unit("y", Some("x"), 9, 2), boundary];
        assert_eq!(ids(&units, &order_units(&units)), ["x", "b", "y"]);

        let mut dangling = unit("b", Some("x"), 5, 3);
        dangling.parents[ParentSlot::Logical as usize] = Some("never-written");
        let units = vec![unit("x", None, 0, 1), dangling];
        let o = order_units(&units);
        assert_eq!(ids(&units, &o), ["x", "b"]);
        assert_eq!(o.dangling_logical, vec![1]);
    }

    #[test]
    fn cycles_and_self_parents_are_broken_not_hung() {
        let units = vec![
            unit("a", Some("b"), 2, 1),
            unit("b", Some("a"), 1, 2),
            unit("s", Some("s"), 0, 3),
        ];
        let o = order_units(&units);
        assert_eq!(ids(&units, &o), ["s", "b", "a"]);
        assert_eq!(o.cycles_broken, vec![2, 1]);
        assert_eq!(o.links[2], ParentLink::SelfParent);
    }

    /// Found by fuzzing: a self-parent without a timestamp sorted after its own child (a
    /// reply written a second later), which was then ordered first.
    #[test]
    fn a_child_of_a_self_parent_comes_after_it_whatever_the_times() {
        let units = vec![
            unit("root", None, 0, 1),
            unit("s", Some("s"), i64::MAX, 2),
            unit("reply", Some("s"), 3, 3),
        ];
        let o = order_units(&units);
        assert_eq!(ids(&units, &o), ["root", "s", "reply"]);
        assert_eq!(o.cycles_broken, vec![1]);
    }

    #[test]
    fn a_cycle_is_broken_at_its_smallest_member_and_its_children_follow() {
        let units = vec![
            unit("a", Some("b"), 5, 1),
            unit("b", Some("a"), 4, 2),
            unit("child", Some("a"), 1, 3),
        ];
        let o = order_units(&units);
        assert_eq!(ids(&units, &o), ["b", "a", "child"]);
        assert_eq!(o.cycles_broken, vec![1]);
    }

    #[test]
    fn a_million_record_chain_does_not_overflow_the_stack() {
        let names: Vec<String> = (0..1_000_000).map(|i| i.to_string()).collect();
        let units: Vec<OrderUnit> = names
            .iter()
            .enumerate()
            .map(|(i, id)| unit(id, (i > 0).then(|| names[i - 1].as_str()), i as i64, i as u32))
            .collect();
        let o = order_units(&units);
        assert_eq!(o.sequence.len(), 1_000_000);
        assert!(o.sequence.windows(2).all(|w| w[0] + 1 == w[1]));
    }

    #[test]
    fn a_unit_answers_to_all_its_ids() {
        let turn = OrderUnit {
            ids: vec!["t1", "t2"],
            parents: [None, None, None],
            key: SortKey::new(Some(0), Position::default()),
        };
        let units = vec![turn, unit("r2", Some("t2"), 2, 5), unit("r1", Some("t1"), 1, 4)];
        assert_eq!(ids(&units, &order_units(&units)), ["t1", "r1", "r2"]);
    }
}
