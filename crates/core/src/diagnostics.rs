//! What loading found and did: bad lines, duplicates removed, orphans, cycles broken,
//! unknown record types, sub-agents missing. Collected by every pipeline stage, served as
//! the `diagnostics` view, and summarised in upload responses.

use std::collections::BTreeMap;

use crate::heap::HeapSize;
use serde::Serialize;

/// How many examples of each kind of finding are kept; counts are always exact.
pub const SAMPLE_LIMIT: usize = 100;

/// A count and its first [`SAMPLE_LIMIT`] examples.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Samples<T> {
    /// How many there were.
    pub count: usize,
    /// The first ones, in the order found.
    pub samples: Vec<T>,
}

impl<T> Default for Samples<T> {
    fn default() -> Self {
        Self {
            count: 0,
            samples: Vec::new(),
        }
    }
}

impl<T> Samples<T> {
    /// Counts `item` and keeps it if fewer than [`SAMPLE_LIMIT`] are kept.
    pub fn push(&mut self, item: T) {
        self.count += 1;
        if self.samples.len() < SAMPLE_LIMIT {
            self.samples.push(item);
        }
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds `other`'s count and, while there is room, its examples, each passed through
    /// `map`.
    pub fn absorb<U>(&mut self, other: Samples<U>, map: impl FnMut(U) -> T) {
        let room = SAMPLE_LIMIT.saturating_sub(self.samples.len());
        self.samples.extend(other.samples.into_iter().take(room).map(map));
        self.count += other.count;
    }
}

/// How many distinct record types [`TypeCounts`] names; the others are counted together
/// under [`OTHER_TYPES`], so that a file of made-up types cannot grow the counts without
/// bound.
pub const TYPE_NAME_LIMIT: usize = 64;

/// The name under which types past [`TYPE_NAME_LIMIT`] are counted.
pub const OTHER_TYPES: &str = "(other types)";

/// Records counted by `type` (`"(missing)"` when there is none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeCounts {
    named: BTreeMap<String, usize>,
    other: usize,
}

impl TypeCounts {
    /// Counts one record of type `name`.
    pub fn count(&mut self, name: &str) {
        self.add(name, 1);
    }

    fn add(&mut self, name: &str, n: usize) {
        if let Some(c) = self.named.get_mut(name) {
            *c += n;
        } else if self.named.len() < TYPE_NAME_LIMIT {
            self.named.insert(name.to_owned(), n);
        } else {
            self.other += n;
        }
    }

    /// Adds `other`'s counts.
    pub fn absorb(&mut self, other: TypeCounts) {
        for (name, n) in other.named {
            self.add(&name, n);
        }
        self.other += other.other;
    }

    /// The counts, by name, then the types past the limit under [`OTHER_TYPES`].
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        let other = (self.other > 0).then_some((OTHER_TYPES, self.other));
        self.named.iter().map(|(k, &v)| (k.as_str(), v)).chain(other)
    }
}

/// A finding about one line of one file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LineIssue {
    /// The file's name.
    pub file: String,
    /// 1-based physical line number.
    pub line: u32,
    /// What was wrong, in a few lowercase words.
    pub reason: String,
}

/// A finding about one record.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RecordIssue {
    /// The file's name.
    pub file: String,
    /// 1-based physical line number.
    pub line: u32,
    /// The record's uuid, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The other record involved: the copy that was kept, the parent that is missing, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related_uuid: Option<String>,
    /// What was found or done.
    pub reason: String,
}

/// Per-file summary.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FileSummary {
    /// The file's name.
    pub name: String,
    /// `main`, `subagent`, `subagent_meta`, or `ignored`.
    pub role: &'static str,
    /// The sub-agent's id, for sub-agent files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Size in bytes.
    pub bytes: usize,
    /// Non-blank lines.
    pub lines: usize,
    /// Records read (a glued line gives more than one).
    pub records: usize,
}

/// Duplicates removed, by rule.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct DuplicateCounts {
    /// Records repeating a uuid already seen (the first copy is kept).
    pub same_uuid: usize,
    /// Assistant chunks repeating a thinking signature, message id, request id and
    /// timestamp already seen.
    pub assistant_signature: usize,
    /// User records whose content blocks all appear in a richer record with the same
    /// parent and timestamp.
    pub user_partial_copy: usize,
}

/// Everything loading found and did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Diagnostics {
    /// The session's files.
    pub files: Vec<FileSummary>,
    /// Count of records by `type`.
    pub record_types: BTreeMap<String, usize>,
    /// Count of records whose `type` the pipeline does not know (they load, and can be
    /// parents, but no view shows them).
    pub unknown_record_types: BTreeMap<String, usize>,
    /// Lines that held no readable record.
    pub bad_lines: Samples<LineIssue>,
    /// Lines that were repaired: two records glued together, a truncated record followed
    /// by a complete one, lone UTF-16 surrogates or invalid UTF-8 replaced.
    pub repaired_lines: Samples<LineIssue>,
    /// Duplicates removed, by rule.
    pub duplicates_removed: DuplicateCounts,
    /// Examples of duplicates removed.
    pub duplicate_samples: Samples<RecordIssue>,
    /// Records removed because they repeated, under a kept record, a record that hung off a
    /// removed duplicate.
    pub phantom_branch_removed: Samples<RecordIssue>,
    /// Records whose parent is not in the session (they are ordered as new roots).
    pub orphans: Samples<RecordIssue>,
    /// `logicalParentUuid`s that point at a record never written (the `parentUuid` was used).
    pub dangling_logical_parents: Samples<RecordIssue>,
    /// Parent cycles (including self-parents) broken to order the records.
    pub cycles_broken: Samples<RecordIssue>,
    /// Sub-agent ids referenced by the session (Task results) with no log file.
    pub subagents_missing: Vec<String>,
    /// Sub-agent logs that could not be tied to a Task call.
    pub subagents_unlinked: Vec<String>,
    /// Files left out, with the reason.
    pub ignored_files: Vec<LineIssue>,
}

impl Diagnostics {
    /// Adds a file's records by type; `known` says whether the pipeline understands a type.
    pub fn count_types(&mut self, types: &TypeCounts, known: impl Fn(&str) -> bool) {
        for (name, n) in types.iter() {
            *self.record_types.entry(name.to_owned()).or_default() += n;
            if !known(name) {
                *self.unknown_record_types.entry(name.to_owned()).or_default() += n;
            }
        }
    }

    /// Total duplicates removed by all rules.
    pub fn duplicates_total(&self) -> usize {
        let d = &self.duplicates_removed;
        d.same_uuid + d.assistant_signature + d.user_partial_copy
    }

    /// The short summary given with an upload.
    pub fn summary(&self) -> DiagnosticsSummary {
        DiagnosticsSummary {
            bad_lines: self.bad_lines.count,
            repaired_lines: self.repaired_lines.count,
            duplicates_removed: self.duplicates_total(),
            phantom_branch_removed: self.phantom_branch_removed.count,
            orphans: self.orphans.count,
            cycles_broken: self.cycles_broken.count,
            unknown_record_types: self.unknown_record_types.values().sum(),
            subagents_missing: self.subagents_missing.len(),
        }
    }
}

/// Counts of each kind of finding.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct DiagnosticsSummary {
    /// Lines that held no readable record.
    pub bad_lines: usize,
    /// Lines repaired.
    pub repaired_lines: usize,
    /// Duplicates removed.
    pub duplicates_removed: usize,
    /// Phantom-branch records removed.
    pub phantom_branch_removed: usize,
    /// Orphan records.
    pub orphans: usize,
    /// Parent cycles broken.
    pub cycles_broken: usize,
    /// Records of unknown types.
    pub unknown_record_types: usize,
    /// Sub-agents referenced but missing.
    pub subagents_missing: usize,
}

impl<T: HeapSize> HeapSize for Samples<T> {
    fn heap_size(&self) -> usize {
        self.samples.heap_size()
    }
}

impl HeapSize for LineIssue {
    fn heap_size(&self) -> usize {
        self.file.heap_size() + self.reason.heap_size()
    }
}

impl HeapSize for RecordIssue {
    fn heap_size(&self) -> usize {
        self.file.heap_size()
            + self.uuid.heap_size()
            + self.related_uuid.heap_size()
            + self.reason.heap_size()
    }
}

impl HeapSize for FileSummary {
    fn heap_size(&self) -> usize {
        self.name.heap_size() + self.agent_id.heap_size()
    }
}

impl HeapSize for Diagnostics {
    fn heap_size(&self) -> usize {
        self.files.heap_size()
            + self.record_types.heap_size()
            + self.unknown_record_types.heap_size()
            + self.bad_lines.heap_size()
            + self.repaired_lines.heap_size()
            + self.duplicate_samples.heap_size()
            + self.phantom_branch_removed.heap_size()
            + self.orphans.heap_size()
            + self.dangling_logical_parents.heap_size()
            + self.cycles_broken.heap_size()
            + self.subagents_missing.heap_size()
            + self.subagents_unlinked.heap_size()
            + self.ignored_files.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnostics::*;

    #[test]
    fn samples_count_everything_but_keep_only_the_first() {
        let mut s = Samples::default();
        for i in 0..SAMPLE_LIMIT + 5 {
            s.push(i);
        }
        assert_eq!(s.count, SAMPLE_LIMIT + 5);
        assert_eq!(s.samples.len(), SAMPLE_LIMIT);
        assert_eq!(s.samples[0], 0);
    }
}
