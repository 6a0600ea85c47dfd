//! Our labels to and from Label Studio (checked against label-studio 1.23.2). Pure: JSON
//! in, JSON or text out, no I/O.
//!
//! - [`label_config`]: the labeling config XML of a codebook: a `Text` named `text`, a
//!   multiple `Choices` named `labels` (one `Choice` per label, grouped by family) and a
//!   `Labels` named `evidence` (one `Label` per label, for evidence spans).
//! - [`task`]: one Label Studio task of an exported unit, with its sets as annotations and
//!   its suggestions as predictions.
//! - [`parse_export`]: Label Studio's JSON export (quick or snapshot) back into
//!   [`ImportItem`]s: `PUT`-shaped set bodies and suggestions.
//!
//! # How a set travels
//!
//! Label Studio keeps result items verbatim but drops extra keys of an annotation, and makes
//! the importing user its `completed_by`. So everything of ours rides in the result items:
//! each label is one `choices` item (`value.choices: [id]`, `score`: the confidence) whose
//! `meta` holds the annotator, the status, the set's version and note, the label's fields
//! and cue. A label with an evidence quote also gets a `labels` span on `evidence` at the
//! quote's first occurrence in the text. A set with no labels is one `choices` item with
//! `value.choices: []` and the meta, so the annotator still travels. Drafts are not exported
//! (Label Studio drops drafts); `was_cancelled` is `status == discarded` and `ground_truth`
//! is `status == adjudicated`, always given (a missing one defaults to true).
//!
//! Span offsets are characters, counted as Unicode scalar values (what Python's `len` and
//! Label Studio's checks on BMP text count). Label Studio's browser counts UTF-16 units:
//! a quote after a non-BMP character (an emoji) is placed by scalar values, which Label
//! Studio has not been measured on. A quote that does not occur in the text (an orphaned
//! unit's text is empty) gets no span: it travels as `meta.quote` of the label's item.
//!
//! An annotation made in Label Studio itself has no `meta.annotator`: its annotator is
//! `completed_by.email` (snapshot export) or `labelstudio-{id}` for a bare member id (quick
//! export): a `-`, not a `:`, because annotator names allow only letters, digits, `.`, `_`,
//! `-` and `@`.

use foldhash::HashMap;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::codebook::{Codebook, Label};
use super::model::{ExportedUnit, ImportItem, ImportKind, LabelRecord, LabelSet, Status, Suggestion};

/// The `Text` object tag's name (and the task data key holding the unit's text).
pub const TEXT: &str = "text";
/// The `Choices` control tag's name: one choice per label.
pub const CHOICES: &str = "labels";
/// The `Labels` control tag's name: evidence spans.
pub const EVIDENCE: &str = "evidence";
/// Longest definition shown in a choice's hint, in characters (longer ones end with `…`).
pub const HINT_DEFINITION_CHARS: usize = 160;

// ---------------------------------------------------------------------------------------
// The labeling config
// ---------------------------------------------------------------------------------------

/// The Label Studio labeling config of `codebook`: a `<View>` with the unit's text, a
/// multiple `<Choices name="labels">` with one `<Choice value="{id}" hint="{name}:
/// {definition}">` per label under a `<Header>` per family, and a `<Labels name="evidence">`
/// with one `<Label value="{id}">` per label. Every attribute value is XML-escaped.
pub fn label_config(codebook: &Codebook) -> String {
    let mut xml = String::from("<View>\n");
    xml.push_str(&format!("  <Text name=\"{TEXT}\" value=\"${TEXT}\"/>\n"));
    xml.push_str(&format!(
        "  <Choices name=\"{CHOICES}\" toName=\"{TEXT}\" choice=\"multiple\" showInLine=\"false\">\n"
    ));
    for family in codebook.families() {
        xml.push_str(&format!("    <Header value=\"{}\"/>\n", escape(&family.id)));
        for label in family.labels.iter().filter_map(|id| codebook.label(id)) {
            xml.push_str(&format!(
                "    <Choice value=\"{}\" hint=\"{}\"/>\n",
                escape(&label.id),
                escape(&hint(label))
            ));
        }
    }
    xml.push_str("  </Choices>\n");
    xml.push_str(&format!("  <Labels name=\"{EVIDENCE}\" toName=\"{TEXT}\">\n"));
    for label in &codebook.labels {
        xml.push_str(&format!("    <Label value=\"{}\"/>\n", escape(&label.id)));
    }
    xml.push_str("  </Labels>\n</View>\n");
    xml
}

/// A choice's hint: the label's name and its definition, cut to [`HINT_DEFINITION_CHARS`].
fn hint(label: &Label) -> String {
    let definition = label.definition.split_whitespace().collect::<Vec<_>>().join(" ");
    let short = if definition.chars().count() > HINT_DEFINITION_CHARS {
        let cut: String = definition.chars().take(HINT_DEFINITION_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    } else {
        definition
    };
    format!("{}: {}", label.name, short)
}

/// `s` as an XML attribute value (double-quoted); whitespace other than a space is written
/// as a character reference so that attribute normalisation keeps it.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Units to tasks
// ---------------------------------------------------------------------------------------

/// One Label Studio task of `unit`: `data` (`text`, `session_id`, `event_id`,
/// `unit_type`), `meta` (`orphaned: true` when the unit is orphaned), one annotation per
/// submitted, adjudicated or discarded set and one prediction per suggestion (see the
/// module doc for the shape).
pub fn task(unit: &ExportedUnit) -> Value {
    let mut data = Map::new();
    data.insert(TEXT.into(), Value::from(unit.text.as_str()));
    data.insert("session_id".into(), Value::from(unit.session_id.as_str()));
    data.insert("event_id".into(), Value::from(unit.event_id.as_str()));
    if let Some(unit_type) = &unit.unit_type {
        data.insert("unit_type".into(), Value::from(unit_type.as_str()));
    }
    let mut meta = Map::new();
    if unit.orphaned {
        meta.insert("orphaned".into(), Value::Bool(true));
    }
    let annotations: Vec<Value> = exported_sets(unit)
        .into_iter()
        .map(|set| annotation(unit, set))
        .collect();
    let predictions: Vec<Value> = unit.suggestions.iter().map(|s| prediction(unit, s)).collect();
    json!({
        "data": data,
        "meta": meta,
        "annotations": annotations,
        "predictions": predictions,
    })
}

/// The sets exported as annotations: every non-draft set, and the adjudicated set in force
/// when `annotations` does not already hold it.
fn exported_sets(unit: &ExportedUnit) -> Vec<&LabelSet> {
    let mut sets: Vec<&LabelSet> = unit
        .annotations
        .iter()
        .filter(|s| s.status != Status::Draft)
        .collect();
    if let Some(adjudicated) = &unit.adjudicated {
        let present = sets
            .iter()
            .any(|s| s.annotator == adjudicated.annotator && s.version == adjudicated.version);
        if !present && adjudicated.status != Status::Draft {
            sets.push(adjudicated);
        }
    }
    sets
}

/// One annotation: the set's labels as result items, its lead time and status flags.
fn annotation(unit: &ExportedUnit, set: &LabelSet) -> Value {
    let mut meta = Map::new();
    meta.insert("annotator".into(), Value::from(set.annotator.as_str()));
    meta.insert("status".into(), Value::from(set.status.as_str()));
    if let Some(note) = &set.note {
        meta.insert("note".into(), Value::from(note.as_str()));
    }
    meta.insert("version".into(), Value::from(set.version));
    let owner = format!("set\u{0}{}\u{0}{}", unit.event_id, set.annotator);
    let mut result = results(unit, &owner, &set.labels, &meta);
    if result.is_empty() {
        result.push(choices_item(&owner, None, None, meta));
    }
    let mut annotation = Map::new();
    if let Some(lead_time) = set.lead_time {
        annotation.insert("lead_time".into(), Value::from(lead_time));
    }
    annotation.insert(
        "was_cancelled".into(),
        Value::Bool(set.status == Status::Discarded),
    );
    annotation.insert(
        "ground_truth".into(),
        Value::Bool(set.status == Status::Adjudicated),
    );
    annotation.insert("result".into(), Value::Array(result));
    Value::Object(annotation)
}

/// One prediction: the suggestion's labels as result items (their meta names the model).
fn prediction(unit: &ExportedUnit, suggestion: &Suggestion) -> Value {
    let mut meta = Map::new();
    meta.insert("model".into(), Value::from(suggestion.model.as_str()));
    let owner = format!("model\u{0}{}\u{0}{}", unit.event_id, suggestion.model);
    let result = results(unit, &owner, &suggestion.labels, &meta);
    let mut prediction = Map::new();
    prediction.insert("model_version".into(), Value::from(suggestion.model.as_str()));
    if let Some(score) = suggestion.score {
        prediction.insert("score".into(), Value::from(score));
    }
    prediction.insert("result".into(), Value::Array(result));
    Value::Object(prediction)
}

/// The result items of `labels`: a `choices` item each (with `base` and the label's own
/// fields, cue and unplaced quote in its meta), and a span for each quote found in the text.
fn results(
    unit: &ExportedUnit,
    owner: &str,
    labels: &[LabelRecord],
    base: &Map<String, Value>,
) -> Vec<Value> {
    let mut items = Vec::with_capacity(labels.len() * 2);
    for label in labels {
        let mut meta = base.clone();
        if let Some(fields) = &label.fields {
            meta.insert("fields".into(), Value::Object(fields.clone()));
        }
        let evidence = label.evidence.as_ref();
        if let Some(cue) = evidence.and_then(|e| e.cue.as_ref()) {
            meta.insert("cue".into(), Value::from(cue.as_str()));
        }
        let quote = evidence.and_then(|e| e.quote.as_deref());
        let span = quote.and_then(|q| char_span(&unit.text, q));
        if let (Some(q), None) = (quote, span) {
            meta.insert("quote".into(), Value::from(q));
        }
        items.push(choices_item(owner, Some(&label.id), label.confidence, meta));
        if let (Some(q), Some((start, end))) = (quote, span) {
            items.push(json!({
                "id": short_id(&[owner, &label.id, "span"]),
                "type": "labels",
                "from_name": EVIDENCE,
                "to_name": TEXT,
                "value": {"start": start, "end": end, "text": q, "labels": [label.id]},
            }));
        }
    }
    items
}

/// A `choices` result item naming `label` (none: an empty set's placeholder).
fn choices_item(owner: &str, label: Option<&str>, score: Option<f64>, meta: Map<String, Value>) -> Value {
    let choices: Vec<&str> = label.into_iter().collect();
    let mut item = Map::new();
    item.insert(
        "id".into(),
        Value::from(short_id(&[owner, label.unwrap_or(""), "choice"])),
    );
    item.insert("type".into(), Value::from("choices"));
    item.insert("from_name".into(), Value::from(CHOICES));
    item.insert("to_name".into(), Value::from(TEXT));
    item.insert("value".into(), json!({ "choices": choices }));
    if let Some(score) = score {
        item.insert("score".into(), Value::from(score));
    }
    item.insert("meta".into(), Value::Object(meta));
    Value::Object(item)
}

/// The character offsets (Unicode scalar values) of `quote`'s first occurrence in `text`.
fn char_span(text: &str, quote: &str) -> Option<(usize, usize)> {
    if quote.is_empty() {
        return None;
    }
    let at = text.find(quote)?;
    let start = text[..at].chars().count();
    Some((start, start + quote.chars().count()))
}

/// A stable 10-character id of a result item, from what it belongs to.
fn short_id(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    let digest = hasher.finalize();
    hex::encode(&digest[..5])
}

// ---------------------------------------------------------------------------------------
// Exports to import items
// ---------------------------------------------------------------------------------------

/// Reads Label Studio's JSON export (a list of tasks; a single task object is read as a
/// list of one): one entry per task, in order, with the task's sets (`ImportKind::Set`,
/// one per annotator of each annotation, `PUT`-shaped bodies) and suggestions (one per
/// full prediction; a quick export's prediction ids are skipped). A task that is not of
/// the expected shape gives an `Err` naming it (`task 3 (Label Studio id 17): ...`, the
/// position counted from 0) and what is wrong. Never panics.
///
/// A set's annotator is its `choices` items' `meta.annotator`, else the annotation's
/// `completed_by` (see the module doc); its status is `discarded` when the annotation
/// `was_cancelled`, else `meta.status`, else `submitted` (`ground_truth` is not read: Label
/// Studio sets it on annotations of its own). Labels come from `value.choices` (confidence:
/// the item's `score`; fields, cue, note: its meta) and from evidence spans (the quote: the
/// span's `value.text`; a span's label nobody chose is added). Result items of other types
/// are ignored. Values are copied as given: the bodies are checked when imported.
pub fn parse_export(json: &Value) -> Vec<Result<Vec<ImportItem>, String>> {
    match json {
        Value::Array(tasks) => tasks
            .iter()
            .enumerate()
            .map(|(i, t)| parse_task_at(i, t))
            .collect(),
        Value::Object(_) => vec![parse_task_at(0, json)],
        other => vec![Err(format!(
            "the export must be a JSON list of tasks, not {}",
            kind(other)
        ))],
    }
}

/// The items of task `i` of an export, read as [`parse_export`] reads each: the import
/// reads an export's tasks one at a time with it, never the whole array as a `Value`.
pub fn parse_task_at(i: usize, task: &Value) -> Result<Vec<ImportItem>, String> {
    parse_task(task).map_err(|e| format!("{}: {e}", task_name(i, task)))
}

/// `task 3`, with Label Studio's id when the task has one.
fn task_name(i: usize, task: &Value) -> String {
    match task.get("id").filter(|id| id.is_number() || id.is_string()) {
        Some(id) => format!("task {i} (Label Studio id {id})"),
        None => format!("task {i}"),
    }
}

/// The JSON type of `v`, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The items of one task.
fn parse_task(task: &Value) -> Result<Vec<ImportItem>, String> {
    let task = task
        .as_object()
        .ok_or_else(|| format!("must be an object, not {}", kind(task)))?;
    let data = match task.get("data") {
        Some(Value::Object(data)) => data,
        Some(other) => return Err(format!("data must be an object, not {}", kind(other))),
        None => return Err("data is missing".into()),
    };
    let session_id = data_string(data, "session_id")?;
    let event_id = data_string(data, "event_id")?;
    let mut kinds = Vec::new();
    for (j, annotation) in list(task, "annotations")?.iter().enumerate() {
        let sets = parse_annotation(annotation).map_err(|e| format!("annotations[{j}]{e}"))?;
        kinds.extend(sets.into_iter().map(ImportKind::Set));
    }
    for (j, prediction) in list(task, "predictions")?.iter().enumerate() {
        if prediction.is_number() {
            continue;
        }
        let suggestion = parse_prediction(prediction).map_err(|e| format!("predictions[{j}]{e}"))?;
        kinds.push(suggestion);
    }
    Ok(kinds
        .into_iter()
        .map(|kind| ImportItem {
            codebook: None,
            session_id: session_id.clone(),
            event_id: event_id.clone(),
            kind,
        })
        .collect())
}

/// A string member of the task's data.
fn data_string(data: &Map<String, Value>, key: &str) -> Result<String, String> {
    match data.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(format!("data.{key} is empty")),
        Some(other) => Err(format!("data.{key} must be a string, not {}", kind(other))),
        None => Err(format!("data.{key} is missing")),
    }
}

/// A list member of `object` (missing or `null`: empty).
fn list<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!("{key} must be a list, not {}", kind(other))),
    }
}

/// The labels of one annotator (or model) gathered from result items, in order.
#[derive(Default)]
struct Gathered {
    /// Who (`None`: the annotation's own annotator).
    annotator: Option<String>,
    /// `meta.status` of the first item that gives one.
    status: Option<String>,
    /// `meta.note` of the first item that gives one.
    note: Option<Value>,
    /// The label records, as JSON objects, ids distinct.
    labels: Vec<Map<String, Value>>,
    /// Where each id's record is in `labels`: a task of tens of thousands of choices made
    /// finding them one by one quadratic.
    by_id: HashMap<String, usize>,
}

impl Gathered {
    /// The record of label `id`, made when missing.
    fn label(&mut self, id: &str) -> &mut Map<String, Value> {
        let at = match self.by_id.get(id) {
            Some(&at) => at,
            None => {
                let mut record = Map::new();
                record.insert("id".into(), Value::from(id));
                self.labels.push(record);
                self.by_id.insert(id.to_owned(), self.labels.len() - 1);
                self.labels.len() - 1
            }
        };
        &mut self.labels[at]
    }

    /// True when it has a record of label `id`.
    fn has(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }
}

/// The sets of one annotation: one per annotator named in its result items' meta, items
/// without one (made in Label Studio) belonging to `completed_by`.
fn parse_annotation(annotation: &Value) -> Result<Vec<Value>, String> {
    let object = annotation
        .as_object()
        .ok_or_else(|| format!(" must be an object, not {}", kind(annotation)))?;
    let result = match object.get("result") {
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!(".result must be a list, not {}", kind(other))),
        None => return Err(".result is missing".into()),
    };
    let groups = gather(result, "annotator").map_err(|e| format!(".result{e}"))?;
    let cancelled = matches!(object.get("was_cancelled"), Some(Value::Bool(true)));
    let lead_time = object.get("lead_time").filter(|v| !v.is_null());
    let mut sets = Vec::with_capacity(groups.len().max(1));
    let groups = if groups.is_empty() {
        vec![Gathered::default()]
    } else {
        groups
    };
    for group in groups {
        let annotator = match group.annotator {
            Some(name) => name,
            None => completed_by(object.get("completed_by"))?,
        };
        let status = if cancelled {
            Status::Discarded.as_str().to_owned()
        } else {
            group
                .status
                .unwrap_or_else(|| Status::Submitted.as_str().to_owned())
        };
        let mut body = Map::new();
        body.insert("annotator".into(), Value::from(annotator));
        body.insert(
            "labels".into(),
            Value::Array(group.labels.into_iter().map(Value::Object).collect()),
        );
        body.insert("status".into(), Value::from(status));
        if let Some(note) = group.note {
            body.insert("note".into(), note);
        }
        if let Some(lead_time) = lead_time {
            body.insert("lead_time".into(), lead_time.clone());
        }
        sets.push(Value::Object(body));
    }
    Ok(sets)
}

/// The annotator of an annotation made in Label Studio: `completed_by.email`, else
/// `labelstudio-{id}`.
fn completed_by(value: Option<&Value>) -> Result<String, String> {
    let id = match value {
        Some(Value::Object(user)) => {
            if let Some(Value::String(email)) = user.get("email") {
                if !email.is_empty() {
                    return Ok(email.clone());
                }
            }
            user.get("id")
        }
        other => other,
    };
    match id {
        Some(Value::Number(n)) => Ok(format!("labelstudio-{n}")),
        Some(Value::String(s)) if !s.is_empty() => Ok(format!("labelstudio-{s}")),
        _ => Err(" has no annotator: no result item's meta names one and completed_by is missing".into()),
    }
}

/// A suggestion of one full prediction.
fn parse_prediction(prediction: &Value) -> Result<ImportKind, String> {
    let object = prediction
        .as_object()
        .ok_or_else(|| format!(" must be an object or an id, not {}", kind(prediction)))?;
    let model = match object.get("model_version") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => return Err(format!(".model_version must be a string, not {}", kind(other))),
        None => return Err(".model_version is missing".into()),
    };
    let result = match object.get("result") {
        Some(Value::Array(items)) => items.as_slice(),
        None | Some(Value::Null) => &[],
        Some(other) => return Err(format!(".result must be a list, not {}", kind(other))),
    };
    let groups = gather(result, "model").map_err(|e| format!(".result{e}"))?;
    let labels: Vec<Value> = groups
        .into_iter()
        .flat_map(|g| g.labels)
        .map(Value::Object)
        .collect();
    Ok(ImportKind::Suggestion {
        model,
        score: object.get("score").filter(|v| !v.is_null()).cloned(),
        labels: Value::Array(labels),
    })
}

/// The result items grouped by `meta.{who}` (in order of first appearance); spans join the
/// label of the same id in the group that has it (else the first group, else a group of
/// their own).
fn gather(result: &[Value], who: &str) -> Result<Vec<Gathered>, String> {
    let mut groups: Vec<Gathered> = Vec::new();
    for (k, item) in result.iter().enumerate() {
        if !item.is_object() {
            return Err(format!("[{k}] must be an object, not {}", kind(item)));
        }
        if item.get("type").and_then(Value::as_str) == Some("choices") {
            gather_choices(&mut groups, item, who).map_err(|e| format!("[{k}]{e}"))?;
        }
    }
    for (k, item) in result.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) == Some("labels") {
            gather_span(&mut groups, item).map_err(|e| format!("[{k}]{e}"))?;
        }
    }
    Ok(groups)
}

/// The labels of a `choices` item, with its score, fields, cue and unplaced quote.
fn gather_choices(groups: &mut Vec<Gathered>, item: &Value, who: &str) -> Result<(), String> {
    let meta = match item.get("meta") {
        None | Some(Value::Null) => None,
        Some(Value::Object(meta)) => Some(meta),
        Some(other) => return Err(format!(".meta must be an object, not {}", kind(other))),
    };
    let annotator = match meta.and_then(|m| m.get(who)) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(format!(".meta.{who} must be a string, not {}", kind(other))),
    };
    let choices = strings(item.get("value").and_then(|v| v.get("choices")))
        .ok_or(".value.choices must be a list of strings")?;
    let at = match groups.iter().position(|g| g.annotator == annotator) {
        Some(at) => at,
        None => {
            groups.push(Gathered {
                annotator,
                ..Gathered::default()
            });
            groups.len() - 1
        }
    };
    let group = &mut groups[at];
    let meta_value = |key: &str| meta.and_then(|m| m.get(key)).filter(|v| !v.is_null());
    if group.status.is_none() {
        group.status = meta_value("status").and_then(Value::as_str).map(str::to_owned);
    }
    if group.note.is_none() {
        group.note = meta_value("note").cloned();
    }
    for id in choices {
        let record = group.label(id);
        if record.len() > 1 {
            continue;
        }
        if let Some(score) = item.get("score").filter(|v| !v.is_null()) {
            record.insert("confidence".into(), score.clone());
        }
        if let Some(fields) = meta_value("fields") {
            record.insert("fields".into(), fields.clone());
        }
        let mut evidence = Map::new();
        for key in ["quote", "cue"] {
            if let Some(v) = meta_value(key) {
                evidence.insert(key.into(), v.clone());
            }
        }
        if !evidence.is_empty() {
            record.insert("evidence".into(), Value::Object(evidence));
        }
    }
    Ok(())
}

/// An evidence span: its text becomes the quote of each of its labels (the first span of a
/// label wins; a span's label nobody chose is added, as the evidence names it).
fn gather_span(groups: &mut Vec<Gathered>, item: &Value) -> Result<(), String> {
    let value = item.get("value");
    let labels =
        strings(value.and_then(|v| v.get("labels"))).ok_or(".value.labels must be a list of strings")?;
    let text = match value.and_then(|v| v.get("text")) {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => return Ok(()),
        Some(other) => return Err(format!(".value.text must be a string, not {}", kind(other))),
    };
    for id in labels {
        let at = match groups.iter().position(|g| g.has(id)) {
            Some(at) => at,
            None if groups.is_empty() => {
                groups.push(Gathered::default());
                0
            }
            None => 0,
        };
        let record = groups[at].label(id);
        let evidence = record
            .entry("evidence")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(evidence) = evidence {
            evidence
                .entry("quote")
                .or_insert_with(|| Value::from(text.as_str()));
        }
    }
    Ok(())
}

/// `v` as a list of strings.
fn strings(v: Option<&Value>) -> Option<Vec<&str>> {
    v?.as_array()?.iter().map(Value::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::model::Evidence;
    use crate::labels::validate::validate_set;

    const TEXT_WITH_ACCENTS: &str = "Café déjà vu — please split the migration into three steps, then rerun.";

    fn record(id: &str, confidence: Option<f64>, quote: Option<&str>) -> LabelRecord {
        LabelRecord {
            id: id.into(),
            confidence,
            evidence: quote.map(|q| Evidence {
                quote: Some(q.into()),
                cue: None,
            }),
            fields: None,
        }
    }

    fn set(annotator: &str, status: Status, labels: Vec<LabelRecord>) -> LabelSet {
        LabelSet {
            event_id: "U:0001".into(),
            annotator: annotator.into(),
            status,
            labels,
            note: None,
            lead_time: Some(12.5),
            version: 3,
            updated_at: "2026-01-01T00:00:00Z".into(),
            codebook_version: None,
        }
    }

    /// Two annotators, an adjudicated set, a discarded set, a draft, a suggestion.
    fn unit() -> ExportedUnit {
        let mut alice = record(
            "TASK_DECOMPOSITION",
            Some(0.9),
            Some("split the migration into three steps"),
        );
        alice.fields = Some(
            json!({"decomposition": ["schema", "data", "code"]})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        if let Some(e) = alice.evidence.as_mut() {
            e.cue = Some("split".into());
        }
        let mut first = set(
            "alice",
            Status::Submitted,
            vec![alice, record("EXEC_DIGITAL", None, None)],
        );
        first.note = Some("clear «case»".into());
        let second = set(
            "bob@example.com",
            Status::Submitted,
            vec![record("TASK_DECOMPOSITION", Some(0.6), Some("déjà vu"))],
        );
        let mut judge = set(
            "judge",
            Status::Adjudicated,
            vec![record("TASK_DECOMPOSITION", Some(1.0), None)],
        );
        judge.lead_time = None;
        let skipped = set("carol", Status::Discarded, vec![]);
        let draft = set("dave", Status::Draft, vec![record("EXEC_COGNITIVE", None, None)]);
        ExportedUnit {
            codebook: None,
            session_id: "s1".into(),
            event_id: "U:0001".into(),
            unit_type: Some("user_turn".into()),
            text: TEXT_WITH_ACCENTS.into(),
            unit: None,
            orphaned: false,
            annotations: vec![first, second, judge.clone(), skipped, draft],
            suggestions: vec![Suggestion {
                event_id: "U:0001".into(),
                model: "rules-v1".into(),
                score: Some(0.66),
                labels: vec![record("TASK_DECOMPOSITION", Some(0.5), Some("rerun"))],
                updated_at: "2026-01-01T00:00:00Z".into(),
            }],
            adjudicated: Some(judge),
        }
    }

    /// The sets and suggestions of one parsed task.
    fn items(json: &Value) -> Vec<ImportItem> {
        let mut parsed = parse_export(json);
        assert_eq!(parsed.len(), 1, "{parsed:?}");
        parsed.remove(0).unwrap_or_else(|e| panic!("{e}"))
    }

    fn set_body<'a>(items: &'a [ImportItem], annotator: &str) -> &'a Value {
        items
            .iter()
            .find_map(|i| match &i.kind {
                ImportKind::Set(body) if body["annotator"] == annotator => Some(body),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no set of {annotator}"))
    }

    /// Checks that tags nest and close, attributes are quoted and values hold no raw `<`
    /// or bare `&`; returns the `value` attributes of `tag` elements.
    fn check_xml(xml: &str, tag: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut values = Vec::new();
        let mut rest = xml;
        while let Some(open) = rest.find('<') {
            assert!(
                rest[..open].trim().is_empty(),
                "text outside tags: {:?}",
                &rest[..open]
            );
            let close = rest[open..].find('>').expect("unclosed tag") + open;
            let inner = &rest[open + 1..close];
            assert!(!inner.contains('<'), "raw < in {inner}");
            rest = &rest[close + 1..];
            if let Some(name) = inner.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
                continue;
            }
            let self_closing = inner.ends_with('/');
            let inner = inner.trim_end_matches('/');
            let (name, mut attrs) = inner.split_once(' ').unwrap_or((inner, ""));
            while let Some(eq) = attrs.find("=\"") {
                let key = attrs[..eq].trim();
                let end = attrs[eq + 2..].find('"').expect("unquoted attribute") + eq + 2;
                let value = &attrs[eq + 2..end];
                for (i, _) in value.match_indices('&') {
                    let entity = &value[i..];
                    assert!(
                        ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#"]
                            .iter()
                            .any(|e| entity.starts_with(e)),
                        "bare & in {value}"
                    );
                }
                if name == tag && key == "value" {
                    values.push(value.to_owned());
                }
                attrs = &attrs[end + 1..];
            }
            assert!(attrs.trim().is_empty(), "stray attribute text {attrs:?}");
            if !self_closing {
                stack.push(name.to_owned());
            }
        }
        assert!(stack.is_empty() && rest.trim().is_empty(), "unclosed {stack:?}");
        values
    }

    #[test]
    fn config_is_well_formed_and_names_every_label() {
        let codebook = Codebook::built_in().expect("built-in codebook");
        let xml = label_config(&codebook);
        let ids: Vec<String> = codebook.labels.iter().map(|l| l.id.clone()).collect();
        assert_eq!(check_xml(&xml, "Choice"), ids);
        assert_eq!(check_xml(&xml, "Label"), ids);
        let families: Vec<String> = codebook.families().into_iter().map(|f| f.id).collect();
        assert_eq!(check_xml(&xml, "Header"), families);
        assert!(xml.starts_with("<View>") && xml.contains("<Text name=\"text\" value=\"$text\"/>"));
        assert!(xml.contains("<Choices name=\"labels\" toName=\"text\" choice=\"multiple\""));
        assert!(xml.contains("<Labels name=\"evidence\" toName=\"text\">"));
        assert!(
            xml.contains("hint=\"Problem decomposition: Break a goal"),
            "{xml}"
        );
    }

    #[test]
    fn attribute_values_are_escaped() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\n\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;&#10;"
        );
        let yaml = "labels:\n  - id: \"A&B\"\n    name: \"<x>\"\n    family: \"f\\\"g\"\n    definition: \"a \\\"quoted\\\" & long one\"\n";
        let codebook = Codebook::parse("t.yaml", yaml).expect("codebook");
        let xml = label_config(&codebook);
        assert_eq!(check_xml(&xml, "Choice"), vec!["A&amp;B"]);
        assert!(
            xml.contains("hint=\"&lt;x&gt;: a &quot;quoted&quot; &amp; long one\""),
            "{xml}"
        );
    }

    #[test]
    fn task_has_the_label_studio_shape() {
        let task = task(&unit());
        assert_eq!(task["data"]["text"], TEXT_WITH_ACCENTS);
        assert_eq!(task["data"]["session_id"], "s1");
        assert_eq!(task["data"]["unit_type"], "user_turn");
        assert_eq!(task["meta"], json!({}));
        let annotations = task["annotations"].as_array().expect("annotations");
        assert_eq!(
            annotations.len(),
            4,
            "drafts are not exported, the adjudicated set once"
        );
        for a in annotations {
            assert!(a.get("completed_by").is_none() && a["ground_truth"].is_boolean());
            assert!(!a["result"].as_array().expect("result").is_empty());
        }
        let alice = &annotations[0];
        assert_eq!(alice["lead_time"], 12.5);
        assert_eq!(
            (&alice["was_cancelled"], &alice["ground_truth"]),
            (&json!(false), &json!(false))
        );
        let choice = &alice["result"][0];
        assert_eq!(choice["value"], json!({"choices": ["TASK_DECOMPOSITION"]}));
        assert_eq!(choice["score"], 0.9);
        assert_eq!(choice["meta"]["annotator"], "alice");
        assert_eq!(choice["meta"]["version"], 3);
        assert_eq!(choice["id"].as_str().map(str::len), Some(10));
        let span = &alice["result"][1];
        assert_eq!(span["type"], "labels");
        let (start, end) = (span["value"]["start"].as_u64(), span["value"]["end"].as_u64());
        // "Café déjà vu — please " is 22 characters and 27 bytes.
        assert_eq!((start, end), (Some(22), Some(58)));
        let chars: Vec<char> = TEXT_WITH_ACCENTS.chars().collect();
        assert_eq!(
            chars[22..58].iter().collect::<String>(),
            span["value"]["text"].as_str().unwrap_or("")
        );
        assert_eq!(annotations[2]["ground_truth"], true);
        assert_eq!(annotations[3]["was_cancelled"], true);
        assert_eq!(annotations[3]["result"][0]["value"], json!({"choices": []}));
        assert_eq!(annotations[3]["result"][0]["meta"]["annotator"], "carol");
        let prediction = &task["predictions"][0];
        assert_eq!(
            (&prediction["model_version"], &prediction["score"]),
            (&json!("rules-v1"), &json!(0.66))
        );
        assert_eq!(prediction["result"][0]["meta"], json!({"model": "rules-v1"}));
        assert_eq!(task, super::task(&unit()), "ids are stable");
    }

    #[test]
    fn a_task_parses_back_into_the_same_sets_and_suggestion() {
        let unit = unit();
        let items = items(&task(&unit));
        assert_eq!(items.len(), 5);
        assert!(items
            .iter()
            .all(|i| i.session_id == "s1" && i.event_id == "U:0001"));
        let codebook = Codebook::built_in().expect("codebook");
        for original in unit.annotations.iter().filter(|s| s.status != Status::Draft) {
            let body = set_body(&items, &original.annotator);
            let parsed = validate_set(body, &codebook, &unit.text).unwrap_or_else(|e| panic!("{e}: {body}"));
            assert_eq!(parsed.labels(), original.labels, "{}", original.annotator);
            assert_eq!(parsed.status(), original.status);
            assert_eq!(parsed.note(), original.note.as_deref());
            assert_eq!(
                parsed.lead_time_ms(),
                original.lead_time.map(|s| (s * 1000.0) as i64)
            );
        }
        let suggestion = items.iter().find_map(|i| match &i.kind {
            ImportKind::Suggestion { model, score, labels } => Some((model, score, labels)),
            ImportKind::Set(_) => None,
        });
        let (model, score, labels) = suggestion.expect("a suggestion");
        assert_eq!((model.as_str(), score), ("rules-v1", &Some(json!(0.66))));
        let expected = serde_json::to_value(&unit.suggestions[0].labels).expect("labels");
        assert_eq!(labels, &expected);
    }

    #[test]
    fn an_unplaced_quote_travels_in_the_meta() {
        let mut unit = unit();
        unit.text = String::new();
        unit.orphaned = true;
        let task = task(&unit);
        assert_eq!(task["meta"], json!({"orphaned": true}));
        let result = task["annotations"][0]["result"].as_array().expect("result");
        assert!(result.iter().all(|r| r["type"] == "choices"));
        assert_eq!(result[0]["meta"]["quote"], "split the migration into three steps");
        let items = items(&task);
        let alice = set_body(&items, "alice");
        assert_eq!(
            alice["labels"][0]["evidence"]["quote"],
            "split the migration into three steps"
        );
        assert_eq!(alice["labels"][0]["evidence"]["cue"], "split");
    }

    #[test]
    fn annotations_made_in_label_studio_take_completed_by() {
        let export = json!([{
            "id": 7,
            "data": {"text": "I checked the build log", "session_id": "s1", "event_id": "A:1"},
            "annotations": [
                {"completed_by": {"id": 1, "email": "admin@example.com"}, "lead_time": 3.0, "was_cancelled": false,
                 "result": [
                    {"type": "choices", "value": {"choices": ["COORD_MONITORING", "EXEC_DIGITAL"]}},
                    {"type": "labels", "value": {"start": 0, "end": 9, "text": "I checked", "labels": ["COORD_MONITORING"]}},
                    {"type": "labels", "value": {"start": 14, "end": 23, "text": "build log", "labels": ["COORD_STATE_UPDATING"]}}
                 ]},
                {"completed_by": 4, "was_cancelled": true, "result": []}
            ],
            "predictions": [12, 13]
        }]);
        let items = items(&export);
        assert_eq!(items.len(), 2, "prediction ids are skipped");
        let admin = set_body(&items, "admin@example.com");
        assert_eq!(
            admin,
            &json!({"annotator": "admin@example.com", "labels": [
                {"id": "COORD_MONITORING", "evidence": {"quote": "I checked"}},
                {"id": "EXEC_DIGITAL"},
                {"id": "COORD_STATE_UPDATING", "evidence": {"quote": "build log"}}
            ], "status": "submitted", "lead_time": 3.0})
        );
        let other = set_body(&items, "labelstudio-4");
        assert_eq!(
            other,
            &json!({"annotator": "labelstudio-4", "labels": [], "status": "discarded"})
        );
    }

    /// Regression: each choice was looked for among the labels gathered before it, and each
    /// span's labels among every group's: a task of 40,000 distinct choices took 7.6 s
    /// (release) and a 64 MiB import hours. Every choice and span label is kept, once, in
    /// order.
    #[test]
    fn a_task_of_many_choices_and_spans_is_gathered_in_linear_time() {
        let many = 40_000;
        let choices: Vec<String> = (0..many).map(|i| format!("L{i}")).collect();
        let spans: Vec<Value> = (0..many)
            .map(|i| json!({"type": "labels", "value": {"start": 0, "end": 1, "text": "x", "labels": [format!("L{i}")]}}))
            .collect();
        let mut result = vec![json!({"type": "choices", "value": {"choices": choices}})];
        result.extend(spans);
        result.push(json!({"type": "choices", "value": {"choices": ["L0", "NEW"]}}));
        let groups = gather(&result, "annotator").unwrap();
        assert_eq!(groups.len(), 1);
        let ids: Vec<&str> = groups[0]
            .labels
            .iter()
            .map(|l| l["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), many + 1);
        assert_eq!((ids[0], ids[many - 1], ids[many]), ("L0", "L39999", "NEW"));
        assert_eq!(groups[0].labels[7]["evidence"], json!({"quote": "x"}));
    }

    #[test]
    fn wrong_shapes_give_an_error_for_their_task_only() {
        let good = json!({"data": {"text": "", "session_id": "s", "event_id": "e"}});
        let export = json!([
            good,
            {"id": 17, "data": {"text": "x", "event_id": "e"}},
            {"data": {"session_id": 3, "event_id": "e"}},
            {"data": {"session_id": "s", "event_id": "e"}, "annotations": [{"completed_by": 1}]},
            {"data": {"session_id": "s", "event_id": "e"}, "annotations": [{"result": [{"type": "choices", "value": {"choices": "A"}}]}]},
            {"data": {"session_id": "s", "event_id": "e"}, "annotations": [{"result": [{"type": "choices", "value": {"choices": ["A"]}}]}]},
            {"data": {"session_id": "s", "event_id": "e"}, "predictions": [{"result": []}]},
            "task",
            {"data": []}
        ]);
        let parsed = parse_export(&export);
        let errors: Vec<String> = parsed
            .iter()
            .map(|r| r.clone().err().unwrap_or_default())
            .collect();
        assert_eq!(
            errors,
            vec![
                "".to_owned(),
                "task 1 (Label Studio id 17): data.session_id is missing".into(),
                "task 2: data.session_id must be a string, not a number".into(),
                "task 3: annotations[0].result is missing".into(),
                "task 4: annotations[0].result[0].value.choices must be a list of strings".into(),
                "task 5: annotations[0] has no annotator: no result item's meta names one and completed_by is missing".into(),
                "task 6: predictions[0].model_version is missing".into(),
                "task 7: must be an object, not a string".into(),
                "task 8: data must be an object, not a list".into(),
            ]
        );
        assert_eq!(
            parse_export(&json!(3)),
            vec![Err("the export must be a JSON list of tasks, not a number".into())]
        );
    }

    #[test]
    fn any_json_parses_without_panicking() {
        let samples = [
            json!(null),
            json!([null, 1, "x", [], {}]),
            json!([{"data": {"session_id": "s", "event_id": "e"}, "annotations": [null, 1, {"result": [null]}]}]),
            json!([{"data": {"session_id": "s", "event_id": "e"}, "annotations": {"result": []}}]),
            json!([{"data": {"session_id": "s", "event_id": "e"}, "annotations": [{"completed_by": [], "result": [
                {"type": "labels", "value": null}, {"type": "choices", "meta": 3, "value": {"choices": []}}]}]}]),
            json!([{"data": {"session_id": "s", "event_id": "e"}, "annotations": [{"completed_by": 1, "result": [
                {"type": "labels", "value": {"labels": ["A"], "text": 5}},
                {"type": "choices", "meta": {"annotator": 1}, "value": {"choices": ["A"]}}]}]}]),
            json!([{"data": {"session_id": "s", "event_id": "e"}, "predictions": [{"model_version": [], "result": {}}, true]}]),
        ];
        for sample in samples {
            for entry in parse_export(&sample) {
                if let Err(e) = entry {
                    assert!(e.starts_with("task ") || e.starts_with("the export"), "{e}");
                }
            }
        }
    }

    /// A file of `fixtures/labelstudio/`, as JSON.
    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/labelstudio")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every set of a parsed export, validated against the task's text (but an orphaned
    /// unit's: its text is gone, so its quotes no longer occur in it).
    fn validated(export: &Value) -> Vec<Vec<ImportItem>> {
        let codebook = Codebook::built_in().expect("codebook");
        let tasks = export.as_array().expect("a list");
        let parsed: Vec<Vec<ImportItem>> = parse_export(export)
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
            .collect();
        for (items, task) in parsed.iter().zip(tasks) {
            let text = task["data"]["text"].as_str().unwrap_or("");
            if task["meta"]["orphaned"] == true {
                continue;
            }
            for item in items {
                if let ImportKind::Set(body) = &item.kind {
                    validate_set(body, &codebook, text).unwrap_or_else(|e| panic!("{e}: {body}"));
                }
            }
        }
        parsed
    }

    #[test]
    fn the_config_label_studio_accepted_is_the_one_made() {
        let codebook = Codebook::built_in().expect("codebook");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/labelstudio/config.xml");
        let accepted = std::fs::read_to_string(path).expect("config.xml");
        assert_eq!(label_config(&codebook), accepted);
    }

    #[test]
    fn label_studio_snapshot_export_gives_back_what_was_imported() {
        let sent = validated(&fixture("tasks.json"));
        let snapshot = validated(&fixture("snapshot_export.json"));
        assert_eq!(sent.len(), 3);
        assert_eq!(snapshot.len(), 3);
        assert_eq!(snapshot[0], sent[0]);
        assert_eq!(snapshot[2], sent[2]);
        // Task 2 also holds an annotation made in Label Studio (no meta): its member's email.
        let mut task2 = snapshot[1].clone();
        let made_in_ls = task2.remove(2);
        assert_eq!(task2, sent[1]);
        let expected = json!({"annotator": "admin@example.com", "labels": [
            {"id": "COORD_MONITORING", "evidence": {"quote": "I checked the build log"}},
            {"id": "EXEC_COGNITIVE"}
        ], "status": "submitted", "lead_time": 4.5});
        assert_eq!(made_in_ls.kind, ImportKind::Set(expected));
        let counts: Vec<(usize, usize)> = sent
            .iter()
            .map(|items| {
                let sets = items
                    .iter()
                    .filter(|i| matches!(i.kind, ImportKind::Set(_)))
                    .count();
                (sets, items.len() - sets)
            })
            .collect();
        assert_eq!(counts, vec![(4, 1), (2, 2), (1, 0)]);
    }

    #[test]
    fn label_studio_quick_export_skips_prediction_ids() {
        let snapshot = validated(&fixture("snapshot_export.json"));
        let quick = validated(&fixture("quick_export.json"));
        assert_eq!(quick.len(), 3);
        for (q, s) in quick.iter().zip(&snapshot) {
            let sets: Vec<&ImportItem> = s
                .iter()
                .filter(|i| matches!(i.kind, ImportKind::Set(_)))
                .collect();
            let quick_sets: Vec<&ImportItem> = q.iter().collect();
            assert_eq!(quick_sets.len(), sets.len());
            for (a, b) in quick_sets.iter().zip(&sets) {
                match (&a.kind, &b.kind) {
                    (ImportKind::Set(a), ImportKind::Set(b)) if b["annotator"] == "admin@example.com" => {
                        assert_eq!(a["annotator"], "labelstudio-1", "a bare member id");
                        assert_eq!(a["labels"], b["labels"]);
                    }
                    _ => assert_eq!(a, b),
                }
            }
        }
    }
}
