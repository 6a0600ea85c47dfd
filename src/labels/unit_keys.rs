//! The units a label filter names (labeled by anyone or by one annotator, with one label):
//! what search restricts its matches to, or leaves out.

use sqlx::Row;

use super::model::Status;
use super::store::{LabelError, LabelStore};

/// A stored label record's id alone (the rest of the record is not read).
#[derive(serde::Deserialize)]
struct LabelId {
    id: String,
}

impl LabelStore {
    /// The units with a submitted or adjudicated set under `codebook` (drafts and skips
    /// are no labels): of `annotator` when given, and holding the label `label` when given.
    /// Each unit once, as `(session_id, event_id)`, sorted.
    pub async fn unit_keys(
        &self,
        annotator: Option<&str>,
        label: Option<&str>,
        codebook: &str,
    ) -> Result<Vec<(String, String)>, LabelError> {
        let mut sql = "SELECT session_id, event_id, labels FROM label_sets \
                       WHERE codebook = $1 AND status IN ($2, $3)"
            .to_owned();
        let mut next = 4;
        if annotator.is_some() {
            sql.push_str(&format!(" AND annotator = ${next}"));
            next += 1;
        }
        // Sets are written as serde_json writes a record, its id first and unspaced: the
        // database skips the sets that cannot hold the label, each row read is checked.
        let pattern = label.map(|l| format!("%\"id\":\"{}\"%", escape_like(l)));
        if pattern.is_some() {
            sql.push_str(&format!(" AND labels LIKE ${next} ESCAPE '\\'"));
        }
        let mut query = sqlx::query(&sql)
            .bind(codebook)
            .bind(Status::Submitted.as_str())
            .bind(Status::Adjudicated.as_str());
        if let Some(annotator) = annotator {
            query = query.bind(annotator);
        }
        if let Some(pattern) = &pattern {
            query = query.bind(pattern.as_str());
        }
        let rows = query.fetch_all(&self.pool).await?;
        let mut keys = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(label) = label {
                let ids: Vec<LabelId> = serde_json::from_str(row.try_get("labels")?)
                    .map_err(|e| LabelError::Corrupt(format!("labels: {e}")))?;
                if !ids.iter().any(|l| l.id == label) {
                    continue;
                }
            }
            keys.push((row.try_get("session_id")?, row.try_get("event_id")?));
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }
}

/// `text` matched literally by `LIKE ... ESCAPE '\'`.
fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_wildcards_are_matched_literally() {
        assert_eq!(escape_like("EXEC_COGNITIVE"), "EXEC\\_COGNITIVE");
        assert_eq!(escape_like("50%\\x"), "50\\%\\\\x");
        assert_eq!(escape_like("plain"), "plain");
    }
}
