//! The index itself: kept in `<data-dir>/search-index/` and opened as it was left when it
//! was written under the current [`SCHEMA_VERSION`], made anew otherwise (its sessions are
//! then all indexed again in the background); in memory without a data directory, or when
//! its directory cannot be used (another process holds it, the disk refuses it).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher};

use super::error::SearchError;
use super::schema::{Fields, SCHEMA_VERSION};
use crate::store::cpu_pool::lower_this_threads_priority;

/// The folder of the data directory the index is kept in.
pub const DIR_NAME: &str = "search-index";

/// The writer's memory, at least and at most: tantivy refuses a writer outside these (it
/// needs 12 MB to work, and counts in 32 bits).
const WRITER_BYTES: std::ops::RangeInclusive<usize> = 15_000_000..=(u32::MAX as usize - 1_000_001);

/// The file beside tantivy's own saying which schema version wrote the index.
const VERSION_FILE: &str = "sessiongraph-search-version";

/// Where the index lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// In this directory: it survives a restart.
    Disk(PathBuf),
    /// In memory: rebuilt at each start.
    Memory,
}

/// The index, its reader and its one writer.
pub struct SearchIndex {
    /// The fields.
    pub fields: Fields,
    index: Index,
    reader: IndexReader,
    /// Only the indexer writes (one writer per index, tantivy's rule); searches never
    /// take it.
    writer: Mutex<IndexWriter>,
    location: Location,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl SearchIndex {
    /// The index of `data_dir` (in memory without one), its writer given `writer_bytes`
    /// of indexing memory. A directory that cannot be used is said in the log and the
    /// index kept in memory.
    pub fn open(data_dir: Option<&Path>, writer_bytes: usize) -> SearchIndex {
        let Some(data_dir) = data_dir else {
            return SearchIndex::in_memory(writer_bytes);
        };
        let dir = data_dir.join(DIR_NAME);
        match SearchIndex::open_dir(&dir, writer_bytes) {
            Ok(index) => index,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "the search index cannot be kept on disk: it is kept in memory and rebuilt at each start");
                SearchIndex::in_memory(writer_bytes)
            }
        }
    }

    /// An empty index in memory. Creating one cannot fail short of memory.
    pub fn in_memory(writer_bytes: usize) -> SearchIndex {
        let fields = Fields::build();
        let index = Index::create_in_ram(fields.schema.clone());
        SearchIndex::with(index, fields, writer_bytes, Location::Memory).expect("an index in memory opens")
    }

    /// The index in `dir`: as it was left if current, else made anew.
    fn open_dir(dir: &Path, writer_bytes: usize) -> Result<SearchIndex, SearchError> {
        let io = |source| SearchError::Directory {
            path: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let fields = Fields::build();
        let kept = match std::fs::read_to_string(dir.join(VERSION_FILE)) {
            Ok(v) if v.trim() == SCHEMA_VERSION.to_string() => match Index::open_in_dir(dir) {
                Ok(index) if index.schema() == fields.schema => Some(index),
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "the search index cannot be read: it is rebuilt");
                    None
                }
            },
            _ => None,
        };
        let index = match kept {
            Some(index) => index,
            None => {
                tracing::info!(dir = %dir.display(), version = SCHEMA_VERSION, "creating the search index");
                empty_dir(dir).map_err(io)?;
                let index = Index::create_in_dir(dir, fields.schema.clone())?;
                // Written last: an index whose making was cut short has none, and is made
                // anew at the next start.
                std::fs::write(dir.join(VERSION_FILE), SCHEMA_VERSION.to_string()).map_err(io)?;
                index
            }
        };
        SearchIndex::with(index, fields, writer_bytes, Location::Disk(dir.to_owned()))
    }

    fn with(
        index: Index,
        fields: Fields,
        writer_bytes: usize,
        location: Location,
    ) -> Result<SearchIndex, SearchError> {
        // One indexing thread: indexing runs beside the requests served, on a machine that
        // may have few cores. Made on a thread of lowered priority, whose nice value the
        // writer's merge threads inherit (its indexing threads are started anew by each
        // commit, from the indexer's own lowered thread).
        let writer = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    lower_this_threads_priority();
                    let bytes = writer_bytes.clamp(*WRITER_BYTES.start(), *WRITER_BYTES.end());
                    index.writer_with_num_threads(1, bytes)
                })
                .join()
        })
        .map_err(|_| SearchError::Task("making the index writer panicked".into()))??;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(SearchIndex {
            fields,
            index,
            reader,
            writer: Mutex::new(writer),
            location,
        })
    }

    /// Where it lives.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// A searcher over the last commit the reader was reloaded at.
    pub fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }

    /// The writer (blocking while another update holds it).
    pub fn writer(&self) -> MutexGuard<'_, IndexWriter> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes the last commit visible to searches.
    pub fn reload(&self) -> Result<(), SearchError> {
        Ok(self.reader.reload()?)
    }
}

/// Removes everything in `dir` (the directory stays).
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: usize = 15_000_000;

    #[test]
    fn an_index_of_another_version_is_made_anew_and_a_current_one_kept() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join(DIR_NAME);
        {
            let index = SearchIndex::open(Some(data.path()), BYTES);
            assert_eq!(index.location(), &Location::Disk(dir.clone()));
            let mut writer = index.writer();
            writer
                .add_document(index.fields.marker_document("s", "f", "[]"))
                .unwrap();
            writer.commit().unwrap();
        }
        let docs = |index: &SearchIndex| {
            index.reload().unwrap();
            index.searcher().num_docs()
        };
        let kept = SearchIndex::open(Some(data.path()), BYTES);
        assert_eq!(docs(&kept), 1, "the current index is kept");
        drop(kept);

        std::fs::write(dir.join(VERSION_FILE), "0").unwrap();
        std::fs::write(dir.join("stray-file"), "x").unwrap();
        let remade = SearchIndex::open(Some(data.path()), BYTES);
        assert_eq!(docs(&remade), 0, "another version's index is made anew");
        assert!(!dir.join("stray-file").exists());
        assert_eq!(
            std::fs::read_to_string(dir.join(VERSION_FILE)).unwrap(),
            SCHEMA_VERSION.to_string()
        );
    }

    #[test]
    fn a_directory_held_by_another_writer_leaves_the_index_in_memory() {
        let data = tempfile::tempdir().unwrap();
        let first = SearchIndex::open(Some(data.path()), BYTES);
        let second = SearchIndex::open(Some(data.path()), BYTES);
        assert!(matches!(first.location(), Location::Disk(_)));
        assert_eq!(second.location(), &Location::Memory);
        assert_eq!(SearchIndex::open(None, BYTES).location(), &Location::Memory);
        // A writer's memory outside tantivy's bounds is brought within them.
        assert_eq!(SearchIndex::open(None, 1).location(), &Location::Memory);
        assert!(
            matches!(
                SearchIndex::open(Some(data.path()), usize::MAX).location(),
                Location::Memory
            ),
            "the directory is still held by the first"
        );
    }
}
