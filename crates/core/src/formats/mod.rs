//! The log formats the pipeline reads: Claude Code's JSONL, pi's session tree, Codex CLI
//! rollouts, Gemini CLI's chats and AutoGen's message logs, and [`input`], which tells them
//! apart.

pub mod autogen;
pub mod claude_code;
pub mod codex;
pub mod gemini;
pub mod input;
pub mod pi;
