//! The bucket of `--upload-store s3`: an S3-compatible object store (AWS S3, MinIO, Ceph,
//! R2, s3s-fs...) reached through the `object_store` crate, holding the uploads' files.
//!
//! ```text
//! <prefix>/uploads/<id>/<generation>/<file_no>   one object per file of an upload
//! ```
//!
//! A *generation* is new for each save of an upload (`<ms since the epoch>-<16 hex
//! digits>`, [`new_generation`]): two replicas storing the same content at once write
//! different objects, and whatever one of them later removes is its own. The time it
//! starts with tells how old a generation is without asking the bucket's clock (see the
//! S3 store's sweep, [`super::s3_uploads`]).
//!
//! Requests are bounded so that a bucket that is down answers quickly: a connection is
//! given [`CONNECT_TIMEOUT`], a request [`REQUEST_TIMEOUT`], and failures that may pass
//! (connection refused or reset, timeouts, 5xx, 429) are retried a few times within
//! [`RETRY_TIMEOUT`]. A request never carries more than [`PART_BYTES`] (larger files are
//! written in parts of a multipart upload, and read in ranges), so that the request timeout
//! bounds a stalled transfer whatever the file's size.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::{
    BackoffConfig, ClientConfigKey, GetOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
};

use super::uploads::is_upload_id;

/// How long a connection to the object store may take to open: past it, the store is
/// taken to be unreachable (retried, then 503).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one request may take, its body included: enough for [`PART_BYTES`] at about
/// 150 KB/s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a request is retried after failures that may pass, from its first attempt.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times such a request is retried.
const MAX_RETRIES: usize = 3;

/// The most one request carries: a larger file is written in parts of this size (S3
/// wants parts of at least 5 MiB, but the last) and read in ranges of it.
pub const PART_BYTES: u64 = 8 << 20;

/// Where uploads are kept with `--upload-store s3` (the flags `--s3-bucket`,
/// `--s3-prefix` and `--s3-endpoint`); credentials and region come from the usual AWS
/// variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// The bucket (required with `--upload-store s3`).
    pub bucket: Option<String>,
    /// The prefix of every key (empty: keys start at `uploads/`).
    pub prefix: String,
    /// The endpoint, for a server other than AWS S3 (e.g. `http://127.0.0.1:9000`);
    /// otherwise `AWS_ENDPOINT_URL` or `AWS_ENDPOINT`, otherwise AWS S3.
    pub endpoint: Option<String>,
    /// Keys to sign with instead of the environment's (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`): for a program embedding the server, which should not
    /// change its own environment while threads run. The command line takes keys from the
    /// environment only.
    pub credentials: Option<S3Credentials>,
}

/// An access key pair of the object store.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret key (never shown by `Debug`).
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"***")
            .finish()
    }
}

/// Why the object store could not do something.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BucketError {
    /// The object store cannot serve now (unreachable, timed out, 5xx, throttling); the
    /// client may retry once it is back, which needs no restart of the server.
    #[error("the upload object store cannot be reached now: {0}")]
    Unavailable(String),
    /// There is no object of this key.
    #[error("no object {0} in the upload bucket")]
    NotFound(String),
    /// An upload whose record is stored lacks one of its objects: removed by something
    /// other than this server, or a bucket that is not the one the uploads were stored in.
    #[error("upload '{id}' is stored, but its object {key} is missing from the bucket")]
    Missing {
        /// The upload.
        id: String,
        /// The object's key.
        key: String,
    },
    /// An object does not hold what its upload's record says.
    #[error("the object {key} of a stored upload is damaged: {reason}")]
    Corrupt {
        /// The object's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Any other failure (credentials refused, a request the store does not take).
    #[error("upload object store: {0}")]
    Failed(String),
    /// The bucket could not be opened at start.
    #[error("cannot open the S3 bucket {bucket}: {reason}")]
    Open {
        /// The bucket.
        bucket: String,
        /// Why.
        reason: String,
    },
}

/// A generation of objects found in the bucket: every key listed under
/// `<prefix>/uploads/<id>/<generation>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGeneration {
    /// The upload's id.
    pub id: String,
    /// The generation.
    pub generation: String,
    /// When the generation was started, in ms since the epoch (from its name).
    pub created_ms: i64,
    /// Its objects.
    pub keys: Vec<Key>,
}

/// The bucket uploads are kept in.
#[derive(Debug)]
pub struct S3Bucket {
    store: AmazonS3,
    /// The bucket's name, for messages.
    name: String,
    /// `<prefix>/uploads`, under which every key is.
    root: Key,
}

impl S3Bucket {
    /// The bucket `settings` name, with credentials and region from the environment
    /// (`AmazonS3Builder::from_env`). A custom endpoint is addressed path-style
    /// (`<endpoint>/<bucket>/<key>`), as local servers want, and may be `http://`. Nothing
    /// is asked of the store yet: [`S3Bucket::check`] does.
    pub fn open(settings: &S3Settings) -> Result<S3Bucket, BucketError> {
        let name = settings.bucket.clone().unwrap_or_default();
        let open_error = |reason: String| BucketError::Open {
            bucket: name.clone(),
            reason,
        };
        let root = prefix_key(&settings.prefix)
            .map_err(|reason| open_error(format!("--s3-prefix {:?} {reason}", settings.prefix)))?
            .join("uploads");
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&name);
        if let Some(endpoint) = &settings.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(keys) = &settings.credentials {
            builder = builder
                .with_access_key_id(&keys.access_key_id)
                .with_secret_access_key(&keys.secret_access_key);
        }
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::S3Endpoint));
        if let Some(endpoint) = endpoint {
            builder = builder
                .with_virtual_hosted_style_request(false)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let store = builder
            .with_config(
                client_key(ClientConfigKey::ConnectTimeout),
                seconds(CONNECT_TIMEOUT),
            )
            .with_config(client_key(ClientConfigKey::Timeout), seconds(REQUEST_TIMEOUT))
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(1),
                    base: 2.0,
                },
                max_retries: MAX_RETRIES,
                retry_timeout: RETRY_TIMEOUT,
            })
            .build()
            .map_err(|e| open_error(e.to_string()))?;
        Ok(S3Bucket { store, name, root })
    }

    /// Checks that the bucket can be listed with the credentials given: at start, so that
    /// a wrong bucket, endpoint or key stops the server at once instead of failing every
    /// upload.
    pub async fn check(&self) -> Result<(), BucketError> {
        self.store
            .list_with_delimiter(Some(&self.root))
            .await
            .map(|_| ())
            .map_err(|e| BucketError::Open {
                bucket: self.name.clone(),
                reason: e.to_string(),
            })
    }

    /// The key of file `file_no` of upload `id` in `generation`.
    pub fn key(&self, id: &str, generation: &str, file_no: usize) -> Key {
        self.generation_key(id, generation)
            .join(file_no.to_string().as_str())
    }

    /// The key every object of upload `id`'s `generation` starts with.
    fn generation_key(&self, id: &str, generation: &str) -> Key {
        self.root.clone().join(id).join(generation)
    }

    /// Writes `bytes` as the object `key`: one request up to [`PART_BYTES`], a multipart
    /// upload of such parts beyond (aborted if a part fails).
    pub async fn put(&self, key: &Key, bytes: Bytes) -> Result<(), BucketError> {
        if bytes.len() as u64 <= PART_BYTES {
            self.store
                .put(key, PutPayload::from(bytes))
                .await
                .map_err(|e| of_error(e, key))?;
            return Ok(());
        }
        let mut upload = self
            .store
            .put_multipart(key)
            .await
            .map_err(|e| of_error(e, key))?;
        let mut written = Ok(());
        for range in ranges(bytes.len() as u64) {
            let part = bytes.slice(range.start as usize..range.end as usize);
            written = upload.put_part(PutPayload::from(part)).await;
            if written.is_err() {
                break;
            }
        }
        let finished = match written {
            Ok(()) => upload.complete().await.map(|_| ()),
            Err(e) => {
                if let Err(abort) = upload.abort().await {
                    tracing::debug!(%key, error = %abort, "could not abort a multipart upload");
                }
                Err(e)
            }
        };
        finished.map_err(|e| of_error(e, key))
    }

    /// The `range` of the object `key`, which holds `total` bytes by its upload's record
    /// ([`BucketError::Corrupt`] when it holds another number).
    pub async fn read(&self, key: &Key, range: Range<u64>, total: u64) -> Result<Bytes, BucketError> {
        let wanted = range.end - range.start;
        let options = GetOptions {
            range: Some(range.into()),
            ..GetOptions::default()
        };
        let got = self
            .store
            .get_opts(key, options)
            .await
            .map_err(|e| of_error(e, key))?;
        let corrupt = |reason: String| BucketError::Corrupt {
            key: key.to_string(),
            reason,
        };
        if got.meta.size != total {
            return Err(corrupt(format!(
                "it holds {} bytes where its upload's record says {total}",
                got.meta.size
            )));
        }
        let bytes = got.bytes().await.map_err(|e| of_error(e, key))?;
        if bytes.len() as u64 != wanted {
            return Err(corrupt(format!(
                "a range of {wanted} bytes read as {}",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// Removes every object of upload `id`'s `generation` (those already gone are no
    /// failure).
    pub async fn remove_generation(&self, id: &str, generation: &str) -> Result<(), BucketError> {
        let prefix = self.generation_key(id, generation);
        let keys: Vec<Key> = self
            .store
            .list(Some(&prefix))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .map_err(|e| of_error(e, &prefix))?;
        self.remove(&keys).await
    }

    /// Removes the objects `keys` (those already gone are no failure).
    pub async fn remove(&self, keys: &[Key]) -> Result<(), BucketError> {
        for key in keys {
            match self.store.delete(key).await.map_err(|e| of_error(e, key)) {
                Ok(()) | Err(BucketError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every generation of every upload in the bucket, by its keys; keys under the prefix
    /// that are not of this layout are left out (and never removed).
    pub async fn generations(&self) -> Result<Vec<ListedGeneration>, BucketError> {
        let mut found: BTreeMap<(String, String), ListedGeneration> = BTreeMap::new();
        let mut listing = self.store.list(Some(&self.root));
        while let Some(meta) = listing.try_next().await.map_err(|e| of_error(e, &self.root))? {
            let Some((id, generation, created_ms)) = self.generation_of(&meta.location) else {
                continue;
            };
            found
                .entry((id.clone(), generation.clone()))
                .or_insert_with(|| ListedGeneration {
                    id,
                    generation,
                    created_ms,
                    keys: Vec::new(),
                })
                .keys
                .push(meta.location);
        }
        Ok(found.into_values().collect())
    }

    /// The upload id, generation and its start of `key`, when it is one of
    /// `<root>/<id>/<generation>/<file_no>`.
    fn generation_of(&self, key: &Key) -> Option<(String, String, i64)> {
        let parts: Vec<String> = key
            .prefix_match(&self.root)?
            .map(|part| part.as_ref().to_owned())
            .collect();
        let [id, generation, file_no] = parts.as_slice() else {
            return None;
        };
        let created_ms = generation_created_ms(generation)?;
        let numbered = !file_no.is_empty() && file_no.bytes().all(|b| b.is_ascii_digit());
        (is_upload_id(id) && numbered).then(|| (id.clone(), generation.clone(), created_ms))
    }
}

/// The ranges of at most [`PART_BYTES`] a file of `size` bytes is written and read in
/// (none for an empty file).
pub fn ranges(size: u64) -> impl Iterator<Item = Range<u64>> {
    (0..size.div_ceil(PART_BYTES)).map(move |n| n * PART_BYTES..((n + 1) * PART_BYTES).min(size))
}

/// A new generation started at `now_ms`: `<now_ms>-<16 hex digits>`, the digits unique to
/// this call (they need to differ between saves, not to be secret: a hash of a per-process
/// random key, a counter and the time).
pub fn new_generation(now_ms: i64) -> String {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(SAVES.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_i64(now_ms);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    hasher.write_u32(nanos);
    format!("{now_ms}-{:016x}", hasher.finish())
}

/// When `generation` was started (ms since the epoch); `None` when it is not one
/// [`new_generation`] makes.
pub fn generation_created_ms(generation: &str) -> Option<i64> {
    let (ms, unique) = generation.split_once('-')?;
    let digits = !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit());
    let hex = unique.len() == 16 && unique.bytes().all(|b| b.is_ascii_hexdigit());
    if digits && hex {
        ms.parse().ok()
    } else {
        None
    }
}

/// The key prefix `--s3-prefix` gives (slashes around it ignored); why not when it is not
/// a key (an empty segment, `.` or `..`).
fn prefix_key(prefix: &str) -> Result<Key, String> {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(Key::default());
    }
    Key::parse(trimmed).map_err(|e| format!("is not a key prefix: {e}"))
}

/// A client setting of the S3 builder.
fn client_key(key: ClientConfigKey) -> AmazonS3ConfigKey {
    AmazonS3ConfigKey::Client(key)
}

/// `duration` as the builder's settings take it.
fn seconds(duration: Duration) -> String {
    format!("{}s", duration.as_secs())
}

/// The error of a request about `key`, sorted: wait (unreachable, 5xx, throttled), not
/// found, or failed.
fn of_error(e: object_store::Error, key: &Key) -> BucketError {
    match e {
        object_store::Error::NotFound { .. } => BucketError::NotFound(key.to_string()),
        e if passes(&e) => BucketError::Unavailable(e.to_string()),
        e => BucketError::Failed(e.to_string()),
    }
}

/// True when `e` may pass: the request failed before a response (connection refused,
/// reset, timed out), or the response was a 5xx, 429 or 408 (after the retries).
fn passes(e: &object_store::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = cause {
        if error.downcast_ref::<object_store::client::HttpError>().is_some() {
            return true;
        }
        cause = error.source();
    }
    // The status of an answer is in its error's message only (the error type that holds
    // it is private to the crate): "... status code: 503 Service Unavailable ...".
    status_in(&e.to_string()).is_some_and(|status| status >= 500 || status == 429 || status == 408)
}

/// The HTTP status an `object_store` error message reports.
fn status_in(message: &str) -> Option<u16> {
    let (_, after) = message.split_once("status code: ")?;
    after.get(..3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_read_back_their_start_and_differ() {
        let first = new_generation(1_717_000_000_123);
        let second = new_generation(1_717_000_000_123);
        assert_ne!(first, second);
        assert_eq!(generation_created_ms(&first), Some(1_717_000_000_123));
        for foreign in [
            "",
            "123",
            "abc-0123456789abcdef",
            "123-xyz",
            "123-0123456789abcde",
        ] {
            assert_eq!(generation_created_ms(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn files_are_cut_into_parts_that_cover_them() {
        assert_eq!(ranges(0).count(), 0);
        assert_eq!(ranges(5).map(|r| (r.start, r.end)).collect::<Vec<_>>(), [(0, 5)]);
        assert_eq!(
            ranges(2 * PART_BYTES + 1).collect::<Vec<_>>(),
            [
                0..PART_BYTES,
                PART_BYTES..2 * PART_BYTES,
                2 * PART_BYTES..2 * PART_BYTES + 1
            ]
        );
    }

    #[test]
    fn answers_that_may_pass_are_told_from_the_rest_by_their_status() {
        let message = "Generic S3 error: Error performing GET http://127.0.0.1:9/b/k in 1s - \
                       Server returned non-2xx status code: 503 Service Unavailable: busy";
        assert_eq!(status_in(message), Some(503));
        assert_eq!(
            status_in("Server returned non-2xx status code: 400 Bad Request"),
            Some(400)
        );
        assert_eq!(status_in("connection refused"), None);
    }

    #[test]
    fn prefixes_are_keys_or_refused() {
        assert_eq!(prefix_key("").unwrap(), Key::default());
        assert_eq!(prefix_key("/team/a/").unwrap().as_ref(), "team/a");
        assert!(prefix_key("team//a").is_err());
        assert!(prefix_key("team/../a").is_err());
    }

    #[test]
    fn keys_are_content_addressed_by_generation() {
        let bucket = S3Bucket::open(&S3Settings {
            bucket: Some("sessions".into()),
            prefix: "team".into(),
            endpoint: Some("http://127.0.0.1:9".into()),
            credentials: None,
        })
        .unwrap();
        let generation = new_generation(5);
        let key = bucket.key("0123456789abcdef", &generation, 2);
        assert_eq!(
            key.as_ref(),
            format!("team/uploads/0123456789abcdef/{generation}/2")
        );
        assert_eq!(
            bucket.generation_of(&key),
            Some(("0123456789abcdef".into(), generation.clone(), 5))
        );
        let foreign = Key::from(format!("team/uploads/0123456789abcdef/{generation}/main.jsonl"));
        assert_eq!(bucket.generation_of(&foreign), None);
        assert_eq!(bucket.generation_of(&Key::from("other/uploads/x")), None);
    }
}
