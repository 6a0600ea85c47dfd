//! Importing labels: human sets and model suggestions, line by line, validated like `PUT`
//! (by [`super::validate`]), a batch at a time (see [`super::import_body`]), the valid lines stored in transactions of
//! about [`MAX_TRANSACTION`], so that other writers get SQLite's write lock between two.
//!
//! A JSONL line is one of:
//! - a set: `{"session_id", "event_id", "annotator", "labels", "status"?, "note"?,
//!   "lead_time"?}` (`status` defaults to `submitted`);
//! - a suggestion: `{"session_id", "event_id", "model", "score"?, "labels"}`;
//! - a line of our own export (`"annotations"` and `"suggestions"` lists): every set and
//!   suggestion it carries.
//!
//! A line is all or nothing: one invalid record refuses the whole line, and a line's records
//! are stored in one transaction. A record that would change nothing (the same set or
//! suggestion is stored) is left alone, so importing the same file twice changes nothing: no
//! new version, no history row. That is also how an import cut between two transactions
//! (the store busy) is resumed: the same file sent again stores what was left.

use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::{AnyConnection, AnyPool};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::access::Caller;
use super::model::{ImportItem, ImportKind, Precondition, Status};
use super::store::{now, write_set, LabelError, LabelStore, SetWrite, Unchanged};
use super::validate::{check_ids, invalid, Invalid, Refusal, UnitRef, ValidSet, ValidSuggestion, Validator};

/// Most lines (or Label Studio tasks) in one import request.
pub const MAX_IMPORT_LINES: usize = 100_000;

/// Most records (sets and suggestions) one line (or task) may hold: a line is one
/// transaction, and other writers wait for it.
pub const MAX_RECORDS_PER_LINE: usize = 1_000;

/// Most JSON values one line (or task) may hold, nested ones included: counted before the
/// line is parsed, they bound what its parse builds (an array of a million `{}` is 3 MB of
/// JSON and was 840 MB once parsed).
pub const MAX_LINE_VALUES: usize = 200_000;

/// The longest an import's transaction goes on taking lines: once it has lasted this long
/// it commits after the line it is on, and the next begins once other writes have had the
/// lock. Bounds what a write made during an import waits for (a line is never split, and
/// holds at most [`MAX_RECORDS_PER_LINE`] records).
pub const MAX_TRANSACTION: Duration = Duration::from_millis(100);

/// True when a line is a round's header (an object with `round` and `units` and no unit of
/// its own), the first line of a round's export: it holds no labels (the import route
/// stores the round it describes, see `crate::rounds::transfer`).
pub fn is_round_header(object: &Map<String, Value>) -> bool {
    object.contains_key("round") && object.contains_key("units") && !object.contains_key("session_id")
}

/// The members of a line that say whether it is a round header, read without building
/// anything else of it (a line may hold a million values).
#[derive(serde::Deserialize)]
struct HeaderProbe {
    #[serde(default)]
    round: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    units: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    session_id: Option<serde::de::IgnoredAny>,
}

/// [`is_round_header`] of a line's text, probed without building the line.
pub fn is_round_header_line(text: &str) -> bool {
    serde_json::from_str::<HeaderProbe>(text)
        .is_ok_and(|p| p.round.is_some() && p.units.is_some() && p.session_id.is_none())
}

/// Reads one JSONL line into the records it asks to import.
pub fn parse_jsonl_line(text: &str) -> Result<Vec<ImportItem>, Invalid> {
    let value: Value = serde_json::from_str(text).map_err(|e| invalid("line", format!("not JSON: {e}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| invalid("line", "must be a JSON object"))?;
    if is_round_header(object) {
        // The first line of a file is read apart (see `is_round_header_line`).
        return Err(invalid("round", "a round's line must be the first of the file"));
    }
    let session_id = required_string(object, "session_id")?;
    let event_id = required_string(object, "event_id")?;
    let codebook = match object.get("codebook") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(invalid("codebook", "must be a string")),
    };
    let item = |kind| ImportItem {
        codebook: codebook.clone(),
        session_id: session_id.clone(),
        event_id: event_id.clone(),
        kind,
    };
    if object.contains_key("annotations") || object.contains_key("suggestions") {
        return exported_line(object, &item);
    }
    if object.contains_key("model") {
        return Ok(vec![item(suggestion_of(object, "")?)]);
    }
    Ok(vec![item(ImportKind::Set(set_body(object)))])
}

/// The records of a line of our own export.
fn exported_line(
    object: &Map<String, Value>,
    item: &dyn Fn(ImportKind) -> ImportItem,
) -> Result<Vec<ImportItem>, Invalid> {
    let list = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(&[][..]),
        Some(Value::Array(a)) => Ok(a.as_slice()),
        Some(_) => Err(invalid(key, "must be an array")),
    };
    check_records(
        "line",
        "the line",
        list("annotations")?.len() + list("suggestions")?.len(),
    )?;
    let mut items = Vec::new();
    for (i, set) in list("annotations")?.iter().enumerate() {
        let set = set
            .as_object()
            .ok_or_else(|| invalid(format!("annotations[{i}]"), "must be an object"))?;
        items.push(item(ImportKind::Set(set_body(set))));
    }
    for (i, suggestion) in list("suggestions")?.iter().enumerate() {
        let field = format!("suggestions[{i}]");
        let suggestion = suggestion
            .as_object()
            .ok_or_else(|| invalid(field.as_str(), "must be an object"))?;
        items.push(item(suggestion_of(suggestion, &format!("{field}."))?));
    }
    Ok(items)
}

/// Refuses a line (or task: `field`, called `what`) holding `records` records (or at least
/// that many) when they are more than [`MAX_RECORDS_PER_LINE`]; checked before its records
/// are built when their number is known from the parsed line.
pub fn check_records(field: &str, what: &str, records: usize) -> Result<(), Invalid> {
    if records > MAX_RECORDS_PER_LINE {
        return Err(invalid(
            field,
            format!("{what} holds at least {records} records, more than the {MAX_RECORDS_PER_LINE} one line may hold"),
        ));
    }
    Ok(())
}

/// A `PUT` body from a line or an exported set: the set's fields, `status` defaulting to
/// `submitted` (other keys, such as an export's `version`, are left out).
fn set_body(object: &Map<String, Value>) -> Value {
    let mut body = Map::new();
    for key in ["annotator", "labels", "status", "note", "lead_time"] {
        if let Some(v) = object.get(key) {
            body.insert(key.to_owned(), v.clone());
        }
    }
    body.entry("status")
        .or_insert_with(|| Value::String(Status::Submitted.as_str().to_owned()));
    Value::Object(body)
}

fn suggestion_of(object: &Map<String, Value>, prefix: &str) -> Result<ImportKind, Invalid> {
    let model = match object.get("model") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(invalid(format!("{prefix}model"), "must be a string")),
    };
    Ok(ImportKind::Suggestion {
        model,
        score: object.get("score").filter(|s| !s.is_null()).cloned(),
        labels: object.get("labels").cloned().unwrap_or(Value::Null),
    })
}

fn required_string(object: &Map<String, Value>, key: &str) -> Result<String, Invalid> {
    match object.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err(invalid(key, "must be a non-empty string")),
        None => Err(invalid(key, "is required")),
    }
}

/// A record ready for validation, with its unit (`None`: the session or the unit is
/// unknown).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The record.
    pub item: ImportItem,
    /// The unit it is on.
    pub unit: Option<PreparedUnit>,
}

/// The unit a record is on, as validation needs it.
#[derive(Debug, Clone)]
pub struct PreparedUnit {
    /// Its type (the codebook must code it).
    pub unit_type: &'static str,
    /// The text its evidence quotes must occur in, shared by every record of the unit: a
    /// copy each made an import of a thousand lines naming a 4 MB unit hold 4 GB.
    pub text: Arc<str>,
}

/// What happened to one line (or Label Studio task).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineOutcome {
    /// The line's number (1-based), or the task's index (0-based) for Label Studio.
    pub line: usize,
    /// True when every record of the line is stored (or already was).
    pub ok: bool,
    /// Sets and suggestions written.
    pub written: usize,
    /// Records that were already stored as given.
    pub unchanged: usize,
    /// Why the line was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The field at fault, as a path into the line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl LineOutcome {
    /// A refused line.
    pub fn refused(line: usize, why: Invalid) -> LineOutcome {
        LineOutcome {
            line,
            ok: false,
            written: 0,
            unchanged: 0,
            error: Some(why.to_string()),
            field: Some(why.field),
        }
    }
}

/// A validated record.
enum ValidRecord {
    Set(ValidSet),
    Suggestion(ValidSuggestion),
}

/// One line's validated records.
struct ValidLine {
    line: usize,
    records: Vec<ValidRecord>,
}

/// The lines of a batch, validated: those refused, and the records of the others.
pub struct ValidatedBatch {
    refused: Vec<LineOutcome>,
    valid: Vec<ValidLine>,
}

/// Validates every line's records with `validator` (`caller`: who the request is made
/// as), for [`LabelStore::store_batch`]. Pure work on the lines (the quotes are searched in
/// the units' texts): run it off the async workers.
pub fn validate_batch(
    validator: &Validator<'_>,
    lines: Vec<(usize, Result<Vec<Prepared>, Invalid>)>,
    caller: Caller<'_>,
) -> ValidatedBatch {
    let mut refused = Vec::new();
    let mut valid = Vec::new();
    for (line, prepared) in lines {
        match prepared.and_then(|p| validate_line(validator, p, caller)) {
            Ok(records) => valid.push(ValidLine { line, records }),
            Err(why) => refused.push(LineOutcome::refused(line, why)),
        }
    }
    ValidatedBatch { refused, valid }
}

/// The records of one line, validated; the first refused one refuses the line.
fn validate_line(
    validator: &Validator<'_>,
    prepared: Vec<Prepared>,
    caller: Caller<'_>,
) -> Result<Vec<ValidRecord>, Invalid> {
    prepared
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            check_ids(&p.item.session_id, &p.item.event_id).map_err(|e| at_record(e, i))?;
            check_codebook(validator, &p.item).map_err(|e| at_record(e, i))?;
            let unit = p.unit.as_ref().ok_or_else(|| {
                invalid(
                    "event_id",
                    format!(
                        "unit '{}' not found in session '{}'",
                        crate::core::json::utf16::echo(&p.item.event_id),
                        crate::core::json::utf16::echo(&p.item.session_id)
                    ),
                )
            })?;
            let unit = UnitRef {
                unit_type: unit.unit_type,
                text: &unit.text,
            };
            validate_record(validator, &p.item, unit, caller).map_err(|e| at_record(e, i))
        })
        .collect()
}

/// Refuses a record that names a codebook other than the import's.
fn check_codebook(validator: &Validator<'_>, item: &ImportItem) -> Result<(), Invalid> {
    let importing = &validator.codebook().id;
    match &item.codebook {
        Some(named) if named != importing => Err(invalid(
            "codebook",
            format!(
                "the record is of the codebook '{}'; this import is of '{importing}' (import it with ?codebook={})",
                crate::core::json::utf16::echo(named),
                crate::core::json::utf16::echo(named)
            ),
        )),
        _ => Ok(()),
    }
}

/// One record, validated against the text of its unit. A set `caller` may not write is
/// refused naming its `annotator` (the line's answer, where a `PUT` answers 403).
fn validate_record(
    validator: &Validator<'_>,
    item: &ImportItem,
    unit: UnitRef<'_>,
    caller: Caller<'_>,
) -> Result<ValidRecord, Invalid> {
    let (session_id, event_id) = (item.session_id.as_str(), item.event_id.as_str());
    match &item.kind {
        ImportKind::Set(body) => match validator.set(session_id, event_id, body, unit, caller) {
            Ok(set) => Ok(ValidRecord::Set(set)),
            Err(Refusal::Invalid(why)) => Err(why),
            Err(Refusal::Forbidden(why)) => Err(invalid("annotator", why.to_string())),
        },
        ImportKind::Suggestion { model, score, labels } => validator
            .suggestion(session_id, event_id, model, score.as_ref(), labels, unit)
            .map(ValidRecord::Suggestion),
    }
}

impl LabelStore {
    /// Stores the valid lines of `batch`, in transactions of about [`MAX_TRANSACTION`] at
    /// most (a line whole in one), each begun once other writes in progress have had the
    /// lock (see `LabelStore::yield_to_writes`). Appends to `answered` the outcome of each
    /// line of the batch, refused ones included, as its transaction commits. When one
    /// fails ([`LabelError::Busy`]: the store is busy), `answered` holds every line before
    /// the first one not stored, and nothing from that one on is stored.
    pub async fn store_batch(
        &self,
        batch: ValidatedBatch,
        answered: &mut Vec<LineOutcome>,
    ) -> Result<(), LabelError> {
        let mut refused = batch.refused.into_iter().peekable();
        let mut valid = batch.valid.as_slice();
        while let Some(first) = valid.first() {
            answered.extend(std::iter::from_fn(|| refused.next_if(|r| r.line < first.line)));
            self.yield_to_writes().await;
            let stored = store_lines(&self.pool, valid).await?;
            valid = &valid[stored.len()..];
            answered.extend(stored);
        }
        answered.extend(refused);
        Ok(())
    }
}

/// Stores lines from the first of `lines` on in one transaction, until it has lasted
/// [`MAX_TRANSACTION`]; their outcomes.
async fn store_lines(pool: &AnyPool, lines: &[ValidLine]) -> Result<Vec<LineOutcome>, LabelError> {
    let mut tx = pool.begin().await?;
    let began = Instant::now();
    let mut outcomes = Vec::new();
    for line in lines {
        outcomes.push(store_line(&mut tx, line).await?);
        if began.elapsed() >= MAX_TRANSACTION {
            break;
        }
    }
    tx.commit().await?;
    Ok(outcomes)
}

/// Stores the records of one line; its outcome.
async fn store_line(conn: &mut AnyConnection, line: &ValidLine) -> Result<LineOutcome, LabelError> {
    let mut outcome = LineOutcome {
        line: line.line,
        ok: true,
        written: 0,
        unchanged: 0,
        error: None,
        field: None,
    };
    for record in &line.records {
        if store_record(conn, record).await? {
            outcome.written += 1;
        } else {
            outcome.unchanged += 1;
        }
    }
    Ok(outcome)
}

/// Stores one record; false when it was already stored as given.
async fn store_record(conn: &mut AnyConnection, record: &ValidRecord) -> Result<bool, LabelError> {
    match record {
        ValidRecord::Set(set) => {
            let write = SetWrite {
                set,
                precondition: &Precondition::None,
                unchanged: Unchanged::Skip,
            };
            let written = write_set(conn, &write).await?;
            Ok(written.is_some())
        }
        ValidRecord::Suggestion(suggestion) => store_suggestion(conn, suggestion).await,
    }
}

/// Stores a suggestion in place of the model's on the unit; false when it was already
/// stored as given.
async fn store_suggestion(
    conn: &mut AnyConnection,
    suggestion: &ValidSuggestion,
) -> Result<bool, LabelError> {
    let (session_id, event_id, model) = (suggestion.session_id(), suggestion.event_id(), suggestion.model());
    let codebook = suggestion.codebook();
    let score = suggestion.score();
    let labels =
        serde_json::to_string(suggestion.labels()).map_err(|e| LabelError::Corrupt(e.to_string()))?;
    let current = sqlx::query(
        "SELECT score, labels FROM label_suggestions \
         WHERE codebook = $1 AND session_id = $2 AND event_id = $3 AND model = $4",
    )
    .bind(codebook)
    .bind(session_id)
    .bind(event_id)
    .bind(model)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = current {
        use sqlx::Row;
        let stored_score: Option<f64> = row.try_get("score")?;
        let stored_labels: String = row.try_get("labels")?;
        if stored_score == score && stored_labels == labels {
            return Ok(false);
        }
    }
    sqlx::query(
        "INSERT INTO label_suggestions (codebook, session_id, event_id, model, score, labels, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (codebook, session_id, event_id, model) \
         DO UPDATE SET score = excluded.score, labels = excluded.labels, updated_at = excluded.updated_at",
    )
    .bind(codebook)
    .bind(session_id)
    .bind(event_id)
    .bind(model)
    .bind(score)
    .bind(labels)
    .bind(now())
    .execute(&mut *conn)
    .await?;
    Ok(true)
}

/// `why` for the `i`-th record of a line of several (an export line's).
fn at_record(why: Invalid, i: usize) -> Invalid {
    if i == 0 {
        return why;
    }
    Invalid {
        message: format!("{} (record {})", why.message, i + 1),
        field: why.field,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_is_a_set_a_suggestion_or_an_export_line() {
        let set =
            parse_jsonl_line(r#"{"session_id":"s","event_id":"U:1","annotator":"a","labels":[]}"#).unwrap();
        assert_eq!(
            set[0].kind,
            ImportKind::Set(json!({"annotator":"a","labels":[],"status":"submitted"}))
        );
        let suggestion =
            parse_jsonl_line(r#"{"session_id":"s","event_id":"U:1","model":"m","score":0.5,"labels":[]}"#)
                .unwrap();
        assert_eq!(
            suggestion[0].kind,
            ImportKind::Suggestion {
                model: "m".into(),
                score: Some(json!(0.5)),
                labels: json!([])
            }
        );
        let exported = parse_jsonl_line(
            r#"{"session_id":"s","event_id":"U:1","unit":null,"annotations":[{"annotator":"a","status":"draft","labels":[],"version":3}],"suggestions":[{"model":"m","labels":[]}]}"#,
        )
        .unwrap();
        assert_eq!(exported.len(), 2);
        assert_eq!(
            exported[0].kind,
            ImportKind::Set(json!({"annotator":"a","labels":[],"status":"draft"}))
        );
    }

    #[test]
    fn unreadable_lines_name_the_field() {
        for (line, field) in [
            ("{", "line"),
            ("[]", "line"),
            (r#"{"event_id":"U:1"}"#, "session_id"),
            (r#"{"session_id":"s","event_id":7}"#, "event_id"),
            (
                r#"{"session_id":"s","event_id":"e","annotations":{}}"#,
                "annotations",
            ),
            (r#"{"session_id":"s","event_id":"e","model":1}"#, "model"),
        ] {
            assert_eq!(parse_jsonl_line(line).unwrap_err().field, field, "{line}");
        }
    }
}
