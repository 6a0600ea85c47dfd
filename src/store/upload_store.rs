//! Where uploads are kept (`--upload-store`): in the data directory, this server's alone
//! ([`super::uploads`]), or in PostgreSQL, shared by every replica on the database
//! ([`super::pg_uploads`]). The store reads and writes uploads through [`UploadStore`]
//! whichever it is; what only a shared store needs (following the other replicas) is the
//! registry's.

use std::io::{Seek, Write};
use std::path::Path;
use std::sync::Arc;

use super::error::StoreError;
use super::pg_uploads::{PgUploads, CHUNK_BYTES};
use super::uploads::{Manifest, UploadDir};
use crate::core::SessionInput;
use crate::labels::store::{redact, Backend};

/// Which store keeps uploads. An enum of backends: one kept elsewhere (an object store)
/// would be another variant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum UploadStoreKind {
    /// In the data directory (`<data-dir>/uploads`): served by this server alone.
    #[default]
    Local,
    /// In the PostgreSQL database of `--database-url`: every replica on it serves every
    /// upload.
    Postgres,
}

impl UploadStoreKind {
    /// Its name, as `--upload-store` takes it.
    pub fn name(self) -> &'static str {
        match self {
            UploadStoreKind::Local => "local",
            UploadStoreKind::Postgres => "postgres",
        }
    }

    /// Whether it can keep uploads with the label database at `database_url`: PostgreSQL
    /// needs a PostgreSQL database.
    pub fn check_database(self, database_url: &str) -> Result<(), UploadStoreError> {
        match self {
            UploadStoreKind::Postgres if Backend::of_url(database_url) != Some(Backend::Postgres) => {
                Err(UploadStoreError::NeedsPostgres(redact(database_url)))
            }
            _ => Ok(()),
        }
    }
}

/// Why the upload store chosen cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UploadStoreError {
    /// `--upload-store postgres` without a PostgreSQL database URL.
    #[error(
        "--upload-store postgres keeps uploads in the PostgreSQL database of --database-url, \
         but the database is {0} (without --database-url, SESSIONGRAPH_DATABASE_URL or \
         DATABASE_URL the labels are kept in SQLite in the data directory): give \
         --database-url postgres://user:password@host/db, or use --upload-store local"
    )]
    NeedsPostgres(String),
    /// The PostgreSQL upload store could not be opened.
    #[error(transparent)]
    Database(#[from] super::pg_uploads::UploadDbError),
}

/// The uploads in PostgreSQL, with the directory exports of them are spooled through.
#[derive(Debug, Clone)]
pub struct SharedUploads {
    /// The database.
    pub db: Arc<PgUploads>,
    /// `<data-dir>/uploads`, holding nothing but files being exported.
    spool: UploadDir,
}

impl SharedUploads {
    /// The uploads in `db`, exports spooled through `<data_dir>/uploads` (created if needed,
    /// leftovers of an earlier run removed). Uploads a local store left there are not
    /// served: they are counted in the log.
    pub fn open(db: Arc<PgUploads>, data_dir: &Path) -> Result<SharedUploads, StoreError> {
        let (spool, _) = UploadDir::open(data_dir)?;
        let left = spool.manifests().map_or(0, |stored| stored.manifests.len());
        if left > 0 {
            tracing::warn!(
                uploads = left,
                dir = %data_dir.join("uploads").display(),
                "uploads stored in the data directory are not served with --upload-store postgres"
            );
        }
        Ok(SharedUploads { db, spool })
    }
}

/// The store uploads are kept in, open. Every method blocks: call them on the blocking pool
/// or a thread of their own (PostgreSQL's wait for their queries, run on the runtime the
/// database was opened on).
#[derive(Debug, Clone)]
pub enum UploadStore {
    /// `<data-dir>/uploads`.
    Local(UploadDir),
    /// PostgreSQL.
    Postgres(SharedUploads),
}

impl UploadStore {
    /// The PostgreSQL database, when uploads are kept there.
    pub fn shared(&self) -> Option<&Arc<PgUploads>> {
        match self {
            UploadStore::Local(_) => None,
            UploadStore::Postgres(shared) => Some(&shared.db),
        }
    }

    /// Stores `input` under `manifest` durably. Returns the manifest stored and whether
    /// this call stored it; saving an id already stored writes nothing (ids are
    /// content-derived), and gives the stored manifest where the store knows it.
    pub fn save(&self, manifest: &Manifest, input: &SessionInput) -> Result<(Manifest, bool), StoreError> {
        match self {
            UploadStore::Local(dir) => {
                dir.save(manifest, input)?;
                Ok((manifest.clone(), true))
            }
            UploadStore::Postgres(shared) => Ok(shared.db.block_on(shared.db.save(manifest, input))?),
        }
    }

    /// The files of a stored upload, with their original names.
    pub fn read(&self, manifest: &Manifest) -> Result<SessionInput, StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.read(manifest)?),
            UploadStore::Postgres(shared) => shared
                .db
                .block_on(shared.db.read(manifest))?
                .ok_or_else(|| StoreError::NotFound(manifest.id.clone())),
        }
    }

    /// The stored upload's main session file with its original name, opened: a handle
    /// that stays readable if the upload is deleted meanwhile. From PostgreSQL it is first
    /// copied into a spool file of the data directory, which goes with the handle.
    pub fn open_main(&self, manifest: &Manifest) -> Result<(String, std::fs::File), StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.open_main(manifest)?),
            UploadStore::Postgres(shared) => {
                let main = manifest.main_index();
                let file = spool_file(shared, &manifest.id, main)?;
                Ok((manifest.names.get(main).cloned().unwrap_or_default(), file))
            }
        }
    }

    /// The bytes of a stored upload's files.
    pub fn stored_bytes(&self, manifest: &Manifest) -> Result<u64, StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.stored_bytes(manifest)?),
            UploadStore::Postgres(shared) => shared
                .db
                .block_on(shared.db.file_sizes(&manifest.id))?
                .map(|sizes| sizes.iter().sum())
                .ok_or_else(|| StoreError::NotFound(manifest.id.clone())),
        }
    }

    /// Replaces a stored upload's manifest (its counts) with `manifest`.
    pub fn rewrite_manifest(&self, manifest: &Manifest) -> Result<(), StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.rewrite_manifest(manifest)?),
            UploadStore::Postgres(shared) => Ok(shared.db.block_on(shared.db.update_counts(manifest))?),
        }
    }

    /// Removes a stored upload; false when the store no longer had it (deleted through
    /// another replica first). A local store has no other writer: it says true.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        match self {
            UploadStore::Local(dir) => {
                dir.delete(id)?;
                Ok(true)
            }
            UploadStore::Postgres(shared) => Ok(shared.db.block_on(shared.db.delete(id))?),
        }
    }
}

/// File `file_no` of upload `id` in PostgreSQL, copied chunk by chunk into a spool file
/// (one chunk in memory at a time), rewound.
fn spool_file(shared: &SharedUploads, id: &str, file_no: usize) -> Result<std::fs::File, StoreError> {
    let db = &shared.db;
    let gone = || StoreError::NotFound(id.to_owned());
    let sizes = db.block_on(db.file_sizes(id))?.ok_or_else(gone)?;
    let size = sizes.get(file_no).copied().unwrap_or(0);
    // A spool that cannot be written is the server's trouble, not a full upload store.
    let spooling =
        |e: std::io::Error| StoreError::Io(std::io::Error::new(e.kind(), format!("spooling an export: {e}")));
    let mut file = shared.spool.spool_file().map_err(spooling)?;
    let chunks = size.div_ceil(CHUNK_BYTES as u64) as usize;
    for chunk_no in 0..chunks {
        // A chunk missing part way: deleted meanwhile.
        let chunk = db.block_on(db.chunk(id, file_no, chunk_no))?.ok_or_else(gone)?;
        file.write_all(&chunk).map_err(spooling)?;
    }
    file.rewind().map_err(spooling)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_uploads_need_a_postgres_database() {
        let sqlite = "sqlite:///srv/data/labels.sqlite3?mode=rwc";
        assert!(UploadStoreKind::Local.check_database(sqlite).is_ok());
        let refused = UploadStoreKind::Postgres
            .check_database(sqlite)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("--upload-store postgres"), "{refused}");
        assert!(refused.contains("--database-url postgres://"), "{refused}");
        assert!(refused.contains(sqlite), "{refused}");
        assert!(UploadStoreKind::Postgres
            .check_database("postgres://u:secret@db/sg")
            .is_ok());
    }
}
