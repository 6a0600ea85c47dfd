//! `GET /api/graph/{id}/export?format=jsonl|pi-v3`: a session's main log for download.
//!
//! `jsonl` streams the stored file from an open handle in `CHUNK`-sized reads: the
//! server holds one chunk per request, whatever the file's size, and no thread waits on a
//! slow client. `pi-v3` migrates a pi session in memory ([`migrate_to_v3`]) and so reserves
//! its estimated peak in the render budget first, like every render not served from the
//! cache: past the budget it is a 503 with `Retry-After`.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::io::{Read, Seek};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;

use super::chunked::ChunkedBody;
use super::error::{echo, ApiError};
use super::query::QueryPairs;
use super::AppState;
use crate::core::formats::pi::{migrate_to_v3, migration_estimate};
use crate::store::{Framework, MainFile};

/// Bytes read from the file per chunk sent.
const CHUNK: usize = 128 * 1024;

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExportFormat {
    /// The main log as stored.
    Jsonl,
    /// A pi session in pi's current format.
    PiV3,
}

/// `GET /api/graph/{id}/export`: the session's main log as stored (`jsonl`), or a pi
/// session in pi's current format (`pi-v3`, migrated in memory; the stored file is never
/// rewritten).
pub async fn export(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let slot = state.store.find(&id).await?;
    let format = match query.first("format").unwrap_or("jsonl") {
        "jsonl" => ExportFormat::Jsonl,
        "pi-v3" => ExportFormat::PiV3,
        other => {
            return Err(ApiError::BadRequest(format!(
                "Unknown export format '{}' (expected jsonl or pi-v3)",
                echo(other)
            )))
        }
    };
    if format == ExportFormat::PiV3 && slot.framework != Framework::Pi {
        return Err(ApiError::BadRequest("The pi-v3 export is for pi sessions".into()));
    }
    let main = state.store.open_main_file(&id).await?;
    let (name, len, body) = match format {
        ExportFormat::Jsonl => (main.name, main.len, streamed(main.file, main.len)),
        ExportFormat::PiV3 => migrated(&state, main).await?,
    };
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            ),
            (header::CONTENT_DISPOSITION, attachment(&name)?),
            (header::CONTENT_LENGTH, HeaderValue::from(len)),
        ],
        body,
    )
        .into_response())
}

/// The first `len` bytes of `file`, read as the client takes them: a task reads a chunk
/// ahead of the one being sent, and ends when the client goes away.
fn streamed(file: std::fs::File, len: u64) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let mut reader = tokio::fs::File::from_std(file).take(len);
        loop {
            let mut chunk = BytesMut::with_capacity(CHUNK);
            let next = match reader.read_buf(&mut chunk).await {
                // The whole length announced is sent.
                Ok(0) if reader.limit() == 0 => return,
                // The file was cut short meanwhile: the response ends in an error, not as a
                // shorter body under the announced Content-Length.
                Ok(0) => Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => Ok(chunk.freeze()),
                Err(e) => Err(e),
            };
            let failed = next.is_err();
            if tx.send(next).await.is_err() || failed {
                return;
            }
        }
    });
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::<std::io::Result<Bytes>>::new(rx))
}

/// The pi session migrated to v3, holding its share of the render budget until sent: its
/// name, length and body. The file's lines are counted first (a read of the file holding
/// one chunk), so that one reservation covers all the migration holds
/// ([`migration_estimate`]).
async fn migrated(state: &AppState, main: MainFile) -> Result<(String, u64, Body), ApiError> {
    let MainFile { name, file, len } = main;
    let (file, newlines) = blocking(move || count_newlines(file)).await?;
    let estimate = migration_estimate(usize::try_from(len).unwrap_or(usize::MAX), newlines);
    let permit = state.store.render_budget().admission().reserve(estimate).await?;
    // The permit goes with the work: a request that goes away gives it back only when the
    // migration it started has ended.
    let (bytes, permit) = blocking(move || {
        let mut data = Vec::new();
        file.take(len).read_to_end(&mut data)?;
        Ok((migrate_to_v3(&data), permit))
    })
    .await?;
    let name = name.trim_end_matches(".jsonl").to_owned() + ".v3.jsonl";
    let len = bytes.len() as u64;
    let body = ChunkedBody::holding(crate::core::views::Body::from(bytes), Some(permit));
    Ok((name, len, Body::new(body)))
}

/// The number of `\n` in `file`, read from its start in chunks; the handle comes back
/// rewound.
fn count_newlines(mut file: std::fs::File) -> std::io::Result<(std::fs::File, usize)> {
    let mut chunk = vec![0; CHUNK];
    let mut newlines = 0;
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => newlines += memchr::memchr_iter(b'\n', &chunk[..n]).count(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    file.seek(std::io::SeekFrom::Start(0))?;
    Ok((file, newlines))
}

/// Runs file work on the blocking pool; an I/O failure is a 500 (logged, never shown).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await?
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// `Content-Disposition: attachment` naming `name`, with every character outside
/// `[A-Za-z0-9._-]` replaced by `_`.
fn attachment(name: &str) -> Result<HeaderValue, ApiError> {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    HeaderValue::from_str(&format!("attachment; filename=\"{safe}\""))
        .map_err(|e| ApiError::Internal(e.to_string()))
}
