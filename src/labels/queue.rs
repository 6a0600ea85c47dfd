//! The labeling queue: hands each annotator the next unit to label, so that no unit is
//! taken by more annotators than the overlap asks for.
//!
//! A unit is *held* by an annotator who submitted a set on it or holds a live reservation
//! of it. The next unit for annotator A, in session order, is the first that A has not
//! submitted, discarded or adjudicated, that A does not hold, and that fewer than `overlap`
//! annotators hold; it is reserved for A until the reservation expires, A submits or
//! discards a set on it, or A releases it. An annotator who asks again while holding a live
//! reservation in the session gets the same unit back (with a new expiry), so a reload does
//! not take a second one. A draft does not complete a unit: it comes back.
//!
//! Asking is serialised per codebook: the transaction first bumps the codebook's row in
//! `label_queue_turns` (`take_turn`), which takes SQLite's write lock or the row's lock
//! in PostgreSQL, so two annotators asking at once are answered one after the other, each
//! seeing the other's reservation. Per codebook, not per session or round: a unit is in
//! its session's queue and in the queue of every round that holds it, and its holders are
//! counted across them all (reservations and sets are per codebook), so every queue that
//! may hand it out takes the same turn.

use foldhash::{HashMap, HashSet};
use serde::Serialize;
use sqlx::Row;

use super::model::SetKey;
use super::store::{LabelError, LabelStore};

/// Largest overlap the queue takes (`--queue-overlap`).
pub const MAX_OVERLAP: usize = 100;

/// A unit handed out by the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reservation {
    /// The session.
    pub session_id: String,
    /// The unit.
    pub event_id: String,
    /// Who holds it.
    pub annotator: String,
    /// When the reservation ends unless the unit is submitted (Unix milliseconds).
    pub expires_at_ms: i64,
    /// Units of the session the annotator could still be handed after this one.
    pub remaining: usize,
}

/// What the queue is asked.
#[derive(Debug, Clone, Copy)]
pub struct QueueAsk<'a> {
    /// The codebook the unit is to be labeled under: a unit done under one is still open
    /// under another.
    pub codebook: &'a str,
    /// Who asks.
    pub annotator: &'a str,
    /// How many annotators each unit should get.
    pub overlap: usize,
    /// How long a reservation lasts, in milliseconds.
    pub reservation_ms: i64,
    /// Now, in Unix milliseconds.
    pub now_ms: i64,
}

impl LabelStore {
    /// The next unit of `session_id` (whose units, in session order, are `units`) for
    /// `ask.annotator`, reserved for them; `None` when the session has none left for them.
    /// The session and the annotator are taken as given (see
    /// [`super::validate::check_annotator`]).
    pub async fn next_unit(
        &self,
        session_id: &str,
        units: &[&str],
        ask: QueueAsk<'_>,
    ) -> Result<Option<Reservation>, LabelError> {
        // A unit whose id holds NUL can hold no label: it is not handed out.
        let units: Vec<&str> = units.iter().copied().filter(|u| !u.contains('\0')).collect();
        let units = units.as_slice();
        let _counted = self.write_in_progress();
        let mut tx = self.pool.begin().await?;
        take_turn(&mut tx, ask.codebook).await?;
        sqlx::query("DELETE FROM label_reservations WHERE session_id = $1 AND expires_at <= $2")
            .bind(session_id)
            .bind(ask.now_ms)
            .execute(&mut *tx)
            .await?;
        let holds = Holds::read(&mut tx, ask.codebook, session_id, ask.annotator).await?;
        let Some((event_id, remaining)) = holds.pick(units, ask) else {
            tx.commit().await?;
            return Ok(None);
        };
        let expires_at_ms = reserve(&mut tx, ask, session_id, &event_id).await?;
        tx.commit().await?;
        Ok(Some(Reservation {
            session_id: session_id.to_owned(),
            event_id,
            annotator: ask.annotator.to_owned(),
            expires_at_ms,
            remaining,
        }))
    }

    /// Ends the reservation of the set `key` names (its annotator's, of its unit, under its
    /// codebook); false when there was none. The key is taken as given (see
    /// [`super::validate::check_key`]).
    pub async fn release(&self, key: SetKey<'_>) -> Result<bool, LabelError> {
        let _counted = self.write_in_progress();
        let done = sqlx::query(
            "DELETE FROM label_reservations \
             WHERE codebook = $1 AND session_id = $2 AND event_id = $3 AND annotator = $4",
        )
        .bind(key.codebook)
        .bind(key.session_id)
        .bind(key.event_id)
        .bind(key.annotator)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// Takes the turn of the queues of `codebook` (every session's and every round's), inside
/// the caller's transaction: bumping the row `codebook:<id>` of `label_queue_turns` takes
/// SQLite's write lock or the row's lock in PostgreSQL, so that askers of any queue that
/// may hand out the same unit are served one at a time. (Locked per session and per round
/// instead, a round's queue and its sessions' queue, or two rounds holding one unit, each
/// read the unit's holders before the other's reservation was committed, and both
/// reserved it beyond the overlap.)
pub(crate) async fn take_turn(conn: &mut sqlx::AnyConnection, codebook: &str) -> Result<(), sqlx::Error> {
    let lock = format!("codebook:{codebook}");
    sqlx::query(
        "INSERT INTO label_queue_turns (session_id, turns) VALUES ($1, 0) \
         ON CONFLICT (session_id) DO NOTHING",
    )
    .bind(&lock)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE label_queue_turns SET turns = turns + 1 WHERE session_id = $1")
        .bind(&lock)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Reserves unit `event_id` of session `session_id` for `ask.annotator` under
/// `ask.codebook` (a reservation held already gets the new expiry); the expiry, in Unix
/// milliseconds.
pub(crate) async fn reserve(
    conn: &mut sqlx::AnyConnection,
    ask: QueueAsk<'_>,
    session_id: &str,
    event_id: &str,
) -> Result<i64, sqlx::Error> {
    let expires_at_ms = ask.now_ms + ask.reservation_ms;
    sqlx::query(
        "INSERT INTO label_reservations (codebook, session_id, event_id, annotator, expires_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (codebook, session_id, event_id, annotator) \
         DO UPDATE SET expires_at = excluded.expires_at",
    )
    .bind(ask.codebook)
    .bind(session_id)
    .bind(event_id)
    .bind(ask.annotator)
    .bind(expires_at_ms)
    .execute(&mut *conn)
    .await?;
    Ok(expires_at_ms)
}

/// Who holds which unit, as the queue sees it: of a session's units (keyed by event id), or
/// of a round's (keyed by any unit key its caller chooses).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// Per unit, the annotators holding it (submitted or live reservation).
    holders: HashMap<String, HashSet<String>>,
    /// Units the asking annotator has completed (submitted, discarded, adjudicated).
    done: HashSet<String>,
    /// The unit the asking annotator holds a live reservation of, if any.
    reserved: Option<String>,
}

impl Holds {
    /// The holds of `rows` (unit key, annotator, status: a set's status other than draft,
    /// or `reserved` for a live reservation) as `annotator` sees them.
    pub(crate) fn of_rows(
        rows: impl IntoIterator<Item = (String, String, String)>,
        annotator: &str,
    ) -> Holds {
        let mut holds = Holds::default();
        let mut reserved = Vec::new();
        for (unit, who, status) in rows {
            match status.as_str() {
                "reserved" => reserved.push((unit, who)),
                "submitted" => {
                    if who == annotator {
                        holds.done.insert(unit.clone());
                    }
                    holds.holders.entry(unit).or_default().insert(who);
                }
                _ if who == annotator => {
                    holds.done.insert(unit);
                }
                _ => {}
            }
        }
        for (unit, who) in reserved {
            if who == annotator && !holds.done.contains(&unit) {
                holds.reserved = Some(unit.clone());
            }
            holds.holders.entry(unit).or_default().insert(who);
        }
        holds
    }

    async fn read(
        conn: &mut sqlx::AnyConnection,
        codebook: &str,
        session_id: &str,
        annotator: &str,
    ) -> Result<Holds, LabelError> {
        // One statement, so one snapshot: a submit commits its set and ends its
        // reservation together, and a read in two statements (PostgreSQL's read committed
        // takes a snapshot per statement) could see neither and hand the unit out again.
        let rows = sqlx::query(
            "SELECT event_id, annotator, status FROM label_sets \
             WHERE codebook = $1 AND session_id = $2 AND status <> 'draft' \
             UNION ALL SELECT event_id, annotator, 'reserved' FROM label_reservations \
             WHERE codebook = $1 AND session_id = $2",
        )
        .bind(codebook)
        .bind(session_id)
        .fetch_all(&mut *conn)
        .await?;
        let rows = rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect::<Result<Vec<(String, String, String)>, sqlx::Error>>()?;
        Ok(Holds::of_rows(rows, annotator))
    }

    /// Of `units` (keys, in queue order), the one to hand out and how many more could
    /// follow it: the live reservation of the asker if it is among them, else the first
    /// that the asker has not completed or holds and fewer than the overlap hold.
    pub(crate) fn pick(&self, units: &[&str], ask: QueueAsk<'_>) -> Option<(String, usize)> {
        let open = |unit: &str| {
            let held = self.holders.get(unit);
            !self.done.contains(unit)
                && held.is_none_or(|h| !h.contains(ask.annotator) && h.len() < ask.overlap)
        };
        let chosen = match &self.reserved {
            Some(unit) if units.contains(&unit.as_str()) => unit.clone(),
            _ => (*units.iter().find(|u| open(u))?).to_owned(),
        };
        let remaining = units.iter().filter(|u| open(u) && **u != chosen).count();
        Some((chosen, remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(holders: &[(&str, &[&str])], done: &[&str], reserved: Option<&str>) -> Holds {
        Holds {
            holders: holders
                .iter()
                .map(|(u, who)| (u.to_string(), who.iter().map(|w| w.to_string()).collect()))
                .collect(),
            done: done.iter().map(|d| d.to_string()).collect(),
            reserved: reserved.map(str::to_owned),
        }
    }

    const ASK: QueueAsk = QueueAsk {
        codebook: "c",
        annotator: "me",
        overlap: 2,
        reservation_ms: 1000,
        now_ms: 0,
    };

    #[test]
    fn the_first_open_unit_in_order_is_picked() {
        let units = ["u1", "u2", "u3", "u4"];
        let h = holds(
            &[("u1", &["a", "b"]), ("u2", &["me"]), ("u3", &["a"])],
            &["u4"],
            None,
        );
        assert_eq!(h.pick(&units, ASK), Some(("u3".into(), 0)));
        assert_eq!(h.pick(&units, QueueAsk { overlap: 1, ..ASK }), None);
    }

    #[test]
    fn a_live_reservation_comes_back() {
        let units = ["u1", "u2", "u3"];
        let h = holds(&[("u2", &["me"])], &[], Some("u2"));
        assert_eq!(h.pick(&units, ASK), Some(("u2".into(), 2)));
    }
}
