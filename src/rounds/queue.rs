//! A round's queue: the next of the round's units for an annotator, in the round's order,
//! each going to the round's overlap of annotators, under the round's codebook.
//!
//! The rules are the session queue's (see [`crate::labels::queue`]): a unit is held by an
//! annotator who submitted a set on it under the codebook or holds a live reservation of
//! it; it goes to an annotator who has not completed it while fewer than `overlap` hold
//! it; an annotator asking again gets their live reservation back. A set written outside
//! the round (same codebook, same unit) counts: a set is per unit, not per round. Asking
//! is serialised per codebook, with the session queues and the other rounds of the
//! codebook (`take_turn`): they may hand out the same units.

use sqlx::Row;

use super::store::{Round, RoundError};
use crate::labels::queue::{reserve, take_turn, Holds, QueueAsk, Reservation};
use crate::labels::LabelStore;

/// Unit keys of a round: session and event id joined by NUL (neither holds one).
fn unit_key(session_id: &str, event_id: &str) -> String {
    format!("{session_id}\0{event_id}")
}

impl LabelStore {
    /// The next unit of `round` for `ask.annotator` (whose codebook must be the round's),
    /// reserved for them; `None` when none is left for them. The round is taken as open
    /// and the annotator as assigned (the caller checks both).
    pub async fn next_round_unit(
        &self,
        round: &Round,
        ask: QueueAsk<'_>,
    ) -> Result<Option<Reservation>, RoundError> {
        let _counted = self.write_in_progress();
        let mut tx = self.pool().begin().await?;
        take_turn(&mut tx, ask.codebook).await?;
        let units = round_unit_keys(&mut tx, &round.id).await?;
        let holds = read_holds(&mut tx, &round.id, ask).await?;
        let keys: Vec<&str> = units.iter().map(|(key, _, _)| key.as_str()).collect();
        let Some((chosen, remaining)) = holds.pick(&keys, ask) else {
            tx.commit().await?;
            return Ok(None);
        };
        let Some((_, session_id, event_id)) = units.into_iter().find(|(key, _, _)| *key == chosen) else {
            tx.commit().await?;
            return Ok(None);
        };
        let expires_at_ms = reserve(&mut tx, ask, &session_id, &event_id).await?;
        tx.commit().await?;
        Ok(Some(Reservation {
            session_id,
            event_id,
            annotator: ask.annotator.to_owned(),
            expires_at_ms,
            remaining,
        }))
    }
}

/// The round's units as (key, session, event), in queue order.
async fn round_unit_keys(
    conn: &mut sqlx::AnyConnection,
    round_id: &str,
) -> Result<Vec<(String, String, String)>, RoundError> {
    let rows =
        sqlx::query("SELECT session_id, event_id FROM round_units WHERE round_id = $1 ORDER BY position")
            .bind(round_id)
            .fetch_all(&mut *conn)
            .await?;
    rows.iter()
        .map(|row| {
            let (session_id, event_id): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            Ok((unit_key(&session_id, &event_id), session_id, event_id))
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(RoundError::from)
}

/// Who holds which of the round's units, in one statement (one snapshot), live
/// reservations only.
async fn read_holds(
    conn: &mut sqlx::AnyConnection,
    round_id: &str,
    ask: QueueAsk<'_>,
) -> Result<Holds, RoundError> {
    let rows = sqlx::query(
        "SELECT s.session_id, s.event_id, s.annotator, s.status FROM label_sets s \
         JOIN round_units u ON u.session_id = s.session_id AND u.event_id = s.event_id \
         WHERE u.round_id = $1 AND s.codebook = $2 AND s.status <> 'draft' \
         UNION ALL SELECT r.session_id, r.event_id, r.annotator, 'reserved' FROM label_reservations r \
         JOIN round_units u ON u.session_id = r.session_id AND u.event_id = r.event_id \
         WHERE u.round_id = $1 AND r.codebook = $2 AND r.expires_at > $3",
    )
    .bind(round_id)
    .bind(ask.codebook)
    .bind(ask.now_ms)
    .fetch_all(&mut *conn)
    .await?;
    let rows = rows
        .iter()
        .map(|row| {
            let (session_id, event_id): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            Ok((unit_key(&session_id, &event_id), row.try_get(2)?, row.try_get(3)?))
        })
        .collect::<Result<Vec<(String, String, String)>, sqlx::Error>>()?;
    Ok(Holds::of_rows(rows, ask.annotator))
}
