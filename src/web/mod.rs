//! The labeling page: the files of `web/`, embedded in the binary, served at `/`
//! and at the page's own URLs without an API key (the page asks for one and sends it on
//! its API calls, which stay under `/api`).
//!
//! Every page URL answers the same HTML shell; `main.js` reads the path and draws the view.
//! The shell says whether the server wants an API key (its `sg-api-key` meta tag reads
//! `open` or `required`), so that the page asks for the key before calling the API rather
//! than after a 401.
//! Every response carries a strict Content-Security-Policy of its own (scripts, styles and
//! connections to this origin only, no inline code) and a strong ETag (a digest of the
//! bytes; `If-None-Match` gives 304). An unknown asset path is a JSON 404.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

use crate::core::json::utf16::echo;
use crate::http::error_body::error_response;
use crate::http::etag::none_match;

/// The page's Content-Security-Policy: only this origin's scripts, styles and API, images
/// from this origin or `data:`, no framing, no forms, no `<base>`.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: its path under `/assets/` and content type.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

/// A file of `web/` with its content type.
macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!("../../web/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// The position of the HTML shell, `index.html`, in [`ASSETS`].
const SHELL: usize = 0;

/// Every file the page is made of; the HTML shell first.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("boot.js", JS),
    asset!("main.js", JS),
    asset!("api.js", JS),
    asset!("auth.js", JS),
    asset!("dom.js", JS),
    asset!("unit.js", JS),
    asset!("codebook.js", JS),
    asset!("nav.js", JS),
    asset!("label.js", JS),
    asset!("labelactions.js", JS),
    asset!("labelstate.js", JS),
    asset!("drafts.js", JS),
    asset!("help.js", JS),
    asset!("sessions.js", JS),
    asset!("review.js", JS),
    asset!("agreement.js", JS),
    asset!("rounds.js", JS),
    asset!("search.js", JS),
    asset!("chart.js", JS),
];

/// The embedded files' paths under `/assets/`, for tests and listings.
pub fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.name)
}

/// Each asset's strong ETag, computed once.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| ASSETS.iter().map(|a| etag_of(a.bytes)).collect());

/// The strong ETag of `bytes`: a digest of them.
fn etag_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    format!("\"web-{}\"", hex::encode(&digest[..12]))
}

/// The shell's meta tag saying that no API key is needed, as `index.html` holds it.
const KEY_OPEN: &str = r#"<meta name="sg-api-key" content="open">"#;

/// The shell of a server that wants an API key: `index.html` with [`KEY_OPEN`] saying
/// `required`, and its ETag.
static SHELL_WITH_KEY: LazyLock<(Vec<u8>, String)> = LazyLock::new(|| {
    let html = String::from_utf8_lossy(ASSETS[SHELL].bytes).replacen(
        KEY_OPEN,
        r#"<meta name="sg-api-key" content="required">"#,
        1,
    );
    let etag = etag_of(html.as_bytes());
    (html.into_bytes(), etag)
});

/// The page's routes: the shell at `/`, `/sessions`, `/label/{session_id}/{event_id}`,
/// `/label/{session_id}`, `/label`, `/review/{session_id}`, `/agreement`, `/rounds` (and a
/// round's `/label`, `/review` and `/agreement`), and the files at
/// `/assets/{name}`. None wants an API key; `key_required` says whether the API does (the
/// shell tells the page).
pub fn router<S: Clone + Send + Sync + 'static>(key_required: bool) -> Router<S> {
    let shell = move |headers: HeaderMap| async move { shell(key_required, &headers) };
    Router::new()
        .route("/", get(shell))
        .route("/sessions", get(shell))
        .route("/label", get(shell))
        .route("/label/{session_id}", get(shell))
        .route("/label/{session_id}/{event_id}", get(shell))
        .route("/review/{session_id}", get(shell))
        .route("/agreement", get(shell))
        .route("/rounds", get(shell))
        .route("/rounds/{round_id}/label", get(shell))
        .route("/rounds/{round_id}/agreement", get(shell))
        .route("/rounds/{round_id}/review", get(shell))
        .route("/assets/{*name}", get(asset))
}

/// The HTML shell, for every page URL (saying whether the API wants a key).
fn shell(key_required: bool, headers: &HeaderMap) -> Response {
    if key_required {
        let (bytes, etag) = &*SHELL_WITH_KEY;
        respond(&ASSETS[SHELL], bytes, etag, headers)
    } else {
        serve(SHELL, headers)
    }
}

/// `GET /assets/{name}`: an embedded file, or a JSON 404.
async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|a| a.name == name) {
        Some(i) => serve(i, &headers),
        None => error_response(
            StatusCode::NOT_FOUND,
            &format!("No asset '{}'", echo(&name)),
            None,
        ),
    }
}

/// Asset `i` (or 304 when the client's copy is current), with its ETag and the CSP.
fn serve(i: usize, headers: &HeaderMap) -> Response {
    respond(&ASSETS[i], ASSETS[i].bytes, &ETAGS[i], headers)
}

/// `bytes` as `asset` (its content type), with `etag` and the CSP; 304 when the client's
/// copy is current.
fn respond(asset: &Asset, bytes: &'static [u8], etag: &str, headers: &HeaderMap) -> Response {
    let common = [
        (header::ETAG, HeaderValue::from_str(etag).ok()),
        (header::CACHE_CONTROL, Some(HeaderValue::from_static("no-cache"))),
        (
            header::CONTENT_SECURITY_POLICY,
            Some(HeaderValue::from_static(CSP)),
        ),
    ];
    let mut response = if none_match(headers, etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type))],
            bytes,
        )
            .into_response()
    };
    for (name, value) in common {
        if let Some(value) = value {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_distinct_name_and_etag() {
        let mut names: Vec<&str> = asset_names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ASSETS.len());
        assert!(ETAGS.iter().all(|e| e.starts_with("\"web-") && e.len() == 30));
        assert_eq!(ASSETS[SHELL].name, "index.html");
    }

    #[test]
    fn the_shell_of_a_server_wanting_a_key_says_so() {
        let html = String::from_utf8_lossy(ASSETS[SHELL].bytes);
        assert_eq!(html.matches(KEY_OPEN).count(), 1, "index.html holds the tag once");
        let (with_key, etag) = &*SHELL_WITH_KEY;
        let with_key = String::from_utf8_lossy(with_key);
        assert!(with_key.contains(r#"<meta name="sg-api-key" content="required">"#));
        assert!(!with_key.contains(KEY_OPEN));
        assert_ne!(etag, &ETAGS[SHELL], "two shells, two ETags");
    }
}
