//! The round routes, thin over [`crate::rounds`]:
//!
//! - `POST /api/rounds` (`?dry_run=true`: a preview, nothing stored): creates a round.
//! - `GET /api/rounds`: every round with its progress; `GET /api/rounds/{id}`: one.
//! - `GET /api/rounds/{id}/units`: its units, in queue order, with their sets' statuses.
//! - `POST /api/rounds/{id}/close`, `POST /api/rounds/{id}/reopen`.
//!
//! A round's queue is `POST /api/labels/queue/next` with `"round"`; its agreement,
//! progress and export are the label routes' with `?round=ID`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use serde::Serialize;
use serde_json::{json, Value};

use super::auth::Identity;
use super::error::{echo, ApiError};
use super::labels::{caller, json_body, json_response};
use super::query::QueryPairs;
use super::AppState;
use crate::labels::consensus::{adjudicated_in_force, Blindness};
use crate::labels::{Codebook, LabelSet, Status};
use crate::rounds::definition::Defaults;
use crate::rounds::sample::draw;
use crate::rounds::{Candidate, Round, RoundDefinition, RoundStatus, Selection};

/// Units of a preview shown with their text.
const PREVIEW_UNITS: usize = 20;
/// Characters of a previewed unit's text.
const PREVIEW_CHARS: usize = 240;

/// `POST /api/rounds`: creates a round from its definition (201 with the round), its units
/// drawn from the selection's candidates now and fixed. With `?dry_run=true`, 200 with the
/// candidates' count and a preview of the sample; nothing is stored.
pub async fn create(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let dry_run = QueryPairs::parse(query.as_deref()).flag("dry_run")?;
    let caller = caller(&state, &identity);
    caller.may_manage_rounds(&state.labels.policy().reviewers)?;
    let policy = state.labels.policy();
    let defaults = Defaults {
        overlap: policy.overlap,
        reservation_secs: policy.reservation.as_secs(),
        blind: policy.blind,
    };
    let (mut definition, codebook) = RoundDefinition::parse(&json_body(&body)?, defaults)?;
    let codebook = state.codebooks.get(codebook.as_deref())?.clone();
    definition.codebook = codebook.id.clone();
    definition.codebook_version = codebook.version.clone();
    let candidates = candidates(&state, &identity, &definition.selection, &codebook).await?;
    let count = candidates.len();
    let spec = definition.sample.clone();
    let units = tokio::task::spawn_blocking(move || draw(&candidates, &spec)).await?;
    if dry_run {
        let preview = preview(&state, &units).await?;
        let body = json!({ "candidates": count, "units": units.len(), "preview": preview, "by_session": by_key(&units, |c| &c.session_id), "by_unit_type": by_key(&units, |c| &c.unit_type) });
        return Ok(json_response(StatusCode::OK, &body));
    }
    if units.is_empty() {
        return Err(ApiError::Invalid {
            message: "selection: no unit the codebook codes matches it".into(),
            details: json!({ "field": "selection", "candidates": 0 }),
        });
    }
    let round = state
        .labels
        .create_round(&definition, caller.named(), &units)
        .await?;
    tracing::info!(round = %round.id, units = round.units, candidates = count, "round created");
    let body = RoundBody::of(round, &[]);
    Ok(json_response(
        StatusCode::CREATED,
        &json!({ "round": body, "candidates": count }),
    ))
}

/// The units a selection names that `codebook` codes, each once: the candidates of a round.
async fn candidates(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    selection: &Selection,
    codebook: &Arc<Codebook>,
) -> Result<Vec<Candidate>, ApiError> {
    match selection {
        Selection::Units { units } => listed_units(state, units, codebook).await,
        Selection::Sessions { sessions } => {
            let mut all = Vec::new();
            for (i, id) in sessions.iter().enumerate() {
                let units = session_candidates(state, id, codebook)
                    .await
                    .map_err(|_| unknown_session("selection.sessions", i, id))?;
                all.extend(units);
            }
            Ok(all)
        }
        Selection::Search { query, filters } => {
            super::search::selected_units(state, identity, query, filters, codebook).await
        }
    }
}

/// The units `units` lists, each checked to exist and be coded by `codebook`.
async fn listed_units(
    state: &AppState,
    units: &[crate::rounds::UnitKey],
    codebook: &Arc<Codebook>,
) -> Result<Vec<Candidate>, ApiError> {
    let mut by_session: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    for (i, unit) in units.iter().enumerate() {
        by_session
            .entry(unit.session_id.as_str())
            .or_default()
            .push((i, unit.event_id.as_str()));
    }
    let mut out = Vec::with_capacity(units.len());
    for (session_id, wanted) in by_session {
        let field = |i: usize| format!("selection.units[{i}]");
        let (_, loaded) = state
            .store
            .get(session_id)
            .await
            .map_err(|_| unknown_session("selection.units", wanted[0].0, session_id))?;
        for (i, event_id) in wanted {
            let unit = loaded.units().get(event_id).ok_or_else(|| ApiError::Invalid {
                message: format!(
                    "{}: no unit '{}' in session '{}'",
                    field(i),
                    echo(event_id),
                    echo(session_id)
                ),
                details: json!({ "field": field(i) }),
            })?;
            if !codebook.covers(unit.unit_type) {
                return Err(ApiError::Invalid {
                    message: format!(
                        "{}: a {} is not coded by the codebook {}",
                        field(i),
                        unit.unit_type,
                        codebook.id
                    ),
                    details: json!({ "field": field(i) }),
                });
            }
            out.push(Candidate {
                session_id: session_id.to_owned(),
                event_id: event_id.to_owned(),
                unit_type: unit.unit_type.to_owned(),
            });
        }
    }
    Ok(out)
}

/// The units of session `id` that `codebook` codes.
pub(super) async fn session_candidates(
    state: &AppState,
    id: &str,
    codebook: &Arc<Codebook>,
) -> Result<Vec<Candidate>, ApiError> {
    let (_, loaded) = state.store.get(id).await?;
    let (codebook, id) = (codebook.clone(), id.to_owned());
    Ok(tokio::task::spawn_blocking(move || {
        loaded
            .units()
            .units()
            .iter()
            .filter(|u| codebook.covers(u.unit_type))
            .map(|u| Candidate {
                session_id: id.clone(),
                event_id: u.event_id.clone(),
                unit_type: u.unit_type.to_owned(),
            })
            .collect()
    })
    .await?)
}

fn unknown_session(field: &str, i: usize, id: &str) -> ApiError {
    ApiError::Invalid {
        message: format!("{field}[{i}]: no session '{}'", echo(id)),
        details: json!({ "field": format!("{field}[{i}]") }),
    }
}

/// How many of `units` each key has.
fn by_key(units: &[Candidate], key: impl Fn(&Candidate) -> &String) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for unit in units {
        *counts.entry(key(unit).clone()).or_insert(0) += 1;
    }
    counts
}

/// The first units of a sample with the beginning of their text.
async fn preview(state: &AppState, units: &[Candidate]) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    for unit in units.iter().take(PREVIEW_UNITS) {
        let text = match state.store.get(&unit.session_id).await {
            Ok((_, loaded)) => loaded
                .units()
                .get(&unit.event_id)
                .map(|u| u.text.chars().take(PREVIEW_CHARS).collect::<String>())
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        out.push(json!({ "session_id": unit.session_id, "event_id": unit.event_id, "unit_type": unit.unit_type, "text": text }));
    }
    Ok(out)
}

/// A round as the routes show it: its definition and state, and its progress.
#[derive(Serialize)]
struct RoundBody {
    #[serde(flatten)]
    round: Round,
    progress: RoundProgress,
}

/// How far a round is: units with as many submitted sets as the overlap asks (`complete`),
/// with at least one (`started`), and per annotator their sets by status.
#[derive(Serialize, Default)]
struct RoundProgress {
    complete: usize,
    started: usize,
    annotators: BTreeMap<String, AnnotatorCounts>,
}

/// One annotator's sets on a round's units, by status.
#[derive(Serialize, Default)]
struct AnnotatorCounts {
    submitted: usize,
    discarded: usize,
    draft: usize,
    adjudicated: usize,
}

impl RoundBody {
    /// `round` with the progress `sets` (its units' sets, unit by unit) make; `units` of
    /// them at least started is worked out here.
    fn of(round: Round, sets: &[(String, LabelSet)]) -> RoundBody {
        let mut progress = RoundProgress::default();
        let mut submitted_per_unit: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (session, set) in sets {
            let counts = progress.annotators.entry(set.annotator.clone()).or_default();
            match set.status {
                Status::Submitted => {
                    counts.submitted += 1;
                    *submitted_per_unit.entry((session, &set.event_id)).or_default() += 1;
                }
                Status::Discarded => counts.discarded += 1,
                Status::Draft => counts.draft += 1,
                Status::Adjudicated => counts.adjudicated += 1,
            }
        }
        progress.started = submitted_per_unit.len();
        progress.complete = submitted_per_unit
            .values()
            .filter(|n| **n >= round.definition.overlap)
            .count();
        RoundBody { round, progress }
    }
}

/// The sets on `round`'s units under its codebook that the asker may see, with their
/// session, unit by unit: in a blind round (or on a blind server) what blind mode shows
/// them (their own until they submit, everything for a reviewer), else every set.
async fn visible_round_sets(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    query: &QueryPairs,
    round: &Round,
) -> Result<Vec<(String, LabelSet)>, ApiError> {
    let sets = state
        .labels
        .round_sets(&round.id, &round.definition.codebook)
        .await?;
    let blindness = round_blindness(state, Some(round)).await?;
    if blindness.is_nowhere() {
        return Ok(sets);
    }
    let viewer = super::labels::viewer(state, identity, query);
    let mut visible = Vec::with_capacity(sets.len());
    // The sets come unit by unit (by position, then annotator).
    for unit in sets.chunk_by(|a, b| a.0 == b.0 && a.1.event_id == b.1.event_id) {
        let mut shown: Vec<LabelSet> = unit.iter().map(|(_, set)| set.clone()).collect();
        viewer.retain_visible(&mut shown, blindness.covers(&unit[0].0, &unit[0].1.event_id));
        visible.extend(shown.into_iter().map(|set| (unit[0].0.clone(), set)));
    }
    Ok(visible)
}

/// `GET /api/rounds`: every round, newest first, with its progress (blind rounds: over
/// the sets the asker may see).
pub async fn list(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let mut out = Vec::new();
    for round in state.labels.rounds().await? {
        let sets = visible_round_sets(&state, &identity, &query, &round).await?;
        out.push(RoundBody::of(round, &sets));
    }
    Ok(json_response(StatusCode::OK, &json!({ "rounds": out })))
}

/// `GET /api/rounds/{id}`: the round with its progress (blind rounds: over the sets the
/// asker may see).
pub async fn get(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let round = state.labels.round(&id).await?;
    let sets = visible_round_sets(&state, &identity, &query, &round).await?;
    Ok(json_response(StatusCode::OK, &RoundBody::of(round, &sets)))
}

/// `GET /api/rounds/{id}/units`: the round's units in queue order, each with the statuses
/// of its sets by annotator (in blind rounds, those the asker may see).
pub async fn units(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryPairs::parse(query.as_deref());
    let round = state.labels.round(&id).await?;
    let units = state.labels.round_units(&round.id).await?;
    let sets = visible_round_sets(&state, &identity, &query, &round).await?;
    let mut statuses: BTreeMap<(&str, &str), BTreeMap<&str, Status>> = BTreeMap::new();
    for (session, set) in &sets {
        statuses
            .entry((session.as_str(), set.event_id.as_str()))
            .or_default()
            .insert(set.annotator.as_str(), set.status);
    }
    let listed: Vec<Value> = units
        .iter()
        .enumerate()
        .map(|(position, u)| {
            let sets = statuses.get(&(u.session_id.as_str(), u.event_id.as_str()));
            json!({ "position": position, "session_id": u.session_id, "event_id": u.event_id, "unit_type": u.unit_type, "sets": sets.cloned().unwrap_or_default() })
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({ "round": round.id, "total": listed.len(), "units": listed }),
    ))
}

/// `POST /api/rounds/{id}/close`: its queue hands out nothing more.
pub async fn close(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    set_status(&state, &identity, &id, RoundStatus::Closed).await
}

/// `POST /api/rounds/{id}/reopen`: its queue hands out units again.
pub async fn reopen(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    set_status(&state, &identity, &id, RoundStatus::Open).await
}

async fn set_status(
    state: &AppState,
    identity: &Option<Extension<Identity>>,
    id: &str,
    status: RoundStatus,
) -> Result<Response, ApiError> {
    caller(state, identity).may_manage_rounds(&state.labels.policy().reviewers)?;
    let round = state.labels.set_round_status(id, status).await?;
    let sets = visible_round_sets(state, identity, &QueryPairs::default(), &round).await?;
    Ok(json_response(StatusCode::OK, &RoundBody::of(round, &sets)))
}

/// True when what a request reads of `round` is blind on every unit: the server's blind
/// mode, or the round's.
pub(super) fn round_is_blind(state: &AppState, round: Option<&Round>) -> bool {
    state.labels.policy().blind || round.is_some_and(|r| r.definition.blind)
}

/// Where blind mode holds for a read of `round`'s units, or of the whole store: every unit
/// of a blind round (or on a blind server); else the units of the blind rounds, which a
/// unit of another round may be one of.
pub(super) async fn round_blindness(state: &AppState, round: Option<&Round>) -> Result<Blindness, ApiError> {
    match round_is_blind(state, round) {
        true => Ok(Blindness::Everywhere),
        false => super::labels::blindness(state, None).await,
    }
}

/// The round `?round=` names, if any (404 for an unknown one).
pub(super) async fn requested_round(state: &AppState, query: &QueryPairs) -> Result<Option<Round>, ApiError> {
    match query.first("round") {
        None => Ok(None),
        Some(id) => Ok(Some(state.labels.round(id).await?)),
    }
}

/// The unit keys (`session \0 event`) of round `round`.
pub(super) async fn round_unit_keys(state: &AppState, round: &Round) -> Result<HashSet<String>, ApiError> {
    Ok(state
        .labels
        .round_units(&round.id)
        .await?
        .into_iter()
        .map(|u| format!("{}\0{}", u.session_id, u.event_id))
        .collect())
}

/// `GET /api/rounds/{id}/agreement`: the round's humans with each other, and each model
/// whose suggestions are on its units as one more annotator: Krippendorff's alpha among
/// the humans, of each model with the humans and with the adjudicated sets, per label the
/// model's precision and recall against the adjudicated sets, and the units where a model
/// and the humans disagree (see [`crate::labels::model_agreement`]). In a blind round (or
/// on a blind server), over the sets the asker may see.
pub async fn agreement(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    use crate::labels::model_agreement::model_agreement;
    let query = QueryPairs::parse(query.as_deref());
    let round = state.labels.round(&id).await?;
    let codebook = state.codebooks.get(Some(&round.definition.codebook))?.clone();
    let units = state.labels.round_units(&round.id).await?;
    let sets = visible_round_sets(&state, &identity, &query, &round).await?;
    let suggestions = state.labels.round_suggestions(&round.id, &codebook.id).await?;
    let report = tokio::task::spawn_blocking(move || {
        let codings = unit_codings(&units, sets, suggestions);
        let label_ids: Vec<String> = codebook.labels.iter().map(|l| l.id.clone()).collect();
        model_agreement(&codings, &label_ids)
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "round": round.id, "codebook": round.definition.codebook, "report": report }),
    ))
}

/// The codings of each of a round's `units` (in its order): of its (visible) `sets`, the
/// submitted ones and the adjudicated set in force; and the suggestions.
fn unit_codings(
    units: &[Candidate],
    sets: Vec<(String, LabelSet)>,
    suggestions: Vec<(String, crate::labels::Suggestion)>,
) -> Vec<crate::labels::model_agreement::UnitCodings> {
    use crate::labels::model_agreement::UnitCodings;
    let ids = |labels: &[crate::labels::model::LabelRecord]| {
        labels.iter().map(|l| l.id.clone()).collect::<Vec<_>>()
    };
    let mut by_unit: BTreeMap<(String, String), (Vec<LabelSet>, Vec<crate::labels::Suggestion>)> =
        BTreeMap::new();
    for (session, set) in sets {
        by_unit
            .entry((session, set.event_id.clone()))
            .or_default()
            .0
            .push(set);
    }
    for (session, suggestion) in suggestions {
        by_unit
            .entry((session, suggestion.event_id.clone()))
            .or_default()
            .1
            .push(suggestion);
    }
    units
        .iter()
        .map(|unit| {
            let key = (unit.session_id.clone(), unit.event_id.clone());
            let (sets, suggestions) = by_unit.remove(&key).unwrap_or_default();
            let adjudicated = adjudicated_in_force(&sets).map(|s| ids(&s.labels));
            UnitCodings {
                session_id: unit.session_id.clone(),
                event_id: unit.event_id.clone(),
                humans: sets
                    .iter()
                    .filter(|s| s.status == Status::Submitted)
                    .map(|s| (s.annotator.clone(), ids(&s.labels)))
                    .collect(),
                models: suggestions
                    .iter()
                    .map(|s| (s.model.clone(), ids(&s.labels)))
                    .collect(),
                adjudicated,
            }
        })
        .collect()
}
