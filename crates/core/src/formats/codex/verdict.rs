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

use serde_json::Value;

/// What an output says: its text, whether it reports a failure, and the agent a
/// `spawn_agent` output names.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Outcome {
    /// The text shown for the result.
    pub(super) text: String,
    /// True when the output carries a non-zero exit code or `success: false`.
    pub(super) failed: bool,
    /// `agent_id` of an output object (`spawn_agent`).
    pub(super) agent_id: Option<String>,
}

/// Reads `output`: a string (plain, or holding JSON), content items, or an object.
pub(super) fn outcome(output: &Value) -> Outcome {
    match output {
        Value::String(s) => string_outcome(s),
        Value::Array(items) => Outcome {
            text: items_text(items),
            failed: false,
            agent_id: None,
        },
        Value::Object(map) => object_outcome(map),
        Value::Null => Outcome::default(),
        other => Outcome {
            text: other.to_string(),
            ..Outcome::default()
        },
    }
}

/// A string output: JSON text is read as the object (or items) it holds; plain text by
/// its exit-code line.
fn string_outcome(s: &str) -> Outcome {
    let trimmed = s.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(v @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str::<Value>(trimmed) {
            let mut read = outcome(&v);
            if read.text.is_empty() && read.agent_id.is_none() {
                read.text = s.to_owned();
            }
            return read;
        }
    }
    Outcome {
        failed: text_exit_code(s).is_some_and(|c| c != 0),
        text: s.to_owned(),
        agent_id: None,
    }
}

/// An object output: `{"output", "metadata": {"exit_code"}}`, `{"content", "success"}`,
/// a content item `{"type":"input_text","text"}`, or `{"agent_id"}`.
fn object_outcome(map: &serde_json::Map<String, Value>) -> Outcome {
    let text = ["output", "content", "text"]
        .iter()
        .find_map(|k| map.get(*k))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items_text(items),
            Value::Null => String::new(),
            other => other.to_string(),
        });
    let exit_code = map
        .get("metadata")
        .and_then(|m| m.get("exit_code"))
        .or_else(|| map.get("exit_code"))
        .and_then(Value::as_i64);
    let failed = exit_code.is_some_and(|c| c != 0)
        || map.get("success").and_then(Value::as_bool) == Some(false)
        || text.as_deref().and_then(text_exit_code).is_some_and(|c| c != 0);
    let agent_id = map.get("agent_id").and_then(Value::as_str).map(str::to_owned);
    Outcome {
        text: text.unwrap_or_else(|| Value::Object(map.clone()).to_string()),
        failed,
        agent_id,
    }
}

/// The text parts of content items (`input_text`, `output_text`, `text`), joined by
/// newlines; an image part shows as `[image]`.
pub(super) fn items_text(items: &[Value]) -> String {
    let mut out = String::new();
    for item in items {
        let part = match item {
            Value::String(s) => Some(s.as_str()),
            Value::Object(m) => match m.get("text").and_then(Value::as_str) {
                Some(t) => Some(t),
                None if m.contains_key("image_url") => Some("[image]"),
                None => None,
            },
            _ => None,
        };
        if let Some(p) = part {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(p);
        }
    }
    out
}

/// The exit code a plain-text output states: `Exit code: N` as its first line, or
/// `Process exited with code N` on one of its header lines (before `Output:`).
pub(super) fn text_exit_code(s: &str) -> Option<i64> {
    for (i, line) in s.lines().take(6).enumerate() {
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
    exit_code: &Value,
    success: Option<bool>,
    status: &Value,
    result: &Value,
) -> Option<bool> {
    let bad_status = matches!(status.as_str(), Some("failed" | "declined"));
    match kind {
        "exec_command_end" => Some(exit_code.as_i64().is_some_and(|c| c != 0) || bad_status),
        "patch_apply_end" => Some(success == Some(false) || bad_status),
        "mcp_tool_call_end" => Some(
            result.get("Err").is_some()
                || result
                    .get("Ok")
                    .and_then(|ok| ok.get("isError").or_else(|| ok.get("is_error")))
                    .and_then(Value::as_bool)
                    == Some(true),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exit_codes_decide_in_every_encoding() {
        let old = json!("{\"output\":\"boom\\n\",\"metadata\":{\"exit_code\":2,\"duration_seconds\":0.1}}");
        assert_eq!(
            outcome(&old),
            Outcome {
                text: "boom\n".into(),
                failed: true,
                agent_id: None
            }
        );
        let ok = json!("{\"output\":\"fine\",\"metadata\":{\"exit_code\":0}}");
        assert!(!outcome(&ok).failed);
        assert!(outcome(&json!("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nno")).failed);
        assert!(
            !outcome(&json!(
                "Exit code: 0\nWall time: 0.2 seconds\nOutput:\nerror: warning only"
            ))
            .failed
        );
        let unified = "Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 127\nOriginal token count: 3\nOutput:\nx";
        assert!(outcome(&json!(unified)).failed);
        assert!(!outcome(&json!("Process running with session ID 3")).failed);
    }

    #[test]
    fn stderr_words_alone_never_fail_a_call() {
        assert!(!outcome(&json!("error: something went wrong\nsee stderr")).failed);
        assert!(!outcome(&json!("failed in sandbox")).failed);
    }

    #[test]
    fn objects_items_and_spawn_results() {
        let items = json!([{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:x"}]);
        assert_eq!(outcome(&items).text, "a\n[image]");
        assert!(outcome(&json!({"content":"x","success":false})).failed);
        let spawn = outcome(&json!("{\"agent_id\":\"019c-child\"}"));
        assert_eq!(spawn.agent_id.as_deref(), Some("019c-child"));
        assert_eq!(spawn.text, "{\"agent_id\":\"019c-child\"}");
    }

    #[test]
    fn events_give_their_own_verdict() {
        let n = Value::Null;
        assert_eq!(
            event_failed("exec_command_end", &json!(1), None, &n, &n),
            Some(true)
        );
        assert_eq!(
            event_failed("exec_command_end", &json!(0), None, &json!("declined"), &n),
            Some(true)
        );
        assert_eq!(
            event_failed("exec_command_end", &json!(0), None, &json!("completed"), &n),
            Some(false)
        );
        assert_eq!(
            event_failed("patch_apply_end", &n, Some(false), &n, &n),
            Some(true)
        );
        assert_eq!(
            event_failed("mcp_tool_call_end", &n, None, &n, &json!({"Err":"x"})),
            Some(true)
        );
        assert_eq!(
            event_failed(
                "mcp_tool_call_end",
                &n,
                None,
                &n,
                &json!({"Ok":{"isError":false}})
            ),
            Some(false)
        );
        assert_eq!(event_failed("token_count", &n, None, &n, &n), None);
    }
}
