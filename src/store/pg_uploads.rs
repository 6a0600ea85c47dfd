//! Uploads kept in PostgreSQL (`--upload-store postgres`): the database of the labels holds
//! them, so that every replica on it serves every upload.
//!
//! ```text
//! uploads        one row per upload: id, framework, creation time, file names and
//!                lengths, counts (what a local store's manifest.json holds)
//! upload_chunks  the files' bytes: (upload_id, file_no, chunk_no, bytes), 1 MiB chunks
//! ```
//!
//! (`migrations/postgres/0005_uploads.sql`, run with the label store's migrations.) With
//! `--upload-store s3` the row names instead the generation of objects that hold the
//! files in a bucket (`object_generation`, `migrations/postgres/0006_upload_objects.sql`;
//! [`FilesAt`]), and the upload has no chunks. An
//! upload's row and all its chunks are written in one transaction, committed before the
//! upload is acknowledged: once the client has its 200, every replica reads the whole
//! upload, and a crash before the commit leaves nothing of it. The same id written twice at
//! once is stored once: the second insert of the row waits for the first transaction and
//! then does nothing. A deletion removes the row, the chunks with it (`ON DELETE CASCADE`).
//! Each write that changes what is stored notifies [`NOTIFY_CHANNEL`] in its transaction
//! (delivered at commit) with an [`UploadNotice`], which replicas listening apply
//! (see the store's replica following in `registry`).
//!
//! The queries run on the runtime the store was opened on. The store's blocking parts
//! ([`PgUploads::block_on`]) wait for them from the blocking pool or a thread of their own,
//! never from an async worker.

use std::future::Future;
use std::time::Duration;

use futures_util::TryStreamExt;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::Row;

use super::uploads::{Counts, Manifest};
use crate::core::{SessionInput, SourceFile};
use crate::labels::store::{failure_of, redact, redacted_reason, DatabaseFailure, CONNECT_TIMEOUT};

/// The size of a chunk of a stored file (the last chunk of a file is shorter).
pub const CHUNK_BYTES: usize = 1 << 20;

/// The channel uploads and deletions are notified on.
pub const NOTIFY_CHANNEL: &str = "sessiongraph_uploads";

/// How long a request waits for a connection: past it, a database that is down (whose
/// connections are refused, and retried until then) answers 503 instead of holding the
/// request. As the label store's.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections of the pool; one of them is held by the listener of notifications.
const MAX_CONNECTIONS: u32 = 10;

/// How many times a save that finds the id stored, and then gone before it could read it
/// (deleted meanwhile), tries again.
const SAVE_ATTEMPTS: usize = 3;

/// The columns [`manifest_of_row`] reads.
const MANIFEST_COLUMNS: &str =
    "id, framework, created_at_ms, names, message_count, node_count, edge_count, count_rules";

/// Why the upload database could not do something. `Clone`, so that requests sharing one
/// check share its failure too.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UploadDbError {
    /// The database cannot serve now (down, restarting, unreachable, no connection free in
    /// time); the client may retry once it is back, which needs no restart of the server.
    #[error("{0}")]
    Unavailable(String),
    /// The database has no room left (disk full, quota): nothing was stored.
    #[error("the upload database has no space left: {0}")]
    Full(String),
    /// Any other failure of the database.
    #[error("upload database: {0}")]
    Failed(String),
    /// A stored row does not read back as an upload.
    #[error("the upload database holds a malformed upload '{id}': {reason}")]
    Corrupt {
        /// The upload.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The upload's files are kept in object storage (stored by a server with
    /// `--upload-store s3`), which this server does not read.
    #[error(
        "upload '{0}' is kept in object storage (stored with --upload-store s3): serve this \
         database with --upload-store s3"
    )]
    InObjectStorage(String),
    /// The database could not be opened at start.
    #[error("cannot open the upload database {url}: {reason}")]
    Open {
        /// The URL, password redacted.
        url: String,
        /// The driver's message (password redacted), or the wait that ran out.
        reason: String,
    },
}

impl From<sqlx::Error> for UploadDbError {
    /// Sorts a database failure as the label store does: wait (busy, unreachable), free
    /// space (full), or nothing (the rest, a 500 whose cause is logged).
    fn from(e: sqlx::Error) -> UploadDbError {
        match failure_of(&e) {
            Some(DatabaseFailure::Busy) => UploadDbError::Unavailable(
                "The upload database did not hand out a connection in time (busy, or not reachable)".into(),
            ),
            Some(DatabaseFailure::Unreachable) => {
                UploadDbError::Unavailable("The upload database cannot be reached".into())
            }
            Some(DatabaseFailure::Full) => UploadDbError::Full(e.to_string()),
            None => UploadDbError::Failed(e.to_string()),
        }
    }
}

/// What a notification on [`NOTIFY_CHANNEL`] says: `added <id>` or `removed <id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadNotice {
    /// An upload was stored.
    Added(String),
    /// An upload was deleted.
    Removed(String),
}

impl UploadNotice {
    /// Reads a notification's payload; `None` for one this version does not know.
    pub fn parse(payload: &str) -> Option<UploadNotice> {
        match payload.split_once(' ')? {
            ("added", id) => Some(UploadNotice::Added(id.to_owned())),
            ("removed", id) => Some(UploadNotice::Removed(id.to_owned())),
            _ => None,
        }
    }

    /// The payload it is sent as.
    pub fn payload(&self) -> String {
        match self {
            UploadNotice::Added(id) => format!("added {id}"),
            UploadNotice::Removed(id) => format!("removed {id}"),
        }
    }
}

/// Where a stored upload's files are, as its row says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilesAt {
    /// In `upload_chunks` (`--upload-store postgres`, and every row from before object
    /// storage).
    Chunks,
    /// In the objects of this generation in the bucket (`--upload-store s3`).
    Objects(String),
}

impl FilesAt {
    /// Where the files of a row whose `object_generation` is `generation` are.
    fn of_column(generation: Option<String>) -> FilesAt {
        generation.map_or(FilesAt::Chunks, FilesAt::Objects)
    }
}

/// A stored upload's files: their lengths, and where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFiles {
    /// The length of each file in bytes, in upload order.
    pub sizes: Vec<u64>,
    /// Where they are.
    pub at: FilesAt,
}

/// The uploads in PostgreSQL: a pool, and the runtime its queries run on.
#[derive(Debug)]
pub struct PgUploads {
    pool: PgPool,
    /// The runtime the pool was opened on, for [`PgUploads::block_on`].
    runtime: tokio::runtime::Handle,
}

impl PgUploads {
    /// Opens the uploads of the database at `url`, whose migrations have been run (the
    /// label store's, opened first on the same URL, create the tables). Fails at once when
    /// the database does not answer within [`CONNECT_TIMEOUT`] or lacks the tables. Call it
    /// on the runtime that will serve the requests.
    pub async fn open(url: &str) -> Result<PgUploads, UploadDbError> {
        PgUploads::connect(url, false).await
    }

    /// Opens the uploads of the database at `url` as [`PgUploads::open`] does, to read
    /// them only: every transaction of its connections is read only
    /// (`default_transaction_read_only`), so that the database refuses any write through
    /// it. For a command that only reads (`labels export`).
    pub async fn open_read_only(url: &str) -> Result<PgUploads, UploadDbError> {
        PgUploads::connect(url, true).await
    }

    /// The pool on `url`, its transactions read only when `read_only`, checked to have the
    /// uploads' table.
    async fn connect(url: &str, read_only: bool) -> Result<PgUploads, UploadDbError> {
        let failed = |reason: String| UploadDbError::Open {
            url: redact(url),
            reason,
        };
        let mut options: PgConnectOptions = url.parse().map_err(|e| failed(redacted_reason(url, &e)))?;
        if read_only {
            options = options.options([("default_transaction_read_only", "on")]);
        }
        let connecting = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options);
        let pool = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
            Ok(Ok(pool)) => pool,
            Ok(Err(e)) => return Err(failed(redacted_reason(url, &e))),
            Err(_) => {
                return Err(failed(format!(
                    "no connection within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        };
        sqlx::query("SELECT 1 FROM uploads LIMIT 0")
            .execute(&pool)
            .await
            .map_err(|e| failed(redacted_reason(url, &e)))?;
        Ok(PgUploads {
            pool,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// Runs `work` (queries of this store) to its end, blocking the thread: for the
    /// store's blocking parts, on the blocking pool or a thread of their own. Never call it
    /// on an async worker (the runtime refuses, with a panic).
    pub fn block_on<T>(&self, work: impl Future<Output = T>) -> T {
        self.runtime.block_on(work)
    }

    /// Closes the pool (waits for connections in use; the listener's ends its wait).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// True once [`PgUploads::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.pool.is_closed()
    }

    /// Stores `input` under `manifest`, in one transaction with its notification. Returns
    /// the manifest stored and whether this call stored it: when the id is stored already
    /// (by this replica or another; ids are content-derived, so the files are the same),
    /// nothing is written and the stored manifest (its creation time) is returned.
    pub async fn save(
        &self,
        manifest: &Manifest,
        input: &SessionInput,
    ) -> Result<(Manifest, bool), UploadDbError> {
        self.save_as(manifest, input, &FilesAt::Chunks).await
    }

    /// Stores the row of an upload whose files are already in the objects of `generation`
    /// (`--upload-store s3`), in one transaction with its notification. Returns as
    /// [`PgUploads::save`] does: when the id is stored already, nothing is written (the
    /// caller's objects are then its own to remove) and the stored manifest is returned.
    pub async fn save_objects_row(
        &self,
        manifest: &Manifest,
        input: &SessionInput,
        generation: &str,
    ) -> Result<(Manifest, bool), UploadDbError> {
        self.save_as(manifest, input, &FilesAt::Objects(generation.to_owned()))
            .await
    }

    /// [`PgUploads::save`], the files written where `at` says: as chunks in the same
    /// transaction, or (objects) already written.
    async fn save_as(
        &self,
        manifest: &Manifest,
        input: &SessionInput,
        at: &FilesAt,
    ) -> Result<(Manifest, bool), UploadDbError> {
        for _ in 0..SAVE_ATTEMPTS {
            let mut tx = self.pool.begin().await?;
            if insert_upload(&mut tx, manifest, input, at).await? {
                if *at == FilesAt::Chunks {
                    insert_chunks(&mut tx, &manifest.id, input).await?;
                }
                notify(&mut tx, &UploadNotice::Added(manifest.id.clone())).await?;
                tx.commit().await?;
                return Ok((manifest.clone(), true));
            }
            let stored = select_manifest(&mut tx, &manifest.id).await?;
            tx.rollback().await?;
            if let Some(stored) = stored {
                return Ok((stored, false));
            }
        }
        Err(UploadDbError::Failed(format!(
            "upload '{}' kept being deleted while it was stored again",
            manifest.id
        )))
    }

    /// The manifest of upload `id`; `None` when it is not stored.
    pub async fn manifest(&self, id: &str) -> Result<Option<Manifest>, UploadDbError> {
        let mut conn = self.pool.acquire().await?;
        select_manifest(&mut conn, id).await
    }

    /// The manifests of those of `ids` that are stored.
    pub async fn manifests(&self, ids: &[String]) -> Result<Vec<Manifest>, UploadDbError> {
        let rows = sqlx::query(&format!(
            "SELECT {MANIFEST_COLUMNS} FROM uploads WHERE id = ANY($1) ORDER BY id"
        ))
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(manifest_of_row).collect()
    }

    /// The id of every stored upload.
    pub async fn ids(&self) -> Result<Vec<String>, UploadDbError> {
        Ok(sqlx::query_scalar("SELECT id FROM uploads")
            .fetch_all(&self.pool)
            .await?)
    }

    /// True when upload `id` is stored.
    pub async fn exists(&self, id: &str) -> Result<bool, UploadDbError> {
        Ok(
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM uploads WHERE id = $1)")
                .bind(id)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// The files of upload `id`: their lengths and where they are; `None` when it is not
    /// stored.
    pub async fn stored_files(&self, id: &str) -> Result<Option<StoredFiles>, UploadDbError> {
        let row: Option<(Vec<i64>, Option<String>)> =
            sqlx::query_as("SELECT file_sizes, object_generation FROM uploads WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(sizes, generation)| StoredFiles {
            sizes: sizes.iter().map(|&n| u64::try_from(n).unwrap_or(0)).collect(),
            at: FilesAt::of_column(generation),
        }))
    }

    /// Which of the uploads `ids` keep their files in object storage, and in which
    /// generation: `(id, generation)` pairs.
    pub async fn object_generations(&self, ids: &[String]) -> Result<Vec<(String, String)>, UploadDbError> {
        Ok(sqlx::query_as(
            "SELECT id, object_generation FROM uploads \
             WHERE id = ANY($1) AND object_generation IS NOT NULL",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The length of each file of upload `id`, in bytes; `None` when it is not stored.
    pub async fn file_sizes(&self, id: &str) -> Result<Option<Vec<u64>>, UploadDbError> {
        let sizes: Option<Vec<i64>> = sqlx::query_scalar("SELECT file_sizes FROM uploads WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(sizes.map(|s| s.iter().map(|&n| u64::try_from(n).unwrap_or(0)).collect()))
    }

    /// The files of the upload `manifest` describes, with their original names, read in one
    /// snapshot; `None` when it is not stored (deleted).
    /// [`UploadDbError::InObjectStorage`] when its files are not chunks here.
    pub async fn read(&self, manifest: &Manifest) -> Result<Option<SessionInput>, UploadDbError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let Some((sizes, generation)) = select_sizes(&mut tx, &manifest.id).await? else {
            return Ok(None);
        };
        if generation.is_some() {
            return Err(UploadDbError::InObjectStorage(manifest.id.clone()));
        }
        let corrupt = |reason: String| UploadDbError::Corrupt {
            id: manifest.id.clone(),
            reason,
        };
        if sizes.len() != manifest.names.len() {
            return Err(corrupt("its file lengths do not match its names".into()));
        }
        let mut files = sizes
            .iter()
            .map(|&size| with_capacity(size).ok_or_else(|| corrupt(format!("a file length of {size}"))))
            .collect::<Result<Vec<Vec<u8>>, _>>()?;
        let mut rows = sqlx::query(
            "SELECT file_no, bytes FROM upload_chunks WHERE upload_id = $1 ORDER BY file_no, chunk_no",
        )
        .bind(&manifest.id)
        .fetch(&mut *tx);
        while let Some(row) = rows.try_next().await? {
            let file_no: i32 = row.try_get(0)?;
            let bytes: &[u8] = row.try_get(1)?;
            let file = usize::try_from(file_no)
                .ok()
                .and_then(|n| files.get_mut(n))
                .ok_or_else(|| corrupt(format!("a chunk of file {file_no}")))?;
            file.extend_from_slice(bytes);
        }
        drop(rows);
        tx.commit().await?;
        if files.iter().zip(&sizes).any(|(f, &size)| f.len() as i64 != size) {
            return Err(corrupt("its chunks do not add up to its file lengths".into()));
        }
        let files = manifest
            .names
            .iter()
            .zip(files)
            .map(|(name, bytes)| SourceFile::new(name.clone(), bytes))
            .collect();
        Ok(Some(SessionInput::new(files)))
    }

    /// Chunk `chunk_no` of file `file_no` of upload `id` (see [`CHUNK_BYTES`]); `None`
    /// when there is none: the upload is not stored (deleted), or the file is shorter.
    pub async fn chunk(
        &self,
        id: &str,
        file_no: usize,
        chunk_no: usize,
    ) -> Result<Option<Vec<u8>>, UploadDbError> {
        Ok(sqlx::query_scalar(
            "SELECT bytes FROM upload_chunks WHERE upload_id = $1 AND file_no = $2 AND chunk_no = $3",
        )
        .bind(id)
        .bind(as_i32(file_no)?)
        .bind(as_i32(chunk_no)?)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Replaces the counts stored with upload `manifest.id` by `manifest.counts`.
    pub async fn update_counts(&self, manifest: &Manifest) -> Result<(), UploadDbError> {
        let c = &manifest.counts;
        sqlx::query(
            "UPDATE uploads SET message_count = $2, node_count = $3, edge_count = $4, count_rules = $5 \
             WHERE id = $1",
        )
        .bind(&manifest.id)
        .bind(as_i64(c.message_count))
        .bind(as_i64(c.node_count))
        .bind(as_i64(c.edge_count))
        .bind(i32::try_from(c.rules).unwrap_or(i32::MAX))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes upload `id` (its chunks with it), in one transaction with its notification:
    /// where its files were (objects are the caller's to remove, once this returns); `None`
    /// when it was not stored (another replica deleted it first).
    pub async fn delete(&self, id: &str) -> Result<Option<FilesAt>, UploadDbError> {
        let mut tx = self.pool.begin().await?;
        let deleted: Option<Option<String>> =
            sqlx::query_scalar("DELETE FROM uploads WHERE id = $1 RETURNING object_generation")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        if deleted.is_some() {
            notify(&mut tx, &UploadNotice::Removed(id.to_owned())).await?;
        }
        tx.commit().await?;
        Ok(deleted.map(FilesAt::of_column))
    }

    /// A listener of [`NOTIFY_CHANNEL`], on a connection of its own (one of the pool's,
    /// held while it lives).
    pub async fn listen(&self) -> Result<PgListener, UploadDbError> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(NOTIFY_CHANNEL).await?;
        Ok(listener)
    }
}

/// A transaction of the upload database.
type Tx<'c> = sqlx::Transaction<'c, sqlx::Postgres>;

/// Inserts `manifest`'s row, its files kept where `at` says, unless one of its id is stored
/// (or being stored: the insert waits for that transaction); true when it inserted it.
async fn insert_upload(
    tx: &mut Tx<'_>,
    manifest: &Manifest,
    input: &SessionInput,
    at: &FilesAt,
) -> Result<bool, UploadDbError> {
    let sizes: Vec<i64> = input.files.iter().map(|f| as_i64(f.bytes.len())).collect();
    let c = &manifest.counts;
    let inserted = sqlx::query(
        "INSERT INTO uploads (id, framework, created_at_ms, names, file_sizes, message_count, \
         node_count, edge_count, count_rules, object_generation) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&manifest.id)
    .bind(&manifest.framework)
    .bind(manifest.created_at_ms)
    .bind(&manifest.names)
    .bind(&sizes)
    .bind(as_i64(c.message_count))
    .bind(as_i64(c.node_count))
    .bind(as_i64(c.edge_count))
    .bind(i32::try_from(c.rules).unwrap_or(i32::MAX))
    .bind(match at {
        FilesAt::Chunks => None,
        FilesAt::Objects(generation) => Some(generation.as_str()),
    })
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// Inserts every file of `input` as upload `id`'s chunks.
async fn insert_chunks(tx: &mut Tx<'_>, id: &str, input: &SessionInput) -> Result<(), UploadDbError> {
    for (file_no, file) in input.files.iter().enumerate() {
        for (chunk_no, chunk) in file.bytes.chunks(CHUNK_BYTES).enumerate() {
            sqlx::query(
                "INSERT INTO upload_chunks (upload_id, file_no, chunk_no, bytes) VALUES ($1, $2, $3, $4)",
            )
            .bind(id)
            .bind(as_i32(file_no)?)
            .bind(as_i32(chunk_no)?)
            .bind(chunk)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

/// Notifies `notice` on [`NOTIFY_CHANNEL`], delivered when `tx` commits.
async fn notify(tx: &mut Tx<'_>, notice: &UploadNotice) -> Result<(), UploadDbError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(NOTIFY_CHANNEL)
        .bind(notice.payload())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The manifest of upload `id` on `conn`; `None` when it is not stored.
async fn select_manifest(conn: &mut sqlx::PgConnection, id: &str) -> Result<Option<Manifest>, UploadDbError> {
    let row = sqlx::query(&format!("SELECT {MANIFEST_COLUMNS} FROM uploads WHERE id = $1"))
        .bind(id)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(manifest_of_row).transpose()
}

/// The file lengths of upload `id`, and the generation of its objects if it has some;
/// `None` when it is not stored.
async fn select_sizes(
    tx: &mut Tx<'_>,
    id: &str,
) -> Result<Option<(Vec<i64>, Option<String>)>, UploadDbError> {
    Ok(
        sqlx::query_as("SELECT file_sizes, object_generation FROM uploads WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// The manifest a row of [`MANIFEST_COLUMNS`] holds.
fn manifest_of_row(row: &PgRow) -> Result<Manifest, UploadDbError> {
    let id: String = row.try_get("id")?;
    let count = |column: &str| -> Result<usize, UploadDbError> {
        let n: i64 = row.try_get(column)?;
        usize::try_from(n).map_err(|_| UploadDbError::Corrupt {
            id: id.clone(),
            reason: format!("{column} is {n}"),
        })
    };
    let counts = Counts {
        message_count: count("message_count")?,
        node_count: count("node_count")?,
        edge_count: count("edge_count")?,
        rules: u32::try_from(row.try_get::<i32, _>("count_rules")?).unwrap_or(0),
    };
    Ok(Manifest {
        framework: row.try_get("framework")?,
        created_at_ms: row.try_get("created_at_ms")?,
        names: row.try_get("names")?,
        counts,
        id,
    })
}

/// An empty buffer with room for `size` bytes; `None` when `size` is negative or cannot be
/// had.
fn with_capacity(size: i64) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
    buffer.try_reserve_exact(usize::try_from(size).ok()?).ok()?;
    Some(buffer)
}

/// `n` as a BIGINT.
fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `n` as an INTEGER (a file's or chunk's number).
fn as_i32(n: usize) -> Result<i32, UploadDbError> {
    i32::try_from(n)
        .map_err(|_| UploadDbError::Failed(format!("{n} files or chunks are more than a row can number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_read_back_as_sent_and_unknown_ones_are_ignored() {
        for notice in [
            UploadNotice::Added("0123abcd".into()),
            UploadNotice::Removed("0123abcd".into()),
        ] {
            assert_eq!(UploadNotice::parse(&notice.payload()), Some(notice));
        }
        assert_eq!(UploadNotice::parse("renamed 0123"), None);
        assert_eq!(UploadNotice::parse("added"), None);
    }

    #[test]
    fn impossible_file_lengths_are_refused_not_allocated() {
        assert!(with_capacity(-1).is_none());
        assert!(with_capacity(i64::MAX).is_none());
        assert_eq!(with_capacity(10).map(|b| b.capacity() >= 10), Some(true));
    }
}
