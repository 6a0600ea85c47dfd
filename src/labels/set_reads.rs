//! A session's sets read in bulk, a unit at a time: what [`LabelStore::list`], the export
//! and (on PostgreSQL, which keeps no sets in memory) the annotations body read.
//!
//! SQLite hands its rows over one at a time from its connection's thread, a switch
//! between threads per row: reading 2.6 million sets cost more switching than reading.
//! On SQLite the database therefore packs each unit's sets into one JSON array (one row
//! per unit, in the primary key's order); PostgreSQL's rows are streamed.

use serde::Deserialize;
use sqlx::Row;

use super::model::{LabelRecord, LabelSet, Status};
use super::store::{set_of_row, Backend, LabelError, LabelStore, SET_COLUMNS};

/// A set as SQLite packs it: `[event_id, annotator, status, labels, note, lead_time_ms,
/// version, updated_at, codebook_version]`, the labels as stored (JSON).
#[derive(Deserialize)]
struct PackedSet(
    String,
    String,
    String,
    Vec<LabelRecord>,
    Option<String>,
    Option<i64>,
    i64,
    String,
    Option<String>,
);

impl PackedSet {
    fn into_set(self) -> Result<LabelSet, LabelError> {
        let PackedSet(
            event_id,
            annotator,
            status,
            labels,
            note,
            lead_time_ms,
            version,
            updated_at,
            codebook_version,
        ) = self;
        Ok(LabelSet {
            event_id,
            annotator,
            status: Status::parse(&status)
                .ok_or_else(|| LabelError::Corrupt(format!("status {status:?}")))?,
            labels,
            note,
            lead_time: lead_time_ms.map(|ms| ms as f64 / 1000.0),
            version,
            updated_at,
            codebook_version,
        })
    }
}

/// `AND event_id IN ($3, ...)` for `count` units (nothing for `None`: every unit).
fn units_condition(count: Option<usize>) -> String {
    match count {
        None => String::new(),
        Some(n) => {
            let within: Vec<String> = (3..n + 3).map(|i| format!("${i}")).collect();
            format!(" AND event_id IN ({})", within.join(", "))
        }
    }
}

impl LabelStore {
    /// The number of sets of session `session_id` under `codebook` (counted by the
    /// database).
    pub(super) async fn count_sets(&self, codebook: &str, session_id: &str) -> Result<usize, LabelError> {
        let row = sqlx::query("SELECT COUNT(*) FROM label_sets WHERE codebook = $1 AND session_id = $2")
            .bind(codebook)
            .bind(session_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(usize::try_from(row.try_get::<i64, _>(0)?).unwrap_or(0))
    }

    /// The sets under `codebook` of session `session_id` on the units `event_ids` (every
    /// unit: `None`), unit by unit in event id order, each unit's by annotator, handed to
    /// `each`: the session's sets are never all held at once.
    pub async fn for_each_unit_sets(
        &self,
        codebook: &str,
        session_id: &str,
        event_ids: Option<&[&str]>,
        each: impl FnMut(Vec<LabelSet>),
    ) -> Result<(), LabelError> {
        match self.backend() {
            Backend::Sqlite => self.packed_unit_sets(codebook, session_id, event_ids, each).await,
            Backend::Postgres => {
                self.streamed_unit_sets(codebook, session_id, event_ids, each)
                    .await
            }
        }
    }

    /// SQLite: each unit's sets packed into one row.
    async fn packed_unit_sets(
        &self,
        codebook: &str,
        session_id: &str,
        event_ids: Option<&[&str]>,
        mut each: impl FnMut(Vec<LabelSet>),
    ) -> Result<(), LabelError> {
        use tokio_stream::StreamExt;
        let sql = format!(
            "SELECT json_group_array(json_array(event_id, annotator, status, json(labels), note, lead_time_ms, \
             version, updated_at, codebook_version)) FROM label_sets WHERE codebook = $1 AND session_id = $2{} \
             GROUP BY event_id ORDER BY event_id",
            units_condition(event_ids.map(<[&str]>::len))
        );
        let query = sqlx::query(&sql).bind(codebook).bind(session_id);
        let query = event_ids
            .unwrap_or_default()
            .iter()
            .fold(query, |q, id| q.bind(*id));
        let mut rows = query.fetch(&self.pool);
        while let Some(row) = rows.next().await {
            let packed: Vec<PackedSet> = serde_json::from_str(row?.try_get(0)?)
                .map_err(|e| LabelError::Corrupt(format!("packed sets: {e}")))?;
            let mut unit = packed
                .into_iter()
                .map(PackedSet::into_set)
                .collect::<Result<Vec<LabelSet>, LabelError>>()?;
            // The aggregate keeps the index's order; sorted again so as not to rely on it.
            unit.sort_by(|a, b| a.annotator.cmp(&b.annotator));
            each(unit);
        }
        Ok(())
    }

    /// PostgreSQL: the sets row by row, gathered into units.
    async fn streamed_unit_sets(
        &self,
        codebook: &str,
        session_id: &str,
        event_ids: Option<&[&str]>,
        mut each: impl FnMut(Vec<LabelSet>),
    ) -> Result<(), LabelError> {
        use tokio_stream::StreamExt;
        let sql = format!(
            "SELECT {SET_COLUMNS} FROM label_sets WHERE codebook = $1 AND session_id = $2{} \
             ORDER BY event_id, annotator",
            units_condition(event_ids.map(<[&str]>::len))
        );
        let query = sqlx::query(&sql).bind(codebook).bind(session_id);
        let query = event_ids
            .unwrap_or_default()
            .iter()
            .fold(query, |q, id| q.bind(*id));
        let mut rows = query.fetch(&self.pool);
        let mut unit: Vec<LabelSet> = Vec::new();
        while let Some(row) = rows.next().await {
            let set = set_of_row(&row?)?;
            if unit.last().is_some_and(|last| last.event_id != set.event_id) {
                each(std::mem::take(&mut unit));
            }
            unit.push(set);
        }
        if !unit.is_empty() {
            each(unit);
        }
        Ok(())
    }
}
