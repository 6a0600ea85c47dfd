//! A [`Conversation`] mapped onto Claude Code [`Record`]s, so that one pipeline serves
//! both (see the table in [`super`]).

use serde_json::Value;

use super::read::{Conversation, Entry, Slot};
use super::wire::{Part, Parts, WireMessage, WireToolCall};
use crate::formats::claude_code::records::{
    Block, Content, Id, Image, JsonStr, Message, Position, RawJson, Record, RecordKind, ToolResultBlock,
    ToolUse, ToolUseResult, Usage,
};
use crate::json::time::parse_millis;

/// The records of `c`, read from file number `file`, in the order of its slots; each
/// slot's first record hangs off the last record of the slot it follows.
pub(super) fn records_of(c: &Conversation, file: u32) -> Vec<Record> {
    let id = c.header.session_id.as_deref().map(Id::from);
    let sub_agent = c.header.is_subagent();
    let mut records = Vec::with_capacity(c.slots.len() * 2);
    let mut last_uuid: Vec<Option<Id>> = Vec::with_capacity(c.slots.len());
    for slot in &c.slots {
        let parent = slot.parent.and_then(|p| last_uuid[p].clone());
        let pos = Position {
            file,
            line: slot.line,
            seq: 0,
        };
        let mut made = slot_records(slot, pos);
        let mut previous = parent;
        for r in &mut made {
            r.parent_uuid = Some(previous.take());
            previous.clone_from(&r.uuid);
            if sub_agent {
                r.agent_id.clone_from(&id);
                r.is_sidechain = Some(true);
            } else {
                r.session_id.clone_from(&id);
            }
        }
        last_uuid.push(previous);
        records.append(&mut made);
    }
    records
}

/// The records of one slot: one for a message or compaction, plus one per tool result of
/// a `gemini` message.
fn slot_records(slot: &Slot, pos: Position) -> Vec<Record> {
    let m = match &slot.entry {
        Entry::Message(m) => m,
        Entry::Compaction {
            summary,
            dropped,
            kept,
        } => {
            let mut r = base(pos, &slot.id, None);
            make_system(&mut r, "compact_boundary", summary);
            r.extra_mut().compact_metadata = Some(RawJson::copy_of(&format!(
                r#"{{"trigger":"checkpoint","droppedMessages":{dropped},"keptMessages":{kept}}}"#
            )));
            return vec![r];
        }
    };
    let mut r = base(pos, &slot.id, m.timestamp.as_deref());
    match m.kind.as_deref() {
        Some("user") => make_user(&mut r, m),
        Some("gemini") => {
            make_assistant(&mut r, m);
            let mut out = vec![r];
            out.extend(result_records(m, &slot.id, pos));
            return out;
        }
        Some(kind @ ("info" | "warning" | "error")) => make_system(&mut r, kind, &m.content.text()),
        other => r.kind = RecordKind::Other(other.map(str::to_owned)),
    }
    vec![r]
}

/// A record at `pos` with uuid `uuid` and time `timestamp`, of no type yet.
fn base(pos: Position, uuid: &str, timestamp: Option<&str>) -> Record {
    Record {
        pos,
        uuid: Some(Id::from(uuid)),
        time: timestamp.and_then(parse_millis),
        timestamp: timestamp.map(Box::from),
        ..Record::default()
    }
}

/// Makes `r` a `system` record of subtype `subtype` showing `text`.
fn make_system(r: &mut Record, subtype: &str, text: &str) {
    r.kind = RecordKind::System;
    let extra = r.extra_mut();
    extra.subtype = Some(subtype.to_owned());
    extra.content = Some(JsonStr::new(text));
}

/// Makes `r` the record of a `user` message: its prompt as typed (`displayContent` when it
/// holds text, else `content`) and its images. A message whose `displayContent` holds no
/// input at all (only a tool's response: the CLI's own "Please continue.") was not typed:
/// it is a `system` notice of subtype `continuation`.
fn make_user(r: &mut Record, m: &WireMessage) {
    let shown = match &m.display_content {
        Some(d) if !d.0.is_empty() && !d.has_input() => {
            return make_system(r, "continuation", &m.content.text());
        }
        Some(d) if d.has_input() => d,
        _ => &m.content,
    };
    let mut blocks: Vec<Block> = Vec::new();
    let text = shown.text();
    if !text.is_empty() {
        blocks.push(Block::Text(JsonStr::new(&text)));
    }
    for part in &m.content.0 {
        match part {
            Part::Inline { mime, data } => blocks.push(Block::Image(Image {
                source_type: Some("base64".to_owned()),
                media_type: mime.clone(),
                data: data.as_deref().map(JsonStr::new),
            })),
            Part::File { .. } => blocks.push(Block::Other(Some("fileData".to_owned()))),
            Part::Response { .. } => blocks.push(Block::Other(Some("functionResponse".to_owned()))),
            _ => {}
        }
    }
    r.kind = RecordKind::User;
    let content = match blocks.as_slice() {
        [Block::Text(t)] => Content::Text(t.clone()),
        _ => Content::Blocks(blocks),
    };
    r.message = Some(Message {
        content,
        ..Message::default()
    });
}

/// Makes `r` the record of a `gemini` message: its thoughts, its text and its tool calls,
/// its model and tokens (output tokens count the thoughts', as Claude's count thinking).
fn make_assistant(r: &mut Record, m: &WireMessage) {
    let mut blocks: Vec<Block> = Vec::new();
    for t in &m.thoughts.0 {
        let text = match (t.subject.as_deref(), t.description.as_deref()) {
            (Some(s), Some(d)) if !s.is_empty() => format!("{s}\n{d}"),
            (s, d) => d.or(s).unwrap_or_default().to_owned(),
        };
        blocks.push(thinking(&text));
    }
    for part in &m.content.0 {
        if let Part::Thought(t) = part {
            blocks.push(thinking(t));
        }
    }
    let text = m.content.text();
    if !text.is_empty() {
        blocks.push(Block::Text(JsonStr::new(&text)));
    }
    for (i, call) in m.tool_calls.0.iter().enumerate() {
        blocks.push(Block::ToolUse(ToolUse {
            id: call_id(call, r.uuid.as_deref().unwrap_or_default(), i),
            name: call.name.clone().unwrap_or_default(),
            input: call.args.as_ref().map(|a| RawJson::copy_of(&a.to_string())),
        }));
    }
    r.kind = RecordKind::Assistant;
    r.message = Some(Message {
        id: r.uuid.clone(),
        model: m.model.as_deref().map(Id::from),
        content: Content::Blocks(blocks),
        usage: m.tokens.0.as_ref().map(|t| {
            Box::new(Usage {
                input_tokens: t.input.unwrap_or(0),
                output_tokens: t.output.unwrap_or(0) + t.thoughts.unwrap_or(0),
            })
        }),
    });
}

fn thinking(text: &str) -> Block {
    Block::Thinking {
        thinking: JsonStr::new(text),
        signature: None,
    }
}

/// A call's id: its own, else `<message id>:call<i>`.
fn call_id(call: &WireToolCall, message: &str, i: usize) -> String {
    match call.id.as_deref() {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("{message}:call{i}"),
    }
}

/// The tool statuses that end a call.
const TERMINAL: [&str; 3] = ["success", "error", "cancelled"];

/// One `user` record per answered tool call of `m` (message `message_id`): a call has an
/// answer when it has a `result` or its status ends it; a call still pending has none.
fn result_records(m: &WireMessage, message_id: &str, pos: Position) -> Vec<Record> {
    let mut out = Vec::new();
    for (i, call) in m.tool_calls.0.iter().enumerate() {
        let status = call.status.as_deref();
        let answered = call.result.as_ref().is_some_and(|r| !r.0.is_empty())
            || status.is_some_and(|s| TERMINAL.contains(&s));
        if !answered {
            continue;
        }
        let id = call_id(call, message_id, i);
        let seq_pos = Position {
            seq: i as u32 + 1,
            ..pos
        };
        let timestamp = call.timestamp.as_deref().or(m.timestamp.as_deref());
        let mut r = base(seq_pos, &format!("{id}:result"), timestamp);
        r.kind = RecordKind::User;
        let texts = result_texts(call);
        let is_error = call_failed(call, &texts);
        r.message = Some(Message {
            content: Content::Blocks(vec![Block::ToolResult(ToolResultBlock {
                tool_use_id: Some(id),
                texts: texts.iter().map(|t| JsonStr::new(t)).collect(),
                is_error,
            })]),
            ..Message::default()
        });
        if let Some(agent) = call.agent_id.as_deref().filter(|a| !a.is_empty()) {
            r.extra_mut().tool_use_result = Some(ToolUseResult {
                agent_id: Some(agent.to_owned()),
                status: call.status.clone(),
                ..ToolUseResult::default()
            });
        }
        out.push(r);
    }
    out
}

/// The texts of a call's result: each `functionResponse`'s `output` (else `error`, else
/// the response as JSON) and text part; else `resultDisplay` when it is a string; else the
/// status in brackets.
fn result_texts(call: &WireToolCall) -> Vec<String> {
    let mut texts = Vec::new();
    for part in call.result.as_ref().map_or(&[][..], |r: &Parts| &r.0) {
        match part {
            Part::Response { response, .. } => {
                let field = |k: &str| response.get(k).and_then(Value::as_str).map(str::to_owned);
                match field("output").or_else(|| field("error")) {
                    Some(t) => texts.push(t),
                    None if !response.is_null() => texts.push(response.to_string()),
                    None => {}
                }
            }
            Part::Text(t) => texts.push(t.clone()),
            _ => {}
        }
    }
    if texts.is_empty() {
        match &call.result_display {
            Some(Value::String(s)) => texts.push(s.clone()),
            _ => texts.push(format!("[{}]", call.status.as_deref().unwrap_or("no result"))),
        }
    }
    texts
}

/// The log's verdict on a call: its status is `error` or `cancelled`; or it is
/// `run_shell_command` and its output's last `Exit Code: N` line says N is not 0 (the
/// CLI records such a call `success`, the command's failure only in that line). The
/// `Error:` line (the command's stderr) alone never fails a call.
pub(super) fn call_failed(call: &WireToolCall, texts: &[String]) -> bool {
    matches!(call.status.as_deref(), Some("error" | "cancelled"))
        || call.name.as_deref() == Some("run_shell_command") && texts.iter().any(|t| nonzero_exit(t))
}

/// True when the last line of `output` starting `Exit Code: ` gives a number other than 0.
fn nonzero_exit(output: &str) -> bool {
    output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("Exit Code: "))
        .and_then(|code| code.trim().parse::<i64>().ok())
        .is_some_and(|code| code != 0)
}

#[cfg(test)]
mod tests {
    use crate::formats::gemini::records::*;
    use crate::formats::gemini::wire::WireToolCall;

    fn call(json: &str) -> WireToolCall {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_call_fails_by_its_status_or_its_exit_code() {
        let shell = |out: &str| {
            call(&format!(
                r#"{{"name":"run_shell_command","status":"success","result":[{{"functionResponse":{{"response":{{"output":{}}}}}}}]}}"#,
                Value::from(out)
            ))
        };
        let failed = |c: WireToolCall| {
            let texts = result_texts(&c);
            call_failed(&c, &texts)
        };
        assert!(failed(shell(
            "Command: x\nOutput: boom\nError: (none)\nExit Code: 127\nSignal: 0"
        )));
        assert!(!failed(shell(
            "Command: x\nOutput: Exit Code: 3\nError: warn\nExit Code: 0\nSignal: 0"
        )));
        assert!(!failed(shell(
            "Command: x\nOutput: ok\nError: some stderr\nExit Code: (none)"
        )));
        assert!(failed(call(r#"{"name":"ls","status":"error"}"#)));
        assert!(failed(call(r#"{"name":"ls","status":"cancelled"}"#)));
        assert!(!failed(call(
            r#"{"name":"read_file","status":"success","result":[{"functionResponse":{"response":{"output":"Exit Code: 1"}}}]}"#
        )));
    }

    #[test]
    fn result_texts_come_from_the_response_else_the_display() {
        let c = call(
            r#"{"status":"error","result":[{"functionResponse":{"response":{"error":"Path must be absolute"}}}]}"#,
        );
        assert_eq!(result_texts(&c), vec!["Path must be absolute"]);
        let c = call(r#"{"status":"success","result":null,"resultDisplay":"shown"}"#);
        assert_eq!(result_texts(&c), vec!["shown"]);
        let c = call(r#"{"status":"cancelled"}"#);
        assert_eq!(result_texts(&c), vec!["[cancelled]"]);
    }
}
