//! The index's fields, and the two kinds of document it holds: one per annotation unit,
//! and one marker per indexed session recording what it was indexed from.

use tantivy::schema::{Field, Schema, FAST, INDEXED, STORED, STRING, TEXT};
use tantivy::TantivyDocument;

use super::document::UnitDoc;
use super::unit_set::{unit_hash, UNIT_HASH};

/// The index's layout and the rules its units are built by: an index written under
/// another version is rebuilt. Raise it whenever a field or what goes into one changes.
pub const SCHEMA_VERSION: u32 = 1;

/// `kind` of a unit's document.
pub const KIND_UNIT: &str = "unit";

/// `kind` of a session's marker.
pub const KIND_SESSION: &str = "session";

/// The fields of the index.
#[derive(Debug, Clone)]
pub struct Fields {
    /// The schema they make up.
    pub schema: Schema,
    /// [`KIND_UNIT`] or [`KIND_SESSION`].
    pub kind: Field,
    /// The session's id (both kinds; a session is removed by this term).
    pub session_id: Field,
    /// The unit's `event_id`.
    pub event_id: Field,
    /// The hash of `session_id` and `event_id` ([`unit_hash`]): what label filters find
    /// units by (a column; a marker's is 0).
    pub unit_hash: Field,
    /// `claudecode`, `pi`, `autogen`, `codex` or `gemini`.
    pub framework: Field,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: Field,
    /// The actor's id and its type, both searchable.
    pub actor: Field,
    /// The actor's id, as shown.
    pub actor_id: Field,
    /// The actor's type, as shown.
    pub actor_type: Field,
    /// The names of the tools the unit calls (one value each).
    pub tool: Field,
    /// True when a tool call of the unit failed by the log's verdict.
    pub failed: Field,
    /// True when the unit delegates to a sub-agent.
    pub delegation: Field,
    /// The unit's time, ms since the epoch (absent when the log gives none).
    pub time_ms: Field,
    /// The unit's timestamp as the log wrote it.
    pub timestamp: Field,
    /// The unit's place in its session (0 for the first).
    pub seq: Field,
    /// Where the unit stands among equal scores ([`tie_order`]).
    pub tie_order: Field,
    /// The unit's text, searched (not stored).
    pub text: Field,
    /// The start of the unit's text, kept for snippets.
    pub excerpt: Field,
    /// Marker: the session's content version when it was indexed.
    pub fingerprint: Field,
    /// Marker: the stamps of the files it was read from (JSON).
    pub stamps: Field,
}

impl Fields {
    /// The fields of a new index.
    pub fn build() -> Fields {
        let mut b = Schema::builder();
        let kind = b.add_text_field("kind", STRING);
        let session_id = b.add_text_field("session_id", STRING | STORED | FAST);
        let event_id = b.add_text_field("event_id", STRING | STORED | FAST);
        let unit_hash = b.add_u64_field(UNIT_HASH, FAST);
        let framework = b.add_text_field("framework", STRING | STORED);
        let unit_type = b.add_text_field("unit_type", STRING | STORED | FAST);
        let actor = b.add_text_field("actor", STRING);
        let actor_id = b.add_text_field("actor_id", STORED);
        let actor_type = b.add_text_field("actor_type", STORED);
        let tool = b.add_text_field("tool", STRING | STORED);
        let failed = b.add_bool_field("failed", INDEXED | STORED);
        let delegation = b.add_bool_field("delegation", INDEXED | STORED);
        let time_ms = b.add_i64_field("time_ms", INDEXED | FAST);
        let timestamp = b.add_text_field("timestamp", STORED);
        let seq = b.add_u64_field("seq", FAST);
        let tie_order = b.add_u64_field(TIE_ORDER, FAST);
        let text = b.add_text_field("text", TEXT);
        let excerpt = b.add_text_field("excerpt", STORED);
        let fingerprint = b.add_text_field("fingerprint", STORED);
        let stamps = b.add_text_field("stamps", STORED);
        Fields {
            schema: b.build(),
            kind,
            session_id,
            event_id,
            unit_hash,
            framework,
            unit_type,
            actor,
            actor_id,
            actor_type,
            tool,
            failed,
            delegation,
            time_ms,
            timestamp,
            seq,
            tie_order,
            text,
            excerpt,
            fingerprint,
            stamps,
        }
    }

    /// The document of one unit.
    pub fn unit_document(&self, unit: &UnitDoc<'_>) -> TantivyDocument {
        let mut doc = TantivyDocument::new();
        doc.add_text(self.kind, KIND_UNIT);
        doc.add_text(self.session_id, unit.session_id);
        doc.add_text(self.event_id, unit.event_id);
        doc.add_u64(self.unit_hash, unit_hash(unit.session_id, unit.event_id));
        doc.add_text(self.framework, unit.framework);
        doc.add_text(self.unit_type, unit.unit_type);
        doc.add_text(self.actor, unit.actor_id);
        doc.add_text(self.actor, unit.actor_type);
        doc.add_text(self.actor_id, unit.actor_id);
        doc.add_text(self.actor_type, unit.actor_type);
        for tool in &unit.tools {
            doc.add_text(self.tool, tool);
        }
        doc.add_bool(self.failed, unit.failed);
        doc.add_bool(self.delegation, unit.delegation);
        if let Some(ms) = unit.time_ms {
            doc.add_i64(self.time_ms, ms);
        }
        if let Some(timestamp) = unit.timestamp {
            doc.add_text(self.timestamp, timestamp);
        }
        doc.add_u64(self.seq, unit.seq);
        doc.add_u64(self.tie_order, tie_order(unit.session_id, unit.seq));
        doc.add_text(self.text, &unit.text);
        doc.add_text(self.excerpt, unit.excerpt());
        doc
    }

    /// The marker of session `session_id`: indexed at content version `fingerprint`,
    /// from files with `stamps` (JSON).
    pub fn marker_document(&self, session_id: &str, fingerprint: &str, stamps: &str) -> TantivyDocument {
        let mut doc = TantivyDocument::new();
        doc.add_text(self.kind, KIND_SESSION);
        doc.add_text(self.session_id, session_id);
        doc.add_u64(self.unit_hash, 0);
        doc.add_text(self.fingerprint, fingerprint);
        doc.add_text(self.stamps, stamps);
        doc
    }
}

/// The column of [`tie_order`].
pub const TIE_ORDER: &str = "tie_order";

/// Where a unit stands among units of equal score: its session (by the top 40 bits of
/// the hash of its id), then its place in the session (the low 24 bits: places past 16
/// million share the last value). One number, so that ordering a million ties costs one
/// column read each; the same for a unit whatever the index's segments.
pub fn tie_order(session_id: &str, seq: u64) -> u64 {
    let session = super::unit_set::unit_hash(session_id, "") & !0xFF_FFFF;
    session | seq.min(0xFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_order_by_session_then_place() {
        let (a, b) = (tie_order("s1", 0), tie_order("s2", 0));
        assert_ne!(a, b);
        let first = a.min(b);
        let session = if first == a { "s1" } else { "s2" };
        let other = if first == a { "s2" } else { "s1" };
        assert!(tie_order(session, 5) < tie_order(session, 6), "places in order");
        assert!(
            tie_order(session, 1 << 30) < tie_order(other, 0),
            "a session's places stay within it"
        );
        assert_eq!(tie_order(session, 1 << 30), tie_order(session, 0xFF_FFFF));
    }
}
