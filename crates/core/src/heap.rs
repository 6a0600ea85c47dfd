//! How many bytes a parsed session holds on the heap, counted from what it holds.
//!
//! The store keeps parsed sessions under a memory budget; an estimate from the input's size
//! alone is wrong by two orders of magnitude on logs of many tiny records (issue 15, D2).
//! [`HeapSize`] walks the structures instead: every `String`, `Vec` and `Box` by its
//! capacity, every hash map by its buckets. The figure is what was asked of the allocator;
//! the allocator's own rounding and bookkeeping add roughly a tenth on top.

use std::collections::BTreeMap;
use std::mem::size_of;

use crate::diagnostics::{Diagnostics, FileSummary, LineIssue, RecordIssue, Samples};
use crate::formats::claude_code::records::{
    Block, Content, Image, JsonStr, Message, RawJson, Record, RecordExtra, RecordKind, ToolResultBlock,
    ToolUse, ToolUseResult, Usage,
};
use crate::formats::pi::PiHeader;
use crate::pipeline::group::Turn;
use crate::pipeline::session::{FileInfo, Item, Lane, Session, Unit};
use crate::pipeline::subagents::Agent;
use crate::pipeline::tree::{Fork, Tree};
use crate::pipeline::workflow::{Node, Workflow};

/// Bytes a value owns on the heap, beyond its own inline size.
pub trait HeapSize {
    /// The bytes requested from the allocator for what this value owns.
    fn heap_size(&self) -> usize;
}

/// Types that own nothing on the heap.
macro_rules! owns_nothing {
    ($($t:ty),* $(,)?) => {
        $(impl HeapSize for $t {
            fn heap_size(&self) -> usize {
                0
            }
        })*
    };
}

owns_nothing!(
    bool,
    u32,
    u64,
    usize,
    i64,
    serde_json::Number,
    (usize, usize),
    Item,
    crate::pipeline::workflow::Edge,
    crate::pipeline::tree::ForkChild,
    crate::formats::claude_code::records::Position,
);

impl HeapSize for String {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
}

impl HeapSize for Box<str> {
    fn heap_size(&self) -> usize {
        self.len()
    }
}

/// Each holder of a shared string counts its share, so that the holders together count it
/// once.
impl HeapSize for std::sync::Arc<str> {
    fn heap_size(&self) -> usize {
        self.len() / std::sync::Arc::strong_count(self)
    }
}

/// A string of the input owns nothing: its bytes are the input's, counted once by the
/// session that keeps them ([`Session::input`]). A copy owns its literal.
impl HeapSize for JsonStr {
    fn heap_size(&self) -> usize {
        self.own_heap_size()
    }
}

impl HeapSize for RawJson {
    fn heap_size(&self) -> usize {
        self.own_heap_size()
    }
}

impl<T: HeapSize> HeapSize for Box<T> {
    fn heap_size(&self) -> usize {
        size_of::<T>() + (**self).heap_size()
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_size(&self) -> usize {
        self.as_ref().map_or(0, HeapSize::heap_size)
    }
}

impl<T: HeapSize> HeapSize for Vec<T> {
    fn heap_size(&self) -> usize {
        self.capacity() * size_of::<T>() + self.iter().map(HeapSize::heap_size).sum::<usize>()
    }
}

impl<K: HeapSize, V: HeapSize> HeapSize for BTreeMap<K, V> {
    fn heap_size(&self) -> usize {
        // A B-tree node holds up to 11 entries; count nodes as if two thirds full.
        let entries = self.len() * (size_of::<K>() + size_of::<V>()) * 3 / 2;
        entries
            + self
                .iter()
                .map(|(k, v)| k.heap_size() + v.heap_size())
                .sum::<usize>()
    }
}

impl<K: HeapSize, V: HeapSize, S> HeapSize for std::collections::HashMap<K, V, S> {
    fn heap_size(&self) -> usize {
        hash_table_bytes::<(K, V)>(self.capacity())
            + self
                .iter()
                .map(|(k, v)| k.heap_size() + v.heap_size())
                .sum::<usize>()
    }
}

/// The bytes of a SwissTable (std's and foldhash's maps) that can hold `capacity` entries:
/// a power of two of buckets at 7/8 load, one entry and one control byte each.
fn hash_table_bytes<T>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = (capacity * 8 / 7).next_power_of_two();
    buckets * (size_of::<T>() + 1)
}

impl HeapSize for Record {
    fn heap_size(&self) -> usize {
        self.kind.heap_size()
            + self.uuid.heap_size()
            + self.parent_uuid.heap_size()
            + self.timestamp.heap_size()
            + self.session_id.heap_size()
            + self.request_id.heap_size()
            + self.agent_id.heap_size()
            + self.message.heap_size()
            + self.extra.heap_size()
    }
}

impl HeapSize for RecordExtra {
    fn heap_size(&self) -> usize {
        self.logical_parent_uuid.heap_size()
            + self.subtype.heap_size()
            + self.content.heap_size()
            + self.compact_metadata.heap_size()
            + self.tool_use_result.heap_size()
            + self.first_kept.heap_size()
    }
}

impl HeapSize for RecordKind {
    fn heap_size(&self) -> usize {
        match self {
            RecordKind::Other(name) => name.heap_size(),
            _ => 0,
        }
    }
}

impl HeapSize for Message {
    fn heap_size(&self) -> usize {
        self.id.heap_size()
            + self.model.heap_size()
            + self.content.heap_size()
            + self.usage.as_ref().map_or(0, |_| size_of::<Usage>())
    }
}

impl HeapSize for Content {
    fn heap_size(&self) -> usize {
        match self {
            Content::Absent => 0,
            Content::Text(t) => t.heap_size(),
            Content::Blocks(blocks) => blocks.heap_size(),
        }
    }
}

impl HeapSize for Block {
    fn heap_size(&self) -> usize {
        match self {
            Block::Text(t) => t.heap_size(),
            Block::Thinking { thinking, signature } => thinking.heap_size() + signature.heap_size(),
            Block::ToolUse(t) => t.heap_size(),
            Block::ToolResult(r) => r.heap_size(),
            Block::Image(i) => i.heap_size(),
            Block::Other(name) => name.heap_size(),
        }
    }
}

impl HeapSize for ToolUse {
    fn heap_size(&self) -> usize {
        self.id.heap_size() + self.name.heap_size() + self.input.heap_size()
    }
}

impl HeapSize for ToolResultBlock {
    fn heap_size(&self) -> usize {
        self.tool_use_id.heap_size() + self.texts.heap_size()
    }
}

impl HeapSize for Image {
    fn heap_size(&self) -> usize {
        self.source_type.heap_size() + self.media_type.heap_size() + self.data.heap_size()
    }
}

impl HeapSize for ToolUseResult {
    fn heap_size(&self) -> usize {
        self.status.heap_size()
            + self.stdout.heap_size()
            + self.stderr.heap_size()
            + self.agent_id.heap_size()
            + self.prompt.heap_size()
            + self.file_path.heap_size()
            + self.file_content.heap_size()
            + self.first_content_text.heap_size()
    }
}

impl HeapSize for Turn {
    fn heap_size(&self) -> usize {
        self.records.heap_size()
            + self.chunks.heap_size()
            + self.request_id.heap_size()
            + self.message_id.heap_size()
    }
}

impl HeapSize for Agent {
    fn heap_size(&self) -> usize {
        self.agent_id.heap_size()
            + self.tool_use_id.heap_size()
            + self.subagent_type.heap_size()
            + self.prompt.heap_size()
            + self.status.heap_size()
    }
}

impl HeapSize for Lane {
    fn heap_size(&self) -> usize {
        self.id.heap_size()
    }
}

impl HeapSize for FileInfo {
    fn heap_size(&self) -> usize {
        self.name.heap_size()
    }
}

impl HeapSize for Unit {
    fn heap_size(&self) -> usize {
        self.records.heap_size()
    }
}

impl HeapSize for PiHeader {
    fn heap_size(&self) -> usize {
        self.id.heap_size() + self.cwd.heap_size()
    }
}

impl HeapSize for Node {
    fn heap_size(&self) -> usize {
        self.id.heap_size() + self.description.get().map_or(0, |d| d.len())
    }
}

impl HeapSize for Workflow {
    fn heap_size(&self) -> usize {
        self.nodes.heap_size()
            + self.edges.heap_size()
            + self.incoming.heap_size()
            + self.outgoing.heap_size()
            + self.call_node.heap_size()
            + self.result_node.heap_size()
    }
}

impl HeapSize for Fork {
    fn heap_size(&self) -> usize {
        self.children.heap_size()
    }
}

impl HeapSize for Tree {
    fn heap_size(&self) -> usize {
        self.active_path.heap_size() + self.forks.heap_size() + self.abandoned.heap_size()
    }
}

impl<T: HeapSize> HeapSize for Samples<T> {
    fn heap_size(&self) -> usize {
        self.samples.heap_size()
    }
}

impl HeapSize for LineIssue {
    fn heap_size(&self) -> usize {
        self.file.heap_size() + self.reason.heap_size()
    }
}

impl HeapSize for RecordIssue {
    fn heap_size(&self) -> usize {
        self.file.heap_size()
            + self.uuid.heap_size()
            + self.related_uuid.heap_size()
            + self.reason.heap_size()
    }
}

impl HeapSize for FileSummary {
    fn heap_size(&self) -> usize {
        self.name.heap_size() + self.agent_id.heap_size()
    }
}

impl HeapSize for Diagnostics {
    fn heap_size(&self) -> usize {
        self.files.heap_size()
            + self.record_types.heap_size()
            + self.unknown_record_types.heap_size()
            + self.bad_lines.heap_size()
            + self.repaired_lines.heap_size()
            + self.duplicate_samples.heap_size()
            + self.phantom_branch_removed.heap_size()
            + self.orphans.heap_size()
            + self.dangling_logical_parents.heap_size()
            + self.cycles_broken.heap_size()
            + self.subagents_missing.heap_size()
            + self.subagents_unlinked.heap_size()
            + self.ignored_files.heap_size()
    }
}

impl HeapSize for Session {
    fn heap_size(&self) -> usize {
        self.heap_breakdown().iter().map(|(_, bytes)| bytes).sum()
    }
}

impl Session {
    /// [`HeapSize::heap_size`] by part: what each of the session's structures holds, so
    /// that a measurement can say where the bytes go.
    pub fn heap_breakdown(&self) -> Vec<(&'static str, usize)> {
        let records = self.records.capacity() * size_of::<Record>()
            + self.records.iter().map(HeapSize::heap_size).sum::<usize>();
        let autogen = self.autogen.as_ref().map_or(0, |messages| {
            messages.capacity() * size_of::<crate::formats::autogen::AgMessage>()
                + messages
                    .iter()
                    .map(|m| {
                        m.timestamp.heap_size()
                            + m.sender.heap_size()
                            + m.receiver.heap_size()
                            + m.content.heap_size()
                            + m.tools.capacity() * size_of::<crate::formats::autogen::ToolPart>()
                            + m.tools
                                .iter()
                                .map(|p| p.call_id.heap_size() + p.name.heap_size())
                                .sum::<usize>()
                    })
                    .sum::<usize>()
        });
        vec![
            ("input", self.input.iter().map(|b| b.len()).sum()),
            ("records", records),
            ("files", self.files.heap_size()),
            ("dedup", self.dedup.heap_size()),
            ("session id", self.session_id.heap_size()),
            ("turns", self.turns.heap_size()),
            ("agents", self.agents.heap_size()),
            ("lanes", self.lanes.heap_size() + self.lane_order.heap_size()),
            ("pi header", self.pi_header.heap_size()),
            ("units", self.units.heap_size()),
            (
                "order",
                self.unit_sequence.heap_size()
                    + self.unit_of_record.heap_size()
                    + self.record_sequence.heap_size()
                    + self.record_parent.heap_size(),
            ),
            ("items", self.items.heap_size()),
            ("tool uses", self.tool_uses.heap_size()),
            ("workflow", self.workflow.heap_size()),
            ("diagnostics", self.diagnostics.heap_size()),
            ("tree", self.tree.heap_size()),
            (
                "timings",
                self.timings.capacity() * size_of::<(&str, std::time::Duration)>(),
            ),
            ("autogen", autogen),
        ]
    }
}
