//! Why a search or an index update failed.

use std::path::PathBuf;

/// Why a search or an index update failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query text does not parse (the client's to fix).
    #[error("invalid query: {0}")]
    Query(String),
    /// The index could not be read or written.
    #[error("search index: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// The index's directory could not be prepared.
    #[error("failed to prepare the search index directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A stored marker does not read back.
    #[error("search index holds a malformed marker: {0}")]
    Corrupt(String),
    /// Work handed to the blocking pool failed.
    #[error("a search task failed: {0}")]
    Task(String),
}

impl From<tantivy::query::QueryParserError> for SearchError {
    fn from(e: tantivy::query::QueryParserError) -> SearchError {
        SearchError::Query(e.to_string())
    }
}

impl From<tantivy::directory::error::OpenDirectoryError> for SearchError {
    fn from(e: tantivy::directory::error::OpenDirectoryError) -> SearchError {
        SearchError::Index(e.into())
    }
}

impl From<tokio::task::JoinError> for SearchError {
    fn from(e: tokio::task::JoinError) -> SearchError {
        SearchError::Task(e.to_string())
    }
}
