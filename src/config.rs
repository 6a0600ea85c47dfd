//! `sessiongraph serve` settings: flags, each with an environment fallback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::http::HeaderValue;
use clap::{Args, ValueEnum};

use crate::api::auth::ApiKeys;
use crate::api::{ApiConfig, AppSettings};
use crate::core::memory_bound::MemoryBound;
use crate::labels::{CodebookError, Codebooks, LabelPolicy, OpenError};
use crate::search::SearchConfig;
use crate::store::StoreConfig;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Arguments of `sessiongraph serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "SESSIONGRAPH_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where uploads are stored (created if missing).
    #[arg(long, env = "SESSIONGRAPH_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// A directory of sessions to list and serve, e.g. ~/.claude/projects (repeatable; the
    /// environment variable takes a comma-separated list). Without any, the bundled
    /// fixtures are served.
    #[arg(
        long = "sessions-dir",
        env = "SESSIONGRAPH_SESSIONS_DIRS",
        value_delimiter = ','
    )]
    pub sessions_dirs: Vec<PathBuf>,
    /// Largest accepted upload (bytes; K, M, G suffixes are powers of 1024).
    #[arg(long, env = "SESSIONGRAPH_MAX_UPLOAD_BYTES", default_value = "1G", value_parser = parse_size)]
    pub max_upload_bytes: usize,
    /// Memory budget for parsed sessions; the least recently used are unloaded beyond it
    /// (they reload from disk on their next request).
    #[arg(long, env = "SESSIONGRAPH_CACHE_BYTES", default_value = "4G", value_parser = parse_size)]
    pub cache_bytes: usize,
    /// Memory budget for renders not served from the cache (bodies cut at a step, first
    /// renders, contexts at an entry), held until their body is sent; past it a request
    /// waits briefly, then is answered 503 with Retry-After.
    #[arg(long, env = "SESSIONGRAPH_RENDER_BUDGET_BYTES", default_value = "512M", value_parser = parse_size)]
    pub render_budget_bytes: usize,
    /// The memory bound of a session.
    #[command(flatten)]
    pub memory: MemoryBoundArgs,
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
    /// Keep no search index and serve no `GET /api/search`.
    #[arg(long, env = "SESSIONGRAPH_NO_SEARCH")]
    pub no_search: bool,
    /// Seconds between two checks of every session against the search index, which find
    /// files of a sessions directory changed while no request read them (0: at start only;
    /// uploads, deletions and sessions reloaded by a request are indexed as they happen).
    #[arg(long, env = "SESSIONGRAPH_SEARCH_RECHECK_SECS", default_value_t = 60)]
    pub search_recheck_secs: u64,

    /// A labeling codebook (YAML of CommuGraph's annotation schema shape), or a directory of
    /// them (repeatable; comma-separated in the environment). The first is the default; the
    /// built-in ones (`delegation`, CommuGraph's schema v0.2, and `speechact`) stay
    /// available unless one given has their id. Default: the built-in ones, `delegation`
    /// the default.
    #[arg(long, env = "SESSIONGRAPH_CODEBOOK", value_delimiter = ',')]
    pub codebook: Vec<PathBuf>,
    /// Where labels are stored: `postgres://user:password@host/db` for PostgreSQL (several
    /// replicas may share it); default: SQLite at `<data-dir>/labels.sqlite3`, created on
    /// first start. The environment fallback is SESSIONGRAPH_DATABASE_URL, then
    /// DATABASE_URL.
    #[arg(long, env = "SESSIONGRAPH_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
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
}

impl ServeArgs {
    /// The sessions directories to serve: those given, else the bundled fixtures.
    pub fn effective_sessions_dirs(&self) -> Vec<PathBuf> {
        if !self.sessions_dirs.is_empty() {
            return self.sessions_dirs.clone();
        }
        [
            PathBuf::from("fixtures"),
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        ]
        .into_iter()
        .find(|p| p.is_dir())
        .into_iter()
        .collect()
    }

    /// The store's settings.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            data_dir: Some(self.data_dir.clone()),
            sessions_dirs: self.effective_sessions_dirs(),
            cache_bytes: self.cache_bytes,
            background_counts: true,
            render_budget_bytes: self.render_budget_bytes,
            memory_bound: Some(self.memory.bound()),
        }
    }

    /// The labeling codebooks: those given (files or directories), then the built-in ones.
    pub fn codebooks(&self) -> Result<Codebooks, CodebookError> {
        Codebooks::load(&self.codebook)
    }

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

    /// The labeling policy: the reviewers named (blanks left out), blind mode, the queue's
    /// reservation time.
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

    /// Everything the application state is built from ([`crate::AppState::build`]): the
    /// HTTP layer's settings, the codebook, the store's settings, the label database's URL
    /// and the labeling policy.
    pub fn app_settings(&self) -> Result<AppSettings, ConfigError> {
        Ok(AppSettings {
            api: self.api_config()?,
            codebooks: self.codebooks()?,
            store: self.store_config(),
            database_url: self.database_url()?,
            label_policy: self.label_policy(),
            search: self.search_config(),
        })
    }

    /// The search settings.
    pub fn search_config(&self) -> SearchConfig {
        SearchConfig {
            enabled: !self.no_search,
            recheck: (self.search_recheck_secs > 0).then(|| Duration::from_secs(self.search_recheck_secs)),
            ..SearchConfig::default()
        }
    }

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
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ApiKeyFile {
                path: path.clone(),
                source,
            })?;
            let from_file: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect();
            if ApiKeys::new(&from_file).is_empty() {
                return Err(ConfigError::EmptyApiKeyFile(path.clone()));
            }
            keys.extend(from_file);
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

/// The memory a session may take while it loads and its views are first rendered
/// ([`MemoryBound`]): a session whose records would pass it is refused.
#[derive(Debug, Clone, Copy, Args)]
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
            serve: ServeArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let args = |file: &std::path::Path| {
            Cli::parse_from(["sessiongraph", "--api-key-file", file.to_str().unwrap()]).serve
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
