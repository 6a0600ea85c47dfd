//! The labeling routes across sessions, thin over [`crate::labels`]:
//!
//! - `POST /api/labels/import` (`?format=jsonl|label-studio|commugraph-speechact`): sets
//!   and suggestions, one answer per line (or task), the valid ones stored a batch per
//!   transaction.
//! - `POST /api/labels/queue/next`, `POST /api/labels/queue/release`: the next unit for an
//!   annotator, reserved for them; and giving it back.
//! - `GET /api/labels/agreement`: Krippendorff's alpha, Cohen's and Fleiss' kappa.
//! - `GET /api/labels/progress`: units labeled per session and annotator.
//! - `GET /api/labels/export` (`?format=jsonl|label-studio|label-studio-config`): streamed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Value};

use super::auth::Identity;
use super::error::{echo, unavailable_response, ApiError, BUSY_RETRY_AFTER};
use super::labels::{blindness, caller, json_body, json_response, known_session, requested_codebook, viewer};
use super::query::QueryPairs;
use super::rounds::{requested_round, round_blindness, round_unit_keys, session_candidates};
use super::AppState;
use crate::core::json::time::iso_millis;
use crate::labels::agreement::PairPage;
use crate::labels::codings::CodingTable;
use crate::labels::export::{ExportScope, Format};
use crate::labels::import::{validate_batch, LineOutcome, Prepared, PreparedUnit};
use crate::labels::import_body::{ImportFormat, SplitBody};
use crate::labels::progress::{session_progress, SessionProgress, UnitKind};
use crate::labels::queue::{QueueAsk, Reservation};
use crate::labels::speechact::{self, SpeechActImport};
use crate::labels::validate::{check_annotator, check_ids, check_model, Invalid};
use crate::labels::{Codebook, ImportItem, LabelError, SetKey};
use crate::rounds::transfer::{round_header, RoundHeader};
use crate::rounds::{Round, RoundStatus};

/// Largest import body, in bytes.
pub const MAX_IMPORT_BYTES: usize = 64 << 20;

/// The import formats, as an unknown one's refusal lists them.
const IMPORT_FORMATS: &str = "jsonl, label-studio or commugraph-speechact";

/// `POST /api/labels/import` (`?format=jsonl`, the default, `label-studio`, or
/// `commugraph-speechact` with `model` and an optional `session`, under the speech-act
/// codebook unless `?codebook=` says otherwise): imports human sets and model
/// suggestions, a batch of lines per transaction (see
/// [`crate::labels::import_body`]). 200 with one result per line (or Label Studio task);
/// 400 when the body cannot be read at all or holds too many records (nothing is stored);
/// 503 with `Retry-After` when the store is busy, saying what was stored before (see
/// `import_cut`).
pub async fn import(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let format = import_format(&query)?;
    // Up to 64 MiB to split: on the blocking pool, not on a worker serving requests.
    let (header, body) = tokio::task::spawn_blocking(move || {
        let header = match format {
            ImportFormat::Jsonl => first_line(&body).and_then(round_header).transpose(),
            _ => Ok(None),
        };
        (header, SplitBody::split(body, format))
    })
    .await?;
    let header = header?;
    let body = body.map_err(|e| ApiError::Invalid {
        message: e.to_string(),
        details: json!({ "field": "body" }),
    })?;
    let codebook = import_codebook(&state, &query, body.format(), header.as_ref())?;
    let round = match &header {
        Some(header) => Some(import_round(&state, &identity, header).await?),
        None => None,
    };
    import_batches(&state, &codebook, Arc::new(body), identity, round).await
}

/// The import format `?format=` names.
fn import_format(query: &QueryPairs) -> Result<ImportFormat, ApiError> {
    Ok(match query.first("format").unwrap_or("jsonl") {
        "jsonl" => ImportFormat::Jsonl,
        "label-studio" | "labelstudio" => ImportFormat::LabelStudio,
        "commugraph-speechact" => ImportFormat::SpeechAct(speech_act_import(query)?),
        other => {
            return Err(ApiError::Invalid {
                message: format!(
                    "format: unknown import format '{}' (expected {IMPORT_FORMATS})",
                    echo(other)
                ),
                details: json!({ "field": "format" }),
            })
        }
    })
}

/// The first line of a body, if it is UTF-8.
fn first_line(body: &[u8]) -> Option<&str> {
    let end = memchr::memchr(b'\n', body).unwrap_or(body.len());
    std::str::from_utf8(&body[..end]).ok()
}

/// The codebook an import is of: `?codebook=`, else the round's of a round export, else
/// the speech-act codebook for speech-act tags, else the default. A round export under
/// another codebook than its round's is refused.
fn import_codebook(
    state: &AppState,
    query: &QueryPairs,
    format: &ImportFormat,
    header: Option<&RoundHeader>,
) -> Result<Arc<Codebook>, ApiError> {
    let named = query.first("codebook");
    let codebook = match (named, header, format) {
        (None, Some(header), _) => state
            .codebooks
            .get(Some(&header.round.definition.codebook))?
            .clone(),
        (None, None, ImportFormat::SpeechAct(_)) => {
            state.codebooks.get(Some(speechact::CODEBOOK_ID))?.clone()
        }
        _ => requested_codebook(state, query)?,
    };
    match header {
        Some(header) if header.round.definition.codebook != codebook.id => Err(ApiError::Invalid {
            message: format!(
                "codebook: the round in this export is labeled under '{}', not '{}'",
                echo(&header.round.definition.codebook),
                codebook.id
            ),
            details: json!({ "field": "codebook" }),
        }),
        _ => Ok(codebook),
    }
}

/// Stores the round a round export's first line carries (see
/// [`crate::rounds::transfer`]; its codebook is the import's, see `import_codebook`):
/// `{"id", "created"}`, created false when the store already had it. Rounds are managed
/// by reviewers: 403 for other callers.
async fn import_round(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    header: &RoundHeader,
) -> Result<Value, ApiError> {
    caller(state, identity).may_manage_rounds(&state.labels.policy().reviewers)?;
    let created = state.labels.import_round(header).await?;
    Ok(json!({ "id": header.round.id, "created": created }))
}

/// What a `commugraph-speechact` import gives every line (see [`crate::labels::speechact`]):
/// `model`, the model the suggestions are stored under (required, a valid model name), and
/// `session`, the session of the lines that name none (optional; the lines of a session
/// that does not exist are refused one by one, as a JSONL import's are).
fn speech_act_import(query: &QueryPairs) -> Result<SpeechActImport, ApiError> {
    let model = query.first("model").ok_or_else(|| ApiError::Invalid {
        message: "model: is required with format=commugraph-speechact".to_owned(),
        details: json!({ "field": "model" }),
    })?;
    check_model(model)?;
    Ok(SpeechActImport {
        model: model.to_owned(),
        session_id: query
            .first("session")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

/// Imports `body` a batch at a time: each parsed and validated on the blocking pool, then
/// stored in its own transaction.
async fn import_batches(
    state: &AppState,
    codebook: &Arc<Codebook>,
    body: Arc<SplitBody>,
    identity: Option<Extension<Identity>>,
    round: Option<Value>,
) -> Result<Response, ApiError> {
    let mut outcomes = Vec::with_capacity(body.len());
    let mut from = 0;
    while from < body.len() {
        let split = body.clone();
        let batch = tokio::task::spawn_blocking(move || split.batch(from)).await?;
        let prepared = with_unit_texts(state, batch.records).await?;
        let (state_for, identity_for, codebook) = (state.clone(), identity.clone(), codebook.clone());
        let validated = tokio::task::spawn_blocking(move || {
            let caller = caller(&state_for, &identity_for);
            validate_batch(&state_for.labels.validator(&codebook), prepared, caller)
        })
        .await?;
        // A busy store cuts the import where it stands: the answer says what was stored.
        match state.labels.store_batch(validated, &mut outcomes).await {
            Ok(()) => from = batch.next,
            Err(LabelError::Busy(cause) | LabelError::Unreachable(cause)) => {
                return Ok(import_cut(&body, outcomes, &cause))
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut summary = import_summary(outcomes);
    if let Some(round) = round {
        summary["round"] = round;
    }
    Ok(json_response(StatusCode::OK, &summary))
}

/// The answer to an import the store was too busy to finish: 503 with `Retry-After`; the
/// details are the answer so far (`outcomes`: the body's first lines, stored or refused)
/// and `next_line`, the first line (or task) not stored. The same body sent again resumes
/// it: the lines already stored come back `unchanged`.
fn import_cut(body: &SplitBody, outcomes: Vec<LineOutcome>, cause: &str) -> Response {
    tracing::warn!(%cause, "the label database is busy or unreachable: an import stopped part way");
    let what = match body.format() {
        ImportFormat::Jsonl | ImportFormat::SpeechAct(_) => "line",
        ImportFormat::LabelStudio => "task",
    };
    let next_line = body.name_of(outcomes.len()).unwrap_or_default();
    let mut details = import_summary(outcomes);
    details["next_line"] = json!(next_line);
    let message = format!(
        "The label database is busy: the import stopped before {what} {next_line}. The {what}s \
         before it are answered in details.results (stored, or refused); none from it on was \
         stored. Send the same body again in {} s: what is stored already comes back unchanged.",
        BUSY_RETRY_AFTER.as_secs()
    );
    unavailable_response(&message, BUSY_RETRY_AFTER, Some(&details))
}

/// The import's answer: totals, then every line's outcome, in order.
fn import_summary(mut outcomes: Vec<LineOutcome>) -> Value {
    outcomes.sort_by_key(|o| o.line);
    let ok = outcomes.iter().filter(|o| o.ok).count();
    json!({
        "lines": outcomes.len(),
        "ok": ok,
        "failed": outcomes.len() - ok,
        "written": outcomes.iter().map(|o| o.written).sum::<usize>(),
        "unchanged": outcomes.iter().map(|o| o.unchanged).sum::<usize>(),
        "results": outcomes,
    })
}

type Records = Vec<(usize, Result<Vec<ImportItem>, Invalid>)>;

/// Each record with the text of its unit (`None` when the session or unit is unknown).
async fn with_unit_texts(
    state: &AppState,
    records: Records,
) -> Result<Vec<(usize, Result<Vec<Prepared>, Invalid>)>, ApiError> {
    let mut texts: UnitTexts = HashMap::new();
    for (session_id, events) in units_named(&records) {
        let Ok((_, loaded)) = state.store.get(&session_id).await else {
            continue;
        };
        let found = tokio::task::spawn_blocking(move || {
            let units = loaded.units();
            events
                .into_iter()
                .filter_map(|e| {
                    let unit = units.get(&e)?;
                    let prepared = PreparedUnit {
                        unit_type: unit.unit_type,
                        text: Arc::from(unit.text.as_str()),
                    };
                    Some((e, prepared))
                })
                .collect::<Vec<_>>()
        })
        .await?;
        texts.extend(found.into_iter().map(|(e, t)| ((session_id.clone(), e), t)));
    }
    Ok(with_texts(records, &texts))
}

/// The units an import names, by (session, unit).
type UnitTexts = HashMap<(String, String), PreparedUnit>;

/// The units each session is asked for by `records`, each once.
fn units_named(records: &Records) -> BTreeMap<String, BTreeSet<String>> {
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for item in records.iter().filter_map(|(_, r)| r.as_ref().ok()).flatten() {
        named
            .entry(item.session_id.clone())
            .or_default()
            .insert(item.event_id.clone());
    }
    named
}

/// Each record with its unit's text, shared: a copy per record made an import of a
/// thousand lines naming one 4 MB unit hold 4 GB at once.
fn with_texts(records: Records, texts: &UnitTexts) -> Vec<(usize, Result<Vec<Prepared>, Invalid>)> {
    records
        .into_iter()
        .map(|(line, items)| {
            let prepared = items.map(|items| {
                items
                    .into_iter()
                    .map(|item| Prepared {
                        unit: texts
                            .get(&(item.session_id.clone(), item.event_id.clone()))
                            .cloned(),
                        item,
                    })
                    .collect()
            });
            (line, prepared)
        })
        .collect()
}

/// `POST /api/labels/queue/next` with `{"annotator", "session"?, "overlap"?}`: the next unit
/// for the annotator, reserved for them (see [`crate::labels::queue`]), each unit going to
/// the server's overlap of annotators (`--queue-overlap`). `overlap`, if sent, must be the
/// server's: a client may not widen (or narrow) who else gets a unit. `{"done": true}` when
/// no session has one left for them.
pub async fn queue_next(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let codebook = requested_codebook(&state, &QueryPairs::parse(query.as_deref()))?;
    let ask = json_body(&body)?;
    let annotator = queue_annotator(&state, &identity, &ask)?;
    match ask.get("round") {
        None | Some(Value::Null) => {}
        Some(Value::String(round)) => return round_queue_next(&state, round, &annotator, &ask).await,
        Some(_) => {
            return Err(ApiError::Invalid {
                message: "round: must be a round id".into(),
                details: json!({ "field": "round" }),
            })
        }
    }
    let overlap = state.labels.policy().overlap;
    match ask.get("overlap") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_u64() == Some(overlap as u64) => {}
        Some(_) => {
            return Err(ApiError::Invalid {
                message: format!(
                    "overlap: the queue's overlap is the server's ({overlap}, --queue-overlap); a request may not change it"
                ),
                details: json!({ "field": "overlap" }),
            })
        }
    }
    let sessions = match ask.get("session") {
        None | Some(Value::Null) => state
            .store
            .list_current()
            .await?
            .into_iter()
            .map(|i| i.slot.id.clone())
            .collect(),
        Some(Value::String(s)) => {
            known_session(&state, s).await?;
            vec![s.clone()]
        }
        Some(_) => {
            return Err(ApiError::Invalid {
                message: "session: must be a string".into(),
                details: json!({ "field": "session" }),
            })
        }
    };
    for session_id in sessions {
        // A session that cannot be loaded has nothing to hand out.
        let Ok(units) = session_candidates(&state, &session_id, &codebook).await else {
            continue;
        };
        let unit_refs: Vec<&str> = units.iter().map(|u| u.event_id.as_str()).collect();
        let ask = QueueAsk {
            codebook: &codebook.id,
            annotator: &annotator,
            overlap,
            reservation_ms: state.labels.policy().reservation.as_millis() as i64,
            now_ms: crate::store::registry::now_ms(),
        };
        if let Some(r) = state.labels.next_unit(&session_id, &unit_refs, ask).await? {
            return Ok(reservation_response(Some(&r)));
        }
    }
    Ok(reservation_response(None))
}

/// The queue's answer: the unit reserved, or `{"done": true}`.
fn reservation_response(reservation: Option<&Reservation>) -> Response {
    let Some(r) = reservation else {
        return json_response(StatusCode::OK, &json!({ "done": true, "reservation": null }));
    };
    let expires_at = chrono::DateTime::from_timestamp_millis(r.expires_at_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    json_response(
        StatusCode::OK,
        &json!({ "done": false, "reservation": r, "expires_at": expires_at }),
    )
}

/// `queue/next` within round `id`: its units in its order, under its codebook, overlap and
/// reservation time; 404 for an unknown round, 409 for a closed one, 403 for an annotator
/// it does not assign. `overlap` and `session`, if sent, must agree with the round.
async fn round_queue_next(
    state: &AppState,
    id: &str,
    annotator: &str,
    ask: &Value,
) -> Result<Response, ApiError> {
    let round = state.labels.round(id).await?;
    if round.status == RoundStatus::Closed {
        return Err(ApiError::Conflict(format!(
            "Round '{}' is closed: its queue hands out no unit",
            echo(id)
        )));
    }
    if !round.definition.assigns(annotator) {
        return Err(ApiError::Forbidden(format!(
            "round '{}' is not assigned to {annotator}",
            echo(id)
        )));
    }
    match ask.get("overlap") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_u64() == Some(round.definition.overlap as u64) => {}
        Some(_) => {
            return Err(ApiError::Invalid {
                message: format!(
                    "overlap: the round's overlap is {}; a request may not change it",
                    round.definition.overlap
                ),
                details: json!({ "field": "overlap" }),
            })
        }
    }
    let queue = QueueAsk {
        codebook: &round.definition.codebook,
        annotator,
        overlap: round.definition.overlap,
        reservation_ms: (round.definition.reservation_secs * 1000) as i64,
        now_ms: crate::store::registry::now_ms(),
    };
    let reservation = state.labels.next_round_unit(&round, queue).await?;
    Ok(reservation_response(reservation.as_ref()))
}

/// `POST /api/labels/queue/release` with `{"annotator", "session_id", "event_id"}`: gives a
/// reserved unit back (204; 404 when the annotator held no such reservation).
pub async fn queue_release(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let codebook = requested_codebook(&state, &QueryPairs::parse(query.as_deref()))?;
    let ask = json_body(&body)?;
    let annotator = queue_annotator(&state, &identity, &ask)?;
    let field = |name: &str| {
        ask.get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::Invalid {
                message: format!("{name}: must be a string"),
                details: json!({ "field": name }),
            })
    };
    let (session_id, event_id) = (field("session_id")?, field("event_id")?);
    check_ids(session_id, event_id)?;
    let key = SetKey {
        codebook: &codebook.id,
        session_id,
        event_id,
        annotator: &annotator,
    };
    if state.labels.release(key).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::NotFound(format!(
            "{} holds no reservation of unit '{}' in session '{}'",
            annotator,
            echo(event_id),
            echo(session_id)
        )))
    }
}

/// The annotator a queue request is for: the body's, which must be the named key's (unless
/// that key is a reviewer's); the key's when the body names none.
fn queue_annotator(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    ask: &Value,
) -> Result<String, ApiError> {
    let me = caller(state, identity).named();
    let annotator = match (ask.get("annotator"), me) {
        (Some(Value::String(a)), _) => a.clone(),
        (None | Some(Value::Null), Some(me)) => me.to_owned(),
        (None | Some(Value::Null), None) => {
            return Err(ApiError::Invalid {
                message: "annotator: is required".into(),
                details: json!({ "field": "annotator" }),
            })
        }
        (Some(_), _) => {
            return Err(ApiError::Invalid {
                message: "annotator: must be a string".into(),
                details: json!({ "field": "annotator" }),
            })
        }
    };
    check_annotator("annotator", &annotator)?;
    caller(state, identity).may_act_for(&annotator, &state.labels.policy().reviewers)?;
    Ok(annotator)
}

/// A session's progress as `GET /api/labels/progress` lists it: the figures, then what the
/// sessions page shows of the session itself.
#[derive(Debug, serde::Serialize)]
struct ListedProgress {
    /// Units labeled, per unit type and annotator.
    #[serde(flatten)]
    progress: SessionProgress,
    /// Its framework (`claudecode`, `pi`, `autogen`).
    framework: &'static str,
    /// Its main log's name.
    file_name: String,
    /// The folder below the sessions directory holding it (`null` for an upload).
    project: Option<String>,
    /// When its log was last written: an upload's time, a file's modification time.
    modified_at: String,
    /// The latest write of a set the asker may see (`null`: none yet).
    last_labeled_at: Option<String>,
}

/// `GET /api/labels/progress` (`?session=ID`; `?all=true` for every session, labeled or
/// not): per session and annotator, units labeled out of the session's by unit type,
/// drafts, skips, median lead time, agreement with the adjudicated sets; the session's
/// framework, file name, project, the time of its log and of its latest label. In blind
/// mode, over the sets the asker may see.
pub async fn progress(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let codebook = requested_codebook(&state, &query)?;
    let sessions = match query.first("session") {
        Some(id) => {
            known_session(&state, id).await?;
            vec![id.to_owned()]
        }
        None if query.flag("all")? => state
            .store
            .list_current()
            .await?
            .into_iter()
            .map(|i| i.slot.id.clone())
            .collect(),
        None => state.labels.labeled_sessions(&codebook.id).await?,
    };
    let viewer = Arc::new(viewer(&state, &identity, &query));
    let blindness = blindness(&state, None).await?;
    let mut out = Vec::with_capacity(sessions.len());
    for session_id in sessions {
        let sets = state.labels.list(&codebook.id, &session_id).await?;
        let Ok((slot, loaded)) = state.store.get(&session_id).await else {
            continue;
        };
        let (id, viewer, blindness) = (session_id.clone(), viewer.clone(), blindness.clone());
        let codebook = codebook.clone();
        let (progress, last_labeled_at) = tokio::task::spawn_blocking(move || {
            let units: Vec<UnitKind> = loaded
                .units()
                .units()
                .iter()
                .filter(|u| codebook.covers(u.unit_type))
                .map(|u| UnitKind {
                    event_id: &u.event_id,
                    unit_type: u.unit_type,
                })
                .collect();
            let visible = viewer.visible_in_session(&id, &sets, &blindness);
            let last = visible.iter().map(|s| &s.updated_at).max().cloned();
            (session_progress(&id, &units, &visible), last)
        })
        .await?;
        out.push(ListedProgress {
            framework: slot.framework.name(),
            file_name: slot.file_name(),
            project: slot.project().map(str::to_owned),
            modified_at: iso_millis(slot.created_at_ms),
            last_labeled_at,
            progress,
        });
    }
    Ok(json_response(StatusCode::OK, &json!({ "sessions": out })))
}

/// `GET /api/labels/export` (`?format=jsonl`, the default, `label-studio` or
/// `label-studio-config`; `?session=ID`; `?all_units=true`): the labels with their units,
/// streamed (see [`crate::labels::export`]). In blind mode, the sets the asker may see.
/// The answer waits for the first chunk: a database that cannot be read gives a 503 with
/// `Retry-After`, not a 200 whose body breaks off; a failure part way ends the stream
/// with an error (the client sees a truncated transfer, never a short file that looks whole).
pub async fn export(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let round = requested_round(&state, &query).await?;
    let codebook = round_codebook(&state, &query, round.as_ref())?;
    let name = query.first("format").unwrap_or("jsonl");
    if name == "label-studio-config" {
        let xml = crate::labels::labelstudio::label_config(&codebook);
        return Ok((
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/xml"))],
            xml,
        )
            .into_response());
    }
    let format = Format::parse(name).ok_or_else(|| ApiError::Invalid {
        message: format!(
            "format: unknown export format '{}' (expected jsonl, label-studio or label-studio-config)",
            echo(name)
        ),
        details: json!({ "field": "format" }),
    })?;
    let (only, header) = match &round {
        Some(round) => {
            let units = state.labels.round_units(&round.id).await?;
            let mut only: BTreeMap<String, HashSet<String>> = BTreeMap::new();
            for unit in &units {
                only.entry(unit.session_id.clone())
                    .or_default()
                    .insert(unit.event_id.clone());
            }
            let header = json!({ "round": round, "units": units });
            (Some(only), Some(header))
        }
        None => (None, None),
    };
    let scope = ExportScope {
        codebook: codebook.id.clone(),
        only,
        header,
        session_id: query
            .first("session")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        all_units: query.flag("all_units")?,
        viewer: viewer(&state, &identity, &query),
        // A blind round's export is blind on any server.
        blindness: round_blindness(&state, round.as_ref()).await?,
    };
    match &scope.session_id {
        Some(id) => {
            state.store.find(id).await?;
        }
        // The export lists the sessions as the store knows them: brought in line with the
        // shared upload store first, when there is one.
        None => {
            state.store.list_current().await?;
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let (failure, early_failure) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let failed = tx.clone();
        let Err(e) = state
            .labels
            .export(state.store.as_ref(), format, &scope, tx)
            .await
        else {
            return;
        };
        if let Err(e) = failure.send(e) {
            tracing::error!(error = %e, "the label export failed part way");
            let _ = failed
                .send(Err(std::io::Error::other("the label export failed")))
                .await;
        }
    });
    let body = match rx.recv().await {
        Some(first) => {
            drop(early_failure);
            let rest = tokio_stream::wrappers::ReceiverStream::new(rx);
            Body::from_stream(tokio_stream::StreamExt::chain(tokio_stream::once(first), rest))
        }
        None => match early_failure.await {
            Ok(e) => return Err(e.into()),
            Err(_) => Body::empty(),
        },
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    Ok(response)
}

/// `GET /api/labels/agreement` (`?session=ID`, `?label=ID`, `?annotators=a,b`,
/// `?pairs_limit=N`, `?pairs_after=a,b`): agreement of the submitted sets (drafts, skips,
/// adjudicated sets and suggestions never count), per label and overall, with the units
/// and annotators behind each figure, and a page of the pairs of annotators (see
/// [`crate::labels::agreement`]). In blind mode, over the sets the asker may see.
pub async fn agreement(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    use crate::labels::agreement::report;
    let query = QueryPairs::parse(query.as_deref());
    let round = requested_round(&state, &query).await?;
    let codebook = round_codebook(&state, &query, round.as_ref())?;
    let session = query.first("session");
    if let Some(id) = session {
        known_session(&state, id).await?;
    }
    let page = pair_page(&query)?;
    let annotators: Option<Vec<String>> = query.first("annotators").map(|a| {
        a.split(',')
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect()
    });
    let mut label_ids: Vec<String> = codebook.labels.iter().map(|l| l.id.clone()).collect();
    if let Some(label) = query.first("label") {
        if codebook.label(label).is_none() {
            return Err(ApiError::Invalid {
                message: format!("label: '{}' is not a label of the codebook", echo(label)),
                details: json!({ "field": "label" }),
            });
        }
        label_ids = vec![label.to_owned()];
    }
    let keep_annotator = |a: &str| annotators.as_ref().is_none_or(|list| list.iter().any(|n| n == a));
    let keep_label = |l: &str| label_ids.iter().any(|id| id == l);
    let viewer = viewer(&state, &identity, &query);
    let blindness = round_blindness(&state, round.as_ref()).await?;
    let codings = state
        .labels
        .submitted_codings(
            &codebook.id,
            session,
            &keep_annotator,
            &keep_label,
            viewer.sight(&blindness),
        )
        .await?;
    let mut codings = covered_codings(&state, &codebook, codings).await?;
    if let Some(round) = &round {
        let keys = round_unit_keys(&state, round).await?;
        codings.retain_units(|key| keys.contains(key));
    }
    let report = tokio::task::spawn_blocking(move || report(codings, &label_ids, &page)).await?;
    Ok(json_response(StatusCode::OK, &report))
}

/// The codebook a request is about: its round's when it names one (`?codebook=`, if
/// given too, must be the round's), else the one it names, else the default.
pub(super) fn round_codebook(
    state: &AppState,
    query: &QueryPairs,
    round: Option<&Round>,
) -> Result<Arc<Codebook>, ApiError> {
    let Some(round) = round else {
        return requested_codebook(state, query);
    };
    let codebook = state.codebooks.get(Some(&round.definition.codebook))?.clone();
    match query.first("codebook") {
        Some(asked) if asked != codebook.id => Err(ApiError::Invalid {
            message: format!(
                "codebook: round '{}' is labeled under '{}', not '{}'",
                round.id,
                codebook.id,
                echo(asked)
            ),
            details: json!({ "field": "codebook" }),
        }),
        _ => Ok(codebook),
    }
}

/// Of `codings`, those of units `codebook` codes: sets written before it restricted its
/// unit types (or under another codebook's rules) are left out. Sessions that cannot be
/// loaded keep theirs.
async fn covered_codings(
    state: &AppState,
    codebook: &Arc<Codebook>,
    mut codings: CodingTable,
) -> Result<CodingTable, ApiError> {
    if codebook.unit_types.is_none() || codings.is_empty() {
        return Ok(codings);
    }
    let sessions: BTreeSet<String> = codings
        .unit_keys()
        .filter_map(|key| key.split_once('\0').map(|(s, _)| s.to_owned()))
        .collect();
    let mut uncovered: HashSet<String> = HashSet::new();
    for session_id in sessions {
        let Ok((_, loaded)) = state.store.get(&session_id).await else {
            continue;
        };
        let codebook = codebook.clone();
        let keys = tokio::task::spawn_blocking(move || {
            loaded
                .units()
                .units()
                .iter()
                .filter(|u| !codebook.covers(u.unit_type))
                .map(|u| format!("{session_id}\0{}", u.event_id))
                .collect::<Vec<_>>()
        })
        .await?;
        uncovered.extend(keys);
    }
    codings.retain_units(|key| !uncovered.contains(key));
    Ok(codings)
}

/// The page of pairs an agreement request asks for: `?pairs_limit=` (1 to
/// [`PairPage::MAX_LIMIT`], default [`PairPage::DEFAULT_LIMIT`]) pairs after
/// `?pairs_after=` (a report's `pairs_next`); 400 naming the parameter otherwise.
fn pair_page(query: &QueryPairs) -> Result<PairPage, ApiError> {
    let limit = match query.first("pairs_limit") {
        None => PairPage::DEFAULT_LIMIT,
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=PairPage::MAX_LIMIT).contains(n))
            .ok_or_else(|| ApiError::Invalid {
                message: format!(
                    "pairs_limit: must be an integer from 1 to {}",
                    PairPage::MAX_LIMIT
                ),
                details: json!({ "field": "pairs_limit" }),
            })?,
    };
    let after = match query.first("pairs_after") {
        None => None,
        Some(cursor) => Some(PairPage::parse_cursor(cursor).ok_or_else(|| ApiError::Invalid {
            message: format!(
                "pairs_after: '{}' is not a pair (expected FIRST,SECOND, as pairs_next gives it)",
                echo(cursor)
            ),
            details: json!({ "field": "pairs_after" }),
        })?),
    };
    Ok(PairPage { after, limit })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::model::ImportKind;

    fn item(session: &str, event: &str) -> ImportItem {
        ImportItem {
            codebook: None,
            session_id: session.to_owned(),
            event_id: event.to_owned(),
            kind: ImportKind::Set(json!({})),
        }
    }

    /// Regression: every record of an import got its own copy of its unit's text, all alive
    /// at once (a thousand lines naming one 4 MB unit: 4.5 GB). Each unit is looked up
    /// once, and its records share one text.
    #[test]
    fn records_naming_one_unit_share_its_text() {
        let records: Records = vec![
            (1, Ok(vec![item("s", "e1"), item("s", "e1")])),
            (2, Ok(vec![item("s", "e1"), item("s", "e2"), item("t", "e1")])),
        ];
        let named = units_named(&records);
        assert_eq!(named["s"].iter().collect::<Vec<_>>(), ["e1", "e2"]);
        assert_eq!(named["t"].len(), 1);

        let mut texts = UnitTexts::new();
        let unit = PreparedUnit {
            unit_type: "user_turn",
            text: Arc::from("a long text"),
        };
        texts.insert(("s".into(), "e1".into()), unit);
        let prepared = with_texts(records, &texts);
        let text = |line: usize, at: usize| {
            prepared[line].1.as_ref().unwrap()[at]
                .unit
                .as_ref()
                .map(|u| u.text.clone())
        };
        let first = text(0, 0).unwrap();
        for other in [text(0, 1), text(1, 0)] {
            assert!(Arc::ptr_eq(&first, &other.unwrap()), "one text for the unit");
        }
        assert_eq!(text(1, 1), None, "an unknown unit");
        assert_eq!(text(1, 2), None, "another session's unit");
    }
}
