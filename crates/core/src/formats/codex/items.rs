//! Response items (`response_item` lines, and the bare lines of the older layouts) made
//! into records: messages by role, reasoning, tool calls and their outputs.

use std::borrow::Cow;

use serde::Deserialize;

use super::act::{Act, LineContext};
use super::text::{content_text, decoded, image_urls, is_null, items_text, string_literal, Texts};
use super::verdict::outcome;
use super::wire::{Payload, Raw};
use crate::formats::claude_code::records::{Block, Image, JsonStr, Position, RawJson, ToolUse};
use crate::json::lenient::{self, ObjectOr};
use crate::json::quick;

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
pub(super) fn is_injected(text: &JsonStr) -> bool {
    let start: String = text
        .chars()
        .skip_while(|c| c.is_whitespace())
        .take(INJECTED.iter().map(|p| p.len()).max().unwrap_or(0))
        .collect();
    INJECTED.iter().any(|p| start.starts_with(p))
}

/// Reads a response item (`p.kind` its type; none for a Chat-Completions message, which
/// has only a `role`): its type as counted, and what it does.
pub(super) fn prepare_item(cx: &LineContext<'_>, mut p: Box<Payload<'_>>, pos: Position) -> (String, Act) {
    let kind = p.kind.take();
    let count = format!("response_item:{}", kind.as_deref().unwrap_or("message"));
    let texts = &cx.texts;
    let act = match kind.as_deref() {
        Some("message") | None => message(cx, p, pos),
        Some("reasoning") => reasoning(texts, &p),
        Some("function_call") => {
            let name = match (&p.namespace, p.name) {
                (Some(ns), Some(n)) if !n.starts_with(ns.as_ref()) => format!("{ns}.{n}"),
                (_, n) => n.unwrap_or_default().into_owned(),
            };
            call(p.call_id.or(p.id), name, arguments_input(texts, p.arguments), pos)
        }
        Some("custom_tool_call") => {
            let input = string_literal(p.input).map(|l| RawJson::copy_of(&format!("{{\"input\":{l}}}")));
            call(
                p.call_id.or(p.id),
                p.name.unwrap_or_default().into_owned(),
                input,
                pos,
            )
        }
        Some("local_shell_call") => {
            let input = value_input(texts, p.action);
            call(p.call_id.or(p.id), "local_shell".to_owned(), Some(input), pos)
        }
        Some("tool_search_call") => {
            let input = arguments_input(texts, p.arguments);
            call(p.call_id.or(p.id), "tool_search".to_owned(), input, pos)
        }
        Some(k @ ("web_search_call" | "image_generation_call")) => server_call(texts, k, p, pos),
        Some("function_call_output" | "custom_tool_call_output" | "tool_search_output") => {
            let output = if is_null(p.output) { p.content } else { p.output };
            Act::Output {
                call_id: p.call_id.unwrap_or_default().into_owned(),
                outcome: outcome(texts, output),
            }
        }
        _ => Act::Nothing,
    };
    (count, act)
}

/// A message, by its role: the assistant's text; a user prompt (when prompts are not
/// read from events, and the text is not injected context); a developer or system
/// message as a system notice; a Chat-Completions `tool` message as a result.
fn message(cx: &LineContext<'_>, p: Box<Payload<'_>>, pos: Position) -> Act {
    let texts = &cx.texts;
    match p.role.as_deref() {
        Some("assistant") => {
            let mut blocks: Vec<Block> = content_text(texts, p.content)
                .filter(|t| !t.is_empty())
                .map(Block::Text)
                .into_iter()
                .collect();
            blocks.extend(chat_tool_calls(texts, p.tool_calls, pos));
            if blocks.is_empty() {
                return Act::Nothing;
            }
            let spawn_calls = blocks
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse(t) if t.name == "spawn_agent" => Some(t.id.clone()),
                    _ => None,
                })
                .collect();
            Act::Assistant { blocks, spawn_calls }
        }
        Some("user") if !cx.prompts_from_events => {
            let text = content_text(texts, p.content).unwrap_or_default();
            if is_injected(&text) {
                Act::Nothing
            } else {
                Act::User(prompt_blocks(text, image_urls(p.content)))
            }
        }
        Some("developer" | "system") => Act::System {
            subtype: "developer_message",
            text: content_text(texts, p.content).unwrap_or_default(),
        },
        Some("tool") => Act::Output {
            call_id: p.tool_call_id.unwrap_or_default().into_owned(),
            outcome: outcome(texts, p.content),
        },
        _ => Act::Nothing,
    }
}

/// A reasoning item: its summary and readable content as one thinking block (an item
/// with only encrypted content opens the response and shows nothing).
fn reasoning(texts: &Texts<'_>, p: &Payload<'_>) -> Act {
    let parts: Vec<JsonStr> = [p.summary, p.content]
        .into_iter()
        .flatten()
        .filter(|raw| raw.get().starts_with('['))
        .map(|raw| items_text(texts, raw))
        .filter(|t| !t.is_empty())
        .collect();
    let thinking = match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => Some(JsonStr::new(&format!(
            "{}\n\n{}",
            parts[0].text(),
            parts[1].text()
        ))),
    };
    let blocks = thinking
        .map(|thinking| Block::Thinking {
            thinking,
            signature: None,
        })
        .into_iter()
        .collect();
    Act::Assistant {
        blocks,
        spawn_calls: Vec::new(),
    }
}

/// A tool call: an assistant record holding one `tool_use` block (its id the call id,
/// else one made from the line).
fn call(call_id: Option<Cow<'_, str>>, name: String, input: Option<RawJson>, pos: Position) -> Act {
    let id = call_id.map_or_else(|| format!("call:{}:{}", pos.file, pos.line), Cow::into_owned);
    let spawn_calls = if name == "spawn_agent" {
        vec![id.clone()]
    } else {
        Vec::new()
    };
    Act::Assistant {
        blocks: vec![Block::ToolUse(ToolUse { id, name, input })],
        spawn_calls,
    }
}

/// A call the model's provider runs (web search, image generation): the call, and a
/// result made from its status when the response ends (the log writes none).
fn server_call(texts: &Texts<'_>, kind: &str, p: Box<Payload<'_>>, pos: Position) -> Act {
    let name = kind.trim_end_matches("_call").to_owned();
    let call_id = p
        .call_id
        .or(p.id)
        .map_or_else(|| format!("call:{}:{}", pos.file, pos.line), Cow::into_owned);
    let input = match kind {
        "web_search_call" => value_input(texts, p.action),
        _ => {
            let prompt = p.input.map_or("null", |r| r.get());
            RawJson::copy_of(&format!("{{\"revised_prompt\":{prompt}}}"))
        }
    };
    let status = p.status.map_or_else(|| "completed".to_owned(), Cow::into_owned);
    Act::ServerCall {
        call: Block::ToolUse(ToolUse {
            id: call_id.clone(),
            name,
            input: Some(input),
        }),
        call_id,
        failed: matches!(status.as_str(), "failed" | "incomplete"),
        status,
    }
}

/// A call's input from its `arguments`: the JSON object a string holds (or an object
/// written as one); any other text as a JSON string; `None` when there are none.
fn arguments_input(texts: &Texts<'_>, arguments: Raw<'_>) -> Option<RawJson> {
    let raw = arguments.filter(|r| r.get() != "null")?;
    let Some(literal) = string_literal(arguments) else {
        return Some(value_input(texts, Some(raw)));
    };
    let text = decoded(literal);
    let trimmed = text.trim();
    let object = trimmed.starts_with('{') && quick::from_str::<serde::de::IgnoredAny>(trimmed).is_ok();
    Some(match (object, text) {
        (false, _) => texts.raw_json(literal),
        (true, Cow::Owned(json)) if json.len() == json.trim().len() => RawJson::owned(json),
        (true, json) => RawJson::copy_of(json.trim()),
    })
}

/// A call's input from a JSON value: an object as it is; anything else (absent: `null`)
/// as the JSON string of its JSON text.
fn value_input(texts: &Texts<'_>, value: Raw<'_>) -> RawJson {
    match value {
        Some(raw) if raw.get().starts_with('{') => texts.raw_json(raw.get()),
        other => {
            let json = other.map_or("null", |r| r.get());
            RawJson::copy_of(&serde_json::Value::from(json).to_string())
        }
    }
}

/// A prompt's blocks: its text, then its images (a `data:` URL as base64 data, any other
/// URL as a URL image).
pub(super) fn prompt_blocks(text: JsonStr, images: Vec<String>) -> Vec<Block> {
    let mut blocks = Vec::with_capacity(1 + images.len());
    if !text.is_empty() {
        blocks.push(Block::Text(text));
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

/// A Chat-Completions tool call: `{"id", "function": {"name", "arguments"}}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ChatCall<'a> {
    #[serde(deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(borrow)]
    function: ObjectOr<ChatFunction<'a>>,
}

/// The `function` of a Chat-Completions tool call.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ChatFunction<'a> {
    #[serde(deserialize_with = "lenient::string")]
    name: Option<String>,
    #[serde(borrow)]
    arguments: Raw<'a>,
}

/// The `tool_calls` of a Chat-Completions assistant message, as `tool_use` blocks.
fn chat_tool_calls(texts: &Texts<'_>, tool_calls: Raw<'_>, pos: Position) -> Vec<Block> {
    let Some(raw) = tool_calls.filter(|r| r.get().starts_with('[')) else {
        return Vec::new();
    };
    let calls: Vec<ObjectOr<ChatCall<'_>>> = quick::from_str(raw.get()).unwrap_or_default();
    calls
        .into_iter()
        .enumerate()
        .map(|(n, c)| {
            let c = c.0.unwrap_or_default();
            let id =
                c.id.unwrap_or_else(|| format!("call:{}:{}:{n}", pos.file, pos.line));
            let function = c.function.0.unwrap_or_default();
            Block::ToolUse(ToolUse {
                id,
                name: function.name.unwrap_or_default(),
                input: arguments_input(texts, function.arguments),
            })
        })
        .collect()
}
