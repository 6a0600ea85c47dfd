//! Session trees (`docs/spec/claude-code-dag.md`, `docs/spec/session-tree-format.md`): branch points,
//! the active path and abandoned branches (the context a model sees at a leaf is a view:
//! `views::context`).
//!
//! Branches come from regenerating a response, editing a prompt, rewinding, or pi's `/tree`:
//! a unit whose conversation continues in two or more ways. Not every second child is a
//! branch: a turn's tool results and the sub-agents its Task calls spawn belong to the
//! turn, and a compaction's summary to its boundary; only the other children are
//! *alternatives*.
//!
//! The current leaf is the last record written to the main log (pi: "the last entry is
//! always the current leaf"); the active path runs from it to the root. At a branch point
//! the active child is the one on the active path; off that path, the child marked
//! `is_active`, else the last written. The other alternatives start abandoned branches:
//! they stay in every view (nothing is lost) and are left out with `?branch=active`.

use super::units::Unit;
use crate::formats::claude_code::records::{Record, RecordKind};
use crate::heap::HeapSize;

/// The tree analysis of a session.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// The current leaf unit.
    pub leaf: Option<usize>,
    /// Units from the root to the current leaf.
    pub active_path: Vec<usize>,
    /// The branch points, in session order.
    pub forks: Vec<Fork>,
    /// For each unit: inside an abandoned branch.
    pub abandoned: Vec<bool>,
}

/// A branch point.
#[derive(Debug, Clone)]
pub struct Fork {
    /// The unit that branches.
    pub unit: usize,
    /// Its alternatives, in session order.
    pub children: Vec<ForkChild>,
}

/// One alternative at a branch point.
#[derive(Debug, Clone)]
pub struct ForkChild {
    /// The unit that starts it.
    pub unit: usize,
    /// The latest leaf below it.
    pub leaf: usize,
    /// Records in its subtree.
    pub size: usize,
    /// Whether it is the active one.
    pub active: bool,
}

impl Tree {
    /// Analyses a session's units: `units`, made of `records`, in their order `sequence`
    /// (parents before children). Takes the parts rather than the session so that it can
    /// be built beside the workflow.
    pub fn of(records: &[Record], units: &[Unit], sequence: &[usize]) -> Tree {
        let leaf = current_leaf(records, units);
        let (active_path, on_path) = path_to_root(units, leaf);
        let subtrees = Subtrees::of(records, units, sequence);
        let (forks, inactive_start) = subtrees.forks(records, units, sequence, &on_path);
        let mut abandoned = vec![false; units.len()];
        for &u in sequence {
            let parent_abandoned = units[u].parent.is_some_and(|p| abandoned[p]);
            abandoned[u] = parent_abandoned || inactive_start[u];
        }
        Tree {
            leaf,
            active_path,
            forks,
            abandoned,
        }
    }
}

/// The current leaf: the last record of the main log (pi: the last entry).
fn current_leaf(records: &[Record], units: &[Unit]) -> Option<usize> {
    units
        .iter()
        .enumerate()
        .filter(|(_, unit)| {
            let r = &records[unit.records[0]];
            r.pos.file == 0 && r.is_sidechain != Some(true)
        })
        .max_by_key(|(_, unit)| unit.records.iter().map(|&r| records[r].pos).max())
        .map(|(u, _)| u)
}

/// The units from the root to `leaf`, root first, and for each unit whether it is one of
/// them.
fn path_to_root(units: &[Unit], leaf: Option<usize>) -> (Vec<usize>, Vec<bool>) {
    let mut path = Vec::new();
    let mut on_path = vec![false; units.len()];
    let mut at = leaf;
    while let Some(u) = at {
        if on_path[u] {
            break;
        }
        on_path[u] = true;
        path.push(u);
        at = units[u].parent;
    }
    path.reverse();
    (path, on_path)
}

/// Each unit's children, the records below it and its latest leaf.
struct Subtrees {
    children: Vec<Vec<usize>>,
    size: Vec<usize>,
    latest: Vec<usize>,
}

impl Subtrees {
    /// Children in order; subtree sizes and latest leaves, children before parents.
    fn of(records: &[Record], units: &[Unit], sequence: &[usize]) -> Subtrees {
        let n = units.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &u in sequence {
            if let Some(p) = units[u].parent {
                children[p].push(u);
            }
        }
        let first_pos = |u: usize| records[units[u].records[0]].pos;
        let mut size = vec![0usize; n];
        let mut latest = (0..n).collect::<Vec<_>>();
        for &u in sequence.iter().rev() {
            size[u] += units[u].records.len();
            if let Some(p) = units[u].parent {
                size[p] += size[u];
                let candidate = latest[u];
                if latest[p] == p || first_pos(candidate) > first_pos(latest[p]) {
                    latest[p] = candidate;
                }
            }
        }
        Subtrees {
            children,
            size,
            latest,
        }
    }

    /// The branch points (units with two or more alternatives), and for each unit whether
    /// it starts an abandoned branch. The active child is the one on the active path, else
    /// the one marked `is_active`, else the last written.
    fn forks(
        &self,
        records: &[Record],
        units: &[Unit],
        sequence: &[usize],
        on_path: &[bool],
    ) -> (Vec<Fork>, Vec<bool>) {
        let first_pos = |u: usize| records[units[u].records[0]].pos;
        let mut forks = Vec::new();
        let mut inactive_start = vec![false; units.len()];
        for &u in sequence {
            let alternatives: Vec<usize> = self.children[u]
                .iter()
                .copied()
                .filter(|&c| is_alternative(records, units, c))
                .collect();
            if alternatives.len() < 2 {
                continue;
            }
            let active = alternatives
                .iter()
                .copied()
                .find(|&c| on_path[c])
                .or_else(|| {
                    alternatives
                        .iter()
                        .copied()
                        .find(|&c| records[units[c].records[0]].is_active == Some(true))
                })
                .or_else(|| alternatives.iter().copied().max_by_key(|&c| first_pos(c)));
            for &c in &alternatives {
                inactive_start[c] = Some(c) != active;
            }
            forks.push(Fork {
                unit: u,
                children: alternatives
                    .iter()
                    .map(|&c| ForkChild {
                        unit: c,
                        leaf: self.latest[c],
                        size: self.size[c],
                        active: Some(c) == active,
                    })
                    .collect(),
            });
        }
        (forks, inactive_start)
    }
}

/// True when unit `c` continues the conversation in its own way (it is not a tool result,
/// a spawned sub-agent, or a compaction summary, which belong to their parent).
fn is_alternative(records: &[Record], units: &[Unit], c: usize) -> bool {
    let unit = &units[c];
    if unit.parent_is_spawn {
        return false;
    }
    let r = &records[unit.records[0]];
    !(r.kind == RecordKind::User && (r.has_tool_result() || r.is_compact_summary))
}

impl HeapSize for Fork {
    fn heap_size(&self) -> usize {
        self.children.heap_size()
    }
}

impl HeapSize for Tree {
    fn heap_size(&self) -> usize {
        self.active_path.heap_size() + self.forks.heap_size() + self.abandoned.heap_size()
    }
}

crate::heap::owns_nothing!(ForkChild);
