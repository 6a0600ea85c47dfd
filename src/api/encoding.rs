//! Content negotiation: which coding of a body a request gets.
//!
//! View routes choose the coding themselves and send kept compressed variants
//! ([`crate::store::bodies`]); [`compress_small_body`] handles the small bodies of the
//! other routes, inline, which is cheap.

use axum::http::{header, HeaderMap, HeaderValue, Response};
use http_body::Body as _;
use http_body_util::BodyExt;

use super::chunked::http_body;
use super::error::ApiError;
use crate::core::views::Body;
use crate::store::compress::{compress, Effort, Encoding, MIN_COMPRESSED_BYTES};

/// Marks a response whose coding its route chose: [`compress_small_body`] leaves it alone.
#[derive(Debug, Clone, Copy)]
pub struct Negotiated;

/// Largest body [`compress_small_body`] compresses (inline, on an async worker: a
/// millisecond at most). Larger bodies of routes other than the views are sent as they
/// are.
pub const INLINE_COMPRESSION_MAX_BYTES: u64 = 64 * 1024;

/// Compresses the response's body in `encoding`, the coding the request accepts best
/// ([`negotiate`]), when it is worth it: a body of known size from [`MIN_COMPRESSED_BYTES`] (as view bodies) to
/// [`INLINE_COMPRESSION_MAX_BYTES`], not coded yet,
/// not [`Negotiated`], not an image (but SVG) or an event stream. Such a response says
/// `Vary: Accept-Encoding` whether it is compressed or not.
///
/// In place of tower-http's compression layer, whose response body (5.8 KB, every
/// encoder's state inline) was moved and boxed for every response: a quarter of the cost
/// of serving a 255-byte `info` body. Part of [`super::edge`].
pub async fn compress_small_body(
    encoding: Encoding,
    response: axum::response::Response,
) -> axum::response::Response {
    if !is_compressible(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    if !parts
        .headers
        .get_all(header::VARY)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"accept-encoding"))
    {
        parts
            .headers
            .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    let Some(token) = encoding.token() else {
        return Response::from_parts(parts, body);
    };
    let plain = match body.collect().await {
        Ok(collected) => Body::from(collected.to_bytes()),
        Err(e) => {
            return axum::response::IntoResponse::into_response(ApiError::Internal(format!(
                "reading a response body: {e}"
            )))
        }
    };
    match compress(&plain, encoding, Effort::OneOff) {
        Ok(compressed) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::ACCEPT_RANGES);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static(token));
            Response::from_parts(parts, http_body(compressed))
        }
        Err(e) => {
            tracing::warn!(error = %e, ?encoding, "compression failed; sending the body as it is");
            Response::from_parts(parts, http_body(plain))
        }
    }
}

/// Whether [`compress_small_body`] may code `response`.
fn is_compressible(response: &axum::response::Response) -> bool {
    let headers = response.headers();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media_excluded = (content_type.starts_with("image/") && !content_type.starts_with("image/svg+xml"))
        || content_type.starts_with("text/event-stream")
        || content_type.starts_with("application/grpc");
    response.extensions().get::<Negotiated>().is_none()
        && !headers.contains_key(header::CONTENT_ENCODING)
        && !headers.contains_key(header::CONTENT_RANGE)
        && !media_excluded
        && response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|n| (MIN_COMPRESSED_BYTES as u64..=INLINE_COMPRESSION_MAX_BYTES).contains(&n))
}

/// The coding a request accepts best (RFC 9110 12.5.3): the highest `q` among `br` and
/// `gzip` (`*` stands for those not named; `x-gzip` is `gzip`), `br` on a tie; identity
/// when neither is acceptable.
pub fn negotiate(headers: &HeaderMap) -> Encoding {
    let mut named = [None::<f32>; 2];
    let mut any = None::<f32>;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for coding in value.split(',') {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .or_else(|| p.trim().strip_prefix("Q="))
                })
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            let is = |token: &str| name.eq_ignore_ascii_case(token);
            if is("br") {
                named[0] = Some(q);
            } else if is("gzip") || is("x-gzip") {
                named[1] = Some(q);
            } else if name == "*" {
                any = Some(q);
            }
        }
    }
    let q = |i: usize| named[i].or(any).unwrap_or(0.0);
    let (br, gzip) = (q(0), q(1));
    if br > 0.0 && br >= gzip {
        Encoding::Brotli
    } else if gzip > 0.0 {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(accept: &[&str]) -> Encoding {
        let mut headers = HeaderMap::new();
        for a in accept {
            headers.append(header::ACCEPT_ENCODING, a.parse().unwrap());
        }
        negotiate(&headers)
    }

    #[test]
    fn the_best_accepted_coding_wins_and_br_breaks_ties() {
        assert_eq!(with(&[]), Encoding::Identity);
        assert_eq!(with(&["gzip"]), Encoding::Gzip);
        assert_eq!(with(&["br"]), Encoding::Brotli);
        assert_eq!(with(&["gzip, deflate, br"]), Encoding::Brotli);
        assert_eq!(with(&["GZIP"]), Encoding::Gzip);
        assert_eq!(with(&["x-gzip"]), Encoding::Gzip);
        assert_eq!(with(&["br;q=0.5, gzip;q=0.8"]), Encoding::Gzip);
        assert_eq!(with(&["br;q=0, gzip"]), Encoding::Gzip);
        assert_eq!(with(&["gzip;q=0"]), Encoding::Identity);
        assert_eq!(with(&["identity"]), Encoding::Identity);
        assert_eq!(with(&["deflate"]), Encoding::Identity);
        assert_eq!(with(&["*"]), Encoding::Brotli);
        assert_eq!(with(&["gzip, *;q=0"]), Encoding::Gzip);
        assert_eq!(with(&["gzip;q=0.2", "br;q=0.1"]), Encoding::Gzip);
        assert_eq!(with(&["gzip; q=nonsense"]), Encoding::Gzip);
    }
}
