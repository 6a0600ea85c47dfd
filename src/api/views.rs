//! The view routes: `GET /api/graph/{id}` and its `workflow`, `annotations`, `dialog`, `chatlog`,
//! `metrics` and `diagnostics`. Bodies are rendered once per session version and served as
//! bytes, in the coding the request accepts best (gzip, br: kept variants, see
//! [`crate::store::bodies`]), with an ETag per coding (`If-None-Match` gives 304).

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};

use super::auth::Identity;
use super::encoding::{negotiate, Negotiated};
use super::error::{echo, graph_not_found, session_not_found, ApiError};
use super::labels;
use super::query::QueryPairs;
use super::AppState;
use crate::core::pipeline::session::Branch;
use crate::core::views::annotations::UnitLabels;
use crate::core::views::graph::GraphMode;
use crate::core::views::{View, ViewOptions};
use crate::http::etag::none_match;
use crate::labels::consensus::shown_labels;
use crate::store::bodies::Served;
use crate::store::compress::Encoding;
use crate::store::Slot;
use axum::Extension;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// How a view route names a missing session and its sub-agents parameter (when its view
/// [takes one](View::takes_subagents)); the other parameters it reads are its view's (see
/// [`View::takes_step`] and the like).
struct Route {
    view: View,
    not_found: fn(&str) -> String,
    subagents_flag: Option<&'static str>,
}

const GRAPH: Route = Route {
    view: View::Graph,
    not_found: graph_not_found,
    subagents_flag: None,
};
const WORKFLOW: Route = Route {
    view: View::Workflow,
    not_found: session_not_found,
    subagents_flag: None,
};
const ANNOTATIONS: Route = Route {
    view: View::Annotations,
    not_found: session_not_found,
    subagents_flag: Some("include_sidechains"),
};
const DIALOG: Route = Route {
    view: View::Dialog,
    not_found: session_not_found,
    subagents_flag: Some("include_sidechains"),
};
const CHATLOG: Route = Route {
    view: View::Chatlog,
    not_found: session_not_found,
    subagents_flag: Some("include_subagents"),
};
const METRICS: Route = Route {
    view: View::Metrics,
    not_found: graph_not_found,
    subagents_flag: None,
};
const BRANCHES: Route = Route {
    view: View::Branches,
    not_found: session_not_found,
    subagents_flag: None,
};
const DIAGNOSTICS: Route = Route {
    view: View::Diagnostics,
    not_found: session_not_found,
    subagents_flag: None,
};

impl Route {
    /// The view options `query` asks for, of those the route reads.
    fn options(&self, query: &QueryPairs) -> Result<ViewOptions, ApiError> {
        Ok(ViewOptions {
            step: if self.view.takes_step() {
                query.step()?
            } else {
                None
            },
            include_subagents: match self.subagents_flag {
                Some(flag) => query.flag(flag)?,
                None => false,
            },
            branch: if self.view.takes_branch() {
                query.branch()?
            } else {
                Branch::All
            },
            graph: if self.view.takes_edges() {
                query.graph_mode()?
            } else {
                GraphMode::Edges
            },
        })
    }
}

/// What a view body shows of the labels on its units.
enum LabelsShown {
    /// None: the view shows no labels, or no unit has any (the kept body is served).
    Nothing,
    /// The labels each unit shows, and a digest of them for the ETag.
    Units(Arc<UnitLabels>, String),
    /// The label database is unreachable or busy: the body is served without its labels.
    Unreachable,
}

/// Serves `route`'s view of session `id`.
async fn serve(
    state: AppState,
    route: &Route,
    id: String,
    query: Option<String>,
    headers: HeaderMap,
    identity: Option<Extension<Identity>>,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    // The reference checks the id before the step.
    let slot = state
        .store
        .find(&id)
        .await
        .map_err(|e| ApiError::from_store(e, route.not_found))?;
    let options = route.options(&query)?;
    let loaded = load(&state, route, slot).await?;
    let shown = match route.view {
        View::Diagnostics => {
            match without_unreachable_labels(orphaned_labels(&state, &id, &identity, &query).await)? {
                Some(Some(orphans)) => {
                    return diagnostics_with_orphans(&state, &loaded, options, orphans).await
                }
                Some(None) => LabelsShown::Nothing,
                None => LabelsShown::Unreachable,
            }
        }
        View::Annotations | View::Dialog => labels_shown(&state, &id, &identity, &query).await?,
        _ => LabelsShown::Nothing,
    };
    let encoding = negotiate(&headers);
    let mut base = etag_base(&loaded.version, route.view, options);
    if let LabelsShown::Units(_, digest) = &shown {
        base = format!("{base}-labels-{digest}");
    }
    let unreachable = matches!(shown, LabelsShown::Unreachable);
    if let Some(tag) = held_etag(&headers, &base, encoding).filter(|_| !unreachable) {
        return not_modified(&tag);
    }
    let served = render(&state, &loaded, route, options, shown, encoding).await?;
    if unreachable {
        return without_labels_response(served);
    }
    let tag = etag(&base, served.encoding);
    view_response(served, Some(&tag))
}

/// The session of `slot` loaded for `route`; an AutoGen log's workflow is refused, as
/// CommuGraph refuses the workflow of a log that is not Claude Code's.
async fn load(
    state: &AppState,
    route: &Route,
    slot: Arc<Slot>,
) -> Result<Arc<crate::store::Loaded>, ApiError> {
    let (_, loaded) = state
        .store
        .parsed(slot)
        .await
        .map_err(|e| ApiError::from_store(e, route.not_found))?;
    if loaded.session.autogen.is_some() && route.view == View::Workflow {
        return Err(ApiError::BadRequest(
            "Workflow view is only available for Claude Code logs".into(),
        ));
    }
    Ok(loaded)
}

/// The labels the annotations or dialog body of session `id` shows for this request.
async fn labels_shown(
    state: &AppState,
    id: &str,
    identity: &Option<Extension<Identity>>,
    query: &QueryPairs,
) -> Result<LabelsShown, ApiError> {
    Ok(
        match without_unreachable_labels(unit_labels(state, id, identity, query).await)? {
            Some(Some((labels, digest))) => LabelsShown::Units(labels, digest),
            Some(None) => LabelsShown::Nothing,
            None => LabelsShown::Unreachable,
        },
    )
}

/// The ETag of the copy the client holds, when it holds one: the body as it is, or in the
/// coding it asks for (a body is sent as it is when there is no room to compress it).
fn held_etag(headers: &HeaderMap, base: &str, encoding: Encoding) -> Option<String> {
    [Encoding::Identity, encoding]
        .map(|e| etag(base, e))
        .into_iter()
        .find(|tag| none_match(headers, tag))
}

/// `route`'s body of `loaded` with `options` in `encoding` (when worth it), showing the
/// labels `shown` on its units: the kept body when it shows none.
async fn render(
    state: &AppState,
    loaded: &crate::store::Loaded,
    route: &Route,
    options: ViewOptions,
    shown: LabelsShown,
    encoding: Encoding,
) -> Result<Served, ApiError> {
    let budget = state.store.render_budget();
    match shown {
        LabelsShown::Units(labels, _) => {
            loaded
                .bodies
                .annotations_labeled(route.view, options, labels, encoding, budget)
                .await
        }
        LabelsShown::Nothing | LabelsShown::Unreachable => {
            loaded.bodies.body(route.view, options, encoding, budget).await
        }
    }
    .map_err(|e| ApiError::from_store(e, route.not_found))
}

/// The header a view body carries when it is served without the labels it should show.
pub const LABELS_HEADER: HeaderName = HeaderName::from_static("x-labels");

/// `labels`, or `None` when the label database is unreachable or busy (the view is then
/// served without its labels rather than refused: reading a session needs no database).
fn without_unreachable_labels<T>(labels: Result<T, ApiError>) -> Result<Option<T>, ApiError> {
    match labels {
        Ok(labels) => Ok(Some(labels)),
        Err(ApiError::Unavailable { message, .. }) => {
            tracing::warn!(%message, "serving a view without its labels");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A view body served without the labels it should show: `X-Labels: unavailable`, no
/// ETag, not to be stored (it is not the body the session's labels make).
fn without_labels_response(served: Served) -> Result<Response, ApiError> {
    let mut response = view_response(served, None)?;
    let headers = response.headers_mut();
    headers.insert(LABELS_HEADER, HeaderValue::from_static("unavailable"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The labels the annotations body shows on each unit for this request (see
/// [`crate::labels::consensus`]), with a digest of them for the ETag; `None` when no unit
/// shows any (the kept body is served). On SQLite from the session's sets held in memory,
/// worked through on the blocking pool; on PostgreSQL unit by unit as they are read, a
/// session of millions of sets never held whole.
async fn unit_labels(
    state: &AppState,
    id: &str,
    identity: &Option<Extension<Identity>>,
    query: &QueryPairs,
) -> Result<Option<(Arc<UnitLabels>, String)>, ApiError> {
    let codebook = labels::requested_codebook(state, query)?;
    let viewer = labels::viewer(state, identity, query);
    let blindness = labels::blindness(state, Some(id)).await?;
    let asked = query.first("annotator").map(str::to_owned);
    if !state.labels.caches_sets() {
        let mut shown = ShownByUnit::default();
        let mut failed = None;
        state
            .labels
            .for_each_unit_sets(&codebook.id, id, None, |unit| {
                let blind = unit.first().is_some_and(|s| blindness.covers(id, &s.event_id));
                if let Err(e) = shown.add(&viewer.visible(&unit, blind), asked.as_deref()) {
                    failed.get_or_insert(e);
                }
            })
            .await?;
        return failed.map_or_else(|| Ok(shown.finish()), Err);
    }
    let sets = labels::session_sets(state, &codebook.id, id).await?;
    let id = id.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut shown = ShownByUnit::default();
        let visible = viewer.visible_in_session(&id, &sets, &blindness);
        for unit in visible.chunk_by(|a, b| a.event_id == b.event_id) {
            shown.add(unit, asked.as_deref())?;
        }
        Ok(shown.finish())
    })
    .await
    .map_err(|e| ApiError::Internal(format!("labels shown: {e}")))?
}

/// The labels each unit shows, gathered unit by unit, with a running digest of them.
#[derive(Default)]
struct ShownByUnit {
    shown: UnitLabels,
    digest: Sha256,
}

impl ShownByUnit {
    /// Adds the labels a unit shows from its (visible) `sets`, if any.
    fn add(&mut self, sets: &[&crate::labels::LabelSet], asked: Option<&str>) -> Result<(), ApiError> {
        let records = shown_labels(sets, asked);
        let Some(first) = sets.first().filter(|_| !records.is_empty()) else {
            return Ok(());
        };
        let json =
            serde_json::value::to_raw_value(&records).map_err(|e| ApiError::Internal(e.to_string()))?;
        self.digest.update(first.event_id.as_bytes());
        self.digest.update([0]);
        self.digest.update(json.get().as_bytes());
        self.digest.update([0]);
        self.shown.insert(first.event_id.clone(), json);
        Ok(())
    }

    /// The labels with the digest's first 8 bytes in hex; `None` when no unit shows any.
    fn finish(self) -> Option<(Arc<UnitLabels>, String)> {
        if self.shown.is_empty() {
            return None;
        }
        let digest: [u8; 32] = self.digest.finalize().into();
        let hex = hex::encode(&digest[..8]);
        Some((Arc::new(self.shown), hex))
    }
}

/// The units of session `id` that have labels but are no longer in the session, each with
/// the annotators whose sets are on it (in blind mode, those the asker may see); `None`
/// when there are none.
async fn orphaned_labels(
    state: &AppState,
    id: &str,
    identity: &Option<Extension<Identity>>,
    query: &QueryPairs,
) -> Result<Option<serde_json::Value>, ApiError> {
    let codebook = labels::requested_codebook(state, query)?;
    let all = labels::session_sets(state, &codebook.id, id).await?;
    let sets = labels::visible_sets(state, &labels::viewer(state, identity, query), id, &all).await?;
    let orphaned = labels::orphaned_units(state, id, &sets).await?;
    if orphaned.is_empty() {
        return Ok(None);
    }
    let orphaned: std::collections::HashSet<&str> = orphaned.iter().map(String::as_str).collect();
    let listed: Vec<serde_json::Value> = sets
        .chunk_by(|a, b| a.event_id == b.event_id)
        .filter(|unit| orphaned.contains(unit[0].event_id.as_str()))
        .map(|unit| {
            let annotators: Vec<&str> = unit.iter().map(|s| s.annotator.as_str()).collect();
            serde_json::json!({ "event_id": unit[0].event_id, "annotators": annotators })
        })
        .collect();
    Ok(Some(serde_json::Value::Array(listed)))
}

/// The diagnostics body with `orphaned_labels` added: labels kept on units the session no
/// longer has (a live log rewritten, say). Small: rebuilt per request, not kept.
async fn diagnostics_with_orphans(
    state: &AppState,
    loaded: &Arc<crate::store::Loaded>,
    options: ViewOptions,
    orphans: serde_json::Value,
) -> Result<Response, ApiError> {
    let served = loaded
        .bodies
        .body(
            View::Diagnostics,
            options,
            Encoding::Identity,
            state.store.render_budget(),
        )
        .await
        .map_err(|e| ApiError::from_store(e, session_not_found))?;
    let mut body: serde_json::Value =
        serde_json::from_slice(&served.body.to_bytes()).map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Some(object) = body.as_object_mut() {
        object.insert("orphaned_labels".into(), orphans);
    }
    Ok(labels::json_response(StatusCode::OK, &body))
}

/// What a body's ETags start with: the session's version and what the request asks for.
fn etag_base(version: &str, view: View, options: ViewOptions) -> String {
    format!(
        "{version}-{view}-{}-{}-{}{}",
        u8::from(options.include_subagents),
        options.step.map_or("all".to_owned(), |s| s.to_string()),
        if options.branch == Branch::Active {
            "active"
        } else {
            "all"
        },
        if options.graph == GraphMode::Reference {
            "-noedges"
        } else {
            ""
        },
    )
}

/// The ETag of a body in `encoding`: each coding is a representation of its own.
fn etag(base: &str, encoding: Encoding) -> String {
    match encoding.token() {
        None => format!("\"{base}\""),
        Some(token) => format!("\"{base}-{token}\""),
    }
}

/// 304 for a client that holds the body tagged `tag`.
fn not_modified(tag: &str) -> Result<Response, ApiError> {
    let tag = HeaderValue::from_str(tag).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut response = (
        StatusCode::NOT_MODIFIED,
        [
            (header::ETAG, tag),
            (header::VARY, HeaderValue::from_static("accept-encoding")),
        ],
    )
        .into_response();
    response.extensions_mut().insert(Negotiated);
    Ok(response)
}

/// The response carrying a view body in the coding it was made in (`Vary: Accept-Encoding`:
/// the coding depends on the request), marked so that the compression layer leaves it.
fn view_response(served: Served, tag: Option<&str>) -> Result<Response, ApiError> {
    let mut response = Response::new(axum::body::Body::empty());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Some(token) = served.encoding.token() {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(token));
    }
    if let Some(tag) = tag {
        let tag = HeaderValue::from_str(tag).map_err(|e| ApiError::Internal(e.to_string()))?;
        headers.insert(header::ETAG, tag);
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    response.extensions_mut().insert(Negotiated);
    *response.body_mut() = axum::body::Body::from(served);
    Ok(response)
}

/// The `GET` route serving `route`'s view.
fn route(route: &'static Route) -> MethodRouter<AppState> {
    get(
        move |State(state): State<AppState>,
              Path(id): Path<String>,
              RawQuery(query): RawQuery,
              identity: Option<Extension<Identity>>,
              headers: HeaderMap| { serve(state, route, id, query, headers, identity) },
    )
}

/// `GET /api/graph/{id}` (`?step=N`): the communication graph.
pub fn graph() -> MethodRouter<AppState> {
    route(&GRAPH)
}

/// `GET /api/graph/{id}/workflow` (`?step=N`): the workflow DAG.
pub fn workflow() -> MethodRouter<AppState> {
    route(&WORKFLOW)
}

/// `GET /api/graph/{id}/annotations` (`?include_sidechains=true`): the annotation units.
pub fn annotations() -> MethodRouter<AppState> {
    route(&ANNOTATIONS)
}

/// `GET /api/graph/{id}/dialog` (`?include_sidechains=true`): the annotation units as
/// CommuGraph's dialog view reads them, under `records`, with the same labels.
pub fn dialog() -> MethodRouter<AppState> {
    route(&DIALOG)
}

/// `GET /api/graph/{id}/chatlog` (`?include_subagents=true`): the chat log.
pub fn chatlog() -> MethodRouter<AppState> {
    route(&CHATLOG)
}

/// `GET /api/graph/{id}/metrics`.
pub fn metrics() -> MethodRouter<AppState> {
    route(&METRICS)
}

/// `GET /api/graph/{id}/diagnostics`.
pub fn diagnostics() -> MethodRouter<AppState> {
    route(&DIAGNOSTICS)
}

/// `GET /api/graph/{id}/branches`: branch points, each alternative with its leaf, size,
/// first timestamp and whether it is active.
pub fn branches() -> MethodRouter<AppState> {
    route(&BRANCHES)
}

/// `GET /api/graph/{id}/context?leaf=<id>`: the messages a model has in context at an
/// entry (default: the current leaf), compaction applied.
pub async fn context(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let leaf = query.first("leaf").map(str::to_owned);
    let (_, loaded) = state
        .store
        .get(&id)
        .await
        .map_err(|e| ApiError::from_store(e, session_not_found))?;
    let budget = state.store.render_budget();
    let served = match leaf {
        None => loaded
            .bodies
            .body(View::Context, ViewOptions::default(), negotiate(&headers), budget)
            .await
            .map_err(|e| ApiError::from_store(e, session_not_found))?,
        Some(leaf) => loaded
            .bodies
            .context_at(leaf.clone(), negotiate(&headers), budget)
            .await
            .map_err(|e| ApiError::from_store(e, session_not_found))?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "No entry with id '{}' in session '{}'",
                    echo(&leaf),
                    echo(&id)
                ))
            })?,
    };
    view_response(served, None)
}
