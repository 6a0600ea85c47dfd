//! The session store: every known session (uploads and sessions on disk), each parsed on
//! first use, cached, re-parsed when its files change, and evicted under a memory budget.
//!
//! A session is a [`Slot`] in a `DashMap`. Its parsed form lives in a `tokio::sync::OnceCell`
//! held by the slot: concurrent first requests wait on the same initialisation, so a session
//! is parsed once. Invalidating (files changed, eviction) swaps in a fresh cell; requests
//! already holding the old [`Loaded`] finish with it. No lock or map guard is held across an
//! `.await`; parsing runs on the blocking pool, rendering on the CPU pool
//! ([`super::bodies`]).
//!
//! Uploads are kept where the [`UploadStore`] says: in the data directory, or shared by
//! several replicas (in PostgreSQL, or in a bucket with their records in PostgreSQL),
//! which this process then follows (`replicas`: [`Store::find`], [`Store::list_current`],
//! [`Store::follow_replicas`]); objects of a bucket that no record names are swept
//! (`objects`: [`Store::sweep_objects`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dashmap::DashMap;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use super::bodies::SessionBodies;
use super::budget::{self, RenderBudget};
use super::changes::{Change, ChangeKind, ChangeListener, Listeners};
use super::confined::{read_client_path, ClientFile, ReadError, SessionsRoot};
use super::counts::DiskCounts;
use super::disk;
use super::error::StoreError;
use super::lock;
use super::pg_uploads::{PgUploads, UploadDbError};
use super::s3_bucket::S3Bucket;
use super::s3_uploads::S3Uploads;
use super::scan::{scan_dir, FoundSession};
use super::shared_check::SharedCheck;
use super::shared_uploads::SharedUploads;
use super::units::UnitIndex;
use super::upload_store::UploadStore;
use super::uploads::{Counts as StoredCounts, Manifest, UploadDir};
use super::watch::{FileWatch, Watcher};
use crate::core::formats::input::Format;
use crate::core::heap::HeapSize;
use crate::core::memory_bound::MemoryBound;
use crate::core::views::summary::{counts, Counts};
use crate::core::{LoadOptions, Session, SessionError, SessionInput};

mod objects;
mod replicas;

/// The framework a session's logs were written by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// `claudecode`.
    ClaudeCode,
    /// `pi`.
    Pi,
    /// `autogen`.
    Autogen,
    /// `codex`: OpenAI Codex CLI rollouts.
    Codex,
    /// `gemini`.
    Gemini,
}

impl Framework {
    /// Every framework read here, in the order `/api/frameworks` lists them.
    pub const ALL: [Framework; 5] = [
        Framework::ClaudeCode,
        Framework::Pi,
        Framework::Autogen,
        Framework::Codex,
        Framework::Gemini,
    ];

    /// Its name, as listed by `/api/frameworks` and stored.
    pub const fn name(self) -> &'static str {
        match self {
            Framework::ClaudeCode => "claudecode",
            Framework::Pi => "pi",
            Framework::Autogen => "autogen",
            Framework::Codex => "codex",
            Framework::Gemini => "gemini",
        }
    }

    /// Reads a framework's name in any case (`ClaudeCode` is `claudecode`: the reference
    /// stores such a name as sent and then refuses the session's views); `None` for one
    /// not read here.
    pub fn from_name(name: &str) -> Option<Framework> {
        Framework::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// The framework of a log format.
    pub fn of_format(format: Format) -> Framework {
        match format {
            Format::ClaudeCode => Framework::ClaudeCode,
            Format::Pi => Framework::Pi,
            Format::Autogen => Framework::Autogen,
            Format::Codex => Framework::Codex,
            Format::Gemini => Framework::Gemini,
        }
    }

    /// The log format its sessions are read as.
    pub fn format(self) -> Format {
        match self {
            Framework::ClaudeCode => Format::ClaudeCode,
            Framework::Pi => Format::Pi,
            Framework::Autogen => Format::Autogen,
            Framework::Codex => Format::Codex,
            Framework::Gemini => Format::Gemini,
        }
    }
}

/// Where a session comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// An upload, stored under the data directory.
    Upload(Manifest),
    /// A main log found in a configured sessions directory.
    Disk(FoundSession),
}

/// A session known to the store.
#[derive(Debug)]
pub struct Slot {
    /// Its id.
    pub id: String,
    /// Where it comes from.
    pub source: Source,
    /// Its framework.
    pub framework: Framework,
    /// Upload time, or the main log's modification time (ms since the epoch).
    pub created_at_ms: i64,
    last_accessed_ms: AtomicI64,
    /// The last known counts (from the upload manifest, or the last parse).
    counts: Mutex<Option<StoredCounts>>,
    cell: Mutex<Arc<OnceCell<Arc<Loaded>>>>,
    /// Set when a deletion of this upload begins: a request that got the slot before and
    /// then finds its files gone answers that the session is not found.
    deleted: AtomicBool,
    /// Whether the shared upload store still has this upload (another replica may delete
    /// it), asked before the upload is served; unused for a local upload or a session on
    /// disk.
    still_stored: SharedCheck<Result<bool, UploadDbError>>,
}

impl Slot {
    fn new(id: String, source: Source, framework: Framework, created_at_ms: i64) -> Slot {
        let counts = match &source {
            Source::Upload(m) => Some(m.counts).filter(StoredCounts::is_current),
            Source::Disk(_) => None,
        };
        Slot {
            id,
            source,
            framework,
            created_at_ms,
            last_accessed_ms: AtomicI64::new(created_at_ms),
            counts: Mutex::new(counts),
            cell: Mutex::new(Arc::new(OnceCell::new())),
            deleted: AtomicBool::new(false),
            still_stored: SharedCheck::default(),
        }
    }

    /// The name of its main log: an upload's as the client sent it, a file's on disk.
    pub fn file_name(&self) -> String {
        match &self.source {
            Source::Upload(manifest) => manifest.main_name().to_owned(),
            Source::Disk(found) => found
                .main
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// The folder below the sessions directory that holds it (Claude Code's project), for
    /// a session on disk; `None` for an upload.
    pub fn project(&self) -> Option<&str> {
        match &self.source {
            Source::Upload(_) => None,
            Source::Disk(found) => Some(&found.project),
        }
    }

    /// Last time a request used it (ms since the epoch).
    pub fn last_accessed_ms(&self) -> i64 {
        self.last_accessed_ms.load(Ordering::Relaxed)
    }

    /// The last known counts, if it was ever parsed.
    pub fn counts(&self) -> Option<StoredCounts> {
        *lock(&self.counts)
    }

    fn touch(&self) {
        self.last_accessed_ms.store(now_ms(), Ordering::Relaxed);
    }

    fn cell(&self) -> Arc<OnceCell<Arc<Loaded>>> {
        lock(&self.cell).clone()
    }

    /// The parsed session if it is in memory now.
    fn loaded(&self) -> Option<Arc<Loaded>> {
        self.cell().get().cloned()
    }

    /// Drops the parsed session (it reloads on next use).
    fn unload(&self) {
        *lock(&self.cell) = Arc::new(OnceCell::new());
    }

    /// True for uploads.
    pub fn is_upload(&self) -> bool {
        matches!(self.source, Source::Upload(_))
    }

    /// `e` as the request should see it: a file that vanished because this upload is being
    /// (or was) deleted means the session is gone, not that storage failed.
    fn vanished_as_not_found(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::Io(io)
                if io.kind() == std::io::ErrorKind::NotFound && self.deleted.load(Ordering::SeqCst) =>
            {
                StoreError::NotFound(self.id.clone())
            }
            other => other,
        }
    }
}

/// A parsed session and the view bodies rendered from it.
#[derive(Debug)]
pub struct Loaded {
    /// The analysed session (shared with the renders of its bodies).
    pub session: Arc<Session>,
    /// Its counts.
    pub counts: Counts,
    /// Changes whenever the session's content does (the ETag's base).
    pub version: String,
    stamps: Vec<FileStamp>,
    /// Change notices for its files, when they can be watched: while none comes, the
    /// session is fresh without a look at the files.
    watch: Option<FileWatch>,
    session_bytes: usize,
    /// When the last freshness check started, and what it found.
    last_check: tokio::sync::Mutex<Option<(Instant, bool)>>,
    /// Its view bodies: kept, compressed or rendered on demand within a budget.
    pub bodies: SessionBodies,
    /// The annotation units (sub-agent units included), built on first use: what label
    /// writes ground their evidence quotes in, and what the queue hands out.
    units: std::sync::OnceLock<UnitIndex>,
}

/// Main logs up to this size are counted in the background after a start; larger ones when
/// first opened.
pub const BACKGROUND_COUNT_MAX_BYTES: u64 = 64 << 20;

/// Up to this many files, a disk session's freshness is checked on the request's own
/// thread.
const INLINE_FRESHNESS_CHECKS: usize = 32;

/// Size and modification time of a file, to notice changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// The file.
    pub path: PathBuf,
    /// Its length (0 when it could not be read).
    pub len: u64,
    /// Its modification time, when known.
    pub modified: Option<SystemTime>,
}

impl FileStamp {
    /// The stamp of `path` as it is: a symbolic link's own (`lstat`), never its target's.
    /// A link in a sessions directory is left out, not read; stamping through it would
    /// still look at (and reload the session for changes of) whatever it points to.
    pub fn of(path: &Path) -> FileStamp {
        let meta = std::fs::symlink_metadata(path).ok();
        FileStamp {
            path: path.to_owned(),
            len: meta.as_ref().map_or(0, |m| m.len()),
            modified: meta.and_then(|m| m.modified().ok()),
        }
    }

    /// True when the file still has this stamp's size and modification time (a `stat`).
    pub fn holds(&self) -> bool {
        FileStamp::of(&self.path) == *self
    }
}

impl Loaded {
    fn new(session: Session, version: String, stamps: Vec<FileStamp>, watch: Option<FileWatch>) -> Loaded {
        let session_bytes = std::mem::size_of::<Session>() + session.heap_size();
        let session = Arc::new(session);
        Loaded {
            counts: counts(&session),
            bodies: SessionBodies::new(session.clone()),
            session,
            version,
            stamps,
            watch,
            session_bytes,
            last_check: tokio::sync::Mutex::new(None),
            units: std::sync::OnceLock::new(),
        }
    }

    /// The memory it holds: the parsed session, counted structure by structure when it was
    /// loaded (see [`HeapSize`]), plus the rendered bodies kept so far.
    pub fn approximate_bytes(&self) -> usize {
        self.session_bytes + self.bodies.bytes() + self.units.get().map_or(0, HeapSize::heap_size)
    }

    /// The annotation units (sub-agent units included). The first call indexes every unit
    /// (blocking: call it on the blocking pool); later calls return the index.
    pub fn units(&self) -> &UnitIndex {
        self.units.get_or_init(|| UnitIndex::of(&self.session))
    }

    /// The stamps of the files it was read from (none for an upload, whose content never
    /// changes): while each [`FileStamp::holds`], it is what its files hold.
    pub fn stamps(&self) -> &[FileStamp] {
        &self.stamps
    }

    /// True when none of the files it was read from changed since.
    fn is_fresh(&self) -> bool {
        stamps_hold(&self.stamps)
    }

    /// True when none of the files it was read from changed since the request asked: no
    /// change notice about them since the last check, or else none changed by their stamps.
    async fn still_fresh(self: &Arc<Self>) -> Result<bool, StoreError> {
        let Some(watch) = &self.watch else {
            return self.stamps_unchanged().await;
        };
        let Some(notices) = watch.unconfirmed_notices() else {
            return Ok(true);
        };
        let fresh = self.stamps_unchanged().await?;
        if fresh {
            watch.confirm(notices);
        }
        Ok(fresh)
    }

    /// True when none of the files it was read from changed by their stamps since the
    /// request asked. Requests arriving together share a check: one that started after a
    /// request arrived answers it, so a burst of requests stats the files a few times, not
    /// once each.
    async fn stamps_unchanged(self: &Arc<Self>) -> Result<bool, StoreError> {
        let asked = Instant::now();
        let mut last = self.last_check.lock().await;
        if let Some((started, fresh)) = *last {
            if started >= asked {
                return Ok(fresh);
            }
        }
        let started = Instant::now();
        // A few `stat`s take microseconds: done in place, they spare the request a trip to
        // the blocking pool. Sessions of many files check there.
        let fresh = if self.stamps.len() <= INLINE_FRESHNESS_CHECKS {
            self.is_fresh()
        } else {
            let me = self.clone();
            blocking(move || Ok(me.is_fresh())).await?
        };
        *last = Some((started, fresh));
        Ok(fresh)
    }
}

/// How the store is set up.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Where uploads are kept; `None` keeps them in memory only (tests of other parts).
    pub data_dir: Option<PathBuf>,
    /// Directories whose sessions are listed and served.
    pub sessions_dirs: Vec<PathBuf>,
    /// Memory budget for parsed sessions, in bytes.
    pub cache_bytes: usize,
    /// Count the sessions on disk never opened, in the background after a start (see
    /// [`Store::count_unopened`]).
    pub background_counts: bool,
    /// Memory budget for renders not served from the cache, in bytes (see
    /// [`RenderBudget`]).
    pub render_budget_bytes: usize,
    /// The memory bound every session is loaded under (uploads and sessions on disk).
    pub memory_bound: Option<MemoryBound>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            data_dir: None,
            sessions_dirs: Vec::new(),
            cache_bytes: 0,
            background_counts: false,
            render_budget_bytes: budget::DEFAULT_BYTES,
            memory_bound: Some(MemoryBound::default()),
        }
    }
}

/// The store.
#[derive(Debug)]
pub struct Store {
    slots: DashMap<String, Arc<Slot>>,
    /// Uploads being accepted or deleted, by id: the same content sent twice at once is
    /// parsed and stored once, the second request waiting for the first, and an upload and
    /// a deletion of the same id never interleave.
    accepting: DashMap<String, Arc<tokio::sync::Mutex<()>>>,
    /// Where uploads are kept (`None`: in memory only).
    uploads: Option<UploadStore>,
    /// Uploads forgotten (deleted here, or found deleted through another replica) since
    /// start: a registration that read the shared store before one of them checks again
    /// that its upload is still there.
    removals: AtomicU64,
    /// Listings' checks of the shared upload store (see [`Store::list_current`]).
    listing: SharedCheck<Result<(), UploadDbError>>,
    /// Counts of sessions on disk, kept across restarts (with a data directory).
    disk_counts: Option<Arc<DiskCounts>>,
    config: StoreConfig,
    ready: AtomicBool,
    parses: Arc<AtomicUsize>,
    budget: RenderBudget,
    /// Change notices for sessions on disk (none without sessions directories).
    watcher: Option<Arc<Watcher>>,
    /// Who is told of uploads, deletions and reloads (the search index).
    listeners: Listeners,
    /// Opened to read only ([`Store::open_read_only`]): counts found by a parse are kept
    /// in memory, never written to the data directory.
    read_only: bool,
}

/// One entry of the session list.
#[derive(Debug, Clone)]
pub struct SlotInfo {
    /// The slot.
    pub slot: Arc<Slot>,
    /// Its counts, when known.
    pub counts: Option<StoredCounts>,
}

impl Store {
    /// A store over `config`; opens the uploads directory (removing leftovers of interrupted
    /// writes). Call [`Store::restore`] to load what is on disk.
    pub fn new(config: StoreConfig) -> Result<Store, StoreError> {
        let uploads = match &config.data_dir {
            Some(dir) => {
                let (uploads, removed) = UploadDir::open(dir)?;
                if removed > 0 {
                    tracing::warn!(removed, "removed unfinished uploads left by an interrupted write");
                }
                Some(UploadStore::Local(uploads))
            }
            None => None,
        };
        Ok(Store::over_uploads(config, uploads))
    }

    /// A store over `config` whose uploads are kept in the PostgreSQL database `db`, shared
    /// with the other replicas on it (exports are spooled through `<data-dir>/uploads`,
    /// which needs a data directory). Call [`Store::restore`] to register what is stored,
    /// and [`Store::follow_replicas`] to hear of what the others change.
    pub fn with_shared_uploads(config: StoreConfig, db: Arc<PgUploads>) -> Result<Store, StoreError> {
        let shared = SharedUploads::open(db, spool_dir(&config)?, "postgres")?;
        Ok(Store::over_uploads(config, Some(UploadStore::Postgres(shared))))
    }

    /// A store over `config` whose uploads are kept in `bucket`, their records in the
    /// PostgreSQL database `db`, shared with the other replicas on both, as
    /// [`Store::with_shared_uploads`]; call [`Store::sweep_objects`] too, to remove the
    /// objects no record names.
    pub fn with_s3_uploads(
        config: StoreConfig,
        db: Arc<PgUploads>,
        bucket: Arc<S3Bucket>,
    ) -> Result<Store, StoreError> {
        let shared = SharedUploads::open(db, spool_dir(&config)?, "s3")?;
        let uploads = UploadStore::S3(S3Uploads::new(shared, bucket));
        Ok(Store::over_uploads(config, Some(uploads)))
    }

    /// A store over `config` keeping uploads in `uploads`, with the counts of sessions on
    /// disk kept in the data directory and their files watched.
    fn over_uploads(config: StoreConfig, uploads: Option<UploadStore>) -> Store {
        let watcher = if config.sessions_dirs.is_empty() {
            None
        } else {
            Watcher::new()
        };
        let disk_counts = config
            .data_dir
            .as_deref()
            .map(|dir| Arc::new(DiskCounts::open(dir)));
        Store::assemble(config, uploads, disk_counts, watcher)
    }

    /// A store that reads what `config`'s sessions directories and `uploads` hold and
    /// changes nothing: no directory is created, no leftover of an interrupted write
    /// removed, no count written (neither of sessions on disk nor in an upload's record),
    /// no file watched, no other replica followed, no bucket swept, and uploads and
    /// deletions are refused with [`StoreError::OpenedReadOnly`] (for a command that only
    /// reads, `labels export`). Open `uploads` with [`UploadStore::open_read_only`]
    /// (`None`: no upload). Call [`Store::restore`] to find the sessions.
    pub fn open_read_only(config: StoreConfig, uploads: Option<UploadStore>) -> Store {
        let mut store = Store::assemble(config, uploads, None, None);
        store.read_only = true;
        store
    }

    /// The store over its parts.
    fn assemble(
        config: StoreConfig,
        uploads: Option<UploadStore>,
        disk_counts: Option<Arc<DiskCounts>>,
        watcher: Option<Arc<Watcher>>,
    ) -> Store {
        Store {
            slots: DashMap::new(),
            accepting: DashMap::new(),
            uploads,
            removals: AtomicU64::new(0),
            listing: SharedCheck::default(),
            disk_counts,
            budget: RenderBudget::new(config.render_budget_bytes, budget::DEFAULT_WAIT),
            config,
            ready: AtomicBool::new(false),
            parses: Arc::new(AtomicUsize::new(0)),
            watcher,
            listeners: Listeners::default(),
            read_only: false,
        }
    }

    /// Tells `listener` of every upload accepted, upload deleted and session on disk
    /// reloaded from now on (see [`super::changes`]).
    pub fn listen(&self, listener: Arc<dyn ChangeListener>) {
        self.listeners.add(listener);
    }

    /// The parsed session `id` as its files hold it now, without caching it (blocking: run
    /// it on the blocking pool): the one in memory if its files did not change since it
    /// was read, else parsed again for the caller alone, not counted as a parse of the
    /// cache and not watched. For work over many sessions (indexing) that must not evict
    /// the sessions requests use.
    pub fn snapshot(&self, id: &str) -> Result<(Arc<Slot>, Arc<Loaded>), StoreError> {
        let slot = self.slot(id)?;
        if let Some(loaded) = slot.loaded().filter(|l| l.is_fresh()) {
            return Ok((slot, loaded));
        }
        let loaded = load(
            &slot.source,
            &slot.framework,
            self.uploads.as_ref(),
            self.config.memory_bound,
            None,
        )
        .map_err(|e| slot.vanished_as_not_found(e))?;
        Ok((slot, Arc::new(loaded)))
    }

    /// Registers the stored uploads and scans the sessions directories (blocking; run it on
    /// the blocking pool). Sessions are parsed later, on first use.
    pub fn restore(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        match &self.uploads {
            Some(UploadStore::Local(dir)) => self.restore_local_uploads(dir)?,
            Some(shared) => {
                // Not fatal: the shared store is asked again by every listing, request and
                // reconnection of the replica follower.
                let listed = shared.shared().map(|db| db.block_on(self.sync_shared(false)));
                if let Some(Err(e)) = listed {
                    tracing::warn!(error = %e, "the uploads in PostgreSQL could not be listed; they are served once it answers");
                }
            }
            None => {}
        }
        let mut taken: HashSet<String> = self.slots.iter().map(|e| e.key().clone()).collect();
        for dir in &self.config.sessions_dirs {
            let scan = scan_dir(
                dir,
                &mut taken,
                |n| tracing::info!(dir = %dir.display(), found = n, "scanning"),
            );
            for (path, reason) in &scan.skipped {
                tracing::debug!(path = %path.display(), %reason, "skipped");
            }
            let n = scan.sessions.len();
            for found in scan.sessions {
                let created = found
                    .modified
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let id = found.id.clone();
                let framework = Framework::of_format(found.format);
                let known = self
                    .disk_counts
                    .as_ref()
                    .and_then(|c| c.get(&found.main, found.bytes, found.modified));
                let slot = Slot::new(id.clone(), Source::Disk(found), framework, created);
                *lock(&slot.counts) = known;
                self.slots.entry(id).or_insert_with(|| Arc::new(slot));
            }
            tracing::info!(dir = %dir.display(), sessions = n, skipped = scan.skipped.len(), "scanned sessions directory");
        }
        tracing::info!(
            sessions = self.slots.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "store ready"
        );
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Registers the uploads stored in `dir` (blocking).
    fn restore_local_uploads(&self, dir: &UploadDir) -> Result<(), StoreError> {
        let stored = dir.manifests()?;
        for (dir, reason) in stored.unreadable {
            tracing::warn!(dir = %dir.display(), %reason, "skipping an unreadable stored upload");
        }
        let n = stored.manifests.len();
        for m in stored.manifests {
            self.register_upload(m, false);
        }
        tracing::info!(uploads = n, "restored stored uploads");
        Ok(())
    }

    /// Registers the stored upload `manifest` unless a session of its id is known, telling
    /// the listeners when `tell`; the slot of its id, `None` for an upload of a framework
    /// not read here.
    fn register_upload(&self, manifest: Manifest, tell: bool) -> Option<Arc<Slot>> {
        // Uploads stored before names were normalised may say `ClaudeCode`.
        let Some(framework) = Framework::from_name(&manifest.framework) else {
            tracing::warn!(id = %manifest.id, framework = %manifest.framework, "skipping a stored upload of an unknown framework");
            return None;
        };
        let id = manifest.id.clone();
        let created = manifest.created_at_ms;
        let (slot, new) = match self.slots.entry(id.clone()) {
            dashmap::Entry::Occupied(known) => (known.get().clone(), false),
            dashmap::Entry::Vacant(free) => {
                let slot = Slot::new(id.clone(), Source::Upload(manifest), framework, created);
                (free.insert(Arc::new(slot)).value().clone(), true)
            }
        };
        if new && tell {
            self.listeners.tell(Change {
                id,
                kind: ChangeKind::Added,
            });
        }
        Some(slot)
    }

    /// Forgets the upload `slot` (deleted): requests that got it before and still need its
    /// files answer that it is not found, and the listeners are told.
    fn forget_upload(&self, slot: &Arc<Slot>) {
        slot.deleted.store(true, Ordering::SeqCst);
        if self
            .slots
            .remove_if(&slot.id, |_, s| Arc::ptr_eq(s, slot))
            .is_some()
        {
            self.removals.fetch_add(1, Ordering::SeqCst);
            self.listeners.tell(Change {
                id: slot.id.clone(),
                kind: ChangeKind::Removed,
            });
        }
    }

    /// True once [`Store::restore`] finished.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The budget of renders not served from the cache.
    pub fn render_budget(&self) -> &RenderBudget {
        &self.budget
    }

    /// How many times a session was parsed (uploads included), since start.
    pub fn parses(&self) -> usize {
        self.parses.load(Ordering::Relaxed)
    }

    /// The memory held by the sessions parsed and kept now, with their rendered bodies (what
    /// `cache_bytes` bounds, give or take the session being used).
    pub fn cached_bytes(&self) -> usize {
        self.slots
            .iter()
            .filter_map(|e| e.value().loaded().map(|l| l.approximate_bytes()))
            .sum()
    }

    /// Number of known sessions.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no session is known.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slot of `id` as this process knows it, without asking the shared upload store:
    /// an upload made through another replica may be missing, one deleted there may be
    /// present. Requests ask [`Store::find`].
    pub fn slot(&self, id: &str) -> Result<Arc<Slot>, StoreError> {
        self.slots
            .get(id)
            .map(|e| e.value().clone())
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))
    }

    /// Every session, oldest first.
    pub fn list(&self) -> Vec<SlotInfo> {
        let mut all: Vec<SlotInfo> = self
            .slots
            .iter()
            .map(|e| SlotInfo {
                slot: e.value().clone(),
                counts: e.value().counts(),
            })
            .collect();
        all.sort_by(|a, b| (a.slot.created_at_ms, &a.slot.id).cmp(&(b.slot.created_at_ms, &b.slot.id)));
        all
    }

    /// The parsed session `id`, parsing it on first use (once, however many requests ask at
    /// the same time) and again when its files changed. An upload kept in the shared store
    /// is looked up there ([`Store::find`]).
    pub async fn get(&self, id: &str) -> Result<(Arc<Slot>, Arc<Loaded>), StoreError> {
        let slot = self.find(id).await?;
        self.parsed(slot).await
    }

    /// The parsed session of `slot` (found by [`Store::find`]), parsing it on first use
    /// (once, however many requests ask at the same time) and again when its files changed.
    pub async fn parsed(&self, slot: Arc<Slot>) -> Result<(Arc<Slot>, Arc<Loaded>), StoreError> {
        slot.touch();
        let mut cell = slot.cell();
        let mut reloading = false;
        if let (Source::Disk(_), Some(loaded)) = (&slot.source, cell.get()) {
            if !loaded.still_fresh().await? {
                tracing::info!(id = %slot.id, "session files changed; reloading");
                slot.unload();
                cell = slot.cell();
                reloading = true;
            }
        }
        let mut loaded_now = false;
        let loaded = cell
            .get_or_try_init(|| {
                loaded_now = true;
                let slot = slot.clone();
                let source = slot.source.clone();
                let framework = slot.framework;
                let uploads = self.uploads.clone();
                let parses = self.parses.clone();
                let bound = self.config.memory_bound;
                let watcher = self.watcher.clone();
                async move {
                    parses.fetch_add(1, Ordering::Relaxed);
                    blocking(move || load(&source, &framework, uploads.as_ref(), bound, watcher.as_ref()))
                        .await
                        .map(Arc::new)
                        .map_err(|e| slot.vanished_as_not_found(e))
                }
            })
            .await?
            .clone();
        if loaded_now {
            let save = self.keep_counts(&slot, &loaded);
            if !matches!(save, CountsToSave::Nothing) {
                // A file write, off the async workers; rare (a parse that found new counts).
                let _ = tokio::task::spawn_blocking(move || save.save()).await;
            }
            self.enforce_budget(&slot.id);
            if reloading {
                self.listeners.tell(Change {
                    id: slot.id.clone(),
                    kind: ChangeKind::Reloaded,
                });
            }
        }
        Ok((slot, loaded))
    }

    /// Keeps what a parse of `slot` counted in the slot, and says what is left to write to
    /// the data directory: a session on disk's counts (so that a restart lists it with
    /// them), or an upload's manifest whose counts were made by older rules.
    fn keep_counts(&self, slot: &Slot, loaded: &Loaded) -> CountsToSave {
        let counts = stored_counts(&loaded.counts);
        let before = lock(&slot.counts).replace(counts);
        if self.read_only {
            return CountsToSave::Nothing;
        }
        match (&slot.source, loaded.stamps.first()) {
            // Once per process: after the rewrite the slot holds these counts (a reload after
            // the cache dropped the session finds them), while its manifest stays as read.
            (Source::Upload(manifest), _) if !manifest.counts.is_current() && before != Some(counts) => {
                match &self.uploads {
                    Some(uploads) => CountsToSave::Manifest(
                        uploads.clone(),
                        Manifest {
                            counts,
                            ..manifest.clone()
                        },
                    ),
                    None => CountsToSave::Nothing,
                }
            }
            (
                Source::Disk(found),
                Some(FileStamp {
                    len,
                    modified: Some(modified),
                    ..
                }),
            ) => match &self.disk_counts {
                Some(kept) if kept.record(&found.main, *len, *modified, counts) => {
                    CountsToSave::DiskCounts(kept.clone())
                }
                _ => CountsToSave::Nothing,
            },
            _ => CountsToSave::Nothing,
        }
    }

    /// Counts, one at a time, the sessions on disk that were never parsed and the uploads
    /// whose stored counts were made by older rules (up to [`BACKGROUND_COUNT_MAX_BYTES`]
    /// each), so that the session list shows numbers for them as CommuGraph's does;
    /// nothing is cached. Blocking: run it on its own thread after
    /// [`Store::restore`].
    pub fn count_unopened(&self) {
        if !self.config.background_counts {
            return;
        }
        let pending: Vec<Arc<Slot>> = self
            .slots
            .iter()
            .map(|e| e.value().clone())
            .filter(|slot| slot.counts().is_none())
            .filter(|slot| match &slot.source {
                Source::Disk(found) => found.bytes <= BACKGROUND_COUNT_MAX_BYTES,
                Source::Upload(manifest) => self.uploads.as_ref().is_some_and(|uploads| {
                    uploads
                        .stored_bytes(manifest)
                        .is_ok_and(|bytes| bytes <= BACKGROUND_COUNT_MAX_BYTES)
                }),
            })
            .collect();
        let started = std::time::Instant::now();
        let (mut counted, mut disk_counted) = (0usize, false);
        for slot in pending {
            // Parsed meanwhile by a request, or deleted (perhaps uploaded again since, a new
            // slot under the same id): nothing to do.
            let current = self
                .slots
                .get(&slot.id)
                .is_some_and(|s| Arc::ptr_eq(s.value(), &slot));
            if slot.counts().is_some() || !current {
                continue;
            }
            match load(
                &slot.source,
                &slot.framework,
                self.uploads.as_ref(),
                self.config.memory_bound,
                // Counted, then dropped: nothing to watch.
                None,
            ) {
                Ok(loaded) => {
                    match self.keep_counts(&slot, &loaded) {
                        CountsToSave::DiskCounts(_) => disk_counted = true,
                        other => other.save(),
                    }
                    counted += 1;
                }
                Err(e) => tracing::debug!(id = %slot.id, error = %e, "could not count a session"),
            }
        }
        // Written once for the whole pass, not once per session.
        if let (true, Some(kept)) = (disk_counted, &self.disk_counts) {
            kept.save();
        }
        tracing::info!(
            counted,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "counted the sessions on disk never opened"
        );
    }

    /// Reads `input` (one log, its format told from its content) within the memory bound,
    /// without keeping it, and gives what `render` makes of it; on the blocking pool. A
    /// log that holds no conversation is refused as an upload is.
    pub async fn parse_transient<T: Send + 'static>(
        &self,
        input: SessionInput,
        render: impl FnOnce(&Session) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let options = LoadOptions {
            memory_bound: self.config.memory_bound,
            ..LoadOptions::default()
        };
        blocking(move || {
            let session = Session::build(&input, options)?;
            session.require_conversation(input.files.first().map_or("", |f| f.name.as_str()))?;
            Ok(render(&session))
        })
        .await
    }

    /// Reads a file a client names, only below a configured sessions directory and by its
    /// rule (see [`super::confined::read_client_path`]), at most `limit` bytes; on the
    /// blocking pool.
    pub async fn read_client_file(&self, path: PathBuf, limit: u64) -> Result<ClientFile, ReadError> {
        let roots: Vec<SessionsRoot> = self.config.sessions_dirs.iter().map(SessionsRoot::new).collect();
        tokio::task::spawn_blocking(move || read_client_path(&roots, &path, limit))
            .await
            .unwrap_or_else(|e| {
                Err(ReadError::Io {
                    file: PathBuf::new(),
                    source: std::io::Error::other(e.to_string()),
                })
            })
    }

    /// Accepts an upload: parses it, stores it durably, and registers it. The same content
    /// uploaded again gives the same id and stores nothing new. Returns the slot, the parsed
    /// session and whether the upload was new.
    ///
    /// The work runs in a task of its own: a client that goes away, or a request that times
    /// out, does not stop it half-way (a file saved but never registered would be invisible
    /// until a restart, and could not be deleted).
    pub async fn add_upload(
        self: &Arc<Self>,
        framework: Framework,
        input: SessionInput,
        options: LoadOptions,
    ) -> Result<(Arc<Slot>, Arc<Loaded>, bool), StoreError> {
        if self.read_only {
            return Err(StoreError::OpenedReadOnly);
        }
        let store = self.clone();
        tokio::spawn(async move { store.accept_one_at_a_time(framework, input, options).await })
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// [`Store::add_upload`]: requests carrying the same content wait for each other, so
    /// that it is parsed and stored once.
    async fn accept_one_at_a_time(
        &self,
        framework: Framework,
        input: SessionInput,
        options: LoadOptions,
    ) -> Result<(Arc<Slot>, Arc<Loaded>, bool), StoreError> {
        let id = upload_id(framework.name(), &input);
        self.one_writer_at_a_time(&id, self.accept_upload(id.clone(), framework, input, options))
            .await
    }

    /// Runs `write` (an upload or a deletion of `id`) once no other write of `id` runs.
    async fn one_writer_at_a_time<T>(&self, id: &str, write: impl std::future::Future<Output = T>) -> T {
        let gate = self.accepting.entry(id.to_owned()).or_default().value().clone();
        let written = {
            let _one_at_a_time = gate.lock().await;
            write.await
        };
        drop(gate);
        self.accepting
            .remove_if(id, |_, gate| Arc::strong_count(gate) == 1);
        written
    }

    /// [`Store::add_upload`] once no other request accepts the same content.
    async fn accept_upload(
        &self,
        id: String,
        framework: Framework,
        input: SessionInput,
        options: LoadOptions,
    ) -> Result<(Arc<Slot>, Arc<Loaded>, bool), StoreError> {
        if let Some(slot) = self.stored_upload(&id).await? {
            return self.accepted_again(slot, options.strict).await;
        }
        let (manifest, loaded, stored_now) =
            self.parse_and_save(id.clone(), framework, input, options).await?;
        let created = manifest.created_at_ms;
        let slot = Arc::new(Slot::new(
            id.clone(),
            Source::Upload(manifest),
            framework,
            created,
        ));
        let loaded = Arc::new(loaded);
        let cell = OnceCell::new_with(Some(loaded.clone()));
        *lock(&slot.cell) = Arc::new(cell);
        let slot = self.slots.entry(id.clone()).or_insert(slot).value().clone();
        self.enforce_budget(&id);
        self.listeners.tell(Change {
            id,
            kind: ChangeKind::Added,
        });
        Ok((slot, loaded, stored_now))
    }

    /// The slot of upload `id` when it is known here and still stored; an upload the
    /// shared store no longer has (deleted through another replica) is forgotten. Called
    /// with `id`'s writer gate held.
    async fn stored_upload(&self, id: &str) -> Result<Option<Arc<Slot>>, StoreError> {
        let Ok(slot) = self.slot(id) else {
            return Ok(None);
        };
        if let (true, Some(db)) = (slot.is_upload(), self.shared_db()) {
            if !db.exists(id).await? {
                self.forget_upload(&slot);
                return Ok(None);
            }
        }
        Ok(Some(slot))
    }

    /// The answer to an upload of content accepted before (`slot`): the session as parsed
    /// then. Content accepted leniently is still refused by a `strict` upload if it has a
    /// bad line.
    async fn accepted_again(
        &self,
        slot: Arc<Slot>,
        strict: bool,
    ) -> Result<(Arc<Slot>, Arc<Loaded>, bool), StoreError> {
        let (slot, loaded) = self.parsed(slot).await?;
        if let (true, Some(bad)) = (strict, loaded.session.diagnostics.bad_lines.samples.first()) {
            return Err(SessionError::InvalidLine {
                file: bad.file.clone(),
                line: bad.line,
                reason: bad.reason.clone(),
            }
            .into());
        }
        Ok((slot, loaded, false))
    }

    /// Parses upload `id` and stores it durably, on the blocking pool: its manifest as
    /// stored (another replica's, with its creation time, when it stored the same content
    /// first), the parsed session, and whether this call stored it.
    async fn parse_and_save(
        &self,
        id: String,
        framework: Framework,
        input: SessionInput,
        options: LoadOptions,
    ) -> Result<(Manifest, Loaded, bool), StoreError> {
        let uploads = self.uploads.clone();
        self.parses.fetch_add(1, Ordering::Relaxed);
        let options = LoadOptions {
            memory_bound: self.config.memory_bound,
            ..options
        };
        blocking(move || {
            let session = build(&input, framework, options)?;
            session.require_conversation(input.files.first().map_or("", |f| f.name.as_str()))?;
            let loaded = Loaded::new(session, id.clone(), Vec::new(), None);
            let manifest = Manifest {
                id,
                framework: framework.name().to_owned(),
                created_at_ms: now_ms(),
                names: input.files.iter().map(|f| f.name.clone()).collect(),
                counts: stored_counts(&loaded.counts),
            };
            let (manifest, stored_now) = match uploads {
                Some(uploads) => uploads.save(&manifest, &input)?,
                None => (manifest, true),
            };
            Ok((manifest, loaded, stored_now))
        })
        .await
    }

    /// The session's main log as it is stored (an upload's main file, or the log on disk),
    /// opened: its name, the handle and its length now. Reading the handle needs no memory
    /// beyond a buffer, and it stays readable if the upload is deleted meanwhile; a file on
    /// disk is opened as every sessions-directory file is ([`super::confined`]).
    pub async fn open_main_file(&self, id: &str) -> Result<MainFile, StoreError> {
        let slot = self.find(id).await?;
        let uploads = self.uploads.clone();
        let reading = slot.clone();
        blocking(move || {
            let (name, file) = match &reading.source {
                Source::Upload(manifest) => {
                    let uploads = uploads.ok_or_else(|| StoreError::NotFound(manifest.id.clone()))?;
                    uploads.open_main(manifest)?
                }
                Source::Disk(found) => {
                    let file = found
                        .root
                        .open(found.relative_main())
                        .map_err(|e| StoreError::session_file(&found.id, e.into()))?;
                    let name = found
                        .main
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    (name, file)
                }
            };
            let len = file.metadata()?.len();
            Ok(MainFile { name, file, len })
        })
        .await
        .map_err(|e| slot.vanished_as_not_found(e))
    }

    /// Forgets an upload and removes it from where it is stored (for every replica, when
    /// the store is shared). Sessions of a sessions directory are never deleted. Requests
    /// that got the session before and still need its files answer that it is not found;
    /// so does a deletion of an upload another replica deleted first.
    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::OpenedReadOnly);
        }
        if !self.find(id).await?.is_upload() {
            return Err(StoreError::ReadOnly(id.to_owned()));
        }
        self.one_writer_at_a_time(id, self.delete_upload(id)).await
    }

    /// [`Store::delete`] once no upload or other deletion of `id` runs.
    async fn delete_upload(&self, id: &str) -> Result<(), StoreError> {
        // Looked up again: a deletion that ran meanwhile removed it.
        let slot = self.slot(id)?;
        slot.deleted.store(true, Ordering::SeqCst);
        let mut deleted_here = true;
        if let Some(uploads) = self.uploads.clone() {
            let id = id.to_owned();
            deleted_here = blocking(move || uploads.delete(&id)).await?;
        }
        self.forget_upload(&slot);
        if deleted_here {
            Ok(())
        } else {
            Err(StoreError::NotFound(id.to_owned()))
        }
    }

    /// Unloads the least recently used sessions (never `keep`) until the parsed sessions
    /// fit the memory budget. Every session can be reloaded: disk sessions from their
    /// directory, uploads from the data directory.
    fn enforce_budget(&self, keep: &str) {
        let budget = self.config.cache_bytes;
        let mut loaded: Vec<(i64, usize, Arc<Slot>)> = self
            .slots
            .iter()
            .filter_map(|e| {
                let slot = e.value();
                slot.loaded()
                    .map(|l| (slot.last_accessed_ms(), l.approximate_bytes(), slot.clone()))
            })
            .collect();
        let mut total: usize = loaded.iter().map(|(_, b, _)| b).sum();
        if total <= budget {
            return;
        }
        loaded.sort_by_key(|(last, ..)| *last);
        for (_, bytes, slot) in loaded {
            if total <= budget {
                break;
            }
            // An upload stays in memory when there is no data directory to reload it from.
            if slot.id == keep || (slot.is_upload() && self.uploads.is_none()) {
                continue;
            }
            slot.unload();
            total -= bytes;
            tracing::debug!(id = %slot.id, bytes, "evicted from the cache");
        }
    }
}

/// Watches the files of `stamps`; a file that changed between its stamp and the watch (no
/// notice came for that change) counts as a notice, so that the first request checks.
fn watch_stamped(watcher: &Arc<Watcher>, stamps: &[FileStamp]) -> Option<FileWatch> {
    let paths: Vec<&Path> = stamps.iter().map(|s| s.path.as_path()).collect();
    let watch = watcher.watch(&paths)?;
    if !stamps_hold(stamps) {
        watch.note_change();
    }
    Some(watch)
}

/// True when every file of `stamps` still has its stamp's size and modification time.
fn stamps_hold(stamps: &[FileStamp]) -> bool {
    stamps.iter().all(FileStamp::holds)
}

/// Parses a session from its source (blocking), under `bound`; a session on disk is
/// watched by `watcher` for changes, if given.
fn load(
    source: &Source,
    framework: &Framework,
    uploads: Option<&UploadStore>,
    bound: Option<MemoryBound>,
    watcher: Option<&Arc<Watcher>>,
) -> Result<Loaded, StoreError> {
    let options = LoadOptions {
        memory_bound: bound,
        ..LoadOptions::default()
    };
    match source {
        Source::Upload(manifest) => {
            let uploads = uploads.ok_or_else(|| StoreError::NotFound(manifest.id.clone()))?;
            let input = uploads.read(manifest)?;
            let session = build(&input, *framework, options)?;
            Ok(Loaded::new(session, manifest.id.clone(), Vec::new(), None))
        }
        Source::Disk(found) => {
            let read = disk::read_main_with(&found.root, found.relative_main(), &found.relative_companions())
                .map_err(|e| StoreError::session_file(&found.id, e))?;
            // Stamped with the length actually read: a file that grew while it was read
            // (Claude Code still writing) differs from its stamp at the next request, and
            // the lines written since are picked up then. Files left out are stamped too:
            // one that becomes readable reloads the session.
            let mut stamps: Vec<FileStamp> = read
                .paths
                .iter()
                .zip(&read.input.files)
                .map(|(p, f)| FileStamp {
                    len: f.bytes.len() as u64,
                    ..FileStamp::of(p)
                })
                .collect();
            stamps.extend(read.skipped.iter().map(|s| FileStamp::of(&s.path)));
            let watch = watcher.and_then(|w| watch_stamped(w, &stamps));
            let mut session = build(&read.input, *framework, options)?;
            session
                .diagnostics
                .ignored_files
                .extend(read.skipped.iter().map(disk::SkippedFile::issue));
            Ok(Loaded::new(session, version_of(&stamps), stamps, watch))
        }
    }
}

/// Runs the core on `input`, read as `framework`'s format.
fn build(input: &SessionInput, framework: Framework, options: LoadOptions) -> Result<Session, StoreError> {
    let options = LoadOptions {
        format: Some(framework.format()),
        ..options
    };
    Ok(Session::build(input, options)?)
}

/// The content-derived id of an upload: 16 hex digits of SHA-256 over the framework and
/// each file's name and bytes.
pub fn upload_id(framework: &str, input: &SessionInput) -> String {
    let mut h = Sha256::new();
    h.update(framework.as_bytes());
    for f in &input.files {
        h.update([0]);
        h.update((f.name.len() as u64).to_le_bytes());
        h.update(f.name.as_bytes());
        h.update((f.bytes.len() as u64).to_le_bytes());
        h.update(&f.bytes);
    }
    hex::encode(&h.finalize()[..8])
}

fn version_of(stamps: &[FileStamp]) -> String {
    let mut h = Sha256::new();
    for s in stamps {
        h.update(s.path.to_string_lossy().as_bytes());
        h.update(s.len.to_le_bytes());
        let nanos = s
            .modified
            .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        h.update(nanos.to_le_bytes());
    }
    hex::encode(&h.finalize()[..8])
}

fn stored_counts(c: &Counts) -> StoredCounts {
    StoredCounts {
        message_count: c.message_count,
        node_count: c.node_count,
        edge_count: c.edge_count,
        rules: super::uploads::COUNT_RULES,
    }
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What a parse's counts leave to write to the data directory ([`Store::keep_counts`]).
enum CountsToSave {
    /// Nothing new.
    Nothing,
    /// The sessions-directory counts changed.
    DiskCounts(Arc<DiskCounts>),
    /// An upload's manifest, with counts made by today's rules.
    Manifest(UploadStore, Manifest),
}

impl CountsToSave {
    /// Writes it (blocking); a failure is logged: the counts are a cache.
    fn save(self) {
        match self {
            CountsToSave::Nothing => {}
            CountsToSave::DiskCounts(kept) => kept.save(),
            CountsToSave::Manifest(uploads, manifest) => {
                if let Err(e) = uploads.rewrite_manifest(&manifest) {
                    tracing::warn!(id = %manifest.id, error = %e, "could not update an upload's counts");
                }
            }
        }
    }
}

/// A session's main log, opened for reading (see [`Store::open_main_file`]).
#[derive(Debug)]
pub struct MainFile {
    /// Its name: the uploaded file's name, or the file name on disk.
    pub name: String,
    /// The open handle.
    pub file: std::fs::File,
    /// Its length when opened: what an export sends.
    pub len: u64,
}

/// The data directory exports of a shared upload store are spooled through.
fn spool_dir(config: &StoreConfig) -> Result<&Path, StoreError> {
    config.data_dir.as_deref().ok_or_else(|| {
        StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "uploads kept in PostgreSQL or a bucket need a data directory to spool exports through",
        ))
    })
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
}

impl crate::labels::export::UnitSource for Store {
    fn session_ids(&self) -> Vec<String> {
        self.list().into_iter().map(|info| info.slot.id.clone()).collect()
    }

    async fn unit_rows(&self, session_id: &str) -> Option<Vec<crate::labels::export::UnitRow>> {
        let (_, loaded) = self.get(session_id).await.ok()?;
        tokio::task::spawn_blocking(move || super::units::unit_rows(&loaded.session))
            .await
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::SourceFile;

    /// Regression: a sub-agent log that is a symbolic link was left out, but stamped
    /// through (`stat`): what it points to, outside the sessions directory, was looked at
    /// on each freshness check, and its changes reloaded the session.
    #[test]
    fn a_link_is_stamped_as_a_link_never_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("outside.jsonl");
        std::fs::write(&target, vec![b'x'; 5_000]).unwrap();
        let link = dir.path().join("agent-aaaa1111.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let stamp = FileStamp::of(&link);
        let own = std::fs::symlink_metadata(&link).unwrap();
        assert_eq!(stamp.len, own.len(), "the link's own length (its target's path)");
        assert_ne!(stamp.len, 5_000);
        std::fs::write(&target, vec![b'x'; 9_000]).unwrap();
        assert_eq!(
            FileStamp::of(&link),
            stamp,
            "a change of the target is not the link's"
        );
    }

    fn session(n: usize) -> SessionInput {
        let line = format!(
            r#"{{"type":"user","uuid":"u{n}","parentUuid":null,"message":{{"content":"prompt {n}"}}}}"#
        );
        SessionInput {
            files: vec![SourceFile::new(
                "11111111-2222-4333-8444-555555555555.jsonl",
                format!("{line}\n").into_bytes(),
            )],
        }
    }

    /// `n` chained prompts: a session that holds several times its size once parsed.
    fn tiny_records(tag: &str, n: usize) -> SessionInput {
        let mut text = String::new();
        for i in 0..n {
            let parent = if i == 0 {
                "null".to_owned()
            } else {
                format!("\"{tag}{}\"", i - 1)
            };
            text.push_str(&format!(
                "{{\"type\":\"user\",\"uuid\":\"{tag}{i}\",\"parentUuid\":{parent},\"message\":{{\"content\":\"hi\"}}}}\n"
            ));
        }
        SessionInput {
            files: vec![SourceFile::new(format!("{tag}.jsonl"), text.into_bytes())],
        }
    }

    /// with `--cache-bytes 64M`, three 13 MB uploads of a million tiny
    /// records left 2.9 GB resident: the cache counted each session as twice its input when
    /// it held fifty times more. It now counts what each session holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d2_the_cache_budget_counts_what_sessions_really_hold() {
        let data = tempfile::tempdir().unwrap();
        let uploads: Vec<SessionInput> = ["a", "b", "c"].iter().map(|t| tiny_records(t, 20_000)).collect();
        // Room, by the old estimate (twice the input), for all three.
        let budget = uploads.iter().map(|u| 2 * u.total_bytes()).sum();
        let store = Arc::new(
            Store::new(StoreConfig {
                data_dir: Some(data.path().to_owned()),
                sessions_dirs: Vec::new(),
                cache_bytes: budget,
                // Sessions this dense are past the memory bound: lifted, to measure them.
                memory_bound: None,
                ..StoreConfig::default()
            })
            .unwrap(),
        );
        let mut largest = 0;
        for input in uploads {
            let (_, loaded, _) = store
                .add_upload(Framework::ClaudeCode, input, LoadOptions::default())
                .await
                .unwrap();
            largest = largest.max(loaded.approximate_bytes());
        }
        assert!(
            largest > budget / 3,
            "each session holds more than twice its input"
        );
        let cached = store.cached_bytes();
        assert!(
            cached <= budget.max(largest),
            "{cached} bytes cached for a budget of {budget}"
        );
        let loaded = store.list().iter().filter(|i| i.slot.loaded().is_some()).count();
        assert_eq!(loaded, 1, "the two older sessions were evicted");
    }

    /// Found in review: an upload whose request was dropped (client gone, 408) after its
    /// files were saved was never registered: invisible and undeletable until a restart,
    /// and its gate stayed in the map.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_upload_whose_request_is_dropped_is_still_registered_whole() {
        let data = tempfile::tempdir().unwrap();
        let store = Arc::new(
            Store::new(StoreConfig {
                data_dir: Some(data.path().to_owned()),
                sessions_dirs: Vec::new(),
                cache_bytes: 1 << 30,
                ..StoreConfig::default()
            })
            .unwrap(),
        );
        const UPLOADS: usize = 20;
        for n in 0..UPLOADS {
            let upload = store.add_upload(Framework::ClaudeCode, session(n), LoadOptions::default());
            // Dropped at its first await, before anything is parsed or stored.
            let _ = tokio::time::timeout(std::time::Duration::ZERO, upload).await;
        }
        let mut listed = 0;
        for _ in 0..500 {
            listed = store.list().len();
            if listed == UPLOADS && store.accepting.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(listed, UPLOADS, "every upload is registered");
        assert!(store.accepting.is_empty(), "no gate is left behind");
        let stored = std::fs::read_dir(data.path().join("uploads")).unwrap().count();
        assert_eq!(stored, UPLOADS, "and stored once");
        for info in store.list() {
            store.delete(&info.slot.id).await.unwrap();
        }
        assert_eq!(std::fs::read_dir(data.path().join("uploads")).unwrap().count(), 0);
    }
}
