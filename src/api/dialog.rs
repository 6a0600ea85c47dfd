//! `POST /api/parse-for-dialog`: a log's messages as CommuGraph's dialog view reads them,
//! from a body's `content` or a `filePath` inside a configured sessions directory, parsed
//! without being stored (see [`crate::core::views::parsed`]).

use std::path::PathBuf;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::error::{echo, upload_error, ApiError};
use super::AppState;
use crate::core::views::parsed::parsed;
use crate::core::{SessionInput, SourceFile};
use crate::store::confined::{ClientFile, ReadError};

/// The request body: a log's text, or the path of a log file.
#[derive(Debug, Deserialize)]
struct ParseRequest {
    content: Option<String>,
    #[serde(rename = "filePath")]
    file_path: Option<String>,
}

/// `POST /api/parse-for-dialog` with `{content}` or `{filePath}`: 200 `{messages,
/// framework, total_count}`. A `filePath` is read only inside a configured sessions
/// directory, by the rule its scan follows (no symbolic link, no `..`): any other path is
/// 403, a missing file 404. A log that cannot be read is a 400 with the upload's message.
pub async fn parse_for_dialog(State(state): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let request: ParseRequest = serde_json::from_slice(&body).map_err(|e| ApiError::Invalid {
        message: format!("body: not a JSON object with content or filePath: {e}"),
        details: json!({ "field": "body" }),
    })?;
    drop(body);
    let bytes = match (request.content, request.file_path) {
        (Some(content), _) if !content.is_empty() => content.into_bytes(),
        (_, Some(path)) if !path.is_empty() => read_file(&state, &path).await?,
        _ => {
            return Err(ApiError::BadRequest(
                "Either content or filePath is required".into(),
            ))
        }
    };
    let input = SessionInput::new(vec![SourceFile::new("log.jsonl", bytes)]);
    let body = state
        .store
        .parse_transient(input, |session| serde_json::to_vec(&parsed(session)))
        .await
        .map_err(upload_error)?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The file at `path`, if it lies in a configured sessions directory.
async fn read_file(state: &AppState, path: &str) -> Result<Vec<u8>, ApiError> {
    let limit = state.config.max_upload_bytes as u64;
    match state.store.read_client_file(PathBuf::from(path), limit).await {
        Ok(ClientFile::Read(bytes)) => Ok(bytes),
        Ok(ClientFile::TooLarge(size)) => Err(ApiError::TooLarge(format!(
            "filePath: the file holds {size} bytes, more than the upload limit of {limit}"
        ))),
        Err(e @ ReadError::Io { .. }) => {
            if !e.is_not_found() {
                tracing::warn!(error = %e, "parse-for-dialog could not read a file");
            }
            Err(ApiError::NotFound(format!("Could not read file: {}", echo(path))))
        }
        Err(e) => Err(ApiError::Forbidden(format!(
            "filePath: {} (only files inside a configured sessions directory are read, without \
             following symbolic links)",
            refusal(&e, path)
        ))),
    }
}

/// Why `path` was refused, naming it as the client gave it.
fn refusal(e: &ReadError, path: &str) -> String {
    match e {
        ReadError::Outside { .. } => format!("'{}' is not inside a sessions directory", echo(path)),
        other => format!("'{}' {}", echo(path), other.reason()),
    }
}
