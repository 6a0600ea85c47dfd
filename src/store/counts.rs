//! The counts of sessions found in sessions directories, kept in the data directory so that
//! the session list shows them after a restart without parsing anything.
//!
//! ```text
//! <data-dir>/disk-counts.json    main log path -> its size, modification time and counts
//! ```
//!
//! An entry holds while the main log keeps the size and modification time it had when it
//! was counted; a log that changed is counted again when it is next parsed. The file is a
//! cache: it is rewritten whole (temporary file, then rename) after a request's parse finds
//! new counts and once after the background count, and one that cannot be read is ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::uploads::Counts;

/// The file's name in the data directory.
const FILE_NAME: &str = "disk-counts.json";

/// One counted main log.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
struct Entry {
    /// Its size when counted.
    len: u64,
    /// Its modification time when counted, in nanoseconds since the epoch.
    modified_ns: u64,
    /// What it counted.
    counts: Counts,
}

/// The counts of sessions on disk, by main log.
#[derive(Debug)]
pub struct DiskCounts {
    file: PathBuf,
    entries: Mutex<HashMap<String, Entry>>,
}

impl DiskCounts {
    /// The counts kept in `data_dir` (none yet when the file is missing or unreadable).
    pub fn open(data_dir: &Path) -> DiskCounts {
        let file = data_dir.join(FILE_NAME);
        let entries = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %file.display(), error = %e, "ignoring unreadable session counts");
                HashMap::new()
            }),
            Err(_) => HashMap::new(),
        };
        DiskCounts {
            file,
            entries: Mutex::new(entries),
        }
    }

    /// The counts of the session whose main log is `main`, if it was counted as it is now.
    pub fn get(&self, main: &Path, len: u64, modified: SystemTime) -> Option<Counts> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&key(main))
            .filter(|e| e.len == len && e.modified_ns == nanos(modified) && e.counts.is_current())
            .map(|e| e.counts)
    }

    /// Keeps the counts of the session whose main log is `main` (of `len` bytes, modified at
    /// `modified`) in memory; true when they are new. [`DiskCounts::save`] writes them.
    pub fn record(&self, main: &Path, len: u64, modified: SystemTime, counts: Counts) -> bool {
        let entry = Entry {
            len,
            modified_ns: nanos(modified),
            counts,
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(key(main), entry) != Some(entry)
    }

    /// Writes every count kept to the file (temporary file, then rename).
    pub fn save(&self) {
        let json = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            serde_json::to_vec(&*entries).unwrap_or_default()
        };
        let tmp = self.file.with_extension("json.tmp");
        let written = std::fs::write(&tmp, json).and_then(|()| std::fs::rename(&tmp, &self.file));
        if let Err(e) = written {
            tracing::warn!(file = %self.file.display(), error = %e, "could not keep session counts");
        }
    }
}

fn key(main: &Path) -> String {
    main.to_string_lossy().into_owned()
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_survive_a_reopen_and_lapse_when_the_log_changes() {
        let dir = tempfile::tempdir().unwrap();
        let main = Path::new("/sessions/p/s.jsonl");
        let when = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let counts = Counts {
            message_count: 12,
            node_count: 3,
            edge_count: 0,
            rules: super::super::uploads::COUNT_RULES,
        };
        let kept = DiskCounts::open(dir.path());
        assert!(kept.record(main, 100, when, counts));
        assert!(
            !kept.record(main, 100, when, counts),
            "the same counts are not new"
        );
        kept.save();
        let reopened = DiskCounts::open(dir.path());
        assert_eq!(reopened.get(main, 100, when), Some(counts));
        assert_eq!(reopened.get(main, 101, when), None, "grown since");
        assert_eq!(
            reopened.get(main, 100, when + std::time::Duration::from_secs(1)),
            None
        );
        std::fs::write(dir.path().join(FILE_NAME), "not json").unwrap();
        assert_eq!(DiskCounts::open(dir.path()).get(main, 100, when), None);
    }
}
