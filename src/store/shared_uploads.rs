//! Uploads kept in PostgreSQL (`--upload-store postgres`), as the store reads and writes
//! them: the database ([`super::pg_uploads`]) and the spool directory exports of them are
//! copied through (none when opened to read only). Every method blocks, waiting for the
//! database's queries on the runtime it was opened on: call them on the blocking pool or a
//! thread of their own.
//!
//! The S3 store ([`super::s3_uploads`]) keeps its rows in the same database and reads the
//! uploads stored before it (their files in chunks) through this one.

use std::io::{Seek, Write};
use std::path::Path;
use std::sync::Arc;

use super::error::StoreError;
use super::pg_uploads::{FilesAt, PgUploads, CHUNK_BYTES};
use super::uploads::{Manifest, UploadDir};
use crate::core::SessionInput;

/// The uploads in PostgreSQL, with the directory exports of them are spooled through.
#[derive(Debug, Clone)]
pub struct SharedUploads {
    /// The database.
    pub db: Arc<PgUploads>,
    /// `<data-dir>/uploads`, holding nothing but files being exported; `None` when opened
    /// to read only ([`SharedUploads::read_only`]).
    spool: Option<UploadDir>,
}

impl SharedUploads {
    /// The uploads in `db`, exports spooled through `<data_dir>/uploads` (created if needed,
    /// leftovers of an earlier run removed). Uploads a local store left there are not
    /// served: they are counted in the log, which names `store` (`--upload-store`).
    pub fn open(db: Arc<PgUploads>, data_dir: &Path, store: &str) -> Result<SharedUploads, StoreError> {
        let (spool, _) = UploadDir::open(data_dir)?;
        let left = spool.manifests().map_or(0, |stored| stored.manifests.len());
        if left > 0 {
            tracing::warn!(
                uploads = left,
                dir = %data_dir.join("uploads").display(),
                "uploads stored in the data directory are not served with --upload-store {store}"
            );
        }
        Ok(SharedUploads {
            db,
            spool: Some(spool),
        })
    }

    /// The uploads in `db` (opened with [`PgUploads::open_read_only`]), to read only:
    /// no directory is created or cleaned, and nothing is spooled (an upload's files are
    /// read, never copied out: [`SharedUploads::spool_file`] answers
    /// [`StoreError::OpenedReadOnly`]). For a command that only reads (`labels export`).
    pub fn read_only(db: Arc<PgUploads>) -> SharedUploads {
        SharedUploads { db, spool: None }
    }

    /// Stores `input` under `manifest`: the manifest stored and whether this call stored
    /// it (see [`PgUploads::save`]).
    pub fn save(&self, manifest: &Manifest, input: &SessionInput) -> Result<(Manifest, bool), StoreError> {
        Ok(self.db.block_on(self.db.save(manifest, input))?)
    }

    /// The files of a stored upload, with their original names.
    pub fn read(&self, manifest: &Manifest) -> Result<SessionInput, StoreError> {
        self.db
            .block_on(self.db.read(manifest))?
            .ok_or_else(|| StoreError::NotFound(manifest.id.clone()))
    }

    /// The stored upload's main session file with its original name, copied into a spool
    /// file of the data directory that goes with the handle.
    pub fn open_main(&self, manifest: &Manifest) -> Result<(String, std::fs::File), StoreError> {
        let main = manifest.main_index();
        let file = self.spool_chunks(&manifest.id, main)?;
        Ok((manifest.names.get(main).cloned().unwrap_or_default(), file))
    }

    /// The bytes of a stored upload's files.
    pub fn stored_bytes(&self, manifest: &Manifest) -> Result<u64, StoreError> {
        self.db
            .block_on(self.db.file_sizes(&manifest.id))?
            .map(|sizes| sizes.iter().sum())
            .ok_or_else(|| StoreError::NotFound(manifest.id.clone()))
    }

    /// Replaces a stored upload's counts with `manifest`'s.
    pub fn rewrite_manifest(&self, manifest: &Manifest) -> Result<(), StoreError> {
        Ok(self.db.block_on(self.db.update_counts(manifest))?)
    }

    /// Removes a stored upload; false when the database no longer had it (deleted through
    /// another replica first).
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.db.block_on(self.db.delete(id))?.is_some())
    }

    /// An empty spool file of the data directory, removed when closed;
    /// [`StoreError::OpenedReadOnly`] when opened to read only.
    pub fn spool_file(&self) -> Result<std::fs::File, StoreError> {
        let spool = self.spool.as_ref().ok_or(StoreError::OpenedReadOnly)?;
        spool.spool_file().map_err(spooling)
    }

    /// File `file_no` of upload `id`, copied chunk by chunk into a spool file (one chunk in
    /// memory at a time), rewound.
    fn spool_chunks(&self, id: &str, file_no: usize) -> Result<std::fs::File, StoreError> {
        let db = &self.db;
        let gone = || StoreError::NotFound(id.to_owned());
        let stored = db.block_on(db.stored_files(id))?.ok_or_else(gone)?;
        if stored.at != FilesAt::Chunks {
            return Err(super::pg_uploads::UploadDbError::InObjectStorage(id.to_owned()).into());
        }
        let size = stored.sizes.get(file_no).copied().unwrap_or(0);
        let mut file = self.spool_file()?;
        let chunks = size.div_ceil(CHUNK_BYTES as u64) as usize;
        for chunk_no in 0..chunks {
            // A chunk missing part way: deleted meanwhile.
            let chunk = db.block_on(db.chunk(id, file_no, chunk_no))?.ok_or_else(gone)?;
            file.write_all(&chunk).map_err(spooling)?;
        }
        file.rewind().map_err(spooling)?;
        Ok(file)
    }
}

/// A spool file that could not be written: the server's trouble, not a full upload store.
pub fn spooling(e: std::io::Error) -> StoreError {
    StoreError::Io(std::io::Error::new(e.kind(), format!("spooling an export: {e}")))
}
