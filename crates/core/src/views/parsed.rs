//! `POST /api/parse-for-dialog`: a log's messages as the parser reads them, without a
//! session being stored: `{messages: [{step_index, timestamp, speaker, role, content,
//! content_preview}], framework, total_count}`.
//!
//! For Claude Code and pi the messages are the workflow's nodes in step order, each from
//! its sender as the communication graph names it (`user`, `assistant`, `system`,
//! `system - context compact`, `agent-<id>`); for AutoGen, the log's messages. `role` is
//! `user` for the senders `user` and `human` (any case), `system` for `system`, else
//! `assistant` (so a Claude Code tool result, from `user`, is a user message, as in
//! CommuGraph).

use std::borrow::Cow;

use serde::Serialize;

use super::graph::senders;
use crate::json::utf16::{len_utf16, prefix_utf16};
use crate::pipeline::session::Session;

/// How many UTF-16 units of a message its preview keeps (then `...`).
pub const PREVIEW_UNITS: usize = 200;

/// The parse-for-dialog body.
#[derive(Debug, Serialize)]
pub struct ParsedBody<'a> {
    /// The messages, in step order.
    pub messages: Vec<ParsedMessage<'a>>,
    /// The framework the log was read as (`claudecode`, `pi`, `autogen`).
    pub framework: &'static str,
    /// Number of messages.
    pub total_count: usize,
}

/// One message of a parsed log.
#[derive(Debug, Serialize)]
pub struct ParsedMessage<'a> {
    step_index: usize,
    timestamp: Option<&'a str>,
    speaker: Cow<'a, str>,
    role: &'static str,
    content: Cow<'a, str>,
    content_preview: Cow<'a, str>,
}

impl<'a> ParsedMessage<'a> {
    fn new(
        step_index: usize,
        timestamp: Option<&'a str>,
        speaker: Cow<'a, str>,
        content: Cow<'a, str>,
    ) -> Self {
        let content_preview = if len_utf16(&content) > PREVIEW_UNITS {
            Cow::Owned(format!("{}...", prefix_utf16(&content, PREVIEW_UNITS)))
        } else {
            content.clone()
        };
        ParsedMessage {
            step_index,
            timestamp,
            role: role_of(&speaker),
            speaker,
            content,
            content_preview,
        }
    }
}

/// The role of a speaker: `user` for `user` and `human` (any case), `system` for
/// `system`, else `assistant`.
pub fn role_of(speaker: &str) -> &'static str {
    if speaker.eq_ignore_ascii_case("user") || speaker.eq_ignore_ascii_case("human") {
        "user"
    } else if speaker == "system" {
        "system"
    } else {
        "assistant"
    }
}

/// The messages of `session` (loaded from one file) as the parse-for-dialog body.
pub fn parsed(session: &Session) -> ParsedBody<'_> {
    let messages: Vec<ParsedMessage<'_>> = match &session.autogen {
        Some(messages) => messages
            .iter()
            .map(|m| {
                ParsedMessage::new(
                    m.step,
                    Some(m.timestamp.as_str()),
                    Cow::Borrowed(m.sender.as_str()),
                    Cow::Borrowed(m.content.as_str()),
                )
            })
            .collect(),
        None => session
            .workflow
            .nodes
            .iter()
            .zip(senders(session))
            .map(|(node, sender)| {
                ParsedMessage::new(
                    node.step,
                    session.records[node.time_record].timestamp.as_deref(),
                    Cow::Owned(sender),
                    session.node_content(node).to_text(),
                )
            })
            .collect(),
    };
    ParsedBody {
        total_count: messages.len(),
        messages,
        framework: session.format.name(),
    }
}

#[cfg(test)]
mod tests {
    use crate::views::parsed::*;

    #[test]
    fn roles_follow_the_speaker() {
        assert_eq!(role_of("user"), "user");
        assert_eq!(role_of("Human"), "user");
        assert_eq!(role_of("system"), "system");
        assert_eq!(role_of("system - context compact"), "assistant");
        assert_eq!(role_of("agent-a1"), "assistant");
        assert_eq!(role_of("System"), "assistant");
    }
}
