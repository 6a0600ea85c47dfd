//! The label records and sets as the API and the database hold them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where an annotator's set stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Work in progress.
    Draft,
    /// Done: counts as the annotator's answer.
    Submitted,
    /// The annotator skipped the unit.
    Discarded,
    /// A reviewer's final set.
    Adjudicated,
}

impl Status {
    /// Every status, in the order the API documents them.
    pub const ALL: [Status; 4] = [
        Status::Draft,
        Status::Submitted,
        Status::Discarded,
        Status::Adjudicated,
    ];

    /// The spelling in bodies, queries and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Draft => "draft",
            Status::Submitted => "submitted",
            Status::Discarded => "discarded",
            Status::Adjudicated => "adjudicated",
        }
    }

    /// The status spelled `s`.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// Where a label was seen in the unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Words of the unit's text (it occurs there verbatim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    /// The codebook cue that applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cue: Option<String>,
}

/// One label on a unit: the codebook's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelRecord {
    /// A label id of the codebook.
    pub id: String,
    /// How sure the annotator is, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Where it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// The label's output fields, of the codebook's types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Map<String, Value>>,
}

/// The key of a set: one annotator's set on one unit of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetKey<'a> {
    /// The codebook it is written under.
    pub codebook: &'a str,
    /// The session.
    pub session_id: &'a str,
    /// The unit.
    pub event_id: &'a str,
    /// The annotator.
    pub annotator: &'a str,
}

/// A stored set, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSet {
    /// The unit.
    pub event_id: String,
    /// Who.
    pub annotator: String,
    /// Where it stands.
    pub status: Status,
    /// The labels.
    pub labels: Vec<LabelRecord>,
    /// A free note.
    pub note: Option<String>,
    /// Time spent, in seconds (as Label Studio's `lead_time`).
    pub lead_time: Option<f64>,
    /// Bumped by every change (the ETag is `"labels-<version>"`).
    pub version: i64,
    /// When it last changed (RFC 3339, UTC).
    pub updated_at: String,
    /// The version of the codebook it was last written under (see
    /// [`super::Codebook::version`]); `None` for sets written before versions were kept.
    #[serde(default)]
    pub codebook_version: Option<String>,
}

impl LabelSet {
    /// The set's strong ETag.
    pub fn etag(&self) -> String {
        etag(self.version)
    }
}

/// The strong ETag of a set's `version`.
pub fn etag(version: i64) -> String {
    format!("\"labels-{version}\"")
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// A set was written.
    Put,
    /// A set was removed.
    Delete,
}

impl Action {
    /// The spelling in bodies and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Put => "put",
            Action::Delete => "delete",
        }
    }
}

/// One change of a set, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The unit.
    pub event_id: String,
    /// Whose set.
    pub annotator: String,
    /// The set's version after a put, the removed version for a delete.
    pub version: i64,
    /// What happened.
    pub action: Action,
    /// Who made the change.
    pub actor: String,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// The set before (`null`: there was none).
    pub before: Option<LabelSet>,
    /// The set after (`null`: removed).
    pub after: Option<LabelSet>,
}

/// Filters of `GET /api/graph/{id}/labels`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SetFilter {
    /// Only this annotator's sets.
    pub annotator: Option<String>,
    /// Only sets in this status.
    pub status: Option<Status>,
    /// Only sets carrying this label id.
    pub label: Option<String>,
}

impl SetFilter {
    /// True when `set` passes every filter given.
    pub fn matches(&self, set: &LabelSet) -> bool {
        self.annotator.as_ref().is_none_or(|a| &set.annotator == a)
            && self.status.is_none_or(|s| set.status == s)
            && self
                .label
                .as_ref()
                .is_none_or(|l| set.labels.iter().any(|x| &x.id == l))
    }
}

/// A write's `If-Match` precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// No `If-Match`: the write goes through (last writer wins).
    None,
    /// `If-Match: *`: a set must exist.
    Exists,
    /// `If-Match: "labels-N", ...`: the set's version must be one of these (an empty list,
    /// from tags that are not ours or weak, never matches).
    Versions(Vec<i64>),
    /// `If-None-Match: *`: no set may exist (the write creates it, never replaces one).
    Absent,
}

impl Precondition {
    /// Reads `If-Match` header values. Comparison is strong: a weak tag (`W/"..."`) never
    /// matches.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Precondition {
        let mut seen = false;
        let mut versions = Vec::new();
        for tag in values.into_iter().flat_map(|v| v.split(',')) {
            let tag = tag.trim();
            if tag.is_empty() {
                continue;
            }
            seen = true;
            if tag == "*" {
                return Precondition::Exists;
            }
            let version = tag
                .strip_prefix("\"labels-")
                .and_then(|t| t.strip_suffix('"'))
                .and_then(|n| n.parse::<i64>().ok());
            versions.extend(version);
        }
        if seen {
            Precondition::Versions(versions)
        } else {
            Precondition::None
        }
    }

    /// True when the current version (`None`: no set) satisfies it.
    pub fn holds(&self, current: Option<i64>) -> bool {
        match self {
            Precondition::None => true,
            Precondition::Exists => current.is_some(),
            Precondition::Versions(vs) => current.is_some_and(|c| vs.contains(&c)),
            Precondition::Absent => current.is_none(),
        }
    }
}

/// A model's suggested labels on a unit: shown apart from human sets, never counted in
/// agreement (Argilla's suggestions, Label Studio's predictions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suggestion {
    /// The unit.
    pub event_id: String,
    /// The model (or agent) that suggested them, with its version if it has one.
    pub model: String,
    /// The model's score for the whole suggestion, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The suggested labels (checked like a set's).
    pub labels: Vec<LabelRecord>,
    /// When it was last imported (RFC 3339, UTC).
    pub updated_at: String,
}

/// One line of the JSONL export: a unit, as its annotations body shows it, with every
/// annotator's set, the suggestions and the adjudicated set.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportedUnit {
    /// The codebook the labels are of (`None` in lines exported before codebooks had
    /// ids: the importing request's codebook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codebook: Option<String>,
    /// The session.
    pub session_id: String,
    /// The unit.
    pub event_id: String,
    /// `user_turn`, `assistant_turn` or `system_turn` (`None`: the unit is orphaned).
    #[serde(default)]
    pub unit_type: Option<String>,
    /// The unit's text, as evidence quotes are grounded in (empty when orphaned).
    #[serde(default)]
    pub text: String,
    /// The unit as `GET /api/graph/{id}/annotations` gives it (`null`: orphaned).
    #[serde(default)]
    pub unit: Option<Box<serde_json::value::RawValue>>,
    /// True when the session no longer has the unit (its labels are kept).
    #[serde(default)]
    pub orphaned: bool,
    /// Every annotator's set, whatever its status (adjudicated ones included), by annotator.
    #[serde(default)]
    pub annotations: Vec<LabelSet>,
    /// The models' suggestions, by model.
    #[serde(default)]
    pub suggestions: Vec<Suggestion>,
    /// The adjudicated set in force: the latest one written, if any.
    #[serde(default)]
    pub adjudicated: Option<LabelSet>,
}

/// What one imported record asks for, before validation.
#[derive(Debug, Clone, PartialEq)]
pub enum ImportKind {
    /// A human set: a body of the shape `PUT /api/graph/{id}/labels/{event_id}` takes
    /// (`annotator`, `labels`, `status`, `note`, `lead_time`).
    Set(Value),
    /// A model's suggestion.
    Suggestion {
        /// The model.
        model: String,
        /// Its score, as given (checked to be a number in [0, 1]).
        score: Option<Value>,
        /// The labels, as given (checked like a set's).
        labels: Value,
    },
}

/// One record to import, from a JSONL line or a Label Studio task.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportItem {
    /// The codebook the record names, if it names one: it must be the import's.
    pub codebook: Option<String>,
    /// The session.
    pub session_id: String,
    /// The unit.
    pub event_id: String,
    /// The set or suggestion.
    pub kind: ImportKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_is_strong_and_lists_tags() {
        assert_eq!(Precondition::parse([]), Precondition::None);
        assert_eq!(Precondition::parse(["*"]), Precondition::Exists);
        let p = Precondition::parse(["\"x\", \"labels-3\"", "W/\"labels-4\""]);
        assert_eq!(p, Precondition::Versions(vec![3]));
        assert!(p.holds(Some(3)));
        assert!(!p.holds(Some(4)) && !p.holds(None));
        assert!(!Precondition::parse(["\"nope\""]).holds(Some(1)));
        assert!(Precondition::Exists.holds(Some(1)) && !Precondition::Exists.holds(None));
        assert!(Precondition::None.holds(None));
        assert!(Precondition::Absent.holds(None) && !Precondition::Absent.holds(Some(1)));
    }

    #[test]
    fn statuses_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("done"), None);
    }
}
