//! Which labels a unit shows, and to whom (pure).
//!
//! **What a unit shows** (the `labels` of each unit in the annotations body):
//! - asked for one annotator (`?annotator=NAME`): that annotator's labels, when their set is
//!   submitted (or adjudicated: a reviewer's own final set); nothing for a draft or a
//!   discarded set;
//! - otherwise the adjudicated set, when a reviewer wrote one (the most recently written
//!   if several reviewers did);
//! - otherwise the labels that a strict majority (more than half) of the unit's submitted
//!   annotators chose, each with `confidence` the share of them that chose it, in the
//!   codebook's order of first choice. One submitted annotator is a majority of one (shares
//!   1.0); two who disagree show nothing they do not share.
//!
//! **Blind mode** (`--blind-labels`): an annotator sees only their own sets on a unit until
//! they have submitted it; then everyone's. Reviewers always see every set. A request that
//! names no annotator sees none. A round created blind holds its units to the same rule on
//! a server without blind mode, whatever route reads them ([`Blindness`]).

use std::collections::HashSet;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};

use super::model::{LabelRecord, LabelSet, Status};

/// Who is asking, as far as blind mode is concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Viewer {
    /// The annotator the request is made as (a named API key, or `?annotator=`).
    pub annotator: Option<String>,
    /// True for a configured reviewer.
    pub reviewer: bool,
}

/// Where blind mode holds for a read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Blindness {
    /// Nowhere: every set shows.
    #[default]
    Nowhere,
    /// On every unit: the server's blind mode, or a read of one blind round.
    Everywhere,
    /// On these units only (`session \0 event` keys): the units of the blind rounds of a
    /// server without blind mode.
    Units(Arc<HashSet<String>>),
}

impl Blindness {
    /// Blind mode everywhere when `blind`, else on `units` (nowhere when there are none).
    pub fn of(blind: bool, units: HashSet<String>) -> Blindness {
        match blind {
            true => Blindness::Everywhere,
            false if units.is_empty() => Blindness::Nowhere,
            false => Blindness::Units(Arc::new(units)),
        }
    }

    /// True when blind mode holds on unit `event_id` of session `session_id`.
    pub fn covers(&self, session_id: &str, event_id: &str) -> bool {
        match self {
            Blindness::Nowhere => false,
            Blindness::Everywhere => true,
            Blindness::Units(units) => units.contains(&format!("{session_id}\0{event_id}")),
        }
    }

    /// True when blind mode holds on no unit.
    pub fn is_nowhere(&self) -> bool {
        matches!(self, Blindness::Nowhere)
    }
}

/// The blind rule of a viewer over the whole store, for reads that cannot hold every
/// unit's sets at once (agreement filters rows as the database streams them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight<'v> {
    /// Every set: blind mode is off, or the viewer is a reviewer.
    Everything,
    /// No set: blind mode, and the request names nobody.
    Nothing,
    /// Blind mode: this annotator's own sets, and every set of the units on which one of
    /// their sets [`opens_unit`].
    OwnUntilSubmitted(&'v str),
    /// Blind mode on these units only (`session \0 event` keys), by the rule above for
    /// `me` (nothing of them when the request names nobody); every set elsewhere.
    BlindOn {
        /// The annotator asking, if any.
        me: Option<&'v str>,
        /// The blind units.
        units: &'v HashSet<String>,
    },
}

/// True when an annotator's set of this status shows them the others' sets on its unit in
/// blind mode: they have submitted it (or, as a reviewer, adjudicated it).
pub fn opens_unit(status: Status) -> bool {
    matches!(status, Status::Submitted | Status::Adjudicated)
}

impl Viewer {
    /// The rule this viewer reads by where `blindness` holds.
    pub fn sight<'v>(&'v self, blindness: &'v Blindness) -> Sight<'v> {
        let me = self.annotator.as_deref();
        match (blindness, me) {
            _ if self.reviewer => Sight::Everything,
            (Blindness::Nowhere, _) => Sight::Everything,
            (Blindness::Everywhere, None) => Sight::Nothing,
            (Blindness::Everywhere, Some(me)) => Sight::OwnUntilSubmitted(me),
            (Blindness::Units(units), me) => Sight::BlindOn { me, units },
        }
    }

    /// Of the sets of session `session_id` (sorted by unit), those this viewer may see
    /// where `blindness` holds.
    pub fn visible_in_session<'s>(
        &self,
        session_id: &str,
        sets: &'s [LabelSet],
        blindness: &Blindness,
    ) -> Vec<&'s LabelSet> {
        sets.chunk_by(|a, b| a.event_id == b.event_id)
            .flat_map(|unit| self.visible(unit, blindness.covers(session_id, &unit[0].event_id)))
            .collect()
    }

    /// Of a unit's `sets`, those this viewer may see (`blind`: blind mode is on).
    pub fn visible<'s>(&self, sets: &'s [LabelSet], blind: bool) -> Vec<&'s LabelSet> {
        sets.iter().filter(self.sees_on_unit(sets, blind)).collect()
    }

    /// Keeps, of a unit's `sets`, those this viewer may see (what [`Viewer::visible`]
    /// returns, without copying them).
    pub fn retain_visible(&self, sets: &mut Vec<LabelSet>, blind: bool) {
        let sees = self.sees_on_unit(sets, blind);
        sets.retain(|s| sees(&s));
    }

    /// Whether this viewer sees a set of the unit whose sets are `sets`.
    fn sees_on_unit(&self, sets: &[LabelSet], blind: bool) -> impl Fn(&&LabelSet) -> bool + '_ {
        let (everything, me) = match self.annotator.as_deref() {
            _ if !blind || self.reviewer => (true, None),
            None => (false, None),
            Some(me) => {
                let opened = sets.iter().any(|s| s.annotator == me && opens_unit(s.status));
                (opened, Some(me))
            }
        };
        move |s: &&LabelSet| everything || me.is_some_and(|me| s.annotator == me)
    }
}

/// The labels a unit shows, from its (visible) `sets`, by the rule of the module's
/// documentation. `annotator`: the annotator asked for, if any.
pub fn shown_labels(sets: &[&LabelSet], annotator: Option<&str>) -> Vec<LabelRecord> {
    if let Some(name) = annotator {
        return sets
            .iter()
            .find(|s| s.annotator == name && matches!(s.status, Status::Submitted | Status::Adjudicated))
            .map(|s| s.labels.clone())
            .unwrap_or_default();
    }
    if let Some(set) = adjudicated_in_force(sets.iter().copied()) {
        return set.labels.clone();
    }
    majority(sets)
}

/// The adjudicated set in force among a unit's `sets`: the latest written (by time, then
/// version), if a reviewer wrote one.
pub fn adjudicated_in_force<'s>(sets: impl IntoIterator<Item = &'s LabelSet>) -> Option<&'s LabelSet> {
    sets.into_iter()
        .filter(|s| s.status == Status::Adjudicated)
        .max_by(|a, b| (&a.updated_at, a.version).cmp(&(&b.updated_at, b.version)))
}

/// The labels more than half of the submitted sets carry, with their share.
fn majority(sets: &[&LabelSet]) -> Vec<LabelRecord> {
    let submitted: Vec<&LabelSet> = sets
        .iter()
        .copied()
        .filter(|s| s.status == Status::Submitted)
        .collect();
    let voters = submitted.len();
    let mut order: Vec<&str> = Vec::new();
    let mut votes: HashMap<&str, usize> = HashMap::new();
    for set in &submitted {
        for label in &set.labels {
            let n = votes.entry(&label.id).or_insert(0);
            if *n == 0 {
                order.push(&label.id);
            }
            *n += 1;
        }
    }
    order
        .into_iter()
        .filter(|id| 2 * votes[id] > voters)
        .map(|id| LabelRecord {
            id: id.to_owned(),
            confidence: Some(votes[id] as f64 / voters as f64),
            evidence: None,
            fields: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(annotator: &str, status: Status, ids: &[&str], at: &str) -> LabelSet {
        LabelSet {
            event_id: "U:1".into(),
            annotator: annotator.into(),
            status,
            labels: ids
                .iter()
                .map(|id| LabelRecord {
                    id: (*id).into(),
                    confidence: Some(0.9),
                    evidence: None,
                    fields: None,
                })
                .collect(),
            note: None,
            codebook_version: None,
            lead_time: None,
            version: 1,
            updated_at: at.into(),
        }
    }

    fn ids(labels: &[LabelRecord]) -> Vec<(&str, Option<f64>)> {
        labels.iter().map(|l| (l.id.as_str(), l.confidence)).collect()
    }

    #[test]
    fn a_strict_majority_of_submitted_sets_shows_with_its_share() {
        let sets = [
            set("a", Status::Submitted, &["x", "y"], "1"),
            set("b", Status::Submitted, &["y", "z"], "1"),
            set("c", Status::Submitted, &["y", "x"], "1"),
            set("d", Status::Draft, &["z"], "1"),
        ];
        let all: Vec<&LabelSet> = sets.iter().collect();
        let shown = shown_labels(&all, None);
        assert_eq!(ids(&shown), [("x", Some(2.0 / 3.0)), ("y", Some(1.0))]);
        let two: Vec<&LabelSet> = sets[..2].iter().collect();
        assert_eq!(ids(&shown_labels(&two, None)), [("y", Some(1.0))]);
    }

    #[test]
    fn the_latest_adjudicated_set_wins_over_the_majority() {
        let sets = [
            set("a", Status::Submitted, &["x"], "1"),
            set("r1", Status::Adjudicated, &["y"], "2"),
            set("r2", Status::Adjudicated, &["z"], "3"),
        ];
        let all: Vec<&LabelSet> = sets.iter().collect();
        assert_eq!(ids(&shown_labels(&all, None)), [("z", Some(0.9))]);
    }

    #[test]
    fn one_annotator_shows_only_a_submitted_set() {
        let sets = [
            set("a", Status::Draft, &["x"], "1"),
            set("b", Status::Submitted, &["y"], "1"),
        ];
        let all: Vec<&LabelSet> = sets.iter().collect();
        assert!(shown_labels(&all, Some("a")).is_empty());
        assert_eq!(ids(&shown_labels(&all, Some("b"))), [("y", Some(0.9))]);
        assert!(shown_labels(&all, Some("nobody")).is_empty());
    }

    #[test]
    fn blind_mode_hides_others_until_the_viewer_submitted() {
        let sets = [
            set("a", Status::Draft, &["x"], "1"),
            set("b", Status::Submitted, &["y"], "1"),
        ];
        let a = Viewer {
            annotator: Some("a".into()),
            reviewer: false,
        };
        let b = Viewer {
            annotator: Some("b".into()),
            reviewer: false,
        };
        let who = |v: Vec<&LabelSet>| v.iter().map(|s| s.annotator.clone()).collect::<Vec<_>>();
        assert_eq!(who(a.visible(&sets, true)), ["a"]);
        assert_eq!(who(b.visible(&sets, true)), ["a", "b"]);
        assert_eq!(who(a.visible(&sets, false)), ["a", "b"]);
        assert!(Viewer::default().visible(&sets, true).is_empty());
        let reviewer = Viewer {
            annotator: Some("r".into()),
            reviewer: true,
        };
        assert_eq!(who(reviewer.visible(&sets, true)), ["a", "b"]);
    }
}
