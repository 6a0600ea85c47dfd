//! A round carried in a JSONL export and back: the export's first line is
//! `{"round": {...}, "units": [...]}` (the round as `GET /api/rounds/{id}` shows it, and
//! its units in queue order); an import whose first line is one creates the round, with
//! its id, before the units' labels.

use serde::Deserialize;

use super::definition::{RoundDefinition, MAX_UNITS};
use super::sample::Candidate;
use super::store::{insert_units, RoundError, RoundStatus, UNITS_PER_INSERT};
use crate::labels::import::is_round_header_line;
use crate::labels::import_body::within_values;
use crate::labels::validate::{invalid, Invalid};
use crate::labels::{LabelError, LabelStore};

/// A round as an export's first line carries it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RoundHeader {
    /// The round.
    pub round: ExportedRound,
    /// Its units, in queue order.
    pub units: Vec<Candidate>,
}

/// The round of a [`RoundHeader`]: what makes it the same round in another store.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExportedRound {
    /// Its id.
    pub id: String,
    /// Its definition.
    #[serde(flatten)]
    pub definition: RoundDefinition,
    /// Open or closed.
    pub status: RoundStatus,
    /// When it was created.
    pub created_at: String,
    /// Who created it.
    #[serde(default)]
    pub created_by: Option<String>,
}

/// JSON values a round header may hold: its units' (four each) and room for its
/// definition. Counted before anything of the line is built.
const MAX_HEADER_VALUES: usize = 4 * MAX_UNITS + 50_000;

/// The round header `line` holds; `None` when it holds none (the line is probed without
/// being built: only a header is, once its values are counted).
pub fn round_header(line: &str) -> Option<Result<RoundHeader, Invalid>> {
    if !is_round_header_line(line) {
        return None;
    }
    if !matches!(within_values(line, MAX_HEADER_VALUES), Ok(true)) {
        return Some(Err(invalid(
            "round",
            format!("the round's line holds more than {MAX_HEADER_VALUES} JSON values"),
        )));
    }
    Some(parse(line))
}

fn parse(line: &str) -> Result<RoundHeader, Invalid> {
    let header: RoundHeader =
        serde_json::from_str(line).map_err(|e| invalid("round", format!("not a round of an export: {e}")))?;
    let id = &header.round.id;
    let valid_id = id.len() == 17 && id.starts_with('r') && id[1..].bytes().all(|b| b.is_ascii_hexdigit());
    if !valid_id {
        return Err(invalid("round.id", "must be `r` and 16 hex digits"));
    }
    if header.units.is_empty() || header.units.len() > MAX_UNITS {
        return Err(invalid("units", "must list the round's units"));
    }
    Ok(header)
}

impl LabelStore {
    /// Stores the round `header` carries, with its id, status and units, unless a round of
    /// that id exists; true when it was stored. A round of that id with other units is
    /// [`RoundError::Different`]: an export of another store's round, not this one.
    pub async fn import_round(&self, header: &RoundHeader) -> Result<bool, RoundError> {
        let round = &header.round;
        if let Ok(existing) = self.round(&round.id).await {
            let units = self.round_units(&existing.id).await?;
            if units != header.units || existing.definition.codebook != round.definition.codebook {
                return Err(RoundError::Different(round.id.clone()));
            }
            return Ok(false);
        }
        let json =
            serde_json::to_string(&round.definition).map_err(|e| LabelError::Corrupt(e.to_string()))?;
        let now = crate::labels::store::now();
        let _counted = self.write_in_progress();
        let mut tx = self.pool().begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO rounds (id, name, codebook, definition, status, created_at, created_by, changed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&round.id)
        .bind(&round.definition.name)
        .bind(&round.definition.codebook)
        .bind(&json)
        .bind(round.status.as_str())
        .bind(&round.created_at)
        .bind(round.created_by.as_deref())
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            tx.commit().await?;
            return Ok(false);
        }
        for (chunk_index, chunk) in header.units.chunks(UNITS_PER_INSERT).enumerate() {
            insert_units(&mut tx, &round.id, chunk_index * UNITS_PER_INSERT, chunk).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_header_line_is_told_apart_from_a_units_line() {
        let header = json!({
            "round": {
                "id": "r0123456789abcdef", "name": "pilot", "codebook": "speechact",
                "codebook_version": "sha256:00", "guidelines": "", "selection": { "sessions": ["s"] },
                "sample": { "size": 1, "seed": 1 }, "overlap": 2, "annotators": null, "blind": false,
                "reservation_secs": 600, "status": "closed", "created_at": "2026-01-01T00:00:00.000Z",
                "created_by": null, "changed_at": "2026-01-01T00:00:00.000Z", "units": 1, "progress": {}
            },
            "units": [{ "session_id": "s", "event_id": "U:1", "unit_type": "user_turn" }]
        });
        let read = round_header(&header.to_string()).unwrap().unwrap();
        assert!(
            round_header(&format!(
                r#"{{"session_id":"s","round":1,"units":[{}0]}}"#,
                "0,".repeat(1000)
            ))
            .is_none(),
            "a unit's line naming a round is no header"
        );
        assert_eq!(read.round.id, "r0123456789abcdef");
        assert_eq!(read.round.status, RoundStatus::Closed);
        assert_eq!(read.round.definition.codebook, "speechact");
        assert_eq!(read.units.len(), 1);
        assert!(round_header(r#"{"session_id":"s","event_id":"U:1","annotations":[]}"#).is_none());
        assert!(round_header("not json").is_none());
        let mut bad = header.clone();
        bad["round"]["id"] = json!("../x");
        assert_eq!(
            round_header(&bad.to_string()).unwrap().unwrap_err().field,
            "round.id"
        );
    }
}
