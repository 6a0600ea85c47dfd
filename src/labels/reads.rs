//! Reads across the label store: suggestions, the sessions that have labels, and the sets
//! agreement, progress and export are computed from.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::model::{Status, Suggestion};
use super::store::{set_of_row, LabelError, LabelStore, SET_COLUMNS};
use super::LabelSet;

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

    /// True when session `session_id` has at least one set.
    pub async fn has_sets(&self, session_id: &str) -> Result<bool, LabelError> {
        let row = sqlx::query("SELECT 1 FROM label_sets WHERE session_id = $1 LIMIT 1")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// The sets in one of `statuses` (every status when empty), of one session or all, by
    /// session, unit and annotator.
    pub async fn sets_in(
        &self,
        session_id: Option<&str>,
        statuses: &[Status],
    ) -> Result<Vec<(String, LabelSet)>, LabelError> {
        let mut sql = format!("SELECT session_id, {SET_COLUMNS} FROM label_sets WHERE 1 = 1");
        let mut binds: Vec<&str> = Vec::new();
        if let Some(s) = session_id {
            binds.push(s);
            sql.push_str(&format!(" AND session_id = ${}", binds.len()));
        }
        if !statuses.is_empty() {
            let slots: Vec<String> = statuses
                .iter()
                .map(|st| {
                    binds.push(st.as_str());
                    format!("${}", binds.len())
                })
                .collect();
            sql.push_str(&format!(" AND status IN ({})", slots.join(", ")));
        }
        sql.push_str(" ORDER BY session_id, event_id, annotator");
        let mut query = sqlx::query(&sql);
        for b in binds {
            query = query.bind(b);
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| Ok((r.try_get("session_id")?, set_of_row(r)?)))
            .collect()
    }
}

fn suggestion_of_row(row: &AnyRow) -> Result<Suggestion, LabelError> {
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
