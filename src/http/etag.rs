//! Conditional requests: `If-None-Match` against a body's ETag.

use axum::http::{header, HeaderMap};

/// True when the request's `If-None-Match` names `etag` (weakly compared: `W/"x"` matches
/// `"x"`) or is `*`: the client's copy is current and a 304 answers it.
pub fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == etag
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn matches_any_listed_tag_weak_or_strong() {
        let mut headers = HeaderMap::new();
        assert!(!none_match(&headers, "\"a\""));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"x\", W/\"a\""));
        assert!(none_match(&headers, "\"a\""));
        assert!(!none_match(&headers, "\"b\""));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(none_match(&headers, "\"b\""));
    }
}
