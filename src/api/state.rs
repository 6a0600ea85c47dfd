//! The application state every handler shares, and its one assembly from the settings
//! ([`AppState::build`]): the binary, the tests, and the benchmarks all build it there.

use std::sync::Arc;

use super::ApiConfig;
use crate::labels::{Codebooks, LabelPolicy, LabelStore, OpenError};
use crate::search::{Search, SearchConfig};
use crate::store::pg_uploads::PgUploads;
use crate::store::s3_bucket::S3Bucket;
use crate::store::{S3Settings, Store, StoreConfig, StoreError, UploadStoreError, UploadStoreKind};

/// What the application state is built from: the serve settings, read and checked.
#[derive(Debug)]
pub struct AppSettings {
    /// The store's settings.
    pub store: StoreConfig,
    /// The HTTP layer's settings.
    pub api: ApiConfig,
    /// The labeling codebooks.
    pub codebooks: Codebooks,
    /// The label database's URL (SQLite or PostgreSQL).
    pub database_url: String,
    /// Where uploads are kept: the data directory, the PostgreSQL database of
    /// `database_url`, or a bucket with their records in that database.
    pub upload_store: UploadStoreKind,
    /// The bucket, with `--upload-store s3`.
    pub s3: S3Settings,
    /// Reviewers, blind mode, the queue's reservation time and overlap.
    pub label_policy: LabelPolicy,
    /// Full-text search.
    pub search: SearchConfig,
}

/// Why the application state could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The store's data directory cannot be opened.
    #[error("failed to open the data directory")]
    Store(#[source] StoreError),
    /// The label database cannot be opened.
    #[error(transparent)]
    Labels(#[from] OpenError),
    /// The upload store chosen cannot be used (PostgreSQL or S3 without a PostgreSQL
    /// database, S3 without a bucket) or opened.
    #[error(transparent)]
    UploadStore(#[from] UploadStoreError),
}

/// What every handler shares, behind one `Arc`: axum clones the state several times per
/// request (each middleware with state, each extractor), and a clone of one `Arc` is one
/// atomic increment where the four parts' clones were four (their drops took 7% of serving
/// a small body).
#[derive(Debug, Clone)]
pub struct AppState(Arc<SharedState>);

impl AppState {
    /// The state `settings` describe: the store opened on its data directory or, with
    /// uploads kept in PostgreSQL, on the label database, or with uploads kept in a bucket,
    /// on the bucket (checked to answer) and that database (nothing is restored yet:
    /// [`crate::run`] does that in the background, follows the other replicas and sweeps
    /// the bucket), the
    /// label database opened, checking sets against the settings' codebooks, and the search
    /// index opened beside the data directory, told of every change of the store
    /// ([`crate::run`] starts its indexer).
    pub async fn build(settings: AppSettings) -> Result<AppState, BuildError> {
        settings
            .upload_store
            .check(&settings.database_url, &settings.s3)?;
        let search = settings
            .search
            .enabled
            .then(|| Arc::new(Search::open(settings.store.data_dir.as_deref(), &settings.search)));
        let codebooks = settings.codebooks;
        let (store, labels) = match settings.upload_store {
            UploadStoreKind::Local => {
                // First: it creates the data directory, where SQLite's database may go.
                let store = Store::new(settings.store).map_err(BuildError::Store)?;
                let labels =
                    LabelStore::open(&settings.database_url, codebooks.clone(), settings.label_policy)
                        .await?;
                (store, labels)
            }
            kind @ (UploadStoreKind::Postgres | UploadStoreKind::S3) => {
                // Before anything is opened: its settings are checked here.
                let bucket = match kind {
                    UploadStoreKind::S3 => {
                        Some(S3Bucket::open(&settings.s3).map_err(UploadStoreError::from)?)
                    }
                    _ => None,
                };
                // First: its migrations make the uploads' tables.
                let labels =
                    LabelStore::open(&settings.database_url, codebooks.clone(), settings.label_policy)
                        .await?;
                let db = PgUploads::open(&settings.database_url)
                    .await
                    .map_err(UploadStoreError::from)?;
                let store = match bucket {
                    Some(bucket) => {
                        bucket.check().await.map_err(UploadStoreError::from)?;
                        Store::with_s3_uploads(settings.store, Arc::new(db), Arc::new(bucket))
                    }
                    None => Store::with_shared_uploads(settings.store, Arc::new(db)),
                }
                .map_err(BuildError::Store)?;
                (store, labels)
            }
        };
        if let Some(search) = &search {
            store.listen(search.clone());
        }
        Ok(AppState(Arc::new(SharedState {
            store: Arc::new(store),
            config: Arc::new(settings.api),
            codebooks,
            labels: Arc::new(labels),
            search,
        })))
    }
}

impl std::ops::Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// The parts of [`AppState`].
#[derive(Debug)]
pub struct SharedState {
    /// The sessions.
    pub store: Arc<Store>,
    /// HTTP settings.
    pub config: Arc<ApiConfig>,
    /// The labeling codebooks.
    pub codebooks: Codebooks,
    /// The label database (checks sets against the same codebooks).
    pub labels: Arc<LabelStore>,
    /// Full-text search over the sessions' units (`None` when turned off).
    pub search: Option<Arc<Search>>,
}
