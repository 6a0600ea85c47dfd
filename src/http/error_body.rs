//! The JSON error body every route answers with: `{"error": <reason phrase>, "message":
//! <text>, "details"?: {...}}` (CONTRACT 1).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

/// The error body's fields.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Value>,
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
pub fn named_error_response(
    status: StatusCode,
    error: &str,
    message: &str,
    details: Option<&Value>,
) -> Response {
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
