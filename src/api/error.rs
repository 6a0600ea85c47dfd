//! The error body every route answers with: `{"error": <reason phrase>, "message": <text>,
//! "details"?: {...}}` (CONTRACT 1), with the reference's messages and status codes.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::core::pipeline::session::NoConversation;
use crate::core::SessionError;
use crate::http::error_body::{error_response, named_error_response};
use crate::labels::{Forbidden, Invalid, LabelError, Refusal, UnknownCodebook};
use crate::rounds::RoundError;
use crate::search::SearchError;
use crate::store::disk::DiskError;
use crate::store::pg_uploads::UploadDbError;
use crate::store::s3_bucket::BucketError;
use crate::store::StoreError;

/// An error answered to a client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `Bad Request`.
    #[error("{0}")]
    BadRequest(String),
    /// 400 `Parse Error`, with details (the line, the file).
    #[error("{message}")]
    Parse {
        /// What failed.
        message: String,
        /// Where.
        details: Value,
    },
    /// 400 `Bad Request` with details (`{"field": "labels[1].confidence"}`).
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
        /// Where.
        details: Value,
    },
    /// 412 `Precondition Failed`: `If-Match` does not hold; the details carry the current
    /// state, the `ETag` header its tag.
    #[error("{message}")]
    PreconditionFailed {
        /// What failed.
        message: String,
        /// The current state.
        details: Value,
        /// The current state's ETag (`None`: there is none).
        etag: Option<String>,
    },
    /// 401 `Unauthorized`: a key is missing or wrong.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `Forbidden`.
    #[error("{0}")]
    Forbidden(String),
    /// 404 `Not Found`.
    #[error("{0}")]
    NotFound(String),
    /// 409 `Conflict`: the resource is not in a state that allows the request (a closed
    /// round's queue).
    #[error("{0}")]
    Conflict(String),
    /// 413 `Payload Too Large`.
    #[error("{0}")]
    TooLarge(String),
    /// 413 `Payload Too Large`: a request body past a route's size limit; the message and
    /// the details name the limit and, when the operator can change it, the setting.
    #[error("{}", BodyLimit::message(*.limit, *.setting))]
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
        /// The limit's setting (a flag of `serve`), if it has one.
        setting: Option<BodyLimit>,
    },
    /// 415 `Unsupported Media Type`: a body sent with another `Content-Type` than the
    /// route's.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422 `Unprocessable Entity`: the session exists but cannot be served as it stands on
    /// disk (its main log is a symbolic link, a FIFO, ...). Logged too: the operator should
    /// look at the sessions directory.
    #[error("{0}")]
    Unprocessable(String),
    /// 500 with a message saying what failed, without any server path: a session's file
    /// could not be read. Logged too.
    #[error("{0}")]
    Unreadable(String),
    /// 507 `Insufficient Storage`: an upload or a label write could not be stored for lack
    /// of space; the cause is logged, the client hears a fixed message.
    #[error("insufficient storage: {cause}")]
    InsufficientStorage {
        /// What was not stored.
        what: Stored,
        /// The cause, for the log.
        cause: String,
    },
    /// 500: the cause is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
    /// 503 `Service Unavailable` with `Retry-After`: no room to render now.
    #[error("{message}")]
    Unavailable {
        /// What to tell the client.
        message: String,
        /// When to try again.
        retry_after: std::time::Duration,
    },
}

/// The setting behind a request body limit: only the upload limit has one; the import's is
/// fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLimit {
    /// `--max-upload-bytes` (`SESSIONGRAPH_MAX_UPLOAD_BYTES`): uploads and
    /// `parse-for-dialog`.
    MaxUploadBytes,
}

impl BodyLimit {
    /// The flag.
    fn flag(self) -> &'static str {
        match self {
            BodyLimit::MaxUploadBytes => "--max-upload-bytes",
        }
    }

    /// The environment variable.
    fn env(self) -> &'static str {
        match self {
            BodyLimit::MaxUploadBytes => "SESSIONGRAPH_MAX_UPLOAD_BYTES",
        }
    }

    /// The 413's message: the limit, and how to change it.
    fn message(limit: usize, setting: Option<BodyLimit>) -> String {
        let size = match human_size(limit) {
            exact if exact.ends_with(" bytes") => exact,
            rounded => format!("{rounded} ({limit} bytes)"),
        };
        match setting {
            Some(s) => format!(
                "The request body is larger than this server's limit of {size}, set by {} ({}); \
                 send a smaller body, or ask the operator to raise the limit",
                s.flag(),
                s.env()
            ),
            None => format!("The request body is larger than this route's limit of {size}"),
        }
    }

    /// The 413's details: `{"limit_bytes", "setting"?, "env"?}`.
    fn details(limit: usize, setting: Option<BodyLimit>) -> Value {
        let mut details = serde_json::json!({ "limit_bytes": limit });
        if let Some(s) = setting {
            details["setting"] = s.flag().into();
            details["env"] = s.env().into();
        }
        details
    }
}

/// `response` with a bare 413 (the body limit layer's, answered before the handler reads
/// a declared length past `limit`) made the JSON 413 naming the limit and its `setting`.
pub fn named_body_limit(response: Response, limit: usize, setting: Option<BodyLimit>) -> Response {
    let bare = response.status() == StatusCode::PAYLOAD_TOO_LARGE
        && !response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if bare {
        ApiError::BodyTooLarge { limit, setting }.into_response()
    } else {
        response
    }
}

/// `bytes` in the largest binary unit that divides it (`64 MiB`, `1 GiB`), else in bytes.
pub fn human_size(bytes: usize) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// What a write that found no space would have stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// An upload (the upload storage is full).
    Upload,
    /// Labels (the label database is full).
    Labels,
}

impl Stored {
    /// What a client hears when there is no space for it.
    fn full_message(self) -> &'static str {
        match self {
            Stored::Upload => {
                "The upload was not stored: the server's storage is full (no space left on its disk, \
                 or its quota is used up). Nothing of it was kept; try again once space has been freed."
            }
            Stored::Labels => {
                "The labels were not stored: the label database is full (no space left on its disk, \
                 or its quota is used up). Nothing of this write was kept; try again once space has been freed."
            }
        }
    }
}

/// The cause of a 500, kept in the response's extensions for [`super::edge`] to log inside
/// the request's span (logging in `into_response` would be a side effect outside it).
#[derive(Debug, Clone)]
pub struct InternalCause(pub Arc<String>);

impl ApiError {
    /// The status code.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::Parse { .. } | ApiError::Invalid { .. } => {
                StatusCode::BAD_REQUEST
            }
            ApiError::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge(_) | ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::InsufficientStorage { .. } => StatusCode::INSUFFICIENT_STORAGE,
            ApiError::Unreadable(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Maps a store error, naming the session as the route does (`Session with ID` or
    /// `Graph with ID`).
    pub fn from_store(e: StoreError, not_found: impl FnOnce(&str) -> String) -> ApiError {
        match e {
            StoreError::NotFound(id) => ApiError::NotFound(not_found(&id)),
            StoreError::ReadOnly(_) => ApiError::Forbidden(e.to_string()),
            StoreError::NoConversation(refused) => ApiError::BadRequest(
                NoConversation {
                    file: echo(&refused.file).into_owned(),
                    ..refused
                }
                .to_string(),
            ),
            StoreError::Session(SessionError::NoMainFile) => ApiError::BadRequest(
                "No main session file found (expected UUID format filename, not agent-*)".into(),
            ),
            StoreError::Session(SessionError::Compressed { file, kind }) => ApiError::BadRequest(
                SessionError::Compressed {
                    file: echo(&file).into_owned(),
                    kind,
                }
                .to_string(),
            ),
            StoreError::Session(SessionError::Autogen(e)) => ApiError::Parse {
                message: e.to_string(),
                details: match e.line() {
                    Some(line) => serde_json::json!({ "lineNumber": line }),
                    None => serde_json::json!({}),
                },
            },
            StoreError::Session(SessionError::InvalidLine { file, line, reason }) => {
                let file = echo(&file);
                ApiError::Parse {
                    message: format!("Invalid JSON in {file} on line {line}"),
                    details: serde_json::json!({ "lineNumber": line, "file": file, "reason": reason }),
                }
            }
            StoreError::Session(e @ SessionError::TooManyRecords { .. }) => {
                ApiError::Unprocessable(too_many_records(&e))
            }
            StoreError::SessionFile { id, source } => unreadable_session(&id, source),
            StoreError::StorageFull(e) => ApiError::InsufficientStorage {
                what: Stored::Upload,
                cause: e.to_string(),
            },
            StoreError::Busy { retry_after } => ApiError::Unavailable {
                message: format!(
                    "The server is rendering as much as its memory budget allows; retry in {} s",
                    retry_after.as_secs()
                ),
                retry_after,
            },
            StoreError::UploadDb(UploadDbError::Unavailable(cause)) => {
                tracing::warn!(%cause, "the upload database cannot serve now: answering 503");
                ApiError::Unavailable {
                    message: format!(
                        "{cause}. Nothing of this request was stored or deleted; retry in {} s.",
                        BUSY_RETRY_AFTER.as_secs()
                    ),
                    retry_after: BUSY_RETRY_AFTER,
                }
            }
            StoreError::UploadObjects(BucketError::Unavailable(cause)) => {
                tracing::warn!(%cause, "the upload bucket cannot serve now: answering 503");
                ApiError::Unavailable {
                    message: format!(
                        "The upload object store cannot be reached. Nothing of this request was \
                         stored or deleted; retry in {} s.",
                        BUSY_RETRY_AFTER.as_secs()
                    ),
                    retry_after: BUSY_RETRY_AFTER,
                }
            }
            StoreError::UploadDb(e @ UploadDbError::Full(_)) => ApiError::InsufficientStorage {
                what: Stored::Upload,
                cause: e.to_string(),
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    /// A store error as a session route answers it (`Session with ID ... not found`); the
    /// graph routes name the graph through [`ApiError::from_store`].
    fn from(e: StoreError) -> ApiError {
        ApiError::from_store(e, session_not_found)
    }
}

impl From<tokio::task::JoinError> for ApiError {
    /// Work handed to another task that panicked or was cancelled: a 500.
    fn from(e: tokio::task::JoinError) -> ApiError {
        ApiError::Internal(format!("a task of the request failed: {e}"))
    }
}

impl From<Invalid> for ApiError {
    /// 400 naming the field (`{"field": "labels[1].confidence"}`).
    fn from(i: Invalid) -> ApiError {
        ApiError::Invalid {
            message: i.to_string(),
            details: serde_json::json!({ "field": i.field }),
        }
    }
}

impl From<UnknownCodebook> for ApiError {
    /// 400 naming `codebook` and listing the server's codebooks.
    fn from(u: UnknownCodebook) -> ApiError {
        ApiError::Invalid {
            message: u.to_string(),
            details: serde_json::json!({ "field": "codebook", "known": u.known }),
        }
    }
}

impl From<RoundError> for ApiError {
    /// 404 for an unknown round, 409 for an imported one that differs from the stored one
    /// of its id; the label store's answers otherwise.
    fn from(e: RoundError) -> ApiError {
        match e {
            RoundError::NotFound(id) => ApiError::NotFound(format!("Round '{}' not found", echo(&id))),
            e @ RoundError::Different(_) => ApiError::Conflict(e.to_string()),
            RoundError::Labels(e) => e.into(),
        }
    }
}

impl From<Forbidden> for ApiError {
    /// 403 saying why.
    fn from(f: Forbidden) -> ApiError {
        ApiError::Forbidden(f.to_string())
    }
}

impl From<Refusal> for ApiError {
    /// A refused write: 400 naming the field, or 403.
    fn from(r: Refusal) -> ApiError {
        match r {
            Refusal::Invalid(i) => i.into(),
            Refusal::Forbidden(f) => f.into(),
        }
    }
}

impl From<SearchError> for ApiError {
    /// A query that does not parse is 400 naming `q`; any other failure a 500 (the cause
    /// is logged).
    fn from(e: SearchError) -> ApiError {
        match e {
            SearchError::Query(why) => ApiError::Invalid {
                message: format!("q: {why}"),
                details: serde_json::json!({ "field": "q" }),
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// When a client told that the label store or the upload database is busy or unreachable
/// should try again.
pub(super) const BUSY_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

impl From<LabelError> for ApiError {
    /// A label store error as the client hears it: 404, 412 with the current set (and its
    /// ETag), 503 with `Retry-After` when the store is busy or cannot be reached, 507 when
    /// it is full, or the generic 500 (the cause is logged).
    fn from(e: LabelError) -> ApiError {
        match e {
            LabelError::Busy(cause) | LabelError::Unreachable(cause) => {
                tracing::warn!(%cause, "the label database cannot serve now: answering 503");
                ApiError::Unavailable {
                    message: format!(
                        "{cause}. Nothing of this request was stored; retry in {} s.",
                        BUSY_RETRY_AFTER.as_secs()
                    ),
                    retry_after: BUSY_RETRY_AFTER,
                }
            }
            e @ LabelError::StorageFull(_) => ApiError::InsufficientStorage {
                what: Stored::Labels,
                cause: e.to_string(),
            },
            LabelError::NoSuchSet { event_id, annotator } => ApiError::NotFound(format!(
                "No label set of annotator '{}' on unit '{}'",
                echo(&annotator),
                echo(&event_id)
            )),
            LabelError::Conflict { current } => ApiError::PreconditionFailed {
                message: match &current {
                    Some(c) => format!(
                        "If-Match does not hold: the set is at {} (another write came first)",
                        c.etag()
                    ),
                    None => "If-Match does not hold: there is no set".to_owned(),
                },
                etag: current.as_ref().map(|c| c.etag()),
                details: serde_json::json!({ "current": current }),
            },
            LabelError::Exists { current } => ApiError::PreconditionFailed {
                message: format!(
                    "If-None-Match: * does not hold: a set exists, at {} (another write created it first)",
                    current.etag()
                ),
                etag: Some(current.etag()),
                details: serde_json::json!({ "current": current }),
            },
            other @ (LabelError::Database(_) | LabelError::Corrupt(_)) => {
                ApiError::Internal(other.to_string())
            }
        }
    }
}

/// An upload's store error: [`ApiError::from_store`], except that records too many for the
/// upload's size (the memory bound) make it 413, like an upload past the size limit.
pub fn upload_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Session(e @ SessionError::TooManyRecords { .. }) => {
            ApiError::TooLarge(too_many_records(&e))
        }
        other => ApiError::from_store(other, session_not_found),
    }
}

/// The message of [`SessionError::TooManyRecords`], with what the operator can change.
fn too_many_records(e: &SessionError) -> String {
    format!(
        "The session was not loaded: {e}. The server's memory bound is set with \
         --memory-per-input-byte and --memory-allowance."
    )
}

/// A session of a sessions directory whose file was refused or could not be read: the
/// message names the session and the file relative to its sessions directory. A refused
/// file (a link, not a regular file) is 422: that is how the session stands. A failed read
/// is 500: not the client's doing either.
fn unreadable_session(id: &str, error: DiskError) -> ApiError {
    let DiskError::Read(read) = error else {
        // Only command-line reads give the others; they name server paths.
        return ApiError::Internal(format!("session '{id}': {error}"));
    };
    let message = format!("Session '{id}' cannot be loaded from its sessions directory: {read}");
    if read.is_refusal() {
        ApiError::Unprocessable(message)
    } else {
        ApiError::Unreadable(message)
    }
}

pub use crate::core::json::utf16::{echo, ECHO_LIMIT};

/// A session-route not-found message.
pub fn session_not_found(id: &str) -> String {
    format!("Session with ID '{}' not found", echo(id))
}

/// A graph-route not-found message.
pub fn graph_not_found(id: &str) -> String {
    format!("Graph with ID '{}' not found", echo(id))
}

/// A 503 `Service Unavailable` with `Retry-After` (whole seconds, at least 1) and, for
/// an answer that must say what was done before it (an import cut part way), `details`.
pub fn unavailable_response(
    message: &str,
    retry_after: std::time::Duration,
    details: Option<&Value>,
) -> Response {
    let mut response = error_response(StatusCode::SERVICE_UNAVAILABLE, message, details);
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after.as_secs().max(1)),
    );
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        // What the client reads, and what the log gets for failures on the server's side.
        let (message, logged) = match self {
            ApiError::Parse { message, details } => {
                return named_error_response(status, "Parse Error", &message, Some(&details));
            }
            ApiError::Unavailable { message, retry_after } => {
                return unavailable_response(&message, retry_after, None);
            }
            ApiError::Invalid { message, details } => {
                return error_response(status, &message, Some(&details));
            }
            ApiError::BodyTooLarge { limit, setting } => {
                let message = BodyLimit::message(limit, setting);
                return error_response(status, &message, Some(&BodyLimit::details(limit, setting)));
            }
            ApiError::PreconditionFailed {
                message,
                details,
                etag,
            } => {
                let mut response = error_response(status, &message, Some(&details));
                if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
                    response.headers_mut().insert(header::ETAG, etag);
                }
                return response;
            }
            ApiError::Internal(cause) => (
                "An internal error occurred; the server log has the details".to_owned(),
                Some(cause),
            ),
            ApiError::InsufficientStorage { what, cause } => (
                what.full_message().to_owned(),
                Some(format!("storage is full: {cause}")),
            ),
            ApiError::Unprocessable(message) | ApiError::Unreadable(message) => {
                (message.clone(), Some(message))
            }
            other => (other.to_string(), None),
        };
        let mut response = error_response(status, &message, None);
        if let Some(cause) = logged {
            response.extensions_mut().insert(InternalCause(Arc::new(cause)));
        }
        response
    }
}

/// `response` to a `method` request for `uri`, with an error as the JSON error body (the
/// 404 of an unknown route, the 405 of a wrong method, the 408 of the timeout and the 413
/// of the body limit included). Part of [`super::edge`].
pub fn as_json_error(method: &Method, uri: &Uri, mut response: Response) -> Response {
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        // The rest of the body is never read, so the connection cannot carry another
        // request: say so, or a client may send its next request on it and lose it.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let message = match status {
        StatusCode::NOT_FOUND => format!("No route for {} {}", echo(method.as_str()), echo(uri.path())),
        StatusCode::METHOD_NOT_ALLOWED => {
            format!(
                "Method {} is not allowed on {}",
                echo(method.as_str()),
                echo(uri.path())
            )
        }
        StatusCode::REQUEST_TIMEOUT => "The request took too long".to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => "The request body is larger than the configured maximum".to_owned(),
        StatusCode::INTERNAL_SERVER_ERROR => {
            "An internal error occurred; the server log has the details".to_owned()
        }
        other => other.canonical_reason().unwrap_or("Error").to_owned(),
    };
    let mut out = error_response(status, &message, None);
    // Keep headers such as `allow` on a 405.
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// The body of a panic caught by [`super::edge`]: the generic 500, nothing of the panic.
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    tracing::error!("a request handler panicked");
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "An internal error occurred; the server log has the details",
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(e: StoreError) -> StatusCode {
        ApiError::from_store(e, session_not_found).status()
    }

    #[test]
    fn echoed_values_are_cut_at_200_characters() {
        assert_eq!(echo("short"), "short");
        let exactly = "é".repeat(ECHO_LIMIT);
        assert_eq!(echo(&exactly), exactly);
        let long = format!("{exactly}and more");
        assert_eq!(echo(&long), format!("{exactly}…"));
        assert_eq!(
            session_not_found(&"x".repeat(50_000)),
            format!("Session with ID '{}…' not found", "x".repeat(ECHO_LIMIT))
        );
    }

    #[test]
    fn a_full_disk_is_507_and_other_storage_failures_500() {
        for full in [
            std::io::Error::from_raw_os_error(28),
            std::io::Error::from_raw_os_error(rustix::io::Errno::DQUOT.raw_os_error()),
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        ] {
            assert_eq!(status_of(full.into()), StatusCode::INSUFFICIENT_STORAGE);
        }
        assert_eq!(
            status_of(std::io::Error::from_raw_os_error(5).into()),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let response = ApiError::from_store(std::io::Error::from_raw_os_error(28).into(), session_not_found)
            .into_response();
        assert_eq!(response.status(), StatusCode::INSUFFICIENT_STORAGE);
        let cause = response
            .extensions()
            .get::<InternalCause>()
            .map(|c| c.0.to_string());
        assert!(cause.is_some_and(|c| c.contains("No space left on device")));
    }
}
