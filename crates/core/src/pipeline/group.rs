//! Grouping (CONTRACT 3.3): Claude Code writes one record per content block of a model
//! response; the records sharing `(requestId, message.id)` form one assistant turn. Without a
//! `requestId` the `message.id` alone groups (API error messages have none); a record with
//! neither is a turn of its own. Groups never span files.
//!
//! The same turns feed the annotation units, the workflow nodes and the chat log.

use foldhash::{HashMap, HashMapExt, HashSet};

use crate::formats::claude_code::records::{Block, Id, JsonStr, Record, RecordKind, ToolUse, Usage};
use crate::heap::HeapSize;
use crate::json::literals::Text;

/// One model response.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Its records in file order.
    pub records: Vec<usize>,
    /// Its records by (timestamp, file position): the order content is read in.
    pub chunks: Vec<usize>,
    /// `requestId`.
    pub request_id: Option<Id>,
    /// `message.id`.
    pub message_id: Option<Id>,
    /// The record that attaches the turn to the conversation: the earliest chunk whose
    /// parent is not one of the turn's own records. Its parent is the turn's parent.
    pub head: usize,
}

impl Turn {
    /// The earliest record: it gives the turn its timestamp, parent and model.
    pub fn anchor(&self) -> usize {
        self.chunks[0]
    }

    /// The non-empty thinking blocks, in chunk order.
    pub fn thinking<'a>(&self, records: &'a [Record]) -> Vec<&'a JsonStr> {
        self.blocks(records)
            .filter_map(|(_, b)| match b {
                Block::Thinking { thinking, .. } if !thinking.is_empty() => Some(thinking),
                _ => None,
            })
            .collect()
    }

    /// The thinking blocks joined by blank lines.
    pub fn joined_thinking<'a>(&self, records: &'a [Record]) -> Text<'a> {
        join_blocks(self.thinking(records))
    }

    /// The text blocks joined by blank lines.
    pub fn joined_texts<'a>(&self, records: &'a [Record]) -> Text<'a> {
        join_blocks(self.texts(records))
    }

    /// The non-empty text blocks, in chunk order.
    pub fn texts<'a>(&self, records: &'a [Record]) -> Vec<&'a JsonStr> {
        self.blocks(records)
            .filter_map(|(_, b)| match b {
                Block::Text(t) if !t.is_empty() => Some(t),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in chunk order: (record holding it, block index, the call).
    pub fn tool_uses<'a>(&self, records: &'a [Record]) -> Vec<(usize, usize, &'a ToolUse)> {
        self.chunks
            .iter()
            .flat_map(|&i| {
                records[i]
                    .blocks()
                    .iter()
                    .enumerate()
                    .filter_map(move |(b, block)| match block {
                        Block::ToolUse(t) => Some((i, b, t)),
                        _ => None,
                    })
            })
            .collect()
    }

    /// How many tool calls the turn holds ([`Turn::tool_uses`], without listing them).
    pub fn tool_use_count(&self, records: &[Record]) -> usize {
        self.blocks(records)
            .filter(|(_, b)| matches!(b, Block::ToolUse(_)))
            .count()
    }

    /// True when the turn holds something to show: thinking, text or a tool call.
    pub fn has_content(&self, records: &[Record]) -> bool {
        self.blocks(records).any(|(_, b)| match b {
            Block::Thinking { thinking, .. } => !thinking.is_empty(),
            Block::Text(t) => !t.is_empty(),
            Block::ToolUse(_) => true,
            _ => false,
        })
    }

    /// Token usage of the API message, counted once: Claude Code repeats (or grows) the
    /// same `usage` on every chunk, so each field is the maximum over the chunks.
    pub fn usage(&self, records: &[Record]) -> Option<Usage> {
        self.chunks
            .iter()
            .filter_map(|&i| {
                records[i]
                    .message
                    .as_ref()
                    .and_then(|m| m.usage.as_deref().copied())
            })
            .reduce(|a, b| Usage {
                input_tokens: a.input_tokens.max(b.input_tokens),
                output_tokens: a.output_tokens.max(b.output_tokens),
            })
    }

    fn blocks<'a>(&self, records: &'a [Record]) -> impl Iterator<Item = (usize, &'a Block)> + use<'a, '_> {
        self.chunks
            .iter()
            .flat_map(move |&i| records[i].blocks().iter().map(move |b| (i, b)))
    }
}

/// Groups the kept assistant records into turns, in order of first appearance. Returns the
/// turns and, for every record, the turn it belongs to.
pub fn group_turns(records: &[Record], kept: impl Fn(usize) -> bool) -> (Vec<Turn>, Vec<Option<usize>>) {
    let mut turns: Vec<Turn> = Vec::new();
    let mut turn_of = vec![None; records.len()];
    let mut by_key: HashMap<(u32, Option<&str>, &str), usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if r.kind != RecordKind::Assistant || !kept(i) {
            continue;
        }
        let key = match (r.request_id.as_deref(), r.message_id()) {
            (req, Some(msg)) => Some((r.pos.file, req, msg)),
            (Some(req), None) => Some((r.pos.file, Some(req), "")),
            (None, None) => None,
        };
        let t = match key.and_then(|k| by_key.get(&k).copied()) {
            Some(t) => t,
            None => {
                turns.push(Turn {
                    records: Vec::new(),
                    chunks: Vec::new(),
                    request_id: r.request_id.clone(),
                    message_id: r.message.as_ref().and_then(|m| m.id.clone()),
                    head: i,
                });
                if let Some(k) = key {
                    by_key.insert(k, turns.len() - 1);
                }
                turns.len() - 1
            }
        };
        turns[t].records.push(i);
        turn_of[i] = Some(t);
    }
    for turn in &mut turns {
        turn.chunks = turn.records.clone();
        turn.chunks
            .sort_by_key(|&i| (records[i].time.unwrap_or(i64::MAX), records[i].pos));
        // A set: a turn of thousands of chunks made a list's lookups quadratic.
        let own: HashSet<&str> = turn
            .chunks
            .iter()
            .filter_map(|&i| records[i].uuid.as_deref())
            .collect();
        turn.head = turn
            .chunks
            .iter()
            .copied()
            .find(|&i| records[i].logical_or_parent().is_none_or(|p| !own.contains(&p)))
            .unwrap_or(turn.chunks[0]);
    }
    (turns, turn_of)
}

/// `blocks` joined by blank lines, as a turn's text is shown: borrowed when there is one.
fn join_blocks(blocks: Vec<&JsonStr>) -> Text<'_> {
    Text::join(blocks.into_iter().map(Text::json), "\n\n")
}

impl HeapSize for Turn {
    fn heap_size(&self) -> usize {
        self.records.heap_size()
            + self.chunks.heap_size()
            + self.request_id.heap_size()
            + self.message_id.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::parse::parse_file;
    use crate::pipeline::group::*;

    fn chunk(uuid: &str, req: Option<&str>, msg: Option<&str>, ts: &str, block: &str, out: u64) -> String {
        let req = req.map(|r| format!(r#","requestId":"{r}""#)).unwrap_or_default();
        let msg = msg.map(|m| format!(r#""id":"{m}","#)).unwrap_or_default();
        format!(
            r#"{{"type":"assistant","uuid":"{uuid}","timestamp":"{ts}"{req},"message":{{{msg}"content":[{block}],"usage":{{"input_tokens":10,"output_tokens":{out}}}}}}}"#
        )
    }

    /// Regression: a turn's head was found by looking each chunk's parent up in a list of
    /// the turn's uuids (a turn of 40,000 chunks, each parented on the last: 10 s to export
    /// in release). The head is still the first chunk whose parent is outside the turn.
    #[test]
    fn the_head_of_a_turn_of_many_chunks_is_found_in_linear_time() {
        let n = 40_000;
        let mut lines = vec![
            r#"{"type":"user","uuid":"q","timestamp":"2025-01-01T00:00:00Z","message":{"content":"go"}}"#
                .to_owned(),
        ];
        lines.extend((0..n).map(|i| {
            let parent = if i == 5 { "q".to_owned() } else { format!("k{}", n - 1) };
            format!(
                r#"{{"type":"assistant","uuid":"k{i}","parentUuid":"{parent}","timestamp":"2025-01-01T00:00:01Z","requestId":"r1","message":{{"id":"m1","content":[{{"type":"text","text":"x"}}]}}}}"#
            )
        }));
        let records = parse_file(0, lines.join("\n").as_bytes()).records;
        let (turns, _) = group_turns(&records, |_| true);
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].chunks.len(), n);
        assert_eq!(records[turns[0].head].uuid.as_deref(), Some("k5"));
    }

    #[test]
    fn groups_by_request_and_message_and_counts_usage_once() {
        let lines = [
            chunk(
                "a",
                Some("r1"),
                Some("m1"),
                "2025-01-01T00:00:01Z",
                r#"{"type":"thinking","thinking":"hm"}"#,
                3,
            ),
            chunk(
                "b",
                Some("r1"),
                Some("m1"),
                "2025-01-01T00:00:02Z",
                r#"{"type":"text","text":"hi"}"#,
                5,
            ),
            chunk(
                "c",
                None,
                Some("m2"),
                "2025-01-01T00:00:03Z",
                r#"{"type":"text","text":"API Error"}"#,
                0,
            ),
            chunk(
                "d",
                None,
                None,
                "2025-01-01T00:00:04Z",
                r#"{"type":"text","text":"x"}"#,
                0,
            ),
            chunk(
                "e",
                None,
                None,
                "2025-01-01T00:00:05Z",
                r#"{"type":"text","text":"y"}"#,
                0,
            ),
        ];
        let records = parse_file(0, lines.join("\n").as_bytes()).records;
        let (turns, turn_of) = group_turns(&records, |_| true);
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[0].records, vec![0, 1]);
        assert_eq!(turn_of, vec![Some(0), Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(turns[0].thinking(&records), vec!["hm"]);
        assert_eq!(turns[0].texts(&records), vec!["hi"]);
        assert_eq!(
            turns[0].usage(&records),
            Some(Usage {
                input_tokens: 10,
                output_tokens: 5
            })
        );
    }

    #[test]
    fn chunks_are_read_in_time_order() {
        let lines = [
            chunk(
                "late",
                Some("r"),
                Some("m"),
                "2025-01-01T00:00:09Z",
                r#"{"type":"text","text":"second"}"#,
                1,
            ),
            chunk(
                "early",
                Some("r"),
                Some("m"),
                "2025-01-01T00:00:01Z",
                r#"{"type":"text","text":"first"}"#,
                1,
            ),
        ];
        let records = parse_file(0, lines.join("\n").as_bytes()).records;
        let (turns, _) = group_turns(&records, |_| true);
        assert_eq!(turns[0].anchor(), 1);
        assert_eq!(turns[0].texts(&records), vec!["first", "second"]);
    }
}
