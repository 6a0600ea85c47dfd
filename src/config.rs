//! The command line's settings, in groups by concern, each flag with an environment
//! fallback: where things are stored ([`StoreArgs`]), where sessions come from
//! ([`SessionsArgs`], with the [`MemoryBoundArgs`]), the codebooks ([`CodebookArgs`]), and
//! what only a running server needs ([`ServerArgs`], [`CacheArgs`], [`SearchArgs`],
//! [`LabelPolicyArgs`]). `serve` takes them all ([`ServeArgs`]); each other subcommand
//! flattens only the groups it reads, so that its `--help` lists only flags it uses.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::HeaderValue;
use clap::{Args, ValueEnum};

use crate::api::auth::ApiKeys;
use crate::api::{ApiConfig, AppSettings};
use crate::core::memory_bound::MemoryBound;
use crate::labels::{CodebookError, Codebooks, LabelPolicy, OpenError};
use crate::search::SearchConfig;
use crate::store::{S3Settings, StoreConfig, UploadStoreError, UploadStoreKind};

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Arguments of `sessiongraph serve`: every group.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The HTTP server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// Where uploads, labels and the search index are kept.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Which store keeps uploads.
    #[command(flatten)]
    pub uploads: UploadStoreArgs,
    /// Where sessions come from.
    #[command(flatten)]
    pub sessions: SessionsArgs,
    /// The memory budgets of parsed sessions and renders.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Full-text search.
    #[command(flatten)]
    pub search: SearchArgs,
    /// The labeling codebooks.
    #[command(flatten)]
    pub codebooks: CodebookArgs,
    /// Who reviews, blind mode, the queue.
    #[command(flatten)]
    pub policy: LabelPolicyArgs,
}

/// The HTTP server: where it listens, what it accepts, who may call it, its logs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, env = "SESSIONGRAPH_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Largest accepted upload (bytes; K, M, G suffixes are powers of 1024); a larger body
    /// is answered 413, naming this limit.
    #[arg(long, env = "SESSIONGRAPH_MAX_UPLOAD_BYTES", default_value = "1G", value_parser = parse_size)]
    pub max_upload_bytes: usize,
    /// An origin allowed to call the API from a browser, e.g. http://localhost:3000
    /// (repeatable; comma-separated in the environment variable).
    #[arg(
        long = "cors-origin",
        env = "SESSIONGRAPH_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// An API key that requests must present (`Authorization: Bearer <key>` or
    /// `X-API-Key`); repeatable, comma-separated in the environment variable. Without any,
    /// the API is open. /healthz and /readyz never need one.
    #[arg(
        long = "api-key",
        env = "SESSIONGRAPH_API_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_keys: Vec<String>,
    /// A file of API keys, one per line (blank lines and `#` comments ignored), e.g. a
    /// container secret; added to --api-key.
    #[arg(long, env = "SESSIONGRAPH_API_KEY_FILE")]
    pub api_key_file: Option<PathBuf>,
    /// A host name the server answers to besides loopback names, e.g. the name a proxy in
    /// front forwards (repeatable; comma-separated in the environment variable; `*.NAME`
    /// for its subdomains, `*` for any). On a loopback address only loopback names are
    /// answered by default (a page that rebinds its own name to 127.0.0.1 is refused);
    /// beyond loopback, any name unless some are given.
    #[arg(
        long = "allowed-host",
        env = "SESSIONGRAPH_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Refuse every write (uploads, deletions, label and round writes, imports, queue
    /// reservations): serve what is stored and the sessions directories.
    #[arg(long, env = "SESSIONGRAPH_READ_ONLY")]
    pub read_only: bool,
    /// Seconds a request may take before it is answered 408.
    #[arg(long, env = "SESSIONGRAPH_REQUEST_TIMEOUT_SECS", default_value_t = 300)]
    pub request_timeout_secs: u64,
    /// Seconds a client may take to send a request's headers before the connection is
    /// closed (slow clients holding connections open).
    #[arg(long, env = "SESSIONGRAPH_HEADER_READ_TIMEOUT_SECS", default_value_t = 30)]
    pub header_read_timeout_secs: u64,
    /// Log format.
    #[arg(long, env = "SESSIONGRAPH_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// Where the server keeps what it stores: the data directory (uploads, and by default the
/// label database) and the label database.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Storage")]
pub struct StoreArgs {
    /// The data directory: uploads, the search index and, without --database-url, the
    /// label database (`labels.sqlite3`). `serve` creates them when missing; a command that
    /// only reads (`labels export`) creates nothing and refuses what is not there (with
    /// --upload-store postgres or s3 it does not read the data directory).
    #[arg(long, env = "SESSIONGRAPH_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Where labels are stored: `postgres://user:password@host/db` for PostgreSQL (several
    /// replicas may share it); default: SQLite at `<data-dir>/labels.sqlite3`, created on
    /// the server's first start. The environment fallback is SESSIONGRAPH_DATABASE_URL,
    /// then DATABASE_URL.
    #[arg(long, env = "SESSIONGRAPH_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// Which store keeps uploads: `serve` keeps them there, and `labels export` reads them from
/// there (given the same settings as the server).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Storage")]
pub struct UploadStoreArgs {
    /// Where uploads are kept: `local`, in the data directory, served by this server alone;
    /// `postgres`, in the PostgreSQL database of --database-url (which must be one), so
    /// that every replica on it serves, lists and deletes every upload (replicas behind a
    /// load balancer); or `s3`, in the S3-compatible bucket --s3-bucket, each upload's
    /// record in that PostgreSQL database, shared likewise.
    #[arg(long, env = "SESSIONGRAPH_UPLOAD_STORE", value_enum, default_value = "local")]
    pub upload_store: UploadStoreKind,
    /// With --upload-store s3, the bucket uploads are kept in (required then).
    /// Credentials and region come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_SESSION_TOKEN and AWS_REGION (or AWS_DEFAULT_REGION).
    #[arg(long, env = "SESSIONGRAPH_S3_BUCKET", value_name = "NAME")]
    pub s3_bucket: Option<String>,
    /// With --upload-store s3, the prefix of every key the server writes (keys are
    /// `<prefix>/uploads/<id>/...`); default: none.
    #[arg(
        long,
        env = "SESSIONGRAPH_S3_PREFIX",
        value_name = "PREFIX",
        default_value = ""
    )]
    pub s3_prefix: String,
    /// With --upload-store s3, the endpoint of an S3-compatible server other than AWS S3,
    /// e.g. http://127.0.0.1:9000 (addressed path-style; `http://` is allowed); default:
    /// AWS_ENDPOINT_URL or AWS_ENDPOINT, else AWS S3.
    #[arg(long, env = "SESSIONGRAPH_S3_ENDPOINT", value_name = "URL")]
    pub s3_endpoint: Option<String>,
}

impl UploadStoreArgs {
    /// The bucket's settings.
    pub fn s3_settings(&self) -> S3Settings {
        S3Settings {
            bucket: self.s3_bucket.clone(),
            prefix: self.s3_prefix.clone(),
            endpoint: self.s3_endpoint.clone().filter(|e| !e.trim().is_empty()),
            credentials: None,
        }
    }
}

/// Where sessions come from besides uploads, and the memory bound they load under.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sessions")]
pub struct SessionsArgs {
    /// A directory of sessions to list and serve, e.g. ~/.claude/projects (repeatable; the
    /// environment variable takes a comma-separated list); one that does not exist stops
    /// the command. Default: `./fixtures` relative to where the command runs (the bundled
    /// fixtures when run from the checkout, as `cargo run` does) if that directory exists,
    /// else none (`serve` then warns that it serves uploads only).
    #[arg(
        long = "sessions-dir",
        env = "SESSIONGRAPH_SESSIONS_DIRS",
        value_delimiter = ','
    )]
    pub sessions_dirs: Vec<PathBuf>,
    /// The memory bound of a session.
    #[command(flatten)]
    pub memory: MemoryBoundArgs,
}

/// The memory budgets of a running server.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Memory")]
pub struct CacheArgs {
    /// Memory budget for parsed sessions; the least recently used are unloaded beyond it
    /// (they reload from disk on their next request).
    #[arg(long, env = "SESSIONGRAPH_CACHE_BYTES", default_value = "4G", value_parser = parse_size)]
    pub cache_bytes: usize,
    /// Memory budget for renders not served from the cache (bodies cut at a step, first
    /// renders, contexts at an entry), held until their body is sent; past it a request
    /// waits briefly, then is answered 503 with Retry-After.
    #[arg(long, env = "SESSIONGRAPH_RENDER_BUDGET_BYTES", default_value = "512M", value_parser = parse_size)]
    pub render_budget_bytes: usize,
}

/// Full-text search.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Search")]
pub struct SearchArgs {
    /// Keep no search index and serve no `GET /api/search`.
    #[arg(long, env = "SESSIONGRAPH_NO_SEARCH")]
    pub no_search: bool,
    /// Seconds between two checks of every session against the search index, which find
    /// files of a sessions directory changed while no request read them (0: at start only;
    /// uploads, deletions and sessions reloaded by a request are indexed as they happen).
    #[arg(long, env = "SESSIONGRAPH_SEARCH_RECHECK_SECS", default_value_t = 60)]
    pub search_recheck_secs: u64,
}

/// The labeling codebooks.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Labels")]
pub struct CodebookArgs {
    /// A labeling codebook (YAML of CommuGraph's annotation schema shape), or a directory of
    /// them (repeatable; comma-separated in the environment). The first is the default; the
    /// built-in ones (`delegation`, CommuGraph's schema v0.2, and `speechact`) stay
    /// available unless one given has their id. Default: the built-in ones, `delegation`
    /// the default.
    #[arg(long, env = "SESSIONGRAPH_CODEBOOK", value_delimiter = ',')]
    pub codebook: Vec<PathBuf>,
}

/// How a team labels on a running server.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Labels")]
pub struct LabelPolicyArgs {
    /// An annotator allowed to write `adjudicated` sets (repeatable; comma-separated in the
    /// environment variable).
    #[arg(long = "reviewer", env = "SESSIONGRAPH_REVIEWERS", value_delimiter = ',')]
    pub reviewers: Vec<String>,
    /// Blind labeling: an annotator (a named API key, or `?annotator=`) sees only their own
    /// labels on a unit until they have submitted it; reviewers see all.
    #[arg(long, env = "SESSIONGRAPH_BLIND_LABELS")]
    pub blind_labels: bool,
    /// Seconds a unit handed out by the labeling queue stays reserved for its annotator.
    #[arg(long, env = "SESSIONGRAPH_RESERVATION_SECS", default_value_t = 600)]
    pub reservation_secs: u64,
    /// How many annotators the labeling queue hands each unit to (1 to 100). A request
    /// cannot change it.
    #[arg(long, env = "SESSIONGRAPH_QUEUE_OVERLAP", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..=crate::labels::queue::MAX_OVERLAP as u64))]
    pub queue_overlap: u64,
}

/// Why the settings are unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A CORS origin is not a valid header value.
    #[error("invalid --cors-origin {0:?}")]
    CorsOrigin(String),
    /// The API key file cannot be read.
    #[error("cannot read --api-key-file {path}: {source}")]
    ApiKeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The API key file holds no key: starting would leave the API open to anyone, which
    /// is not what naming a key file asks for.
    #[error(
        "--api-key-file {0} holds no key (only blank lines or comments): refusing to start an open server"
    )]
    EmptyApiKeyFile(PathBuf),
    /// The codebook cannot be read.
    #[error(transparent)]
    Codebook(#[from] CodebookError),
    /// The label database's default URL cannot be made (the data directory's path is not
    /// UTF-8).
    #[error(transparent)]
    DatabaseUrl(#[from] OpenError),
    /// A sessions directory given (`--sessions-dir`, SESSIONGRAPH_SESSIONS_DIRS) cannot be
    /// served: it does not exist, is not a directory, or cannot be read.
    #[error("the sessions directory {} {problem} (--sessions-dir, SESSIONGRAPH_SESSIONS_DIRS)", .dir.display())]
    SessionsDir {
        /// The directory as given.
        dir: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The upload store chosen cannot keep uploads with the label database given
    /// (`--upload-store postgres` or `s3` without a PostgreSQL URL), or `s3` has no
    /// bucket.
    #[error(transparent)]
    UploadStore(#[from] UploadStoreError),
    /// The data directory a command that only reads was given does not exist.
    #[error(
        "the data directory {} does not exist (--data-dir, SESSIONGRAPH_DATA_DIR): it holds \
         the uploads and, without --database-url, the label database",
        .0.display()
    )]
    NoDataDir(PathBuf),
}

/// The directory the sessions directories default to, relative to where the command runs.
pub const DEFAULT_SESSIONS_DIR: &str = "fixtures";

impl SessionsArgs {
    /// The sessions directories to read: those given, each checked to be a directory one
    /// can list; else [`DEFAULT_SESSIONS_DIR`] when it is one, else none.
    pub fn dirs(&self) -> Result<Vec<PathBuf>, ConfigError> {
        if self.sessions_dirs.is_empty() {
            let default = PathBuf::from(DEFAULT_SESSIONS_DIR);
            return Ok(default.is_dir().then_some(default).into_iter().collect());
        }
        for dir in &self.sessions_dirs {
            let problem = match std::fs::read_dir(dir) {
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => "does not exist".to_owned(),
                Err(_) if dir.exists() && !dir.is_dir() => "is not a directory".to_owned(),
                Err(e) => format!("cannot be read: {e}"),
            };
            return Err(ConfigError::SessionsDir {
                dir: dir.clone(),
                problem,
            });
        }
        Ok(self.sessions_dirs.clone())
    }
}

impl StoreArgs {
    /// The label database's URL: `--database-url` (or SESSIONGRAPH_DATABASE_URL), else
    /// DATABASE_URL, else SQLite in the data directory.
    pub fn database_url(&self) -> Result<String, OpenError> {
        let given = self
            .database_url
            .clone()
            .or_else(|| std::env::var("DATABASE_URL").ok())
            .filter(|u| !u.trim().is_empty());
        match given {
            Some(url) => Ok(url),
            None => crate::labels::store::default_url(&self.data_dir),
        }
    }

    /// The data directory, for a command that only reads it: [`ConfigError::NoDataDir`]
    /// when it does not exist.
    pub fn existing_data_dir(&self) -> Result<&Path, ConfigError> {
        if self.data_dir.is_dir() {
            Ok(&self.data_dir)
        } else {
            Err(ConfigError::NoDataDir(self.data_dir.clone()))
        }
    }

    /// The store's settings for sessions from `sessions_dirs`, under `memory`, with the
    /// server's budgets `cache` and its background counts; `None` for a one-shot read
    /// (`labels export`): no cache (only the session in use stays parsed), no counts.
    pub fn store_config(
        &self,
        sessions_dirs: Vec<PathBuf>,
        memory: &MemoryBoundArgs,
        cache: Option<&CacheArgs>,
    ) -> StoreConfig {
        let defaults = StoreConfig::default();
        StoreConfig {
            data_dir: Some(self.data_dir.clone()),
            sessions_dirs,
            cache_bytes: cache.map_or(0, |c| c.cache_bytes),
            background_counts: cache.is_some(),
            render_budget_bytes: cache.map_or(defaults.render_budget_bytes, |c| c.render_budget_bytes),
            memory_bound: Some(memory.bound()),
        }
    }
}

impl CodebookArgs {
    /// The labeling codebooks: those given (files or directories), then the built-in ones.
    pub fn load(&self) -> Result<Codebooks, CodebookError> {
        Codebooks::load(&self.codebook)
    }
}

impl LabelPolicyArgs {
    /// The labeling policy: the reviewers named (blanks left out), blind mode, the queue's
    /// reservation time and overlap.
    pub fn label_policy(&self) -> LabelPolicy {
        LabelPolicy {
            reviewers: self
                .reviewers
                .iter()
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty())
                .collect(),
            blind: self.blind_labels,
            reservation: Duration::from_secs(self.reservation_secs.max(1)),
            overlap: self.queue_overlap as usize,
        }
    }
}

impl SearchArgs {
    /// The search settings.
    pub fn search_config(&self) -> SearchConfig {
        SearchConfig {
            enabled: !self.no_search,
            recheck: (self.search_recheck_secs > 0).then(|| Duration::from_secs(self.search_recheck_secs)),
            ..SearchConfig::default()
        }
    }
}

impl ServeArgs {
    /// Everything the application state is built from ([`crate::AppState::build`]): the
    /// HTTP layer's settings, the codebooks, the store's settings (the sessions directories
    /// checked), the label database's URL, where uploads are kept (PostgreSQL only with a
    /// PostgreSQL database), the labeling policy and search.
    pub fn app_settings(&self) -> Result<AppSettings, ConfigError> {
        let database_url = self.store.database_url()?;
        let upload_store = self.uploads.upload_store;
        let s3 = self.uploads.s3_settings();
        upload_store.check(&database_url, &s3)?;
        let sessions_dirs = self.sessions.dirs()?;
        Ok(AppSettings {
            api: self.server.api_config()?,
            codebooks: self.codebooks.load()?,
            store: self
                .store
                .store_config(sessions_dirs, &self.sessions.memory, Some(&self.cache)),
            database_url,
            upload_store,
            s3,
            label_policy: self.policy.label_policy(),
            search: self.search.search_config(),
        })
    }
}

impl ServerArgs {
    /// The HTTP layer's settings.
    pub fn api_config(&self) -> Result<ApiConfig, ConfigError> {
        let cors_origins = self
            .cors_origins
            .iter()
            .filter(|o| !o.is_empty())
            .map(|o| HeaderValue::from_str(o).map_err(|_| ConfigError::CorsOrigin(o.clone())))
            .collect::<Result<_, _>>()?;
        let mut keys = self.api_keys.clone();
        if let Some(path) = &self.api_key_file {
            keys.extend(keys_in_file(path)?);
        }
        Ok(ApiConfig {
            max_upload_bytes: self.max_upload_bytes,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            header_read_timeout: Duration::from_secs(self.header_read_timeout_secs.max(1)),
            cors_origins,
            api_keys: ApiKeys::new(keys),
            read_only: self.read_only,
            allowed_hosts: crate::api::origin::AllowedHosts::new(
                self.listen.ip().is_loopback(),
                &self.allowed_hosts,
            ),
        })
    }
}

/// The API keys of a key file ([`ServerArgs::api_key_file`]); one without any is refused.
fn keys_in_file(path: &Path) -> Result<Vec<String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ApiKeyFile {
        path: path.to_owned(),
        source,
    })?;
    let keys: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    if ApiKeys::new(&keys).is_empty() {
        return Err(ConfigError::EmptyApiKeyFile(path.to_owned()));
    }
    Ok(keys)
}

/// The memory a session may take while it loads and its views are first rendered
/// ([`MemoryBound`]): a session whose records would pass it is refused.
#[derive(Debug, Clone, Copy, Args)]
#[command(next_help_heading = "Memory")]
pub struct MemoryBoundArgs {
    /// Memory a session may take, per byte of its files (`inf` lifts the bound).
    #[arg(long, env = "SESSIONGRAPH_MEMORY_PER_INPUT_BYTE", default_value_t = 4.0, value_parser = parse_ratio)]
    pub memory_per_input_byte: f64,
    /// Memory a session may take on top of that, whatever its size.
    #[arg(long, env = "SESSIONGRAPH_MEMORY_ALLOWANCE", default_value = "100M", value_parser = parse_size)]
    pub memory_allowance: usize,
}

impl MemoryBoundArgs {
    /// The bound.
    pub fn bound(&self) -> MemoryBound {
        MemoryBound {
            per_input_byte: self.memory_per_input_byte,
            allowance: self.memory_allowance,
        }
    }
}

/// A ratio: a number that is not negative (`inf` included).
fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r >= 0.0 => Ok(r),
        _ => Err(format!("not a ratio of 0 or more: {s:?}")),
    }
}

/// A size: a number of bytes, or with a `K`, `M` or `G` suffix (powers of 1024; `KB`,
/// `MiB` and friends read the same).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    let n: usize = number.parse().map_err(|_| format!("not a size: {s:?}"))?;
    let factor: usize = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(format!("unknown size unit in {s:?} (use K, M or G)")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("size too large: {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (F14): an `--api-key-file` that yields no keys (an empty secret, a file of
    /// comments) started the server open.
    #[test]
    fn f14_an_api_key_file_without_keys_refuses_to_start() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            server: ServerArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let args = |file: &std::path::Path| {
            Cli::parse_from(["sessiongraph", "--api-key-file", file.to_str().unwrap()]).server
        };
        for (name, text) in [("empty", ""), ("comments", "# keys go here\n\n   \n# none yet\n")] {
            let file = dir.path().join(name);
            std::fs::write(&file, text).unwrap();
            match args(&file).api_config() {
                Err(ConfigError::EmptyApiKeyFile(path)) => assert_eq!(path, file),
                other => panic!("{name}: {other:?}"),
            }
        }
        let file = dir.path().join("one");
        std::fs::write(&file, "# the team\nalice:k-alice\n").unwrap();
        let config = args(&file).api_config().unwrap();
        assert_eq!(config.api_keys.named(), ["alice"]);
    }

    /// Item 10 of the labeling team's report: the default sessions directory was the build
    /// checkout's absolute path, compiled in. It is `fixtures` relative to where the command
    /// runs (here, the crate's root, which holds the bundled fixtures).
    #[test]
    fn item10_the_default_sessions_dir_is_relative_to_where_it_runs() {
        let none = SessionsArgs {
            sessions_dirs: Vec::new(),
            memory: MemoryBoundArgs {
                memory_per_input_byte: 4.0,
                memory_allowance: 0,
            },
        };
        assert_eq!(none.dirs().unwrap(), [PathBuf::from("fixtures")]);
        let given = SessionsArgs {
            sessions_dirs: vec![PathBuf::from("fixtures/pi"), PathBuf::from("no/such/dir")],
            ..none
        };
        match given.dirs() {
            Err(ConfigError::SessionsDir { dir, problem }) => {
                assert_eq!(
                    (dir.to_str(), problem.as_str()),
                    (Some("no/such/dir"), "does not exist")
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("30M"), Ok(30 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2 MiB"), Ok(2 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5X").is_err());
        assert_eq!(parse_ratio("2.5"), Ok(2.5));
        assert_eq!(parse_ratio("inf"), Ok(f64::INFINITY));
        assert!(parse_ratio("-1").is_err());
        assert!(parse_ratio("NaN").is_err());
    }
}
