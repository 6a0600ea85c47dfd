//! What a round is made of: its name, codebook, guidelines, which units it selects and how
//! it samples them, the overlap, who labels and how (pure). [`RoundDefinition::parse`]
//! checks a `POST /api/rounds` body field by field, naming the field at fault.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::sample::{SampleSpec, Strata};
use crate::labels::validate::{check_annotator, invalid, Invalid};

/// Longest round name, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest guidelines, in bytes.
pub const MAX_GUIDELINES_BYTES: usize = 256 << 10;
/// Most units a round may hold.
pub const MAX_UNITS: usize = 100_000;
/// Most annotators a round may assign.
pub const MAX_ANNOTATORS: usize = 1_000;
/// Largest overlap.
pub const MAX_OVERLAP: usize = crate::labels::queue::MAX_OVERLAP;
/// Longest reservation, in seconds (a day).
pub const MAX_RESERVATION_SECS: u64 = 86_400;

/// A unit named by its session and event id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnitKey {
    /// The session.
    pub session_id: String,
    /// The unit.
    pub event_id: String,
}

/// The units a round draws from (always only those its codebook codes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Selection {
    /// The units a search finds: its query and filters, as `GET /api/search` takes them.
    Search {
        /// The full-text query (empty: every unit the filters keep).
        query: String,
        /// The filters, by name, as strings.
        #[serde(default)]
        filters: Map<String, Value>,
    },
    /// These units.
    Units {
        /// The units, in any order.
        units: Vec<UnitKey>,
    },
    /// Every unit of these sessions.
    Sessions {
        /// The session ids.
        sessions: Vec<String>,
    },
}

/// A round as created: everything that fixes its units and how they are labeled. Stored
/// and exported as given, with the codebook's version at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundDefinition {
    /// Its name.
    pub name: String,
    /// The id of the codebook it is labeled under.
    pub codebook: String,
    /// That codebook's version when the round was created.
    #[serde(default)]
    pub codebook_version: String,
    /// What annotators read first (Markdown, shown as text).
    #[serde(default)]
    pub guidelines: String,
    /// The candidate units.
    pub selection: Selection,
    /// How the round's units are drawn from the candidates.
    #[serde(default = "no_sample")]
    pub sample: SampleSpec,
    /// How many annotators label each unit.
    pub overlap: usize,
    /// Who labels (`None`: anyone).
    #[serde(default)]
    pub annotators: Option<Vec<String>>,
    /// Annotators see no one else's set on a unit until they submit their own.
    #[serde(default)]
    pub blind: bool,
    /// How long a unit handed out stays reserved, in seconds.
    pub reservation_secs: u64,
}

fn no_sample() -> SampleSpec {
    SampleSpec {
        size: None,
        seed: 0,
        stratify: Strata::default(),
        max_per_session: None,
    }
}

/// What a definition defaults to when the body leaves it out: the server's queue settings.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    /// The server's overlap (`--queue-overlap`).
    pub overlap: usize,
    /// The server's reservation time.
    pub reservation_secs: u64,
    /// The server's blind mode.
    pub blind: bool,
}

impl RoundDefinition {
    /// Reads and checks a `POST /api/rounds` body; the codebook is taken as named (the
    /// caller resolves it, the default when `None`).
    pub fn parse(body: &Value, defaults: Defaults) -> Result<(RoundDefinition, Option<String>), Invalid> {
        let object = body
            .as_object()
            .ok_or_else(|| invalid("body", "must be a JSON object"))?;
        const KNOWN: [&str; 9] = [
            "name",
            "codebook",
            "guidelines",
            "selection",
            "sample",
            "overlap",
            "annotators",
            "blind",
            "reservation_secs",
        ];
        if let Some(key) = object.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(invalid(key.as_str(), "is not a field of a round"));
        }
        let definition = RoundDefinition {
            name: name(object)?,
            codebook: String::new(),
            codebook_version: String::new(),
            guidelines: guidelines(object)?,
            selection: selection(object.get("selection"))?,
            sample: sample(object.get("sample"))?,
            overlap: bounded(object, "overlap", defaults.overlap as u64, 1, MAX_OVERLAP as u64)? as usize,
            annotators: annotators(object.get("annotators"))?,
            blind: match object.get("blind") {
                None | Some(Value::Null) => defaults.blind,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(invalid("blind", "must be true or false")),
            },
            reservation_secs: bounded(
                object,
                "reservation_secs",
                defaults.reservation_secs,
                1,
                MAX_RESERVATION_SECS,
            )?,
        };
        let codebook = match object.get("codebook") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.clone()),
            Some(_) => return Err(invalid("codebook", "must be a codebook id")),
        };
        Ok((definition, codebook))
    }

    /// True when `annotator` may label the round's units.
    pub fn assigns(&self, annotator: &str) -> bool {
        self.annotators
            .as_ref()
            .is_none_or(|list| list.iter().any(|a| a == annotator))
    }
}

fn name(object: &Map<String, Value>) -> Result<String, Invalid> {
    let name = match object.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(_) => return Err(invalid("name", "must be a non-empty string")),
        None => return Err(invalid("name", "is required")),
    };
    if name.chars().count() > MAX_NAME_CHARS || name.contains('\0') {
        return Err(invalid(
            "name",
            format!("must be at most {MAX_NAME_CHARS} characters, without NUL"),
        ));
    }
    Ok(name)
}

fn guidelines(object: &Map<String, Value>) -> Result<String, Invalid> {
    match object.get("guidelines") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) if s.len() <= MAX_GUIDELINES_BYTES && !s.contains('\0') => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(
            "guidelines",
            format!("must be at most {} KiB, without NUL", MAX_GUIDELINES_BYTES >> 10),
        )),
        Some(_) => Err(invalid("guidelines", "must be a string (Markdown)")),
    }
}

fn selection(value: Option<&Value>) -> Result<Selection, Invalid> {
    let object = value.and_then(Value::as_object).ok_or_else(|| {
        invalid(
            "selection",
            "is required: {\"query\", \"filters\"}, {\"units\"} or {\"sessions\"}",
        )
    })?;
    let kinds = ["query", "units", "sessions"]
        .iter()
        .filter(|k| object.contains_key(**k))
        .count();
    if kinds != 1 {
        return Err(invalid(
            "selection",
            "must have exactly one of query (with filters), units, sessions",
        ));
    }
    if object.contains_key("units") {
        let units: Vec<UnitKey> = serde_json::from_value(object["units"].clone()).map_err(|e| {
            invalid(
                "selection.units",
                format!("must be a list of {{session_id, event_id}}: {e}"),
            )
        })?;
        if units.is_empty() || units.len() > MAX_UNITS {
            return Err(invalid(
                "selection.units",
                format!("must list 1 to {MAX_UNITS} units"),
            ));
        }
        return Ok(Selection::Units { units });
    }
    if object.contains_key("sessions") {
        let sessions: Vec<String> = serde_json::from_value(object["sessions"].clone())
            .map_err(|_| invalid("selection.sessions", "must be a list of session ids"))?;
        if sessions.is_empty() {
            return Err(invalid("selection.sessions", "must list at least one session"));
        }
        return Ok(Selection::Sessions { sessions });
    }
    let query = object["query"]
        .as_str()
        .ok_or_else(|| invalid("selection.query", "must be a string"))?
        .to_owned();
    let filters = match object.get("filters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(f)) => f.clone(),
        Some(_) => return Err(invalid("selection.filters", "must be an object")),
    };
    if let Some(key) = object
        .keys()
        .find(|k| !["query", "filters"].contains(&k.as_str()))
    {
        return Err(invalid(
            format!("selection.{key}"),
            "is not a field of a selection",
        ));
    }
    Ok(Selection::Search { query, filters })
}

fn sample(value: Option<&Value>) -> Result<SampleSpec, Invalid> {
    match value {
        None | Some(Value::Null) => Ok(no_sample()),
        Some(v @ Value::Object(o)) => {
            if let Some(key) = o
                .keys()
                .find(|k| !["size", "seed", "stratify", "max_per_session"].contains(&k.as_str()))
            {
                return Err(invalid(format!("sample.{key}"), "is not a field of a sample"));
            }
            let spec: SampleSpec = serde_json::from_value(v.clone())
                .map_err(|e| invalid("sample", format!("size and max_per_session are counts, seed an integer, stratify {{session, unit_type}}: {e}")))?;
            if spec.size.is_some_and(|s| s == 0 || s > MAX_UNITS) {
                return Err(invalid("sample.size", format!("must be 1 to {MAX_UNITS}")));
            }
            if spec.max_per_session == Some(0) {
                return Err(invalid("sample.max_per_session", "must be at least 1"));
            }
            Ok(spec)
        }
        Some(_) => Err(invalid("sample", "must be an object")),
    }
}

fn annotators(value: Option<&Value>) -> Result<Option<Vec<String>>, Invalid> {
    let list = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(invalid(
                "annotators",
                "must be a list of names, or null for anyone",
            ))
        }
    };
    if list.is_empty() || list.len() > MAX_ANNOTATORS {
        return Err(invalid(
            "annotators",
            format!("must list 1 to {MAX_ANNOTATORS} names"),
        ));
    }
    let mut names = Vec::with_capacity(list.len());
    for (i, name) in list.iter().enumerate() {
        let field = format!("annotators[{i}]");
        let name = name
            .as_str()
            .ok_or_else(|| invalid(field.as_str(), "must be a string"))?;
        check_annotator(&field, name)?;
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    Ok(Some(names))
}

/// The integer `key` of `object` within `min..=max`, or `default` when absent.
fn bounded(object: &Map<String, Value>, key: &str, default: u64, min: u64, max: u64) -> Result<u64, Invalid> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| invalid(key, format!("must be an integer from {min} to {max}"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const DEFAULTS: Defaults = Defaults {
        overlap: 2,
        reservation_secs: 600,
        blind: false,
    };

    fn field_of(body: Value) -> String {
        RoundDefinition::parse(&body, DEFAULTS).unwrap_err().field
    }

    #[test]
    fn a_round_takes_the_servers_defaults_and_round_trips_as_json() {
        let body = json!({
            "name": " delegation pilot ",
            "codebook": "speechact",
            "selection": { "query": "Task", "filters": { "unit_type": "assistant_turn" } },
            "sample": { "size": 100, "seed": 7, "stratify": { "session": true }, "max_per_session": 5 },
            "annotators": ["ann.a", "ann.b", "ann.a"],
        });
        let (definition, codebook) = RoundDefinition::parse(&body, DEFAULTS).unwrap();
        assert_eq!(codebook.as_deref(), Some("speechact"));
        assert_eq!(definition.name, "delegation pilot");
        assert_eq!(
            (definition.overlap, definition.reservation_secs, definition.blind),
            (2, 600, false)
        );
        assert_eq!(definition.annotators, Some(vec!["ann.a".into(), "ann.b".into()]));
        assert!(definition.assigns("ann.b") && !definition.assigns("ann.c"));
        assert_eq!(definition.sample.size, Some(100));
        assert!(definition.sample.stratify.session && !definition.sample.stratify.unit_type);
        let stored = serde_json::to_value(&definition).unwrap();
        let back: RoundDefinition = serde_json::from_value(stored).unwrap();
        assert_eq!(back, definition);
    }

    #[test]
    fn each_bad_field_is_named() {
        let base = json!({ "name": "r", "selection": { "sessions": ["s"] } });
        let with = |key: &str, value: Value| {
            let mut body = base.clone();
            body[key] = value;
            body
        };
        assert_eq!(field_of(json!({ "selection": { "sessions": ["s"] } })), "name");
        assert_eq!(field_of(json!({ "name": "r" })), "selection");
        assert_eq!(
            field_of(with("selection", json!({ "units": [], "sessions": ["s"] }))),
            "selection"
        );
        assert_eq!(
            field_of(with("selection", json!({ "units": [] }))),
            "selection.units"
        );
        assert_eq!(
            field_of(with("selection", json!({ "units": [{ "session_id": "s" }] }))),
            "selection.units"
        );
        assert_eq!(field_of(with("sample", json!({ "size": 0 }))), "sample.size");
        assert_eq!(field_of(with("sample", json!({ "sise": 3 }))), "sample.sise");
        assert_eq!(field_of(with("overlap", json!(0))), "overlap");
        assert_eq!(field_of(with("overlap", json!(101))), "overlap");
        assert_eq!(
            field_of(with("annotators", json!(["ok", "no way"]))),
            "annotators[1]"
        );
        assert_eq!(field_of(with("blind", json!("yes"))), "blind");
        assert_eq!(field_of(with("colour", json!("red"))), "colour");
        assert_eq!(
            field_of(with("reservation_secs", json!(86_401))),
            "reservation_secs"
        );
    }
}
