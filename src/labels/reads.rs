//! Reads across the label store: suggestions, the sessions that have labels, and the
//! submitted sets agreement is computed from.

use std::borrow::Cow;

use sqlx::any::AnyRow;
use sqlx::Row;

use super::codings::CodingTable;
use super::consensus::{opens_unit, Sight};
use super::model::{Status, Suggestion};
use super::store::{Backend, LabelError, LabelStore};

impl LabelStore {
    /// The suggestions under `codebook` on session `session_id` (on one unit, or all), by
    /// unit then model.
    pub async fn suggestions(
        &self,
        codebook: &str,
        session_id: &str,
        event_id: Option<&str>,
    ) -> Result<Vec<Suggestion>, LabelError> {
        let mut sql = "SELECT event_id, model, score, labels, updated_at FROM label_suggestions \
                       WHERE codebook = $1 AND session_id = $2"
            .to_owned();
        if event_id.is_some() {
            sql.push_str(" AND event_id = $3");
        }
        sql.push_str(" ORDER BY event_id, model");
        let mut query = sqlx::query(&sql).bind(codebook).bind(session_id);
        if let Some(e) = event_id {
            query = query.bind(e);
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter().map(suggestion_of_row).collect()
    }

    /// Every session that has a set or a suggestion under `codebook`, sorted.
    pub async fn labeled_sessions(&self, codebook: &str) -> Result<Vec<String>, LabelError> {
        let rows = sqlx::query(
            "SELECT session_id FROM label_sets WHERE codebook = $1 UNION \
             SELECT session_id FROM label_suggestions WHERE codebook = $1 ORDER BY session_id",
        )
        .bind(codebook)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }
}

/// The suggestion a row of `label_suggestions` holds.
pub(crate) fn suggestion_of_row(row: &AnyRow) -> Result<Suggestion, LabelError> {
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

/// One set as the SQLite reads pack it: `[session_id, event_id, annotator, labels,
/// status]`, the labels as stored (JSON).
#[derive(serde::Deserialize)]
struct PackedSet<'a>(
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    Vec<LabelId>,
    #[serde(borrow)] Cow<'a, str>,
);

/// Row ids read per query by the SQLite read of the whole store: a few megabytes of
/// packed sets each.
const ROWIDS_PER_READ: i64 = 8_192;

/// The packed form of each set the SQLite reads select.
const PACKED_SET: &str =
    "json_group_array(json_array(session_id, event_id, annotator, json(labels), status))";

/// The sets agreement reads, as an SQL condition on `status` (the column as the query
/// names it): those of the codebook, submitted, and a blind viewer's own sets that open a
/// unit (a reviewer's adjudicated set is no coding, but it opens the unit). Parameters:
/// `$1` the codebook, `$2` submitted, and for a blind viewer `$3` their name and `$4`
/// adjudicated.
fn codings_condition(me: Option<&str>, status: &str) -> String {
    match me {
        None => format!("codebook = $1 AND {status} = $2"),
        Some(_) => format!("codebook = $1 AND ({status} = $2 OR (annotator = $3 AND {status} = $4))"),
    }
}

/// The parameters after [`codings_condition`]'s.
fn first_free_parameter(me: Option<&str>) -> usize {
    if me.is_some() {
        5
    } else {
        3
    }
}

/// Binds [`codings_condition`]'s parameters.
fn bind_condition<'q>(query: AnyQuery<'q>, codebook: &'q str, me: Option<&'q str>) -> AnyQuery<'q> {
    let query = query.bind(codebook).bind(Status::Submitted.as_str());
    match me {
        None => query,
        Some(me) => query.bind(me).bind(Status::Adjudicated.as_str()),
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Codings gathered from the rows read: the filters, the blind viewer if any, and the
/// units on which the viewer's own sets open the others'.
struct Gather<'f> {
    codebook: &'f str,
    me: Option<&'f str>,
    /// When blind mode holds on these units only: the others are kept whole.
    blind_units: Option<&'f std::collections::HashSet<String>>,
    keep_annotator: &'f (dyn Fn(&str) -> bool + Sync),
    keep_label: &'f (dyn Fn(&str) -> bool + Sync),
    table: CodingTable,
    opened: foldhash::HashSet<String>,
    /// The unit key being built (reused).
    unit: String,
}

impl Gather<'_> {
    /// Adds one set read.
    fn add(&mut self, session: &str, event: &str, annotator: &str, status: Status, labels: Vec<LabelId>) {
        self.unit.clear();
        self.unit.push_str(session);
        self.unit.push('\u{0}');
        self.unit.push_str(event);
        if self.me == Some(annotator) && opens_unit(status) {
            self.opened.insert(self.unit.clone());
        }
        if status != Status::Submitted || !(self.keep_annotator)(annotator) {
            return;
        }
        let ids: Vec<String> = labels
            .into_iter()
            .map(|l| l.id)
            .filter(|id| (self.keep_label)(id))
            .collect();
        self.table.push(&self.unit, annotator, ids);
    }

    /// Adds the sets of a packed array (see [`PackedSet`]).
    fn add_packed(&mut self, packed: &str) -> Result<(), LabelError> {
        let sets: Vec<PackedSet> =
            serde_json::from_str(packed).map_err(|e| LabelError::Corrupt(format!("packed sets: {e}")))?;
        for PackedSet(session, event, annotator, labels, status) in sets {
            let status =
                Status::parse(&status).ok_or_else(|| LabelError::Corrupt(format!("status {status:?}")))?;
            self.add(&session, &event, &annotator, status, labels);
        }
        Ok(())
    }

    /// The codings, those of blind units the viewer has not opened left out.
    fn finish(mut self) -> CodingTable {
        let opened = self.opened;
        match self.blind_units {
            Some(blind) => self
                .table
                .retain_units(|unit| !blind.contains(unit) || opened.contains(unit)),
            None if self.me.is_some() => self.table.retain_units(|unit| opened.contains(unit)),
            None => {}
        }
        self.table
    }
}

impl LabelStore {
    /// The submitted sets of one session or all, read into a [`CodingTable`]:
    /// `keep_annotator` picks annotators, `keep_label` label ids, and `sight` what the
    /// viewer may see in blind mode (for [`Sight::OwnUntilSubmitted`], the units on which
    /// one of their own sets [`opens_unit`]; for [`Sight::BlindOn`], those and the units
    /// outside its blind ones).
    ///
    /// SQLite's rows come one at a time from its connection's thread, a hand-over between
    /// threads each: a million rows cost seconds of switching. So on SQLite the database
    /// packs the sets (JSON arrays of a few thousand, a unit's for one session); PostgreSQL's
    /// rows are streamed.
    pub async fn submitted_codings(
        &self,
        codebook: &str,
        session_id: Option<&str>,
        keep_annotator: &(dyn Fn(&str) -> bool + Sync),
        keep_label: &(dyn Fn(&str) -> bool + Sync),
        sight: Sight<'_>,
    ) -> Result<CodingTable, LabelError> {
        let (me, blind_units) = match sight {
            Sight::Nothing => return Ok(CodingTable::default()),
            Sight::Everything => (None, None),
            Sight::OwnUntilSubmitted(me) => (Some(me), None),
            Sight::BlindOn { me, units } => (me, Some(units)),
        };
        let mut gather = Gather {
            codebook,
            me,
            blind_units,
            keep_annotator,
            keep_label,
            table: CodingTable::default(),
            opened: Default::default(),
            unit: String::new(),
        };
        match (self.backend(), session_id) {
            (Backend::Sqlite, None) => self.packed_store_codings(&mut gather).await?,
            (Backend::Sqlite, Some(s)) => self.packed_session_codings(s, &mut gather).await?,
            (Backend::Postgres, _) => self.streamed_codings(session_id, &mut gather).await?,
        }
        Ok(gather.finish())
    }

    /// SQLite, every session: the sets packed by ranges of row ids, read in one
    /// transaction (one snapshot). `+status` keeps the planner on the row id ranges.
    async fn packed_store_codings(&self, gather: &mut Gather<'_>) -> Result<(), LabelError> {
        let mut tx = self.pool.begin().await?;
        // Two subqueries: each is one step down the table's b-tree, where min and max
        // together are a scan.
        let bounds =
            sqlx::query("SELECT (SELECT min(rowid) FROM label_sets), (SELECT max(rowid) FROM label_sets)")
                .fetch_one(&mut *tx)
                .await?;
        let (Some(first), Some(last)) = (
            bounds.try_get::<Option<i64>, _>(0)?,
            bounds.try_get::<Option<i64>, _>(1)?,
        ) else {
            return Ok(());
        };
        let n = first_free_parameter(gather.me);
        let sql = format!(
            "SELECT {PACKED_SET} FROM label_sets WHERE rowid >= ${n} AND rowid < ${} AND {}",
            n + 1,
            codings_condition(gather.me, "+status")
        );
        let mut start = first;
        while start <= last {
            let query = bind_condition(sqlx::query(&sql), gather.codebook, gather.me)
                .bind(start)
                .bind(start + ROWIDS_PER_READ);
            let packed: String = query.fetch_one(&mut *tx).await?.try_get(0)?;
            gather.add_packed(&packed)?;
            start += ROWIDS_PER_READ;
        }
        tx.commit().await?;
        Ok(())
    }

    /// SQLite, one session: its sets packed unit by unit, in the primary key's order.
    async fn packed_session_codings(
        &self,
        session_id: &str,
        gather: &mut Gather<'_>,
    ) -> Result<(), LabelError> {
        use tokio_stream::StreamExt;
        let sql = format!(
            "SELECT {PACKED_SET} FROM label_sets WHERE session_id = ${} AND {} GROUP BY event_id",
            first_free_parameter(gather.me),
            codings_condition(gather.me, "+status")
        );
        let mut rows = bind_condition(sqlx::query(&sql), gather.codebook, gather.me)
            .bind(session_id)
            .fetch(&self.pool);
        while let Some(row) = rows.next().await {
            gather.add_packed(row?.try_get(0)?)?;
        }
        Ok(())
    }

    /// PostgreSQL: the sets row by row, columns by position and borrowed.
    async fn streamed_codings(
        &self,
        session_id: Option<&str>,
        gather: &mut Gather<'_>,
    ) -> Result<(), LabelError> {
        use tokio_stream::StreamExt;
        let mut sql = format!(
            "SELECT session_id, event_id, annotator, labels, status FROM label_sets WHERE {}",
            codings_condition(gather.me, "status")
        );
        if session_id.is_some() {
            sql.push_str(&format!(" AND session_id = ${}", first_free_parameter(gather.me)));
        }
        let mut query = bind_condition(sqlx::query(&sql), gather.codebook, gather.me);
        if let Some(s) = session_id {
            query = query.bind(s);
        }
        let mut rows = query.fetch(&self.pool);
        while let Some(row) = rows.next().await {
            let row = row?;
            let status: &str = row.try_get(4)?;
            let status =
                Status::parse(status).ok_or_else(|| LabelError::Corrupt(format!("status {status:?}")))?;
            let labels: Vec<LabelId> = serde_json::from_str(row.try_get(3)?)
                .map_err(|e| LabelError::Corrupt(format!("labels: {e}")))?;
            gather.add(row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, status, labels);
        }
        Ok(())
    }
}
