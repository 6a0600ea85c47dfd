//! `POST /api/upload`: multipart (`framework`, `file`, `files`, as CommuGraph's frontend
//! sends them) or a raw body (`curl --data-binary @s.jsonl '/api/upload?framework=claudecode&filename=s.jsonl'`).

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::error::{echo, upload_error, ApiError, BodyLimit};
use super::query::{parse_boolean, QueryPairs};
use super::AppState;
use crate::core::diagnostics::DiagnosticsSummary;
use crate::core::formats::input::Format;
use crate::core::{LoadOptions, SessionInput, SourceFile};
use crate::store::{Framework, Loaded, Slot};

/// The frameworks uploads accept, by name.
pub const FRAMEWORKS: [&str; 5] = [
    Framework::ALL[0].name(),
    Framework::ALL[1].name(),
    Framework::ALL[2].name(),
    Framework::ALL[3].name(),
    Framework::ALL[4].name(),
];

/// The upload response (the reference's keys, in its order, then `diagnostics`).
#[derive(Debug, Serialize)]
pub struct UploadResponse {
    graph_id: String,
    message_count: usize,
    node_count: usize,
    edge_count: usize,
    total_steps: usize,
    main_agent_steps: usize,
    framework: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_agents_loaded: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_agents_missing: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotation_count: Option<usize>,
    diagnostics: DiagnosticsSummary,
}

/// What a request uploads.
struct Upload {
    framework: Option<String>,
    files: Vec<SourceFile>,
    strict: bool,
    /// A raw body (the framework may then be told from the content).
    raw: bool,
}

/// The framework of a raw upload, from its first line: a pi session header, a Codex
/// rollout ([`crate::core::formats::codex::looks_like`]), a Gemini CLI chat (its header, or
/// one JSON object holding one), an AutoGen log, or a Claude Code record (it carries
/// `sessionId`, `parentUuid` or a Claude Code record type).
fn detect_framework(bytes: &[u8]) -> Option<&'static str> {
    let first = crate::core::json::frame::lines(bytes).next()?;
    if crate::core::formats::pi::is_pi_header(first.bytes) {
        return Some("pi");
    }
    if crate::core::formats::codex::looks_like(bytes) {
        return Some("codex");
    }
    if crate::core::formats::gemini::looks_like(bytes) {
        return Some("gemini");
    }
    if crate::core::formats::autogen::looks_like_bytes(bytes) {
        return Some("autogen");
    }
    let value: serde_json::Value = serde_json::from_slice(first.bytes).ok()?;
    let claude_type = matches!(
        value.get("type").and_then(|t| t.as_str()),
        Some("user" | "assistant" | "system" | "summary" | "file-history-snapshot" | "queue-operation")
    );
    (claude_type || value.get("sessionId").is_some() || value.get("parentUuid").is_some())
        .then_some("claudecode")
}

/// The handler: reads the upload, checks what it names and holds, stores it, and answers
/// its counts.
pub async fn upload(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let upload = read_upload(&state, request).await?;
    let framework = framework_of(&upload)?;
    let input = SessionInput::new(upload.files);
    check_main_file(&input)?;
    check_format(framework, &input)?;
    // The store applies its memory bound.
    let options = LoadOptions {
        strict: upload.strict,
        ..LoadOptions::default()
    };
    let (slot, loaded, created) = state
        .store
        .add_upload(framework, input, options)
        .await
        .map_err(upload_error)?;
    tracing::info!(id = %slot.id, created, nodes = loaded.counts.message_count, "upload accepted");
    Ok(Json(UploadResponse::of(&slot, &loaded)).into_response())
}

/// The upload a request carries: a multipart body, or else the raw body as one file.
async fn read_upload(state: &AppState, request: Request) -> Result<Upload, ApiError> {
    let query = QueryPairs::parse(request.uri().query());
    let is_multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        });
    if is_multipart {
        read_multipart(state, request, &query).await
    } else {
        read_raw(request, &query, state.config.max_upload_bytes).await
    }
}

/// The framework `upload` is read as, checked in the reference's order: one must be named
/// (a raw upload's may be told from its content), then a file must be given, then the
/// framework must be one read here.
fn framework_of(upload: &Upload) -> Result<Framework, ApiError> {
    let name = match upload.framework.as_deref().map(str::trim) {
        Some(f) if !f.is_empty() => f.to_owned(),
        // A raw upload without a framework is told from its content.
        _ => match (upload.raw, upload.files.first()) {
            (true, Some(body)) => match detect_framework(&body.bytes) {
                Some(detected) => detected.to_owned(),
                None => return Err(undetected(&body.bytes)),
            },
            _ => return Err(ApiError::BadRequest("No framework specified".into())),
        },
    };
    if upload.files.is_empty() {
        return Err(ApiError::BadRequest("No file(s) provided".into()));
    }
    Framework::from_name(&name).ok_or_else(|| ApiError::Parse {
        message: format!(
            "Unknown framework: {}. Available: {}",
            echo(&name),
            FRAMEWORKS.join(", ")
        ),
        details: serde_json::json!({}),
    })
}

/// Why a raw body naming no framework could not be told from its content: it is empty
/// (or blank), it is not JSON or JSON Lines (the first line that does not parse is named),
/// or it is JSON of no format read here.
fn undetected(body: &[u8]) -> ApiError {
    let usage = "send a session log (JSON Lines, or a JSON document for AutoGen) as the body, \
                 naming its format with ?framework=claudecode, pi or autogen";
    if body.iter().all(u8::is_ascii_whitespace) {
        let what = if body.is_empty() { "empty" } else { "blank" };
        return ApiError::BadRequest(format!("The request body is {what}: {usage}"));
    }
    if let Some((line, column)) = first_line_not_json(body) {
        return ApiError::Invalid {
            message: format!(
                "The request body is not JSON or JSON Lines: line {line} does not parse as JSON \
                 (column {column}); {usage}"
            ),
            details: serde_json::json!({ "lineNumber": line, "column": column }),
        };
    }
    ApiError::BadRequest(format!(
        "No framework specified, and the body's first record is not one of a format read here \
         (Claude Code, pi, AutoGen): {usage}"
    ))
}

/// The first non-blank line of `body` that is not JSON, and the column where it stops
/// parsing (1-based both); `None` when every line parses, or the whole body is one JSON
/// document (an array or an object over several lines).
fn first_line_not_json(body: &[u8]) -> Option<(u32, usize)> {
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        return None;
    }
    crate::core::json::frame::lines(body).find_map(|line| {
        serde_json::from_slice::<serde::de::IgnoredAny>(line.bytes)
            .err()
            .map(|e| (line.number, e.column()))
    })
}

/// Refuses an input without a main file, or whose main file is empty.
fn check_main_file(input: &SessionInput) -> Result<(), ApiError> {
    match input.main_index() {
        Some(i) if input.files[i].bytes.is_empty() => Err(ApiError::BadRequest(format!(
            "The main session file {} is empty (0 bytes): nothing to load",
            echo(&input.files[i].name)
        ))),
        Some(_) => Ok(()),
        None => Err(ApiError::BadRequest(
            "No main session file found (expected UUID format filename, not agent-*)".into(),
        )),
    }
}

/// Refuses a pi or Gemini session uploaded as Claude Code's, and the reverse; and a Codex
/// rollout uploaded as another framework's, and the reverse.
fn check_format(framework: Framework, input: &SessionInput) -> Result<(), ApiError> {
    match (framework, input.detect_format()) {
        (Framework::Codex, found) if found != Format::Codex => Err(ApiError::BadRequest(
            "Not a Codex session: its first line is not a Codex rollout line (session_meta, response_item, ...)".into(),
        )),
        (other, Format::Codex) if other != Framework::Codex => Err(ApiError::BadRequest(
            "This is a Codex session (a Codex CLI rollout); upload it with framework=codex".into(),
        )),
        (Framework::Gemini, format) if format != Format::Gemini => Err(ApiError::BadRequest(
            "Not a Gemini CLI chat: it neither starts with a header holding sessionId and projectHash nor is one JSON object holding them".into(),
        )),
        (Framework::ClaudeCode, Format::Gemini) => Err(ApiError::BadRequest(
            "This is a Gemini CLI chat (it starts with its header); upload it with framework=gemini".into(),
        )),
        (Framework::Pi, Format::ClaudeCode) => Err(ApiError::BadRequest(
            "Not a pi session: its first line is not a {\"type\":\"session\"} header".into(),
        )),
        (Framework::ClaudeCode, Format::Pi) => Err(ApiError::BadRequest(
            "This is a pi session (it starts with a session header); upload it with framework=pi".into(),
        )),
        _ => Ok(()),
    }
}

impl UploadResponse {
    /// The answer to an upload stored as `slot`, parsed as `loaded`.
    fn of(slot: &Slot, loaded: &Loaded) -> UploadResponse {
        let session = &loaded.session;
        let c = loaded.counts;
        let loaded_agents = session.subagents_loaded();
        let missing = &session.diagnostics.subagents_missing;
        UploadResponse {
            graph_id: slot.id.clone(),
            message_count: c.message_count,
            node_count: c.node_count,
            edge_count: c.edge_count,
            total_steps: c.total_steps,
            main_agent_steps: c.main_agent_steps,
            framework: slot.framework.name().to_owned(),
            sub_agents_loaded: (loaded_agents > 0).then_some(loaded_agents),
            sub_agents_missing: (!missing.is_empty()).then(|| missing.clone()),
            annotation_count: Some(c.annotation_count),
            diagnostics: session.diagnostics.summary(),
        }
    }
}

async fn read_multipart(state: &AppState, request: Request, query: &QueryPairs) -> Result<Upload, ApiError> {
    let mut multipart = Multipart::from_request(request, state)
        .await
        .map_err(|e| ApiError::BadRequest(format!("Invalid multipart body: {}", echo(&e.body_text()))))?;
    let limit = state.config.max_upload_bytes;
    let mut framework = None;
    let mut strict = query.flag("strict")?;
    let (mut file_fields, mut files_fields) = (Vec::new(), Vec::new());
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e, limit)),
        };
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field.file_name().map(str::to_owned);
        match (name.as_str(), file_name) {
            ("framework", _) => framework = Some(field.text().await.map_err(|e| multipart_error(e, limit))?),
            ("strict", _) => {
                let v = field.text().await.map_err(|e| multipart_error(e, limit))?;
                strict = !v.trim().is_empty() && parse_boolean("strict", &v)?;
            }
            (which @ ("file" | "files"), Some(file_name)) => {
                let bytes = field.bytes().await.map_err(|e| multipart_error(e, limit))?;
                let list = if which == "file" {
                    &mut file_fields
                } else {
                    &mut files_fields
                };
                list.push(SourceFile::new(
                    clean_name(&file_name, list.len()),
                    Vec::from(bytes),
                ));
            }
            // Other fields (`subAgentDirectory` among them: no path comes from a client).
            _ => {
                let _ = field.bytes().await.map_err(|e| multipart_error(e, limit))?;
            }
        }
    }
    // All `file` entries first, then `files`; a repeated name keeps the first position and
    // the last content, as the reference does.
    let mut files: Vec<SourceFile> = Vec::new();
    for f in file_fields.into_iter().chain(files_fields) {
        match files.iter_mut().find(|g| g.name == f.name) {
            Some(g) => g.bytes = f.bytes,
            None => files.push(f),
        }
    }
    Ok(Upload {
        framework,
        files,
        strict,
        raw: false,
    })
}

async fn read_raw(request: Request, query: &QueryPairs, limit: usize) -> Result<Upload, ApiError> {
    let body = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .map_err(|e| {
            // The body limit layer stops reading at the limit.
            if is_length_limit(&*e.into_inner()) {
                too_large(limit)
            } else {
                ApiError::BadRequest("Failed to read the request body".into())
            }
        })?;
    // An empty body is an empty file, named as the client named it: the main-file check
    // says so.
    let files = vec![SourceFile::new(
        clean_name(query.first("filename").unwrap_or("session.jsonl"), 0),
        Vec::from(body),
    )];
    Ok(Upload {
        framework: query.first("framework").map(str::to_owned),
        files,
        strict: query.flag("strict")?,
        raw: true,
    })
}

/// True when `e`, or an error it wraps, is the body limit's.
fn is_length_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(e) = current {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// The 413 of an upload past `limit` bytes, naming it and `--max-upload-bytes`.
fn too_large(limit: usize) -> ApiError {
    ApiError::BodyTooLarge {
        limit,
        setting: Some(BodyLimit::MaxUploadBytes),
    }
}

fn multipart_error(e: axum::extract::multipart::MultipartError, limit: usize) -> ApiError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        too_large(limit)
    } else {
        ApiError::BadRequest(format!("Invalid multipart body: {}", echo(&e.body_text())))
    }
}

/// A client's file name made safe to show: its last path component, without control
/// characters (`../x.jsonl` is `x.jsonl`). Names are never used as paths anyway.
fn clean_name(name: &str, index: usize) -> String {
    let base = crate::core::formats::input::base_name(name);
    let cleaned: String = base.chars().filter(|c| !c.is_control()).collect();
    match cleaned.trim() {
        "" | "." | ".." => format!("upload-{index}.jsonl"),
        ok => ok.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_lose_paths_and_control_characters() {
        assert_eq!(clean_name("../../etc/passwd", 0), "passwd");
        assert_eq!(clean_name("a\0b.jsonl", 0), "ab.jsonl");
        assert_eq!(clean_name("..", 3), "upload-3.jsonl");
        assert_eq!(clean_name("dir\\agent-1.jsonl", 0), "agent-1.jsonl");
    }
}
