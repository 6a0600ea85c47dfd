//! The HTTP API: CommuGraph's routes (CONTRACT 2) plus ours, thin handlers over the store.
//!
//! Middleware: around each route and the fallbacks, one [`edge`] layer (the request's span,
//! named after the matched route, with its id, `x-request-id`, taken from the request or
//! made up, and echoed back; head limits, 414 and 431: [`limits`]; a request timeout, 408;
//! panics caught as a generic JSON 500; compression, gzip or br, of small bodies, view
//! bodies coming compressed from the store, see [`encoding`]; errors as JSON bodies; the
//! security headers), then CORS (an allowlist, when origins are configured); on the API's
//! routes the API key (when keys are configured), and on the upload route a body limit
//! (413, without reading past the limit).
//!
//! The application ([`crate::app`]) merges the labeling page's routes ([`crate::web`])
//! with [`router`]'s, after the API key layer (they want no key, and set their own
//! Content-Security-Policy), and wraps both in [`with_edge`].
//!
//! Search ([`search`], over [`crate::search`]): `GET /api/search`, served unless search is
//! turned off.
//!
//! Labels (see [`labels`] and [`crate::labels`]): `PUT` and `DELETE
//! /api/graph/{id}/labels/{event_id}` write one annotator's set on one unit (refused with
//! 403 in read-only mode; `If-Match: "labels-<version>"` or `*` makes the write
//! conditional, 412 when it does not hold; without it the last writer wins);
//! `GET /api/graph/{id}/labels` lists the session's sets and
//! `GET /api/graph/{id}/labels/{event_id}/history` every change of a unit's sets.

pub mod auth;
pub mod chunked;
pub mod dialog;
pub mod download;
pub mod edge;
pub mod encoding;
pub mod error;
pub mod labeling;
pub mod labels;
pub mod limits;
pub mod origin;
pub mod query;
pub mod rounds;
pub mod search;
pub mod sessions;
pub mod state;
pub mod upload;
pub mod views;

use std::time::Duration;

use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::routing::{delete, get, post, put};
use axum::Router;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;

/// A response from behind a [`RequestBodyLimitLayer`] (its 413 is mapped to the JSON one
/// naming the limit: [`error::named_body_limit`]).
type LimitedResponse = axum::http::Response<tower_http::limit::ResponseBody<Body>>;

use error::BodyLimit;
pub use state::{AppSettings, AppState, BuildError, SharedState};

/// Settings of the HTTP layer.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest accepted upload body, in bytes.
    pub max_upload_bytes: usize,
    /// How long a request may take before it is answered 408.
    pub request_timeout: Duration,
    /// How long a client may take to send a request's headers before the connection is
    /// closed.
    pub header_read_timeout: Duration,
    /// Origins allowed to call the API from a browser (none: same origin only).
    pub cors_origins: Vec<HeaderValue>,
    /// API keys, one of which every request but the probes must present (none: open).
    pub api_keys: auth::ApiKeys,
    /// Refuse every write: uploads, deletions, labels, rounds, imports, reservations.
    pub read_only: bool,
    /// The host names the server answers to (DNS rebinding).
    pub allowed_hosts: origin::AllowedHosts,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_upload_bytes: 1 << 30,
            request_timeout: Duration::from_secs(300),
            header_read_timeout: Duration::from_secs(30),
            cors_origins: Vec::new(),
            api_keys: auth::ApiKeys::default(),
            read_only: false,
            allowed_hosts: origin::AllowedHosts::default(),
        }
    }
}

/// The API's routes over `state`, and the 404 of any other path, behind the API key when
/// keys are configured; without the edge middleware, which wraps the whole application
/// ([`with_edge`]).
pub fn router(state: AppState) -> Router {
    let mut reads = read_routes(&state.config);
    if state.search.is_some() {
        reads = reads.route("/api/search", get(search::search));
    }
    let routes = reads
        .merge(write_routes(&state))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .with_state(state.clone());
    // Without keys configured the check would pass every request: it is left out, as it
    // costs every request a layer.
    if state.config.api_keys.is_empty() {
        routes
    } else {
        routes.layer(axum::middleware::from_fn_with_state(state, auth::require_api_key))
    }
}

/// The routes that change nothing stored: sessions and their views, labels, the codebook,
/// agreement, progress, exports, the probes, and `parse-for-dialog` (a body read, parsed
/// and answered, never stored; JSON only, up to the upload limit).
fn read_routes(config: &ApiConfig) -> Router<AppState> {
    let limit = config.max_upload_bytes;
    let parse_for_dialog = post(dialog::parse_for_dialog).layer((
        axum::middleware::from_fn(origin::require_json),
        DefaultBodyLimit::disable(),
        axum::middleware::map_response(move |r: LimitedResponse| async move {
            error::named_body_limit(r.map(Body::new), limit, Some(BodyLimit::MaxUploadBytes))
        }),
        RequestBodyLimitLayer::new(limit),
    ));
    Router::new()
        .route("/api/frameworks", get(sessions::frameworks))
        .route("/api/codebooks", get(labels::codebooks))
        .route("/api/codebook", get(labels::codebook))
        .route("/api/me", get(labels::me))
        .route("/api/sessions", get(sessions::list))
        .route("/api/graph/{id}", views::graph())
        .route("/api/graph/{id}/workflow", views::workflow())
        .route("/api/graph/{id}/annotations", views::annotations())
        .route("/api/graph/{id}/dialog", views::dialog())
        .route("/api/parse-for-dialog", parse_for_dialog)
        .route("/api/graph/{id}/chatlog", views::chatlog())
        .route("/api/graph/{id}/metrics", views::metrics())
        .route("/api/graph/{id}/diagnostics", views::diagnostics())
        .route("/api/graph/{id}/branches", views::branches())
        .route("/api/graph/{id}/context", get(views::context))
        .route("/api/graph/{id}/export", get(download::export))
        .route("/api/graph/{id}/info", get(sessions::info))
        .route("/api/graph/{id}/labels", get(labels::list_sets))
        .route("/api/graph/{id}/labels/{event_id}/history", get(labels::history))
        .route("/api/labels/agreement", get(labeling::agreement))
        .route("/api/labels/progress", get(labeling::progress))
        .route("/api/labels/export", get(labeling::export))
        .route("/api/rounds", get(rounds::list))
        .route("/api/rounds/{id}", get(rounds::get))
        .route("/api/rounds/{id}/units", get(rounds::units))
        .route("/api/rounds/{id}/agreement", get(rounds::agreement))
        .route("/healthz", get(sessions::healthz))
        .route("/readyz", get(sessions::readyz))
}

/// The routes that store or delete something, each refused in read-only mode: uploads (up
/// to the upload limit), label writes and imports (JSON and JSON lines only), the queue's
/// reservations, session deletions.
fn write_routes(state: &AppState) -> Router<AppState> {
    let read_only = axum::middleware::from_fn_with_state(state.clone(), auth::refuse_when_read_only);
    let json = axum::middleware::from_fn(origin::require_json);
    let limit = state.config.max_upload_bytes;
    let upload = post(upload::upload).layer((
        read_only.clone(),
        DefaultBodyLimit::disable(),
        axum::middleware::map_response(move |r: LimitedResponse| async move {
            error::named_body_limit(r.map(Body::new), limit, Some(BodyLimit::MaxUploadBytes))
        }),
        RequestBodyLimitLayer::new(limit),
    ));
    let label_writes = put(labels::put_set)
        .layer(json.clone())
        .delete(labels::delete_set)
        .layer(read_only.clone());
    let import = post(labeling::import).layer((
        read_only.clone(),
        axum::middleware::from_fn(origin::require_json_lines),
        DefaultBodyLimit::disable(),
        axum::middleware::map_response(|r: LimitedResponse| async move {
            error::named_body_limit(r.map(Body::new), labeling::MAX_IMPORT_BYTES, None)
        }),
        RequestBodyLimitLayer::new(labeling::MAX_IMPORT_BYTES),
    ));
    let queue_next = post(labeling::queue_next).layer((read_only.clone(), json.clone()));
    let queue_release = post(labeling::queue_release).layer((read_only.clone(), json.clone()));
    let create_round = post(rounds::create).layer((read_only.clone(), json));
    let close_round = post(rounds::close).layer(read_only.clone());
    let reopen_round = post(rounds::reopen).layer(read_only.clone());
    Router::new()
        .route("/api/upload", upload)
        .route("/api/graph/{id}/labels/{event_id}", label_writes)
        .route("/api/labels/import", import)
        .route("/api/labels/queue/next", queue_next)
        .route("/api/labels/queue/release", queue_release)
        .route("/api/rounds", create_round)
        .route("/api/rounds/{id}/close", close_round)
        .route("/api/rounds/{id}/reopen", reopen_round)
        .route("/api/session/{id}", delete(sessions::delete).layer(read_only))
}

/// The CORS layer allowing the configured origins; `None` without any: no browser may then
/// call across origins, and no layer is added at all.
fn cors_layer(config: &ApiConfig) -> Option<CorsLayer> {
    (!config.cors_origins.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(config.cors_origins.clone()))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                axum::http::header::CONTENT_TYPE,
                axum::http::header::IF_NONE_MATCH,
                axum::http::header::IF_MATCH,
                axum::http::header::AUTHORIZATION,
                axum::http::HeaderName::from_static("x-api-key"),
            ])
            .expose_headers([
                axum::http::header::ETAG,
                axum::http::header::RETRY_AFTER,
                views::LABELS_HEADER,
            ])
    })
}

/// `app`, every route of the application, wrapped in the middleware every response passes
/// through: the [`edge`] layer, CORS (the configured origins) and the origin check
/// ([`origin::check_origin`]).
///
/// Added with `Router::layer`, the edge wraps each route and the fallbacks (404, 405),
/// after routing: its span names the matched route.
pub fn with_edge(app: Router, state: AppState) -> Router {
    let edge = tower::ServiceBuilder::new()
        .layer(edge::EdgeLayer::new(state.config.request_timeout))
        .layer(tower::util::option_layer(cors_layer(&state.config)))
        .layer(axum::middleware::from_fn_with_state(state, origin::check_origin));
    app.layer(edge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::Codebooks;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// The application over a store without data directory and an in-memory label
    /// database.
    async fn app() -> Router {
        let state = AppState::build(AppSettings {
            store: Default::default(),
            api: ApiConfig::default(),
            codebooks: Codebooks::built_in().unwrap(),
            database_url: "sqlite::memory:".into(),
            upload_store: Default::default(),
            s3: Default::default(),
            label_policy: Default::default(),
            search: Default::default(),
        })
        .await
        .unwrap();
        crate::app(state)
    }

    async fn call(method: &str, uri: &str) -> (StatusCode, serde_json::Value, axum::http::HeaderMap) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap();
        let response = app().await.oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or_default(),
            headers,
        )
    }

    #[tokio::test]
    async fn every_error_is_a_json_body() {
        let (status, body, _) = call("GET", "/no/such/route").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"], "Not Found");
        assert_eq!(body["message"], "No route for GET /no/such/route");

        let (status, body, headers) = call("PUT", "/api/frameworks").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body["error"], "Method Not Allowed");
        assert_eq!(headers["allow"], "GET,HEAD");
    }

    /// GET `uri` accepting `accept_encoding`; the response's headers and its decoded body.
    async fn get_coded(uri: &str, accept_encoding: &str) -> (axum::http::HeaderMap, Vec<u8>) {
        let request = Request::builder()
            .uri(uri)
            .header("accept-encoding", accept_encoding)
            .body(Body::empty())
            .unwrap();
        let response = app().await.oneshot(request).await.unwrap();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let mut decoded = Vec::new();
        match headers.get("content-encoding").map(|v| v.to_str().unwrap()) {
            None => decoded.extend_from_slice(&bytes),
            Some("gzip") => {
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut decoded)
                    .unwrap();
            }
            Some("br") => {
                std::io::Read::read_to_end(&mut brotli::Decompressor::new(&bytes[..], 4096), &mut decoded)
                    .unwrap();
            }
            Some(other) => panic!("unexpected coding {other}"),
        }
        (headers, decoded)
    }

    #[tokio::test]
    async fn small_bodies_are_compressed_as_the_request_accepts() {
        let (plain_headers, plain) = get_coded("/api/codebook", "identity").await;
        assert!(
            plain.len() > 1024,
            "a body worth compressing: {} bytes",
            plain.len()
        );
        assert!(!plain_headers.contains_key("content-encoding"));
        assert_eq!(plain_headers["vary"], "accept-encoding");
        for (accepted, coding) in [
            ("gzip", "gzip"),
            ("br", "br"),
            ("gzip;q=0.5, br", "br"),
            ("br;q=0, gzip", "gzip"),
        ] {
            let (headers, body) = get_coded("/api/codebook", accepted).await;
            assert_eq!(headers["content-encoding"], coding, "{accepted}");
            assert_eq!(headers["vary"], "accept-encoding");
            assert_eq!(body, plain, "{accepted}: the same body once decoded");
        }
        // Too small to be worth it: sent as it is, whatever is accepted.
        let (headers, body) = get_coded("/healthz", "gzip").await;
        assert!(!headers.contains_key("content-encoding"));
        assert_eq!(body, br#"{"status":"ok"}"#);
    }

    #[tokio::test]
    async fn readiness_waits_for_the_store() {
        let (status, body, _) = call("GET", "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "starting");
        let (status, body, headers) = call("GET", "/healthz").await;
        assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("ok")));
        assert!(
            headers.contains_key("x-request-id"),
            "every response carries a request id"
        );
    }
}
