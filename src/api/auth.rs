//! Access control for a shared deployment: optional API keys and a read-only mode.
//!
//! A key may be named: an entry `NAME:KEY`, where NAME is a valid annotator name (ASCII
//! letters, digits, `.`, `_`, `-`, `@`), makes NAME the annotator of every request that
//! presents KEY (see [`Identity`]): label writes for another annotator are then refused
//! (403) unless NAME is a reviewer, and blind mode shows NAME's view. An entry without a
//! colon, or whose part before the first colon is not a valid name, is an unnamed key.
//!
//! With keys configured, every route but `/healthz` and `/readyz` (probes), CORS
//! preflights and the labeling page's files ([`crate::web`]: the page asks for a key and
//! sends it on its API calls) wants one, as `Authorization: Bearer <key>` or
//! `X-API-Key: <key>`. Keys are compared in constant time: each presented key is hashed and its digest compared with
//! every allowed key's digest without stopping early, so neither the timing of a refusal
//! nor its length tells anything about the keys.

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::AppState;
use crate::labels::validate::check_annotator;

/// The allowed API keys, kept as SHA-256 digests, with their names. Empty: no key is
/// needed.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
    names: Vec<Option<String>>,
    /// The distinct names, sorted.
    named: Vec<String>,
}

/// The annotator a request is made as: the name of the API key it presents (inserted into
/// the request's extensions by [`require_api_key`]; absent for an unnamed key or an open
/// API).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity(pub String);

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the keys, nor their digests.
        write!(f, "ApiKeys({} configured)", self.digests.len())
    }
}

impl ApiKeys {
    /// The keys `keys`, each `KEY` or `NAME:KEY` (blank entries are ignored).
    pub fn new<S: AsRef<str>>(keys: impl IntoIterator<Item = S>) -> ApiKeys {
        let mut all = ApiKeys::default();
        for entry in keys {
            let entry = entry.as_ref().trim();
            let (name, key) = match entry.split_once(':') {
                Some((name, key)) if check_annotator("key", name).is_ok() && !key.trim().is_empty() => {
                    (Some(name.to_owned()), key.trim())
                }
                _ => (None, entry),
            };
            if key.is_empty() {
                continue;
            }
            all.digests.push(Sha256::digest(key.as_bytes()).into());
            all.names.push(name);
        }
        all.named = all.names.iter().flatten().cloned().collect();
        all.named.sort_unstable();
        all.named.dedup();
        all
    }

    /// The annotators of the named keys, sorted, each once (empty: no key is named).
    pub fn named(&self) -> &[String] {
        &self.named
    }

    /// Number of keys configured.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// True when no key is configured (the API is open).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// True when `presented` is one of the keys.
    pub fn allows(&self, presented: &str) -> bool {
        self.identify(presented).is_some()
    }

    /// `Some(name)` when `presented` is one of the keys (`name`: the key's, if it has one),
    /// `None` otherwise. Takes the same time whichever key matches, or none: every digest is
    /// compared, and the match's position is selected without branching.
    pub fn identify(&self, presented: &str) -> Option<Option<&str>> {
        use subtle::{ConditionallySelectable, ConstantTimeEq};
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = subtle::Choice::from(0);
        let mut position = 0u32;
        for (i, allowed) in self.digests.iter().enumerate() {
            let this = allowed.ct_eq(&digest);
            position.conditional_assign(&(i as u32), this);
            found |= this;
        }
        bool::from(found).then(|| self.names[position as usize].as_deref())
    }
}

/// The key a request presents: `Authorization: Bearer <key>`, else `X-API-Key`.
fn presented_key(request: &Request) -> Option<&str> {
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

/// The token of an `Authorization` value of the Bearer scheme. Scheme names are
/// case-insensitive (RFC 7235, section 2.1): `Bearer`, `bearer` and `BEARER` are the same;
/// one or more spaces separate the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim_start())
}

/// Middleware: refuses requests without a valid key when keys are configured.
pub async fn require_api_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let keys = &state.config.api_keys;
    let open = keys.is_empty()
        || request.method() == Method::OPTIONS
        || matches!(request.uri().path(), "/healthz" | "/readyz");
    if open {
        return next.run(request).await;
    }
    let refusal = match presented_key(&request).map(|key| keys.identify(key)) {
        Some(Some(name)) => {
            let identity = name.map(|n| Identity(n.to_owned()));
            let mut request = request;
            if let Some(identity) = identity {
                request.extensions_mut().insert(identity);
            }
            return next.run(request).await;
        }
        Some(None) => unauthorized("The API key is not valid"),
        None => unauthorized("An API key is required: send Authorization: Bearer <key> or X-API-Key"),
    };
    refuse(request, refusal).await
}

/// How much of a refused request's body is read and dropped before answering, and for
/// how long at most.
const DISCARDED_BODY_BYTES: usize = 8 << 20;
const DISCARD_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and drops a refused request's body, up to [`DISCARDED_BODY_BYTES`] and
/// [`DISCARD_FOR`], then answers with `refusal`. A client still sending when the answer
/// comes would see the connection reset instead of the answer; a body that is larger, or
/// slower (a client declaring a length it never sends), is not waited for: the answer
/// then closes the connection, so that refused clients cannot hold connections open.
pub(super) async fn refuse(request: Request, mut refusal: Response) -> Response {
    use http_body_util::BodyExt;
    let mut body = request.into_body();
    let drained = tokio::time::timeout(DISCARD_FOR, async {
        let mut read = 0usize;
        while read < DISCARDED_BODY_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
                Some(Err(_)) => return false,
                None => return true,
            }
        }
        false
    })
    .await;
    if drained != Ok(true) {
        refusal
            .headers_mut()
            .insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    refusal
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::Unauthorized(message.to_owned()).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"sessiongraph\""),
    );
    response
}

/// Middleware for the routes that change what is stored (upload, delete, label writes): refused in
/// read-only mode before anything is read.
pub async fn refuse_when_read_only(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.config.read_only {
        let refusal = ApiError::Forbidden(
            "This server is read-only: uploads, deletions and label writes are disabled".into(),
        )
        .into_response();
        return refuse(request, refusal).await;
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_matched_exactly() {
        let keys = ApiKeys::new(["alpha-key", " beta-key ", ""]);
        assert!(!keys.is_empty());
        assert!(keys.allows("alpha-key"));
        assert!(keys.allows("beta-key"));
        assert!(!keys.allows("alpha-ke"));
        assert!(!keys.allows("alpha-key2"));
        assert!(!keys.allows(""));
    }

    #[test]
    fn a_named_key_names_its_annotator() {
        let keys = ApiKeys::new(["alice:k-alice", "bob:k-bob", "plain", "not a name:k-x"]);
        assert_eq!(keys.identify("k-alice"), Some(Some("alice")));
        assert_eq!(keys.identify("k-bob"), Some(Some("bob")));
        assert_eq!(keys.identify("plain"), Some(None));
        assert_eq!(keys.identify("not a name:k-x"), Some(None));
        assert_eq!(keys.identify("alice:k-alice"), None);
        assert_eq!(keys.identify("k-x"), None);
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        for value in ["Bearer k", "bearer k", "BEARER k", "BeArEr   k"] {
            assert_eq!(bearer_token(value), Some("k"), "{value}");
        }
        for value in ["Basic k", "Bearerk", "Bearer", ""] {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }

    #[test]
    fn no_keys_means_open_and_debug_shows_no_key() {
        assert!(ApiKeys::new(Vec::<String>::new()).is_empty());
        let shown = format!("{:?}", ApiKeys::new(["secret-value"]));
        assert!(!shown.contains("secret"), "{shown}");
    }
}
