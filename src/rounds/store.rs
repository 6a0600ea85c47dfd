//! Rounds in the label database: created with their units in one transaction, read,
//! listed, closed and reopened. Storage only: what a round holds is checked before
//! (see [`super::definition`]).

use std::collections::HashSet;

use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::definition::RoundDefinition;
use super::sample::Candidate;
use crate::labels::reads::suggestion_of_row;
use crate::labels::store::{set_of_row, SET_COLUMNS};
use crate::labels::{LabelError, LabelSet, LabelStore, Suggestion};

/// Whether a round hands out units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundStatus {
    /// Its queue hands out units.
    Open,
    /// Its queue hands out nothing; its labels stay readable and writable.
    Closed,
}

impl RoundStatus {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RoundStatus::Open => "open",
            RoundStatus::Closed => "closed",
        }
    }
}

/// A stored round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    /// Its id (`r` and 16 hex digits).
    pub id: String,
    /// What it was created as.
    #[serde(flatten)]
    pub definition: RoundDefinition,
    /// Open or closed.
    pub status: RoundStatus,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// Who created it (`None`: a request on a server without named keys).
    pub created_by: Option<String>,
    /// When it was last closed or reopened (else created).
    pub changed_at: String,
    /// How many units it holds.
    pub units: usize,
}

/// Why a round could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// No round has this id.
    #[error("no round '{0}'")]
    NotFound(String),
    /// An imported round has the id of a stored round with other units or codebook.
    #[error("a round '{0}' with other units or another codebook is already stored")]
    Different(String),
    /// The label database failed.
    #[error(transparent)]
    Labels(#[from] LabelError),
}

impl From<sqlx::Error> for RoundError {
    fn from(e: sqlx::Error) -> RoundError {
        RoundError::Labels(e.into())
    }
}

const ROUND_COLUMNS: &str = "id, definition, status, created_at, created_by, changed_at, \
     (SELECT COUNT(*) FROM round_units u WHERE u.round_id = rounds.id) AS units";

/// Units inserted per statement.
pub(super) const UNITS_PER_INSERT: usize = 500;

/// A new round's id: `r` and 16 hex digits of a digest of its name, the time and a
/// process-wide counter.
fn new_round_id(name: &str, at: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut digest = Sha256::new();
    digest.update(name.as_bytes());
    digest.update(at.as_bytes());
    digest.update(nanos.to_le_bytes());
    digest.update(std::process::id().to_le_bytes());
    digest.update(NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    format!("r{}", hex::encode(&digest.finalize()[..8]))
}

impl LabelStore {
    /// Stores a new round of `definition` holding `units` (in queue order), created by
    /// `created_by`; both in one transaction.
    pub async fn create_round(
        &self,
        definition: &RoundDefinition,
        created_by: Option<&str>,
        units: &[Candidate],
    ) -> Result<Round, RoundError> {
        let at = crate::labels::store::now();
        let id = new_round_id(&definition.name, &at);
        let json = serde_json::to_string(definition).map_err(|e| LabelError::Corrupt(e.to_string()))?;
        let _counted = self.write_in_progress();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO rounds (id, name, codebook, definition, status, created_at, created_by, changed_at) \
             VALUES ($1, $2, $3, $4, 'open', $5, $6, $5)",
        )
        .bind(&id)
        .bind(&definition.name)
        .bind(&definition.codebook)
        .bind(&json)
        .bind(&at)
        .bind(created_by)
        .execute(&mut *tx)
        .await?;
        for (chunk_index, chunk) in units.chunks(UNITS_PER_INSERT).enumerate() {
            insert_units(&mut tx, &id, chunk_index * UNITS_PER_INSERT, chunk).await?;
        }
        tx.commit().await?;
        Ok(Round {
            id,
            definition: definition.clone(),
            status: RoundStatus::Open,
            created_at: at.clone(),
            created_by: created_by.map(str::to_owned),
            changed_at: at,
            units: units.len(),
        })
    }

    /// The round `id`.
    pub async fn round(&self, id: &str) -> Result<Round, RoundError> {
        let row = sqlx::query(&format!("SELECT {ROUND_COLUMNS} FROM rounds WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(row) => round_of_row(&row),
            None => Err(RoundError::NotFound(id.to_owned())),
        }
    }

    /// Every round, newest first.
    pub async fn rounds(&self) -> Result<Vec<Round>, RoundError> {
        let rows = sqlx::query(&format!(
            "SELECT {ROUND_COLUMNS} FROM rounds ORDER BY created_at DESC, id"
        ))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(round_of_row).collect()
    }

    /// The units (`session \0 event` keys) of the rounds created blind, of session
    /// `session_id` or of every session: where a server without blind mode holds labels
    /// blind all the same, whichever route reads them.
    pub async fn blind_round_units(&self, session_id: Option<&str>) -> Result<HashSet<String>, RoundError> {
        let blind = self.rounds().await?.into_iter().filter(|r| r.definition.blind);
        let mut units = HashSet::new();
        for round in blind {
            let rows = match session_id {
                Some(session_id) => sqlx::query(
                    "SELECT session_id, event_id FROM round_units WHERE round_id = $1 AND session_id = $2",
                )
                .bind(round.id)
                .bind(session_id)
                .fetch_all(self.pool())
                .await?,
                None => {
                    sqlx::query("SELECT session_id, event_id FROM round_units WHERE round_id = $1")
                        .bind(round.id)
                        .fetch_all(self.pool())
                        .await?
                }
            };
            for row in rows {
                let (session, event): (String, String) = (row.try_get(0)?, row.try_get(1)?);
                units.insert(format!("{session}\0{event}"));
            }
        }
        Ok(units)
    }

    /// Opens or closes the round `id`; the round as it is now.
    pub async fn set_round_status(&self, id: &str, status: RoundStatus) -> Result<Round, RoundError> {
        let _counted = self.write_in_progress();
        let done = sqlx::query("UPDATE rounds SET status = $1, changed_at = $2 WHERE id = $3")
            .bind(status.as_str())
            .bind(crate::labels::store::now())
            .bind(id)
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(RoundError::NotFound(id.to_owned()));
        }
        self.round(id).await
    }

    /// The units of round `id`, in queue order.
    pub async fn round_units(&self, id: &str) -> Result<Vec<Candidate>, RoundError> {
        let rows = sqlx::query(
            "SELECT session_id, event_id, unit_type FROM round_units WHERE round_id = $1 ORDER BY position",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Candidate {
                    session_id: row.try_get(0)?,
                    event_id: row.try_get(1)?,
                    unit_type: row.try_get(2)?,
                })
            })
            .collect::<Result<Vec<Candidate>, sqlx::Error>>()
            .map_err(RoundError::from)
    }
}

impl LabelStore {
    /// Every set under `codebook` on the units of round `id`, with its session: what the
    /// round's progress counts.
    pub async fn round_sets(&self, id: &str, codebook: &str) -> Result<Vec<(String, LabelSet)>, RoundError> {
        let columns = SET_COLUMNS
            .split(", ")
            .map(|c| format!("s.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = sqlx::query(&format!(
            "SELECT s.session_id AS round_session, {columns} FROM label_sets s \
             JOIN round_units u ON u.session_id = s.session_id AND u.event_id = s.event_id \
             WHERE u.round_id = $1 AND s.codebook = $2 ORDER BY u.position, s.annotator"
        ))
        .bind(id)
        .bind(codebook)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("round_session")?, set_of_row(row)?)))
            .collect()
    }
}

impl LabelStore {
    /// Every suggestion under `codebook` on the units of round `id`, with its session.
    pub async fn round_suggestions(
        &self,
        id: &str,
        codebook: &str,
    ) -> Result<Vec<(String, Suggestion)>, RoundError> {
        let rows = sqlx::query(
            "SELECT s.session_id AS round_session, s.event_id, s.model, s.score, s.labels, s.updated_at \
             FROM label_suggestions s \
             JOIN round_units u ON u.session_id = s.session_id AND u.event_id = s.event_id \
             WHERE u.round_id = $1 AND s.codebook = $2 ORDER BY u.position, s.model",
        )
        .bind(id)
        .bind(codebook)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("round_session")?, suggestion_of_row(row)?)))
            .collect()
    }
}

/// Inserts `units` as the round's units from position `first` on.
pub(super) async fn insert_units(
    conn: &mut sqlx::AnyConnection,
    round_id: &str,
    first: usize,
    units: &[Candidate],
) -> Result<(), sqlx::Error> {
    let values: Vec<String> = (0..units.len())
        .map(|i| {
            let p = 1 + i * 5;
            format!("(${}, ${}, ${}, ${}, ${})", p, p + 1, p + 2, p + 3, p + 4)
        })
        .collect();
    let sql = format!(
        "INSERT INTO round_units (round_id, position, session_id, event_id, unit_type) VALUES {}",
        values.join(", ")
    );
    let mut query = sqlx::query(&sql);
    for (i, unit) in units.iter().enumerate() {
        query = query
            .bind(round_id)
            .bind((first + i) as i64)
            .bind(&unit.session_id)
            .bind(&unit.event_id)
            .bind(&unit.unit_type);
    }
    query.execute(&mut *conn).await?;
    Ok(())
}

/// The round a row of [`ROUND_COLUMNS`] holds.
fn round_of_row(row: &AnyRow) -> Result<Round, RoundError> {
    let definition: String = row.try_get("definition")?;
    let status: String = row.try_get("status")?;
    let units: i64 = row.try_get("units")?;
    Ok(Round {
        id: row.try_get("id")?,
        definition: serde_json::from_str(&definition)
            .map_err(|e| LabelError::Corrupt(format!("round definition: {e}")))?,
        status: match status.as_str() {
            "open" => RoundStatus::Open,
            "closed" => RoundStatus::Closed,
            other => return Err(LabelError::Corrupt(format!("round status {other:?}")).into()),
        },
        created_at: row.try_get("created_at")?,
        created_by: row.try_get("created_by")?,
        changed_at: row.try_get("changed_at")?,
        units: usize::try_from(units).unwrap_or(0),
    })
}
