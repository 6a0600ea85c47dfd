//! Request heads larger than a service needs: a JSON 414 or 431, like every other error.
//!
//! hyper refuses heads beyond its own limits before any of our code runs, and answers them
//! with an empty body: a URI over 65,534 bytes (414), a head over its read buffer (about
//! 400 KiB) or with more than 100 headers (431). Below those, these tighter limits answer
//! in the contract's JSON shape.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use super::error::error_response;

/// The longest request target accepted, in bytes: far beyond any route and query here.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// The largest header block accepted (names and values), in bytes.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Middleware: refuses a request whose target or headers are over the limits above.
pub async fn refuse_oversized_heads(request: Request, next: Next) -> Response {
    let uri_bytes = request.uri().to_string().len();
    if uri_bytes > MAX_URI_BYTES {
        return error_response(
            StatusCode::URI_TOO_LONG,
            &format!("The request target is {uri_bytes} bytes long; at most {MAX_URI_BYTES} are accepted"),
            None,
        );
    }
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return error_response(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &format!("The request headers are {header_bytes} bytes; at most {MAX_HEADER_BYTES} are accepted"),
            None,
        );
    }
    next.run(request).await
}
