//! The label export: one line per unit, the unit as its annotations body shows it with
//! every annotator's set (in blind mode, those the asker may see), the suggestions and the
//! adjudicated set, streamed session by session, and within a session a few units at a
//! time.
//!
//! Memory: one session's units (as the session store renders them) and the labels of at
//! most [`BATCH_LABELS`] sets and suggestions at a time (more only when one unit alone has
//! more: its line holds them all), plus the channel's few lines, however many sessions and
//! sets the store holds. Sessions come in id order; within a session, units in session
//! order, then the units the session no longer has (orphaned, labels kept) by id. Each
//! unit's labels are read in one query; a write made while an export runs shows in the
//! lines read after it.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;

use bytes::Bytes;
use foldhash::{HashMap, HashMapExt};
use serde_json::value::RawValue;
use sqlx::Row;
use tokio::sync::mpsc;

use super::consensus::{Blindness, Viewer};
use super::model::{ExportedUnit, LabelSet, Suggestion};
use super::reads::suggestion_of_row;
use super::store::{LabelError, LabelStore};

/// A unit of a session, rendered for the export.
#[derive(Debug)]
pub struct UnitRow {
    /// The unit's `event_id`.
    pub event_id: String,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: &'static str,
    /// Its text.
    pub text: String,
    /// The unit as `GET /api/graph/{id}/annotations` gives it.
    pub json: Box<RawValue>,
}

/// Where the export finds sessions and their units (the session store).
pub trait UnitSource: Sync {
    /// Every session it serves, in the order `/api/sessions` lists them.
    fn session_ids(&self) -> Vec<String>;

    /// The units of `session_id` in session order (sub-agent units included); `None` when
    /// the session is unknown or cannot be loaded.
    fn unit_rows(&self, session_id: &str) -> impl Future<Output = Option<Vec<UnitRow>>> + Send;
}

/// The export's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One [`ExportedUnit`] per line.
    Jsonl,
    /// Label Studio's task list (a JSON array), see [`super::labelstudio`].
    LabelStudio,
}

impl Format {
    /// The format called `name` (`jsonl`, `label-studio`).
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "jsonl" => Some(Format::Jsonl),
            "label-studio" | "labelstudio" => Some(Format::LabelStudio),
            _ => None,
        }
    }

    /// The response's media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Jsonl => "application/x-ndjson",
            Format::LabelStudio => "application/json",
        }
    }
}

/// What to export, and for whom.
#[derive(Debug, Clone, Default)]
pub struct ExportScope {
    /// The codebook whose sets and suggestions are exported.
    pub codebook: String,
    /// Only these units, by session (a round's): each gets a line, labeled or not (unless
    /// its session no longer has it and it has no labels).
    pub only: Option<BTreeMap<String, HashSet<String>>>,
    /// A JSONL line written before the units (a round's definition); a Label Studio
    /// export leaves it out.
    pub header: Option<serde_json::Value>,
    /// Only this session.
    pub session_id: Option<String>,
    /// Every unit of the sessions, labeled or not (default: units with labels or
    /// suggestions only).
    pub all_units: bool,
    /// Who asks: in blind mode each unit lists only the sets they may see (see
    /// [`Viewer::visible`]), and a unit left with nothing to show is left out (kept, empty,
    /// with `all_units`, unless the session no longer has it).
    pub viewer: Viewer,
    /// Where blind mode holds (the operator's `labels export` sees every set: nowhere).
    pub blindness: Blindness,
}

/// Stored sets and suggestions read at once, at most, when a session is exported (a unit
/// with more is read alone).
pub const BATCH_LABELS: usize = 4_096;

/// Units whose labels are read at once, at most (the parameters of one query).
const BATCH_UNITS: usize = 500;

impl LabelStore {
    /// Writes the export to `out`, a chunk per few lines; stops early (`Ok`) when the
    /// receiver is gone. (The channel carries results so that whoever runs the export can
    /// tell the receiver that it failed part way.)
    pub async fn export(
        &self,
        source: &impl UnitSource,
        format: Format,
        scope: &ExportScope,
        out: mpsc::Sender<Result<Bytes, std::io::Error>>,
    ) -> Result<(), LabelError> {
        let mut writer = LineWriter::new(format, out);
        if let (Some(header), Format::Jsonl) = (&scope.header, format) {
            if !writer.write_json(header).await? {
                return Ok(());
            }
        }
        for session_id in self.export_sessions(source, scope).await? {
            if !self
                .export_session(source, &session_id, scope, &mut writer)
                .await?
            {
                return Ok(());
            }
        }
        writer.finish().await;
        Ok(())
    }

    /// The sessions to export, in id order.
    async fn export_sessions(
        &self,
        source: &impl UnitSource,
        scope: &ExportScope,
    ) -> Result<Vec<String>, LabelError> {
        if let Some(id) = &scope.session_id {
            let in_scope = scope.only.as_ref().is_none_or(|only| only.contains_key(id));
            return Ok(if in_scope { vec![id.clone()] } else { Vec::new() });
        }
        if let Some(only) = &scope.only {
            return Ok(only.keys().cloned().collect());
        }
        let mut ids = self.labeled_sessions(&scope.codebook).await?;
        if scope.all_units {
            ids.extend(source.session_ids());
            ids.sort();
            ids.dedup();
        }
        Ok(ids)
    }

    /// Writes one session's lines, a batch of units at a time; false when the receiver is
    /// gone.
    async fn export_session(
        &self,
        source: &impl UnitSource,
        session_id: &str,
        scope: &ExportScope,
        writer: &mut LineWriter,
    ) -> Result<bool, LabelError> {
        let codebook = scope.codebook.as_str();
        let mut labeled = self.labeled_units(codebook, session_id).await?;
        let mut units = source.unit_rows(session_id).await.unwrap_or_default();
        let only = scope.only.as_ref().and_then(|only| only.get(session_id));
        if let Some(only) = only {
            labeled.retain(|event_id, _| only.contains(event_id));
            units.retain(|u| only.contains(&u.event_id));
        }
        let all_units = scope.all_units || only.is_some();
        if !all_units && labeled.is_empty() {
            return Ok(true);
        }
        for batch in batches(units, labeled, all_units) {
            let mut labels = self.batch_labels(codebook, session_id, &batch).await?;
            for entry in batch {
                let (mut sets, suggestions) = labels.remove(&entry.event_id).unwrap_or_default();
                scope
                    .viewer
                    .retain_visible(&mut sets, scope.blindness.covers(session_id, &entry.event_id));
                let shown = !sets.is_empty() || !suggestions.is_empty();
                let kept_empty = all_units && entry.unit.is_some();
                if !(shown || kept_empty) {
                    continue;
                }
                let line = line(codebook, session_id, entry, sets, suggestions);
                if !writer.write(&line).await? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The units of session `session_id` with stored sets or suggestions, by id, with how
    /// many each has (counted by the database, nothing read).
    async fn labeled_units(
        &self,
        codebook: &str,
        session_id: &str,
    ) -> Result<BTreeMap<String, usize>, LabelError> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for table in ["label_sets", "label_suggestions"] {
            let sql = format!(
                "SELECT event_id, COUNT(*) AS n FROM {table} WHERE codebook = $1 AND session_id = $2 \
                 GROUP BY event_id"
            );
            let rows = sqlx::query(&sql)
                .bind(codebook)
                .bind(session_id)
                .fetch_all(&self.pool)
                .await?;
            for row in rows {
                let n: i64 = row.try_get("n")?;
                *counts.entry(row.try_get("event_id")?).or_default() += usize::try_from(n).unwrap_or(0);
            }
        }
        Ok(counts)
    }

    /// The sets and suggestions of the units of `batch` that have any, by unit (sets by
    /// annotator, suggestions by model; the sets read as [`LabelStore::list`] reads them).
    async fn batch_labels(
        &self,
        codebook: &str,
        session_id: &str,
        batch: &[Entry],
    ) -> Result<UnitLabels, LabelError> {
        use tokio_stream::StreamExt;
        let ids: Vec<&str> = batch
            .iter()
            .filter(|e| e.labels > 0)
            .map(|e| e.event_id.as_str())
            .collect();
        let mut labels = UnitLabels::new();
        if ids.is_empty() {
            return Ok(labels);
        }
        self.for_each_unit_sets(codebook, session_id, Some(&ids), |unit| {
            if let Some(event_id) = unit.first().map(|s| s.event_id.clone()) {
                labels.entry(event_id).or_default().0 = unit;
            }
        })
        .await?;
        let within = (3..ids.len() + 3)
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT event_id, model, score, labels, updated_at FROM label_suggestions \
             WHERE codebook = $1 AND session_id = $2 AND event_id IN ({within}) ORDER BY event_id, model"
        );
        let query = ids
            .iter()
            .fold(sqlx::query(&sql).bind(codebook).bind(session_id), |q, id| {
                q.bind(*id)
            });
        let mut rows = query.fetch(&self.pool);
        while let Some(row) = rows.next().await {
            let suggestion = suggestion_of_row(&row?)?;
            labels
                .entry(suggestion.event_id.clone())
                .or_default()
                .1
                .push(suggestion);
        }
        Ok(labels)
    }
}

/// A batch's labels by unit: (sets, suggestions).
type UnitLabels = HashMap<String, (Vec<LabelSet>, Vec<Suggestion>)>;

/// A line to write: a unit of the session (or, `unit` `None`, one it no longer has) with
/// the count of its stored sets and suggestions.
#[derive(Debug)]
struct Entry {
    event_id: String,
    unit: Option<UnitRow>,
    labels: usize,
}

/// The session's lines in order, its `units` (all, or those with labels) then its
/// orphaned units by id, cut into batches whose labels are read together: at most
/// [`BATCH_UNITS`] units with labels and [`BATCH_LABELS`] labels each, unless one unit alone
/// has more. `labeled`: the count of labels per unit id.
fn batches(units: Vec<UnitRow>, mut labeled: BTreeMap<String, usize>, all_units: bool) -> Vec<Vec<Entry>> {
    let mut entries = Vec::new();
    for mut unit in units {
        let labels = labeled.remove(&unit.event_id).unwrap_or(0);
        if all_units || labels > 0 {
            let event_id = std::mem::take(&mut unit.event_id);
            entries.push(Entry {
                event_id,
                unit: Some(unit),
                labels,
            });
        }
    }
    entries.extend(labeled.into_iter().map(|(event_id, labels)| Entry {
        event_id,
        unit: None,
        labels,
    }));
    let mut batches = Vec::new();
    let mut current = Vec::new();
    let (mut labels, mut units) = (0, 0);
    for entry in entries {
        let full = labels + entry.labels > BATCH_LABELS || units == BATCH_UNITS;
        if entry.labels > 0 && units > 0 && full {
            batches.push(std::mem::take(&mut current));
            (labels, units) = (0, 0);
        }
        if entry.labels > 0 {
            labels += entry.labels;
            units += 1;
        }
        current.push(entry);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// The line of `entry` with its (visible) sets and suggestions.
fn line(
    codebook: &str,
    session_id: &str,
    entry: Entry,
    sets: Vec<LabelSet>,
    suggestions: Vec<Suggestion>,
) -> ExportedUnit {
    let adjudicated = super::consensus::adjudicated_in_force(&sets).cloned();
    let (unit_type, text, json) = match entry.unit {
        Some(u) => (Some(u.unit_type.to_owned()), u.text, Some(u.json)),
        None => (None, String::new(), None),
    };
    ExportedUnit {
        codebook: Some(codebook.to_owned()),
        session_id: session_id.to_owned(),
        event_id: entry.event_id,
        unit_type,
        text,
        orphaned: json.is_none(),
        unit: json,
        annotations: sets,
        suggestions,
        adjudicated,
    }
}

/// Writes lines in `format` to the channel, a chunk at a time.
struct LineWriter {
    format: Format,
    out: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buffer: Vec<u8>,
    lines: usize,
}

/// Bytes gathered before a chunk is sent.
const CHUNK_BYTES: usize = 64 << 10;

impl LineWriter {
    fn new(format: Format, out: mpsc::Sender<Result<Bytes, std::io::Error>>) -> LineWriter {
        let mut buffer = Vec::with_capacity(CHUNK_BYTES);
        if format == Format::LabelStudio {
            buffer.push(b'[');
        }
        LineWriter {
            format,
            out,
            buffer,
            lines: 0,
        }
    }

    /// Adds a line; false when the receiver is gone.
    async fn write(&mut self, line: &ExportedUnit) -> Result<bool, LabelError> {
        let encoded = match self.format {
            Format::Jsonl => serde_json::to_vec(line),
            Format::LabelStudio => serde_json::to_vec(&super::labelstudio::task(line)),
        }
        .map_err(|e| LabelError::Corrupt(format!("export: {e}")))?;
        self.push(encoded).await
    }

    /// Adds `value` as a line of its own; false when the receiver is gone.
    async fn write_json(&mut self, value: &serde_json::Value) -> Result<bool, LabelError> {
        let encoded = serde_json::to_vec(value).map_err(|e| LabelError::Corrupt(format!("export: {e}")))?;
        self.push(encoded).await
    }

    /// Adds an encoded line; false when the receiver is gone.
    async fn push(&mut self, encoded: Vec<u8>) -> Result<bool, LabelError> {
        if self.format == Format::LabelStudio && self.lines > 0 {
            self.buffer.push(b',');
        }
        self.buffer.extend_from_slice(&encoded);
        if self.format == Format::Jsonl {
            self.buffer.push(b'\n');
        }
        self.lines += 1;
        if self.buffer.len() >= CHUNK_BYTES {
            let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK_BYTES));
            return Ok(self.out.send(Ok(Bytes::from(chunk))).await.is_ok());
        }
        Ok(true)
    }

    /// Sends what is left (and closes the array of a Label Studio export).
    async fn finish(mut self) {
        if self.format == Format::LabelStudio {
            self.buffer.push(b']');
        }
        if !self.buffer.is_empty() {
            let _ = self.out.send(Ok(Bytes::from(self.buffer))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(event_id: &str) -> UnitRow {
        UnitRow {
            event_id: event_id.to_owned(),
            unit_type: "user_turn",
            text: String::new(),
            json: serde_json::value::to_raw_value(&serde_json::json!({})).unwrap(),
        }
    }

    /// (event ids, labels) of each batch.
    fn shape(batches: &[Vec<Entry>]) -> Vec<(Vec<&str>, usize)> {
        batches
            .iter()
            .map(|b| {
                let ids = b.iter().map(|e| e.event_id.as_str()).collect();
                (ids, b.iter().map(|e| e.labels).sum())
            })
            .collect()
    }

    #[test]
    fn batches_keep_the_order_and_bound_the_labels_read_at_once() {
        let ids = ["u0", "u1", "u2", "u3", "u4"];
        let labeled = BTreeMap::from([
            ("u0".to_owned(), 3_000),
            ("u1".to_owned(), 2_000),
            ("u3".to_owned(), 5_000),
            ("u4".to_owned(), 1),
            ("gone".to_owned(), 10),
        ]);
        let labeled_only = batches(ids.map(unit).into(), labeled.clone(), false);
        assert_eq!(
            shape(&labeled_only),
            [
                (vec!["u0"], 3_000),
                (vec!["u1"], 2_000),
                (vec!["u3"], 5_000),
                (vec!["u4", "gone"], 11),
            ],
            "a unit with more than a batch's labels is read alone; orphans come last"
        );
        assert!(labeled_only.last().unwrap()[1].unit.is_none(), "gone is orphaned");
        let every = batches(ids.map(unit).into(), labeled, true);
        assert_eq!(
            shape(&every)[1],
            (vec!["u1", "u2"], 2_000),
            "a unit without labels rides along"
        );
    }

    #[test]
    fn batches_bound_the_units_read_at_once() {
        let units: Vec<UnitRow> = (0..1_200).map(|i| unit(&format!("u{i:04}"))).collect();
        let labeled: BTreeMap<String, usize> = (0..1_200).map(|i| (format!("u{i:04}"), 1)).collect();
        let sizes: Vec<usize> = batches(units, labeled, false).iter().map(Vec::len).collect();
        assert_eq!(sizes, [BATCH_UNITS, BATCH_UNITS, 200]);
    }
}
