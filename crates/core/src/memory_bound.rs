//! The memory a session may take, bounded by its input.
//!
//! A record costs its text, and then a fixed number of bytes whatever its text: the record
//! itself, its unit, item, place in the order, its node and edges, and its part of every
//! rendered body (a workflow node is a few hundred bytes of JSON even for a prompt of two
//! words). Realistic logs carry kilobytes of text per record, and the fixed part is a small
//! share of what they cost; a log of millions of tiny records costs twenty to forty times
//! its size in fixed parts alone. So the fixed costs are what a hostile input multiplies,
//! and what this module bounds: as the files are parsed, each kept record is charged its
//! fixed cost (`formats::claude_code::cost`) against a [`RecordBudget`] of
//! [`MemoryBound::fixed_cost_room`] bytes, and reading stops, with an error, as soon as the charges pass it. Nothing past that point
//! is parsed, so a refusal costs about the budget's worth of parsed records, not the
//! session's.
//!
//! An AutoGen log's messages are charged the same way as they are read (their costs are
//! beside them, in `formats::autogen::cost`): a fixed part, and their text, which its bodies copy (they write it
//! afresh, where a record's text is a slice of the input the bodies refer to), less the
//! text's share of the input the message was read from.
//!
//! The costs are measured, not derived: `tests/integration/complexity.rs` loads each shape
//! of record (a tiny prompt, a system notice, an assistant turn of fifty tool calls, fifty
//! text blocks, fifty tool results) with a counting allocator, renders every view once and
//! keeps the bodies, and checks the peak stays within the charges.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
    use crate::memory_bound::*;

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
