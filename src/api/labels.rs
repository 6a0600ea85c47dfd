//! The labeling routes, thin over [`crate::labels`]:
//!
//! - `GET /api/codebooks`: the codebooks, by id, with their versions.
//! - `GET /api/codebook` (`?codebook=ID`): one codebook, with an ETag.
//! - `GET /api/me`: who the request is made as (the labeling page's sign-in).
//! - `PUT /api/graph/{id}/labels/{event_id}`: one annotator's set on one unit (`If-Match`,
//!   or `If-None-Match: *` to create it only).
//! - `DELETE /api/graph/{id}/labels/{event_id}?annotator=NAME`: removes it (`If-Match`).
//! - `GET /api/graph/{id}/labels`: the session's sets (`annotator`, `status`, `label`).
//! - `GET /api/graph/{id}/labels/{event_id}/history`: every change (`annotator`).
//!
//! Every route but `/api/me` takes `?codebook=ID` (default: the server's default codebook):
//! sets, suggestions and history are kept per codebook.
//!
//! Who asks: the named API key's annotator ([`Identity`]), else `?annotator=` (reads) or
//! the body's `annotator` (writes), within what [`Caller::may_act_for`] allows (a named key
//! acts for itself unless it is a reviewer's; a plain key among named ones for no named
//! key's annotator and no reviewer); 403 otherwise. In blind mode reads show what
//! [`Viewer::visible`] allows.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Value};

use super::auth::Identity;
use super::error::{echo, ApiError};
use super::query::QueryPairs;
use super::AppState;
use crate::http::etag::none_match;
use crate::labels::consensus::{Blindness, Viewer};
use crate::labels::sets_cache::Sets;
use crate::labels::validate::{check_annotator, check_ids, check_no_nul, UnitRef};
use crate::labels::{Caller, Codebook, LabelSet, Precondition, SetFilter, SetKey, Status};

/// `GET /api/codebooks`: every codebook's id, version, unit types and label count, and
/// which is the default.
pub async fn codebooks(State(state): State<AppState>) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        state.codebooks.list_body(),
    )
        .into_response()
}

/// `GET /api/codebook` (`?codebook=ID`): the labels with their families, definitions,
/// rules, cues and output field types, with an ETag (`If-None-Match` gives 304).
pub async fn codebook(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let codebook = requested_codebook(&state, &query)?;
    let etag =
        HeaderValue::from_str(codebook.etag()).unwrap_or_else(|_| HeaderValue::from_static("\"codebook\""));
    if none_match(&headers, codebook.etag()) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        codebook.body(),
    )
        .into_response())
}

/// The codebook a request names (`?codebook=ID`), else the default; 400 for one the
/// server does not have.
pub(super) fn requested_codebook(state: &AppState, query: &QueryPairs) -> Result<Arc<Codebook>, ApiError> {
    Ok(state.codebooks.get(query.first("codebook"))?.clone())
}

/// `GET /api/me` (`?annotator=`): the named key's annotator (`null` without one), whether
/// the asker is a reviewer, and the server's read-only and blind modes.
pub async fn me(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = QueryPairs::parse(query.as_deref());
    let viewer = viewer(&state, &identity, &query);
    json_response(
        StatusCode::OK,
        &json!({
            "annotator": caller(&state, &identity).named(),
            "reviewer": viewer.reviewer,
            "read_only": state.config.read_only,
            "blind": state.labels.policy().blind,
            "queue_overlap": state.labels.policy().overlap,
        }),
    )
}

/// `PUT /api/graph/{id}/labels/{event_id}`: replaces the body's annotator's set on the unit
/// (a named key's annotator when the body names none). 201 when the set is new, 200 when
/// it replaced one; the ETag is the set's version. An `If-Match` that is not an entity tag
/// is a 400, as are an `If-None-Match` other than `*` and both headers at once.
pub async fn put_set(
    State(state): State<AppState>,
    Path((id, event_id)): Path<(String, String)>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_ids(&id, &event_id)?;
    let precondition = put_precondition(&headers)?;
    let codebook = requested_codebook(&state, &QueryPairs::parse(query.as_deref()))?;
    let (unit_type, text) = unit_of(&state, &id, &event_id).await?;
    let mut body = json_body(&body)?;
    let caller = caller(&state, &identity);
    // A named key is its annotator: a body naming none writes the key's set.
    if let (Some(me), Some(fields)) = (caller.named(), body.as_object_mut()) {
        fields
            .entry("annotator")
            .or_insert_with(|| Value::String(me.to_owned()));
    }
    let unit = UnitRef {
        unit_type,
        text: &text,
    };
    let valid = state
        .labels
        .validator(&codebook)
        .set(&id, &event_id, &body, unit, caller)?;
    let (set, created) = state.labels.put(&valid, &precondition).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(set_response(status, &set))
}

/// `DELETE /api/graph/{id}/labels/{event_id}?annotator=NAME`: removes that annotator's set
/// (204); 404 when there is none.
pub async fn delete_set(
    State(state): State<AppState>,
    Path((id, event_id)): Path<(String, String)>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    known_session(&state, &id).await?;
    let query = QueryPairs::parse(query.as_deref());
    let annotator = query.first("annotator").ok_or_else(|| ApiError::Invalid {
        message: "annotator: the query parameter is required".into(),
        details: json!({ "field": "annotator" }),
    })?;
    check_annotator("annotator", annotator)?;
    let codebook = requested_codebook(&state, &query)?;
    let key = SetKey {
        codebook: &codebook.id,
        session_id: &id,
        event_id: &event_id,
        annotator,
    };
    let removal = state
        .labels
        .validator(&codebook)
        .removal(key, caller(&state, &identity))?;
    let precondition = precondition(&headers)?;
    state.labels.delete(&removal, &precondition).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /api/graph/{id}/labels` (`?annotator=`, `?status=`, `?label=`): the session's sets,
/// by unit then annotator (in blind mode, those the asker may see), the models' suggestions
/// apart, the units with labels that the session no longer has (`orphaned`), and the sets
/// naming labels the codebook no longer has (`unknown_labels`: it changed since).
pub async fn list_sets(
    State(state): State<AppState>,
    Path(id): Path<String>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    known_session(&state, &id).await?;
    let query = QueryPairs::parse(query.as_deref());
    let status = match query.first("status") {
        None => None,
        Some(s) => Some(Status::parse(s).ok_or_else(|| ApiError::Invalid {
            message: format!(
                "status: unknown status '{}' (expected draft, submitted, discarded or adjudicated)",
                echo(s)
            ),
            details: json!({ "field": "status" }),
        })?),
    };
    let filter = SetFilter {
        annotator: query.first("annotator").map(str::to_owned),
        status,
        label: query.first("label").map(str::to_owned),
    };
    let codebook = requested_codebook(&state, &query)?;
    let viewer = viewer(&state, &identity, &query);
    let all = session_sets(&state, &codebook.id, &id).await?;
    let visible = visible_sets(&state, &viewer, &id, &all).await?;
    let sets: Vec<&LabelSet> = visible.iter().copied().filter(|s| filter.matches(s)).collect();
    let suggestions = state.labels.suggestions(&codebook.id, &id, None).await?;
    let orphaned = orphaned_units(&state, &id, &visible).await?;
    let unknown_labels = unknown_labels(&codebook, &visible);
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "codebook": { "id": codebook.id, "version": codebook.version },
            "total": sets.len(),
            "labels": sets,
            "suggestions": suggestions,
            "orphaned": orphaned,
            "unknown_labels": unknown_labels,
        }),
    ))
}

/// The sets of `sets` naming labels `codebook` does not have (it changed since they were
/// written): each with its unit, annotator, the version it was written under and those
/// labels. Never dropped: they are shown, exported and kept until rewritten.
fn unknown_labels(codebook: &Codebook, sets: &[&LabelSet]) -> Vec<Value> {
    sets.iter()
        .filter_map(|set| {
            let unknown: Vec<&str> = set
                .labels
                .iter()
                .map(|l| l.id.as_str())
                .filter(|id| codebook.label(id).is_none())
                .collect();
            (!unknown.is_empty()).then(|| {
                json!({
                    "event_id": set.event_id,
                    "annotator": set.annotator,
                    "codebook_version": set.codebook_version,
                    "labels": unknown,
                })
            })
        })
        .collect()
}

/// Every set of session `id` under `codebook`, by unit then annotator (shared: see
/// [`LabelStore::list`]).
///
/// [`LabelStore::list`]: crate::labels::LabelStore::list
pub(super) async fn session_sets(state: &AppState, codebook: &str, id: &str) -> Result<Sets, ApiError> {
    Ok(state.labels.list(codebook, id).await?)
}

/// The event ids of `sets` (sorted by unit: the sets the asker may see) that session `id`
/// no longer has, sorted.
pub(super) async fn orphaned_units(
    state: &AppState,
    id: &str,
    sets: &[&LabelSet],
) -> Result<Vec<String>, ApiError> {
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let (_, loaded) = state.store.get(id).await?;
    let mut ids: Vec<String> = sets
        .chunk_by(|a, b| a.event_id == b.event_id)
        .map(|unit| unit[0].event_id.clone())
        .collect();
    let orphaned = tokio::task::spawn_blocking(move || {
        let units = loaded.units();
        ids.retain(|e| units.get(e).is_none());
        ids
    })
    .await?;
    Ok(orphaned)
}

/// Who asks: the named key's annotator, else `?viewer=`, else `?annotator=`. (`?viewer=`
/// lets a reviewer without a named key list everyone's sets in blind mode, where
/// `?annotator=` would also filter them to the reviewer's own.) A claim the caller may not
/// make (a plain key among named ones naming a named key's annotator or a reviewer) is
/// nobody: in blind mode it sees no sets.
pub(super) fn viewer(state: &AppState, identity: &Option<Extension<Identity>>, query: &QueryPairs) -> Viewer {
    let caller = caller(state, identity);
    let annotator = match caller {
        Caller::Named(name) => Some(name.to_owned()),
        Caller::Anyone | Caller::Unnamed { .. } => query
            .first("viewer")
            .or_else(|| query.first("annotator"))
            .filter(|claimed| {
                caller
                    .may_act_for(claimed, &state.labels.policy().reviewers)
                    .is_ok()
            })
            .map(str::to_owned),
    };
    Viewer {
        reviewer: annotator.as_deref().is_some_and(|a| state.labels.is_reviewer(a)),
        annotator,
    }
}

/// Of the sets of session `session_id` (sorted by unit), those `viewer` may see.
pub(super) async fn visible_sets<'s>(
    state: &AppState,
    viewer: &Viewer,
    session_id: &str,
    sets: &'s [LabelSet],
) -> Result<Vec<&'s LabelSet>, ApiError> {
    let blindness = blindness(state, Some(session_id)).await?;
    Ok(viewer.visible_in_session(session_id, sets, &blindness))
}

/// Where blind mode holds for a read of session `session_id` (or of every session): on
/// every unit with the server's blind mode, else on the units of its blind rounds.
pub(super) async fn blindness(state: &AppState, session_id: Option<&str>) -> Result<Blindness, ApiError> {
    if state.labels.policy().blind {
        return Ok(Blindness::Everywhere);
    }
    Ok(Blindness::of(
        false,
        state.labels.blind_round_units(session_id).await?,
    ))
}

/// Who the request is made as: the named key's annotator; a plain key on a server where
/// keys are named; or, on a server where none is, whoever the request names.
pub(super) fn caller<'s>(state: &'s AppState, identity: &'s Option<Extension<Identity>>) -> Caller<'s> {
    match identity {
        Some(Extension(Identity(name))) => Caller::Named(name),
        None if !state.config.api_keys.named().is_empty() => Caller::Unnamed {
            named: state.config.api_keys.named(),
        },
        None => Caller::Anyone,
    }
}

/// `GET /api/graph/{id}/labels/{event_id}/history` (`?annotator=`): every change of the
/// unit's sets, oldest first.
pub async fn history(
    State(state): State<AppState>,
    Path((id, event_id)): Path<(String, String)>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    known_session(&state, &id).await?;
    check_ids(&id, &event_id)?;
    let query = QueryPairs::parse(query.as_deref());
    let codebook = requested_codebook(&state, &query)?;
    let annotator = query.first("annotator");
    if let Some(annotator) = annotator {
        check_no_nul("annotator", annotator)?;
    }
    let mut entries = state
        .labels
        .history(&codebook.id, &id, &event_id, annotator)
        .await?;
    let viewer = viewer(&state, &identity, &query);
    if !viewer.reviewer && blindness(&state, Some(&id)).await?.covers(&id, &event_id) {
        let sets = session_sets(&state, &codebook.id, &id).await?;
        let unit = sets
            .chunk_by(|a, b| a.event_id == b.event_id)
            .find(|unit| unit[0].event_id == event_id)
            .unwrap_or_default();
        let seen: Vec<&str> = viewer
            .visible(unit, true)
            .iter()
            .map(|s| s.annotator.as_str())
            .chain(viewer.annotator.as_deref())
            .collect();
        entries.retain(|e| seen.contains(&e.annotator.as_str()));
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({ "total": entries.len(), "history": entries }),
    ))
}

/// 404 unless the session is known (without loading it).
pub(super) async fn known_session(state: &AppState, id: &str) -> Result<(), ApiError> {
    state.store.find(id).await?;
    Ok(())
}

/// The type and text of unit `event_id` of session `id` (sub-agent units included); 404
/// when the session or the unit is unknown.
pub(super) async fn unit_of(
    state: &AppState,
    id: &str,
    event_id: &str,
) -> Result<(&'static str, String), ApiError> {
    let (_, loaded) = state.store.get(id).await?;
    let wanted = event_id.to_owned();
    let unit = tokio::task::spawn_blocking(move || {
        loaded.units().get(&wanted).map(|u| (u.unit_type, u.text.clone()))
    })
    .await?;
    unit.ok_or_else(|| {
        ApiError::NotFound(format!(
            "Unit '{}' not found in session '{}'",
            echo(event_id),
            echo(id)
        ))
    })
}

/// The request's `If-Match`; 400 naming it when a tag is not an entity tag (`labels-3`
/// sent without its quotes would otherwise never match, and read as a conflict).
fn precondition(headers: &HeaderMap) -> Result<Precondition, ApiError> {
    let values: Vec<&str> = headers
        .get_all(header::IF_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let malformed = values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find(|tag| !tag.is_empty() && !is_entity_tag(tag));
    if let Some(tag) = malformed {
        return Err(ApiError::Invalid {
            message: format!(
                "If-Match: '{}' is not an entity tag: send the set's ETag as it was given, quotes included (\"labels-3\"), or *",
                echo(tag)
            ),
            details: json!({ "field": "If-Match" }),
        });
    }
    Ok(Precondition::parse(values))
}

/// A `PUT`'s precondition: its `If-Match` (see [`precondition`]), or `If-None-Match: *`,
/// which creates the set only if there is none (a first write that must not replace a set
/// someone else wrote meanwhile). 400 naming `If-None-Match` for any other value of it
/// (a label write is never conditional on a set's tags not matching), or when both headers
/// are sent (they could never both hold).
fn put_precondition(headers: &HeaderMap) -> Result<Precondition, ApiError> {
    let if_match = precondition(headers)?;
    let tags: Vec<&str> = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .map(|v| v.to_str().unwrap_or("?"))
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|tag| !tag.is_empty())
        .collect();
    if tags.is_empty() {
        return Ok(if_match);
    }
    let refusal = |message: String| ApiError::Invalid {
        message,
        details: json!({ "field": "If-None-Match" }),
    };
    if let Some(tag) = tags.iter().find(|tag| **tag != "*") {
        return Err(refusal(format!(
            "If-None-Match: '{}' is not supported on a label write: send * to create the set only if it does not exist",
            echo(tag)
        )));
    }
    if if_match != Precondition::None {
        return Err(refusal(
            "If-None-Match: sent with If-Match, which it can never hold with: send one of them".into(),
        ));
    }
    Ok(Precondition::Absent)
}

/// True when `tag` is `*`, or a quoted entity tag, weak (`W/"..."`) or strong.
fn is_entity_tag(tag: &str) -> bool {
    let quoted = tag.strip_prefix("W/").unwrap_or(tag);
    tag == "*" || (quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"'))
}

/// A JSON request body, or 400 naming `body`.
pub(super) fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::Invalid {
        message: format!("body: not JSON: {e}"),
        details: json!({ "field": "body" }),
    })
}

/// A set with its ETag.
fn set_response(status: StatusCode, set: &LabelSet) -> Response {
    let mut response = json_response(status, set);
    if let Ok(etag) = HeaderValue::from_str(&set.etag()) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    response
}

/// `body` as a JSON response with `status`, never cached.
pub(super) fn json_response<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (
            status,
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => ApiError::Internal(format!("serialising labels: {e}")).into_response(),
    }
}
