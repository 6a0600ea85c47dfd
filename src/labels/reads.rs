//! Reads across the label store: suggestions, the sessions that have labels, and the
//! submitted sets agreement is computed from.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::codings::CodingTable;
use super::consensus::{opens_unit, Sight};
use super::model::{Status, Suggestion};
use super::store::{LabelError, LabelStore};

impl LabelStore {
    /// The suggestions on session `session_id` (on one unit, or all), by unit then model.
    pub async fn suggestions(
        &self,
        session_id: &str,
        event_id: Option<&str>,
    ) -> Result<Vec<Suggestion>, LabelError> {
        let mut sql =
            "SELECT event_id, model, score, labels, updated_at FROM label_suggestions WHERE session_id = $1"
                .to_owned();
        if event_id.is_some() {
            sql.push_str(" AND event_id = $2");
        }
        sql.push_str(" ORDER BY event_id, model");
        let mut query = sqlx::query(&sql).bind(session_id);
        if let Some(e) = event_id {
            query = query.bind(e);
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter().map(suggestion_of_row).collect()
    }

    /// Every session that has a set or a suggestion, sorted.
    pub async fn labeled_sessions(&self) -> Result<Vec<String>, LabelError> {
        let rows = sqlx::query(
            "SELECT session_id FROM label_sets UNION SELECT session_id FROM label_suggestions ORDER BY session_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }
}

/// The suggestion a row of `label_suggestions` holds.
pub(super) fn suggestion_of_row(row: &AnyRow) -> Result<Suggestion, LabelError> {
    let labels: String = row.try_get("labels")?;
    Ok(Suggestion {
        event_id: row.try_get("event_id")?,
        model: row.try_get("model")?,
        score: row.try_get("score")?,
        labels: serde_json::from_str(&labels)
            .map_err(|e| LabelError::Corrupt(format!("suggestion labels: {e}")))?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A stored label record's id alone (the rest of the record is not read).
#[derive(serde::Deserialize)]
struct LabelId {
    id: String,
}

impl LabelStore {
    /// The submitted sets of one session or all, streamed from the database into a
    /// [`CodingTable`]: `keep_annotator` picks annotators, `keep_label` label ids, and
    /// `sight` what the viewer may see in blind mode (for [`Sight::OwnUntilSubmitted`],
    /// the units on which one of their own sets [`opens_unit`]).
    pub async fn submitted_codings(
        &self,
        session_id: Option<&str>,
        keep_annotator: &(dyn Fn(&str) -> bool + Sync),
        keep_label: &(dyn Fn(&str) -> bool + Sync),
        sight: Sight<'_>,
    ) -> Result<CodingTable, LabelError> {
        use tokio_stream::StreamExt;
        let me = match sight {
            Sight::Nothing => return Ok(CodingTable::default()),
            Sight::Everything => None,
            Sight::OwnUntilSubmitted(me) => Some(me),
        };
        // A blind viewer's own sets that open a unit are read too (a reviewer's
        // adjudicated set is no coding, but it opens the unit).
        let mut sql = match me {
            None => {
                "SELECT session_id, event_id, annotator, status, labels FROM label_sets WHERE status = $1"
                    .to_owned()
            }
            Some(_) => "SELECT session_id, event_id, annotator, status, labels FROM label_sets \
                        WHERE (status = $1 OR (annotator = $2 AND status = $3))"
                .to_owned(),
        };
        if session_id.is_some() {
            sql.push_str(if me.is_some() {
                " AND session_id = $4"
            } else {
                " AND session_id = $2"
            });
        }
        let mut query = sqlx::query(&sql).bind(Status::Submitted.as_str());
        if let Some(me) = me {
            query = query.bind(me).bind(Status::Adjudicated.as_str());
        }
        if let Some(s) = session_id {
            query = query.bind(s);
        }
        let mut rows = query.fetch(&self.pool);
        let mut table = CodingTable::default();
        let mut opened: foldhash::HashSet<String> = Default::default();
        let mut unit = String::new();
        while let Some(row) = rows.next().await {
            let row = row?;
            let annotator: String = row.try_get("annotator")?;
            let status: String = row.try_get("status")?;
            let status =
                Status::parse(&status).ok_or_else(|| LabelError::Corrupt(format!("status {status:?}")))?;
            unit.clear();
            unit.push_str(&row.try_get::<String, _>("session_id")?);
            unit.push('\u{0}');
            unit.push_str(&row.try_get::<String, _>("event_id")?);
            if me == Some(annotator.as_str()) && opens_unit(status) {
                opened.insert(unit.clone());
            }
            if status != Status::Submitted || !keep_annotator(&annotator) {
                continue;
            }
            let labels: String = row.try_get("labels")?;
            let ids: Vec<LabelId> =
                serde_json::from_str(&labels).map_err(|e| LabelError::Corrupt(format!("labels: {e}")))?;
            let ids: Vec<String> = ids
                .into_iter()
                .map(|l| l.id)
                .filter(|id| keep_label(id))
                .collect();
            table.push(&unit, &annotator, ids);
        }
        if me.is_some() {
            table.retain_units(|unit| opened.contains(unit));
        }
        Ok(table)
    }
}
