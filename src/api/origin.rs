//! Where a request comes from: the checks that keep a hostile web page, open in a browser
//! on a team member's machine, from using that browser to read or write through the API.
//!
//! - **Host** ([`AllowedHosts`]): a page can make its own host name resolve to 127.0.0.1
//!   (DNS rebinding) and then read everything a loopback server answers, as same-origin.
//!   The `Host` it sends is still its own name, so a server on a loopback address answers
//!   only loopback names (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`) and those
//!   configured (`--allowed-host`, for a deployment behind a proxy); 403 otherwise. The two
//!   probes answer any host (an orchestrator's probe names the pod's address).
//! - **Origin** ([`cross_origin_refusal`]): a page may send a request to another origin
//!   without asking (`no-cors`: a form, or `fetch` of a "simple" request) and never read
//!   the answer; that is enough to write. A write (any method but `GET`, `HEAD` and
//!   `OPTIONS`) from a browser is accepted only from this server's own origin or an origin
//!   allowed by `--cors-origin`: by the Fetch metadata (`Sec-Fetch-Site`) where the browser
//!   sends it, else by `Origin` against `Host`. A request with neither header is not a
//!   browser's cross-origin request (curl, scripts) and goes through.
//! - **Content type** ([`require_json`], [`require_json_lines`]): a JSON write must say so.
//!   `application/json` is not one of the types a page may send without a CORS preflight,
//!   so this alone stops a `no-cors` write in browsers that send no `Origin`.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::refuse;
use super::error::{echo, ApiError};
use super::AppState;

/// The host names a server answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any host (a server listening beyond loopback, with no list given).
    Any,
    /// Loopback names, and these (lowercase; `*.example.org` allows its subdomains).
    Loopback(Vec<String>),
}

impl Default for AllowedHosts {
    fn default() -> Self {
        AllowedHosts::Loopback(Vec::new())
    }
}

impl AllowedHosts {
    /// The policy of a server listening on a loopback address or not, with the names given
    /// by `--allowed-host` (`*`: any). Beyond loopback with no name given, any host is
    /// answered: the server is meant to be reached by other machines' names.
    pub fn new(loopback_listener: bool, given: &[String]) -> AllowedHosts {
        let names: Vec<String> = given
            .iter()
            .map(|n| n.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        if names.iter().any(|n| n == "*") || (!loopback_listener && names.is_empty()) {
            return AllowedHosts::Any;
        }
        AllowedHosts::Loopback(names)
    }

    /// True when a request with this `Host` header value is answered.
    pub fn allows(&self, host: &str) -> bool {
        let AllowedHosts::Loopback(names) = self else {
            return true;
        };
        let name = host_name(host).trim_end_matches('.').to_ascii_lowercase();
        is_loopback_name(&name)
            || names.iter().any(|allowed| match allowed.strip_prefix("*.") {
                Some(domain) => name.strip_suffix(domain).is_some_and(|sub| sub.ends_with('.')),
                None => *allowed == name,
            })
    }
}

/// The host of a `Host` value, without its port (`[::1]:8080` -> `[::1]`).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// `localhost`, a name under `.localhost` (browsers resolve both to loopback themselves),
/// an IPv4 loopback address or `[::1]`.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name == "[::1]"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Middleware over every route: refuses a request whose `Host` the server does not answer
/// to (see the module's documentation), and a browser's write from another origin.
pub async fn check_origin(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let config = &state.config;
    if let Some(refusal) = host_refusal(&config.allowed_hosts, &request)
        .or_else(|| cross_origin_refusal(&config.cors_origins, request.method(), request.headers()))
    {
        return refuse(request, ApiError::Forbidden(refusal).into_response()).await;
    }
    next.run(request).await
}

/// Why a request's `Host` is refused, if it is. A request without one (HTTP/1.0) is not a
/// browser's and is answered.
fn host_refusal(allowed: &AllowedHosts, request: &Request) -> Option<String> {
    if matches!(request.uri().path(), "/healthz" | "/readyz") {
        return None;
    }
    let host = request.headers().get(header::HOST)?;
    let name = host.to_str().unwrap_or("");
    (!allowed.allows(name)).then(|| {
        format!(
            "This server does not answer to the host '{}': add it with --allowed-host if it is this server's name",
            echo(name)
        )
    })
}

/// Why a write from a browser is refused as cross-origin, if it is: see the module's
/// documentation. `trusted`: the `--cors-origin` origins.
pub fn cross_origin_refusal(trusted: &[HeaderValue], method: &Method, headers: &HeaderMap) -> Option<String> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let origin = headers.get(header::ORIGIN);
    if origin.is_some_and(|o| trusted.contains(o)) {
        return None;
    }
    let refused = || {
        let from = origin.and_then(|o| o.to_str().ok()).unwrap_or("another site");
        Some(format!(
            "A write from a page of '{}' is refused: only this server's own pages and --cors-origin origins may write",
            echo(from)
        ))
    };
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        Some(b"same-origin" | b"none") => return None,
        Some(_) => return refused(),
        None => {}
    }
    // No Origin and no Fetch metadata: not a browser's cross-origin request.
    let origin = origin?;
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority);
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match (authority, host) {
        (Some(a), Some(h)) if a.eq_ignore_ascii_case(h) => None,
        _ => refused(),
    }
}

/// Route middleware: a JSON write must be sent as `application/json` (or a `+json` type);
/// 415 otherwise, before the body is read.
pub async fn require_json(request: Request, next: Next) -> Response {
    require_type(request, next, &["application/json"], "application/json").await
}

/// Route middleware for the import: JSON lines (`application/x-ndjson`, `application/jsonl`,
/// `application/x-jsonlines`) or JSON (`application/json`, a Label Studio export); 415
/// otherwise, before the body is read.
pub async fn require_json_lines(request: Request, next: Next) -> Response {
    const JSON_LINES: [&str; 6] = [
        "application/json",
        "application/x-ndjson",
        "application/jsonl",
        "application/x-jsonl",
        "application/jsonlines",
        "application/x-jsonlines",
    ];
    require_type(
        request,
        next,
        &JSON_LINES,
        "application/x-ndjson (JSON lines) or application/json",
    )
    .await
}

async fn require_type(request: Request, next: Next, accepted: &[&str], wanted: &str) -> Response {
    let given = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    let fits = given
        .as_deref()
        .is_some_and(|t| accepted.contains(&t) || t.ends_with("+json"));
    if fits {
        return next.run(request).await;
    }
    let message = format!(
        "The body must be sent as {wanted} (Content-Type: {})",
        echo(given.as_deref().unwrap_or("none"))
    );
    refuse(request, ApiError::UnsupportedMediaType(message).into_response()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_server_answers_loopback_names_and_those_given() {
        let hosts = AllowedHosts::new(true, &["Labels.Team.Example".into(), "*.corp.example".into()]);
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "127.1.2.3",
            "[::1]:8080",
            "labels.team.example",
            "a.corp.example:443",
        ] {
            assert!(hosts.allows(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "corp.example",
            "xcorp.example",
            "10.0.0.1:8080",
            "[::2]:8080",
            "",
        ] {
            assert!(!hosts.allows(host), "{host}");
        }
    }

    #[test]
    fn beyond_loopback_any_host_is_answered_unless_a_list_is_given() {
        assert_eq!(AllowedHosts::new(false, &[]), AllowedHosts::Any);
        assert_eq!(AllowedHosts::new(true, &["*".into()]), AllowedHosts::Any);
        let listed = AllowedHosts::new(false, &["labels.example".into()]);
        assert!(listed.allows("labels.example:8080"));
        assert!(!listed.allows("10.0.0.1:8080"));
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| (header::HeaderName::from_static(n), HeaderValue::from_static(v)))
            .collect()
    }

    #[test]
    fn a_browsers_write_from_another_origin_is_refused() {
        let trusted = [HeaderValue::from_static("http://localhost:3000")];
        let post = Method::POST;
        let refused = |pairs: &[(&'static str, &'static str)]| {
            cross_origin_refusal(&trusted, &post, &headers(pairs)).is_some()
        };
        // curl, scripts: neither header.
        assert!(!refused(&[("host", "127.0.0.1:8080")]));
        // The server's own page.
        assert!(!refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ]));
        assert!(!refused(&[
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://127.0.0.1:8080")
        ]));
        // CommuGraph's frontend, allowed by --cors-origin.
        assert!(!refused(&[
            ("sec-fetch-site", "same-site"),
            ("origin", "http://localhost:3000")
        ]));
        // Another port, another site, a sandboxed page.
        assert!(refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:9999")
        ]));
        assert!(refused(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://attacker.example")
        ]));
        assert!(refused(&[("sec-fetch-site", "same-site")]));
        assert!(refused(&[("host", "127.0.0.1:8080"), ("origin", "null")]));
        // Reads are not writes.
        let get = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://attacker.example"),
        ]);
        assert!(cross_origin_refusal(&trusted, &Method::GET, &get).is_none());
    }
}
