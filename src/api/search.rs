//! `GET /api/search`: units of every session ranked by relevance to `q`, with filters, a
//! highlighted snippet each, the total and a page (see [`crate::search`]).
//!
//! Filters may repeat (`tool=Bash&tool=Edit`: either); different filters all apply.
//! Label filters (`labeled`, `annotator`, `label`, `codebook`) are read from the label
//! store as the units they name, which the index then keeps or leaves out, so that the
//! total and the pages stay exact. In blind mode an annotator who is not a reviewer may
//! filter by their own sets only (`annotator` = themselves), 403 otherwise: which units
//! others labeled is what blind mode hides.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use serde_json::json;

use super::auth::Identity;
use super::error::{echo, ApiError};
use super::labels::{blindness, json_response, viewer};
use super::query::QueryPairs;
use super::AppState;
use crate::core::json::time::parse_millis;
use crate::labels::consensus::Blindness;
use crate::labels::validate::check_annotator;
use crate::labels::Codebook;
use crate::rounds::Candidate;
use crate::search::results::{MAX_LIMIT, MAX_OFFSET};
use crate::search::{LabelFilter, SearchQuery};
use crate::store::Framework;

/// Results per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;

/// The unit types a `unit_type` filter accepts.
const UNIT_TYPES: [&str; 3] = ["user_turn", "assistant_turn", "system_turn"];

/// The handler.
pub async fn search(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    // The route is only served with search on; the same 404 as a route that is not.
    let Some(search) = state.search.clone() else {
        return Err(ApiError::NotFound("No route for GET /api/search".into()));
    };
    let pairs = QueryPairs::parse(query.as_deref());
    let mut asked = search_query(&pairs)?;
    let (offset, limit) = (
        number(&pairs, "offset", 0, 0..=MAX_OFFSET)?,
        number(&pairs, "limit", DEFAULT_LIMIT, 1..=MAX_LIMIT)?,
    );
    asked.labels = label_filter(&state, &identity, &pairs).await?;
    let index = search.state();
    let page = search.page(asked.clone(), offset, limit).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "query": asked.text(),
            "total": page.total,
            "offset": offset,
            "limit": limit,
            "results": page.results,
            "index": index,
        }),
    ))
}

/// The units a round's search selection finds that `codebook` codes (see
/// [`crate::rounds::Selection::Search`]): `query` and `filters` read as the route reads
/// its parameters (a filter's value a string, a number, a boolean or a list of them).
/// 400 naming `selection.filters.<name>` for a bad filter, or when the server runs without
/// search; 503 while the index is catching up (a round drawn then could miss units).
pub(super) async fn selected_units(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    query: &str,
    filters: &serde_json::Map<String, serde_json::Value>,
    codebook: &Codebook,
) -> Result<Vec<Candidate>, ApiError> {
    let Some(search) = state.search.clone() else {
        return Err(invalid(
            "selection.query",
            "this server runs without search (--no-search): select units or sessions".into(),
        ));
    };
    if search.state().pending {
        return Err(ApiError::Unavailable {
            message: "The search index is still catching up with the sessions: a round drawn now could miss units; retry shortly".into(),
            retry_after: std::time::Duration::from_secs(2),
        });
    }
    let pairs = QueryPairs::of_pairs(filter_pairs(query, filters)?);
    let in_selection = |e: ApiError| match e {
        ApiError::Invalid { message, details } => {
            let field = details["field"].as_str().unwrap_or("filters").to_owned();
            ApiError::Invalid {
                message: format!("selection.filters.{message}"),
                details: json!({ "field": format!("selection.filters.{field}") }),
            }
        }
        other => other,
    };
    let mut asked = search_query(&pairs).map_err(in_selection)?;
    asked.labels = label_filter(state, identity, &pairs)
        .await
        .map_err(in_selection)?;
    let keys = search.matching_units(asked).await?;
    Ok(keys
        .into_iter()
        .filter(|k| codebook.covers(k.unit_type))
        .map(|k| Candidate {
            session_id: k.session_id.to_string(),
            event_id: k.event_id,
            unit_type: k.unit_type.to_owned(),
        })
        .collect())
}

/// A selection's query and filters as the route's parameters (`q` first).
fn filter_pairs(
    query: &str,
    filters: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<(String, String)>, ApiError> {
    use serde_json::Value;
    let mut pairs = vec![("q".to_owned(), query.to_owned())];
    for (name, value) in filters {
        if name == "q" {
            return Err(invalid(
                "selection.filters.q",
                "the query is the selection's `query`".into(),
            ));
        }
        let values = match value {
            Value::Array(list) => list.iter().collect(),
            single => vec![single],
        };
        for value in values {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => {
                    return Err(invalid(
                        &format!("selection.filters.{name}"),
                        "must be a string, a number, a boolean or a list of them".into(),
                    ))
                }
            };
            pairs.push((name.clone(), text));
        }
    }
    Ok(pairs)
}

/// The label filter the parameters ask for, if any, with the units it names read from the
/// label store (403 where blind mode forbids it).
async fn label_filter(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    pairs: &QueryPairs,
) -> Result<Option<LabelFilter>, ApiError> {
    let Some(ask) = label_ask(state, pairs)? else {
        return Ok(None);
    };
    allowed_label_filter(state, identity, pairs, &ask)?;
    let mut units = state
        .labels
        .unit_keys(ask.annotator, ask.label, &ask.codebook)
        .await?;
    // The units of blind rounds are matched by the asker's own sets alone, or a reviewer's.
    if let Blindness::Units(blind) = blindness(state, None).await? {
        let viewer = viewer(state, identity, pairs);
        let own = ask.annotator.is_some() && viewer.annotator.as_deref() == ask.annotator;
        if !(viewer.reviewer || own) {
            units.retain(|(session, event)| !blind.contains(&format!("{session}\0{event}")));
        }
    }
    Ok(Some(LabelFilter {
        units,
        keep: ask.keep,
    }))
}

/// The search the parameters ask for, label filters aside.
fn search_query(pairs: &QueryPairs) -> Result<SearchQuery, ApiError> {
    let strings = |key: &str| pairs.all(key).map(str::to_owned).collect::<Vec<String>>();
    let frameworks = pairs
        .all("framework")
        .map(|f| {
            Framework::from_name(f)
                .map(|f| f.name().to_owned())
                .ok_or_else(|| {
                    invalid(
                        "framework",
                        format!(
                            "unknown framework '{}' (expected one of: {})",
                            echo(f),
                            super::upload::FRAMEWORKS.join(", ")
                        ),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let unit_types = strings("unit_type");
    if let Some(bad) = unit_types.iter().find(|t| !UNIT_TYPES.contains(&t.as_str())) {
        return Err(invalid(
            "unit_type",
            format!(
                "unknown unit type '{}' (expected user_turn, assistant_turn or system_turn)",
                echo(bad)
            ),
        ));
    }
    Ok(SearchQuery {
        text: pairs.first("q").map(str::to_owned),
        frameworks,
        sessions: strings("session"),
        unit_types,
        actors: strings("actor"),
        tools: strings("tool"),
        failed: pairs.boolean("failed")?,
        delegation: pairs.boolean("delegation")?,
        from_ms: time(pairs, "from")?,
        to_ms: time(pairs, "to")?,
        labels: None,
    })
}

/// A label filter as asked: whose sets, which label, which codebook; keep or leave out.
struct LabelAsk<'q> {
    annotator: Option<&'q str>,
    label: Option<&'q str>,
    codebook: String,
    keep: bool,
}

/// The label filter the parameters ask for, if any: `labeled=true|false` (true when only
/// `annotator`, `label` or `codebook` is given), by `annotator`, with `label` (a label of
/// the codebook), in `codebook`.
fn label_ask<'q>(state: &AppState, pairs: &'q QueryPairs) -> Result<Option<LabelAsk<'q>>, ApiError> {
    let labeled = pairs.boolean("labeled")?;
    let (annotator, label, codebook) = (
        pairs.first("annotator").filter(|a| !a.is_empty()),
        pairs.first("label").filter(|l| !l.is_empty()),
        pairs.first("codebook").filter(|c| !c.is_empty()),
    );
    if labeled.is_none() && annotator.is_none() && label.is_none() && codebook.is_none() {
        return Ok(None);
    }
    if let Some(annotator) = annotator {
        check_annotator("annotator", annotator)?;
    }
    let book = state.codebooks.get(codebook)?;
    if let Some(label) = label.filter(|l| book.label(l).is_none()) {
        return Err(invalid(
            "label",
            format!("'{}' is not a label of the codebook {}", echo(label), book.id),
        ));
    }
    Ok(Some(LabelAsk {
        annotator,
        label,
        codebook: book.id.clone(),
        keep: labeled.unwrap_or(true),
    }))
}

/// In blind mode, an asker who is not a reviewer may filter by their own sets alone.
fn allowed_label_filter(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    pairs: &QueryPairs,
    ask: &LabelAsk<'_>,
) -> Result<(), ApiError> {
    if !state.labels.policy().blind {
        return Ok(());
    }
    let viewer = viewer(state, identity, pairs);
    if viewer.reviewer || (ask.annotator.is_some() && viewer.annotator.as_deref() == ask.annotator) {
        return Ok(());
    }
    Err(ApiError::Forbidden(
        "labels are blind on this server: a label filter may only name your own sets (annotator=<you>)"
            .into(),
    ))
}

/// `key` as an RFC 3339 time, in ms since the epoch (absent: `None`); 400 otherwise.
fn time(pairs: &QueryPairs, key: &str) -> Result<Option<i64>, ApiError> {
    match pairs.first(key) {
        None | Some("") => Ok(None),
        Some(t) => parse_millis(t).map(Some).ok_or_else(|| {
            invalid(
                key,
                format!("'{}' is not an RFC 3339 time (2026-01-05T10:00:00Z)", echo(t)),
            )
        }),
    }
}

/// `key` as a whole number in `range` (absent: `default`); 400 otherwise.
fn number(
    pairs: &QueryPairs,
    key: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, ApiError> {
    match pairs.first(key) {
        None => Ok(default),
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                invalid(
                    key,
                    format!("must be a whole number from {} to {}", range.start(), range.end()),
                )
            }),
    }
}

/// 400 naming `field`.
fn invalid(field: &str, message: String) -> ApiError {
    ApiError::Invalid {
        message: format!("{field}: {message}"),
        details: json!({ "field": field }),
    }
}
