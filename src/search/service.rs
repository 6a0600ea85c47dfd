//! [`Search`]: the index, its indexer and its progress behind one handle, what the
//! application state holds. The store tells it of every change ([`ChangeListener`]); each
//! change is counted as pending before the request that made it is answered, so a search
//! made after an upload's answer says `pending` until the upload is searchable.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use super::error::SearchError;
use super::index::SearchIndex;
use super::indexer::{Indexer, Job};
use super::keys::UnitKey;
use super::progress::{IndexState, Progress};
use super::query::SearchQuery;
use super::results::SearchPage;
use crate::store::{Change, ChangeListener, Store};

/// How search is set up.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// Keep an index and serve `GET /api/search` (off: neither).
    pub enabled: bool,
    /// How often every session is checked against the index again, for files of a
    /// sessions directory that changed while no request read them (`None`: at start only).
    pub recheck: Option<Duration>,
    /// Memory the index writer buffers documents in before it writes a segment.
    pub writer_bytes: usize,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            enabled: true,
            recheck: Some(Duration::from_secs(60)),
            writer_bytes: 64 << 20,
        }
    }
}

/// Search over every session's units.
#[derive(Debug)]
pub struct Search {
    index: Arc<SearchIndex>,
    progress: Arc<Progress>,
    /// Change notices to the indexer, queued until it starts.
    jobs: UnboundedSender<Job>,
    /// The indexer's end of the queue, until [`Search::start`] hands it over.
    waiting: Mutex<Option<UnboundedReceiver<Job>>>,
    /// The indexer's task, for [`Search::stop`] to wait on.
    task: Mutex<Option<JoinHandle<()>>>,
    /// Set by [`Search::stop`]: the indexer ends after the session at hand.
    stopping: Arc<AtomicBool>,
    recheck: Option<Duration>,
}

impl Search {
    /// Search over the index kept in `data_dir` (in memory without one; see
    /// [`SearchIndex::open`]). Nothing is indexed until [`Search::start`].
    pub fn open(data_dir: Option<&Path>, config: &SearchConfig) -> Search {
        let (jobs, waiting) = mpsc::unbounded_channel();
        Search {
            index: Arc::new(SearchIndex::open(data_dir, config.writer_bytes)),
            progress: Arc::new(Progress::default()),
            jobs,
            waiting: Mutex::new(Some(waiting)),
            task: Mutex::new(None),
            stopping: Arc::new(AtomicBool::new(false)),
            recheck: config.recheck,
        }
    }

    /// Starts the indexer over `store` (once; later calls do nothing): it waits for the
    /// store to be restored, then indexes what is missing or stale.
    pub fn start(&self, store: Arc<Store>) {
        let Some(jobs) = lock(&self.waiting).take() else {
            return;
        };
        let indexer = Indexer {
            index: self.index.clone(),
            progress: self.progress.clone(),
            store,
            stopping: self.stopping.clone(),
            recheck: self.recheck,
        };
        *lock(&self.task) = Some(tokio::spawn(indexer.run(jobs)));
    }

    /// Stops the indexer after the session at hand and waits for it: what it committed
    /// stays, the rest is found stale at the next start.
    pub async fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = self.jobs.send(Job::Stop);
        let task = lock(&self.task).take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "the search indexer failed");
            }
        }
    }

    /// How far the index is behind the store.
    pub fn state(&self) -> IndexState {
        self.progress.state()
    }

    /// The index (to search it from a blocking thread).
    pub fn index(&self) -> &Arc<SearchIndex> {
        &self.index
    }

    /// A page of `query`'s results (see [`SearchIndex::search`]), on the blocking pool.
    pub async fn page(
        &self,
        query: SearchQuery,
        offset: usize,
        limit: usize,
    ) -> Result<SearchPage, SearchError> {
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || index.search(&query, offset, limit)).await?
    }

    /// Every unit `query` matches, in a fixed order (see
    /// [`SearchIndex::matching_units`]), on the blocking pool.
    pub async fn matching_units(&self, query: SearchQuery) -> Result<Vec<UnitKey>, SearchError> {
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || index.matching_units(&query)).await?
    }
}

impl ChangeListener for Search {
    fn changed(&self, change: &Change) {
        self.progress.add(1);
        if self.jobs.send(Job::Sync(change.id.clone())).is_err() {
            // The indexer has stopped: nothing will index it in this process.
            self.progress.done(1);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
