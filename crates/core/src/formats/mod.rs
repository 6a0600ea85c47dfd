//! The log formats the pipeline reads: Claude Code's JSONL, pi's session tree, Codex CLI
//! rollouts, Gemini CLI's chats and AutoGen's message logs; [`input`], a session's files, and
//! [`detect`], which tells the formats apart.

pub mod autogen;
pub mod claude_code;
pub mod codex;
pub mod detect;
pub mod gemini;
pub mod input;
pub mod pi;
