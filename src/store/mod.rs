//! Where sessions come from and where they live.
//!
//! - [`confined`]: the one way files of a sessions directory are read (no symbolic link
//!   followed, regular files only, never blocking);
//! - [`counts`]: the counts of sessions on disk, kept across restarts;
//! - [`disk`]: reading one session's files the way Claude Code lays them out;
//! - [`mapped`]: files mapped into memory (uploads, the command line's input);
//! - [`scan`]: finding sessions in the configured directories;
//! - [`uploads`]: durable storage of uploads under the data directory;
//! - [`pg_uploads`]: uploads kept in PostgreSQL instead, shared by replicas: the database;
//! - [`shared_uploads`]: those uploads as the store reads and writes them;
//! - [`s3_bucket`]: an S3-compatible bucket holding uploads' files;
//! - [`s3_uploads`]: uploads kept in that bucket, their records in PostgreSQL;
//! - [`upload_store`]: which of them keeps uploads (`--upload-store`);
//! - [`shared_check`]: checks of the shared upload store that requests arriving together
//!   share;
//! - [`registry`]: the store itself: every known session, parsed once on first use,
//!   cached under a memory budget, reloaded when its files change;
//! - [`changes`]: change notices to those who keep something derived from the sessions;
//! - [`bodies`]: the view bodies of a parsed session, kept or rendered per request;
//! - [`error`]: why the store could not do something, the one error of all its parts;
//! - [`budget`]: the memory budget of renders not served from the cache;
//! - [`compress`]: gzip and brotli variants of bodies, made off the async workers;
//! - [`units`]: a session's annotation units as labeling needs them;
//! - [`watch`]: change notices for the files of sessions on disk in memory.

pub mod bodies;
pub mod budget;
pub mod changes;
pub mod compress;
pub mod confined;
pub mod counts;
pub mod cpu_pool;
pub mod disk;
pub mod error;
pub mod mapped;
pub mod pg_uploads;
pub mod registry;
pub mod s3_bucket;
pub mod s3_uploads;
pub mod scan;
pub mod shared_check;
pub mod shared_uploads;
pub mod units;
pub mod upload_store;
pub mod uploads;
pub mod watch;

pub use changes::{Change, ChangeKind, ChangeListener};
pub use error::StoreError;
pub use registry::{FileStamp, Framework, Loaded, MainFile, Slot, Store, StoreConfig};
pub use s3_bucket::S3Settings;
pub use upload_store::{UploadStoreError, UploadStoreKind};

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, whatever a panicking holder left: every critical section of the store leaves
/// its data consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
