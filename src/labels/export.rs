//! The label export: one line per unit, the unit as its annotations body shows it with
//! every annotator's set, the suggestions and the adjudicated set, streamed session by
//! session.
//!
//! Memory: one session's units and labels at a time (plus the channel's few lines), however
//! many sessions the store holds. Sessions come in id order; within a session, units in
//! session order, then the units the session no longer has (orphaned, labels kept) by id.

use std::future::Future;

use bytes::Bytes;
use foldhash::{HashMap, HashMapExt};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::model::{ExportedUnit, LabelSet, Status, Suggestion};
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

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ExportScope {
    /// Only this session.
    pub session_id: Option<String>,
    /// Every unit of the sessions, labeled or not (default: units with labels or
    /// suggestions only).
    pub all_units: bool,
}

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
        for session_id in self.export_sessions(source, scope).await? {
            let sets = self.list(&session_id).await?;
            let suggestions = self.suggestions(&session_id, None).await?;
            if !scope.all_units && sets.is_empty() && suggestions.is_empty() {
                continue;
            }
            let units = source.unit_rows(&session_id).await.unwrap_or_default();
            for line in session_lines(&session_id, units, sets, suggestions, scope.all_units) {
                if !writer.write(&line).await? {
                    return Ok(());
                }
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
            return Ok(vec![id.clone()]);
        }
        let mut ids = self.labeled_sessions().await?;
        if scope.all_units {
            ids.extend(source.session_ids());
            ids.sort();
            ids.dedup();
        }
        Ok(ids)
    }
}

/// The lines of one session: its units in order (all, or those with labels or
/// suggestions), then its orphaned units by id.
pub fn session_lines(
    session_id: &str,
    units: Vec<UnitRow>,
    sets: Vec<LabelSet>,
    suggestions: Vec<Suggestion>,
    all_units: bool,
) -> Vec<ExportedUnit> {
    let mut sets_of: HashMap<String, Vec<LabelSet>> = HashMap::new();
    for set in sets {
        sets_of.entry(set.event_id.clone()).or_default().push(set);
    }
    let mut suggestions_of: HashMap<String, Vec<Suggestion>> = HashMap::new();
    for s in suggestions {
        suggestions_of.entry(s.event_id.clone()).or_default().push(s);
    }
    let mut lines = Vec::new();
    for unit in units {
        let sets = sets_of.remove(&unit.event_id).unwrap_or_default();
        let suggestions = suggestions_of.remove(&unit.event_id).unwrap_or_default();
        if all_units || !sets.is_empty() || !suggestions.is_empty() {
            lines.push(line(session_id, Some(unit), sets, suggestions));
        }
    }
    let mut orphaned: Vec<String> = sets_of.keys().chain(suggestions_of.keys()).cloned().collect();
    orphaned.sort();
    orphaned.dedup();
    for event_id in orphaned {
        let sets = sets_of.remove(&event_id).unwrap_or_default();
        let suggestions = suggestions_of.remove(&event_id).unwrap_or_default();
        lines.push(orphan_line(session_id, event_id, sets, suggestions));
    }
    lines
}

/// The line of a unit the session has.
fn line(
    session_id: &str,
    unit: Option<UnitRow>,
    sets: Vec<LabelSet>,
    suggestions: Vec<Suggestion>,
) -> ExportedUnit {
    let adjudicated = sets
        .iter()
        .filter(|s| s.status == Status::Adjudicated)
        .max_by(|a, b| (&a.updated_at, a.version).cmp(&(&b.updated_at, b.version)))
        .cloned();
    let (event_id, unit_type, text, json) = match unit {
        Some(u) => (u.event_id, Some(u.unit_type.to_owned()), u.text, Some(u.json)),
        None => (String::new(), None, String::new(), None),
    };
    ExportedUnit {
        session_id: session_id.to_owned(),
        event_id,
        unit_type,
        text,
        orphaned: json.is_none(),
        unit: json,
        annotations: sets,
        suggestions,
        adjudicated,
    }
}

/// The line of labels on unit `event_id`, which the session no longer has.
fn orphan_line(
    session_id: &str,
    event_id: String,
    sets: Vec<LabelSet>,
    suggestions: Vec<Suggestion>,
) -> ExportedUnit {
    ExportedUnit {
        event_id,
        ..line(session_id, None, sets, suggestions)
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
