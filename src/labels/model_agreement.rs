//! A model's suggestions weighed as one more annotator's (pure): how far each model agrees
//! with the human annotators and with the adjudicated sets, its precision and recall per
//! label, and the units where it departs from the humans, for review.
//!
//! # Input
//!
//! One [`UnitCodings`] per unit: the human annotators' submitted label sets, each model's
//! suggested set, and the adjudicated set if a reviewer wrote one. A set is a list of label
//! ids; an id listed twice counts once.
//!
//! # Alpha
//!
//! Every alpha is Krippendorff's alpha for nominal data (Krippendorff, "Computing
//! Krippendorff's Alpha-Reliability", 2011), computed by [`super::agreement::report`] with
//! its rules, so that a figure here and the same figure at `GET /api/labels/agreement` are
//! one computation: each label is a present/absent decision per coding of a unit; the
//! `overall` alpha pools every (unit, label) item of the pairable units (those with at
//! least two codings), each label's alpha its own items; the labels are the codebook's, in
//! its order, then any other id chosen on a pairable unit, sorted. `None` where alpha is
//! undefined (no pairable unit, or a single value ever used).
//!
//! - **Humans** ([`ModelAgreementReport::humans`]): the human codings alone.
//! - **The model as one more coder** ([`ModelFigures::with_humans`]): the reliability data
//!   of the humans with the model added as a further coder, a column of the coders-by-units
//!   matrix like any annotator's: its value is missing on the units it made no suggestion
//!   on, as alpha allows for any coder. This is the standard use of alpha with any number
//!   of coders and missing values (Krippendorff 2011), nothing added to it. Compared with
//!   the humans' alpha it says whether the model lowers the team's reliability (it
//!   disagrees with the humans more than they do among themselves) or keeps it. A unit one
//!   human coded becomes pairable with the model's value, so the units counted can differ
//!   from the humans' (both figures say how many).
//! - **Pairwise** ([`ModelFigures::pairwise`]): for each human annotator, alpha with two
//!   coders, the model and that annotator, over the units both coded.
//! - **Against the adjudicated sets** ([`ModelFigures::adjudicated`]): alpha with two
//!   coders, the model and the adjudicated set as if a coder, over the units having both.
//!
//! # Precision and recall
//!
//! Against the adjudicated set, over the units having both an adjudicated set and the
//! model's suggestion ([`ModelFigures::adjudicated_units`]): per label, a true positive is
//! a unit where both carry the label, a false positive one where only the model does, a
//! false negative one where only the adjudicated set does; `support` counts the units the
//! adjudicated set carries it on (true positives plus false negatives). Precision is
//! TP / (TP + FP), recall TP / (TP + FN), F1 their harmonic mean, written 2TP / (2TP + FP +
//! FN) so that it is 0, not undefined, when one of them is 0; each `None` where its
//! denominator is 0. The labels are listed as alpha's are (the codebook's, then others
//! either side chose, sorted); [`ModelFigures::micro`] sums the counts over all labels.
//!
//! # Disagreements
//!
//! [`ModelFigures::disagreements`] lists, in input order, the units where the model's
//! suggestion differs from the unit's reference set: the adjudicated set if there is one,
//! else the labels a strict majority (more than half) of the unit's human annotators chose
//! (the rule of the annotations body's consensus; one annotator is a majority of one, two
//! who disagree agree on nothing they do not share). A unit with neither, or without a
//! suggestion from the model, is not listed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::agreement::{report, LabelAgreement, OverallAgreement, PairPage};
use super::codings::{Coding, CodingTable};

/// One unit's codings, as the model agreement reads them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitCodings {
    /// The session.
    pub session_id: String,
    /// The unit.
    pub event_id: String,
    /// The human annotators' submitted sets, by annotator.
    #[serde(default)]
    pub humans: BTreeMap<String, Vec<String>>,
    /// The models' suggested sets, by model.
    #[serde(default)]
    pub models: BTreeMap<String, Vec<String>>,
    /// The adjudicated set, if a reviewer wrote one.
    #[serde(default)]
    pub adjudicated: Option<Vec<String>>,
}

/// Alpha over a set of codings: pooled, and per label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlphaFigures {
    /// Pooled over every (unit, label) item of the pairable units.
    pub overall: OverallAgreement,
    /// Per label, in report order.
    pub labels: Vec<LabelAgreement>,
}

/// The humans' agreement and every model's, as [`model_agreement`] computes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelAgreementReport {
    /// Units given.
    pub units: usize,
    /// The human annotators among themselves.
    pub humans: AlphaFigures,
    /// Each model that suggested on a unit, in name order.
    pub models: Vec<ModelFigures>,
}

/// One model weighed against the humans and the adjudicated sets (see the [module
/// documentation](self) for each definition).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelFigures {
    /// The model.
    pub model: String,
    /// Units it suggested on.
    pub units: usize,
    /// Alpha of the humans with the model as one more coder.
    pub with_humans: AlphaFigures,
    /// Alpha of the model with each human annotator, in name order.
    pub pairwise: Vec<PairwiseAlpha>,
    /// Alpha of the model with the adjudicated sets.
    pub adjudicated: AlphaFigures,
    /// Units with both an adjudicated set and the model's suggestion: what the scores
    /// count.
    pub adjudicated_units: usize,
    /// Precision, recall and F1 per label against the adjudicated sets.
    pub scores: Vec<LabelScores>,
    /// The same, the counts summed over every label.
    pub micro: Scores,
    /// Units where the suggestion differs from the adjudicated set or the human majority.
    pub disagreements: Vec<Disagreement>,
}

/// Alpha of a model with one human annotator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairwiseAlpha {
    /// The annotator.
    pub annotator: String,
    /// Units both coded.
    pub units: usize,
    /// Krippendorff's alpha over their pooled decisions; `None` when undefined.
    pub krippendorff_alpha: Option<f64>,
}

/// Counts and scores of a model's decisions against the adjudicated sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Scores {
    /// Units where both carry the label.
    pub true_positives: usize,
    /// Units where only the model does.
    pub false_positives: usize,
    /// Units where only the adjudicated set does.
    pub false_negatives: usize,
    /// Units the adjudicated set carries it on.
    pub support: usize,
    /// TP / (TP + FP); `None` when the model never chose it.
    pub precision: Option<f64>,
    /// TP / (TP + FN); `None` when the adjudicated sets never carry it.
    pub recall: Option<f64>,
    /// 2TP / (2TP + FP + FN); `None` when neither side ever chose it.
    pub f1: Option<f64>,
}

impl Scores {
    /// Adds one unit's decision: whether the model and the adjudicated set carry the label.
    fn add(&mut self, suggested: bool, adjudicated: bool) {
        match (suggested, adjudicated) {
            (true, true) => self.true_positives += 1,
            (true, false) => self.false_positives += 1,
            (false, true) => self.false_negatives += 1,
            (false, false) => {}
        }
    }

    /// Adds another label's counts.
    fn sum(&mut self, other: &Scores) {
        self.true_positives += other.true_positives;
        self.false_positives += other.false_positives;
        self.false_negatives += other.false_negatives;
    }

    /// Fills support and the ratios from the counts.
    fn finish(mut self) -> Scores {
        let ratio = |n: usize, d: usize| (d > 0).then(|| n as f64 / d as f64);
        let (tp, fp, fn_) = (self.true_positives, self.false_positives, self.false_negatives);
        self.support = tp + fn_;
        self.precision = ratio(tp, tp + fp);
        self.recall = ratio(tp, tp + fn_);
        self.f1 = ratio(2 * tp, 2 * tp + fp + fn_);
        self
    }
}

/// A model's scores on one label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelScores {
    /// The label id.
    pub label: String,
    /// Its counts and scores.
    #[serde(flatten)]
    pub scores: Scores,
}

/// What a unit's suggestion is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// The adjudicated set.
    Adjudicated,
    /// The labels more than half of the unit's human annotators chose.
    HumanMajority,
}

/// A unit where a model's suggestion differs from the reference set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    /// The session.
    pub session_id: String,
    /// The unit.
    pub event_id: String,
    /// What the suggestion is compared with.
    pub reference: Reference,
    /// Human annotators of the unit.
    pub humans: usize,
    /// The reference set, in report order.
    pub expected: Vec<String>,
    /// The model's set, in report order.
    pub suggested: Vec<String>,
    /// Labels of the reference the model left out.
    pub missing: Vec<String>,
    /// Labels the model chose that the reference does not carry.
    pub extra: Vec<String>,
}

/// The humans' agreement and each model's figures over `units`, the labels of the codebook
/// being `label_ids` (see the [module documentation](self) for every definition).
pub fn model_agreement(units: &[UnitCodings], label_ids: &[String]) -> ModelAgreementReport {
    let keys: Vec<String> = units
        .iter()
        .map(|u| format!("{}\0{}", u.session_id, u.event_id))
        .collect();
    let mut humans = Vec::new();
    for (unit, key) in units.iter().zip(&keys) {
        humans.extend(unit.humans.iter().map(|(name, labels)| Coding {
            unit: key,
            annotator: name,
            labels,
        }));
    }
    let models: BTreeSet<&str> = units
        .iter()
        .flat_map(|u| u.models.keys().map(String::as_str))
        .collect();
    let order = LabelOrder::new(label_ids);
    ModelAgreementReport {
        units: units.len(),
        humans: alpha_figures(&humans, label_ids),
        models: models
            .into_iter()
            .map(|model| model_figures(model, units, &keys, &humans, &order))
            .collect(),
    }
}

/// One model's figures; `humans` are every unit's human codings.
fn model_figures(
    model: &str,
    units: &[UnitCodings],
    keys: &[String],
    humans: &[Coding<'_>],
    order: &LabelOrder<'_>,
) -> ModelFigures {
    let coder = unused_name(units);
    let mut with_humans = humans.to_vec();
    let mut pairs: BTreeMap<&str, Vec<Coding<'_>>> = BTreeMap::new();
    let mut adjudicated = Vec::new();
    let mut suggested_on = 0;
    for (unit, key) in units.iter().zip(keys) {
        let Some(labels) = unit.models.get(model) else {
            continue;
        };
        suggested_on += 1;
        let suggestion = Coding {
            unit: key,
            annotator: &coder,
            labels,
        };
        with_humans.push(suggestion);
        for (name, theirs) in &unit.humans {
            let pair = pairs.entry(name).or_default();
            pair.push(Coding {
                unit: key,
                annotator: "human",
                labels: theirs,
            });
            pair.push(Coding {
                annotator: "model",
                ..suggestion
            });
        }
        if let Some(reference) = &unit.adjudicated {
            adjudicated.push(Coding {
                unit: key,
                annotator: "adjudicated",
                labels: reference,
            });
            adjudicated.push(suggestion);
        }
    }
    let (scores, micro) = scores(model, units, order);
    ModelFigures {
        model: model.to_owned(),
        units: suggested_on,
        with_humans: alpha_figures(&with_humans, order.ids),
        pairwise: pairs
            .into_iter()
            .map(|(annotator, codings)| {
                let overall = alpha_figures(&codings, order.ids).overall;
                PairwiseAlpha {
                    annotator: annotator.to_owned(),
                    units: overall.units,
                    krippendorff_alpha: overall.krippendorff_alpha,
                }
            })
            .collect(),
        adjudicated: alpha_figures(&adjudicated, order.ids),
        adjudicated_units: adjudicated.len() / 2,
        scores,
        micro,
        disagreements: disagreements(model, units, order),
    }
}

/// Alpha over `codings`, pooled and per label, by the agreement report's rules.
fn alpha_figures(codings: &[Coding<'_>], label_ids: &[String]) -> AlphaFigures {
    // One pair at most: the pairs' Cohen's kappas are not reported here.
    let page = PairPage {
        after: None,
        limit: 1,
    };
    let report = report(CodingTable::from_codings(codings), label_ids, &page);
    AlphaFigures {
        overall: report.overall,
        labels: report.labels,
    }
}

/// A coder name no human annotator of `units` has, for the model among them.
fn unused_name(units: &[UnitCodings]) -> String {
    let mut name = "\0model".to_owned();
    while units.iter().any(|u| u.humans.contains_key(&name)) {
        name.push('\0');
    }
    name
}

/// The scores of `model` against the adjudicated sets, per label and summed.
fn scores(model: &str, units: &[UnitCodings], order: &LabelOrder<'_>) -> (Vec<LabelScores>, Scores) {
    let compared: Vec<(BTreeSet<&str>, BTreeSet<&str>)> = units
        .iter()
        .filter_map(|u| Some((set_of(u.models.get(model)?), set_of(u.adjudicated.as_ref()?))))
        .collect();
    let chosen = compared.iter().flat_map(|(s, a)| s.iter().chain(a).copied());
    let mut micro = Scores::default();
    let per_label = order
        .labels_with(chosen)
        .into_iter()
        .map(|label| {
            let mut scores = Scores::default();
            for (suggested, adjudicated) in &compared {
                scores.add(suggested.contains(label), adjudicated.contains(label));
            }
            micro.sum(&scores);
            LabelScores {
                label: label.to_owned(),
                scores: scores.finish(),
            }
        })
        .collect();
    (per_label, micro.finish())
}

/// The units where `model`'s suggestion differs from the reference set.
fn disagreements(model: &str, units: &[UnitCodings], order: &LabelOrder<'_>) -> Vec<Disagreement> {
    let mut found = Vec::new();
    for unit in units {
        let Some(suggested) = unit.models.get(model) else {
            continue;
        };
        let (reference, expected) = match &unit.adjudicated {
            Some(set) => (Reference::Adjudicated, set_of(set)),
            None if !unit.humans.is_empty() => (Reference::HumanMajority, majority(&unit.humans)),
            None => continue,
        };
        let suggested = set_of(suggested);
        if suggested == expected {
            continue;
        }
        found.push(Disagreement {
            session_id: unit.session_id.clone(),
            event_id: unit.event_id.clone(),
            reference,
            humans: unit.humans.len(),
            expected: order.sorted(expected.iter().copied()),
            suggested: order.sorted(suggested.iter().copied()),
            missing: order.sorted(expected.difference(&suggested).copied()),
            extra: order.sorted(suggested.difference(&expected).copied()),
        });
    }
    found
}

/// The labels more than half of `humans` chose.
fn majority(humans: &BTreeMap<String, Vec<String>>) -> BTreeSet<&str> {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for set in humans.values() {
        for label in set_of(set) {
            *votes.entry(label).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .filter(|&(_, n)| 2 * n > humans.len())
        .map(|(label, _)| label)
        .collect()
}

/// A set's label ids, each once.
fn set_of(labels: &[String]) -> BTreeSet<&str> {
    labels.iter().map(String::as_str).collect()
}

/// The report's order of labels: the codebook's, then any other id, sorted.
struct LabelOrder<'a> {
    ids: &'a [String],
}

impl<'a> LabelOrder<'a> {
    fn new(ids: &'a [String]) -> LabelOrder<'a> {
        LabelOrder { ids }
    }

    /// Where `label` sorts: the codebook's labels first, in order, then others by id.
    fn key<'l>(&self, label: &'l str) -> (usize, &'l str) {
        let position = self.ids.iter().position(|id| id == label);
        (position.unwrap_or(self.ids.len()), label)
    }

    /// `labels`, each once, in report order.
    fn sorted<'l>(&self, labels: impl IntoIterator<Item = &'l str>) -> Vec<String> {
        let mut labels: Vec<&str> = labels.into_iter().collect();
        labels.sort_by_key(|&l| self.key(l));
        labels.dedup();
        labels.into_iter().map(str::to_owned).collect()
    }

    /// The codebook's labels, then the other ids of `chosen`, in report order.
    fn labels_with<'l>(&'l self, chosen: impl IntoIterator<Item = &'l str>) -> Vec<&'l str> {
        let mut labels: Vec<&str> = self.ids.iter().map(String::as_str).collect();
        labels.extend(chosen);
        labels.sort_by_key(|&l| self.key(l));
        labels.dedup();
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EPS: f64 = 1e-12;

    fn close(actual: Option<f64>, expected: f64) -> bool {
        actual.is_some_and(|a| (a - expected).abs() <= EPS)
    }

    fn ids(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|l| (*l).to_owned()).collect()
    }

    fn unit(
        event: &str,
        humans: &[(&str, &[&str])],
        model: Option<&[&str]>,
        adjudicated: Option<&[&str]>,
    ) -> UnitCodings {
        UnitCodings {
            session_id: "s".into(),
            event_id: event.into(),
            humans: humans.iter().map(|(n, l)| ((*n).to_owned(), ids(l))).collect(),
            models: model.map(|l| ("m".to_owned(), ids(l))).into_iter().collect(),
            adjudicated: adjudicated.map(ids),
        }
    }

    /// Three units, two labels, two annotators, one model, every unit adjudicated:
    ///
    /// | unit | alice | bob    | model | adjudicated |
    /// |------|-------|--------|-------|-------------|
    /// | u1   | {A}   | {A}    | {A}   | {A}         |
    /// | u2   | {B}   | {A, B} | {B}   | {B}         |
    /// | u3   | {}    | {B}    | {A}   | {B}         |
    fn three_units() -> Vec<UnitCodings> {
        vec![
            unit(
                "u1",
                &[("alice", &["A"]), ("bob", &["A"])],
                Some(&["A"]),
                Some(&["A"]),
            ),
            unit(
                "u2",
                &[("alice", &["B"]), ("bob", &["A", "B"])],
                Some(&["B"]),
                Some(&["B"]),
            ),
            unit(
                "u3",
                &[("alice", &[]), ("bob", &["B"])],
                Some(&["A"]),
                Some(&["B"]),
            ),
        ]
    }

    /// Alpha by hand, pooled over the six (unit, label) items of binary values, with
    /// alpha = 1 - (n - 1) * D / (n^2 - sum_c n_c^2), D the off-diagonal coincidences,
    /// each unit of m values adding (m(m - 1) - sum_c n_uc(n_uc - 1)) / (m - 1).
    ///
    /// Humans (m = 2 per item): (present, absent) counts u1-A (2,0), u1-B (0,2), u2-A
    /// (1,1), u2-B (2,0), u3-A (0,2), u3-B (1,1). The two split items add 2 each: D = 4;
    /// n = 12 with 6 present and 6 absent, so n^2 - sum n_c^2 = 144 - 72 = 72, and
    /// alpha = 1 - 11 * 4 / 72 = 7/18 = 0.3889.
    ///
    /// With the model as a third coder (m = 3): u1-A (3,0), u1-B (0,3), u2-A (1,2), u2-B
    /// (3,0), u3-A (1,2), u3-B (1,2). Each (1,2) item adds (6 - 2) / 2 = 2: D = 6; n = 18
    /// with 9 present, 9 absent: 324 - 162 = 162; alpha = 1 - 17 * 6 / 162 = 10/27.
    #[test]
    fn alphas_match_the_hand_computed_ones() {
        let report = model_agreement(&three_units(), &ids(&["A", "B"]));
        assert_eq!(report.units, 3);
        assert!(
            close(report.humans.overall.krippendorff_alpha, 7.0 / 18.0),
            "{report:?}"
        );
        assert_eq!(
            (report.humans.overall.units, report.humans.overall.annotators),
            (3, 2)
        );
        let m = &report.models[0];
        assert_eq!((m.model.as_str(), m.units), ("m", 3));
        assert!(
            close(m.with_humans.overall.krippendorff_alpha, 10.0 / 27.0),
            "{m:?}"
        );
        assert_eq!(
            (m.with_humans.overall.units, m.with_humans.overall.annotators),
            (3, 3)
        );
        assert_eq!(m.with_humans.overall.decisions, 18);
        // Model and alice: only u3-A splits (D = 2); 5 present, 7 absent: 144 - 74 = 70;
        // 1 - 11 * 2 / 70 = 24/35. Model and bob: u2-A, u3-A and u3-B split (D = 6); 7
        // present, 5 absent: 1 - 11 * 6 / 70 = 2/35.
        let pairwise: Vec<(&str, usize)> = m
            .pairwise
            .iter()
            .map(|p| (p.annotator.as_str(), p.units))
            .collect();
        assert_eq!(pairwise, [("alice", 3), ("bob", 3)]);
        assert!(close(m.pairwise[0].krippendorff_alpha, 24.0 / 35.0));
        assert!(close(m.pairwise[1].krippendorff_alpha, 2.0 / 35.0));
        // Model and adjudicated: u3-A and u3-B split (D = 4); 6 present, 6 absent:
        // 1 - 11 * 4 / 72 = 7/18.
        assert!(close(m.adjudicated.overall.krippendorff_alpha, 7.0 / 18.0));
        assert_eq!(m.adjudicated_units, 3);
        // Per label, model and adjudicated: A items (2,0), (0,2), (1,1): D = 2, n = 6 with
        // 3 present: 1 - 5 * 2 / 18 = 4/9; B items (0,2), (2,0), (1,1): the same.
        let labels: Vec<&str> = m.adjudicated.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["A", "B"]);
        assert!(close(m.adjudicated.labels[0].krippendorff_alpha, 4.0 / 9.0));
        assert!(close(m.adjudicated.labels[1].krippendorff_alpha, 4.0 / 9.0));
    }

    #[test]
    fn precision_recall_and_f1_count_the_adjudicated_units() {
        let report = model_agreement(&three_units(), &ids(&["A", "B", "C"]));
        let m = &report.models[0];
        let a = &m.scores[0];
        assert_eq!(a.label, "A");
        assert_eq!(
            (
                a.scores.true_positives,
                a.scores.false_positives,
                a.scores.false_negatives,
                a.scores.support
            ),
            (1, 1, 0, 1)
        );
        assert!(close(a.scores.precision, 0.5) && close(a.scores.recall, 1.0));
        assert!(close(a.scores.f1, 2.0 / 3.0));
        let b = &m.scores[1];
        assert_eq!(
            (
                b.scores.true_positives,
                b.scores.false_negatives,
                b.scores.support
            ),
            (1, 1, 2)
        );
        assert!(close(b.scores.precision, 1.0) && close(b.scores.recall, 0.5));
        // A label neither side chose is listed, with no ratio.
        let c = &m.scores[2];
        assert_eq!((c.label.as_str(), c.scores.support), ("C", 0));
        assert_eq!(
            (c.scores.precision, c.scores.recall, c.scores.f1),
            (None, None, None)
        );
        assert_eq!(
            (
                m.micro.true_positives,
                m.micro.false_positives,
                m.micro.false_negatives
            ),
            (2, 1, 1)
        );
        assert!(close(m.micro.precision, 2.0 / 3.0) && close(m.micro.recall, 2.0 / 3.0));
        assert!(close(m.micro.f1, 2.0 / 3.0));
        // Serialised flat, the scores beside the label.
        let json = serde_json::to_value(a).unwrap();
        assert_eq!(json["label"], "A");
        assert_eq!(json["precision"], 0.5);
        assert_eq!(json["support"], 1);
    }

    #[test]
    fn disagreements_compare_with_the_adjudicated_set_else_the_human_majority() {
        let mut units = three_units();
        // A strict majority: two of three chose A, one of three B.
        units.push(unit(
            "u4",
            &[("alice", &["A"]), ("bob", &["A", "B"]), ("carol", &[])],
            Some(&["B"]),
            None,
        ));
        // Two who disagree agree on nothing: the empty suggestion matches.
        units.push(unit("u5", &[("alice", &["A"]), ("bob", &["B"])], Some(&[]), None));
        // No reference, or no suggestion: not listed.
        units.push(unit("u6", &[], Some(&["A"]), None));
        units.push(unit("u7", &[("alice", &["A"])], None, Some(&["B"])));
        let report = model_agreement(&units, &ids(&["B", "A"]));
        let found = &report.models[0].disagreements;
        let events: Vec<&str> = found.iter().map(|d| d.event_id.as_str()).collect();
        assert_eq!(events, ["u3", "u4"]);
        assert_eq!(found[0].reference, Reference::Adjudicated);
        assert_eq!(
            (found[0].expected.clone(), found[0].suggested.clone()),
            (ids(&["B"]), ids(&["A"]))
        );
        assert_eq!(
            (found[0].missing.clone(), found[0].extra.clone()),
            (ids(&["B"]), ids(&["A"]))
        );
        assert_eq!(found[1].reference, Reference::HumanMajority);
        assert_eq!(found[1].humans, 3);
        assert_eq!(found[1].expected, ids(&["A"]));
        assert_eq!(found[1].extra, ids(&["B"]));
        let json = serde_json::to_value(&found[1]).unwrap();
        assert_eq!(json["reference"], "human_majority");
    }

    #[test]
    fn units_and_models_without_data_give_undefined_figures_not_errors() {
        let empty = model_agreement(&[], &ids(&["A"]));
        assert_eq!((empty.units, empty.models.len()), (0, 0));
        assert_eq!(empty.humans.overall.krippendorff_alpha, None);
        // One human per unit: the humans have no pairable unit, the model makes them pairable.
        let units = vec![
            unit("u1", &[("alice", &["A"])], Some(&["A"]), None),
            unit("u2", &[("alice", &[])], Some(&[]), None),
        ];
        let report = model_agreement(&units, &ids(&["A"]));
        assert_eq!(report.humans.overall.units, 0);
        assert_eq!(report.humans.overall.krippendorff_alpha, None);
        let m = &report.models[0];
        assert_eq!(m.with_humans.overall.units, 2);
        assert!(close(m.with_humans.overall.krippendorff_alpha, 1.0));
        assert_eq!(
            (m.adjudicated_units, m.adjudicated.overall.krippendorff_alpha),
            (0, None)
        );
        assert!(m.scores.iter().all(|s| s.scores.precision.is_none()));
        assert!(m.disagreements.is_empty());
    }

    #[test]
    fn a_human_named_like_the_model_stays_a_separate_coder() {
        let units = vec![
            unit("u1", &[("\0model", &["A"]), ("bob", &["A"])], Some(&["B"]), None),
            unit("u2", &[("\0model", &["B"]), ("bob", &["B"])], Some(&["A"]), None),
        ];
        let report = model_agreement(&units, &ids(&["A", "B"]));
        assert_eq!(report.models[0].with_humans.overall.annotators, 3);
        assert_eq!(report.models[0].with_humans.overall.decisions, 12);
    }

    /// Units of up to three humans, a model and an adjudicated set, over labels A to C.
    fn arbitrary_units(model_is_adjudicated: bool) -> impl Strategy<Value = Vec<UnitCodings>> {
        let set = || proptest::sample::subsequence(vec!["A", "B", "C"], 0..=3);
        let one = (
            proptest::collection::vec(set(), 0..=3),
            proptest::option::of(set()),
            proptest::option::of(set()),
        );
        proptest::collection::vec(one, 0..12).prop_map(move |units| {
            units
                .into_iter()
                .enumerate()
                .map(|(i, (humans, model, adjudicated))| {
                    let model = if model_is_adjudicated {
                        adjudicated.clone()
                    } else {
                        model
                    };
                    UnitCodings {
                        session_id: "s".into(),
                        event_id: format!("u{i}"),
                        humans: humans
                            .iter()
                            .enumerate()
                            .map(|(h, l)| (format!("h{h}"), ids(l)))
                            .collect(),
                        models: model.map(|l| ("m".to_owned(), ids(&l))).into_iter().collect(),
                        adjudicated: adjudicated.map(|l| ids(&l)),
                    }
                })
                .collect()
        })
    }

    fn in_unit_range(x: Option<f64>) -> bool {
        x.is_none_or(|x| (0.0..=1.0).contains(&x))
    }

    proptest! {
        /// A model that suggests exactly the adjudicated set agrees with it fully: alpha 1
        /// (or undefined, when a single value is ever used), precision and recall 1 where
        /// defined, and no disagreement on an adjudicated unit.
        #[test]
        fn a_model_equal_to_the_adjudicated_sets_agrees_fully(units in arbitrary_units(true)) {
            let report = model_agreement(&units, &ids(&["A", "B"]));
            for m in &report.models {
                let alpha = m.adjudicated.overall.krippendorff_alpha;
                prop_assert!(alpha.is_none() || close(alpha, 1.0), "{alpha:?}");
                for s in m.scores.iter().map(|s| &s.scores).chain([&m.micro]) {
                    prop_assert_eq!((s.false_positives, s.false_negatives), (0, 0));
                    for x in [s.precision, s.recall, s.f1] {
                        prop_assert!(x.is_none() || close(x, 1.0), "{x:?}");
                    }
                }
                prop_assert!(m.disagreements.iter().all(|d| d.reference == Reference::HumanMajority));
            }
        }

        /// Whatever the codings: ratios in [0, 1], alphas at most 1, support = TP + FN, the
        /// counts summed in the micro figures, and a disagreement's missing and extra
        /// labels never both empty.
        #[test]
        fn figures_stay_in_their_ranges(units in arbitrary_units(false)) {
            let report = model_agreement(&units, &ids(&["A", "B"]));
            let at_most_one = |a: Option<f64>| a.is_none_or(|a| a <= 1.0 + EPS);
            prop_assert!(at_most_one(report.humans.overall.krippendorff_alpha));
            for m in &report.models {
                prop_assert!(at_most_one(m.with_humans.overall.krippendorff_alpha));
                prop_assert!(at_most_one(m.adjudicated.overall.krippendorff_alpha));
                prop_assert!(m.pairwise.iter().all(|p| at_most_one(p.krippendorff_alpha)));
                let mut tp = 0;
                for s in &m.scores {
                    let s = &s.scores;
                    prop_assert_eq!(s.support, s.true_positives + s.false_negatives);
                    prop_assert!(in_unit_range(s.precision) && in_unit_range(s.recall) && in_unit_range(s.f1));
                    prop_assert!(s.true_positives + s.false_positives + s.false_negatives <= m.adjudicated_units);
                    tp += s.true_positives;
                }
                prop_assert_eq!(m.micro.true_positives, tp);
                prop_assert!(in_unit_range(m.micro.precision) && in_unit_range(m.micro.recall));
                prop_assert!(m.disagreements.iter().all(|d| !(d.missing.is_empty() && d.extra.is_empty())));
            }
        }
    }
}
