//! The log formats the pipeline reads: Claude Code's JSONL, pi's session tree, Codex CLI
//! rollouts and AutoGen's message logs, and [`input`], which tells them apart.

pub mod autogen;
pub mod claude_code;
pub mod codex;
pub mod input;
pub mod pi;
