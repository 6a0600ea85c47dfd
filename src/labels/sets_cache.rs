//! The sets of recently read sessions of an SQLite label database, kept in memory.
//!
//! Every request for a session's annotations body reads its label sets (they are shown on
//! the units). Read from the database, that is a round trip to a connection's thread for
//! what is almost always the same answer: on SQLite it took 40% of serving a cached
//! annotations body. The cache answers instead, and learns of every write, this process's
//! or another's (a second server on the same file is a supported setup), the one way
//! SQLite tells every connection: each commit rewrites the header of the database's WAL
//! index, the `-shm` file every connection to a WAL database maps, before the commit
//! returns (<https://www.sqlite.org/walformat.html>). Each lookup reads the header's two
//! copies (96 bytes) first: bytes that differ from those seen last drop everything, and a
//! header that cannot be read (no WAL, no open connection) keeps nothing. The bytes are
//! only compared, never interpreted.
//!
//! A read that races a commit must not keep what it read before the commit: a fill is
//! kept only when nothing was dropped between the start of its read and its return (a
//! generation counter, checked and changed under the same lock as the map). A commit that
//! ends after a fill was kept is seen by the next lookup.
//!
//! PostgreSQL is not cached: replicas sharing it have no such file to watch.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::model::LabelSet;

/// Sessions kept at most; past it the cache starts over (sets are small, sessions many).
const MAX_SESSIONS: usize = 1024;

/// A session's sets, as [`super::LabelStore::list`] returns them.
pub type Sets = Arc<Vec<LabelSet>>;

/// Bytes of the WAL index's header: its two copies.
const WAL_INDEX_HEADER: usize = 96;

/// The sets of recently read sessions.
#[derive(Debug)]
pub struct SetsCache {
    inner: Mutex<Inner>,
    /// The database's WAL index (`<database>-shm`).
    wal_index: PathBuf,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bumped when a lookup sees a commit: a fill that started before it is not kept.
    generation: u64,
    /// By [`cache_key`].
    sessions: HashMap<String, Sets>,
    /// The WAL index header as the last lookup read it.
    header: Option<[u8; WAL_INDEX_HEADER]>,
}

/// A read of the database under way: what [`SetsCache::fill`] needs to know whether a
/// lookup saw a commit since it started.
#[derive(Debug, Clone, Copy)]
pub struct Fill {
    generation: u64,
}

impl SetsCache {
    /// A cache of the SQLite database at `database` (its file's path).
    pub fn of_database(database: &Path) -> SetsCache {
        let mut wal_index = database.as_os_str().to_owned();
        wal_index.push("-shm");
        SetsCache {
            inner: Mutex::default(),
            wal_index: PathBuf::from(wal_index),
        }
    }

    /// The session's sets under `codebook`, if kept and no process committed since they
    /// were read; otherwise a [`Fill`] to hand back with what the database answers.
    pub fn get(&self, codebook: &str, session_id: &str) -> Result<Sets, Fill> {
        let header = self.read_wal_index_header();
        let mut inner = self.lock();
        if header.is_none() || header != inner.header {
            inner.drop_all();
            inner.header = header;
        }
        match inner.sessions.get(&cache_key(codebook, session_id)) {
            Some(sets) => Ok(Arc::clone(sets)),
            None => Err(Fill {
                generation: inner.generation,
            }),
        }
    }

    /// Keeps `sets`, read from the database for `session_id` under `codebook` after `fill`
    /// was taken, unless a lookup saw a commit since.
    pub fn fill(&self, codebook: &str, session_id: &str, fill: Fill, sets: &Sets) {
        let mut inner = self.lock();
        if inner.generation != fill.generation {
            return;
        }
        if inner.sessions.len() >= MAX_SESSIONS {
            inner.sessions.clear();
        }
        inner
            .sessions
            .insert(cache_key(codebook, session_id), Arc::clone(sets));
    }

    /// The WAL index header's bytes, or `None` when they cannot be read (no such file:
    /// the database is not in WAL mode, or no connection has it open).
    fn read_wal_index_header(&self) -> Option<[u8; WAL_INDEX_HEADER]> {
        let mut header = [0; WAL_INDEX_HEADER];
        std::fs::File::open(&self.wal_index)
            .and_then(|mut file| file.read_exact(&mut header))
            .ok()?;
        Some(header)
    }

    /// The map, even if a thread panicked holding it (every change to it is one call that
    /// cannot leave it half-changed).
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The key of a session's sets under a codebook (a codebook's id holds no newline).
fn cache_key(codebook: &str, session_id: &str) -> String {
    format!("{codebook}\n{session_id}")
}

impl Inner {
    fn drop_all(&mut self) {
        self.generation += 1;
        self.sessions.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_sets() -> Sets {
        Arc::new(Vec::new())
    }

    /// A cache of a database in `dir` whose WAL index header is `byte` repeated.
    fn cache_in(dir: &Path, byte: u8) -> SetsCache {
        let database = dir.join("labels.sqlite3");
        commit_elsewhere(&database, byte);
        SetsCache::of_database(&database)
    }

    /// What a commit (by any connection) does to the WAL index header.
    fn commit_elsewhere(database: &Path, byte: u8) {
        let mut shm = database.as_os_str().to_owned();
        shm.push("-shm");
        std::fs::write(PathBuf::from(shm), [byte; 4 * WAL_INDEX_HEADER]).unwrap();
    }

    fn filled(cache: &SetsCache, id: &str) {
        let fill = cache.get("c", id).unwrap_err();
        cache.fill("c", id, fill, &no_sets());
    }

    #[test]
    fn a_fill_is_kept_until_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache_in(dir.path(), 1);
        filled(&cache, "s");
        filled(&cache, "t");
        assert!(cache.get("c", "s").is_ok());
        commit_elsewhere(&dir.path().join("labels.sqlite3"), 2);
        assert!(cache.get("c", "s").is_err());
        assert!(
            cache.get("c", "t").is_err(),
            "a commit drops every session's sets"
        );
        filled(&cache, "s");
        assert!(cache.get("c", "s").is_ok());
    }

    #[test]
    fn a_fill_read_before_a_commit_was_seen_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache_in(dir.path(), 1);
        let fill = cache.get("c", "s").unwrap_err();
        // While the read is under way, a commit ends and another lookup sees it: what
        // the read saw may be from before it.
        commit_elsewhere(&dir.path().join("labels.sqlite3"), 2);
        assert!(cache.get("c", "t").is_err());
        cache.fill("c", "s", fill, &no_sets());
        assert!(cache.get("c", "s").is_err());
    }

    #[test]
    fn without_a_readable_wal_index_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SetsCache::of_database(&dir.path().join("labels.sqlite3"));
        filled(&cache, "s");
        assert!(cache.get("c", "s").is_err());
        // A WAL index shorter than its header (SQLite truncates it when the last
        // connection closes) is not readable either.
        let database = dir.path().join("short.sqlite3");
        std::fs::write(dir.path().join("short.sqlite3-shm"), [1; 10]).unwrap();
        let cache = SetsCache::of_database(&database);
        filled(&cache, "s");
        assert!(cache.get("c", "s").is_err());
    }

    #[test]
    fn the_cache_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache_in(dir.path(), 1);
        for i in 0..=MAX_SESSIONS {
            filled(&cache, &format!("s{i}"));
        }
        assert!(cache.lock().sessions.len() <= MAX_SESSIONS);
    }
}
