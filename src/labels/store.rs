//! The label database: one query layer (sqlx's `Any` driver, portable SQL with `$N`
//! parameters) over embedded SQLite or PostgreSQL, migrations run at start, every change
//! in one transaction with its history row.
//!
//! Concurrency: a write's first statement is a no-op `UPDATE` of the set's row. On SQLite
//! it takes the database's write lock before anything is read (waiting up to the busy
//! timeout for other writers), on PostgreSQL the row's lock, so the version check that
//! follows sees the latest committed set. That lock is only taken when the row exists:
//! on PostgreSQL a set being created by another transaction, or created between the lock
//! and the read, is read unlocked. So the write itself is conditional as well: an update
//! only of the version read, an insert that does nothing if a row appeared meanwhile. A
//! write that finds the set moved under it starts again in the same transaction (each
//! statement of PostgreSQL's read committed sees the latest commits), so versions climb by
//! one per acknowledged write on both backends, and no write is lost.
//!
//! An import writes in transactions of about 100 ms (see [`super::import`]), and on SQLite
//! lets this process's other writes in progress have the lock before each
//! (`LabelStore::yield_to_writes`). A write that still finds the database busy once the
//! busy timeout (10 s) has passed, or no connection free within the pool's acquire timeout,
//! fails with [`LabelError::Busy`], a 503 with `Retry-After` to clients.

use std::borrow::Cow;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyConnection, AnyPool, Connection, Executor, Row};

use super::codebook::Codebook;
use super::codebooks::Codebooks;
use super::model::{Action, HistoryEntry, LabelSet, Precondition, SetKey, Status};
use super::sets_cache::{Sets, SetsCache};
use super::validate::{ValidRemoval, ValidSet, Validator};

/// Which database holds the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite (a file in the data directory by default).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// The backend of a database URL.
    pub fn of_url(url: &str) -> Option<Backend> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else {
            None
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }

    fn migrator(self) -> Migrator {
        let files: [(&str, &str); 6] = match self {
            Backend::Sqlite => [
                ("labels", include_str!("../../migrations/sqlite/0001_labels.sql")),
                (
                    "suggestions queue",
                    include_str!("../../migrations/common/0002_suggestions_queue.sql"),
                ),
                (
                    "codebooks",
                    include_str!("../../migrations/common/0003_codebooks.sql"),
                ),
                ("rounds", include_str!("../../migrations/common/0004_rounds.sql")),
                (
                    "uploads",
                    include_str!("../../migrations/sqlite/0005_uploads.sql"),
                ),
                (
                    "upload objects",
                    include_str!("../../migrations/sqlite/0006_upload_objects.sql"),
                ),
            ],
            Backend::Postgres => [
                (
                    "labels",
                    include_str!("../../migrations/postgres/0001_labels.sql"),
                ),
                (
                    "suggestions queue",
                    include_str!("../../migrations/common/0002_suggestions_queue.sql"),
                ),
                (
                    "codebooks",
                    include_str!("../../migrations/common/0003_codebooks.sql"),
                ),
                ("rounds", include_str!("../../migrations/common/0004_rounds.sql")),
                (
                    "uploads",
                    include_str!("../../migrations/postgres/0005_uploads.sql"),
                ),
                (
                    "upload objects",
                    include_str!("../../migrations/postgres/0006_upload_objects.sql"),
                ),
            ],
        };
        let migrations = files
            .into_iter()
            .zip(1..)
            .map(|((name, sql), version)| {
                Migration::new(
                    version,
                    Cow::Borrowed(name),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    false,
                )
            })
            .collect();
        Migrator {
            migrations: Cow::Owned(migrations),
            ..Migrator::DEFAULT
        }
    }
}

/// The URL of the default label database: `labels.sqlite3` in `data_dir`, created when
/// missing.
pub fn default_url(data_dir: &Path) -> Result<String, OpenError> {
    let path = data_dir
        .to_str()
        .ok_or_else(|| OpenError::Url("the data directory's path is not UTF-8".into()))?;
    // The driver percent-decodes the path: `%`, `?` and `#` are encoded.
    let path = path.replace('%', "%25").replace('?', "%3F").replace('#', "%23");
    Ok(format!(
        "sqlite://{}/labels.sqlite3?mode=rwc",
        path.trim_end_matches('/')
    ))
}

/// A database URL with its password replaced by `***`, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_owned(),
    }
}

/// Why the label database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL is unusable.
    #[error("invalid label database URL: {0}")]
    Url(String),
    /// Connecting failed.
    #[error("cannot open the label database {url}: {reason}")]
    Connect {
        /// The URL, password redacted.
        url: String,
        /// The driver's message (password redacted), or the wait that ran out.
        reason: String,
    },
    /// The SQLite file to read does not exist ([`LabelStore::open_existing`]).
    #[error("no label store at {}: the file does not exist", .0.display())]
    Missing(std::path::PathBuf),
    /// The database holds none of the label store's tables ([`LabelStore::open_existing`]).
    #[error("the database {0} holds no label store (its tables are missing)")]
    NoLabelStore(String),
    /// The database's migrations are not all applied ([`LabelStore::open_existing`]).
    #[error(
        "the label database {url} is at migration {applied} of {current}: start the server \
         (sessiongraph serve) on it once to bring it up to date"
    )]
    Outdated {
        /// The URL, password redacted.
        url: String,
        /// The latest migration applied.
        applied: i64,
        /// The latest this version has.
        current: i64,
    },
    /// A migration failed.
    #[error("cannot migrate the label database {url}: {source}")]
    Migrate {
        /// The URL, password redacted.
        url: String,
        /// The cause.
        source: sqlx::migrate::MigrateError,
    },
    /// The labels written before codebooks had ids could not be given the default one.
    #[error("cannot give the label database {url}'s earlier labels the default codebook: {source}")]
    Adopt {
        /// The URL, password redacted.
        url: String,
        /// The cause.
        source: LabelError,
    },
}

/// Why a label operation failed in the store (a write is checked before it gets here:
/// see [`super::validate`]).
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// There is no set to remove.
    #[error("no label set of annotator {annotator} on unit {event_id}")]
    NoSuchSet {
        /// The unit.
        event_id: String,
        /// Whose set was asked for.
        annotator: String,
    },
    /// `If-Match` does not hold: another write came first. Carries the current set.
    #[error("the label set changed since it was read (If-Match does not hold)")]
    Conflict {
        /// The set as it stands (`None`: there is none).
        current: Option<Box<LabelSet>>,
    },
    /// `If-None-Match: *` does not hold: a set exists (another write created it first).
    /// Carries it.
    #[error("a label set exists already (If-None-Match: * does not hold)")]
    Exists {
        /// The set as it stands.
        current: Box<LabelSet>,
    },
    /// The database failed.
    #[error("label database: {0}")]
    Database(sqlx::Error),
    /// A stored row does not read back.
    #[error("label database holds a malformed row: {0}")]
    Corrupt(String),
    /// The store could not serve the request now (other writes hold it, or kept moving a
    /// set under this one); the client may retry shortly.
    #[error("{0}")]
    Busy(String),
    /// The database cannot be reached (down, restarting, the network); the client may
    /// retry once it is back, which needs no restart of the server.
    #[error("{0}")]
    Unreachable(String),
    /// The database has no room left (disk full, quota).
    #[error("the label database has no space left: {0}")]
    StorageFull(sqlx::Error),
}

impl From<sqlx::Error> for LabelError {
    /// Sorts a database failure into what the client can do about it: wait (busy,
    /// unreachable), free space (full), or nothing (the rest, a 500 whose cause is logged).
    fn from(e: sqlx::Error) -> LabelError {
        use sqlx::Error as E;
        match &e {
            E::PoolTimedOut => LabelError::Busy(
                "The label database did not hand out a connection in time (busy, or not reachable)".into(),
            ),
            E::Io(_) | E::Tls(_) | E::PoolClosed | E::WorkerCrashed | E::Protocol(_) => {
                LabelError::Unreachable("The label database cannot be reached".into())
            }
            E::Database(d) => match database_failure(d.as_ref()) {
                Some(DatabaseFailure::Busy) => LabelError::Busy(
                    "The label database is busy: other writes held it for longer than the server waits"
                        .into(),
                ),
                Some(DatabaseFailure::Unreachable) => {
                    LabelError::Unreachable("The label database is not accepting connections".into())
                }
                Some(DatabaseFailure::Full) => LabelError::StorageFull(e),
                None => LabelError::Database(e),
            },
            _ => LabelError::Database(e),
        }
    }
}

/// A database failure that a client can wait out or an operator can fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatabaseFailure {
    /// Other work holds the database, or no connection was free in time: retry shortly.
    Busy,
    /// The database cannot be reached, or does not accept connections now.
    Unreachable,
    /// The database has no room left.
    Full,
}

/// What `e` means to a client, whichever store of the database met it: wait (busy,
/// unreachable), free space (full), or `None` for the rest (a 500 whose cause is logged).
/// The label store's own errors (`LabelError`) are sorted the same way.
pub(crate) fn failure_of(e: &sqlx::Error) -> Option<DatabaseFailure> {
    use sqlx::Error as E;
    match e {
        E::PoolTimedOut => Some(DatabaseFailure::Busy),
        E::Io(_) | E::Tls(_) | E::PoolClosed | E::WorkerCrashed | E::Protocol(_) => {
            Some(DatabaseFailure::Unreachable)
        }
        E::Database(d) => database_failure(d.as_ref()),
        _ => None,
    }
}

/// What a database error means, by its code: SQLite's `SQLITE_BUSY`, `SQLITE_LOCKED` and
/// `SQLITE_FULL` (primary result codes, extended ones included); PostgreSQL's connection
/// exceptions (class 08), shutdown and start-up (57P01 to 57P03), too many connections
/// (53300), disk full (53100) and out of memory (53200: another replica may still serve).
fn database_failure(e: &dyn sqlx::error::DatabaseError) -> Option<DatabaseFailure> {
    if e.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        let code: i64 = e.code()?.parse().ok()?;
        return match code & 0xff {
            5 | 6 => Some(DatabaseFailure::Busy),
            13 => Some(DatabaseFailure::Full),
            _ => None,
        };
    }
    let postgres = e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
    match postgres.code() {
        "53100" => Some(DatabaseFailure::Full),
        // A lock not granted in time (`lock_timeout`), a statement cancelled by
        // `statement_timeout`, a deadlock or a serialization failure: the write lost a race
        // or waited too long, and can be sent again.
        "55P03" | "57014" | "40P01" | "40001" => Some(DatabaseFailure::Busy),
        "53300" | "53200" | "57P01" | "57P02" | "57P03" => Some(DatabaseFailure::Unreachable),
        code if code.starts_with("08") => Some(DatabaseFailure::Unreachable),
        _ => None,
    }
}

/// How long a request waits for a PostgreSQL connection: past it, a server that is down
/// (whose connections are refused, and retried until then) answers 503 instead of holding
/// the request.
const POSTGRES_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a request waits for an SQLite connection (the database cannot be down; a
/// long import holds the write lock, waited for through the busy timeout).
const SQLITE_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a team labels: who reviews, whether annotators label blind, how long the queue
/// holds a unit and how many annotators it hands each unit to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPolicy {
    /// Annotators allowed to write `adjudicated` sets (and who see every set in blind mode).
    pub reviewers: Vec<String>,
    /// Blind mode: an annotator sees only their own sets on a unit until they submitted it.
    pub blind: bool,
    /// How long a unit handed out by the queue stays reserved.
    pub reservation: Duration,
    /// How many annotators the queue hands each unit to (the server's, never a client's).
    pub overlap: usize,
}

impl Default for LabelPolicy {
    fn default() -> Self {
        LabelPolicy {
            reviewers: Vec::new(),
            blind: false,
            reservation: Duration::from_secs(600),
            overlap: 2,
        }
    }
}

/// How long opening the label database waits for its first connection (see
/// [`LabelStore::open`]): a host that drops packets, say, fails after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a pool's connections may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadWrite,
    ReadOnly,
}

/// The backend of `url`, or [`OpenError::Url`].
fn backend_of(url: &str) -> Result<Backend, OpenError> {
    sqlx::any::install_default_drivers();
    Backend::of_url(url).ok_or_else(|| {
        OpenError::Url(format!(
            "{} (expected postgres://, postgresql:// or sqlite:)",
            redact(url)
        ))
    })
}

/// A pool on `url`, after one connection made within [`CONNECT_TIMEOUT`] (then closed)
/// has shown that the database answers.
async fn connect(url: &str, backend: Backend, access: Access) -> Result<AnyPool, OpenError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, AnyConnection::connect(url)).await {
        Ok(Ok(first)) => {
            let _ = first.close().await;
        }
        Ok(Err(e)) => return Err(connect_error(url, &e)),
        Err(_) => {
            return Err(OpenError::Connect {
                url: redact(url),
                reason: format!(
                    "no connection within {} s (is the server up, and reachable from here?)",
                    CONNECT_TIMEOUT.as_secs()
                ),
            })
        }
    }
    AnyPoolOptions::new()
        .max_connections(if backend == Backend::Sqlite { 4 } else { 10 })
        .acquire_timeout(match backend {
            Backend::Sqlite => SQLITE_ACQUIRE_TIMEOUT,
            Backend::Postgres => POSTGRES_ACQUIRE_TIMEOUT,
        })
        .after_connect(move |conn, _| {
            Box::pin(async move {
                match (backend, access) {
                    (Backend::Sqlite, Access::ReadWrite) => {
                        // WAL: readers do not wait for writers. FULL: a commit is on disk
                        // before the write is acknowledged.
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute("PRAGMA synchronous = FULL").await?;
                    }
                    // A store opened to read refuses writes in the database itself.
                    (Backend::Sqlite, Access::ReadOnly) => {
                        conn.execute("PRAGMA query_only = ON").await?;
                    }
                    (Backend::Postgres, Access::ReadOnly) => {
                        conn.execute("SET default_transaction_read_only = on").await?;
                    }
                    (Backend::Postgres, Access::ReadWrite) => {}
                }
                if backend == Backend::Sqlite {
                    conn.execute("PRAGMA busy_timeout = 10000").await?;
                }
                Ok(())
            })
        })
        .connect(url)
        .await
        .map_err(|e| connect_error(url, &e))
}

/// [`OpenError::Connect`] for `e`, the URL's password redacted from the URL and from the
/// driver's message.
fn connect_error(url: &str, e: &sqlx::Error) -> OpenError {
    OpenError::Connect {
        url: redact(url),
        reason: redacted_reason(url, e),
    }
}

/// The driver's message of `e`, a failure on the database at `url`, with the URL's
/// password replaced by `***`.
pub(crate) fn redacted_reason(url: &str, e: &sqlx::Error) -> String {
    let reason = e.to_string();
    match password_of(url).filter(|p| !p.is_empty()) {
        Some(password) => reason.replace(password, "***"),
        None => reason,
    }
}

/// The password of a database URL, if it has one.
fn password_of(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let (userinfo, _) = rest.split_once('@')?;
    userinfo.split_once(':').map(|(_, password)| password)
}

/// `url`, an SQLite database's, made read-only (`mode=ro`), once its file is known to
/// exist ([`OpenError::Missing`] when it does not). Without a `-wal` file beside it no
/// connection has it open (the last to close removes it), and the file holds every commit:
/// it is then read as immutable, which creates no `-wal` or `-shm` file (a read-only
/// connection to a database in WAL mode would otherwise make both, and leave them).
fn existing_sqlite(url: &str) -> Result<String, OpenError> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| OpenError::Url(format!("{}: {e}", redact(url))))?;
    let file = options.get_filename();
    if !file.is_file() {
        return Err(OpenError::Missing(file.to_owned()));
    }
    let mut wal = file.as_os_str().to_owned();
    wal.push("-wal");
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("mode=") && !p.starts_with("immutable="))
        .collect();
    params.push("mode=ro");
    if !Path::new(&wal).exists() {
        params.push("immutable=true");
    }
    Ok(format!("{base}?{}", params.join("&")))
}

/// Refuses a database that holds no label store, or one whose migrations are not all
/// applied (reading it could fail on a column it lacks).
async fn check_migrated(pool: &AnyPool, url: &str, backend: Backend) -> Result<(), OpenError> {
    let applied: Result<i64, sqlx::Error> =
        sqlx::query("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await
            .and_then(|row| row.try_get(0));
    let current = backend.migrator().iter().count() as i64;
    match applied {
        Ok(latest) if latest == current => Ok(()),
        Ok(latest) => Err(OpenError::Outdated {
            url: redact(url),
            applied: latest,
            current,
        }),
        Err(e) if e.to_string().contains("_sqlx_migrations") => Err(OpenError::NoLabelStore(redact(url))),
        Err(e) => Err(connect_error(url, &e)),
    }
}

/// The label store: the pool, the codebook sets are checked against, and the policy.
#[derive(Debug)]
pub struct LabelStore {
    pub(super) pool: AnyPool,
    /// Writes of this process in progress, an import's batches left out (see
    /// [`LabelStore::yield_to_writes`]).
    writes_in_progress: AtomicUsize,
    /// The sets of recently read sessions (SQLite only).
    sets: Option<Arc<SetsCache>>,
    backend: Backend,
    codebooks: Codebooks,
    policy: LabelPolicy,
}

/// The longest an import's batch waits for other writes in progress (see
/// `LabelStore::yield_to_writes`): two tries of a long-waiting writer, so that a stream of
/// writes slows an import down without stopping it.
pub const YIELD_TO_WRITES: Duration = Duration::from_millis(250);

/// A write in progress, counted while this lives (see [`LabelStore::write_in_progress`]).
pub(crate) struct WriteInProgress<'s>(&'s AtomicUsize);

impl Drop for WriteInProgress<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The cache of sets read for a database at `url`: an SQLite file's (see
/// [`SetsCache`]); none for PostgreSQL, which replicas may share without a file to watch.
fn sets_cache_of(url: &str, backend: Backend) -> Option<Arc<SetsCache>> {
    if backend != Backend::Sqlite {
        return None;
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
    Some(Arc::new(SetsCache::of_database(options.get_filename())))
}

/// The columns [`set_of_row`] reads.
pub(crate) const SET_COLUMNS: &str =
    "event_id, annotator, status, labels, note, lead_time_ms, version, updated_at, codebook_version";
/// The condition on a set's key, its four parameters bound by [`bind_key`].
const KEY_WHERE: &str = "codebook = $1 AND session_id = $2 AND event_id = $3 AND annotator = $4";

/// Binds `key` to the first four parameters, as [`KEY_WHERE`] names them.
pub(super) fn bind_key<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    key: SetKey<'q>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(key.codebook)
        .bind(key.session_id)
        .bind(key.event_id)
        .bind(key.annotator)
}

impl LabelStore {
    /// Opens (creating if needed) the database at `url` and runs the migrations. One
    /// connection is made first, within [`CONNECT_TIMEOUT`], so that a server that refuses
    /// it, a password it rejects or a file that cannot be created fails at once with its
    /// cause, not after the pool's wait with "pool timed out".
    pub async fn open(url: &str, codebooks: Codebooks, policy: LabelPolicy) -> Result<LabelStore, OpenError> {
        let backend = backend_of(url)?;
        let pool = connect(url, backend, Access::ReadWrite).await?;
        let failed = |source| OpenError::Migrate {
            url: redact(url),
            source,
        };
        // One connection for both steps: each connection to `sqlite::memory:` is a
        // database of its own.
        let mut conn = pool.acquire().await.map_err(|e| connect_error(url, &e))?;
        backend.migrator().run(&mut *conn).await.map_err(failed)?;
        adopt_unassigned(&mut conn, &codebooks.default().id)
            .await
            .map_err(|source| OpenError::Adopt {
                url: redact(url),
                source,
            })?;
        drop(conn);
        Ok(LabelStore::over(pool, url, backend, codebooks, policy))
    }

    /// Opens the label store at `url` to read it, creating and changing nothing: an SQLite
    /// file that does not exist, a database without the store's tables, or one whose
    /// migrations are not all applied (a server of this version brings it up to date at its
    /// start) is refused with [`OpenError::Missing`], [`OpenError::NoLabelStore`] or
    /// [`OpenError::Outdated`]. An SQLite file is opened read-only (`mode=ro`): while a
    /// server has it open (its `-wal` file is there) alongside the server's connections;
    /// otherwise as immutable, so that SQLite makes no `-wal` or `-shm` file beside it.
    pub async fn open_existing(
        url: &str,
        codebooks: Codebooks,
        policy: LabelPolicy,
    ) -> Result<LabelStore, OpenError> {
        let backend = backend_of(url)?;
        let url = match backend {
            Backend::Sqlite => existing_sqlite(url)?,
            Backend::Postgres => url.to_owned(),
        };
        let pool = connect(&url, backend, Access::ReadOnly).await?;
        check_migrated(&pool, &url, backend).await?;
        Ok(LabelStore::over(pool, &url, backend, codebooks, policy))
    }

    /// The store over an open `pool`.
    fn over(
        pool: AnyPool,
        url: &str,
        backend: Backend,
        codebooks: Codebooks,
        policy: LabelPolicy,
    ) -> LabelStore {
        LabelStore {
            pool,
            writes_in_progress: AtomicUsize::new(0),
            sets: sets_cache_of(url, backend),
            backend,
            codebooks,
            policy,
        }
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// True when [`LabelStore::list`] answers from memory (SQLite, see [`SetsCache`]): a
    /// caller reading a session's sets more than once gains from holding them; otherwise
    /// [`LabelStore::for_each_unit_sets`] reads them without holding them all.
    pub fn caches_sets(&self) -> bool {
        self.sets.is_some()
    }

    /// The codebooks sets are written under.
    pub fn codebooks(&self) -> &Codebooks {
        &self.codebooks
    }

    /// What writes under `codebook` are checked against: it and the reviewers.
    pub fn validator<'a>(&'a self, codebook: &'a Codebook) -> Validator<'a> {
        Validator::new(codebook, &self.policy.reviewers)
    }

    /// True when `annotator` is a configured reviewer.
    pub fn is_reviewer(&self, annotator: &str) -> bool {
        self.policy.reviewers.iter().any(|r| r == annotator)
    }

    /// The labeling policy.
    pub fn policy(&self) -> &LabelPolicy {
        &self.policy
    }

    /// The connection pool, for the other stores of the label database (rounds).
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Marks a write in progress (waiting for a connection or for SQLite's write lock, or
    /// holding it) until the mark is dropped. Every write but an import's batches is marked.
    pub(crate) fn write_in_progress(&self) -> WriteInProgress<'_> {
        self.writes_in_progress.fetch_add(1, Ordering::Relaxed);
        WriteInProgress(&self.writes_in_progress)
    }

    /// Lets other writes in before an import's batch: on SQLite, waits while any is in
    /// progress, up to [`YIELD_TO_WRITES`]. SQLite's busy handler has a writer that waited
    /// a while try the lock only every 100 ms, while a batch that just began waiting tries
    /// it within milliseconds: without the wait, a `PUT` made during an import found the
    /// lock free only by chance between two of its transactions (in the F8 test some waited
    /// 9.6 s of the 10 s busy timeout). PostgreSQL locks rows, not the database: no wait.
    pub(super) async fn yield_to_writes(&self) {
        if self.backend != Backend::Sqlite {
            return;
        }
        let until = Instant::now() + YIELD_TO_WRITES;
        while self.writes_in_progress.load(Ordering::Relaxed) > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Whether the database answers a query within `within`: `Err` says why not (for
    /// `/readyz`).
    pub async fn ping(&self, within: Duration) -> Result<(), LabelError> {
        let ping = async {
            sqlx::query("SELECT 1").execute(&self.pool).await?;
            Ok(())
        };
        match tokio::time::timeout(within, ping).await {
            Ok(answer) => answer,
            Err(_) => Err(LabelError::Unreachable(format!(
                "The label database did not answer within {} ms",
                within.as_millis()
            ))),
        }
    }

    /// Closes the pool (waits for connections in use).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Replaces the set `valid` is a write of, if `precondition` holds. Returns the stored
    /// set and whether it is new.
    pub async fn put(
        &self,
        valid: &ValidSet,
        precondition: &Precondition,
    ) -> Result<(LabelSet, bool), LabelError> {
        let write = SetWrite {
            set: valid,
            precondition,
            unchanged: Unchanged::Write,
        };
        let _counted = self.write_in_progress();
        let mut tx = self.pool.begin().await?;
        let written = write_set(&mut tx, &write).await?;
        tx.commit().await?;
        // A write that is not skipped always stores a set.
        let written = written.ok_or_else(|| LabelError::Corrupt("a PUT stored nothing".into()))?;
        Ok((written.set, written.created))
    }

    /// Removes the set `removal` names if `precondition` holds; returns it.
    pub async fn delete(
        &self,
        removal: &ValidRemoval,
        precondition: &Precondition,
    ) -> Result<LabelSet, LabelError> {
        let key = removal.key();
        let _counted = self.write_in_progress();
        let mut tx = self.pool.begin().await?;
        for _ in 0..WRITE_ATTEMPTS {
            let Some(current) = lock_and_read(&mut tx, key).await? else {
                return Err(LabelError::NoSuchSet {
                    event_id: key.event_id.to_owned(),
                    annotator: key.annotator.to_owned(),
                });
            };
            if !precondition.holds(Some(current.version)) {
                return Err(LabelError::Conflict {
                    current: Some(Box::new(current)),
                });
            }
            let delete = format!("DELETE FROM label_sets WHERE {KEY_WHERE} AND version = $5");
            let removed = bind_key(sqlx::query(&delete), key)
                .bind(current.version)
                .execute(&mut *tx)
                .await?;
            if removed.rows_affected() == 0 {
                continue;
            }
            append_history(
                &mut tx,
                key,
                Action::Delete,
                Some(&current),
                None,
                removal.actor(),
            )
            .await?;
            tx.commit().await?;
            return Ok(current);
        }
        Err(moved_too_often())
    }

    /// One set, if there is one (the key as given: see [`super::validate::check_key`]).
    pub async fn get(&self, key: SetKey<'_>) -> Result<Option<LabelSet>, LabelError> {
        let mut conn = self.pool.acquire().await?;
        read_set(&mut conn, key).await
    }

    /// Every set of the session, by unit then annotator (callers filter with
    /// [`super::model::SetFilter::matches`] after deciding what the asker may see). Shared,
    /// not copied: on SQLite the same sets answer every read until a commit (see
    /// [`SetsCache`]); a copy per read cost seconds for a session of millions of sets.
    pub async fn list(&self, codebook: &str, session_id: &str) -> Result<Sets, LabelError> {
        let Some(cache) = &self.sets else {
            return Ok(Arc::new(self.read_sets(codebook, session_id).await?));
        };
        let fill = match cache.get(codebook, session_id) {
            Ok(sets) => return Ok(sets),
            Err(fill) => fill,
        };
        let sets = Arc::new(self.read_sets(codebook, session_id).await?);
        cache.fill(codebook, session_id, fill, &sets);
        Ok(sets)
    }

    /// Every set of the session under `codebook`, read from the database a unit at a time
    /// (see [`super::set_reads`]) into a list sized by the database's count.
    async fn read_sets(&self, codebook: &str, session_id: &str) -> Result<Vec<LabelSet>, LabelError> {
        let mut sets = Vec::with_capacity(self.count_sets(codebook, session_id).await?);
        self.for_each_unit_sets(codebook, session_id, None, |unit| sets.extend(unit))
            .await?;
        Ok(sets)
    }

    /// The changes of the unit's sets (all annotators, or one), oldest first. The ids are
    /// taken as given (see [`super::validate::check_key`]).
    pub async fn history(
        &self,
        codebook: &str,
        session_id: &str,
        event_id: &str,
        annotator: Option<&str>,
    ) -> Result<Vec<HistoryEntry>, LabelError> {
        let mut sql = "SELECT event_id, annotator, version, action, actor, at, before_set, after_set \
                       FROM label_history WHERE codebook = $1 AND session_id = $2 AND event_id = $3"
            .to_owned();
        if annotator.is_some() {
            sql.push_str(" AND annotator = $4");
        }
        sql.push_str(" ORDER BY id");
        let mut query = sqlx::query(&sql).bind(codebook).bind(session_id).bind(event_id);
        if let Some(a) = annotator {
            query = query.bind(a);
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter().map(history_of_row).collect()
    }
}

/// Gives the codebook `default` the rows written before labels belonged to a codebook (the
/// migration gave them the codebook `''`). Cheap when there are none: each table's key or
/// index starts with the codebook.
async fn adopt_unassigned(conn: &mut AnyConnection, default: &str) -> Result<(), LabelError> {
    let mut tx = conn.begin().await?;
    let mut adopted = 0;
    for table in [
        "label_sets",
        "label_history",
        "label_suggestions",
        "label_reservations",
    ] {
        let done = sqlx::query(&format!("UPDATE {table} SET codebook = $1 WHERE codebook = ''"))
            .bind(default)
            .execute(&mut *tx)
            .await?;
        adopted += done.rows_affected();
    }
    tx.commit().await?;
    if adopted > 0 {
        tracing::info!(
            codebook = default,
            rows = adopted,
            "labels written before codebooks had ids now belong to the default codebook"
        );
    }
    Ok(())
}

/// How many times a write starts again, in its transaction, when the set moved between
/// its read and its write (each time because another write was committed first).
const WRITE_ATTEMPTS: usize = 16;

/// A write that moved under its feet [`WRITE_ATTEMPTS`] times.
fn moved_too_often() -> LabelError {
    LabelError::Busy("The label set kept changing under this write".into())
}

/// Now, as the store writes times: RFC 3339, UTC, milliseconds.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Takes the write lock of the set (see the module's documentation), then reads it.
async fn lock_and_read(conn: &mut AnyConnection, key: SetKey<'_>) -> Result<Option<LabelSet>, LabelError> {
    let lock = format!("UPDATE label_sets SET version = version WHERE {KEY_WHERE}");
    bind_key(sqlx::query(&lock), key).execute(&mut *conn).await?;
    read_set(conn, key).await
}

/// What [`write_set`] does with a write that would change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unchanged {
    /// Write it anyway (a `PUT`: a new version, a history row).
    Write,
    /// Leave the set as it is (an import: importing the same file twice changes nothing).
    Skip,
}

/// A set as [`write_set`] stored it.
pub(super) struct Written {
    /// The set after the write.
    pub set: LabelSet,
    /// True when there was no set before.
    pub created: bool,
}

/// One write of a set, as [`write_set`] takes it.
pub(super) struct SetWrite<'a> {
    /// The set written, what it becomes and who writes it.
    pub set: &'a ValidSet,
    /// When the write may happen.
    pub precondition: &'a Precondition,
    /// What to do when the set already holds exactly this.
    pub unchanged: Unchanged,
}

/// Replaces the set `write.set` names by what it becomes, inside the caller's transaction,
/// if its precondition holds, with its history row; a submitted or discarded set ends the
/// annotator's queue reservation of the unit. `None` when `write.unchanged` is
/// [`Unchanged::Skip`] and the set already holds exactly this. Starts again when the set
/// moved between its read and its write (see the module's documentation).
pub(super) async fn write_set(
    conn: &mut AnyConnection,
    write: &SetWrite<'_>,
) -> Result<Option<Written>, LabelError> {
    let key = write.set.key();
    let new = write.set.set();
    let lead_time = new.lead_time_ms().map(|ms| ms as f64 / 1000.0);
    for _ in 0..WRITE_ATTEMPTS {
        let current = lock_and_read(conn, key).await?;
        if !write.precondition.holds(current.as_ref().map(|c| c.version)) {
            return Err(refused(write.precondition, current));
        }
        if write.unchanged == Unchanged::Skip
            && current.as_ref().is_some_and(|c| {
                c.status == new.status()
                    && c.labels == new.labels()
                    && c.note.as_deref() == new.note()
                    && c.lead_time == lead_time
            })
        {
            return Ok(None);
        }
        let after = LabelSet {
            event_id: key.event_id.to_owned(),
            annotator: key.annotator.to_owned(),
            status: new.status(),
            labels: new.labels().to_vec(),
            note: new.note().map(str::to_owned),
            lead_time,
            version: next_version(conn, key, current.as_ref()).await?,
            updated_at: now(),
            codebook_version: Some(write.set.codebook_version().to_owned()),
        };
        if !store_set(
            conn,
            key,
            &after,
            new.lead_time_ms(),
            current.as_ref().map(|c| c.version),
        )
        .await?
        {
            continue;
        }
        append_history(
            conn,
            key,
            Action::Put,
            current.as_ref(),
            Some(&after),
            write.set.actor(),
        )
        .await?;
        end_reservation(conn, key, new.status()).await?;
        return Ok(Some(Written {
            set: after,
            created: current.is_none(),
        }));
    }
    Err(moved_too_often())
}

/// Why `precondition` refused a write to the set `current` (`None`: there is none).
fn refused(precondition: &Precondition, current: Option<LabelSet>) -> LabelError {
    match (precondition, current) {
        (Precondition::Absent, Some(current)) => LabelError::Exists {
            current: Box::new(current),
        },
        (_, current) => LabelError::Conflict {
            current: current.map(Box::new),
        },
    }
}

/// Ends the annotator's queue reservation of the unit once their set is submitted or
/// discarded.
async fn end_reservation(
    conn: &mut AnyConnection,
    key: SetKey<'_>,
    status: Status,
) -> Result<(), LabelError> {
    if matches!(status, Status::Submitted | Status::Discarded) {
        let end = format!("DELETE FROM label_reservations WHERE {KEY_WHERE}");
        bind_key(sqlx::query(&end), key).execute(&mut *conn).await?;
    }
    Ok(())
}

/// Stores `after` (its lead time in milliseconds `lead_time_ms`, as written) in place of
/// the set at version `read` (`None`: there was none): an update only of that version, an
/// insert only if no row appeared meanwhile. False when the set moved since it was read,
/// and nothing was written.
async fn store_set(
    conn: &mut AnyConnection,
    key: SetKey<'_>,
    after: &LabelSet,
    lead_time_ms: Option<i64>,
    read: Option<i64>,
) -> Result<bool, LabelError> {
    let labels = serde_json::to_string(&after.labels).map_err(|e| LabelError::Corrupt(e.to_string()))?;
    let sql = if read.is_some() {
        "UPDATE label_sets SET status = $5, labels = $6, note = $7, lead_time_ms = $8, version = $9, \
         updated_at = $10, codebook_version = $11 \
         WHERE codebook = $1 AND session_id = $2 AND event_id = $3 AND annotator = $4 AND version = $12"
    } else {
        "INSERT INTO label_sets (codebook, session_id, event_id, annotator, status, labels, note, \
         lead_time_ms, version, updated_at, codebook_version) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (codebook, session_id, event_id, annotator) DO NOTHING"
    };
    let query = bind_key(sqlx::query(sql), key)
        .bind(after.status.as_str())
        .bind(labels)
        .bind(after.note.clone())
        .bind(lead_time_ms)
        .bind(after.version)
        .bind(after.updated_at.clone())
        .bind(after.codebook_version.clone());
    let query = match read {
        Some(version) => query.bind(version),
        None => query,
    };
    let done = query.execute(&mut *conn).await?;
    Ok(done.rows_affected() == 1)
}

async fn read_set(conn: &mut AnyConnection, key: SetKey<'_>) -> Result<Option<LabelSet>, LabelError> {
    let select = format!("SELECT {SET_COLUMNS} FROM label_sets WHERE {KEY_WHERE}");
    let row = bind_key(sqlx::query(&select), key)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(set_of_row).transpose()
}

/// The version a write gives the set: above the current one and above every version the
/// history knows (a set removed then written again does not reuse an old ETag).
async fn next_version(
    conn: &mut AnyConnection,
    key: SetKey<'_>,
    current: Option<&LabelSet>,
) -> Result<i64, LabelError> {
    let select = format!("SELECT MAX(version) AS v FROM label_history WHERE {KEY_WHERE}");
    let row = bind_key(sqlx::query(&select), key).fetch_one(&mut *conn).await?;
    let seen: Option<i64> = row.try_get("v")?;
    Ok(seen.max(current.map(|c| c.version)).unwrap_or(0) + 1)
}

async fn append_history(
    conn: &mut AnyConnection,
    key: SetKey<'_>,
    action: Action,
    before: Option<&LabelSet>,
    after: Option<&LabelSet>,
    actor: &str,
) -> Result<(), LabelError> {
    let json = |s: Option<&LabelSet>| {
        s.map(serde_json::to_string)
            .transpose()
            .map_err(|e| LabelError::Corrupt(e.to_string()))
    };
    let version = after.or(before).map_or(0, |s| s.version);
    let insert = "INSERT INTO label_history (codebook, session_id, event_id, annotator, version, action, \
                  actor, at, before_set, after_set) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
    bind_key(sqlx::query(insert), key)
        .bind(version)
        .bind(action.as_str())
        .bind(actor)
        .bind(now())
        .bind(json(before)?)
        .bind(json(after)?)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The set a row of [`SET_COLUMNS`] holds.
pub(crate) fn set_of_row(row: &AnyRow) -> Result<LabelSet, LabelError> {
    let status: String = row.try_get("status")?;
    let labels: String = row.try_get("labels")?;
    let lead_time_ms: Option<i64> = row.try_get("lead_time_ms")?;
    Ok(LabelSet {
        event_id: row.try_get("event_id")?,
        annotator: row.try_get("annotator")?,
        status: Status::parse(&status).ok_or_else(|| LabelError::Corrupt(format!("status {status:?}")))?,
        labels: serde_json::from_str(&labels).map_err(|e| LabelError::Corrupt(format!("labels: {e}")))?,
        note: row.try_get("note")?,
        lead_time: lead_time_ms.map(|ms| ms as f64 / 1000.0),
        version: row.try_get("version")?,
        updated_at: row.try_get("updated_at")?,
        codebook_version: row.try_get("codebook_version")?,
    })
}

fn history_of_row(row: &AnyRow) -> Result<HistoryEntry, LabelError> {
    let action: String = row.try_get("action")?;
    let set = |column: &str| -> Result<Option<LabelSet>, LabelError> {
        let text: Option<String> = row.try_get(column)?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| LabelError::Corrupt(format!("{column}: {e}"))))
            .transpose()
    };
    Ok(HistoryEntry {
        event_id: row.try_get("event_id")?,
        annotator: row.try_get("annotator")?,
        version: row.try_get("version")?,
        action: match action.as_str() {
            "put" => Action::Put,
            "delete" => Action::Delete,
            other => return Err(LabelError::Corrupt(format!("action {other:?}"))),
        },
        actor: row.try_get("actor")?,
        at: row.try_get("at")?,
        before: set("before_set")?,
        after: set("after_set")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_classified_and_redacted() {
        assert_eq!(Backend::of_url("postgres://a:b@h/db"), Some(Backend::Postgres));
        assert_eq!(
            Backend::of_url("sqlite:///x/labels.sqlite3"),
            Some(Backend::Sqlite)
        );
        assert_eq!(Backend::of_url("mysql://h/db"), None);
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        let url = default_url(Path::new("/tmp/a?b#c%/")).unwrap();
        assert_eq!(url, "sqlite:///tmp/a%3Fb%23c%25/labels.sqlite3?mode=rwc");
    }

    /// F8: a write that finds SQLite locked past the busy timeout, and a pool with no
    /// connection free in time, are busy (a 503 to clients); other failures are not.
    #[tokio::test]
    async fn a_locked_database_and_an_exhausted_pool_are_busy() {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let url = default_url(dir.path()).unwrap();
        let pool = AnyPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_millis(100))
            .connect(&url)
            .await
            .unwrap();
        pool.execute("CREATE TABLE t (x INTEGER)").await.unwrap();
        let mut holder = pool.acquire().await.unwrap();
        holder.execute("BEGIN IMMEDIATE").await.unwrap();
        let mut other = pool.acquire().await.unwrap();
        other.execute("PRAGMA busy_timeout = 0").await.unwrap();
        let locked = other.execute("INSERT INTO t VALUES (1)").await.unwrap_err();
        assert!(matches!(LabelError::from(locked), LabelError::Busy(_)));
        let no_connection = pool.acquire().await.unwrap_err();
        assert!(matches!(LabelError::from(no_connection), LabelError::Busy(_)));
        let broken = other.execute("SELECT x FROM nowhere").await.unwrap_err();
        assert!(matches!(LabelError::from(broken), LabelError::Database(_)));
        holder.execute("ROLLBACK").await.unwrap();
    }

    /// A store opened to read (`labels export`) cannot write, whatever it is asked.
    #[tokio::test]
    async fn a_store_opened_to_read_refuses_writes_in_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let url = default_url(dir.path()).unwrap();
        let codebooks = || Codebooks::built_in().unwrap();
        LabelStore::open(&url, codebooks(), LabelPolicy::default())
            .await
            .unwrap()
            .close()
            .await;
        let read = LabelStore::open_existing(&url, codebooks(), LabelPolicy::default())
            .await
            .unwrap();
        read.pool
            .execute("SELECT COUNT(*) FROM label_sets")
            .await
            .unwrap();
        let refused = read.pool.execute("DELETE FROM label_sets").await.unwrap_err();
        assert!(refused.to_string().contains("readonly"), "{refused}");
    }
}
