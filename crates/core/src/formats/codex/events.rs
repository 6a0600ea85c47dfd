//! Events (`event_msg` lines) and compactions (`compacted` lines): what they do to the
//! reading (a record, tokens, a call's verdict, a spawned thread).
//!
//! Codex writes much twice: `agent_message`, `agent_reasoning` and (in most versions)
//! `user_message` repeat a response item. The response items are the source of the
//! assistant's text and reasoning; `user_message` is the source of typed prompts when the
//! file has any (see [`super::prompts_from_events`]).

use serde::de::IgnoredAny;

use super::act::{Act, LineContext};
use super::items::prompt_blocks;
use super::text::{strings, Texts};
use super::verdict::event_failed;
use super::wire::{Payload, TokenUsage};
use crate::formats::claude_code::records::{JsonStr, RawJson, Usage};
use crate::json::quick;

/// Reads an event: its type as counted, and what it does.
pub(super) fn prepare_event(cx: &LineContext<'_>, mut p: Box<Payload<'_>>) -> (String, Act) {
    let kind = p.kind.take().unwrap_or_default();
    let texts = &cx.texts;
    let act = match &*kind {
        "user_message" if cx.prompts_from_events => {
            let text = texts.string(p.message).unwrap_or_default();
            Act::User(prompt_blocks(text, strings(p.images)))
        }
        "token_count" => match p.info.0.as_ref().and_then(|i| i.last_token_usage.0.as_ref()) {
            Some(last) => Act::Tokens(tokens_of(last)),
            None => Act::Nothing,
        },
        "turn_aborted" => {
            let reason = p.reason.as_deref().unwrap_or("unknown");
            system("turn_aborted", JsonStr::new(&format!("Turn aborted ({reason})")))
        }
        "error" => system("error", texts.string(p.message).unwrap_or_default()),
        "thread_rolled_back" => {
            let n = p.num_turns.unwrap_or(0);
            system(
                "thread_rolled_back",
                JsonStr::new(&format!("Rolled back {n} turn(s)")),
            )
        }
        "context_compacted" => compaction(texts, &p, Some("context_compacted")),
        "task_started" | "task_complete" => event_act(&kind),
        "collab_agent_spawn_end" => match (p.call_id, p.new_thread_id) {
            (Some(call_id), Some(thread)) => Act::Spawned {
                call_id: call_id.into_owned(),
                thread: thread.into_owned(),
            },
            _ => Act::Nothing,
        },
        other => {
            let verdict = event_failed(
                other,
                p.exit_code.as_ref(),
                p.success,
                p.status.as_deref(),
                &p.result,
            );
            match (verdict, p.call_id) {
                (Some(failed), Some(call_id)) => Act::Verdict {
                    call_id: call_id.into_owned(),
                    failed,
                },
                _ => Act::Nothing,
            }
        }
    };
    (format!("event_msg:{kind}"), act)
}

/// A system record of `subtype` showing `text`.
fn system(subtype: &'static str, text: JsonStr) -> Act {
    Act::System { subtype, text }
}

/// The act of an event read for its type alone: the end of a task ends the model
/// response; any other does nothing.
pub(super) fn event_act(kind: &str) -> Act {
    match kind {
        "task_started" | "task_complete" => Act::EndResponse,
        _ => Act::Nothing,
    }
}

/// A `token_count` event's tokens.
pub(super) fn tokens_of(last: &TokenUsage) -> Usage {
    Usage {
        input_tokens: last.input_tokens.unwrap_or(0),
        output_tokens: last.output_tokens.unwrap_or(0),
    }
}

/// A compaction: a `compact_boundary` showing the summary, its `compact_metadata` saying
/// what the log gives (the window, how many items replaced the history).
/// `event` names the event it was read from (`None` for a `compacted` line).
pub(super) fn compaction(texts: &Texts<'_>, p: &Payload<'_>, event: Option<&str>) -> Act {
    let trigger = event.or(p.kind.as_deref()).unwrap_or("compacted");
    let mut meta = format!("{{\"trigger\":{}", serde_json::Value::from(trigger));
    let history = p.replacement_history.filter(|r| r.get().starts_with('['));
    if let Some(items) = history.and_then(|r| quick::from_str::<Vec<IgnoredAny>>(r.get()).ok()) {
        meta.push_str(&format!(",\"replacementHistoryItems\":{}", items.len()));
    }
    for (key, v) in [("windowId", p.window_id), ("windowNumber", p.window_number)] {
        if let Some(raw) = v.filter(|r| r.get() != "null") {
            meta.push_str(&format!(",\"{key}\":{}", raw.get()));
        }
    }
    meta.push('}');
    Act::Compaction {
        text: texts.string(p.message).unwrap_or_default(),
        metadata: RawJson::owned(meta),
        from_event: event.is_some(),
    }
}
