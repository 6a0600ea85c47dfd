//! Claude Code's session JSONL: its typed records and the parser that reads them.

pub mod cost;
pub mod parse;
pub mod records;
