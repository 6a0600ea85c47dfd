//! How far the index is behind the store: what a search answers beside its results.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::Serialize;

/// The indexer's progress, shared with the searches.
#[derive(Debug, Default)]
pub struct Progress {
    /// Sessions known to need indexing (or removing) that are not yet searchable so.
    pending: AtomicUsize,
    /// Set once the index was checked against the store after the start.
    ready: AtomicBool,
}

/// The index's state as a search answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IndexState {
    /// True while indexing is still pending: the first check against the store has not
    /// finished, or sessions wait to be indexed; results may then miss units or list units
    /// that are gone.
    pub pending: bool,
    /// Sessions waiting to be indexed or removed.
    pub pending_sessions: usize,
}

impl Progress {
    /// `n` more sessions to index.
    pub fn add(&self, n: usize) {
        self.pending.fetch_add(n, Ordering::SeqCst);
    }

    /// `n` sessions indexed (searchable now) or given up on.
    pub fn done(&self, n: usize) {
        let _ = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |p| Some(p.saturating_sub(n)));
    }

    /// The first check against the store is over.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// The state now.
    pub fn state(&self) -> IndexState {
        let pending_sessions = self.pending.load(Ordering::SeqCst);
        IndexState {
            pending: !self.ready.load(Ordering::SeqCst) || pending_sessions > 0,
            pending_sessions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_until_ready_and_while_sessions_wait() {
        let p = Progress::default();
        assert!(p.state().pending, "before the first check");
        p.set_ready();
        assert_eq!(
            p.state(),
            IndexState {
                pending: false,
                pending_sessions: 0
            }
        );
        p.add(3);
        p.done(2);
        assert_eq!(
            p.state(),
            IndexState {
                pending: true,
                pending_sessions: 1
            }
        );
        p.done(5);
        assert_eq!(p.state().pending_sessions, 0, "never below zero");
    }
}
