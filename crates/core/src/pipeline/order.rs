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
    let mut tree = ParentTree::resolve(units);
    tree.sort_siblings(units);
    let mut walk = Walk::new(&tree.children);
    for &start in tree.roots.iter().chain(&tree.orphans) {
        if !walk.visited[start] {
            walk.emit_subtree(start);
        }
    }
    let mut cycles_broken = Vec::new();
    if walk.sequence.len() < units.len() {
        // What is left hangs off parent cycles (self-parents included). Each cycle is broken
        // at its smallest member by key, which is then ordered like a root, followed by the
        // rest of the cycle and everything below it: a child is never ordered before the
        // cycle it hangs from.
        for u in cycle_starts(units, &tree.links, &walk.visited) {
            if !walk.visited[u] {
                cycles_broken.push(u);
                walk.emit_subtree(u);
            }
        }
    }
    Ordering {
        sequence: walk.sequence,
        links: tree.links,
        orphans: tree.orphans,
        dangling_logical: tree.dangling_logical,
        cycles_broken,
    }
}

/// Each unit's parent resolved, and the tree the parents make.
struct ParentTree {
    /// Each unit's parent resolution.
    links: Vec<ParentLink>,
    /// Each unit's children.
    children: Vec<Vec<usize>>,
    /// Units naming no parent.
    roots: Vec<usize>,
    /// Units with a named but absent parent.
    orphans: Vec<usize>,
    /// Units whose `logicalParentUuid` is absent from the session.
    dangling_logical: Vec<usize>,
}

impl ParentTree {
    /// Resolves each unit's parent: the unit answering to its first parent candidate that
    /// is in the session.
    fn resolve(units: &[OrderUnit<'_>]) -> Self {
        let n = units.len();
        let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(n);
        for (u, unit) in units.iter().enumerate() {
            for id in &unit.ids {
                by_id.entry(id).or_insert(u);
            }
        }

        let mut tree = ParentTree {
            links: Vec::with_capacity(n),
            children: vec![Vec::new(); n],
            roots: Vec::new(),
            orphans: Vec::new(),
            dangling_logical: Vec::new(),
        };
        for (u, unit) in units.iter().enumerate() {
            if let Some(l) = unit.parents[ParentSlot::Logical as usize] {
                if !by_id.contains_key(l) {
                    tree.dangling_logical.push(u);
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
                    tree.children[p].push(u);
                    ParentLink::Unit(p, slot)
                }
                // A dangling logical parent falls back to `parentUuid`; only a named raw parent
                // that is absent makes an orphan.
                None if unit.parents[ParentSlot::Raw as usize].is_some() => {
                    tree.orphans.push(u);
                    ParentLink::Missing
                }
                None => {
                    tree.roots.push(u);
                    ParentLink::Root
                }
            };
            tree.links.push(link);
        }
        tree
    }

    /// Puts the roots, the orphans and each unit's children in sibling order.
    fn sort_siblings(&mut self, units: &[OrderUnit<'_>]) {
        let key = |u: &usize| units[*u].key;
        self.roots.sort_by_key(key);
        self.orphans.sort_by_key(key);
        // A sub-agent runs inside the Task call that spawned it: its root comes before the
        // call's other children (the results, and the conversation that continues after them).
        let spawned = |u: &usize| matches!(self.links[*u], ParentLink::Unit(_, ParentSlot::Spawn));
        for list in &mut self.children {
            if list.len() > 1 {
                list.sort_by_key(|u| (!spawned(u), key(u)));
            }
        }
    }
}

/// The depth-first walk that emits the units, each once. Its stack is explicit, so a chain
/// of a million records is fine.
struct Walk<'t> {
    /// Each unit's children, in sibling order.
    children: &'t [Vec<usize>],
    /// Whether each unit has been emitted.
    visited: Vec<bool>,
    /// The units emitted, in order.
    sequence: Vec<usize>,
    /// The units being walked, each with the place of its next child (empty between walks,
    /// kept for its allocation).
    stack: Vec<(usize, usize)>,
}

impl<'t> Walk<'t> {
    fn new(children: &'t [Vec<usize>]) -> Self {
        let n = children.len();
        Walk {
            children,
            visited: vec![false; n],
            sequence: Vec::with_capacity(n),
            stack: Vec::new(),
        }
    }

    /// Emits `start`, then every unit below it not emitted yet, depth-first with siblings
    /// in order.
    fn emit_subtree(&mut self, start: usize) {
        self.visited[start] = true;
        self.sequence.push(start);
        self.stack.push((start, 0));
        while let Some(top) = self.stack.last_mut() {
            let (u, next) = *top;
            match self.children[u].get(next) {
                Some(&c) => {
                    top.1 += 1;
                    if !self.visited[c] {
                        self.visited[c] = true;
                        self.sequence.push(c);
                        self.stack.push((c, 0));
                    }
                }
                None => {
                    self.stack.pop();
                }
            }
        }
    }
}

/// Where to break the parent cycles that the units not `visited` hang off: each cycle's
/// smallest member by key (then by index), in that order. A unit is followed up its
/// parents until it reaches a cycle, once for all the units it passes.
fn cycle_starts(units: &[OrderUnit<'_>], links: &[ParentLink], visited: &[bool]) -> Vec<usize> {
    let n = units.len();
    let key = |u: &usize| units[*u].key;
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
            match links[c] {
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
    starts
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
