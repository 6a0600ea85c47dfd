//! sessiongraph: Claude Code, pi and AutoGen session logs as annotation units, workflow DAGs,
//! chat logs and communication graphs, served over CommuGraph's REST API, with a label store
//! and a labeling page.
//!
//! Every view comes from one pipeline in [`core`]: frame lines and parse records, link
//! sub-agents, dedup, group into turns, order (parent-uuid topological sort), classify
//! items, then render a view.
//!
//! # Layout
//! - [`core`]: the pure, synchronous pipeline and the view bodies. No I/O, no async.
//! - [`store`]: where sessions come from and live: disk layouts, configured directories,
//!   durable uploads, the cache.
//! - [`labels`]: labeling: the codebook, the label database, import, queue, agreement,
//!   progress, export.
//! - [`rounds`]: coding rounds: units fixed by a search or a list and a seeded sample,
//!   labeled under one codebook by assigned annotators through their own queue.
//! - [`search`]: full-text search over every session's units, an index kept beside the
//!   data directory and updated as sessions come and go.
//! - [`api`]: the axum routes, error bodies and middleware.
//! - [`web`]: the labeling page's files, embedded, and their routes.
//! - [`http`]: what the API and the page answer with alike: ETags, the JSON error body.
//! - [`config`]: `serve` settings; [`cli`]: the command line.

pub mod api;
pub mod cli;
pub mod config;
pub use sessiongraph_core as core;
pub mod http;
pub mod labels;
pub mod rounds;
pub mod search;
pub mod store;
pub mod web;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

pub use api::{ApiConfig, AppSettings, AppState, BuildError, SharedState};

/// The application: the API's routes and the labeling page's, over `state`, wrapped in the
/// middleware every response passes through ([`api::with_edge`]). The page's routes are
/// merged after the API key layer: they want no key (the page asks for one for its API
/// calls).
pub fn app(state: AppState) -> Router {
    let routes = api::router(state.clone()).merge(web::router(!state.config.api_keys.is_empty()));
    api::with_edge(routes, state)
}

/// Turns Nagle's algorithm off on a connection, as nginx does on kept-alive ones: a body
/// written in several pieces (the socket's buffer fills, hyper writes again when it
/// drains) otherwise ends with a short segment held back until the client acknowledges
/// the previous one, which a client delays by up to 40 ms. Serving the 364 KB annotations
/// body to 64 connections: 10k -> 17-18k requests/s, p99 46 -> 7 ms.
fn send_without_delay(stream: &tokio::net::TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY stays off");
    }
}

/// Serves `app(state)` on `listener` until `shutdown` completes, then lets requests in
/// flight finish. The store is restored in the background first (stored uploads, then the
/// sessions directories); `/readyz` answers 503 until that is done. The search indexer
/// starts with it (it indexes what is missing once the store is restored) and is stopped
/// at the end; so are the follower of the other replicas, when uploads are kept in
/// PostgreSQL or a bucket ([`store::Store::follow_replicas`]), and the sweeper of the
/// bucket ([`store::Store::sweep_objects`]).
///
/// Connections are served by hyper directly, HTTP/1.1 only, rather than through
/// `axum::serve`, which sets no timer: with one, a connection must deliver a request's
/// headers within the configured `header_read_timeout` from the moment it opens or goes
/// idle, or it is closed, so that silent or trickling connections (slowloris) cannot pile
/// up. Bodies are bounded by the request timeout. Browsers speak HTTP/2 only over TLS,
/// which a proxy in front terminates; HTTP/2 in clear (whose preface would bypass the
/// header timeout) is refused. After `shutdown`, requests in flight get up to the
/// request timeout to finish; `run` does not wait for connections still open then.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;

    store::cpu_pool::configure();
    let store: Arc<store::Store> = state.store.clone();
    let search = state.search.clone();
    if let Some(search) = &search {
        search.start(store.clone());
    }
    let follower = store.follow_replicas();
    let sweeper = store.sweep_objects();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = store.restore() {
            tracing::error!(error = %e, "restoring the store failed");
            return;
        }
        store.count_unopened();
    });
    let header_read_timeout = state.config.header_read_timeout;
    let shutdown_grace = state.config.request_timeout;
    let app = app(state);
    let mut builder = hyper::server::conn::http1::Builder::new();
    // A client may close its side once it has sent a request (and may be gone for good):
    // the request is still served. Without this, hyper drops a request in flight when it
    // reads the end of the connection, and an upload whose body had arrived whole was
    // lost whenever that end was read before the handler took the last bytes.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .half_close(true);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    send_without_delay(&stream);
                    stream
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the request timeout: closing them");
    }
    for task in [follower, sweeper].into_iter().flatten() {
        task.abort();
    }
    if let Some(search) = search {
        search.stop().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let ((server, _), _client) = tokio::try_join!(listener.accept(), client).unwrap();
        assert!(
            !server.nodelay().unwrap(),
            "off by default: the test would prove nothing"
        );
        send_without_delay(&server);
        assert!(server.nodelay().unwrap());
    }
}
