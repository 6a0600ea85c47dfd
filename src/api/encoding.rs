//! Content negotiation for view bodies: which coding of a body a request gets.
//!
//! View routes choose the coding themselves and send kept compressed variants
//! ([`crate::store::bodies`]); the compression layer only handles small bodies of the other
//! routes, inline, which is cheap ([`CompressSmallUnencoded`]).

use axum::http::{header, HeaderMap, Response};
use tower_http::compression::predicate::Predicate;

use crate::store::compress::Encoding;

/// Marks a response whose coding its route chose: the compression layer leaves it alone.
#[derive(Debug, Clone, Copy)]
pub struct Negotiated;

/// Largest body the compression layer compresses (inline, on an async worker: a few
/// milliseconds at most). Larger bodies of routes other than the views are sent as they
/// are.
pub const INLINE_COMPRESSION_MAX_BYTES: u64 = 64 * 1024;

/// The compression layer's rule: bodies of known size up to
/// [`INLINE_COMPRESSION_MAX_BYTES`], not [`Negotiated`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CompressSmallUnencoded;

impl Predicate for CompressSmallUnencoded {
    fn should_compress<B: http_body::Body>(&self, response: &Response<B>) -> bool {
        response.extensions().get::<Negotiated>().is_none()
            && response
                .body()
                .size_hint()
                .exact()
                .is_some_and(|n| n <= INLINE_COMPRESSION_MAX_BYTES)
    }
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
            let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .or_else(|| p.trim().strip_prefix("Q="))
                })
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            match name.as_str() {
                "br" => named[0] = Some(q),
                "gzip" | "x-gzip" => named[1] = Some(q),
                "*" => any = Some(q),
                _ => {}
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
