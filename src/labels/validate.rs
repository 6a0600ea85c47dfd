//! Validation of label writes, for the API and the import alike: a body (a `PUT`'s, an
//! imported line's), the codebook, the unit's text and who writes in; a [`ValidSet`],
//! [`ValidSuggestion`] or [`ValidRemoval`] out, the only writes the label store takes, or a
//! [`Refusal`] saying what is wrong (an [`Invalid`] naming the field, or [`Forbidden`]),
//! in the words clients read (a `PUT`'s 400 or 403, an imported line's `error`). Pure: no
//! I/O.

use serde_json::{Map, Value};

use super::access::{Caller, Forbidden};
use super::codebook::{Codebook, FieldType, Label};
use super::model::{Evidence, LabelRecord, SetKey, Status};

/// Most labels in one set.
pub const MAX_LABELS: usize = 64;
/// Longest evidence quote, in characters.
pub const MAX_QUOTE_CHARS: usize = 2_000;
/// Longest evidence cue, in characters.
pub const MAX_CUE_CHARS: usize = 500;
/// Longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 10_000;
/// Longest annotator name, in characters (ASCII letters, digits, `.`, `_`, `-`, `@`).
pub const MAX_ANNOTATOR_CHARS: usize = 100;
/// Longest string in an output field (alone or in a list), in characters.
pub const MAX_FIELD_STRING_CHARS: usize = 2_000;
/// Most items of a list output field.
pub const MAX_FIELD_LIST_ITEMS: usize = 64;
/// Longest lead time, in seconds (a week).
pub const MAX_LEAD_TIME_SECS: f64 = 604_800.0;
/// Longest model name, in characters (the annotator name's alphabet, plus `:` and `/`).
pub const MAX_MODEL_CHARS: usize = 200;

/// Why a write is refused: the field (`labels[1].confidence`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Invalid {
    /// The field, as a path into the body.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The refusal of `field`, saying what is wrong with it.
pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Why a write is refused before it reaches the label store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Something of it is invalid (the field named).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The caller may not make it.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
}

/// Refuses a text holding NUL (U+0000): PostgreSQL's text cannot store it, and a label
/// store must take the same writes on both backends.
pub fn check_no_nul(field: &str, text: &str) -> Result<(), Invalid> {
    if memchr::memchr(0, text.as_bytes()).is_some() {
        return Err(invalid(field, "must not hold the NUL character (U+0000)"));
    }
    Ok(())
}

/// Refuses a session or unit id holding NUL, naming the field: no stored set has one
/// (writes refuse it), and PostgreSQL would fail a query holding it.
pub fn check_ids(session_id: &str, event_id: &str) -> Result<(), Invalid> {
    check_no_nul("session_id", session_id)?;
    check_no_nul("event_id", event_id)
}

/// Refuses a set key holding NUL, naming the field (see [`check_ids`]).
pub fn check_key(key: SetKey<'_>) -> Result<(), Invalid> {
    check_ids(key.session_id, key.event_id)?;
    check_no_nul("annotator", key.annotator)
}

/// Checks an annotator name: 1 to [`MAX_ANNOTATOR_CHARS`] ASCII letters, digits, `.`, `_`,
/// `-` or `@`.
pub fn check_annotator(field: &str, name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > MAX_ANNOTATOR_CHARS {
        return Err(invalid(
            field,
            format!("must be 1 to {MAX_ANNOTATOR_CHARS} characters"),
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'))
    {
        return Err(invalid(
            field,
            "may hold only ASCII letters, digits, '.', '_', '-' and '@'",
        ));
    }
    Ok(())
}

/// Validates the `labels` of a set or a suggestion: an array of at most [`MAX_LABELS`]
/// codebook records, each id once, every quote in `unit_text`.
pub fn validate_labels(
    value: Option<&Value>,
    codebook: &Codebook,
    unit_text: &str,
) -> Result<Vec<LabelRecord>, Invalid> {
    let items = match value {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid("labels", "must be an array")),
        None => return Err(invalid("labels", "is required")),
    };
    if items.len() > MAX_LABELS {
        return Err(invalid("labels", format!("holds at most {MAX_LABELS} labels")));
    }
    let mut labels: Vec<LabelRecord> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("labels[{i}]");
        let record = label_record(&field, item, codebook, unit_text)?;
        if labels.iter().any(|l| l.id == record.id) {
            return Err(invalid(
                format!("{field}.id"),
                format!("label {} appears twice in the set", record.id),
            ));
        }
        labels.push(record);
    }
    Ok(labels)
}

/// A set body checked against the codebook and the unit's text: what one annotator's set
/// on the unit becomes. Made only by [`validate_set`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewSet {
    annotator: String,
    labels: Vec<LabelRecord>,
    status: Status,
    note: Option<String>,
    lead_time_ms: Option<i64>,
}

impl NewSet {
    /// Whose set it is.
    pub fn annotator(&self) -> &str {
        &self.annotator
    }

    /// The labels (ids distinct, quotes in the unit's text).
    pub fn labels(&self) -> &[LabelRecord] {
        &self.labels
    }

    /// Where it stands.
    pub fn status(&self) -> Status {
        self.status
    }

    /// A free note.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Time spent, in milliseconds.
    pub fn lead_time_ms(&self) -> Option<i64> {
        self.lead_time_ms
    }
}

/// Validates a `PUT` body against the codebook and the unit's text.
pub fn validate_set(body: &Value, codebook: &Codebook, unit_text: &str) -> Result<NewSet, Invalid> {
    let object = body
        .as_object()
        .ok_or_else(|| invalid("body", "must be a JSON object"))?;
    only_keys(
        object,
        "",
        &["annotator", "labels", "status", "note", "lead_time"],
    )?;
    let annotator = match object.get("annotator") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid("annotator", "must be a string")),
        None => return Err(invalid("annotator", "is required")),
    };
    check_annotator("annotator", &annotator)?;
    let status = match object.get("status") {
        Some(Value::String(s)) => Status::parse(s).ok_or_else(|| {
            invalid(
                "status",
                "must be one of: draft, submitted, discarded, adjudicated",
            )
        })?,
        Some(_) => return Err(invalid("status", "must be a string")),
        None => return Err(invalid("status", "is required")),
    };
    let labels = validate_labels(object.get("labels"), codebook, unit_text)?;
    let note = optional_string(object, "note", "note", MAX_NOTE_CHARS)?;
    let lead_time_ms = match object.get("lead_time") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(s) if (0.0..=MAX_LEAD_TIME_SECS).contains(&s) => Some((s * 1000.0).round() as i64),
            _ => {
                return Err(invalid(
                    "lead_time",
                    format!("must be a number of seconds from 0 to {MAX_LEAD_TIME_SECS}"),
                ))
            }
        },
    };
    Ok(NewSet {
        annotator,
        labels,
        status,
        note,
        lead_time_ms,
    })
}

/// Refuses keys of `object` outside `allowed`.
fn only_keys(object: &Map<String, Value>, prefix: &str, allowed: &[&str]) -> Result<(), Invalid> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(invalid(
            format!("{prefix}{}", crate::core::json::utf16::echo(key)),
            format!("is not a known field (known: {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

/// An optional string member, at most `max` characters (`null` reads as absent).
fn optional_string(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
    max: usize,
) -> Result<Option<String>, Invalid> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => {
            check_no_nul(field, s).map(|()| Some(s.clone()))
        }
        Some(Value::String(_)) => Err(invalid(field, format!("must be at most {max} characters"))),
        Some(_) => Err(invalid(field, "must be a string")),
    }
}

/// One label record of the set.
fn label_record(
    field: &str,
    item: &Value,
    codebook: &Codebook,
    unit_text: &str,
) -> Result<LabelRecord, Invalid> {
    let object = item
        .as_object()
        .ok_or_else(|| invalid(field, "must be an object"))?;
    only_keys(
        object,
        &format!("{field}."),
        &["id", "confidence", "evidence", "fields"],
    )?;
    let id = match object.get("id") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid(format!("{field}.id"), "must be a string")),
        None => return Err(invalid(format!("{field}.id"), "is required")),
    };
    let label = codebook.label(id).ok_or_else(|| {
        invalid(
            format!("{field}.id"),
            format!(
                "{} is not a label of the codebook",
                crate::core::json::utf16::echo(id)
            ),
        )
    })?;
    let confidence = match object.get("confidence") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(c) if (0.0..=1.0).contains(&c) => Some(c),
            _ => {
                return Err(invalid(
                    format!("{field}.confidence"),
                    "must be a number from 0 to 1",
                ))
            }
        },
    };
    let evidence = match object.get("evidence") {
        None | Some(Value::Null) => None,
        Some(v) => Some(evidence(&format!("{field}.evidence"), v, unit_text)?),
    };
    let fields = match object.get("fields") {
        None | Some(Value::Null) => None,
        Some(Value::Object(fields)) => Some(output_fields(&format!("{field}.fields"), fields, label)?),
        Some(_) => return Err(invalid(format!("{field}.fields"), "must be an object")),
    };
    if fields.is_none() {
        if let Some(required) = label.output_fields.iter().find(|f| f.required) {
            return Err(invalid(
                format!("{field}.fields.{}", required.name),
                format!("is required by label {}", label.id),
            ));
        }
    }
    Ok(LabelRecord {
        id: id.clone(),
        confidence,
        evidence,
        fields,
    })
}

/// A label's evidence: a quote that occurs in the unit's text, a cue.
fn evidence(field: &str, value: &Value, unit_text: &str) -> Result<Evidence, Invalid> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid(field, "must be an object"))?;
    only_keys(object, &format!("{field}."), &["quote", "cue"])?;
    let quote = optional_string(object, "quote", &format!("{field}.quote"), MAX_QUOTE_CHARS)?;
    if let Some(quote) = &quote {
        if quote.is_empty() {
            return Err(invalid(format!("{field}.quote"), "must not be empty"));
        }
        if !unit_text.contains(quote.as_str()) {
            return Err(invalid(
                format!("{field}.quote"),
                "does not occur in the unit's text (quotes are verbatim)",
            ));
        }
    }
    let cue = optional_string(object, "cue", &format!("{field}.cue"), MAX_CUE_CHARS)?;
    Ok(Evidence { quote, cue })
}

/// A label's output fields: known names, declared types, bounded sizes, required present.
fn output_fields(
    field: &str,
    fields: &Map<String, Value>,
    label: &Label,
) -> Result<Map<String, Value>, Invalid> {
    for (name, value) in fields {
        let path = format!("{field}.{}", crate::core::json::utf16::echo(name));
        let declared = label.field(name).ok_or_else(|| {
            invalid(
                path.clone(),
                format!("is not an output field of label {}", label.id),
            )
        })?;
        declared.check(value).map_err(|m| invalid(path.clone(), m))?;
        check_field_size(&path, declared.field_type, value)?;
    }
    if let Some(missing) = label
        .output_fields
        .iter()
        .find(|f| f.required && !fields.contains_key(&f.name))
    {
        return Err(invalid(
            format!("{field}.{}", missing.name),
            format!("is required by label {}", label.id),
        ));
    }
    Ok(fields.clone())
}

/// Bounds a field's strings and lists, and refuses NUL in their strings.
fn check_field_size(path: &str, field_type: FieldType, value: &Value) -> Result<(), Invalid> {
    let values = match value {
        Value::Array(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    for s in values.iter().filter_map(Value::as_str) {
        check_no_nul(path, s)?;
    }
    let too_long = |s: &Value| {
        s.as_str()
            .is_some_and(|s| s.chars().count() > MAX_FIELD_STRING_CHARS)
    };
    match (field_type, value) {
        (FieldType::StringList, Value::Array(items)) if items.len() > MAX_FIELD_LIST_ITEMS => Err(invalid(
            path,
            format!("holds at most {MAX_FIELD_LIST_ITEMS} items"),
        )),
        (FieldType::StringList, Value::Array(items)) if items.iter().any(too_long) => Err(invalid(
            path,
            format!("items must be at most {MAX_FIELD_STRING_CHARS} characters"),
        )),
        (_, v) if too_long(v) => Err(invalid(
            path,
            format!("must be at most {MAX_FIELD_STRING_CHARS} characters"),
        )),
        _ => Ok(()),
    }
}

/// Checks a model name: 1 to [`MAX_MODEL_CHARS`] of the annotator alphabet plus `:` and `/`.
pub fn check_model(model: &str) -> Result<(), Invalid> {
    if model.is_empty() || model.len() > MAX_MODEL_CHARS {
        return Err(invalid(
            "model",
            format!("must be 1 to {MAX_MODEL_CHARS} characters"),
        ));
    }
    if !model
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@' | b':' | b'/'))
    {
        return Err(invalid(
            "model",
            "may hold only ASCII letters, digits, '.', '_', '-', '@', ':' and '/'",
        ));
    }
    Ok(())
}

/// A model's score for a suggestion: a number in [0, 1] (`None`: none given).
fn check_score(score: Option<&Value>) -> Result<Option<f64>, Invalid> {
    score
        .map(|v| {
            v.as_f64()
                .filter(|s| (0.0..=1.0).contains(s))
                .ok_or_else(|| invalid("score", "must be a number from 0 to 1"))
        })
        .transpose()
}

/// The unit a write is on, as the session has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitRef<'a> {
    /// `user_turn`, `assistant_turn` or `system_turn`: the codebook must code it.
    pub unit_type: &'a str,
    /// Its text: evidence quotes must occur in it.
    pub text: &'a str,
}

/// A write of one annotator's set on one unit, ready to store: the ids free of NUL, the
/// body checked against the codebook and the unit's type and text, the writer allowed to
/// write it. Made only by [`Validator::set`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSet {
    codebook: String,
    codebook_version: String,
    session_id: String,
    event_id: String,
    set: NewSet,
    actor: String,
}

impl ValidSet {
    /// The set written.
    pub fn key(&self) -> SetKey<'_> {
        SetKey {
            codebook: &self.codebook,
            session_id: &self.session_id,
            event_id: &self.event_id,
            annotator: &self.set.annotator,
        }
    }

    /// The version of the codebook it was checked against.
    pub fn codebook_version(&self) -> &str {
        &self.codebook_version
    }

    /// What the set becomes.
    pub fn set(&self) -> &NewSet {
        &self.set
    }

    /// Who writes it, as history records them (see [`Caller::actor`]).
    pub fn actor(&self) -> &str {
        &self.actor
    }
}

/// A removal of one annotator's set on one unit, ready to make: the key free of NUL, the
/// caller allowed to act for the annotator. Made only by [`Validator::removal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidRemoval {
    codebook: String,
    session_id: String,
    event_id: String,
    annotator: String,
    actor: String,
}

impl ValidRemoval {
    /// The set removed.
    pub fn key(&self) -> SetKey<'_> {
        SetKey {
            codebook: &self.codebook,
            session_id: &self.session_id,
            event_id: &self.event_id,
            annotator: &self.annotator,
        }
    }

    /// Who removes it, as history records them (see [`Caller::actor`]).
    pub fn actor(&self) -> &str {
        &self.actor
    }
}

/// A model's suggestion on one unit, ready to store: the ids free of NUL, the model's
/// name and score checked, the labels checked like a set's. Made only by
/// [`Validator::suggestion`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSuggestion {
    codebook: String,
    session_id: String,
    event_id: String,
    model: String,
    score: Option<f64>,
    labels: Vec<LabelRecord>,
}

impl ValidSuggestion {
    /// The codebook its labels are of.
    pub fn codebook(&self) -> &str {
        &self.codebook
    }

    /// The session.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The unit.
    pub fn event_id(&self) -> &str {
        &self.event_id
    }

    /// The model that suggested the labels.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The model's score for the whole suggestion, if it gave one.
    pub fn score(&self) -> Option<f64> {
        self.score
    }

    /// The suggested labels.
    pub fn labels(&self) -> &[LabelRecord] {
        &self.labels
    }
}

/// What label writes are checked against: the codebook, and the reviewers (the only
/// annotators whose sets may be adjudicated, and who may act for anyone).
#[derive(Debug, Clone, Copy)]
pub struct Validator<'a> {
    codebook: &'a Codebook,
    reviewers: &'a [String],
}

impl<'a> Validator<'a> {
    /// Checks writes against `codebook`, with `reviewers` the configured reviewers.
    pub fn new(codebook: &'a Codebook, reviewers: &'a [String]) -> Validator<'a> {
        Validator { codebook, reviewers }
    }

    /// The codebook writes are checked against.
    pub fn codebook(&self) -> &'a Codebook {
        self.codebook
    }

    /// Checks a set `body` (a `PUT` body) written by `caller` on unit `event_id` of session
    /// `session_id`: the ids, that the codebook codes the unit's type, then the body against
    /// the codebook and the unit's text, then whether `caller` may write it (see
    /// [`Validator::may_write`]).
    pub fn set(
        &self,
        session_id: &str,
        event_id: &str,
        body: &Value,
        unit: UnitRef<'_>,
        caller: Caller<'_>,
    ) -> Result<ValidSet, Refusal> {
        check_ids(session_id, event_id)?;
        self.check_covered(event_id, unit)?;
        let set = validate_set(body, self.codebook, unit.text)?;
        self.may_write(caller, &set)?;
        Ok(ValidSet {
            codebook: self.codebook.id.clone(),
            codebook_version: self.codebook.version.clone(),
            session_id: session_id.to_owned(),
            event_id: event_id.to_owned(),
            actor: caller.actor(&set.annotator).to_owned(),
            set,
        })
    }

    /// Checks the removal of the set at `key` by `caller`: the key, then whether `caller`
    /// may act for its annotator.
    pub fn removal(&self, key: SetKey<'_>, caller: Caller<'_>) -> Result<ValidRemoval, Refusal> {
        check_key(key)?;
        caller.may_act_for(key.annotator, self.reviewers)?;
        Ok(ValidRemoval {
            codebook: self.codebook.id.clone(),
            session_id: key.session_id.to_owned(),
            event_id: key.event_id.to_owned(),
            annotator: key.annotator.to_owned(),
            actor: caller.actor(key.annotator).to_owned(),
        })
    }

    /// Checks `model`'s suggestion of `labels` (with its `score`, if given) on unit
    /// `event_id` of session `session_id`: the ids, that the codebook codes the unit's
    /// type, the model's name, the score, then the labels like a set's.
    pub fn suggestion(
        &self,
        session_id: &str,
        event_id: &str,
        model: &str,
        score: Option<&Value>,
        labels: &Value,
        unit: UnitRef<'_>,
    ) -> Result<ValidSuggestion, Invalid> {
        check_ids(session_id, event_id)?;
        self.check_covered(event_id, unit)?;
        check_model(model)?;
        let score = check_score(score)?;
        let labels = validate_labels(Some(labels), self.codebook, unit.text)?;
        Ok(ValidSuggestion {
            codebook: self.codebook.id.clone(),
            session_id: session_id.to_owned(),
            event_id: event_id.to_owned(),
            model: model.to_owned(),
            score,
            labels,
        })
    }

    /// Refuses a write on a unit of a type the codebook does not code (a system turn, under
    /// a codebook of user and assistant turns).
    pub fn check_covered(&self, event_id: &str, unit: UnitRef<'_>) -> Result<(), Invalid> {
        if self.codebook.covers(unit.unit_type) {
            return Ok(());
        }
        let coded = self.codebook.unit_types.as_deref().unwrap_or_default().join(", ");
        Err(Invalid {
            field: "event_id".to_owned(),
            message: format!(
                "unit '{}' is a {}; the codebook {} codes only {coded}",
                crate::core::json::utf16::echo(event_id),
                unit.unit_type,
                self.codebook.id
            ),
        })
    }

    /// Refuses a set `caller` may not write: one of an annotator it may not act for (see
    /// [`Caller::may_act_for`]), or an adjudicated set of someone who is not a reviewer.
    pub fn may_write(&self, caller: Caller<'_>, set: &NewSet) -> Result<(), Forbidden> {
        caller.may_act_for(&set.annotator, self.reviewers)?;
        if set.status == Status::Adjudicated && !self.reviewers.contains(&set.annotator) {
            return Err(Forbidden::new(format!(
                "only a reviewer may write an adjudicated set; {} is not one",
                set.annotator
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CODEBOOK: &str = r#"
labels:
  - id: "PLAN"
    name: "Plan"
    family: "f"
    definition: "d"
    output_fields:
      required:
        steps: { type: "list[string]" }
      optional:
        state: { type: "string", enum: ["open", "done"] }
        count: { type: "integer" }
  - id: "ACT"
    name: "Act"
    family: "f"
    definition: "d"
"#;

    fn check(body: serde_json::Value) -> Result<NewSet, Invalid> {
        let codebook = Codebook::parse("test.yaml", CODEBOOK).unwrap();
        validate_set(&body, &codebook, "We split the work into two steps.")
    }

    fn field_of(body: serde_json::Value) -> String {
        check(body).expect_err("refused").field
    }

    fn with_label(label: serde_json::Value) -> serde_json::Value {
        json!({"annotator": "a@b.c", "status": "submitted", "labels": [{"id": "ACT"}, label]})
    }

    #[test]
    fn a_valid_set_reads_whole() {
        let set = check(json!({
            "annotator": "a@b.c", "status": "submitted", "note": null, "lead_time": 1.25,
            "labels": [{"id": "PLAN", "confidence": 1, "evidence": {"quote": "two steps", "cue": "split"},
                        "fields": {"steps": ["a", "b"], "state": "open", "count": 2}}]
        }))
        .unwrap();
        assert_eq!(set.annotator, "a@b.c");
        assert_eq!(set.status, Status::Submitted);
        assert_eq!(set.lead_time_ms, Some(1250));
        assert_eq!(set.note, None);
        assert_eq!(set.labels[0].confidence, Some(1.0));
        assert_eq!(
            set.labels[0].evidence.as_ref().unwrap().quote.as_deref(),
            Some("two steps")
        );
    }

    #[test]
    fn fields_follow_the_codebook() {
        let plan = |fields: serde_json::Value| with_label(json!({"id": "PLAN", "fields": fields}));
        assert_eq!(
            field_of(with_label(json!({"id": "PLAN"}))),
            "labels[1].fields.steps"
        );
        assert_eq!(field_of(plan(json!({"state": "open"}))), "labels[1].fields.steps");
        assert_eq!(field_of(plan(json!({"steps": [1]}))), "labels[1].fields.steps");
        assert_eq!(
            field_of(plan(json!({"steps": [], "state": "shut"}))),
            "labels[1].fields.state"
        );
        assert_eq!(
            field_of(plan(json!({"steps": [], "count": 1.5}))),
            "labels[1].fields.count"
        );
        assert_eq!(
            field_of(plan(json!({"steps": [], "other": 1}))),
            "labels[1].fields.other"
        );
        let long = vec!["x"; MAX_FIELD_LIST_ITEMS + 1];
        assert_eq!(field_of(plan(json!({ "steps": long }))), "labels[1].fields.steps");
        let long = "x".repeat(MAX_FIELD_STRING_CHARS + 1);
        assert_eq!(
            field_of(plan(json!({ "steps": [long] }))),
            "labels[1].fields.steps"
        );
        assert!(check(plan(json!({"steps": []}))).is_ok());
    }

    #[test]
    fn records_and_bounds_name_their_field() {
        assert_eq!(field_of(with_label(json!({"id": "ACT"}))), "labels[1].id");
        assert_eq!(field_of(with_label(json!({"id": "NOPE"}))), "labels[1].id");
        assert_eq!(
            field_of(with_label(json!({"id": "PLAN", "confidence": -0.1}))),
            "labels[1].confidence"
        );
        let ungrounded = json!({"id": "ACT", "evidence": {"quote": "three steps"}});
        assert_eq!(
            field_of(json!({"annotator": "a", "status": "draft", "labels": [ungrounded]})),
            "labels[0].evidence.quote"
        );
        let long_cue = json!({"id": "ACT", "evidence": {"cue": "c".repeat(MAX_CUE_CHARS + 1)}});
        assert_eq!(
            field_of(json!({"annotator": "a", "status": "draft", "labels": [long_cue]})),
            "labels[0].evidence.cue"
        );
        assert_eq!(field_of(json!("set")), "body");
        assert_eq!(
            field_of(json!({"annotator": "a", "status": "draft", "labels": [], "lead_time": 604_801})),
            "lead_time"
        );
        assert!(check_annotator("a", &"x".repeat(MAX_ANNOTATOR_CHARS)).is_ok());
        assert!(check_annotator("a", "ünï").is_err());
    }

    /// Who may write what is checked with the body: a set of another annotator than a
    /// named key's, or an adjudicated set of someone not a reviewer, is forbidden; history
    /// names the key's annotator as the writer.
    #[test]
    fn a_set_is_checked_for_its_writer() {
        let codebook = Codebook::parse("test.yaml", CODEBOOK).unwrap();
        let reviewers = vec!["lead".to_owned()];
        let validator = Validator::new(&codebook, &reviewers);
        let body =
            |annotator: &str, status: &str| json!({"annotator": annotator, "status": status, "labels": []});
        let unit = UnitRef {
            unit_type: "user_turn",
            text: "text",
        };
        let put = |caller, body: &Value| validator.set("s", "U:1", body, unit, caller);

        let own = put(Caller::Named("alice"), &body("alice", "submitted")).unwrap();
        assert_eq!(
            own.key(),
            SetKey {
                codebook: "test",
                session_id: "s",
                event_id: "U:1",
                annotator: "alice"
            }
        );
        assert_eq!((own.actor(), own.set().status()), ("alice", Status::Submitted));
        let reviewed = put(Caller::Named("lead"), &body("alice", "submitted")).unwrap();
        assert_eq!(reviewed.actor(), "lead");
        assert!(put(Caller::Anyone, &body("lead", "adjudicated")).is_ok());

        for (caller, annotator) in [(Caller::Named("alice"), "bob"), (Caller::Anyone, "alice")] {
            let refused = put(caller, &body(annotator, "adjudicated")).unwrap_err();
            assert!(matches!(refused, Refusal::Forbidden(_)), "{refused}");
        }
        let refused = validator
            .set("s", "U:\0", &body("alice", "draft"), unit, Caller::Anyone)
            .unwrap_err();
        assert!(matches!(refused, Refusal::Invalid(Invalid { ref field, .. }) if field == "event_id"));
    }

    #[test]
    fn a_removal_and_a_suggestion_are_checked() {
        let codebook = Codebook::parse("test.yaml", CODEBOOK).unwrap();
        let validator = Validator::new(&codebook, &[]);
        let key = |annotator| SetKey {
            codebook: "test",
            session_id: "s",
            event_id: "U:1",
            annotator,
        };
        let removal = validator.removal(key("alice"), Caller::Anyone).unwrap();
        assert_eq!((removal.key(), removal.actor()), (key("alice"), "alice"));
        let refused = validator.removal(key("bob"), Caller::Named("alice")).unwrap_err();
        assert!(matches!(refused, Refusal::Forbidden(_)));
        let refused = validator.removal(key("a\0"), Caller::Anyone).unwrap_err();
        assert!(matches!(refused, Refusal::Invalid(Invalid { ref field, .. }) if field == "annotator"));

        let labels = json!([{"id": "ACT"}]);
        let unit = UnitRef {
            unit_type: "assistant_turn",
            text: "",
        };
        let suggest = |model: &str, score: Option<&Value>| {
            validator.suggestion("s", "U:1", model, score, &labels, unit)
        };
        let suggestion = suggest("m:1", Some(&json!(0.5))).unwrap();
        assert_eq!((suggestion.model(), suggestion.score()), ("m:1", Some(0.5)));
        assert_eq!(suggestion.labels()[0].id, "ACT");
        assert_eq!(suggest("m", Some(&json!(2))).unwrap_err().field, "score");
        assert_eq!(suggest("a b", None).unwrap_err().field, "model");
    }

    #[test]
    fn model_names_take_versions() {
        assert!(check_model("gpt-4o:2024-08-06").is_ok());
        assert!(check_model("org/model").is_ok());
        assert!(check_model("").is_err());
        assert!(check_model("a b").is_err());
        assert!(check_model(&"m".repeat(201)).is_err());
    }
}
