//! What an AutoGen message costs against the session's memory bound
//! ([`crate::memory_bound`]): a fixed part, its tool parts, and the copies of its text and
//! names its bodies write.

use super::AgMessage;
use crate::memory_bound::TEXT_SHARE;

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
