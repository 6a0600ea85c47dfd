//! What a Claude Code record (or a pi entry read as one) costs against the session's
//! memory bound ([`crate::memory_bound`]): a fixed part, and one per content block.

use super::records::{Block, Content, Record};

/// Fixed cost of any kept record (measured at the peak of loading and rendering every
/// view: 1,846 bytes for a chained prompt of a few words, 2,184 for a system notice).
pub const RECORD_COST: usize = 2_400;

/// Fixed cost of a tool call on top of its record's: its own node, edges and entries in
/// every view (measured: about 1,260 bytes per call in a turn of fifty).
pub const TOOL_USE_COST: usize = 1_400;

/// Fixed cost of any other content block on top of its record's (measured: 100 bytes per
/// text block, 190 per tool result, in records of fifty).
pub const BLOCK_COST: usize = 250;

/// The fixed cost of `record`: [`RECORD_COST`], and [`TOOL_USE_COST`] or [`BLOCK_COST`]
/// per content block.
pub fn fixed_cost(record: &Record) -> usize {
    let blocks = match &record.message {
        Some(m) => match &m.content {
            Content::Blocks(blocks) => blocks.as_slice(),
            Content::Absent | Content::Text(_) => &[],
        },
        None => &[],
    };
    blocks.iter().fold(RECORD_COST, |cost, block| {
        cost.saturating_add(match block {
            Block::ToolUse(_) => TOOL_USE_COST,
            _ => BLOCK_COST,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::claude_code::parse::parse_file;

    fn cost_of(line: &str) -> usize {
        let records = parse_file(0, line.as_bytes()).records;
        assert_eq!(records.len(), 1, "{line}");
        fixed_cost(&records[0])
    }

    #[test]
    fn a_record_costs_its_fixed_part_and_each_block() {
        assert_eq!(
            cost_of(r#"{"type":"user","message":{"content":"hi"}}"#),
            RECORD_COST
        );
        let turn = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#;
        assert_eq!(cost_of(turn), RECORD_COST + BLOCK_COST + TOOL_USE_COST);
    }
}
