//! The codings agreement is computed from, held compactly (pure): each distinct unit key,
//! annotator and label combination once, and one 12-byte row per coding. A million
//! submitted sets take tens of megabytes, where full sets took gigabytes.

use foldhash::HashMap;

/// One annotator's coding of one unit: the label ids they chose (possibly none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coding<'a> {
    /// The unit, an opaque key (for instance `session_id\0event_id`).
    pub unit: &'a str,
    /// Who coded it.
    pub annotator: &'a str,
    /// The label ids chosen.
    pub labels: &'a [String],
}

/// One coding: indices of its unit, annotator and label combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Row {
    /// The unit.
    pub unit: u32,
    /// The annotator.
    pub annotator: u32,
    /// The label combination chosen.
    pub labels: u32,
}

/// Strings given an index each, the first time they are seen; each held once.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
}

impl Interner {
    /// The index of `value`, adding it the first time.
    fn id(&mut self, value: &str) -> u32 {
        if let Some(&id) = self.ids.get(value) {
            return id;
        }
        let id = index_of(self.ids.len());
        self.ids.insert(value.into(), id);
        id
    }

    /// The strings, by index.
    fn into_vec(self) -> Vec<Box<str>> {
        let mut values: Vec<Box<str>> = vec![Box::default(); self.ids.len()];
        for (value, id) in self.ids {
            values[id as usize] = value;
        }
        values
    }
}

/// An index as the table stores it. Indices count distinct units, annotators or label
/// combinations, each at most the number of codings: far below 4 billion in any store
/// that fits in memory.
fn index_of(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 4 billion distinct values")
}

/// Codings as agreement needs them, gathered one at a time (from the database's stream,
/// or from a list of [`Coding`]s).
#[derive(Debug, Default)]
pub struct CodingTable {
    units: Interner,
    annotators: Interner,
    label_sets: HashMap<Vec<String>, u32>,
    rows: Vec<Row>,
}

/// A [`CodingTable`]'s contents with the strings listed by index.
pub(super) struct CodingParts {
    /// Unit keys, by index.
    pub units: Vec<Box<str>>,
    /// Annotators, by index.
    pub annotators: Vec<Box<str>>,
    /// Label combinations (the ids as given), by index.
    pub label_sets: Vec<Vec<String>>,
    /// The codings, in the order given.
    pub rows: Vec<Row>,
}

impl CodingTable {
    /// The table of a list of codings, in its order.
    pub fn from_codings(codings: &[Coding<'_>]) -> CodingTable {
        let mut table = CodingTable::default();
        for coding in codings {
            table.push(coding.unit, coding.annotator, coding.labels.to_vec());
        }
        table
    }

    /// Adds `annotator`'s coding of `unit` (an opaque key) with the label ids `labels`.
    pub fn push(&mut self, unit: &str, annotator: &str, labels: Vec<String>) {
        let unit = self.units.id(unit);
        let annotator = self.annotators.id(annotator);
        let next = index_of(self.label_sets.len());
        let labels = match self.label_sets.get(labels.as_slice()) {
            Some(&id) => id,
            None => *self.label_sets.entry(labels).or_insert(next),
        };
        self.rows.push(Row {
            unit,
            annotator,
            labels,
        });
    }

    /// The codings held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no coding is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The unit keys held (`session \0 event` as the store reads them), in no order.
    pub fn unit_keys(&self) -> impl Iterator<Item = &str> {
        self.units.ids.keys().map(|k| &**k)
    }

    /// Keeps only the codings of the units whose key `keep` accepts.
    pub fn retain_units(&mut self, keep: impl Fn(&str) -> bool) {
        let mut kept = vec![false; self.units.ids.len()];
        for (key, &id) in &self.units.ids {
            kept[id as usize] = keep(key);
        }
        self.rows.retain(|row| kept[row.unit as usize]);
    }

    /// The contents, strings listed by index.
    pub(super) fn into_parts(self) -> CodingParts {
        let mut label_sets = vec![Vec::new(); self.label_sets.len()];
        for (labels, id) in self.label_sets {
            label_sets[id as usize] = labels;
        }
        CodingParts {
            units: self.units.into_vec(),
            annotators: self.annotators.into_vec(),
            label_sets,
            rows: self.rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distinct_value_is_held_once_and_rows_keep_their_order() {
        let mut table = CodingTable::default();
        table.push("u1", "a", vec!["X".into()]);
        table.push("u1", "b", vec!["X".into()]);
        table.push("u2", "a", vec![]);
        table.push("u3", "b", vec!["X".into()]);
        assert_eq!(table.len(), 4);
        table.retain_units(|key| key != "u3");
        let parts = table.into_parts();
        assert_eq!(parts.units.len(), 3, "a unit's key stays listed when its rows go");
        assert_eq!(parts.annotators.len(), 2);
        assert_eq!(parts.label_sets.len(), 2);
        let rows: Vec<(&str, &str, &[String])> = parts
            .rows
            .iter()
            .map(|r| {
                (
                    &*parts.units[r.unit as usize],
                    &*parts.annotators[r.annotator as usize],
                    parts.label_sets[r.labels as usize].as_slice(),
                )
            })
            .collect();
        let x = ["X".to_owned()];
        assert_eq!(
            rows,
            [("u1", "a", &x[..]), ("u1", "b", &x[..]), ("u2", "a", &[][..])]
        );
    }
}
