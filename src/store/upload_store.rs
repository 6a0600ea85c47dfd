//! Where uploads are kept (`--upload-store`): in the data directory, this server's alone
//! ([`super::uploads`]); in PostgreSQL, shared by every replica on the database
//! ([`super::shared_uploads`]); or in an S3-compatible bucket, their records in that
//! database ([`super::s3_uploads`]). The store reads and writes uploads through
//! [`UploadStore`] whichever it is; what only a shared store needs (following the other
//! replicas) is the registry's.

use std::path::Path;
use std::sync::Arc;

use super::error::StoreError;
use super::pg_uploads::PgUploads;
use super::s3_bucket::{BucketError, S3Bucket, S3Settings};
use super::s3_uploads::S3Uploads;
use super::shared_uploads::SharedUploads;
use super::uploads::{Manifest, UploadDir};
use crate::core::SessionInput;
use crate::labels::store::{redact, Backend};

/// Which store keeps uploads. An enum of backends, each a variant of [`UploadStore`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum UploadStoreKind {
    /// In the data directory (`<data-dir>/uploads`): served by this server alone.
    #[default]
    Local,
    /// In the PostgreSQL database of `--database-url`: every replica on it serves every
    /// upload.
    Postgres,
    /// In an S3-compatible bucket (`--s3-bucket`), each upload's record in the PostgreSQL
    /// database of `--database-url`: every replica on both serves every upload.
    S3,
}

impl UploadStoreKind {
    /// Its name, as `--upload-store` takes it.
    pub fn name(self) -> &'static str {
        match self {
            UploadStoreKind::Local => "local",
            UploadStoreKind::Postgres => "postgres",
            UploadStoreKind::S3 => "s3",
        }
    }

    /// Whether it can keep uploads with the label database at `database_url` and the
    /// bucket settings `s3`: PostgreSQL and S3 need a PostgreSQL database, S3 a bucket.
    pub fn check(self, database_url: &str, s3: &S3Settings) -> Result<(), UploadStoreError> {
        let kept = match self {
            UploadStoreKind::Local => return Ok(()),
            UploadStoreKind::Postgres => "uploads",
            UploadStoreKind::S3 => "the uploads' records",
        };
        if Backend::of_url(database_url) != Some(Backend::Postgres) {
            return Err(UploadStoreError::NeedsPostgres {
                store: self.name(),
                kept,
                url: redact(database_url),
            });
        }
        if self == UploadStoreKind::S3 && s3.bucket.as_deref().is_none_or(|b| b.trim().is_empty()) {
            return Err(UploadStoreError::NeedsBucket);
        }
        Ok(())
    }
}

/// Why the upload store chosen cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UploadStoreError {
    /// `--upload-store postgres` or `s3` without a PostgreSQL database URL.
    #[error(
        "--upload-store {store} keeps {kept} in the PostgreSQL database of --database-url, \
         but the database is {url} (without --database-url, SESSIONGRAPH_DATABASE_URL or \
         DATABASE_URL the labels are kept in SQLite in the data directory): give \
         --database-url postgres://user:password@host/db, or use --upload-store local"
    )]
    NeedsPostgres {
        /// The store chosen (`--upload-store`).
        store: &'static str,
        /// What it keeps in the database.
        kept: &'static str,
        /// The database's URL, password redacted.
        url: String,
    },
    /// `--upload-store s3` without a bucket.
    #[error(
        "--upload-store s3 keeps uploads in an S3 bucket, but none is given: give \
         --s3-bucket NAME (or SESSIONGRAPH_S3_BUCKET)"
    )]
    NeedsBucket,
    /// The PostgreSQL upload store could not be opened.
    #[error(transparent)]
    Database(#[from] super::pg_uploads::UploadDbError),
    /// The bucket could not be opened.
    #[error(transparent)]
    Bucket(#[from] BucketError),
}

/// The store uploads are kept in, open. Every method blocks: call them on the blocking pool
/// or a thread of their own (PostgreSQL's and the bucket's wait for their requests, run on
/// the runtime the database was opened on).
#[derive(Debug, Clone)]
pub enum UploadStore {
    /// `<data-dir>/uploads`.
    Local(UploadDir),
    /// PostgreSQL.
    Postgres(SharedUploads),
    /// An S3-compatible bucket, the records in PostgreSQL.
    S3(S3Uploads),
}

impl UploadStore {
    /// The uploads `kind` keeps, opened to read only (for a command that only reads,
    /// `labels export`), with the settings a server is given: nothing is created, written,
    /// swept or removed, in the data directory, the database or the bucket.
    ///
    /// - `local`: `<data_dir>/uploads` as it is; `None` when it does not exist (no upload
    ///   was ever stored there).
    /// - `postgres`: the database at `database_url` (checked to be PostgreSQL), on
    ///   connections whose transactions are read only, with no spool directory: uploads
    ///   are read, never copied out.
    /// - `s3`: the same, and the bucket `s3` names, checked to answer (a listing).
    ///
    /// Call it on the runtime that will read them (see [`PgUploads::open`]).
    pub async fn open_read_only(
        kind: UploadStoreKind,
        data_dir: &Path,
        database_url: &str,
        s3: &S3Settings,
    ) -> Result<Option<UploadStore>, UploadStoreError> {
        kind.check(database_url, s3)?;
        // Before anything is opened: its settings are checked here.
        let bucket = match kind {
            UploadStoreKind::Local => return Ok(UploadDir::existing(data_dir).map(UploadStore::Local)),
            UploadStoreKind::Postgres => None,
            UploadStoreKind::S3 => Some(S3Bucket::open(s3)?),
        };
        let db = PgUploads::open_read_only(database_url).await?;
        let shared = SharedUploads::read_only(Arc::new(db));
        Ok(Some(match bucket {
            Some(bucket) => {
                bucket.check().await?;
                UploadStore::S3(S3Uploads::new(shared, Arc::new(bucket)))
            }
            None => UploadStore::Postgres(shared),
        }))
    }

    /// The PostgreSQL database of the uploads' records, when every replica on it shares
    /// them (PostgreSQL and S3).
    pub fn shared(&self) -> Option<&Arc<PgUploads>> {
        match self {
            UploadStore::Local(_) => None,
            UploadStore::Postgres(shared) => Some(&shared.db),
            UploadStore::S3(s3) => Some(&s3.shared.db),
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
            UploadStore::Postgres(shared) => shared.save(manifest, input),
            UploadStore::S3(s3) => s3.save(manifest, input),
        }
    }

    /// The files of a stored upload, with their original names.
    pub fn read(&self, manifest: &Manifest) -> Result<SessionInput, StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.read(manifest)?),
            UploadStore::Postgres(shared) => shared.read(manifest),
            UploadStore::S3(s3) => s3.read(manifest),
        }
    }

    /// The stored upload's main session file with its original name, opened: a handle
    /// that stays readable if the upload is deleted meanwhile. From PostgreSQL or a bucket
    /// it is first copied into a spool file of the data directory, which goes with the
    /// handle.
    pub fn open_main(&self, manifest: &Manifest) -> Result<(String, std::fs::File), StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.open_main(manifest)?),
            UploadStore::Postgres(shared) => shared.open_main(manifest),
            UploadStore::S3(s3) => s3.open_main(manifest),
        }
    }

    /// The bytes of a stored upload's files.
    pub fn stored_bytes(&self, manifest: &Manifest) -> Result<u64, StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.stored_bytes(manifest)?),
            UploadStore::Postgres(shared) => shared.stored_bytes(manifest),
            // The row holds the lengths, wherever the files are.
            UploadStore::S3(s3) => s3.shared.stored_bytes(manifest),
        }
    }

    /// Replaces a stored upload's manifest (its counts) with `manifest`.
    pub fn rewrite_manifest(&self, manifest: &Manifest) -> Result<(), StoreError> {
        match self {
            UploadStore::Local(dir) => Ok(dir.rewrite_manifest(manifest)?),
            UploadStore::Postgres(shared) => shared.rewrite_manifest(manifest),
            UploadStore::S3(s3) => s3.shared.rewrite_manifest(manifest),
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
            UploadStore::Postgres(shared) => shared.delete(id),
            UploadStore::S3(s3) => s3.delete(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_uploads_need_a_postgres_database() {
        let sqlite = "sqlite:///srv/data/labels.sqlite3?mode=rwc";
        let none = S3Settings::default();
        assert!(UploadStoreKind::Local.check(sqlite, &none).is_ok());
        let refused = UploadStoreKind::Postgres
            .check(sqlite, &none)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("--upload-store postgres"), "{refused}");
        assert!(refused.contains("--database-url postgres://"), "{refused}");
        assert!(refused.contains(sqlite), "{refused}");
        assert!(UploadStoreKind::Postgres
            .check("postgres://u:secret@db/sg", &none)
            .is_ok());
    }

    #[test]
    fn s3_uploads_need_a_postgres_database_and_a_bucket() {
        let bucket = S3Settings {
            bucket: Some("sessions".into()),
            ..S3Settings::default()
        };
        let sqlite = "sqlite:///srv/data/labels.sqlite3?mode=rwc";
        let refused = UploadStoreKind::S3
            .check(sqlite, &bucket)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("--upload-store s3"), "{refused}");
        assert!(refused.contains("records"), "{refused}");
        assert!(refused.contains("--database-url postgres://"), "{refused}");
        let postgres = "postgres://u:secret@db/sg";
        for missing in [
            S3Settings::default(),
            S3Settings {
                bucket: Some(" ".into()),
                ..S3Settings::default()
            },
        ] {
            let refused = UploadStoreKind::S3
                .check(postgres, &missing)
                .unwrap_err()
                .to_string();
            assert!(refused.contains("--s3-bucket"), "{refused}");
            assert!(refused.contains("SESSIONGRAPH_S3_BUCKET"), "{refused}");
        }
        assert!(UploadStoreKind::S3.check(postgres, &bucket).is_ok());
    }
}
