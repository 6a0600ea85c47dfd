//! What a session is made of before parsing: named files and the role of each.

use bytes::Bytes;

/// One file of a session, as uploaded or read from disk.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The name shown in diagnostics and in `source.raw_file`: the upload's file name, or a
    /// path relative to the session's directory (`<session>/subagents/agent-x.jsonl`).
    pub name: String,
    /// The file's bytes, untouched. The session read from them keeps slices of them (its
    /// records' text), so they are shared, never copied.
    pub bytes: Bytes,
}

impl SourceFile {
    /// A file named `name` holding `bytes`.
    pub fn new(name: impl Into<String>, bytes: impl Into<Bytes>) -> Self {
        Self {
            name: name.into(),
            bytes: bytes.into(),
        }
    }

    /// The last path component of the name (the name itself when it has no `/`).
    pub fn base_name(&self) -> &str {
        base_name(&self.name)
    }

    /// What this file is to its session, judged by its name alone.
    pub fn role(&self) -> FileRole {
        FileRole::of(self.base_name())
    }
}

/// The files of one session, in the order they were given.
#[derive(Debug, Clone, Default)]
pub struct SessionInput {
    /// All files: the main session file, sub-agent files and `agent-<id>.meta.json` files.
    pub files: Vec<SourceFile>,
}

impl SessionInput {
    /// A session made of `files`.
    pub fn new(files: Vec<SourceFile>) -> Self {
        Self { files }
    }

    /// Total size of all files in bytes.
    pub fn total_bytes(&self) -> usize {
        self.files.iter().map(|f| f.bytes.len()).sum()
    }

    /// Index of the main session file: the first file that is neither a sub-agent log nor a
    /// sub-agent meta file. Claude Code names it `<session-uuid>.jsonl`; any other name works.
    pub fn main_index(&self) -> Option<usize> {
        self.files.iter().position(|f| f.role() == FileRole::Main)
    }
}

/// The log formats the core reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Claude Code: a main log plus `agent-<id>.jsonl` sub-agent logs.
    ClaudeCode,
    /// pi: one file, a header and a tree of entries (v1, v2 or v3).
    Pi,
    /// AutoGen (one file): sender and recipient messages, JSON lines or a JSON array, or
    /// AutoGen's own AgentChat and 0.2 dumps.
    Autogen,
    /// OpenAI Codex CLI: a rollout, plus the rollouts of the threads it spawned.
    Codex,
    /// Google Gemini CLI: a chat (one JSON object, or JSON lines) plus its sub-agents' chats.
    Gemini,
}

impl Format {
    /// The framework name (`claudecode`, `pi`, `autogen`, `codex`, `gemini`).
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claudecode",
            Format::Pi => "pi",
            Format::Autogen => "autogen",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
        }
    }
}

/// The role of a file within a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// The session's own log.
    Main,
    /// A sub-agent log, `agent-<id>.jsonl` (the prefix is matched case-insensitively).
    SubAgent,
    /// `agent-<id>.meta.json`: the sub-agent's metadata (`toolUseId`, `agentType`).
    SubAgentMeta,
}

impl FileRole {
    /// The role of a file called `base_name`.
    pub fn of(base_name: &str) -> Self {
        let lower = base_name.to_ascii_lowercase();
        if lower.ends_with(".meta.json") {
            FileRole::SubAgentMeta
        } else if lower.starts_with("agent-") {
            FileRole::SubAgent
        } else {
            FileRole::Main
        }
    }
}

/// The last `/`-separated component of `name`.
pub fn base_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

/// The agent id in a sub-agent file name: `agent-<id>.jsonl` or `agent-<id>.meta.json`.
pub fn agent_id_from_name(base_name: &str) -> Option<&str> {
    let rest = base_name.get(6..)?;
    if !base_name[..6].eq_ignore_ascii_case("agent-") {
        return None;
    }
    let id = rest
        .strip_suffix(".meta.json")
        .or_else(|| rest.strip_suffix(".jsonl"))
        .unwrap_or(rest);
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use crate::formats::input::*;

    #[test]
    fn roles_follow_the_claude_code_names() {
        assert_eq!(FileRole::of("ab51623b.jsonl"), FileRole::Main);
        assert_eq!(FileRole::of("agent-80f146b4.jsonl"), FileRole::SubAgent);
        assert_eq!(FileRole::of("Agent-80F146B4.JSONL"), FileRole::SubAgent);
        assert_eq!(FileRole::of("agent-80f146b4.meta.json"), FileRole::SubAgentMeta);
    }

    #[test]
    fn agent_ids_come_from_file_names() {
        assert_eq!(agent_id_from_name("agent-80f146b4.jsonl"), Some("80f146b4"));
        assert_eq!(agent_id_from_name("agent-a1.meta.json"), Some("a1"));
        assert_eq!(agent_id_from_name("agent-.jsonl"), None);
        assert_eq!(agent_id_from_name("main.jsonl"), None);
        assert_eq!(agent_id_from_name("agent"), None);
    }

    #[test]
    fn main_file_is_the_first_non_agent_file() {
        let input = SessionInput::new(vec![
            SourceFile::new("agent-1.jsonl", ""),
            SourceFile::new("s/subagents/agent-2.meta.json", ""),
            SourceFile::new("main.jsonl", ""),
        ]);
        assert_eq!(input.main_index(), Some(2));
        assert_eq!(input.files[1].base_name(), "agent-2.meta.json");
    }
}
