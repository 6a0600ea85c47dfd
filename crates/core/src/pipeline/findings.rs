//! What the pipeline found and did, recorded in the diagnostics once the order is known:
//! each file's summary, duplicates removed, orphans, dangling logical parents, cycles
//! broken, and the sub-agents linking could not tie.

use super::dedup::{Dedup, DropReason};
use super::order::{OrderUnit, Ordering, ParentSlot};
use super::read::{FileInfo, FileStats};
use super::subagents::Linking;
use crate::diagnostics::{Diagnostics, FileSummary, LineIssue, RecordIssue};
use crate::formats::claude_code::records::Record;
use crate::formats::input::{agent_id_from_name, FileRole};

/// What the diagnostics need from the pipeline's intermediate results.
pub(crate) struct Findings<'a> {
    pub(crate) files: &'a [FileInfo],
    pub(crate) records: &'a [Record],
    pub(crate) dedup: &'a Dedup,
    pub(crate) file_stats: &'a [FileStats],
    pub(crate) ordering: &'a Ordering,
    pub(crate) units: &'a [OrderUnit<'a>],
    pub(crate) unit_records: &'a [Vec<usize>],
}

impl Findings<'_> {
    /// The issue of record `i`, naming `related` and saying `reason`.
    fn issue(&self, i: usize, related: Option<&str>, reason: &str) -> RecordIssue {
        let r = &self.records[i];
        RecordIssue {
            file: self.files[r.pos.file as usize].name.clone(),
            line: r.pos.line,
            uuid: r.uuid.as_deref().map(str::to_owned),
            related_uuid: related.map(str::to_owned),
            reason: reason.to_owned(),
        }
    }

    /// Records in `d` each file's summary, the duplicates removed, the orphans, the
    /// dangling logical parents, the cycles broken and what linking found.
    pub(crate) fn record(&self, d: &mut Diagnostics, linking: &Linking) {
        for (fi, f) in self.files.iter().enumerate() {
            let role = match (f.role, f.included) {
                (_, false) => "ignored",
                (FileRole::Main, _) => "main",
                (FileRole::SubAgent, _) => "subagent",
                (FileRole::SubAgentMeta, _) => "subagent_meta",
            };
            d.files.push(FileSummary {
                name: f.name.clone(),
                role,
                agent_id: (f.role != FileRole::Main)
                    .then(|| agent_id_from_name(crate::formats::input::base_name(&f.name)).map(str::to_owned))
                    .flatten(),
                bytes: f.bytes,
                lines: self.file_stats[fi].lines,
                records: self.file_stats[fi].records,
            });
        }
        for (i, reason) in self.dedup.dropped.iter().enumerate() {
            let Some(reason) = reason else { continue };
            let twin = self.dedup.twin[i].and_then(|t| self.records[t].uuid.as_deref());
            let found = self.issue(i, twin, reason.describe());
            match reason {
                DropReason::SameUuid => d.duplicates_removed.same_uuid += 1,
                DropReason::AssistantSignature => d.duplicates_removed.assistant_signature += 1,
                DropReason::UserPartialCopy => d.duplicates_removed.user_partial_copy += 1,
                DropReason::PhantomBranch => {
                    d.phantom_branch_removed.push(found);
                    continue;
                }
            }
            d.duplicate_samples.push(found);
        }
        for &u in &self.ordering.orphans {
            let missing_parent = self.units[u].parents.iter().flatten().next().copied();
            d.orphans.push(self.issue(
                self.unit_records[u][0],
                missing_parent,
                "parent not in the session; ordered as a new root",
            ));
        }
        for &u in &self.ordering.dangling_logical {
            let logical = self.units[u].parents[ParentSlot::Logical as usize];
            d.dangling_logical_parents.push(self.issue(
                self.unit_records[u][0],
                logical,
                "logicalParentUuid names a record never written; parentUuid used",
            ));
        }
        for &u in &self.ordering.cycles_broken {
            let parent = self.units[u].parents.iter().flatten().next().copied();
            d.cycles_broken.push(self.issue(
                self.unit_records[u][0],
                parent,
                "on a parent cycle; ordered as a root",
            ));
        }
        d.subagents_missing = linking.missing.clone();
        d.subagents_unlinked = linking.unlinked.clone();
        for (fi, reason) in &linking.ignored {
            d.ignored_files.push(LineIssue {
                file: self.files[*fi].name.clone(),
                line: 0,
                reason: reason.clone(),
            });
        }
    }
}
