//! Labeling progress (pure): per session and per annotator, units labeled out of the
//! session's units by unit type, drafts and skips, the median lead time, and how close the
//! annotator's sets are to the adjudicated ones.
//!
//! A unit counts as labeled by an annotator when their set on it is submitted; reviewers'
//! adjudicated sets are counted apart (`adjudicated`), not as an annotator's. Agreement
//! with the adjudicated set is measured on the units that have both an adjudicated set and
//! the annotator's submitted set: the mean Jaccard similarity of the two label sets (1.0
//! when both are empty) and the share that match exactly. Sets on units the session no
//! longer has (orphaned) are left out. In blind mode the caller passes only the sets the
//! asker may see: the figures are theirs.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};
use serde::Serialize;

use super::agreement::label_agreement_with;
use super::model::{LabelSet, Status};

/// A unit as progress needs it: its id and type.
#[derive(Debug, Clone, Copy)]
pub struct UnitKind<'a> {
    /// The unit's `event_id`.
    pub event_id: &'a str,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: &'a str,
}

/// Labeled out of total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// Units labeled.
    pub labeled: usize,
    /// Units there are.
    pub total: usize,
}

/// One annotator's progress on one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnotatorProgress {
    /// Who.
    pub annotator: String,
    /// Units labeled out of the session's units.
    pub units: Count,
    /// The same, per unit type.
    pub by_unit_type: BTreeMap<String, Count>,
    /// Sets still in draft.
    pub drafts: usize,
    /// Units skipped (discarded).
    pub discarded: usize,
    /// Median lead time of the submitted sets that give one, in seconds.
    pub median_lead_time: Option<f64>,
    /// Units with both an adjudicated set and this annotator's submitted set.
    pub adjudicated_units: usize,
    /// Mean Jaccard similarity to the adjudicated sets on those units.
    pub agreement_with_adjudicated: Option<f64>,
    /// Share of those units where the label sets are the same.
    pub exact_with_adjudicated: Option<f64>,
}

/// One session's progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionProgress {
    /// The session.
    pub session_id: String,
    /// The session's units, per unit type (`labeled`: units with at least one submitted
    /// set).
    pub units: Count,
    /// The same, per unit type.
    pub by_unit_type: BTreeMap<String, Count>,
    /// Units with an adjudicated set.
    pub adjudicated: usize,
    /// Per annotator, by name.
    pub annotators: Vec<AnnotatorProgress>,
}

/// The progress on a session with `units` (in order) and the `sets` on it (those the
/// asker may see; the sets or references to them). Linear in the units and the sets: each set is counted in its unit's
/// type, never each annotator against every unit.
pub fn session_progress<S: Borrow<LabelSet>>(
    session_id: &str,
    units: &[UnitKind<'_>],
    sets: &[S],
) -> SessionProgress {
    let units = UnitTypes::new(units);
    let current: Vec<&LabelSet> = sets
        .iter()
        .map(Borrow::borrow)
        .filter(|s| units.has(&s.event_id))
        .collect();
    let adjudicated = latest_adjudicated(&current);
    let mut by_annotator: BTreeMap<&str, Vec<&LabelSet>> = BTreeMap::new();
    for set in &current {
        if set.status != Status::Adjudicated {
            by_annotator.entry(&set.annotator).or_default().push(set);
        }
    }
    let any_submitted = current
        .iter()
        .filter(|s| s.status == Status::Submitted)
        .map(|s| s.event_id.as_str());
    let (units_count, by_type) = units.tally(any_submitted);
    SessionProgress {
        session_id: session_id.to_owned(),
        units: units_count,
        by_unit_type: by_type,
        adjudicated: adjudicated.len(),
        annotators: by_annotator
            .into_iter()
            .map(|(name, sets)| annotator_progress(name, &units, &sets, &adjudicated))
            .collect(),
    }
}

/// Per unit, the adjudicated set in force (the latest written).
fn latest_adjudicated<'s>(sets: &[&'s LabelSet]) -> HashMap<&'s str, &'s LabelSet> {
    let mut latest: HashMap<&str, &LabelSet> = HashMap::new();
    for set in sets.iter().filter(|s| s.status == Status::Adjudicated) {
        let slot = latest.entry(set.event_id.as_str()).or_insert(set);
        if (&set.updated_at, set.version) > (&slot.updated_at, slot.version) {
            *slot = set;
        }
    }
    latest
}

fn annotator_progress(
    name: &str,
    units: &UnitTypes<'_>,
    sets: &[&LabelSet],
    adjudicated: &HashMap<&str, &LabelSet>,
) -> AnnotatorProgress {
    let submitted = || sets.iter().filter(|s| s.status == Status::Submitted);
    let (count, by_type) = units.tally(submitted().map(|s| s.event_id.as_str()));
    let mut lead_times: Vec<f64> = submitted().filter_map(|s| s.lead_time).collect();
    let compared: Vec<f64> = submitted()
        .filter_map(|s| adjudicated.get(s.event_id.as_str()).map(|a| jaccard(s, a)))
        .collect();
    AnnotatorProgress {
        annotator: name.to_owned(),
        units: count,
        by_unit_type: by_type,
        drafts: sets.iter().filter(|s| s.status == Status::Draft).count(),
        discarded: sets.iter().filter(|s| s.status == Status::Discarded).count(),
        median_lead_time: median(&mut lead_times),
        adjudicated_units: compared.len(),
        agreement_with_adjudicated: mean(&compared),
        exact_with_adjudicated: mean(
            &compared
                .iter()
                .map(|&j| if j == 1.0 { 1.0 } else { 0.0 })
                .collect::<Vec<_>>(),
        ),
    }
}

/// A session's units by `event_id`, with the count of each type: what a tally of labeled
/// units needs, built once per session.
struct UnitTypes<'a> {
    /// (event_id, unit_type) of every unit, sorted (a unit listed twice stays twice).
    sorted: Vec<(&'a str, &'a str)>,
    /// The units of each type, none labeled yet.
    totals: (Count, BTreeMap<String, Count>),
}

impl<'a> UnitTypes<'a> {
    fn new(units: &[UnitKind<'a>]) -> UnitTypes<'a> {
        let mut sorted: Vec<(&str, &str)> = units.iter().map(|u| (u.event_id, u.unit_type)).collect();
        sorted.sort_unstable();
        let mut overall = Count::default();
        let mut by_type: BTreeMap<String, Count> = BTreeMap::new();
        for unit in units {
            overall.total += 1;
            by_type.entry(unit.unit_type.to_owned()).or_default().total += 1;
        }
        UnitTypes {
            sorted,
            totals: (overall, by_type),
        }
    }

    /// The units with id `event_id` (one, unless the session repeats an id).
    fn with_id(&self, event_id: &str) -> &[(&'a str, &'a str)] {
        let start = self.sorted.partition_point(|(e, _)| *e < event_id);
        let end = start + self.sorted[start..].partition_point(|(e, _)| *e == event_id);
        &self.sorted[start..end]
    }

    /// True when the session has a unit `event_id`.
    fn has(&self, event_id: &str) -> bool {
        !self.with_id(event_id).is_empty()
    }

    /// Units labeled (their ids in `labeled`, repeats counted once) out of the session's,
    /// overall and per type.
    fn tally<'s>(&self, labeled: impl Iterator<Item = &'s str>) -> (Count, BTreeMap<String, Count>) {
        let labeled: foldhash::HashSet<&str> = labeled.collect();
        let (mut overall, mut by_type) = self.totals.clone();
        for event_id in labeled {
            for (_, unit_type) in self.with_id(event_id) {
                overall.labeled += 1;
                if let Some(count) = by_type.get_mut(*unit_type) {
                    count.labeled += 1;
                }
            }
        }
        (overall, by_type)
    }
}

/// Jaccard similarity of two sets' label ids (1.0 when both are empty).
fn jaccard(a: &LabelSet, b: &LabelSet) -> f64 {
    let ids = |s: &LabelSet| s.labels.iter().map(|l| l.id.clone()).collect::<Vec<String>>();
    label_agreement_with(&ids(a), &ids(b))
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::model::LabelRecord;

    fn set(event: &str, who: &str, status: Status, ids: &[&str], lead: Option<f64>) -> LabelSet {
        LabelSet {
            event_id: event.into(),
            annotator: who.into(),
            status,
            codebook_version: None,
            labels: ids
                .iter()
                .map(|id| LabelRecord {
                    id: (*id).into(),
                    confidence: None,
                    evidence: None,
                    fields: None,
                })
                .collect(),
            note: None,
            lead_time: lead,
            version: 1,
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn progress_counts_units_by_type_and_compares_with_adjudication() {
        let units = [
            UnitKind {
                event_id: "u1",
                unit_type: "user_turn",
            },
            UnitKind {
                event_id: "a1",
                unit_type: "assistant_turn",
            },
            UnitKind {
                event_id: "a2",
                unit_type: "assistant_turn",
            },
        ];
        let sets = [
            set("u1", "ann", Status::Submitted, &["x"], Some(10.0)),
            set("a1", "ann", Status::Submitted, &["x", "y"], Some(30.0)),
            set("a2", "ann", Status::Draft, &[], None),
            set("a1", "rev", Status::Adjudicated, &["y"], None),
            set("u1", "bob", Status::Discarded, &[], None),
            set("gone", "ann", Status::Submitted, &["x"], Some(99.0)),
        ];
        let p = session_progress("s", &units, &sets);
        assert_eq!(p.units, Count { labeled: 2, total: 3 });
        assert_eq!(p.by_unit_type["assistant_turn"], Count { labeled: 1, total: 2 });
        assert_eq!(p.adjudicated, 1);
        let names: Vec<&str> = p.annotators.iter().map(|a| a.annotator.as_str()).collect();
        assert_eq!(names, ["ann", "bob"]);
        let ann = &p.annotators[0];
        assert_eq!(ann.units, Count { labeled: 2, total: 3 });
        assert_eq!(ann.drafts, 1);
        assert_eq!(ann.median_lead_time, Some(20.0));
        assert_eq!(ann.adjudicated_units, 1);
        assert_eq!(ann.agreement_with_adjudicated, Some(0.5));
        assert_eq!(ann.exact_with_adjudicated, Some(0.0));
        assert_eq!(p.annotators[1].discarded, 1);
        assert_eq!(p.annotators[1].median_lead_time, None);
    }
}
