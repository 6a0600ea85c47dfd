//! What every request and response goes through, as one layer around each route: the
//! request's span and id, head limits, a timeout, panics caught, small bodies compressed,
//! errors as JSON bodies and the default response headers.
//!
//! One service in place of the ten tower layers that did these jobs one each (catch panic,
//! set and propagate the request id, four default headers, limits + compression + JSON
//! errors, timeout, trace): each was a future of its own, some boxed, and two levels of
//! routing (the layers wrapped the router, the trace layer each route, for the span to
//! name the matched route) each cloned and boxed a service per request. Serving a
//! 255-byte body, these layers took a third of the time; this one boxes one future.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tracing::Instrument;

use super::error::{self, InternalCause};
use super::{encoding, limits};
use crate::store::compress::Encoding;

/// The header carrying a request's id, taken from the request or made up, and echoed in
/// the response.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Headers every response carries unless its route set them: the bodies are data, never
/// to be sniffed, framed, or shown as a page with active content.
const DEFAULT_HEADERS: [(HeaderName, HeaderValue); 4] = [
    (
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    ),
    (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    (
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    ),
];

/// Makes [`Edge`] services: add it with `Router::layer`, so that it wraps each route (and
/// the fallbacks) and sees the matched route.
#[derive(Debug, Clone)]
pub struct EdgeLayer {
    ids: RequestIds,
    timeout: Duration,
}

impl EdgeLayer {
    /// The layer answering 408 to requests that take longer than `timeout`.
    pub fn new(timeout: Duration) -> EdgeLayer {
        EdgeLayer {
            ids: RequestIds::new(),
            timeout,
        }
    }
}

impl<S> tower::Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Edge<S> {
        Edge {
            inner,
            ids: self.ids.clone(),
            timeout: self.timeout,
        }
    }
}

/// The service [`EdgeLayer`] wraps a route in.
#[derive(Debug, Clone)]
pub struct Edge<S> {
    inner: S,
    ids: RequestIds,
    timeout: Duration,
}

impl<S> tower::Service<Request> for Edge<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let started = tokio::time::Instant::now();
        let request_id = match request.headers().get(&REQUEST_ID) {
            Some(id) => id.clone(),
            None => self.ids.next(),
        };
        let span = request_span(&request, &request_id);
        let method = request.method().clone();
        // A clone shares the URI's bytes: no copy unless an error names the path.
        let uri = request.uri().clone();
        // The service polled ready is called now (cloning it for a later call would cost
        // an allocation per request); its answer is awaited below.
        let answer = span.in_scope(|| self.answer(request));
        let deadline = started + self.timeout;
        let served = async move {
            let response = answer.response(deadline).await;
            let mut response = error::as_json_error(&method, &uri, response);
            log_outcome(&response, started.elapsed());
            let headers = response.headers_mut();
            for (name, value) in &DEFAULT_HEADERS {
                if !headers.contains_key(name) {
                    headers.insert(name.clone(), value.clone());
                }
            }
            headers.insert(REQUEST_ID, request_id);
            Ok(response)
        };
        Box::pin(served.instrument(span))
    }
}

impl<S> Edge<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    /// What becomes of `request` before anything is awaited: refused for its head, or
    /// handed to the inner service (whose call may panic).
    fn answer(&mut self, request: Request) -> Answer<S::Future> {
        tracing::debug!("started processing request");
        if let Some(refusal) = limits::refusal(&request) {
            return Answer::Refused(refusal);
        }
        let encoding = encoding::negotiate(request.headers());
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
            Ok(future) => Answer::Called { encoding, future },
            Err(panic) => Answer::Panicked(panic),
        }
    }
}

/// A request as the edge left it in [`Edge::call`].
enum Answer<F> {
    /// Refused for its head ([`limits::refusal`]).
    Refused(Response),
    /// The inner service's answer, to await, and the coding the request accepts best.
    Called { encoding: Encoding, future: F },
    /// The inner service panicked when called.
    Panicked(Box<dyn std::any::Any + Send + 'static>),
}

impl<F> Answer<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    /// The response: the refusal, or the inner answer (408 past `deadline`, the generic
    /// 500 if it panics) with its small body compressed as the request accepts.
    async fn response(self, deadline: tokio::time::Instant) -> Response {
        let (encoding, future) = match self {
            Answer::Refused(refusal) => return refusal,
            Answer::Panicked(panic) => return error::panic_response(panic),
            Answer::Called { encoding, future } => (encoding, future),
        };
        let response = match within(deadline, AssertUnwindSafe(future).catch_unwind()).await {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(never))) => match never {},
            Some(Err(panic)) => error::panic_response(panic),
            None => StatusCode::REQUEST_TIMEOUT.into_response(),
        };
        encoding::compress_small_body(encoding, response).await
    }
}

/// `future`'s output, or `None` once `deadline` has passed. The timer is made only when
/// the future is not ready at its first poll: most answers are, and need none.
async fn within<F: Future>(deadline: tokio::time::Instant, future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut timer = std::pin::pin!(None::<tokio::time::Sleep>);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        if timer.is_none() {
            timer.set(Some(tokio::time::sleep_until(deadline)));
        }
        match timer.as_mut().as_pin_mut() {
            Some(sleep) => sleep.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    })
    .await
}

/// The span every event of a request is logged in: its method, matched route (the path
/// when none matched) and id.
fn request_span(request: &Request, request_id: &HeaderValue) -> tracing::Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(request.uri().path(), MatchedPath::as_str);
    let request_id = request_id.to_str().unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), route, request_id)
}

/// Logs how a request ended, in its span: a failure on the server's side as an error with
/// its cause when the response carries one ([`InternalCause`]), a 503 (busy, or starting)
/// as a warning, every response at debug level with its status and latency.
fn log_outcome(response: &Response, latency: Duration) {
    let status = response.status().as_u16();
    if let Some(InternalCause(cause)) = response.extensions().get::<InternalCause>() {
        tracing::error!(%cause, status, "request failed");
    } else if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        // Busy (the render budget is spent) or starting: the client is told when to retry.
        tracing::warn!(status, "request refused for now");
    } else if response.status().is_server_error() {
        tracing::error!(status, "request failed");
    }
    tracing::debug!(
        status,
        latency_ms = latency.as_secs_f64() * 1e3,
        "finished processing request"
    );
}

/// Request ids unique within the process and across restarts: a random prefix drawn at
/// startup, then a counter (`3f9a1c2e5b7d4e01-42`). Cheaper than a random UUID per
/// request, which costs a system call.
#[derive(Debug, Clone)]
struct RequestIds {
    prefix: u64,
    next: Arc<AtomicU64>,
}

impl RequestIds {
    fn new() -> Self {
        // A fresh `RandomState` is seeded from the OS's randomness.
        let prefix = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
        RequestIds {
            prefix,
            next: Arc::new(AtomicU64::new(1)),
        }
    }

    /// The next id.
    fn next(&self) -> HeaderValue {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:016x}-{n}", self.prefix);
        // Hex digits, a dash and decimal digits: always a valid header value.
        HeaderValue::try_from(id).unwrap_or(HeaderValue::from_static("-"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use axum::Router;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    fn app(timeout: Duration) -> Router {
        Router::new()
            .route("/ok", get(|| async { "fine" }))
            .route(
                "/page",
                get(|| async { ([(header::CONTENT_SECURITY_POLICY, "default-src 'self'")], "page") }),
            )
            .route(
                "/panics",
                get(|| async {
                    if std::hint::black_box(true) {
                        panic!("a handler's bug");
                    }
                    "never"
                }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                    "too late"
                }),
            )
            .layer(EdgeLayer::new(timeout))
    }

    async fn get_from(
        app: Router,
        uri: &str,
        request_id: Option<&str>,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let mut request = Request::builder().uri(uri);
        if let Some(id) = request_id {
            request = request.header(REQUEST_ID, id);
        }
        let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8(bytes.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn a_panicking_handler_is_a_generic_json_500_with_the_usual_headers() {
        let (status, headers, body) = get_from(app(Duration::from_secs(60)), "/panics", Some("p-1")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], "Internal Server Error");
        assert!(!body.to_string().contains("a handler's bug"), "{body}");
        assert_eq!(headers[REQUEST_ID], "p-1");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }

    #[tokio::test]
    async fn a_request_past_its_timeout_is_a_json_408() {
        let (status, headers, body) = get_from(app(Duration::from_millis(50)), "/slow", None).await;
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["message"], "The request took too long");
    }

    #[tokio::test]
    async fn request_ids_are_echoed_or_made_up_one_per_request() {
        let app = app(Duration::from_secs(60));
        let (_, headers, body) = get_from(app.clone(), "/ok", Some("mine-42")).await;
        assert_eq!(
            (headers[REQUEST_ID].to_str().unwrap(), body.as_str()),
            ("mine-42", "fine")
        );
        let (_, first, _) = get_from(app.clone(), "/ok", None).await;
        let (_, second, _) = get_from(app, "/ok", None).await;
        assert_ne!(first[REQUEST_ID], second[REQUEST_ID]);
    }

    #[tokio::test]
    async fn default_headers_leave_a_routes_own_alone() {
        let app = app(Duration::from_secs(60));
        let (_, headers, _) = get_from(app.clone(), "/ok", None).await;
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            "default-src 'none'; frame-ancestors 'none'"
        );
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
        let (_, headers, _) = get_from(app.clone(), "/page", None).await;
        assert_eq!(headers[header::CONTENT_SECURITY_POLICY], "default-src 'self'");
        assert_eq!(headers.get_all(header::CONTENT_SECURITY_POLICY).iter().count(), 1);
        // The fallback is wrapped too.
        let (status, headers, _) = get_from(app, "/nowhere", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(headers.contains_key(REQUEST_ID));
    }
}
