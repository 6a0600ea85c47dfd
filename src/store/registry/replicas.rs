//! Following the other replicas of a shared upload store (`--upload-store postgres`): every
//! replica on one PostgreSQL database serves every upload, and none serves one another
//! has deleted.
//!
//! What this process knows (its slots) is brought in line with what the database holds in
//! three ways:
//!
//! - **Requests** ([`Store::find`], through which every route looks a session up). An
//!   upload id unknown here is looked up in the database and registered, then cached under
//!   the same budgets as any session. An upload known here is first checked to be still
//!   stored: one indexed lookup, shared by the requests that arrive together
//!   ([`crate::store::shared_check`]). This is what makes deletions correct: once another
//!   replica has acknowledged a deletion, no request arriving after it is answered 200
//!   here, whether or not its notification has arrived.
//! - **Listings** ([`Store::list_current`]) read the ids the database holds (one query,
//!   shared likewise), register the uploads new to this process and forget the deleted
//!   ones before listing: an upload acknowledged by another replica is in the next listing
//!   here. Reading every id (16 bytes each) costs less than listing as many sessions.
//! - **Notifications** ([`Store::follow_replicas`]: LISTEN on the channel every upload and
//!   deletion notifies at its commit) apply uploads and deletions as they happen, so that
//!   the change listeners (the search index) hear of them without waiting for a request,
//!   and memory held by a deleted upload goes at once. A notification sent while the
//!   listening connection is down is lost: on each connection the follower listens first,
//!   then reads the ids as a listing does, so nothing committed meanwhile is missed.
//!
//! A registration confirms the upload is still stored when a deletion ran here meanwhile,
//! and a removal confirms it is gone (a notice may arrive after the same content was
//! uploaded again): notices, listings and requests applied in any order leave the slots as
//! the database holds them. Every change is told to the listeners as a local one is.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{Slot, SlotInfo, Store};
use crate::store::error::StoreError;
use crate::store::pg_uploads::{PgUploads, UploadDbError, UploadNotice};
use crate::store::uploads::is_upload_id;

/// The first wait before listening again after the database failed the follower; it
/// doubles at each failure in a row, up to [`RELISTEN_MAX`].
const RELISTEN_FIRST: Duration = Duration::from_millis(250);

/// The longest wait before listening again.
const RELISTEN_MAX: Duration = Duration::from_secs(10);

impl Store {
    /// The PostgreSQL upload store, when uploads are kept there.
    pub(super) fn shared_db(&self) -> Option<&Arc<PgUploads>> {
        self.uploads.as_ref().and_then(|uploads| uploads.shared())
    }

    /// The session `id` as it stands now: the slot known here; with a shared upload store,
    /// an upload made through another replica is looked up there and registered, and one
    /// known here is checked to be still stored (forgotten, and not found, when another
    /// replica deleted it). [`StoreError::UploadDb`] when the shared store cannot answer.
    pub async fn find(&self, id: &str) -> Result<Arc<Slot>, StoreError> {
        let known = self.slots.get(id).map(|e| e.value().clone());
        let Some(db) = self.shared_db() else {
            return known.ok_or_else(|| StoreError::NotFound(id.to_owned()));
        };
        match known {
            Some(slot) if slot.is_upload() => {
                if slot.still_stored.answer(|| db.exists(id)).await? {
                    Ok(slot)
                } else {
                    self.forget_upload(&slot);
                    Err(StoreError::NotFound(id.to_owned()))
                }
            }
            Some(slot) => Ok(slot),
            None if is_upload_id(id) => self.learn(db, id).await,
            None => Err(StoreError::NotFound(id.to_owned())),
        }
    }

    /// Every session, oldest first, the uploads as the shared upload store holds them now
    /// (see the module's documentation); as [`Store::list`] without one.
    pub async fn list_current(&self) -> Result<Vec<SlotInfo>, StoreError> {
        if self.shared_db().is_some() {
            self.listing.answer(|| self.sync_shared(true)).await?;
        }
        Ok(self.list())
    }

    /// Brings the uploads registered here in line with those the shared upload store holds:
    /// registers the new ones (telling the listeners when `tell`) and forgets the deleted
    /// ones.
    pub(super) async fn sync_shared(&self, tell: bool) -> Result<(), UploadDbError> {
        let Some(db) = self.shared_db() else {
            return Ok(());
        };
        let removals = self.removals.load(Ordering::SeqCst);
        let stored: HashSet<String> = db.ids().await?.into_iter().collect();
        let gone: Vec<Arc<Slot>> = self
            .slots
            .iter()
            .filter(|e| e.value().is_upload() && !stored.contains(e.key()))
            .map(|e| e.value().clone())
            .collect();
        for slot in gone {
            // Perhaps stored since the ids were read.
            self.forget_unless_stored(db, &slot).await?;
        }
        let new: Vec<String> = stored
            .into_iter()
            .filter(|id| !self.slots.contains_key(id))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        for manifest in db.manifests(&new).await? {
            let Some(slot) = self.register_upload(manifest, tell) else {
                continue;
            };
            if self.removals.load(Ordering::SeqCst) != removals {
                self.forget_unless_stored(db, &slot).await?;
            }
        }
        Ok(())
    }

    /// Registers upload `id`, stored in `db` (made through another replica).
    async fn learn(&self, db: &PgUploads, id: &str) -> Result<Arc<Slot>, StoreError> {
        let not_found = || StoreError::NotFound(id.to_owned());
        let removals = self.removals.load(Ordering::SeqCst);
        let manifest = db.manifest(id).await?.ok_or_else(not_found)?;
        let slot = self.register_upload(manifest, true).ok_or_else(not_found)?;
        // A deletion here since the manifest was read may have been of this upload.
        if self.removals.load(Ordering::SeqCst) != removals && !db.exists(id).await? {
            self.forget_upload(&slot);
            return Err(not_found());
        }
        Ok(slot)
    }

    /// Forgets the upload `slot` if `db` no longer holds it.
    async fn forget_unless_stored(&self, db: &PgUploads, slot: &Arc<Slot>) -> Result<(), UploadDbError> {
        if !db.exists(&slot.id).await? {
            self.forget_upload(slot);
        }
        Ok(())
    }

    /// Starts following the uploads and deletions of the other replicas (see the module's
    /// documentation) in a task of its own, when uploads are kept in a shared store; abort
    /// the task to stop. It runs until the store is closed ([`Store::close`]), listening
    /// again after each failure of the database (after a wait that grows to 10 s while they
    /// go on).
    pub fn follow_replicas(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        let db = self.shared_db()?.clone();
        let store = self.clone();
        Some(tokio::spawn(async move {
            let mut wait = RELISTEN_FIRST;
            while !db.is_closed() {
                match store.follow_one_connection(&db).await {
                    Ok(()) => wait = RELISTEN_FIRST,
                    Err(_) if db.is_closed() => break,
                    Err(e) => {
                        tracing::warn!(
                            error = %e,
                            retry_in_ms = wait.as_millis() as u64,
                            "not hearing of other replicas' uploads and deletions; requests and listings still ask the database"
                        );
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(RELISTEN_MAX);
                    }
                }
            }
        }))
    }

    /// Listens on a connection of `db`, catches up with what was committed before, then
    /// applies each notice until the connection is lost (`Ok`) or the database fails.
    async fn follow_one_connection(&self, db: &PgUploads) -> Result<(), UploadDbError> {
        let mut listener = db.listen().await?;
        self.sync_shared(true).await?;
        tracing::debug!("following the other replicas' uploads and deletions");
        while let Some(notification) = listener.try_recv().await? {
            match UploadNotice::parse(notification.payload()) {
                Some(notice) => self.apply(db, notice).await?,
                None => tracing::debug!(payload = notification.payload(), "ignored an unknown notice"),
            }
        }
        tracing::debug!("the connection following the other replicas was lost; listening again");
        Ok(())
    }

    /// Applies a notice of an upload or deletion (perhaps this process's own: then nothing
    /// changes).
    async fn apply(&self, db: &PgUploads, notice: UploadNotice) -> Result<(), UploadDbError> {
        match notice {
            UploadNotice::Added(id) if is_upload_id(&id) && !self.slots.contains_key(&id) => {
                match self.learn(db, &id).await {
                    Ok(_) | Err(StoreError::NotFound(_)) => {}
                    Err(StoreError::UploadDb(e)) => return Err(e),
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "could not register an upload made through another replica")
                    }
                }
            }
            UploadNotice::Removed(id) => {
                let known = self.slots.get(&id).map(|e| e.value().clone());
                if let Some(slot) = known.filter(|slot| slot.is_upload()) {
                    self.forget_unless_stored(db, &slot).await?;
                }
            }
            UploadNotice::Added(_) => {}
        }
        Ok(())
    }

    /// Closes the connections of the shared upload store, if uploads are kept in one
    /// (waits for those in use; the follower then ends).
    pub async fn close(&self) {
        if let Some(db) = self.shared_db() {
            db.close().await;
        }
    }
}
