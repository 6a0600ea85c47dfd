//! Inter-annotator agreement: generic statistics and the label-set report served at
//! `GET /api/labels/agreement`. Pure: no I/O.
//!
//! # Statistics
//!
//! - [`krippendorff_alpha_nominal`] (and [`krippendorff_alpha_nominal_counts`]): Krippendorff's
//!   alpha for nominal data by the coincidence-matrix method, missing values allowed.
//! - [`cohen_kappa`] (and [`cohen_kappa_paired`]): Cohen's kappa for two coders.
//! - [`fleiss_kappa`]: Fleiss' kappa, generalised to a varying number of raters per item.
//! - [`label_agreement_with`]: the Jaccard similarity of two label sets.
//!
//! Each returns `None` where the statistic is undefined (nothing to compare, or chance
//! agreement is certain because a single category is ever used) rather than a NaN.
//!
//! # The report
//!
//! Annotators code each unit with a *set* of label ids (possibly empty). For agreement each
//! label is a binary decision per unit: present or absent. The caller passes one coding
//! per (unit, annotator), human sets with status `submitted` only, gathered compactly in a
//! [`CodingTable`]. [`report`] follows these rules:
//!
//! - A unit counts only when at least two annotators coded it (a *pairable* unit). Units with
//!   one coding are in no figure; only the top-level `codings` (every distinct coding given)
//!   and `annotators` (everyone who gave one) include them.
//! - A second coding of a unit by the same annotator is ignored (the first one counts); the
//!   caller is not meant to send one.
//! - The report's labels are the codebook's, in its order, then any other label id chosen on
//!   a pairable unit, sorted (one seen only on single-coded units is not listed: it would add
//!   "absent" decisions to the pooled figures). Duplicate ids in a coding count once.
//! - Per label: every coding of a pairable unit gives present/absent for that label; alpha
//!   (nominal) and Fleiss' kappa are computed over those binary values. `present` counts the
//!   codings of pairable units that chose the label.
//! - Overall: every (unit, label) pair of a pairable unit, over all the report's labels, is
//!   one item of binary values (pooled decisions); alpha and Fleiss' kappa over those items.
//!   `decisions` counts the values (items times codings). Labels nobody chose add agreeing
//!   "absent" decisions, as they do for a team reading the codebook.
//! - Pairs: for every pair of annotators who coded at least one unit in common (sorted,
//!   each pair once, name order within it), Cohen's kappa over the pooled (unit, label)
//!   decisions of the units both coded, the share of those decisions that agree, and per
//!   label a Cohen's kappa over the units both coded, listed for the labels either of the
//!   two chose on one of those units. A pair with no unit in common is not listed.
//! - The pairs are listed a page at a time ([`PairPage`]: at most `limit` pairs after a
//!   given pair); `pairs_next` names the last pair listed when more follow. A page costs
//!   the codings of the annotators it walks and the pairs they form, never every pair:
//!   a thousand annotators on one unit form half a million pairs, twenty thousand two
//!   hundred million.
//! - Nothing is rounded: figures are full `f64`, `null` where undefined. Full agreement gives
//!   1, except where a single value is ever used (for instance a label nobody chose): there
//!   chance agreement is certain and the figure is `null`.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

use serde::Serialize;

use super::codings::{Coding, CodingParts, CodingTable, Row};

/// Accumulates Krippendorff's coincidences for nominal data, one unit's category counts at
/// a time, without building the matrix: for nominal data only its diagonal and its margins
/// matter.
#[derive(Default)]
struct Coincidences {
    /// `n_c`: the pairable values of each category.
    totals: Vec<usize>,
    /// The off-diagonal coincidences, `sum over c != k of o_ck`.
    disagreement: f64,
}

impl Coincidences {
    /// Adds a unit given as its count of values per category; a unit with fewer than two
    /// values is not pairable and is skipped.
    fn add_unit(&mut self, counts: &[usize]) {
        let m: usize = counts.iter().sum();
        if m < 2 {
            return;
        }
        if self.totals.len() < counts.len() {
            self.totals.resize(counts.len(), 0);
        }
        let mut same_pairs = 0;
        for (total, &n) in self.totals.iter_mut().zip(counts) {
            *total += n;
            same_pairs += n * n.saturating_sub(1);
        }
        // A unit's coincidences sum to m; the diagonal ones are n_uc(n_uc - 1)/(m_u - 1).
        self.disagreement += (m * (m - 1) - same_pairs) as f64 / (m - 1) as f64;
    }

    /// Alpha = 1 - D_o/D_e = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k.
    fn alpha(&self) -> Option<f64> {
        let n: u128 = self.totals.iter().map(|&t| t as u128).sum();
        let squares: u128 = self.totals.iter().map(|&t| (t as u128) * (t as u128)).sum();
        let expected = n * n - squares;
        if expected == 0 {
            return None;
        }
        Some(1.0 - (n - 1) as f64 * self.disagreement / expected as f64)
    }
}

/// Krippendorff's alpha for nominal data, from reliability data given as units by coders:
/// `units[u][c]` is coder `c`'s category for unit `u`, `None` where missing. Rows may have
/// different lengths (a missing trailing coder).
///
/// Uses the coincidence-matrix method of Krippendorff, "Computing Krippendorff's
/// Alpha-Reliability" (2011). Units with fewer than two values are not pairable and are
/// dropped. `None` when alpha is undefined: no pairable values, or an expected disagreement
/// of 0 (a single category is ever used).
pub fn krippendorff_alpha_nominal<T, R>(units: &[R]) -> Option<f64>
where
    T: Eq + Hash,
    R: AsRef<[Option<T>]>,
{
    let mut index: HashMap<&T, usize> = HashMap::new();
    let mut coincidences = Coincidences::default();
    let mut counts = Vec::new();
    for unit in units {
        counts.iter_mut().for_each(|n| *n = 0);
        for value in unit.as_ref().iter().flatten() {
            let next = index.len();
            let c = *index.entry(value).or_insert(next);
            if counts.len() <= c {
                counts.resize(c + 1, 0);
            }
            counts[c] += 1;
        }
        coincidences.add_unit(&counts);
    }
    coincidences.alpha()
}

/// Krippendorff's alpha for nominal data, from a values-by-units matrix: `items[u][c]` is
/// how many coders put unit `u` in category `c` (the same input as [`fleiss_kappa`]).
///
/// The same statistic as [`krippendorff_alpha_nominal`], for callers that already count
/// (nominal alpha depends on the values only through these counts). Units with fewer than
/// two values are dropped; `None` when alpha is undefined (no pairable values, or a single
/// category is ever used).
pub fn krippendorff_alpha_nominal_counts<I>(items: I) -> Option<f64>
where
    I: IntoIterator,
    I::Item: AsRef<[usize]>,
{
    let mut coincidences = Coincidences::default();
    for item in items {
        coincidences.add_unit(item.as_ref());
    }
    coincidences.alpha()
}

/// Cohen's kappa for two coders from their contingency table: `table[i][j]` counts the
/// items coder A put in category `i` and coder B in category `j`. Rows and columns index
/// the same categories; a cell missing from a short row counts 0.
///
/// kappa = (p_o - p_e) / (1 - p_e), p_o the share on the diagonal and p_e the sum over
/// categories of the product of the two coders' shares. `None` when the table is empty or
/// p_e = 1 (both coders used one and the same category throughout). The test is done on
/// integers, so it is exact.
pub fn cohen_kappa<I>(table: I) -> Option<f64>
where
    I: IntoIterator,
    I::Item: AsRef<[usize]>,
{
    let mut rows: Vec<u128> = Vec::new();
    let mut cols: Vec<u128> = Vec::new();
    let mut diagonal: u128 = 0;
    for (i, row) in table.into_iter().enumerate() {
        let row = row.as_ref();
        if cols.len() < row.len() {
            cols.resize(row.len(), 0);
        }
        for (col, &n) in cols.iter_mut().zip(row) {
            *col += n as u128;
        }
        diagonal += row.get(i).copied().unwrap_or(0) as u128;
        rows.push(row.iter().map(|&n| n as u128).sum());
    }
    let n: u128 = rows.iter().sum();
    let chance: u128 = rows.iter().zip(&cols).map(|(r, c)| r * c).sum();
    if n == 0 || chance == n * n {
        return None;
    }
    // p_o, p_e and 1 all multiplied by n^2: (n * diagonal - chance) / (n^2 - chance).
    Some(((n * diagonal) as f64 - chance as f64) / (n * n - chance) as f64)
}

/// Cohen's kappa for two coders from paired observations: one `(coder A's category, coder
/// B's category)` per item. Builds the contingency table and applies [`cohen_kappa`]; `None`
/// when there are no pairs or both coders used one and the same category throughout.
pub fn cohen_kappa_paired<T, I>(pairs: I) -> Option<f64>
where
    T: Eq + Hash,
    I: IntoIterator<Item = (T, T)>,
{
    let mut index: HashMap<T, usize> = HashMap::new();
    let mut cells: Vec<(usize, usize)> = Vec::new();
    for (a, b) in pairs {
        let next = index.len();
        let i = *index.entry(a).or_insert(next);
        let next = index.len();
        let j = *index.entry(b).or_insert(next);
        cells.push((i, j));
    }
    let k = index.len();
    let mut table = vec![vec![0usize; k]; k];
    for (i, j) in cells {
        table[i][j] += 1;
    }
    cohen_kappa(&table)
}

/// Fleiss' kappa from an items-by-categories count matrix: `items[i][j]` is how many raters
/// put item `i` in category `j`.
///
/// Generalised to a varying number of raters per item: with `n_i` the raters of item `i`,
/// `P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))`, items with `n_i < 2` dropped, `P-bar`
/// the mean of the `P_i`, `p_j = sum_i n_ij / sum_i n_i` and `P_e = sum_j p_j^2`; kappa =
/// (P-bar - P_e) / (1 - P_e). When every item has the same number of raters this is exactly
/// Fleiss (1971). `None` when no item has two raters or a single category is ever used
/// (P_e = 1).
pub fn fleiss_kappa<I>(items: I) -> Option<f64>
where
    I: IntoIterator,
    I::Item: AsRef<[usize]>,
{
    let mut fleiss = FleissItems::default();
    for item in items {
        fleiss.add_item(item.as_ref());
    }
    fleiss.kappa()
}

/// Accumulates Fleiss' kappa one item at a time (what [`fleiss_kappa`] folds), so that a
/// caller can feed several statistics in one pass over its data.
#[derive(Default)]
struct FleissItems {
    /// Ratings per category over the kept items.
    totals: Vec<usize>,
    /// The sum of the kept items' `P_i`.
    agreement_sum: f64,
    /// Items with at least two raters.
    kept: usize,
}

impl FleissItems {
    /// Adds an item given as its count of raters per category; one with fewer than two
    /// raters is skipped.
    fn add_item(&mut self, item: &[usize]) {
        let n: usize = item.iter().sum();
        if n < 2 {
            return;
        }
        if self.totals.len() < item.len() {
            self.totals.resize(item.len(), 0);
        }
        let mut squares = 0;
        for (total, &c) in self.totals.iter_mut().zip(item) {
            *total += c;
            squares += c * c;
        }
        self.agreement_sum += (squares - n) as f64 / (n * (n - 1)) as f64;
        self.kept += 1;
    }

    /// Kappa over the items added; `None` when fewer than two categories were used.
    fn kappa(&self) -> Option<f64> {
        if self.totals.iter().filter(|&&t| t > 0).count() < 2 {
            return None;
        }
        let all: usize = self.totals.iter().sum();
        let chance: f64 = self.totals.iter().map(|&t| (t as f64 / all as f64).powi(2)).sum();
        let observed = self.agreement_sum / self.kept as f64;
        Some((observed - chance) / (1.0 - chance))
    }
}

/// The Jaccard similarity of two label sets, `|A ∩ B| / |A ∪ B|`: 1.0 when both are empty
/// (two coders agreeing that no label applies agree fully). Duplicates count once. Used to
/// compare an annotator's set with the adjudicated one.
pub fn label_agreement_with(reference: &[String], other: &[String]) -> f64 {
    let a: BTreeSet<&str> = reference.iter().map(String::as_str).collect();
    let b: BTreeSet<&str> = other.iter().map(String::as_str).collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// Agreement over a set of codings, as served at `GET /api/labels/agreement`. The rules are
/// in the [module documentation](self).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementReport {
    /// Units coded by at least two annotators.
    pub units: usize,
    /// Every annotator who gave a coding, sorted.
    pub annotators: Vec<String>,
    /// The distinct codings given, single-coded units included.
    pub codings: usize,
    /// Pooled over every (unit, label) decision.
    pub overall: OverallAgreement,
    /// Per label: the codebook's in order, then other label ids chosen on a pairable unit,
    /// sorted.
    pub labels: Vec<LabelAgreement>,
    /// The pairs of annotators who coded a unit in common, sorted: the page asked for.
    pub pairs: Vec<PairAgreement>,
    /// More pairs follow: the cursor to ask for the next page with (`pairs_after`);
    /// `None` on the last page.
    pub pairs_next: Option<String>,
}

/// Agreement pooled over every (unit, label) binary decision of the pairable units.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverallAgreement {
    /// Krippendorff's alpha (nominal) over the pooled items; `None` when undefined.
    pub krippendorff_alpha: Option<f64>,
    /// Fleiss' kappa over the pooled items; `None` when undefined.
    pub fleiss_kappa: Option<f64>,
    /// Pairable units.
    pub units: usize,
    /// Annotators with a coding of a pairable unit.
    pub annotators: usize,
    /// Binary values counted: (unit, label) items times the codings of the unit.
    pub decisions: usize,
}

/// Agreement on one label: present or absent, per coding of a pairable unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelAgreement {
    /// The label id.
    pub label: String,
    /// Krippendorff's alpha (nominal) over the binary values; `None` when undefined.
    pub krippendorff_alpha: Option<f64>,
    /// Fleiss' kappa over the binary values; `None` when undefined.
    pub fleiss_kappa: Option<f64>,
    /// Pairable units.
    pub units: usize,
    /// Annotators with a coding of a pairable unit.
    pub annotators: usize,
    /// Codings of pairable units that chose the label.
    pub present: usize,
}

/// Agreement between two annotators over the units both coded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairAgreement {
    /// The two annotators, in name order.
    pub annotators: [String; 2],
    /// Cohen's kappa over the pooled (unit, label) decisions; `None` when undefined.
    pub cohen_kappa: Option<f64>,
    /// Units both coded.
    pub units: usize,
    /// The share of the pooled decisions on which the two agree; `None` with no decision.
    pub observed_agreement: Option<f64>,
    /// Per label either of the two chose on a unit both coded, in report order.
    pub labels: Vec<PairLabelAgreement>,
}

/// Agreement between two annotators on one label over the units both coded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairLabelAgreement {
    /// The label id.
    pub label: String,
    /// Cohen's kappa over the label's present/absent decisions; `None` when undefined.
    pub cohen_kappa: Option<f64>,
    /// Units both coded.
    pub units: usize,
}

/// Which pairs of annotators a report lists: a page of the pairs that share units, in
/// name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairPage {
    /// List the pairs after this one (first, second), as a report's `pairs_next` names it;
    /// `None`: from the first pair.
    pub after: Option<(String, String)>,
    /// At most this many pairs (at least one is listed when there is one).
    pub limit: usize,
}

impl Default for PairPage {
    /// The first page of [`PairPage::DEFAULT_LIMIT`] pairs.
    fn default() -> PairPage {
        PairPage {
            after: None,
            limit: PairPage::DEFAULT_LIMIT,
        }
    }
}

impl PairPage {
    /// Pairs listed when the request does not say how many.
    pub const DEFAULT_LIMIT: usize = 1_000;
    /// The most pairs a request may ask for.
    pub const MAX_LIMIT: usize = 10_000;

    /// Every pair, unpaged (callers with few annotators: the tests).
    pub fn all() -> PairPage {
        PairPage {
            after: None,
            limit: usize::MAX,
        }
    }

    /// The cursor naming the pair `(first, second)`: `first,second` (annotator names hold
    /// no comma).
    pub fn cursor(first: &str, second: &str) -> String {
        format!("{first},{second}")
    }

    /// The pair a [`PairPage::cursor`] names; `None` when it names no pair.
    pub fn parse_cursor(cursor: &str) -> Option<(String, String)> {
        let (first, second) = cursor.split_once(',')?;
        (!first.is_empty() && !second.is_empty()).then(|| (first.to_owned(), second.to_owned()))
    }
}

/// Computes the agreement report over `codings` with the codebook's `label_ids`, listing
/// the pairs of `page` (see the [module documentation](self) for the rules).
pub fn report(codings: CodingTable, label_ids: &[String], page: &PairPage) -> AgreementReport {
    let prepared = Prepared::new(codings.into_parts(), label_ids);
    let (labels, overall) = prepared.label_figures();
    let (pairs, pairs_next) = prepared.pair_page(page);
    AgreementReport {
        units: prepared.units(),
        annotators: prepared.annotators.iter().map(|a| a.to_string()).collect(),
        codings: prepared.distinct,
        overall,
        labels,
        pairs,
        pairs_next,
    }
}

/// The report over a list of `codings`, every pair listed (for callers holding few
/// codings; the server streams them into a [`CodingTable`] and pages the pairs).
pub fn agreement_report(codings: &[Coding<'_>], label_ids: &[String]) -> AgreementReport {
    report(CodingTable::from_codings(codings), label_ids, &PairPage::all())
}

/// The pairable codings, sorted, with what every figure needs. Memory: 16 bytes per
/// coding of a pairable unit, plus the annotators' names and the label combinations.
struct Prepared {
    /// Every annotator who gave a coding, sorted; codings name them by this order.
    annotators: Vec<Box<str>>,
    /// The distinct codings given (single-coded units included).
    distinct: usize,
    /// The report's labels.
    labels: Vec<String>,
    /// Per label combination: the indices of its report labels, sorted, each once.
    chosen: Vec<Vec<usize>>,
    /// The codings of the pairable units as (annotator, label combination), unit by unit
    /// in unit key order, each unit's in annotator order.
    rows: Vec<(u32, u32)>,
    /// Where each pairable unit's codings start in `rows`, and `rows.len()` last.
    starts: Vec<usize>,
    /// Per annotator, the positions in `rows` of their codings.
    by_annotator: Vec<Vec<usize>>,
    /// Annotators with a coding of a pairable unit.
    coders: usize,
}

impl Prepared {
    fn new(parts: CodingParts, label_ids: &[String]) -> Prepared {
        let CodingParts {
            units,
            annotators,
            label_sets,
            mut rows,
        } = parts;
        let unit_rank = ranks(&units);
        drop(units);
        let annotator_rank = ranks(&annotators);
        let mut annotators = annotators;
        annotators.sort_unstable();
        for row in &mut rows {
            row.unit = unit_rank[row.unit as usize];
            row.annotator = annotator_rank[row.annotator as usize];
        }
        // Stable: of two codings of a unit by one annotator, the first given stays.
        rows.sort_by_key(|r| (r.unit, r.annotator));
        rows.dedup_by_key(|r| (r.unit, r.annotator));
        let distinct = rows.len();
        let (rows, starts) = pairable(&rows);
        let mut used = vec![false; label_sets.len()];
        rows.iter().for_each(|&(_, l)| used[l as usize] = true);
        let labels = report_labels(&label_sets, &used, label_ids);
        let chosen = label_indices(&label_sets, &labels);
        let mut by_annotator = vec![Vec::new(); annotators.len()];
        for (position, &(a, _)) in rows.iter().enumerate() {
            by_annotator[a as usize].push(position);
        }
        let coders = by_annotator.iter().filter(|p| !p.is_empty()).count();
        Prepared {
            annotators,
            distinct,
            labels,
            chosen,
            rows,
            starts,
            by_annotator,
            coders,
        }
    }

    /// Pairable units.
    fn units(&self) -> usize {
        self.starts.len() - 1
    }

    /// Each pairable unit's codings.
    fn unit_rows(&self) -> impl Iterator<Item = &[(u32, u32)]> {
        self.starts.windows(2).map(|w| &self.rows[w[0]..w[1]])
    }

    /// True when label combination `set` holds the report's label `label`.
    fn has(&self, set: u32, label: usize) -> bool {
        self.chosen[set as usize].binary_search(&label).is_ok()
    }

    /// Per label, and pooled over every (unit, label) item in label then unit order,
    /// Krippendorff's alpha and Fleiss' kappa over the present/absent values.
    fn label_figures(&self) -> (Vec<LabelAgreement>, OverallAgreement) {
        let (mut pooled_alpha, mut pooled_fleiss) = (Coincidences::default(), FleissItems::default());
        let mut per_label = Vec::with_capacity(self.labels.len());
        for (l, label) in self.labels.iter().enumerate() {
            let (mut alpha, mut fleiss, mut present) = (Coincidences::default(), FleissItems::default(), 0);
            for unit in self.unit_rows() {
                let chose = unit.iter().filter(|&&(_, set)| self.has(set, l)).count();
                let item = [chose, unit.len() - chose];
                alpha.add_unit(&item);
                fleiss.add_item(&item);
                pooled_alpha.add_unit(&item);
                pooled_fleiss.add_item(&item);
                present += chose;
            }
            per_label.push(LabelAgreement {
                label: label.clone(),
                krippendorff_alpha: alpha.alpha(),
                fleiss_kappa: fleiss.kappa(),
                units: self.units(),
                annotators: self.coders,
                present,
            });
        }
        let overall = OverallAgreement {
            krippendorff_alpha: pooled_alpha.alpha(),
            fleiss_kappa: pooled_fleiss.kappa(),
            units: self.units(),
            annotators: self.coders,
            decisions: self.rows.len() * self.labels.len(),
        };
        (per_label, overall)
    }

    /// The pairs of `page`, and the cursor of the next page when there are more. Walks the
    /// annotators in order from the page's first, each with the partners after them on
    /// their units: the work is the codings of the annotators walked and the pairs they
    /// form, never every pair of the store.
    fn pair_page(&self, page: &PairPage) -> (Vec<PairAgreement>, Option<String>) {
        let (first, after) = self.page_start(page);
        let limit = page.limit.max(1);
        let mut partners = Partners::new(self.annotators.len(), self.labels.len());
        let mut listed: Vec<PairAgreement> = Vec::new();
        for a in first..self.annotators.len() {
            self.partners_of(a, &mut partners);
            for (b, units, cells) in partners.sorted() {
                if a == first && after.is_some_and(|after| *self.annotators[b] <= *after) {
                    continue;
                }
                if listed.len() == limit {
                    let last = &listed[limit - 1].annotators;
                    let next = PairPage::cursor(&last[0], &last[1]);
                    return (listed, Some(next));
                }
                listed.push(self.pair_agreement(a, b, units, cells));
            }
        }
        (listed, None)
    }

    /// The first annotator a page walks, and the name its first pairs must come after
    /// (when the page starts within that annotator's pairs).
    fn page_start<'p>(&self, page: &'p PairPage) -> (usize, Option<&'p str>) {
        let Some((first, second)) = &page.after else {
            return (0, None);
        };
        let at = self.annotators.partition_point(|a| **a < **first);
        match self.annotators.get(at) {
            Some(a) if **a == **first => (at, Some(second.as_str())),
            _ => (at, None),
        }
    }

    /// Annotator `a`'s pairs with the annotators after them: on each unit `a` coded, the
    /// codings after theirs (the unit's are in annotator order).
    fn partners_of(&self, a: usize, partners: &mut Partners) {
        partners.clear();
        for &position in &self.by_annotator[a] {
            let unit_end = self.starts[self.starts.partition_point(|&s| s <= position)];
            let first = &self.chosen[self.rows[position].1 as usize];
            for &(b, set) in &self.rows[position + 1..unit_end] {
                let (units, cells) = partners.cells_of(b as usize);
                *units += 1;
                add_decisions(cells, first, &self.chosen[set as usize]);
            }
        }
    }

    /// One pair's figures from its accumulated cells.
    fn pair_agreement(&self, a: usize, b: usize, units: usize, cells: &[BinaryCells]) -> PairAgreement {
        let mut pooled = [[0usize; 2]; 2];
        let mut per_label = Vec::new();
        for (label, c) in self.labels.iter().zip(cells) {
            let table = c.table(units);
            for (sum, cell) in pooled.iter_mut().flatten().zip(table.iter().flatten()) {
                *sum += cell;
            }
            if c.both + c.first_only + c.second_only > 0 {
                per_label.push(PairLabelAgreement {
                    label: label.clone(),
                    cohen_kappa: cohen_kappa(table),
                    units,
                });
            }
        }
        let decisions = units * self.labels.len();
        PairAgreement {
            annotators: [self.annotators[a].to_string(), self.annotators[b].to_string()],
            cohen_kappa: cohen_kappa(pooled),
            units,
            observed_agreement: (decisions > 0)
                .then(|| (pooled[0][0] + pooled[1][1]) as f64 / decisions as f64),
            labels: per_label,
        }
    }
}

/// Each string's rank in sorted order (the strings are distinct).
fn ranks(values: &[Box<str>]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_unstable_by(|&a, &b| values[a].cmp(&values[b]));
    let mut rank = vec![0; values.len()];
    for (r, i) in order.into_iter().enumerate() {
        // Fewer values than codings, and codings are counted in u32 (see `codings`).
        rank[i] = r as u32;
    }
    rank
}

/// The codings of units coded at least twice, from codings sorted by unit: (annotator,
/// label combination) each, and where each unit starts (then the end).
fn pairable(rows: &[Row]) -> (Vec<(u32, u32)>, Vec<usize>) {
    let mut kept = Vec::new();
    let mut starts = vec![0];
    for unit in rows.chunk_by(|x, y| x.unit == y.unit) {
        if unit.len() >= 2 {
            kept.extend(unit.iter().map(|r| (r.annotator, r.labels)));
            starts.push(kept.len());
        }
    }
    (kept, starts)
}

/// The report's labels: the codebook's in order (first occurrence), then every other label
/// id chosen on a pairable unit (`used` marks the label combinations chosen there),
/// sorted. A label id seen only on single-coded units is left out: listing it would add
/// its "absent" decisions to the pooled figures.
fn report_labels(label_sets: &[Vec<String>], used: &[bool], label_ids: &[String]) -> Vec<String> {
    let mut labels: Vec<String> = Vec::with_capacity(label_ids.len());
    let mut known: BTreeSet<&str> = BTreeSet::new();
    for id in label_ids {
        if known.insert(id) {
            labels.push(id.clone());
        }
    }
    let unknown: BTreeSet<&str> = label_sets
        .iter()
        .zip(used)
        .filter(|(_, &used)| used)
        .flat_map(|(set, _)| set.iter().map(String::as_str))
        .filter(|l| !known.contains(l))
        .collect();
    labels.extend(unknown.into_iter().map(str::to_owned));
    labels
}

/// Each label combination as the sorted distinct indices of its ids among `labels` (ids
/// not listed are dropped).
fn label_indices(label_sets: &[Vec<String>], labels: &[String]) -> Vec<Vec<usize>> {
    let index: HashMap<&str, usize> = labels.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    label_sets
        .iter()
        .map(|set| {
            let mut chosen: Vec<usize> = set
                .iter()
                .filter_map(|l| index.get(l.as_str()).copied())
                .collect();
            chosen.sort_unstable();
            chosen.dedup();
            chosen
        })
        .collect()
}

/// One label's 2x2 table for a pair, without the both-absent cell (units minus the rest).
#[derive(Clone, Copy, Default)]
struct BinaryCells {
    both: usize,
    first_only: usize,
    second_only: usize,
}

impl BinaryCells {
    /// The full contingency table over `units` decisions.
    fn table(self, units: usize) -> [[usize; 2]; 2] {
        let neither = units - self.both - self.first_only - self.second_only;
        [[self.both, self.first_only], [self.second_only, neither]]
    }
}

/// One annotator's pairs with the annotators after them, as they are accumulated: per
/// partner the units in common and one table per label. Reused from one annotator to the
/// next (cleared, not freed).
struct Partners {
    /// Per annotator, their place in `found` (`NONE`: not a partner).
    slot: Vec<u32>,
    /// The partners, in the order found.
    found: Vec<usize>,
    /// Per partner (by place), the units in common.
    units: Vec<usize>,
    /// Per partner (by place), `labels` tables.
    cells: Vec<BinaryCells>,
    labels: usize,
}

impl Partners {
    const NONE: u32 = u32::MAX;

    fn new(annotators: usize, labels: usize) -> Partners {
        Partners {
            slot: vec![Partners::NONE; annotators],
            found: Vec::new(),
            units: Vec::new(),
            cells: Vec::new(),
            labels,
        }
    }

    fn clear(&mut self) {
        for &b in &self.found {
            self.slot[b] = Partners::NONE;
        }
        self.found.clear();
        self.units.clear();
        self.cells.clear();
    }

    /// Partner `b`'s count of units in common and tables, added on first sight.
    fn cells_of(&mut self, b: usize) -> (&mut usize, &mut [BinaryCells]) {
        if self.slot[b] == Partners::NONE {
            self.slot[b] = self.found.len() as u32;
            self.found.push(b);
            self.units.push(0);
            self.cells
                .resize(self.cells.len() + self.labels, BinaryCells::default());
        }
        let at = self.slot[b] as usize;
        let cells = &mut self.cells[at * self.labels..(at + 1) * self.labels];
        (&mut self.units[at], cells)
    }

    /// The partners in annotator order, with their units in common and tables.
    fn sorted(&self) -> Vec<(usize, usize, &[BinaryCells])> {
        let mut all: Vec<(usize, usize, &[BinaryCells])> = self
            .found
            .iter()
            .enumerate()
            .map(|(at, &b)| {
                let cells = &self.cells[at * self.labels..(at + 1) * self.labels];
                (b, self.units[at], cells)
            })
            .collect();
        all.sort_unstable_by_key(|&(b, _, _)| b);
        all
    }
}

/// Adds one unit's decisions of a pair: walks the two sorted label lists together, so the
/// cost is their length, not the codebook's (the both-absent cell is derived).
fn add_decisions(cells: &mut [BinaryCells], first: &[usize], second: &[usize]) {
    let (mut i, mut j) = (0, 0);
    while i < first.len() || j < second.len() {
        match (first.get(i), second.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                cells[x].both += 1;
                i += 1;
                j += 1;
            }
            (Some(&x), Some(&y)) if x < y => {
                cells[x].first_only += 1;
                i += 1;
            }
            (Some(&x), None) => {
                cells[x].first_only += 1;
                i += 1;
            }
            (_, Some(&y)) => {
                cells[y].second_only += 1;
                j += 1;
            }
            (None, None) => unreachable!("the loop runs while one list has labels left"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPS: f64 = 1e-9;

    fn close(actual: Option<f64>, expected: f64, tolerance: f64) -> bool {
        actual.is_some_and(|a| (a - expected).abs() <= tolerance)
    }

    /// Reliability data written coders by units (as in Krippendorff's paper), `.` missing,
    /// turned into units by coders.
    fn units_by_coders(coders: &[&str]) -> Vec<Vec<Option<u8>>> {
        let rows: Vec<Vec<Option<u8>>> = coders
            .iter()
            .map(|r| r.split_whitespace().map(|v| v.parse().ok()).collect())
            .collect();
        (0..rows[0].len())
            .map(|u| rows.iter().map(|r| r[u]).collect())
            .collect()
    }

    /// Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", C: nominal data,
    /// four coders, twelve units, missing values.
    const KRIPPENDORFF_2011_NOMINAL: [&str; 4] = [
        "1 2 3 3 2 1 4 1 2 . . .",
        "1 2 3 3 2 2 4 1 2 5 . 3",
        ". 3 3 3 2 3 4 2 2 5 1 .",
        "1 2 3 3 2 4 4 1 2 5 1 .",
    ];

    #[test]
    fn alpha_reproduces_krippendorff_2011_nominal_example() {
        let alpha = krippendorff_alpha_nominal(&units_by_coders(&KRIPPENDORFF_2011_NOMINAL));
        assert!(close(alpha, 0.743, 0.0005), "{alpha:?}");
        // Exactly 1 - (40 - 1) * 8 / (40^2 - sum n_c^2) = 113/152.
        assert!(close(alpha, 113.0 / 152.0, EPS), "{alpha:?}");
    }

    #[test]
    fn alpha_reproduces_krippendorff_2011_binary_example() {
        let data = units_by_coders(&["0 1 0 0 0 0 0 0 1 0", "1 1 1 0 0 1 0 0 0 0"]);
        let alpha = krippendorff_alpha_nominal(&data);
        assert!(close(alpha, 0.095, 0.0005), "{alpha:?}");
        assert!(close(alpha, 1.0 - 19.0 * 8.0 / 168.0, EPS), "{alpha:?}");
    }

    #[test]
    fn alpha_from_counts_equals_alpha_from_values() {
        let data = units_by_coders(&KRIPPENDORFF_2011_NOMINAL);
        let counts: Vec<[usize; 6]> = data
            .iter()
            .map(|unit| {
                let mut c = [0; 6];
                for v in unit.iter().flatten() {
                    c[usize::from(*v)] += 1;
                }
                c
            })
            .collect();
        let alpha = krippendorff_alpha_nominal_counts(&counts);
        assert!(close(alpha, 113.0 / 152.0, EPS), "{alpha:?}");
    }

    #[test]
    fn alpha_undefined_without_pairable_values_or_with_one_category() {
        let empty: [[Option<u8>; 2]; 0] = [];
        assert_eq!(krippendorff_alpha_nominal(&empty), None);
        assert_eq!(
            krippendorff_alpha_nominal(&[[Some(1), None], [None, Some(2)]]),
            None
        );
        assert_eq!(
            krippendorff_alpha_nominal(&[[Some("x"), Some("x")], [Some("x"), Some("x")]]),
            None
        );
        // One pairable unit with two different values: observed equals expected.
        assert!(close(krippendorff_alpha_nominal(&[[Some(1), Some(2)]]), 0.0, EPS));
    }

    #[test]
    fn alpha_is_one_on_full_agreement_with_two_categories() {
        let data = [[Some('a'), Some('a'), None], [Some('b'), Some('b'), Some('b')]];
        assert!(close(krippendorff_alpha_nominal(&data), 1.0, EPS));
    }

    /// Wikipedia, "Cohen's kappa", simple example: 50 proposals, both yes 20, A yes B no 5,
    /// A no B yes 10, both no 15.
    const WIKIPEDIA_COHEN: [[usize; 2]; 2] = [[20, 5], [10, 15]];

    #[test]
    fn cohen_reproduces_wikipedia_examples() {
        assert!(close(cohen_kappa(WIKIPEDIA_COHEN), 0.4, EPS));
        // "Same percentages but different numbers": p_o = 0.60 in both, kappa 0.1304 and
        // 0.2593 (exactly 3/23 and 7/27).
        let first = cohen_kappa([[45, 15], [25, 15]]);
        assert!(
            close(first, 0.1304, 0.00005) && close(first, 3.0 / 23.0, EPS),
            "{first:?}"
        );
        let second = cohen_kappa([[25, 35], [5, 35]]);
        assert!(
            close(second, 0.2593, 0.00005) && close(second, 7.0 / 27.0, EPS),
            "{second:?}"
        );
    }

    #[test]
    fn cohen_from_pairs_equals_cohen_from_table() {
        let mut pairs = Vec::new();
        for (a, row) in WIKIPEDIA_COHEN.iter().enumerate() {
            for (b, &n) in row.iter().enumerate() {
                pairs.extend(std::iter::repeat_n((a == 0, b == 0), n));
            }
        }
        assert!(close(cohen_kappa_paired(pairs), 0.4, EPS));
    }

    #[test]
    fn cohen_undefined_and_extremes() {
        let empty: [[usize; 2]; 0] = [];
        assert_eq!(cohen_kappa(empty), None);
        assert_eq!(cohen_kappa([[0, 0], [0, 0]]), None);
        assert_eq!(cohen_kappa([[0, 0], [0, 7]]), None);
        assert_eq!(cohen_kappa_paired([("x", "x"), ("x", "x")]), None);
        assert!(close(cohen_kappa([[0, 5], [5, 0]]), -1.0, EPS));
        assert!(close(cohen_kappa([[3, 0, 0], [0, 4, 0], [0, 0, 1]]), 1.0, EPS));
        // A short row: its missing cells count 0.
        assert!(close(cohen_kappa(vec![vec![20, 5], vec![10, 15, 0]]), 0.4, EPS));
    }

    /// Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
    const WIKIPEDIA_FLEISS: [[usize; 5]; 10] = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ];

    #[test]
    fn fleiss_reproduces_wikipedia_example() {
        let kappa = fleiss_kappa(WIKIPEDIA_FLEISS);
        assert!(close(kappa, 0.210, 0.0005), "{kappa:?}");
    }

    #[test]
    fn fleiss_varying_raters() {
        // P_i = 1, 0, 1; P-bar = 2/3; p = 3/7, 4/7; P_e = 25/49; kappa = 23/72.
        assert!(close(
            fleiss_kappa([vec![2, 0], vec![1, 1], vec![0, 3]]),
            23.0 / 72.0,
            EPS
        ));
        // Items with fewer than two raters are dropped.
        let mut with_singletons = WIKIPEDIA_FLEISS.to_vec();
        with_singletons.push([1, 0, 0, 0, 0]);
        with_singletons.push([0; 5]);
        assert!(close(
            fleiss_kappa(&with_singletons),
            fleiss_kappa(WIKIPEDIA_FLEISS).unwrap(),
            EPS
        ));
    }

    #[test]
    fn fleiss_undefined() {
        let empty: [[usize; 2]; 0] = [];
        assert_eq!(fleiss_kappa(empty), None);
        assert_eq!(fleiss_kappa([[1, 0], [0, 1]]), None);
        assert_eq!(fleiss_kappa([[3, 0], [2, 0]]), None);
    }

    fn ids(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn jaccard_of_label_sets() {
        assert!((label_agreement_with(&[], &[]) - 1.0).abs() < EPS);
        assert!((label_agreement_with(&ids(&["A", "B"]), &ids(&["B", "C"])) - 1.0 / 3.0).abs() < EPS);
        assert!((label_agreement_with(&ids(&["A", "A", "B"]), &ids(&["B", "A"])) - 1.0).abs() < EPS);
        assert!(label_agreement_with(&ids(&["A"]), &[]).abs() < EPS);
        assert!(label_agreement_with(&[], &ids(&["A"])).abs() < EPS);
    }

    /// Codings from `(unit, annotator, labels)` rows.
    fn codings<'a>(rows: &'a [(&'a str, &'a str, Vec<String>)]) -> Vec<Coding<'a>> {
        rows.iter()
            .map(|(unit, annotator, labels)| Coding {
                unit,
                annotator,
                labels,
            })
            .collect()
    }

    fn label<'r>(report: &'r AgreementReport, id: &str) -> &'r LabelAgreement {
        report.labels.iter().find(|l| l.label == id).unwrap()
    }

    #[test]
    fn full_agreement_gives_one_and_null_for_an_unused_label() {
        let rows = [
            ("u1", "a", ids(&["X"])),
            ("u1", "b", ids(&["X"])),
            ("u2", "a", ids(&[])),
            ("u2", "b", ids(&[])),
            ("u3", "b", ids(&["Y", "X"])),
            ("u3", "a", ids(&["X", "Y"])),
        ];
        let report = agreement_report(&codings(&rows), &ids(&["X", "Y", "Z"]));
        assert_eq!((report.units, report.codings), (3, 6));
        for id in ["X", "Y"] {
            assert!(close(label(&report, id).krippendorff_alpha, 1.0, EPS));
            assert!(close(label(&report, id).fleiss_kappa, 1.0, EPS));
        }
        // Nobody chose Z: "absent" is the only value, so chance agreement is certain.
        let z = label(&report, "Z");
        assert_eq!((z.krippendorff_alpha, z.fleiss_kappa, z.present), (None, None, 0));
        assert_eq!((label(&report, "X").present, label(&report, "Y").present), (4, 2));
        assert!(close(report.overall.krippendorff_alpha, 1.0, EPS));
        assert!(close(report.overall.fleiss_kappa, 1.0, EPS));
        assert_eq!(report.overall.decisions, 3 * 2 * 3);
        let pair = &report.pairs[0];
        assert!(close(pair.cohen_kappa, 1.0, EPS) && close(pair.observed_agreement, 1.0, EPS));
        let used: Vec<&str> = pair.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(used, ["X", "Y"]);
    }

    #[test]
    fn full_agreement_on_a_single_value_is_null() {
        let rows = [
            ("u1", "a", ids(&["X"])),
            ("u1", "b", ids(&["X"])),
            ("u2", "a", ids(&["X"])),
            ("u2", "b", ids(&["X"])),
        ];
        let report = agreement_report(&codings(&rows), &ids(&["X"]));
        assert_eq!(label(&report, "X").krippendorff_alpha, None);
        assert_eq!(report.overall.krippendorff_alpha, None);
        assert_eq!(report.overall.fleiss_kappa, None);
        assert_eq!(report.pairs[0].cohen_kappa, None);
        assert!(close(report.pairs[0].observed_agreement, 1.0, EPS));
        let json = serde_json::to_value(&report).unwrap();
        assert!(json["overall"]["krippendorff_alpha"].is_null());
        assert!(json["pairs"][0]["labels"][0]["cohen_kappa"].is_null());
    }

    #[test]
    fn systematic_disagreement_gives_negative_figures() {
        let rows = [
            ("u1", "a", ids(&["X"])),
            ("u1", "b", ids(&[])),
            ("u2", "a", ids(&["X"])),
            ("u2", "b", ids(&[])),
            ("u3", "a", ids(&[])),
            ("u3", "b", ids(&["X"])),
            ("u4", "a", ids(&[])),
            ("u4", "b", ids(&["X"])),
        ];
        let report = agreement_report(&codings(&rows), &ids(&["X"]));
        let pair = &report.pairs[0];
        assert!(close(pair.cohen_kappa, -1.0, EPS) && close(pair.observed_agreement, 0.0, EPS));
        assert!(close(pair.labels[0].cohen_kappa, -1.0, EPS));
        // Every unit is one present and one absent: n = 8, D_o = 8, sum n_c n_k = 32.
        assert!(close(
            label(&report, "X").krippendorff_alpha,
            1.0 - 7.0 * 8.0 / 32.0,
            EPS
        ));
        assert!(close(label(&report, "X").fleiss_kappa, -1.0, EPS));
    }

    #[test]
    fn a_unit_coded_once_contributes_nothing() {
        let mut rows = vec![
            ("u1", "a", ids(&["X"])),
            ("u1", "b", ids(&["X"])),
            ("u2", "a", ids(&["X"])),
            ("u2", "b", ids(&[])),
            ("u3", "a", ids(&[])),
            ("u3", "b", ids(&[])),
        ];
        let before = agreement_report(&codings(&rows), &ids(&["X"]));
        rows.push(("u4", "c", ids(&["X", "W"])));
        rows.push(("u5", "a", ids(&["X"])));
        let after = agreement_report(&codings(&rows), &ids(&["X"]));
        assert_eq!((after.units, after.codings, after.annotators.len()), (3, 8, 3));
        assert_eq!(after.overall, before.overall);
        assert_eq!(after.labels[0], before.labels[0]);
        assert_eq!(after.pairs[0], before.pairs[0]);
        // W was chosen on a single-coded unit only: not listed.
        assert!(after.labels.iter().all(|l| l.label != "W"));
        assert_eq!(after.overall.annotators, 2);
        // c shares no unit with anyone: no pair of c's is listed.
        assert_eq!(after.pairs.len(), 1);
        assert_eq!(after.pairs_next, None);
    }

    /// Every pair of `rows`, walked a page of `limit` at a time from the first.
    fn walk_pages(
        rows: &[(&str, &str, Vec<String>)],
        labels: &[String],
        limit: usize,
    ) -> Vec<AgreementReport> {
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let page = PairPage { after, limit };
            let report = report(CodingTable::from_codings(&codings(rows)), labels, &page);
            after = report
                .pairs_next
                .as_deref()
                .map(|c| PairPage::parse_cursor(c).unwrap());
            pages.push(report);
            if after.is_none() {
                return pages;
            }
        }
    }

    #[test]
    fn pairs_come_a_page_at_a_time_in_name_order() {
        let rows = [
            ("u1", "dan", ids(&["X"])),
            ("u1", "amy", ids(&["X", "Y"])),
            ("u1", "cal", ids(&["Y"])),
            ("u1", "bob", ids(&[])),
            ("u2", "amy", ids(&["X"])),
            ("u2", "eve", ids(&["X"])),
            ("u3", "fay", ids(&["Y"])),
        ];
        let labels = ids(&["X", "Y"]);
        let whole = agreement_report(&codings(&rows), &labels);
        let names = |pairs: &[PairAgreement]| -> Vec<String> {
            pairs.iter().map(|p| p.annotators.join("+")).collect()
        };
        assert_eq!(
            names(&whole.pairs),
            ["amy+bob", "amy+cal", "amy+dan", "amy+eve", "bob+cal", "bob+dan", "cal+dan"]
        );
        for limit in 1..=8 {
            let pages = walk_pages(&rows, &labels, limit);
            assert_eq!(pages.len(), whole.pairs.len().div_ceil(limit), "limit {limit}");
            let listed: Vec<PairAgreement> = pages.iter().flat_map(|p| p.pairs.clone()).collect();
            assert_eq!(listed, whole.pairs, "limit {limit}");
            for page in &pages {
                assert_eq!((&page.overall, &page.labels), (&whole.overall, &whole.labels));
                assert!(page.pairs.len() <= limit);
            }
            let last = pages.last().unwrap();
            assert_eq!(last.pairs_next, None);
        }
        let first = walk_pages(&rows, &labels, 3).remove(0);
        assert_eq!(first.pairs_next.as_deref(), Some("amy,dan"));
    }

    #[test]
    fn a_cursor_naming_no_annotator_starts_at_the_next_name() {
        let rows = [
            ("u1", "amy", ids(&["X"])),
            ("u1", "bob", ids(&["X"])),
            ("u1", "cal", ids(&["X"])),
        ];
        let labels = ids(&["X"]);
        let from = |first: &str, second: &str| {
            let page = PairPage {
                after: Some((first.to_owned(), second.to_owned())),
                limit: 10,
            };
            let report = report(CodingTable::from_codings(&codings(&rows)), &labels, &page);
            report
                .pairs
                .iter()
                .map(|p| p.annotators.join("+"))
                .collect::<Vec<_>>()
        };
        assert_eq!(from("amy", "bob"), ["amy+cal", "bob+cal"]);
        assert_eq!(from("amy", "zed"), ["bob+cal"]);
        assert_eq!(
            from("ann", "a"),
            ["bob+cal"],
            "no annotator ann: from the next name on"
        );
        assert_eq!(from("cal", "a"), Vec::<String>::new());
        assert_eq!(
            PairPage::parse_cursor("amy,bob"),
            Some(("amy".into(), "bob".into()))
        );
        assert_eq!(PairPage::parse_cursor("amy"), None);
        assert_eq!(PairPage::parse_cursor(",bob"), None);
        assert_eq!(PairPage::cursor("amy", "bob"), "amy,bob");
    }

    #[test]
    fn pairs_sorted_and_labels_after_the_codebook() {
        let rows = [
            ("u1", "zoe", ids(&["z"])),
            ("u1", "amy", ids(&["B", "c"])),
            ("u1", "bob", ids(&["A"])),
            ("u2", "bob", ids(&[])),
            ("u2", "zoe", ids(&["c"])),
        ];
        let report = agreement_report(&codings(&rows), &ids(&["B", "A", "B"]));
        assert_eq!(report.annotators, ["amy", "bob", "zoe"]);
        let pairs: Vec<[&str; 2]> = report
            .pairs
            .iter()
            .map(|p| [p.annotators[0].as_str(), p.annotators[1].as_str()])
            .collect();
        assert_eq!(pairs, [["amy", "bob"], ["amy", "zoe"], ["bob", "zoe"]]);
        let labels: Vec<&str> = report.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["B", "A", "c", "z"]);
        assert_eq!(
            report.pairs.iter().map(|p| p.units).collect::<Vec<_>>(),
            [1, 1, 2]
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["pairs"][2]["annotators"], serde_json::json!(["bob", "zoe"]));
        assert_eq!(json["labels"][2]["label"], "c");
    }

    /// The report's figures against the generic functions over data built by hand: three
    /// annotators, missing codings, a single-coded unit.
    #[test]
    fn report_figures_match_the_generic_statistics() {
        let rows = [
            ("u1", "a", ids(&["X"])),
            ("u1", "b", ids(&["X", "Y"])),
            ("u1", "c", ids(&["Y"])),
            ("u2", "a", ids(&[])),
            ("u2", "b", ids(&["Z"])),
            ("u3", "a", ids(&["X"])),
            ("u3", "c", ids(&["X", "Z"])),
            ("u4", "b", ids(&["Y"])),
        ];
        let report = agreement_report(&codings(&rows), &ids(&["X", "Y", "Z"]));
        let chosen = |unit: &str, annotator: &str, l: &str| {
            rows.iter()
                .find(|r| r.0 == unit && r.1 == annotator)
                .map(|r| r.2.iter().any(|x| x == l))
        };
        let pairable = ["u1", "u2", "u3"];
        let per_label = |l: &str| -> Vec<Vec<Option<bool>>> {
            pairable
                .iter()
                .map(|u| ["a", "b", "c"].iter().map(|a| chosen(u, a, l)).collect())
                .collect()
        };
        let pooled: Vec<Vec<Option<bool>>> = ["X", "Y", "Z"].iter().flat_map(|l| per_label(l)).collect();
        let alpha = krippendorff_alpha_nominal(&pooled).unwrap();
        assert!(close(report.overall.krippendorff_alpha, alpha, EPS));
        assert_eq!(report.overall.decisions, 3 * (3 + 2 + 2));
        for l in ["X", "Y", "Z"] {
            let expected = krippendorff_alpha_nominal(&per_label(l));
            let actual = label(&report, l).krippendorff_alpha;
            assert!(
                expected.zip(actual).is_some_and(|(e, a)| (e - a).abs() < EPS),
                "{l}"
            );
        }
        let ab: Vec<(bool, bool)> = ["X", "Y", "Z"]
            .iter()
            .flat_map(|l| ["u1", "u2"].map(|u| (chosen(u, "a", l).unwrap(), chosen(u, "b", l).unwrap())))
            .collect();
        let pair = &report.pairs[0];
        assert_eq!((pair.annotators[1].as_str(), pair.units), ("b", 2));
        assert!(close(
            pair.cohen_kappa,
            cohen_kappa_paired(ab.iter().copied()).unwrap(),
            EPS
        ));
        let agreeing = ab.iter().filter(|(x, y)| x == y).count() as f64;
        assert!(close(pair.observed_agreement, agreeing / ab.len() as f64, EPS));
    }
}
