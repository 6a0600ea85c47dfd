//! A parsed session's annotation units as labeling needs them: in session order (sub-agent
//! units included), each with its type and text, found by `event_id`.

use std::collections::HashMap;

use crate::core::heap::HeapSize;
use crate::core::pipeline::session::Branch;
use crate::core::views::annotations::annotations;
use crate::core::Session;

/// One unit: its id, type and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitEntry {
    /// The unit's `event_id`.
    pub event_id: String,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: &'static str,
    /// Its text, as evidence quotes are grounded in.
    pub text: String,
}

/// Every unit of a session (`include_sidechains`, the whole session), in order.
#[derive(Debug, Default)]
pub struct UnitIndex {
    units: Vec<UnitEntry>,
    by_id: HashMap<String, usize>,
}

impl UnitIndex {
    /// Indexes `session`'s units (as `GET .../annotations?include_sidechains=true` lists
    /// them).
    pub fn of(session: &Session) -> UnitIndex {
        let units: Vec<UnitEntry> = annotations(session, true, Branch::All)
            .annotations
            .iter()
            .map(|u| UnitEntry {
                event_id: u.event_id().to_owned(),
                unit_type: u.unit_type(),
                text: u.text().into_owned(),
            })
            .collect();
        let by_id = units
            .iter()
            .enumerate()
            .map(|(i, u)| (u.event_id.clone(), i))
            .collect();
        UnitIndex { units, by_id }
    }

    /// The units, in session order.
    pub fn units(&self) -> &[UnitEntry] {
        &self.units
    }

    /// The unit `event_id`, if the session has it.
    pub fn get(&self, event_id: &str) -> Option<&UnitEntry> {
        self.by_id.get(event_id).map(|&i| &self.units[i])
    }
}

impl HeapSize for UnitIndex {
    fn heap_size(&self) -> usize {
        let entries: usize = self
            .units
            .iter()
            .map(|u| std::mem::size_of::<UnitEntry>() + 2 * u.event_id.heap_size() + u.text.heap_size())
            .sum();
        // The map's table: a key and an index per unit, and a control byte.
        entries + self.by_id.capacity() * (std::mem::size_of::<(String, usize)>() + 1)
    }
}

/// Every unit of `session` (sub-agent units included), rendered as its annotations body
/// shows it.
pub fn unit_rows(session: &Session) -> Vec<crate::labels::export::UnitRow> {
    annotations(session, true, Branch::All)
        .annotations
        .iter()
        .filter_map(|u| {
            Some(crate::labels::export::UnitRow {
                event_id: u.event_id().to_owned(),
                unit_type: u.unit_type(),
                text: u.text().into_owned(),
                // Serialising a unit cannot fail: every key is a string.
                json: serde_json::value::to_raw_value(u).ok()?,
            })
        })
        .collect()
}
