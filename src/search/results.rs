//! One page of a search: the units ranked by relevance (BM25 on the text), ties in a fixed
//! order (by session, then the unit's place in its session: see [`tie_order`]), with the
//! total count and a snippet for each.

use serde::Serialize;
use tantivy::collector::sort_key::{SortBySimilarityScore, SortByStaticFastValue};
use tantivy::collector::{Count, TopDocs};
use tantivy::schema::{Field, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, Order, Score, TantivyDocument};

use super::error::SearchError;
use super::index::SearchIndex;
use super::query::{Compiled, SearchQuery};
#[cfg(doc)]
use super::schema::tie_order;
use super::schema::TIE_ORDER;
use super::snippet::{snippet, Snippet, SNIPPET_CHARS};

/// The most results one page holds.
pub const MAX_LIMIT: usize = 100;

/// How far into the ranking a page may start: deeper pages cost memory for every result
/// before them; [`SearchIndex::matching_units`] lists every match.
pub const MAX_OFFSET: usize = 10_000;

/// A page of results.
#[derive(Debug, Clone, Serialize)]
pub struct SearchPage {
    /// Units matching, in all.
    pub total: usize,
    /// The results, best first.
    pub results: Vec<Hit>,
}

/// One unit found.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// Its session.
    pub session_id: String,
    /// Its `event_id`.
    pub event_id: String,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: String,
    /// Its session's framework.
    pub framework: String,
    /// Who speaks.
    pub actor_id: String,
    /// `human`, `agent` or `system`.
    pub actor_type: String,
    /// Its timestamp as the log wrote it.
    pub timestamp: Option<String>,
    /// The tools it calls.
    pub tools: Vec<String>,
    /// One of its tool calls failed.
    pub failed_tool_call: bool,
    /// It delegates to a sub-agent.
    pub delegation: bool,
    /// Its relevance (BM25; 0 for a search without text).
    pub score: f32,
    /// The matching part of its text.
    pub snippet: Snippet,
}

impl SearchIndex {
    /// The page of `query`'s results from `offset`, at most `limit` (1 or more) of them.
    /// Blocking: call it on the blocking pool.
    pub fn search(
        &self,
        query: &SearchQuery,
        offset: usize,
        limit: usize,
    ) -> Result<SearchPage, SearchError> {
        let searcher = self.searcher();
        let fields = &self.fields;
        let Compiled { whole, text } = query.compile(self.index(), fields)?;
        let page = TopDocs::with_limit(limit.max(1)).and_offset(offset);
        let tie = (SortByStaticFastValue::<u64>::for_field(TIE_ORDER), Order::Asc);
        let (total, top): (usize, Vec<(Score, DocAddress)>) = if text.is_some() {
            let ranking = page.order_by(((SortBySimilarityScore, Order::Desc), tie));
            let (total, top) = searcher.search(&*whole, &(Count, ranking))?;
            (total, top.into_iter().map(|((score, _), a)| (score, a)).collect())
        } else {
            // Every score is 0: the order is the ties' alone, and nothing is scored.
            let (total, top) = searcher.search(&*whole, &(Count, page.order_by(tie)))?;
            (total, top.into_iter().map(|(_, a)| (0.0, a)).collect())
        };
        let generator = match &text {
            Some(text) => {
                let mut g = SnippetGenerator::create(&searcher, &**text, fields.text)?;
                g.set_max_num_chars(SNIPPET_CHARS);
                Some(g)
            }
            None => None,
        };
        let mut results = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let text_of = |field: Field| doc.get_first(field).and_then(|v| v.as_str()).map(str::to_owned);
            let flag = |field: Field| doc.get_first(field).and_then(|v| v.as_bool()).unwrap_or(false);
            results.push(Hit {
                session_id: text_of(fields.session_id).unwrap_or_default(),
                event_id: text_of(fields.event_id).unwrap_or_default(),
                unit_type: text_of(fields.unit_type).unwrap_or_default(),
                framework: text_of(fields.framework).unwrap_or_default(),
                actor_id: text_of(fields.actor_id).unwrap_or_default(),
                actor_type: text_of(fields.actor_type).unwrap_or_default(),
                timestamp: text_of(fields.timestamp),
                tools: doc
                    .get_all(fields.tool)
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                failed_tool_call: flag(fields.failed),
                delegation: flag(fields.delegation),
                score,
                snippet: snippet(generator.as_ref(), &text_of(fields.excerpt).unwrap_or_default()),
            });
        }
        Ok(SearchPage { total, results })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::search::document::UnitDoc;
    use crate::search::query::LabelFilter;

    /// A unit of session `session`, `seq`-th, saying `text`.
    pub(crate) fn unit<'a>(session: &'a str, seq: u64, event: &'a str, text: &'a str) -> UnitDoc<'a> {
        UnitDoc {
            session_id: session,
            framework: "claudecode",
            seq,
            event_id: event,
            unit_type: "assistant_turn",
            actor_id: "assistant",
            actor_type: "agent",
            tools: Vec::new(),
            failed: false,
            delegation: false,
            timestamp: None,
            time_ms: None,
            text: Cow::Borrowed(text),
        }
    }

    /// An index in memory holding `units` (committed in two halves: two segments).
    pub(crate) fn index_of(units: &[UnitDoc<'_>]) -> SearchIndex {
        let index = SearchIndex::in_memory(15_000_000);
        {
            let mut writer = index.writer();
            for (i, u) in units.iter().enumerate() {
                writer.add_document(index.fields.unit_document(u)).unwrap();
                if i == units.len() / 2 {
                    writer.commit().unwrap();
                }
            }
            writer
                .add_document(index.fields.marker_document("s1", "f", "[]"))
                .unwrap();
            writer.commit().unwrap();
        }
        index.reload().unwrap();
        index
    }

    fn query(text: &str) -> SearchQuery {
        SearchQuery {
            text: Some(text.to_owned()),
            ..SearchQuery::default()
        }
    }

    fn events(page: &SearchPage) -> Vec<&str> {
        page.results.iter().map(|h| h.event_id.as_str()).collect()
    }

    #[test]
    fn units_rank_by_relevance_ties_by_session_then_place() {
        let index = index_of(&[
            unit("s2", 0, "b0", "the build failed"),
            unit("s1", 1, "a1", "the build failed"),
            unit("s1", 0, "a0", "the build failed"),
            unit(
                "s1",
                2,
                "a2",
                "failed failed failed: the build failed again and failed",
            ),
            unit("s3", 0, "c0", "nothing to see"),
        ]);
        // Sessions among ties come in the order of their hash, each's units in place order.
        let mut sessions = [
            ("s1", vec!["a0", "a1", "a2"]),
            ("s2", vec!["b0"]),
            ("s3", vec!["c0"]),
        ];
        sessions.sort_by_key(|(s, _)| crate::search::schema::tie_order(s, 0));
        let in_tie_order: Vec<&str> = sessions.iter().flat_map(|(_, e)| e.clone()).collect();
        let tied: Vec<&str> = in_tie_order
            .iter()
            .copied()
            .filter(|e| ["a0", "a1", "b0"].contains(e))
            .collect();

        let page = index.search(&query("failed"), 0, 10).unwrap();
        assert_eq!(page.total, 4, "markers and other units are not counted");
        assert_eq!(events(&page)[0], "a2", "the best score first");
        assert_eq!(events(&page)[1..], tied[..], "then the ties in their fixed order");
        assert!(page.results[0].score > page.results[1].score);
        assert_eq!(page.results[1].score, page.results[3].score, "a tie");

        let second = index.search(&query("failed"), 2, 2).unwrap();
        assert_eq!(events(&second), tied[1..], "a page further");
        assert_eq!(second.total, 4);

        let every = index.search(&SearchQuery::default(), 0, 10).unwrap();
        assert_eq!(every.total, 5, "no text: every unit");
        assert_eq!(events(&every), in_tie_order, "by session, then place");
    }

    #[test]
    fn words_must_all_occur_and_snippets_highlight_them() {
        let index = index_of(&[
            unit("s1", 0, "a0", "The tests fail on CI"),
            unit("s1", 1, "a1", "tests pass"),
        ]);
        let page = index.search(&query("tests fail"), 0, 10).unwrap();
        assert_eq!(events(&page), ["a0"]);
        let snippet = &page.results[0].snippet;
        assert_eq!(snippet.html, "The <b>tests</b> <b>fail</b> on CI");
        assert_eq!(snippet.highlights, [[4, 9], [10, 14]]);
        let either = index.search(&query("fail OR pass"), 0, 10).unwrap();
        assert_eq!(either.total, 2);
        let phrase = index.search(&query("\"fail tests\""), 0, 10).unwrap();
        assert_eq!(phrase.total, 0, "a phrase keeps its order");
        assert!(matches!(
            index.search(&query("tests AND ("), 0, 10),
            Err(SearchError::Query(_))
        ));
    }

    #[test]
    fn filters_keep_units_without_changing_the_score() {
        let mut failing = unit("s1", 0, "a0", "run the tests");
        failing.tools = vec!["Bash", "Task"];
        failing.failed = true;
        failing.delegation = true;
        failing.time_ms = Some(1_000);
        failing.timestamp = Some("1970-01-01T00:00:01.000Z");
        let mut prompt = unit("s2", 0, "u0", "run the tests please");
        prompt.unit_type = "user_turn";
        prompt.actor_id = "human";
        prompt.actor_type = "human";
        prompt.framework = "pi";
        prompt.time_ms = Some(5_000);
        let index = index_of(&[failing, prompt]);
        let found = |q: SearchQuery| events(&index.search(&q, 0, 10).unwrap()).join(",");
        let with = |f: fn(&mut SearchQuery)| {
            let mut q = query("tests");
            f(&mut q);
            found(q)
        };
        assert_eq!(with(|_| {}), "a0,u0");
        assert_eq!(with(|q| q.tools = vec!["Bash".into()]), "a0");
        assert_eq!(with(|q| q.tools = vec!["Edit".into(), "Task".into()]), "a0");
        assert_eq!(with(|q| q.failed = Some(true)), "a0");
        assert_eq!(with(|q| q.failed = Some(false)), "u0");
        assert_eq!(with(|q| q.delegation = Some(true)), "a0");
        assert_eq!(with(|q| q.frameworks = vec!["pi".into()]), "u0");
        assert_eq!(with(|q| q.sessions = vec!["s1".into()]), "a0");
        assert_eq!(with(|q| q.unit_types = vec!["user_turn".into()]), "u0");
        assert_eq!(with(|q| q.actors = vec!["human".into()]), "u0");
        assert_eq!(with(|q| q.actors = vec!["agent".into()]), "a0", "by actor type");
        assert_eq!(with(|q| q.from_ms = Some(2_000)), "u0");
        assert_eq!(with(|q| q.to_ms = Some(2_000)), "a0");
        assert_eq!(with(|q| q.to_ms = Some(1_000)), "", "the end is excluded");
        let keep = LabelFilter {
            units: vec![("s2".into(), "u0".into())],
            keep: true,
        };
        let labeled = |filter: LabelFilter| {
            let mut q = query("tests");
            q.labels = Some(filter);
            found(q)
        };
        assert_eq!(labeled(keep.clone()), "u0");
        assert_eq!(labeled(LabelFilter { keep: false, ..keep }), "a0");

        let hit = &index.search(&query("tests"), 0, 1).unwrap().results[0];
        assert_eq!(hit.tools, ["Bash", "Task"]);
        assert!(hit.failed_tool_call && hit.delegation);
        assert_eq!(hit.timestamp.as_deref(), Some("1970-01-01T00:00:01.000Z"));
        let filtered = {
            let mut q = query("tests");
            q.tools = vec!["Bash".into()];
            index.search(&q, 0, 1).unwrap().results[0].score
        };
        assert_eq!(filtered, hit.score, "a filter adds nothing to the score");
    }
}
