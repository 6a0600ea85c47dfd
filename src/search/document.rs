//! What the index knows of one annotation unit, read from the unit as the annotations
//! body shows it (sub-agent units included).

use std::borrow::Cow;

use crate::core::json::time::parse_millis;
use crate::core::views::annotations::AnnotationUnit;

/// The start of a unit's text kept in the index for its snippet: a match beyond it still
/// finds the unit, its snippet then shows the text's start without highlights.
pub const EXCERPT_BYTES: usize = 64 << 10;

/// One unit, as indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitDoc<'a> {
    /// The session's id.
    pub session_id: &'a str,
    /// The session's framework.
    pub framework: &'static str,
    /// Its place in the session (0 for the first unit).
    pub seq: u64,
    /// Its `event_id`.
    pub event_id: &'a str,
    /// `user_turn`, `assistant_turn` or `system_turn`.
    pub unit_type: &'static str,
    /// Who speaks (`human`, `assistant`, `agent-<id>`, `system`, an AutoGen sender).
    pub actor_id: &'a str,
    /// `human`, `agent` or `system`.
    pub actor_type: &'static str,
    /// The tools it calls, each once, in order of first call.
    pub tools: Vec<&'a str>,
    /// One of its tool calls failed by the log's verdict.
    pub failed: bool,
    /// It delegates to a sub-agent (a `Task` call; an AutoGen hand-off).
    pub delegation: bool,
    /// Its timestamp as written.
    pub timestamp: Option<&'a str>,
    /// Its timestamp, ms since the epoch, when it is RFC 3339.
    pub time_ms: Option<i64>,
    /// Its text (what labels' evidence quotes are grounded in).
    pub text: Cow<'a, str>,
}

impl<'a> UnitDoc<'a> {
    /// The document of `unit`, the `seq`-th unit of session `session_id`.
    pub fn of(session_id: &'a str, framework: &'static str, seq: u64, unit: &'a AnnotationUnit<'_>) -> Self {
        let mut tools: Vec<&'a str> = Vec::new();
        for name in unit.tool_calls().into_iter().filter_map(|c| c.tool_name) {
            if !tools.contains(&name) {
                tools.push(name);
            }
        }
        let timestamp = unit.timestamp();
        UnitDoc {
            session_id,
            framework,
            seq,
            event_id: unit.event_id(),
            unit_type: unit.unit_type(),
            actor_id: unit.actor_id(),
            actor_type: unit.actor_type(),
            tools,
            failed: unit.shows_failed_tool_call(),
            delegation: unit.delegates(),
            timestamp,
            time_ms: timestamp.and_then(parse_millis),
            text: unit.text(),
        }
    }

    /// The start of its text kept for snippets: up to [`EXCERPT_BYTES`], cut between
    /// characters.
    pub fn excerpt(&self) -> &str {
        excerpt(&self.text)
    }
}

/// Up to [`EXCERPT_BYTES`] of `text`, cut between characters.
pub fn excerpt(text: &str) -> &str {
    if text.len() <= EXCERPT_BYTES {
        return text;
    }
    let mut end = EXCERPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pipeline::session::Branch;
    use crate::core::views::annotations::annotations;
    use crate::core::{LoadOptions, Session, SessionInput, SourceFile};

    #[test]
    fn a_response_is_indexed_with_its_tools_once_its_failure_and_its_time() {
        let lines = [
            r#"{"type":"user","uuid":"u0","parentUuid":null,"sessionId":"S","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"Run it twice"}}"#,
            r#"{"type":"assistant","uuid":"a0","parentUuid":"u0","sessionId":"S","requestId":"r0","timestamp":"2026-01-05T10:00:01.000Z","message":{"id":"m0","role":"assistant","content":[{"type":"text","text":"Running"},{"type":"tool_use","id":"t1","name":"Bash","input":{}},{"type":"tool_use","id":"t2","name":"Bash","input":{}}]}}"#,
            r#"{"type":"user","uuid":"r1","parentUuid":"a0","sessionId":"S","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"tool_result","tool_use_id":"t2","content":"no","is_error":true}]}}"#,
        ];
        let input = SessionInput {
            files: vec![SourceFile::new(
                "11111111-2222-4333-8444-555555555555.jsonl",
                lines.join("\n").into_bytes(),
            )],
        };
        let session = Session::build(&input, LoadOptions::default()).unwrap();
        let body = annotations(&session, true, Branch::All);
        let docs: Vec<UnitDoc> = body
            .annotations
            .iter()
            .enumerate()
            .map(|(i, u)| UnitDoc::of("sid", "claudecode", i as u64, u))
            .collect();
        assert_eq!(docs.len(), 2);
        let response = &docs[1];
        assert_eq!(response.seq, 1);
        assert_eq!(response.unit_type, "assistant_turn");
        assert_eq!(response.tools, ["Bash"], "each tool once");
        assert!(response.failed && !response.delegation);
        assert_eq!(response.time_ms, Some(1_767_607_201_000));
        assert_eq!(response.text, "Running");
        assert_eq!(docs[0].actor_id, "human");
        assert!(!docs[0].failed);
    }

    #[test]
    fn the_excerpt_is_cut_between_characters() {
        let short = "short";
        assert_eq!(excerpt(short), short);
        let long = format!("{}é{}", "a".repeat(EXCERPT_BYTES - 1), "b".repeat(10));
        let cut = excerpt(&long);
        assert_eq!(
            cut.len(),
            EXCERPT_BYTES - 1,
            "the two-byte é would cross the limit"
        );
        assert!(long.starts_with(cut));
    }
}
