//! Why the store could not do something: the one error type every part of the store
//! answers with.

use crate::core::pipeline::session::NoConversation;
use crate::core::SessionError;

use super::disk::DiskError;

/// Why the store could not do something.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No session has this id.
    #[error("session '{0}' not found")]
    NotFound(String),
    /// Sessions read from a configured directory belong to their owner; they are never
    /// deleted here.
    #[error("session '{0}' is read from a sessions directory and cannot be deleted")]
    ReadOnly(String),
    /// The store was opened to read only ([`super::Store::open_read_only`]): it stores and
    /// deletes nothing.
    #[error("the session store was opened to read only: it stores and deletes nothing")]
    OpenedReadOnly,
    /// The upload holds no conversation: only snapshots, summaries, blank lines, or lines
    /// that could not be read.
    #[error(transparent)]
    NoConversation(#[from] NoConversation),
    /// The session could not be loaded (no main file; a bad line with strict loading).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A file of a session in a sessions directory was refused (a symbolic link, not a
    /// regular file) or could not be read.
    #[error("session '{id}': {source}")]
    SessionFile {
        /// The session.
        id: String,
        /// What went wrong, naming the file relative to its sessions directory.
        source: DiskError,
    },
    /// Storing or reading an upload failed.
    #[error("upload storage failed: {0}")]
    Io(std::io::Error),
    /// The upload storage is full (no space left, quota used up): nothing was stored.
    #[error("upload storage is full: {0}")]
    StorageFull(std::io::Error),
    /// A blocking task panicked or was cancelled.
    #[error("a background task failed: {0}")]
    Task(String),
    /// The PostgreSQL upload store failed, or cannot serve now
    /// ([`super::pg_uploads::UploadDbError::Unavailable`]: the client may retry).
    #[error(transparent)]
    UploadDb(#[from] super::pg_uploads::UploadDbError),
    /// The bucket of the S3 upload store failed, or cannot serve now
    /// ([`super::s3_bucket::BucketError::Unavailable`]: the client may retry).
    #[error(transparent)]
    UploadObjects(#[from] super::s3_bucket::BucketError),
    /// The render budget has no room for the render now; it may have later.
    #[error("too many renders in progress; retry in {} s", retry_after.as_secs())]
    Busy {
        /// When to try again.
        retry_after: std::time::Duration,
    },
}

impl From<std::io::Error> for StoreError {
    /// A failure of the upload storage; a full disk is told apart (the client hears 507).
    fn from(e: std::io::Error) -> StoreError {
        if super::uploads::is_storage_full(&e) {
            StoreError::StorageFull(e)
        } else {
            StoreError::Io(e)
        }
    }
}

impl StoreError {
    /// True when the failure may pass by itself: the shared upload store's database or
    /// bucket cannot serve now. What failed so should be tried again later, not taken as
    /// the session's answer.
    pub fn may_pass(&self) -> bool {
        matches!(
            self,
            StoreError::UploadDb(super::pg_uploads::UploadDbError::Unavailable(_))
                | StoreError::UploadObjects(super::s3_bucket::BucketError::Unavailable(_))
        )
    }

    /// A file of session `id` in a sessions directory went wrong.
    pub(super) fn session_file(id: &str, source: DiskError) -> StoreError {
        StoreError::SessionFile {
            id: id.to_owned(),
            source,
        }
    }
}
