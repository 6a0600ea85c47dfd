//! The indexer: one task that keeps the index in line with the store. At start (once the
//! store is restored) it checks every session against the index and indexes the missing
//! and stale ones, searches answering meanwhile with what the index holds; then it follows
//! the store's change notices (uploads, deletions, reloads), a batch at a time, and checks
//! every session again every `recheck` (files of a sessions directory that changed while no
//! request read them). The work runs on a thread of its own at a lower priority (see
//! `in_background`); no lock is held across an `.await`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;

use super::index::SearchIndex;
use super::progress::Progress;
use super::updates::{stale_sessions, sync_sessions};
use crate::store::cpu_pool::lower_this_threads_priority;
use crate::store::Store;

/// What the indexer is asked to do.
#[derive(Debug)]
pub enum Job {
    /// Bring this session in line with the store (it was added, removed or reloaded).
    Sync(String),
    /// Check every session again (the periodic check).
    Recheck,
    /// Stop.
    Stop,
}

/// What the indexer works with.
pub struct Indexer {
    /// The index.
    pub index: Arc<SearchIndex>,
    /// Shared with the searches.
    pub progress: Arc<Progress>,
    /// The sessions.
    pub store: Arc<Store>,
    /// Set when the server stops: work in progress ends after the session at hand.
    pub stopping: Arc<AtomicBool>,
    /// How often every session is checked again (`None`: only at start).
    pub recheck: Option<Duration>,
}

impl Indexer {
    /// Runs until asked to stop (or every sender is gone).
    pub async fn run(self, mut jobs: UnboundedReceiver<Job>) {
        while !self.store.is_ready() {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.check_all().await;
        self.progress.set_ready();
        let mut ticks = self
            .recheck
            .map(|every| tokio::time::interval_at(tokio::time::Instant::now() + every, every));
        loop {
            let tick = async {
                match &mut ticks {
                    Some(t) => {
                        t.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let job = tokio::select! {
                job = jobs.recv() => job,
                () = tick => Some(Job::Recheck),
            };
            let first = match job {
                Some(Job::Sync(id)) => id,
                Some(Job::Recheck) => {
                    self.check_all().await;
                    continue;
                }
                None | Some(Job::Stop) => break,
            };
            let mut ids = vec![first];
            let mut stop = false;
            while let Ok(job) = jobs.try_recv() {
                match job {
                    Job::Sync(id) => ids.push(id),
                    Job::Recheck => {}
                    Job::Stop => stop = true,
                }
            }
            // Each notice was counted as pending: each is done once its batch is.
            self.sync(ids).await;
            if stop {
                break;
            }
        }
    }

    /// Checks every session against the index and brings the stale ones in line.
    async fn check_all(&self) {
        let (index, store) = (self.index.clone(), self.store.clone());
        let stale = match in_background(move || stale_sessions(&index, &store)).await {
            Some(Ok(stale)) => stale,
            Some(Err(e)) => return tracing::warn!(error = %e, "checking the search index failed"),
            None => return tracing::warn!("checking the search index failed: its thread panicked"),
        };
        if stale.is_empty() {
            return;
        }
        tracing::info!(sessions = stale.len(), "indexing sessions for search");
        self.progress.add(stale.len());
        self.sync(stale).await;
    }

    /// Brings `ids` (each counted as pending) in line with the store; they are done
    /// whether that worked or not (a failure is logged, and found again by the next check).
    async fn sync(&self, mut ids: Vec<String>) {
        let counted = ids.len();
        let started = Instant::now();
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(id.clone()));
        let (index, store, stopping, progress) = (
            self.index.clone(),
            self.store.clone(),
            self.stopping.clone(),
            self.progress.clone(),
        );
        let outcome = in_background(move || {
            let mut reported = 0;
            let synced = sync_sessions(&index, &store, &ids, &stopping, |n| {
                reported += n;
                progress.done(n);
            });
            (synced, reported)
        })
        .await;
        let reported = match outcome {
            Some((Ok(()), reported)) => reported,
            Some((Err(e), reported)) => {
                tracing::warn!(error = %e, "updating the search index failed");
                reported
            }
            None => {
                tracing::warn!("updating the search index failed: its thread panicked");
                0
            }
        };
        self.progress.done(counted.saturating_sub(reported));
        tracing::debug!(
            sessions = counted,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "search index updated"
        );
    }
}

/// Runs `f` on a thread of its own at a lower priority ([`lower_this_threads_priority`]):
/// indexing takes what requests leave of the cores, and the index writer's indexing
/// threads, which each commit starts from this thread, inherit its priority. (A thread of
/// the blocking pool would keep the lowered priority for the parses that run on it later.)
/// `None` when `f` panicked.
async fn in_background<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("sessiongraph-search".into())
        .spawn(move || {
            lower_this_threads_priority();
            let _ = tx.send(f());
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "could not start a search indexing thread");
        return None;
    }
    rx.await.ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::store::cpu_pool::NICENESS;

    fn priority() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    #[tokio::test]
    async fn indexing_runs_below_the_priority_of_requests() {
        let before = priority();
        let (inside, started_inside) = in_background(|| {
            let inside = priority();
            let started = std::thread::spawn(priority).join().unwrap();
            (inside, started)
        })
        .await
        .unwrap();
        assert_eq!(inside, (before + NICENESS).min(19));
        assert_eq!(started_inside, inside, "a thread it starts inherits it");
        assert_eq!(priority(), before, "the caller's is untouched");
        assert_eq!(in_background(|| -> u8 { panic!("boom") }).await, None);
    }
}
