//! The labeling routes: `GET /api/codebook`.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::etag::none_match;
use super::AppState;

/// `GET /api/codebook`: the labels with their families, definitions, rules, cues and output
/// field types, with an ETag (`If-None-Match` gives 304).
pub async fn codebook(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let codebook = &state.codebook;
    let etag =
        HeaderValue::from_str(codebook.etag()).unwrap_or_else(|_| HeaderValue::from_static("\"codebook\""));
    if none_match(&headers, codebook.etag()) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        codebook.body(),
    )
        .into_response()
}
