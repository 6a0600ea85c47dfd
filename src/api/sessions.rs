//! `GET /api/frameworks`, `GET /api/sessions`, `GET /api/graph/{id}/info`,
//! `DELETE /api/session/{id}`, and the health probes.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;

use super::error::ApiError;
use super::upload::FRAMEWORKS;
use super::AppState;
use crate::core::json::time::iso_millis;
use crate::labels::LabelError;
use crate::store::registry::{Slot, SlotInfo, Source};
use crate::store::uploads::Counts;

/// A session as `info` and the session list describe it (the reference's keys, then ours).
#[derive(Debug, Serialize)]
pub struct SessionInfo<'a> {
    id: &'a str,
    framework: &'static str,
    /// `null` for a session on disk that was never parsed.
    message_count: Option<usize>,
    node_count: Option<usize>,
    edge_count: Option<usize>,
    created_at: String,
    last_accessed: String,
    /// `upload` or `directory`.
    source: &'static str,
    /// For sessions on disk: the folder below the sessions directory (the project).
    #[serde(skip_serializing_if = "Option::is_none")]
    project: Option<&'a str>,
}

impl SessionInfo<'_> {
    fn of(slot: &Slot, counts: Option<Counts>) -> SessionInfo<'_> {
        let (source, project) = match &slot.source {
            Source::Upload(_) => ("upload", None),
            Source::Disk(found) => ("directory", Some(found.project.as_str())),
        };
        SessionInfo {
            id: &slot.id,
            framework: slot.framework.name(),
            message_count: counts.map(|c| c.message_count),
            node_count: counts.map(|c| c.node_count),
            edge_count: counts.map(|c| c.edge_count),
            created_at: iso_millis(slot.created_at_ms),
            last_accessed: iso_millis(slot.last_accessed_ms()),
            source,
            project,
        }
    }
}

/// `GET /api/frameworks`.
pub async fn frameworks() -> Json<serde_json::Value> {
    Json(json!({ "frameworks": FRAMEWORKS }))
}

/// `GET /api/sessions`: every session, oldest first (uploads as the shared upload store
/// holds them now, when there is one); nothing is parsed to list them.
pub async fn list(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let listed = state.store.list_current().await?;
    let sessions: Vec<SessionInfo> = listed
        .iter()
        .map(|SlotInfo { slot, counts }| SessionInfo::of(slot, *counts))
        .collect();
    Ok(Json(json!({ "sessions": sessions })))
}

/// `GET /api/graph/{id}/info`: parses the session if needed, to report its counts.
pub async fn info(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let (slot, _) = state.store.get(&id).await?;
    Ok(Json(SessionInfo::of(&slot, slot.counts())).into_response())
}

/// `DELETE /api/session/{id}`: forgets an upload and removes it from disk.
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.store.delete(&id).await?;
    Ok(Json(
        json!({ "message": format!("Session '{id}' deleted successfully") }),
    ))
}

/// `GET /healthz`: the process serves requests.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// How long `/readyz` waits for the label database to answer.
const DATABASE_PING: std::time::Duration = std::time::Duration::from_secs(1);

/// `GET /readyz`: 200 once stored uploads are restored and the sessions directories
/// scanned, and while the label database answers; 503 before, or while it does not
/// (`database: "unreachable"`, with why).
pub async fn readyz(State(state): State<AppState>) -> Response {
    if !state.store.is_ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "starting" })),
        )
            .into_response();
    }
    let sessions = state.store.len();
    match state.labels.ping(DATABASE_PING).await {
        Ok(()) => Json(json!({ "status": "ready", "sessions": sessions, "database": "ok" })).into_response(),
        Err(e) => {
            let message = match e {
                LabelError::Unreachable(m) | LabelError::Busy(m) => m,
                other => {
                    tracing::error!(cause = %other, "the label database failed the readiness query");
                    "The label database failed a query; the server log has the details".to_owned()
                }
            };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({
                    "status": "unavailable",
                    "sessions": sessions,
                    "database": "unreachable",
                    "message": message,
                })),
            )
                .into_response()
        }
    }
}
