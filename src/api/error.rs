//! The error body every route answers with: `{"error": <reason phrase>, "message": <text>,
//! "details"?: {...}}` (CONTRACT 1), with the reference's messages and status codes.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use crate::core::SessionError;
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
    /// 401 `Unauthorized`: a key is missing or wrong.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `Forbidden`.
    #[error("{0}")]
    Forbidden(String),
    /// 404 `Not Found`.
    #[error("{0}")]
    NotFound(String),
    /// 413 `Payload Too Large`.
    #[error("{0}")]
    TooLarge(String),
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

/// The cause of a 500, kept in the response's extensions for [`json_errors`] to log inside
/// the request's span (logging in `into_response` would be a side effect outside it).
#[derive(Debug, Clone)]
pub struct InternalCause(pub Arc<String>);

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Value>,
}

impl ApiError {
    /// The status code.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::Parse { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Maps a store error, naming the session as the route does (`Session with ID` or
    /// `Graph with ID`).
    pub fn from_store(e: StoreError, not_found: impl FnOnce(&str) -> String) -> ApiError {
        match e {
            StoreError::NotFound(id) => ApiError::NotFound(not_found(&id)),
            StoreError::ReadOnly(_) => ApiError::Forbidden(e.to_string()),
            StoreError::NoConversation {
                file,
                unreadable: 0,
                ..
            } => ApiError::BadRequest(format!(
                "No conversational records found in {file} (it holds only snapshots, summaries or blank lines)"
            )),
            StoreError::NoConversation {
                file,
                unreadable,
                first,
            } => {
                let first = first.map_or_else(String::new, |f| format!(": line {}: {}", f.line, f.reason));
                ApiError::BadRequest(format!(
                    "No conversational records found in {file}: {unreadable} line(s) could not be read{first}"
                ))
            }
            StoreError::Session(SessionError::NoMainFile) => {
                ApiError::BadRequest("No main session file found (expected UUID format filename, not agent-*)".into())
            }
            StoreError::Session(e @ SessionError::Compressed { .. }) => ApiError::BadRequest(e.to_string()),
            StoreError::Session(SessionError::InvalidLine { file, line, reason }) => ApiError::Parse {
                message: format!("Invalid JSON in {file} on line {line}"),
                details: serde_json::json!({ "lineNumber": line, "file": file, "reason": reason }),
            },
            StoreError::Busy { retry_after } => ApiError::Unavailable {
                message: format!(
                    "The server is rendering as much as its memory budget allows; retry in {} s",
                    retry_after.as_secs()
                ),
                retry_after,
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// A session-route not-found message.
pub fn session_not_found(id: &str) -> String {
    format!("Session with ID '{id}' not found")
}

/// A graph-route not-found message.
pub fn graph_not_found(id: &str) -> String {
    format!("Graph with ID '{id}' not found")
}

/// The JSON error response for `status` and `message`; `error` is the status's reason
/// phrase.
pub fn error_response(status: StatusCode, message: &str, details: Option<&Value>) -> Response {
    named_error_response(
        status,
        status.canonical_reason().unwrap_or("Error"),
        message,
        details,
    )
}

/// The JSON error response with an explicit `error` name (`Parse Error`).
fn named_error_response(status: StatusCode, error: &str, message: &str, details: Option<&Value>) -> Response {
    let body = ErrorBody {
        error,
        message,
        details,
    };
    let json = serde_json::to_vec(&body).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        json,
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            ApiError::Internal(cause) => {
                let mut r = error_response(
                    status,
                    "An internal error occurred; the server log has the details",
                    None,
                );
                r.extensions_mut().insert(InternalCause(Arc::new(cause.clone())));
                r
            }
            ApiError::Parse { message, details } => {
                named_error_response(status, "Parse Error", message, Some(details))
            }
            ApiError::Unavailable { message, retry_after } => {
                let mut r = error_response(status, message, None);
                r.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after.as_secs().max(1)),
                );
                r
            }
            other => error_response(status, &other.to_string(), None),
        }
    }
}

/// Middleware: every error leaves as the JSON error body (the 404 of an unknown route, the
/// 405 of a wrong method, the 408 of the timeout and the 413 of the body limit included),
/// and the cause of a 500 is logged inside the request's span.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if let Some(InternalCause(cause)) = response.extensions().get::<InternalCause>() {
        tracing::error!(%cause, "request failed");
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
        StatusCode::NOT_FOUND => format!("No route for {method} {path}"),
        StatusCode::METHOD_NOT_ALLOWED => format!("Method {method} is not allowed on {path}"),
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

/// The body of a panic caught by `CatchPanicLayer`: the generic 500, nothing of the panic.
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    tracing::error!("a request handler panicked");
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "An internal error occurred; the server log has the details",
        None,
    )
}
