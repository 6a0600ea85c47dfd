//! sessiongraph: Claude Code session logs as annotation units, workflow DAGs and chat logs,
//! served over CommuGraph's REST API.
//!
//! Every view comes from one pipeline in [`core`]: frame lines, parse records, dedup, order
//! (parent-uuid topological sort), group into turns, then render a view.
//!
//! # Layout
//! - [`core`]: the pure, synchronous pipeline and the view bodies. No I/O, no async.
//! - [`store`]: where sessions come from and live: disk layouts, configured directories,
//!   durable uploads, the cache.
//! - [`api`]: the axum routes, error bodies and middleware.
//! - [`config`]: `serve` settings; [`cli`]: the command line.

pub mod api;
pub mod cli;
pub mod config;
pub mod core;
pub mod store;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;

pub use api::{ApiConfig, AppState};

/// The application: every route with its middleware, over `state`.
pub fn app(state: AppState) -> Router {
    api::router(state)
}

/// Serves `app(state)` on `listener` until `shutdown` completes, then lets requests in
/// flight finish. The store is restored in the background first (stored uploads, then the
/// sessions directories); `/readyz` answers 503 until that is done.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let store: Arc<store::Store> = state.store.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = store.restore() {
            tracing::error!(error = %e, "restoring the store failed");
        }
    });
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}
