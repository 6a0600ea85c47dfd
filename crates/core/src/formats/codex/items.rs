//! Response items (`response_item` lines, and the bare lines of the older layouts) made
//! into records: messages by role, reasoning, tool calls and their outputs.

use serde_json::Value;

use super::reader::{tool_use, Pending, Reading};
use super::verdict::{items_text, outcome};
use super::wire::Payload;
use crate::formats::claude_code::records::{
    Block, Content, Image, JsonStr, Message, Position, RecordKind, ToolUseResult,
};

/// Starts of the user messages Codex injects (context, instructions, notices), which are
/// never typed prompts.
const INJECTED: [&str; 9] = [
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<user_shell_command>",
    "<permissions instructions>",
    "<subagent_notification>",
    "<skill>",
];

/// True when a user message's text is context Codex injected, not a prompt.
pub(super) fn is_injected(text: &str) -> bool {
    let start = text.trim_start();
    INJECTED.iter().any(|p| start.starts_with(p))
}

impl Reading {
    /// Reads a response item (`payload.kind` its type; none for a Chat-Completions
    /// message, which has only a `role`).
    pub(super) fn response_item(&mut self, p: Payload, pos: Position, ts: Option<String>) {
        let kind = p.kind.clone();
        self.count(&format!("response_item:{}", kind.as_deref().unwrap_or("message")));
        match kind.as_deref() {
            Some("message") | None => self.message(p, pos, ts),
            Some("reasoning") => self.reasoning(&p, pos, ts),
            Some("function_call") => {
                let name = match (&p.namespace, p.name) {
                    (Some(ns), Some(n)) if !n.starts_with(ns.as_str()) => format!("{ns}.{n}"),
                    (_, n) => n.unwrap_or_default(),
                };
                let args = arguments_text(&p.arguments);
                self.call(p.call_id.or(p.id), name, args.as_deref(), pos, ts);
            }
            Some("custom_tool_call") => {
                let input = p
                    .input
                    .as_str()
                    .map(|s| Value::from_iter([("input".to_owned(), Value::from(s))]).to_string());
                self.call(
                    p.call_id.or(p.id),
                    p.name.unwrap_or_default(),
                    input.as_deref(),
                    pos,
                    ts,
                );
            }
            Some("local_shell_call") => {
                self.call(
                    p.call_id.or(p.id),
                    "local_shell".to_owned(),
                    Some(&p.action.to_string()),
                    pos,
                    ts,
                );
            }
            Some("tool_search_call") => {
                let args = arguments_text(&p.arguments);
                self.call(
                    p.call_id.or(p.id),
                    "tool_search".to_owned(),
                    args.as_deref(),
                    pos,
                    ts,
                );
            }
            Some(k @ ("web_search_call" | "image_generation_call")) => self.server_call(k, p, pos, ts),
            Some("function_call_output" | "custom_tool_call_output" | "tool_search_output") => {
                let call_id = p.call_id.clone().unwrap_or_default();
                let output = if p.output.is_null() { &p.content } else { &p.output };
                self.output(&call_id, output, pos, ts);
            }
            _ => {}
        }
    }

    /// A message, by its role: the assistant's text; a user prompt (when prompts are not
    /// read from events, and the text is not injected context); a developer or system
    /// message as a system notice; a Chat-Completions `tool` message as a result.
    fn message(&mut self, p: Payload, pos: Position, ts: Option<String>) {
        match p.role.as_deref() {
            Some("assistant") => {
                let mut blocks: Vec<Block> = content_text(&p.content)
                    .filter(|t| !t.is_empty())
                    .map(|t| Block::Text(JsonStr::new(&t)))
                    .into_iter()
                    .collect();
                blocks.extend(chat_tool_calls(&p.tool_calls, pos));
                for b in &blocks {
                    if let Block::ToolUse(t) = b {
                        self.note_call(&t.name, &t.id);
                    }
                }
                if !blocks.is_empty() {
                    self.assistant(pos, ts, blocks);
                }
            }
            Some("user") if !self.prompts_from_events => {
                let text = content_text(&p.content).unwrap_or_default();
                if !is_injected(&text) {
                    let blocks = prompt_blocks(&text, image_urls(&p.content));
                    let message = Message {
                        content: Content::Blocks(blocks),
                        ..Message::default()
                    };
                    self.record(RecordKind::User, pos, ts, Some(message));
                }
            }
            Some("developer" | "system") => {
                let text = content_text(&p.content).unwrap_or_default();
                self.system(pos, ts, "developer_message", &text);
            }
            Some("tool") => {
                let call_id = p.tool_call_id.clone().unwrap_or_default();
                self.output(&call_id, &p.content, pos, ts);
            }
            _ => {}
        }
    }

    /// A reasoning item: its summary and readable content as one thinking block (an item
    /// with only encrypted content opens the response and shows nothing).
    fn reasoning(&mut self, p: &Payload, pos: Position, ts: Option<String>) {
        let mut parts = Vec::new();
        for v in [&p.summary, &p.content] {
            if let Value::Array(items) = v {
                let text = items_text(items);
                if !text.is_empty() {
                    parts.push(text);
                }
            }
        }
        let thinking = parts.join("\n\n");
        let blocks = if thinking.is_empty() {
            Vec::new()
        } else {
            vec![Block::Thinking {
                thinking: JsonStr::new(&thinking),
                signature: None,
            }]
        };
        self.assistant(pos, ts, blocks);
    }

    /// A tool call: an assistant record holding one `tool_use` block (its id the call id,
    /// else one made from the line).
    fn call(
        &mut self,
        call_id: Option<String>,
        name: String,
        input: Option<&str>,
        pos: Position,
        ts: Option<String>,
    ) {
        let id = call_id.unwrap_or_else(|| format!("call:{}:{}", pos.file, pos.line));
        self.note_call(&name, &id);
        self.assistant(pos, ts, vec![tool_use(id, name, input)]);
    }

    /// Remembers the calls that spawn agents (their output names the agent).
    fn note_call(&mut self, name: &str, id: &str) {
        if name == "spawn_agent" {
            self.spawn_calls.push(id.to_owned());
        }
    }

    /// A call the model's provider runs (web search, image generation): the call, and a
    /// result made from its status when the response ends (the log writes none).
    fn server_call(&mut self, kind: &str, p: Payload, pos: Position, ts: Option<String>) {
        let name = kind.trim_end_matches("_call").to_owned();
        let id = p
            .call_id
            .or(p.id)
            .unwrap_or_else(|| format!("call:{}:{}", pos.file, pos.line));
        let input = match kind {
            "web_search_call" => p.action.to_string(),
            _ => Value::from_iter([("revised_prompt".to_owned(), p.input.clone())]).to_string(),
        };
        let status = p.status.as_str().unwrap_or("completed").to_owned();
        self.assistant(pos, ts.clone(), vec![tool_use(id.clone(), name, Some(&input))]);
        self.pending.push(Pending {
            call_id: id,
            pos,
            timestamp: ts,
            failed: matches!(status.as_str(), "failed" | "incomplete"),
            text: status,
        });
    }

    /// The output of call `call_id`: a result whose failure is the output's verdict, and
    /// which names the agent a `spawn_agent` call started.
    fn output(&mut self, call_id: &str, output: &Value, pos: Position, ts: Option<String>) {
        let read = outcome(output);
        let i = self.tool_result(call_id, pos, ts, &read.text, read.failed);
        let spawned = read
            .agent_id
            .filter(|_| self.spawn_calls.iter().any(|c| c == call_id));
        if let Some(agent) = spawned {
            self.parsed.records[i].extra_mut().tool_use_result = Some(ToolUseResult {
                agent_id: Some(agent),
                ..ToolUseResult::default()
            });
        }
    }
}

/// Function-call arguments as text: the JSON string as written, or an object's JSON.
fn arguments_text(arguments: &Value) -> Option<String> {
    match arguments {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// The text of message content: a string, or its text parts joined by newlines.
pub(super) fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter(|i| i.get("image_url").is_none())
                .filter_map(|i| i.get("text").and_then(Value::as_str).or(i.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// The image URLs of message content (`input_image` parts).
fn image_urls(content: &Value) -> Vec<String> {
    match content {
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.get("image_url").and_then(Value::as_str).map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// A prompt's blocks: its text, then its images (a `data:` URL as base64 data, any other
/// URL as a URL image).
pub(super) fn prompt_blocks(text: &str, images: Vec<String>) -> Vec<Block> {
    let mut blocks = Vec::with_capacity(1 + images.len());
    if !text.is_empty() {
        blocks.push(Block::Text(JsonStr::new(text)));
    }
    for url in images {
        let image = match url
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
        {
            Some((media_type, data)) => Image {
                source_type: Some("base64".to_owned()),
                media_type: Some(media_type.to_owned()),
                data: Some(JsonStr::new(data)),
            },
            None => Image {
                source_type: Some("url".to_owned()),
                media_type: None,
                data: Some(JsonStr::new(&url)),
            },
        };
        blocks.push(Block::Image(image));
    }
    blocks
}

/// The `tool_calls` of a Chat-Completions assistant message, as `tool_use` blocks.
fn chat_tool_calls(tool_calls: &Value, pos: Position) -> Vec<Block> {
    let Value::Array(calls) = tool_calls else {
        return Vec::new();
    };
    calls
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call:{}:{}:{n}", pos.file, pos.line), str::to_owned);
            let function = c.get("function");
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let args = function.and_then(|f| f.get("arguments")).and_then(arguments_text);
            tool_use(id, name.to_owned(), args.as_deref())
        })
        .collect()
}
