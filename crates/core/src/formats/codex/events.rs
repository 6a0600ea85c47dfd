//! Events (`event_msg` lines) and compactions (`compacted` lines) made into records or
//! into facts about the records already read (tokens, a call's verdict, a spawned thread).
//!
//! Codex writes much twice: `agent_message`, `agent_reasoning` and (in most versions)
//! `user_message` repeat a response item. The response items are the source of the
//! assistant's text and reasoning; `user_message` is the source of typed prompts when the
//! file has any (see [`super::prompts_from_events`]).

use serde_json::Value;

use super::items::prompt_blocks;
use super::reader::Reading;
use super::verdict::event_failed;
use super::wire::Payload;
use crate::formats::claude_code::records::{Content, Message, Position, RawJson, RecordKind, Usage};

impl Reading {
    /// Reads an event.
    pub(super) fn event(&mut self, p: Payload, pos: Position, ts: Option<String>) {
        let kind = p.kind.clone().unwrap_or_default();
        self.count(&format!("event_msg:{kind}"));
        match kind.as_str() {
            "user_message" if self.prompts_from_events => {
                let images = match &p.images {
                    Value::Array(urls) => urls.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                    _ => Vec::new(),
                };
                let blocks = prompt_blocks(p.message.as_deref().unwrap_or_default(), images);
                let message = Message {
                    content: Content::Blocks(blocks),
                    ..Message::default()
                };
                self.record(RecordKind::User, pos, ts, Some(message));
            }
            "token_count" => self.tokens(&p),
            "turn_aborted" => {
                let reason = p.reason.as_deref().unwrap_or("unknown");
                self.system(pos, ts, "turn_aborted", &format!("Turn aborted ({reason})"));
            }
            "error" => {
                self.system(pos, ts, "error", p.message.as_deref().unwrap_or_default());
            }
            "thread_rolled_back" => {
                let n = p.num_turns.unwrap_or(0);
                self.system(pos, ts, "thread_rolled_back", &format!("Rolled back {n} turn(s)"));
            }
            "context_compacted" if !self.after_compaction => self.compaction(&p, pos, ts),
            "task_started" | "task_complete" => self.close_response(),
            "collab_agent_spawn_end" => {
                if let (Some(call), Some(thread)) = (p.call_id, p.new_thread_id) {
                    self.spawned.push((call, thread));
                }
            }
            other => {
                let verdict = event_failed(other, &p.exit_code, p.success, &p.status, &p.result);
                if let (Some(failed), Some(call)) = (verdict, p.call_id) {
                    self.verdicts.push((call, failed));
                }
            }
        }
    }

    /// A `token_count` event: the last request's tokens, given to the last assistant
    /// record when it has none yet.
    fn tokens(&mut self, p: &Payload) {
        let Some(last) = p.info.0.as_ref().and_then(|i| i.last_token_usage.0.as_ref()) else {
            return;
        };
        let Some(i) = self.last_assistant else {
            return;
        };
        if let Some(m) = self.parsed.records[i]
            .message
            .as_mut()
            .filter(|m| m.usage.is_none())
        {
            m.usage = Some(Box::new(Usage {
                input_tokens: last.input_tokens.unwrap_or(0),
                output_tokens: last.output_tokens.unwrap_or(0),
            }));
        }
    }

    /// A compaction: a `compact_boundary` system record showing the summary, its
    /// `compact_metadata` saying what the log gives (the window, how many items replaced
    /// the history).
    pub(super) fn compaction(&mut self, p: &Payload, pos: Position, ts: Option<String>) {
        let mut meta = serde_json::Map::new();
        meta.insert(
            "trigger".to_owned(),
            Value::from(p.kind.as_deref().unwrap_or("compacted")),
        );
        if let Value::Array(items) = &p.replacement_history {
            meta.insert("replacementHistoryItems".to_owned(), Value::from(items.len()));
        }
        for (key, v) in [("windowId", &p.window_id), ("windowNumber", &p.window_number)] {
            if !v.is_null() {
                meta.insert(key.to_owned(), v.clone());
            }
        }
        let summary = p.message.as_deref().unwrap_or_default();
        let i = self.system(pos, ts, "compact_boundary", summary);
        self.parsed.records[i].extra_mut().compact_metadata =
            Some(RawJson::copy_of(&Value::Object(meta).to_string()));
        self.after_compaction = true;
    }
}
