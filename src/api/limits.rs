//! Request heads larger than a service needs: a JSON 414 or 431, like every other error.
//!
//! hyper refuses heads beyond its own limits before any of our code runs, and answers them
//! with an empty body: a URI over 65,534 bytes (414), a head over its read buffer (about
//! 400 KiB) or with more than 100 headers (431). Below those, these tighter limits answer
//! in the contract's JSON shape.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use crate::http::error_body::error_response;

/// The length of `value` as written, counted without writing it anywhere (a request's URI
/// is measured on every request).
fn written_len(value: &impl std::fmt::Display) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting cannot fail, and `Uri`'s `Display` only fails when its writer does.
    let _ = std::fmt::write(&mut count, format_args!("{value}"));
    count.0
}

/// The longest request target accepted, in bytes: far beyond any route and query here.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// The largest header block accepted (names and values), in bytes.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The refusal of a request whose target or headers are over the limits above; `None`
/// for a request within them. Part of [`super::edge`].
pub fn refusal(request: &Request) -> Option<Response> {
    let uri = request.uri();
    // A request target in origin form (`/path?query`, all but proxies' requests) is its
    // path and query as received.
    let uri_bytes = match (uri.scheme(), uri.authority(), uri.path_and_query()) {
        (None, None, Some(origin_form)) => origin_form.as_str().len(),
        _ => written_len(uri),
    };
    if uri_bytes > MAX_URI_BYTES {
        return Some(error_response(
            StatusCode::URI_TOO_LONG,
            &format!("The request target is {uri_bytes} bytes long; at most {MAX_URI_BYTES} are accepted"),
            None,
        ));
    }
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Some(error_response(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &format!("The request headers are {header_bytes} bytes; at most {MAX_HEADER_BYTES} are accepted"),
            None,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    #[test]
    fn a_uri_is_measured_as_written() {
        for uri in ["/", "/api/graph/x/info?step=3", "http://example.com:8080/a?b=c"] {
            let parsed: axum::http::Uri = uri.parse().unwrap();
            assert_eq!(written_len(&parsed), parsed.to_string().len(), "{uri}");
        }
    }

    #[test]
    fn the_limit_holds_for_targets_in_origin_and_absolute_form() {
        let at_limit = format!("/{}", "a".repeat(MAX_URI_BYTES - 1));
        let over = format!("{at_limit}a");
        let absolute_over = format!("http://example.com{}", &over[18..]);
        assert_eq!(absolute_over.len(), over.len());
        for (target, refused) in [
            ("/", false),
            ("*", false),
            ("/api/graph/x/info?step=5&branch=active", false),
            (at_limit.as_str(), false),
            (over.as_str(), true),
            (absolute_over.as_str(), true),
        ] {
            let request = Request::builder().uri(target).body(Body::empty()).unwrap();
            assert_eq!(
                refusal(&request).map(|r| r.status()),
                refused.then_some(StatusCode::URI_TOO_LONG),
                "{}",
                &target[..target.len().min(40)]
            );
        }
    }
}
