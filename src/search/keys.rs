//! Every unit a search matches, not a page of them: what a coding round samples from. The
//! units come in a fixed order (session id, then place in the session), read from the
//! index's columns alone (no stored document is opened).

use std::sync::Arc;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::StrColumn;
use tantivy::{DocId, Score, SegmentOrdinal, SegmentReader};

use super::error::SearchError;
use super::index::SearchIndex;
use super::query::SearchQuery;

/// A unit a search matched.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnitKey {
    /// Its session (shared by the session's units).
    pub session_id: Arc<str>,
    /// Its place in the session: what orders a session's units.
    pub seq: u64,
    /// Its `event_id`.
    pub event_id: String,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: &'static str,
}

impl SearchIndex {
    /// Every unit `query` matches, by session id then place in the session: the same query
    /// on the same index gives the same list, whatever the ranking or how the index's
    /// segments were merged. Blocking: call it on the blocking pool.
    pub fn matching_units(&self, query: &SearchQuery) -> Result<Vec<UnitKey>, SearchError> {
        let searcher = self.searcher();
        let compiled = query.compile(self.index(), &self.fields)?;
        let mut units = searcher.search(&*compiled.whole, &UnitKeys)?;
        // Each segment's list comes sorted (by term ordinals, which follow the ids' order):
        // a stable sort merges those runs instead of comparing every pair of ids.
        units.sort();
        Ok(units)
    }
}

/// Collects the key of each matching unit from the columns of its segment.
struct UnitKeys;

impl Collector for UnitKeys {
    type Fruit = Vec<UnitKey>;
    type Child = SegmentUnitKeys;

    fn for_segment(&self, _: SegmentOrdinal, segment: &SegmentReader) -> tantivy::Result<SegmentUnitKeys> {
        let fast = segment.fast_fields();
        let column = |name: &str| {
            fast.str(name)?
                .ok_or_else(|| tantivy::TantivyError::SchemaError(format!("no column {name}")))
        };
        Ok(SegmentUnitKeys {
            session: column("session_id")?,
            event: column("event_id")?,
            unit_type: column("unit_type")?,
            seq: fast.u64("seq")?,
            rows: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<Vec<UnitKey>>) -> tantivy::Result<Vec<UnitKey>> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

/// One segment's matches, as term ordinals until the end.
struct SegmentUnitKeys {
    session: StrColumn,
    event: StrColumn,
    unit_type: StrColumn,
    seq: tantivy::columnar::Column<u64>,
    /// (session ord, event ord, unit type ord, seq) of each match.
    rows: Vec<(u64, u64, u64, u64)>,
}

impl SegmentCollector for SegmentUnitKeys {
    type Fruit = Vec<UnitKey>;

    fn collect(&mut self, doc: DocId, _: Score) {
        let ord = |column: &StrColumn| column.ords().first(doc).unwrap_or(0);
        self.rows.push((
            ord(&self.session),
            ord(&self.event),
            ord(&self.unit_type),
            self.seq.first(doc).unwrap_or(0),
        ));
    }

    fn harvest(mut self) -> Vec<UnitKey> {
        // By session (its term ordinal: the ids' own order) then place, as integers.
        self.rows
            .sort_unstable_by_key(|&(session, _, _, seq)| (session, seq));
        let session_ords = sorted_unique(self.rows.iter().map(|r| r.0));
        let event_ords = sorted_unique(self.rows.iter().map(|r| r.1));
        let type_ords = sorted_unique(self.rows.iter().map(|r| r.2));
        let sessions: Vec<Arc<str>> = terms(&self.session, &session_ords)
            .into_iter()
            .map(Arc::from)
            .collect();
        let events = terms(&self.event, &event_ords);
        let types: Vec<&'static str> = terms(&self.unit_type, &type_ords)
            .iter()
            .map(|t| static_unit_type(t))
            .collect();
        let at = |ords: &[u64], ord: u64| ords.binary_search(&ord).unwrap_or(0);
        self.rows
            .iter()
            .map(|&(s, e, t, seq)| UnitKey {
                session_id: sessions[at(&session_ords, s)].clone(),
                seq,
                event_id: events[at(&event_ords, e)].clone(),
                unit_type: types[at(&type_ords, t)],
            })
            .collect()
    }
}

/// The ordinals of `ords`, sorted, each once.
fn sorted_unique(ords: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut all: Vec<u64> = ords.collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The terms of `column` at `ords` (sorted, each once), in that order: one pass over the
/// column's dictionary.
fn terms(column: &StrColumn, ords: &[u64]) -> Vec<String> {
    let mut out = Vec::with_capacity(ords.len());
    let read = column.dictionary().sorted_ords_to_term_cb(ords, |bytes| {
        out.push(String::from_utf8_lossy(bytes).into_owned())
    });
    if !matches!(read, Ok(true)) {
        out.resize(ords.len(), String::new());
    }
    out
}

/// A unit type as the static string the core names it with.
fn static_unit_type(name: &str) -> &'static str {
    match name {
        "user_turn" => "user_turn",
        "assistant_turn" => "assistant_turn",
        _ => "system_turn",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::results::tests::{index_of, unit};

    #[test]
    fn every_match_comes_by_session_then_place_across_segments() {
        let index = index_of(&[
            unit("s2", 1, "M:1", "alpha"),
            unit("s1", 2, "x2", "alpha beta"),
            unit("s2", 0, "M:0", "alpha"),
            unit("s1", 0, "x0", "beta"),
            unit("s1", 1, "x1", "alpha"),
            unit("s3", 0, "M:0", "alpha"),
        ]);
        let query = SearchQuery {
            text: Some("alpha".into()),
            ..SearchQuery::default()
        };
        let keys = index.matching_units(&query).unwrap();
        let listed: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (&*k.session_id, k.event_id.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("s1", "x1"),
                ("s1", "x2"),
                ("s2", "M:0"),
                ("s2", "M:1"),
                ("s3", "M:0")
            ],
            "an event id shared by two sessions is each's"
        );
        assert!(keys.iter().all(|k| k.unit_type == "assistant_turn"));
        assert_eq!(index.matching_units(&query).unwrap(), keys, "the same again");
        let page = index.search(&query, 0, 10).unwrap();
        assert_eq!(page.total, keys.len(), "as many as the search counts");
    }
}
