//! The memory a session may take, bounded by its input (issue 15, D1).
//!
//! A record costs its text, and then a fixed number of bytes whatever its text: the record
//! itself, its unit, item, place in the order, its node and edges, and its part of every
//! rendered body (a workflow node is a few hundred bytes of JSON even for a prompt of two
//! words). Realistic logs carry kilobytes of text per record, and the fixed part is a small
//! share of what they cost; a log of millions of tiny records costs twenty to forty times
//! its size in fixed parts alone. So the fixed costs are what a hostile input multiplies,
//! and what this module bounds: as the files are parsed, each kept record is charged its
//! [`fixed_cost`] against a [`RecordBudget`] of [`MemoryBound::fixed_cost_room`] bytes, and
//! reading stops, with an error, as soon as the charges pass it. Nothing past that point
//! is parsed, so a refusal costs about the budget's worth of parsed records, not the
//! session's.
//!
//! An AutoGen log's messages are charged the same way as they are read
//! ([`message_cost`]): a fixed part, and their text, which its bodies copy (they write it
//! afresh, where a record's text is a slice of the input the bodies refer to), less the
//! text's share of the input the message was read from.
//!
//! The costs are measured, not derived: `tests/integration/complexity.rs` loads each shape
//! of record (a tiny prompt, a system notice, an assistant turn of fifty tool calls, fifty
//! text blocks, fifty tool results) with a counting allocator, renders every view once and
//! keeps the bodies, and checks the peak stays within the charges.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::formats::autogen::AgMessage;
use crate::formats::claude_code::records::{Block, Content, Record};

/// Fixed cost of any kept record (measured at the peak of loading and rendering every
/// view: 1,846 bytes for a chained prompt of a few words, 2,184 for a system notice).
pub const RECORD_COST: usize = 2_400;

/// Fixed cost of a tool call on top of its record's: its own node, edges and entries in
/// every view (measured: about 1,260 bytes per call in a turn of fifty).
pub const TOOL_USE_COST: usize = 1_400;

/// Fixed cost of any other content block on top of its record's (measured: 100 bytes per
/// text block, 190 per tool result, in records of fifty).
pub const BLOCK_COST: usize = 250;

/// Share of the bound, per input byte, left to what costs in proportion to the text: the
/// files while they are read, the text the session keeps, and the bodies' copies of it. In
/// real logs that is about twice the input (the sample: 2.1 times at the peak, fixed costs
/// included); a log that is all prose shown in every view costs up to six times it.
pub const TEXT_SHARE: f64 = 2.5;

/// Part of the allowance the process holds whatever the session: its own footprint (about
/// 20 MB at rest) and what the allocator commits ahead of the allocations (measured on
/// the server's peak RSS: 40 to 70 MB more than was allocated, for sessions of 1,000 to
/// 200,000 records). The records' fixed costs get the rest.
pub const PROCESS_RESERVE: usize = 64 << 20;

/// Fixed cost of an AutoGen message, whatever its text: the message, its annotation unit,
/// graph interaction and chat-log entry, and their JSON (measured at the peak of loading
/// and rendering every view: 927 to 1,018 bytes beyond its text for a message of a few
/// words, in each form the reader takes).
pub const MESSAGE_COST: usize = 1_200;

/// Copies of an AutoGen message's text its bodies hold, besides the message's own: the
/// annotations, the graph and the chat log (and the graph's preview, up to [`PREVIEW_BYTES`]
/// of it), and one more while a body is written (measured: rendering the annotations or
/// the graph of a log of long texts holds about twice the body at its peak).
pub const CONTENT_COPIES: usize = 4;

/// The most bytes the graph's preview of a message (100 UTF-16 units) takes in JSON.
pub const PREVIEW_BYTES: usize = 600;

/// Copies of a party's name an AutoGen message may cost: the message, its unit and chat-log
/// entry, and, once per party or pair, the graph's node and edge and the metrics' three maps
/// (each a copy and its JSON).
pub const NAME_COPIES: usize = 12;

/// Fixed cost of each tool call or result of an AutoGen message ([`AgMessage::tools`]) on
/// top of the message's: the part, its own graph interaction (a part's text is a share of
/// the message's, already charged), and its entry in its call's `tool_summary` (measured:
/// 431 to 443 bytes a part beyond its message's [`MESSAGE_COST`], in requests of 20 calls
/// and their results, AgentChat's and AG2's).
pub const TOOL_PART_COST: usize = 600;

/// Copies of a tool call's id and name an AutoGen message may cost: the part's own, the
/// `tool_summary` entry and its JSON, and one more while the body is written.
pub const TOOL_NAME_COPIES: usize = 4;

/// The cost of an AutoGen message read from `input_bytes` of its log (its receiver, if it
/// is not known yet, is charged apart: [`receiver_cost`]): [`MESSAGE_COST`], a
/// [`TOOL_PART_COST`] per tool call or result, and its text (what the message holds, and
/// the copies the bodies write) less the [`TEXT_SHARE`] of its input, which the bound
/// leaves to text.
pub fn message_cost(message: &AgMessage, input_bytes: usize) -> usize {
    let content = json_len(&message.content);
    let names = json_len(&message.sender) + message.receiver.as_deref().map_or(0, json_len);
    let tool_names: usize = message
        .tools
        .iter()
        .map(|p| p.call_id.as_deref().map_or(0, json_len) + p.name.as_deref().map_or(0, json_len))
        .sum();
    // A preview per interaction: one per tool part (their texts share the message's), else
    // one.
    let previews = PREVIEW_BYTES.saturating_mul(message.tools.len().max(1));
    let text = message.content.capacity()
        + CONTENT_COPIES * content
        + content.min(previews)
        + NAME_COPIES * names
        + TOOL_NAME_COPIES * tool_names;
    let covered = (TEXT_SHARE * input_bytes as f64) as usize;
    let parts = message.tools.len().saturating_mul(TOOL_PART_COST);
    MESSAGE_COST
        .saturating_add(parts)
        .saturating_add(text.saturating_sub(covered))
}

/// The cost of giving an AutoGen message `receiver` once it was read.
pub fn receiver_cost(receiver: &str) -> usize {
    NAME_COPIES * json_len(receiver)
}

/// The length of `text` as a JSON string's inside (serde_json's escapes).
fn json_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// How much memory loading a session and rendering its views once may take: `per_input_byte`
/// times the input plus `allowance`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryBound {
    /// Bytes per byte of input.
    pub per_input_byte: f64,
    /// Bytes allowed whatever the input (small sessions, fixed buffers).
    pub allowance: usize,
}

impl Default for MemoryBound {
    /// Issue 15's target: four times the input plus 100 MiB.
    fn default() -> Self {
        MemoryBound {
            per_input_byte: 4.0,
            allowance: 100 << 20,
        }
    }
}

impl MemoryBound {
    /// What the fixed costs of a session of `input_bytes` may add up to: the bound less the
    /// [`TEXT_SHARE`] of the input and the [`PROCESS_RESERVE`].
    pub fn fixed_cost_room(&self, input_bytes: usize) -> usize {
        let per_byte = (self.per_input_byte - TEXT_SHARE).max(0.0);
        // Saturating: a float past `usize::MAX` converts to it.
        self.allowance
            .saturating_sub(PROCESS_RESERVE)
            .saturating_add((per_byte * input_bytes as f64) as usize)
    }
}

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

/// The room left for fixed costs while a session's files are read, shared by the threads
/// that read them. Without a bound it only sums the charges.
#[derive(Debug)]
pub struct RecordBudget {
    room: usize,
    charged: AtomicUsize,
    exhausted: AtomicBool,
}

impl RecordBudget {
    /// A budget of `room` bytes.
    pub fn new(room: usize) -> RecordBudget {
        RecordBudget {
            room,
            charged: AtomicUsize::new(0),
            exhausted: AtomicBool::new(false),
        }
    }

    /// A budget that never runs out.
    pub fn unbounded() -> RecordBudget {
        RecordBudget::new(usize::MAX)
    }

    /// Charges `cost`; false once the charges have passed the room (this one or an earlier
    /// one), after which reading should stop.
    pub fn charge(&self, cost: usize) -> bool {
        let before = self.charged.fetch_add(cost, Ordering::Relaxed);
        if before.saturating_add(cost) > self.room {
            self.exhausted.store(true, Ordering::Relaxed);
        }
        !self.is_exhausted()
    }

    /// True once the charges have passed the room.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// What was charged so far.
    pub fn charged(&self) -> usize {
        self.charged.load(Ordering::Relaxed)
    }

    /// The room.
    pub fn room(&self) -> usize {
        self.room
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::parse::parse_file;
    use crate::memory_bound::*;

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

    #[test]
    fn the_room_is_the_bound_less_the_texts_share() {
        let bound = MemoryBound {
            per_input_byte: 4.0,
            allowance: PROCESS_RESERVE + 1000,
        };
        assert_eq!(bound.fixed_cost_room(100), 1000 + 150);
        let tight = MemoryBound {
            per_input_byte: 1.0,
            ..bound
        };
        assert_eq!(tight.fixed_cost_room(100), 1000);
        let no_allowance = MemoryBound {
            allowance: 0,
            ..bound
        };
        assert_eq!(no_allowance.fixed_cost_room(100), 150);
        let huge = MemoryBound {
            per_input_byte: f64::MAX,
            ..bound
        };
        assert_eq!(huge.fixed_cost_room(100), usize::MAX);
    }

    #[test]
    fn a_budget_runs_out_once_and_stays_out() {
        let budget = RecordBudget::new(10);
        assert!(budget.charge(6));
        assert!(budget.charge(4));
        assert!(!budget.charge(1));
        assert!(!budget.charge(0));
        assert!(budget.is_exhausted());
        assert_eq!(budget.charged(), 11);
        assert!(RecordBudget::unbounded().charge(usize::MAX));
    }
}
