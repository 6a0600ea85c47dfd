//! A tool output's text and the log's verdict on it.
//!
//! Codex writes no success flag for a function call. The verdict is the exit code the
//! output carries, in the encoding of its version:
//! - 0.3x–0.4x `shell` (and `apply_patch` later): the output is a JSON string
//!   `{"output": …, "metadata": {"exit_code": N, …}}`;
//! - `shell_command` / `exec_command`: plain text starting `Exit code: N`;
//! - unified exec: `Process exited with code N` among its header lines;
//! - an output object or content item with `success: false` (older internal form).
//!
//! A non-zero code fails the call; text on stderr, or a word like "error" in the output,
//! never does. The events `exec_command_end`, `patch_apply_end` and `mcp_tool_call_end`,
//! when the log has them, give their own verdict (see [`event_failed`]).

use std::sync::Arc;

use crate::json::quick::{self, JsonText};
use bytestring::ByteString;
use serde::Deserialize;
use serde_json::Number;

use super::text::{decoded, first_visible, items_text, Texts};
use super::wire::{McpResult, Raw};
use crate::json::lenient::{self, ObjectOr};
use crate::json::raw::{Form, JsonStr, TextBuffer};

/// What an output says: its text, whether it reports a failure, and the agent a
/// `spawn_agent` output names.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Outcome {
    /// The text shown for the result.
    pub(super) text: JsonStr,
    /// True when the output carries a non-zero exit code or `success: false`.
    pub(super) failed: bool,
    /// `agent_id` of an output object (`spawn_agent`).
    pub(super) agent_id: Option<String>,
}

/// Reads `output`: a string (plain, or holding JSON), content items, or an object.
pub(super) fn outcome(texts: &Texts<'_>, output: Raw<'_>) -> Outcome {
    let Some(raw) = output else {
        return Outcome::default();
    };
    match raw.get().as_bytes().first() {
        Some(b'"') => string_outcome(texts, raw.get()),
        Some(b'[') => Outcome {
            text: items_text(texts, raw),
            ..Outcome::default()
        },
        Some(b'{') => {
            let object = quick::from_str(raw.get()).unwrap_or_default();
            object_outcome(texts, object, raw.get())
        }
        Some(b'n') => Outcome::default(),
        _ => Outcome {
            text: JsonStr::new(raw.get()),
            ..Outcome::default()
        },
    }
}

/// A string output (`literal`, quotes included): JSON text is read as the object (or
/// items) it holds; plain text by its exit-code line.
fn string_outcome(texts: &Texts<'_>, literal: &str) -> Outcome {
    if matches!(first_visible(literal), Some('{' | '[')) {
        // The texts inside are slices of the decoded string, kept whole.
        let buffer: TextBuffer = Arc::new(ByteString::from(decoded(literal).into_owned()));
        let inside = Texts::in_decoded(&buffer);
        let read = json_outcome(&inside, buffer.trim());
        if let Some(mut read) = read {
            if read.text.is_empty() && read.agent_id.is_none() {
                read.text = texts.literal(literal);
            }
            return read;
        }
    }
    let text = texts.literal(literal);
    Outcome {
        failed: stated_exit_code(&text).is_some_and(|c| c != 0),
        text,
        agent_id: None,
    }
}

/// The outcome of `json`, the text of a string output, when it is a JSON object or list.
fn json_outcome(texts: &Texts<'_>, json: &str) -> Option<Outcome> {
    if json.starts_with('{') {
        let object: OutputObject<'_> = quick::from_str(json).ok()?;
        return Some(object_outcome(texts, object, json));
    }
    let items: JsonText<'_> = quick::from_str(json).ok()?;
    Some(Outcome {
        text: items_text(texts, items),
        ..Outcome::default()
    })
}

/// The fields of an output object that give its text and verdict.
#[derive(Deserialize, Default)]
#[serde(default)]
struct OutputObject<'a> {
    #[serde(borrow)]
    output: Raw<'a>,
    #[serde(borrow)]
    content: Raw<'a>,
    #[serde(borrow)]
    text: Raw<'a>,
    metadata: ObjectOr<Metadata>,
    #[serde(deserialize_with = "lenient::number")]
    exit_code: Option<Number>,
    #[serde(deserialize_with = "lenient::bool")]
    success: Option<bool>,
    #[serde(deserialize_with = "lenient::string")]
    agent_id: Option<String>,
}

/// `metadata` of an output object.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    #[serde(deserialize_with = "lenient::number")]
    exit_code: Option<Number>,
}

/// An object output (`object`, read from `json`): `{"output", "metadata": {"exit_code"}}`,
/// `{"content", "success"}`, a content item `{"type":"input_text","text"}`, or
/// `{"agent_id"}`.
fn object_outcome(texts: &Texts<'_>, object: OutputObject<'_>, json: &str) -> Outcome {
    let text = match object.output.or(object.content).or(object.text) {
        Some(v) => match v.get().as_bytes().first() {
            Some(b'"') => texts.literal(v.get()),
            Some(b'[') => items_text(texts, v),
            Some(b'n') => JsonStr::default(),
            _ => JsonStr::new(v.get()),
        },
        None => JsonStr::new(json),
    };
    verdict_outcome(text, object)
}

/// The outcome of an output object (`object`) whose text is `text`: failed on a non-zero
/// exit code (its metadata's or its own), `success: false`, or an exit code the text
/// states.
fn verdict_outcome(text: JsonStr, object: OutputObject<'_>) -> Outcome {
    let exit_code = object
        .metadata
        .0
        .and_then(|m| m.exit_code)
        .or(object.exit_code)
        .and_then(|n| n.as_i64());
    let failed = exit_code.is_some_and(|c| c != 0)
        || object.success == Some(false)
        || stated_exit_code(&text).is_some_and(|c| c != 0);
    Outcome {
        text,
        failed,
        agent_id: object.agent_id,
    }
}

/// The exit code `text` states ([`text_exit_code`]). A text whose literal escapes only as
/// serde_json does (every writer's) and whose head has neither phrase is not decoded: the
/// phrases have no character such a literal escapes.
fn stated_exit_code(text: &JsonStr) -> Option<i64> {
    if text.form() != Form::Other {
        let head = text.escaped_head(4 * HEAD_CHARS).as_bytes();
        let finder = |phrase: &[u8]| memchr::memmem::find(head, phrase).is_some();
        if !finder(b"Exit code: ") && !finder(b"Process exited with code ") {
            return None;
        }
    }
    text_exit_code(&head_lines(text))
}

/// The first lines of a text (as many as [`text_exit_code`] reads, and at most
/// [`HEAD_CHARS`] characters), decoded: a long output is not decoded for its verdict.
fn head_lines(text: &JsonStr) -> String {
    let mut breaks = 0;
    text.chars()
        .take(HEAD_CHARS)
        .take_while(|&c| {
            breaks += usize::from(c == '\n');
            breaks < EXIT_CODE_LINES
        })
        .collect()
}

/// The lines an exit code may be stated on.
const EXIT_CODE_LINES: usize = 6;

/// The characters of a text's head read for its exit code: its header lines are short
/// (`Chunk ID`, `Wall time`, `Process exited with code N`, ...).
const HEAD_CHARS: usize = 2048;

/// The exit code a plain-text output states: `Exit code: N` as its first line, or
/// `Process exited with code N` on one of its header lines (before `Output:`).
pub(super) fn text_exit_code(s: &str) -> Option<i64> {
    for (i, line) in s.lines().take(EXIT_CODE_LINES).enumerate() {
        if line == "Output:" {
            break;
        }
        let number = match line.strip_prefix("Exit code: ") {
            Some(n) if i == 0 => Some(n),
            _ => line.strip_prefix("Process exited with code "),
        };
        if let Some(n) = number {
            return n.trim().parse().ok();
        }
    }
    None
}

/// The verdict of an event that ends a call: `exec_command_end` fails on a non-zero
/// `exit_code` or a `failed`/`declined` status; `patch_apply_end` on `success: false` or
/// such a status; `mcp_tool_call_end` on an `Err` result or `isError: true`. `None` for
/// other events.
pub(super) fn event_failed(
    kind: &str,
    exit_code: Option<&Number>,
    success: Option<bool>,
    status: Option<&str>,
    result: &ObjectOr<McpResult>,
) -> Option<bool> {
    let bad_status = matches!(status, Some("failed" | "declined"));
    match kind {
        "exec_command_end" => Some(exit_code.and_then(Number::as_i64).is_some_and(|c| c != 0) || bad_status),
        "patch_apply_end" => Some(success == Some(false) || bad_status),
        "mcp_tool_call_end" => Some(
            result
                .0
                .as_ref()
                .is_some_and(|r| r.err || r.ok.0.as_ref().and_then(|ok| ok.is_error) == Some(true)),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Outcome {
        outcome(&Texts::copies(), Some(serde_json::from_str(json).unwrap()))
    }

    fn string(text: &str) -> Outcome {
        read(&serde_json::to_string(text).unwrap())
    }

    proptest::proptest! {
        /// Every output written as Codex writes one gives its text and its exit code's
        /// verdict.
        #[test]
        fn outputs_as_written_give_their_text_and_verdict(
            text in "(?s).{0,40}",
            code in -2i64..300,
            agent in proptest::option::of("[a-z0-9-]{1,8}"),
        ) {
            let mut json = format!(
                "{{\"output\":{},\"metadata\":{{\"exit_code\":{code},\"duration_seconds\":0.5}}",
                serde_json::to_string(&text).unwrap()
            );
            if let Some(agent) = &agent {
                json.push_str(&format!(",\"agent_id\":\"{agent}\""));
            }
            json.push('}');
            let read = string(&json);
            let stated = text_exit_code(&text).is_some_and(|c| c != 0);
            // An empty output without an agent shows the whole JSON instead.
            let shown = if text.is_empty() && agent.is_none() { &json } else { &text };
            proptest::prop_assert_eq!(read.text.text(), shown.as_str());
            proptest::prop_assert_eq!(read.failed, code != 0 || stated);
            proptest::prop_assert_eq!(read.agent_id, agent);
        }
    }

    #[test]
    fn exit_codes_decide_in_every_encoding() {
        let old = string("{\"output\":\"boom\\n\",\"metadata\":{\"exit_code\":2,\"duration_seconds\":0.1}}");
        assert_eq!(old.text.text(), "boom\n");
        assert!(old.failed);
        assert_eq!(old.agent_id, None);
        assert!(!string("{\"output\":\"fine\",\"metadata\":{\"exit_code\":0}}").failed);
        assert!(string("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nno").failed);
        assert!(!string("Exit code: 0\nWall time: 0.2 seconds\nOutput:\nerror: warning only").failed);
        let unified = "Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 127\nOriginal token count: 3\nOutput:\nx";
        assert!(string(unified).failed);
        assert!(!string("Process running with session ID 3").failed);
    }

    #[test]
    fn stderr_words_alone_never_fail_a_call() {
        assert!(!string("error: something went wrong\nsee stderr").failed);
        assert!(!string("failed in sandbox").failed);
    }

    #[test]
    fn objects_items_and_spawn_results() {
        let items = read(r#"[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:x"}]"#);
        assert_eq!(items.text.text(), "a\n[image]");
        assert!(read(r#"{"content":"x","success":false}"#).failed);
        let spawn = string("{\"agent_id\":\"019c-child\"}");
        assert_eq!(spawn.agent_id.as_deref(), Some("019c-child"));
        assert_eq!(spawn.text.text(), "{\"agent_id\":\"019c-child\"}");
        assert_eq!(read("null"), Outcome::default());
        assert_eq!(read("12").text.text(), "12");
    }

    #[test]
    fn a_long_output_is_read_for_its_verdict_by_its_head_only() {
        let long = format!("Exit code: 3\n{}", "x".repeat(100_000));
        assert!(string(&long).failed);
        let one_line = "y".repeat(100_000);
        assert!(!string(&one_line).failed);
    }

    #[test]
    fn events_give_their_own_verdict() {
        let none = ObjectOr::default();
        let result = |json: &str| serde_json::from_str::<ObjectOr<McpResult>>(json).unwrap();
        let (zero, one) = (Number::from(0), Number::from(1));
        assert_eq!(
            event_failed("exec_command_end", Some(&one), None, None, &none),
            Some(true)
        );
        assert_eq!(
            event_failed("exec_command_end", Some(&zero), None, Some("declined"), &none),
            Some(true)
        );
        assert_eq!(
            event_failed("exec_command_end", Some(&zero), None, Some("completed"), &none),
            Some(false)
        );
        assert_eq!(
            event_failed("patch_apply_end", None, Some(false), None, &none),
            Some(true)
        );
        assert_eq!(
            event_failed("mcp_tool_call_end", None, None, None, &result(r#"{"Err":"x"}"#)),
            Some(true)
        );
        assert_eq!(
            event_failed(
                "mcp_tool_call_end",
                None,
                None,
                None,
                &result(r#"{"Ok":{"isError":false}}"#)
            ),
            Some(false)
        );
        assert_eq!(event_failed("token_count", None, None, None, &none), None);
    }
}
