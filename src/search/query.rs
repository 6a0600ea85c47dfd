//! A search as asked (query text, filters, the units a label filter names) and the tantivy
//! query it becomes: the text through tantivy's query parser (words must all occur unless
//! joined by `OR`; phrases in quotes; `-word` excludes), each filter a term, set or range
//! query (or, for labels, a set of units) that adds nothing to the score, so that ranking
//! is BM25 on the text alone.

use std::ops::Bound;

use tantivy::query::{
    BooleanQuery, ConstScoreQuery, Occur, Query, QueryParser, RangeQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::Term;

use super::error::SearchError;
use super::schema::{Fields, KIND_UNIT};
use super::unit_set::UnitSetQuery;

/// The longest query text accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

/// What units to find. Each filter with values keeps the units matching one of them;
/// filters combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// The query text (`None` or blank: every unit the filters keep).
    pub text: Option<String>,
    /// Frameworks (`claudecode`, `pi`, `autogen`, `codex`, `gemini`).
    pub frameworks: Vec<String>,
    /// Session ids.
    pub sessions: Vec<String>,
    /// Unit types (`user_turn`, `assistant_turn`, `system_turn`).
    pub unit_types: Vec<String>,
    /// Actors: an actor id (`human`, `assistant`, `agent-<id>`, `system`, an AutoGen
    /// sender) or an actor type (`human`, `agent`, `system`).
    pub actors: Vec<String>,
    /// Tool names, one of which the unit calls.
    pub tools: Vec<String>,
    /// Whether a tool call of the unit failed.
    pub failed: Option<bool>,
    /// Whether the unit delegates to a sub-agent.
    pub delegation: Option<bool>,
    /// Units at or after this time (ms since the epoch); units without a time are left out.
    pub from_ms: Option<i64>,
    /// Units before this time (ms since the epoch); units without a time are left out.
    pub to_ms: Option<i64>,
    /// The units a label filter names, and whether to keep them or leave them out.
    pub labels: Option<LabelFilter>,
}

/// A search as tantivy runs it.
pub struct Compiled {
    /// The whole query: text and filters.
    pub whole: Box<dyn Query>,
    /// The part that searches the text (what snippets highlight), if any.
    pub text: Option<Box<dyn Query>>,
}

/// The units of a label filter (as the label store names them), kept or left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelFilter {
    /// `(session_id, event_id)` of each unit.
    pub units: Vec<(String, String)>,
    /// True: only these units; false: every unit but these.
    pub keep: bool,
}

impl SearchQuery {
    /// The query text, if it holds anything but blanks.
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref().map(str::trim).filter(|t| !t.is_empty())
    }

    /// The tantivy query; [`SearchError::Query`] when the text does not parse.
    pub fn compile(&self, index: &tantivy::Index, fields: &Fields) -> Result<Compiled, SearchError> {
        let text = match self.text() {
            Some(t) if t.len() > MAX_QUERY_BYTES => {
                return Err(SearchError::Query(format!(
                    "the query is longer than {MAX_QUERY_BYTES} bytes"
                )))
            }
            Some(t) => {
                let mut parser = QueryParser::for_index(index, vec![fields.text]);
                parser.set_conjunction_by_default();
                Some(parser.parse_query(t)?)
            }
            None => None,
        };
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, filter(term(fields.kind, KIND_UNIT)))];
        if let Some(text) = &text {
            clauses.push((Occur::Must, text.box_clone()));
        }
        for (field, values) in [
            (fields.framework, &self.frameworks),
            (fields.session_id, &self.sessions),
            (fields.unit_type, &self.unit_types),
            (fields.actor, &self.actors),
            (fields.tool, &self.tools),
        ] {
            if !values.is_empty() {
                let terms = values.iter().map(|v| Term::from_field_text(field, v));
                clauses.push((Occur::Must, filter(Box::new(TermSetQuery::new(terms)))));
            }
        }
        for (field, wanted) in [(fields.failed, self.failed), (fields.delegation, self.delegation)] {
            if let Some(wanted) = wanted {
                let query = TermQuery::new(Term::from_field_bool(field, wanted), IndexRecordOption::Basic);
                clauses.push((Occur::Must, filter(Box::new(query))));
            }
        }
        if self.from_ms.is_some() || self.to_ms.is_some() {
            let at = |ms| Term::from_field_i64(fields.time_ms, ms);
            let lower = self
                .from_ms
                .map_or(Bound::Included(at(i64::MIN)), |ms| Bound::Included(at(ms)));
            let upper = self.to_ms.map_or(Bound::Unbounded, |ms| Bound::Excluded(at(ms)));
            clauses.push((Occur::Must, filter(Box::new(RangeQuery::new(lower, upper)))));
        }
        if let Some(labels) = &self.labels {
            let units = UnitSetQuery::new(labels.units.iter().map(|(s, e)| (s.as_str(), e.as_str())));
            let occur = if labels.keep { Occur::Must } else { Occur::MustNot };
            clauses.push((occur, filter(Box::new(units))));
        }
        Ok(Compiled {
            whole: Box::new(BooleanQuery::new(clauses)),
            text,
        })
    }
}

/// A term query on `field`.
fn term(field: Field, value: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, value),
        IndexRecordOption::Basic,
    ))
}

/// `query` as a filter: it keeps or drops units and adds nothing to their score.
fn filter(query: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(query, 0.0))
}
