//! Uploads kept in S3-compatible object storage (`--upload-store s3`): each file of an
//! upload is an object of the bucket ([`super::s3_bucket`]), and its record is a row of the
//! PostgreSQL `uploads` table, as with `--upload-store postgres`, naming the generation of
//! its objects instead of chunks. Replicas follow the rows as they do there (notified
//! inserts and deletions, checks by primary key), so that listings, deletions seen
//! everywhere and the search index work the same; only the files' bytes live elsewhere.
//!
//! - **Saving** writes the objects of a new generation first, then inserts the row with
//!   its notification in one transaction, then answers: an acknowledged upload is in both.
//!   A row already stored (the same content saved before or at the same time, ids being
//!   content-derived) wins: the objects just written are removed and the stored manifest
//!   answered. A save that took longer than [`SAVE_DEADLINE`] to write its objects gives up
//!   before inserting its row.
//! - **Deleting** removes the row (notified) in one transaction, then the objects of the
//!   generation that row named, never another's: the same content saved again meanwhile
//!   through another replica has a generation of its own. Objects a failure or a crash
//!   leaves behind are removed by a sweep.
//! - **Sweeping** ([`S3Uploads::sweep`], at start and every [`SWEEP_INTERVAL`]) removes
//!   the generations no row names that are older than [`SWEEP_AGE`]: no save in progress
//!   has one that old (it would give up first), so none is swept from under a save.
//! - **Reading** fetches the objects named by the row, in ranges; uploads stored with
//!   `--upload-store postgres` (their files in chunks) are read from the chunks.
//!
//! Every method but the sweep blocks, as [`super::shared_uploads`]'s do.

use std::collections::{BTreeSet, HashSet};
use std::io::{Seek, Write};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use super::error::StoreError;
use super::pg_uploads::{FilesAt, StoredFiles, UploadDbError};
use super::s3_bucket::{new_generation, ranges, BucketError, ListedGeneration, S3Bucket};
use super::shared_uploads::{spooling, SharedUploads};
use super::uploads::Manifest;
use crate::core::{SessionInput, SourceFile};

/// How long a save may take to write its objects: past it, it removes them and fails
/// instead of inserting its row, so that a generation this old without a row is no save's
/// in progress.
pub const SAVE_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// How old a generation no row names must be for a sweep to remove it: the save deadline,
/// with room for replicas' clocks that disagree by up to three quarters of an hour (the
/// age is read from the generation's name, written by the clock of the replica that saved
/// it).
pub const SWEEP_AGE: Duration = Duration::from_secs(60 * 60);

/// How often a server sweeps the bucket.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// How many objects a save writes at once.
const PUTS_AT_ONCE: usize = 4;

/// What a sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Generations no row named.
    pub generations: usize,
    /// Their objects.
    pub objects: usize,
}

/// The uploads in the bucket, their rows in PostgreSQL.
#[derive(Debug, Clone)]
pub struct S3Uploads {
    /// The rows (and the uploads stored in chunks before), with the export spool.
    pub shared: SharedUploads,
    /// The objects.
    bucket: Arc<S3Bucket>,
}

impl S3Uploads {
    /// The uploads whose rows are in `shared`'s database and whose files are in `bucket`.
    pub fn new(shared: SharedUploads, bucket: Arc<S3Bucket>) -> S3Uploads {
        S3Uploads { shared, bucket }
    }

    /// Stores `input` under `manifest` (see the module's documentation): the manifest
    /// stored and whether this call stored it.
    pub fn save(&self, manifest: &Manifest, input: &SessionInput) -> Result<(Manifest, bool), StoreError> {
        let db = &self.shared.db;
        // Stored already: nothing to write.
        if let Some(stored) = db.block_on(db.manifest(&manifest.id))? {
            return Ok((stored, false));
        }
        let started = Instant::now();
        let generation = new_generation(now_ms());
        let id = &manifest.id;
        if let Err(e) = db.block_on(self.put_files(id, &generation, input)) {
            self.remove_own(id, &generation);
            return Err(e.into());
        }
        if started.elapsed() > SAVE_DEADLINE {
            self.remove_own(id, &generation);
            return Err(BucketError::Unavailable(format!(
                "writing the upload's files took more than {} minutes",
                SAVE_DEADLINE.as_secs() / 60
            ))
            .into());
        }
        match db.block_on(db.save_objects_row(manifest, input, &generation)) {
            Ok((stored, true)) => Ok((stored, true)),
            Ok((stored, false)) => {
                self.remove_own(id, &generation);
                Ok((stored, false))
            }
            Err(e) => self.after_failed_insert(manifest, &generation, e),
        }
    }

    /// Writes every file of `input` as an object of upload `id`'s `generation`, a few at
    /// once.
    async fn put_files(&self, id: &str, generation: &str, input: &SessionInput) -> Result<(), BucketError> {
        futures_util::stream::iter(input.files.iter().enumerate())
            .map(|(file_no, file)| {
                let key = self.bucket.key(id, generation, file_no);
                async move { self.bucket.put(&key, file.bytes.clone()).await }
            })
            .buffer_unordered(PUTS_AT_ONCE)
            .try_collect()
            .await
    }

    /// The answer to a save whose row could not be inserted (`failure`): the database may
    /// have committed it all the same (a connection lost at the commit), which its row
    /// tells. Its objects are removed only once the row is known not to name them; when
    /// that cannot be known they are left to the sweep.
    fn after_failed_insert(
        &self,
        manifest: &Manifest,
        generation: &str,
        failure: UploadDbError,
    ) -> Result<(Manifest, bool), StoreError> {
        let db = &self.shared.db;
        match db.block_on(db.stored_files(&manifest.id)) {
            Ok(Some(StoredFiles {
                at: FilesAt::Objects(stored),
                ..
            })) if stored == generation => Ok((manifest.clone(), true)),
            Ok(_) => {
                self.remove_own(&manifest.id, generation);
                Err(failure.into())
            }
            Err(_) => {
                tracing::debug!(id = %manifest.id, generation, "objects of a failed save left to the sweep");
                Err(failure.into())
            }
        }
    }

    /// Removes the objects of `generation`, which no row names (this save's); a failure is
    /// logged, and the sweep removes them later.
    fn remove_own(&self, id: &str, generation: &str) {
        let db = &self.shared.db;
        if let Err(e) = db.block_on(self.bucket.remove_generation(id, generation)) {
            tracing::warn!(%id, generation, error = %e, "objects of an upload not stored stay in the bucket until a sweep removes them");
        }
    }

    /// The files of a stored upload, with their original names.
    pub fn read(&self, manifest: &Manifest) -> Result<SessionInput, StoreError> {
        let stored = self.stored_files(&manifest.id)?;
        let FilesAt::Objects(generation) = &stored.at else {
            return self.shared.read(manifest);
        };
        if stored.sizes.len() != manifest.names.len() {
            return Err(UploadDbError::Corrupt {
                id: manifest.id.clone(),
                reason: "its file lengths do not match its names".into(),
            }
            .into());
        }
        let mut files = Vec::with_capacity(stored.sizes.len());
        for (file_no, (name, &size)) in manifest.names.iter().zip(&stored.sizes).enumerate() {
            let mut parts: Vec<Bytes> = Vec::new();
            self.read_object(&manifest.id, generation, file_no, size, |part| {
                parts.push(part);
                Ok(())
            })?;
            files.push(SourceFile::new(name.clone(), joined(parts)));
        }
        Ok(SessionInput::new(files))
    }

    /// The stored upload's main session file with its original name, copied into a spool
    /// file of the data directory (one range in memory at a time) that goes with the
    /// handle.
    pub fn open_main(&self, manifest: &Manifest) -> Result<(String, std::fs::File), StoreError> {
        let stored = self.stored_files(&manifest.id)?;
        let FilesAt::Objects(generation) = &stored.at else {
            return self.shared.open_main(manifest);
        };
        let main = manifest.main_index();
        let size = stored.sizes.get(main).copied().unwrap_or(0);
        let mut file = self.shared.spool_file()?;
        self.read_object(&manifest.id, generation, main, size, |part| {
            file.write_all(&part).map_err(spooling)
        })?;
        file.rewind().map_err(spooling)?;
        Ok((manifest.names.get(main).cloned().unwrap_or_default(), file))
    }

    /// The files of upload `id` as its row says; [`StoreError::NotFound`] when it is not
    /// stored.
    fn stored_files(&self, id: &str) -> Result<StoredFiles, StoreError> {
        let db = &self.shared.db;
        db.block_on(db.stored_files(id))?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))
    }

    /// Hands each range of file `file_no` of upload `id`'s `generation`, `size` bytes, to
    /// `take`, in order.
    fn read_object(
        &self,
        id: &str,
        generation: &str,
        file_no: usize,
        size: u64,
        mut take: impl FnMut(Bytes) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let db = &self.shared.db;
        let key = self.bucket.key(id, generation, file_no);
        for range in ranges(size) {
            match db.block_on(self.bucket.read(&key, range, size)) {
                Ok(part) => take(part)?,
                Err(BucketError::NotFound(_)) => return Err(self.not_found(id, generation, key.as_ref())),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Why object `key` of upload `id`'s `generation` is not found: the upload was deleted
    /// (or stored again) meanwhile, a 404; or its row still names it, and the object is
    /// missing.
    fn not_found(&self, id: &str, generation: &str, key: &str) -> StoreError {
        let db = &self.shared.db;
        match db.block_on(db.stored_files(id)) {
            Ok(Some(StoredFiles {
                at: FilesAt::Objects(stored),
                ..
            })) if stored == generation => BucketError::Missing {
                id: id.to_owned(),
                key: key.to_owned(),
            }
            .into(),
            Ok(_) => StoreError::NotFound(id.to_owned()),
            Err(e) => e.into(),
        }
    }

    /// Removes a stored upload: its row (notified), then its objects; false when the
    /// database no longer had it (deleted through another replica first). Objects that
    /// cannot be removed are logged and left to the sweep: the deletion stands.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let db = &self.shared.db;
        let generation = match db.block_on(db.delete(id))? {
            None => return Ok(false),
            Some(FilesAt::Chunks) => return Ok(true),
            Some(FilesAt::Objects(generation)) => generation,
        };
        if let Err(e) = db.block_on(self.bucket.remove_generation(id, &generation)) {
            tracing::warn!(%id, generation, error = %e, "the objects of a deleted upload stay in the bucket until a sweep removes them");
        }
        Ok(true)
    }

    /// Removes the generations of objects that no row names and that were started more
    /// than [`SWEEP_AGE`] before `now_ms` (see the module's documentation). Async: it runs
    /// as a task of its own.
    pub async fn sweep(&self, now_ms: i64) -> Result<Swept, StoreError> {
        let cutoff = now_ms.saturating_sub(SWEEP_AGE.as_millis() as i64);
        let old: Vec<ListedGeneration> = self
            .bucket
            .generations()
            .await?
            .into_iter()
            .filter(|g| g.created_ms < cutoff)
            .collect();
        if old.is_empty() {
            return Ok(Swept::default());
        }
        let ids: Vec<String> = old
            .iter()
            .map(|g| g.id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let named: HashSet<(String, String)> = self
            .shared
            .db
            .object_generations(&ids)
            .await?
            .into_iter()
            .collect();
        let mut swept = Swept::default();
        for generation in old {
            if named.contains(&(generation.id.clone(), generation.generation.clone())) {
                continue;
            }
            self.bucket.remove(&generation.keys).await?;
            swept.generations += 1;
            swept.objects += generation.keys.len();
        }
        Ok(swept)
    }

    /// Sweeps now and every [`SWEEP_INTERVAL`] in a task of its own, logging what it
    /// removed; abort the task to stop.
    pub fn start_sweeping(&self) -> tokio::task::JoinHandle<()> {
        let uploads = self.clone();
        tokio::spawn(async move {
            loop {
                match uploads.sweep(now_ms()).await {
                    Ok(swept) if swept.objects > 0 => tracing::info!(
                        generations = swept.generations,
                        objects = swept.objects,
                        "removed objects of uploads that were deleted or never stored"
                    ),
                    Ok(_) => tracing::debug!("swept the upload bucket: nothing to remove"),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not sweep the upload bucket; trying again later")
                    }
                }
                tokio::time::sleep(SWEEP_INTERVAL).await;
            }
        })
    }
}

/// The bytes of `parts`, one after the other (the part itself when there is one).
fn joined(parts: Vec<Bytes>) -> Bytes {
    if let [one] = parts.as_slice() {
        return one.clone();
    }
    let mut all = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for part in &parts {
        all.extend_from_slice(part);
    }
    Bytes::from(all)
}

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
