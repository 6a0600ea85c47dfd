//! Telling a session's format from its main file's start. Kept apart from [`super::input`],
//! which every format's reader may use, so that no reader and the input import each other.

use super::input::{Format, SessionInput};

impl SessionInput {
    /// The format of the session, told by its main file's start: a pi session starts with a
    /// `{"type":"session"}` header; a Codex rollout is told by [`super::codex::looks_like`];
    /// a Gemini CLI chat with its header or is one JSON object holding one
    /// ([`super::gemini::sniff`]); an AutoGen log's first message has `sender` or
    /// `recipient`, or is an AgentChat or 0.2 chat message ([`super::autogen::looks_like`]);
    /// anything else is read as Claude Code.
    pub fn detect_format(&self) -> Format {
        let Some(main) = self.main_index().map(|i| &self.files[i].bytes) else {
            return Format::ClaudeCode;
        };
        match crate::json::frame::lines(main).next() {
            Some(line) if super::pi::is_pi_header(line.bytes) => Format::Pi,
            Some(_) if super::codex::looks_like(main) => Format::Codex,
            Some(_) if super::gemini::looks_like(main) => Format::Gemini,
            Some(_) if super::autogen::looks_like_bytes(main) => Format::Autogen,
            _ => Format::ClaudeCode,
        }
    }
}
