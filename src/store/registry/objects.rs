//! Sweeping the bucket of an S3 upload store (`--upload-store s3`): objects that no
//! upload's record names (a deletion whose objects could not be removed, a save that
//! failed or crashed between its objects and its record) are removed once they are old
//! enough that no save in progress can still own them (see [`crate::store::s3_uploads`]).

use std::sync::Arc;

use super::Store;
use crate::store::error::StoreError;
use crate::store::s3_uploads::Swept;
use crate::store::upload_store::UploadStore;

impl Store {
    /// Starts sweeping the bucket now and every hour, in a task of its own, when uploads are
    /// kept in one; abort the task to stop.
    pub fn sweep_objects(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        match &self.uploads {
            Some(UploadStore::S3(s3)) => Some(s3.start_sweeping()),
            _ => None,
        }
    }

    /// Sweeps the bucket once, as if it were `now_ms` (ms since the epoch): what it
    /// removed; `None` when uploads are not kept in a bucket. A time ahead of the clock
    /// sweeps younger objects: for tests, which cannot wait an hour.
    pub async fn sweep_objects_at(&self, now_ms: i64) -> Result<Option<Swept>, StoreError> {
        match &self.uploads {
            Some(UploadStore::S3(s3)) => Ok(Some(s3.sweep(now_ms).await?)),
            _ => Ok(None),
        }
    }
}
