//! Property tests of Gemini chats through the whole pipeline: every tool call shows once in
//! its turn's `tool_summary`, units keep the log's order, and no input panics.

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::formats::input::{Format, SessionInput, SourceFile};
use crate::pipeline::load::LoadOptions;
use crate::pipeline::session::{Branch, Session};
use crate::views::annotations::annotations;

/// One step of a generated chat.
#[derive(Debug, Clone)]
enum Op {
    /// A prompt.
    User,
    /// A response with tool calls of these statuses.
    Gemini(Vec<&'static str>),
    /// A notice.
    Info,
    /// The last response appended again with one more call.
    Reappend,
    /// `$rewindTo` the n-th message written (mod their count).
    Rewind(usize),
    /// A `$set` of the header.
    Set,
}

fn op() -> impl Strategy<Value = Op> {
    let status = prop::sample::select(vec!["success", "error", "cancelled", "executing"]);
    prop_oneof![
        3 => Just(Op::User),
        4 => prop::collection::vec(status, 0..4).prop_map(Op::Gemini),
        1 => Just(Op::Info),
        1 => Just(Op::Reappend),
        1 => (0usize..50).prop_map(Op::Rewind),
        1 => Just(Op::Set),
    ]
}

/// The JSONL of `ops`, each message's id in order of first appearance, and the call ids of
/// each response's last copy.
struct Chat {
    bytes: Vec<u8>,
    order: Vec<String>,
    calls: Vec<(String, Vec<String>)>,
}

fn call(id: &str, status: &str) -> Value {
    json!({"id": id, "name": "run_shell_command", "args": {"command": "ls"}, "status": status,
           "result": [{"functionResponse": {"id": id, "response": {"output": "Exit Code: 0"}}}]})
}

fn chat(ops: &[Op]) -> Chat {
    let mut lines = vec![json!({"sessionId": "S", "projectHash": "h", "kind": "main"})];
    let (mut order, mut calls): (Vec<String>, Vec<(String, Vec<String>)>) = (Vec::new(), Vec::new());
    let mut next_call = 0;
    for (n, op) in ops.iter().enumerate() {
        let id = format!("m{n}");
        let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", n / 60, n % 60);
        match op {
            Op::User => {
                lines.push(json!({"id": id, "timestamp": ts, "type": "user", "content": format!("ask {n}")}))
            }
            Op::Info => lines.push(json!({"id": id, "timestamp": ts, "type": "info", "content": "note"})),
            Op::Gemini(statuses) => {
                let ids: Vec<String> = statuses
                    .iter()
                    .map(|_| {
                        next_call += 1;
                        format!("c{next_call}")
                    })
                    .collect();
                let tool_calls: Vec<Value> = ids.iter().zip(statuses).map(|(c, s)| call(c, s)).collect();
                lines.push(json!({"id": id, "timestamp": ts, "type": "gemini", "content": format!("answer {n}"), "toolCalls": tool_calls}));
                calls.push((id.clone(), ids));
            }
            Op::Reappend => {
                let Some(at) = lines.iter().rposition(|l| l["type"] == "gemini") else {
                    continue;
                };
                let mut again = lines[at].clone();
                let rewound = lines[at + 1..].iter().any(|l| l.get("$rewindTo").is_some());
                let mid = again["id"].as_str().unwrap().to_owned();
                if rewound || calls.last().map(|c| &c.0) != Some(&mid) {
                    continue;
                }
                next_call += 1;
                let c = format!("c{next_call}");
                again["toolCalls"]
                    .as_array_mut()
                    .unwrap()
                    .push(call(&c, "success"));
                calls.last_mut().unwrap().1.push(c);
                lines.push(again);
                continue;
            }
            Op::Rewind(k) if !order.is_empty() => {
                lines.push(json!({"$rewindTo": order[k % order.len()]}));
                continue;
            }
            Op::Rewind(_) => continue,
            Op::Set => {
                lines.push(json!({"$set": {"lastUpdated": ts}}));
                continue;
            }
        }
        order.push(id);
    }
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend_from_slice(l.to_string().as_bytes());
        bytes.push(b'\n');
    }
    Chat { bytes, order, calls }
}

fn build(bytes: Vec<u8>) -> Result<Session, crate::pipeline::load::SessionError> {
    let input = SessionInput::new(vec![SourceFile::new("session.jsonl", bytes)]);
    Session::build(
        &input,
        LoadOptions {
            format: Some(Format::Gemini),
            ..LoadOptions::default()
        },
    )
}

proptest! {
    #[test]
    fn every_call_shows_once_in_its_turn_and_units_keep_the_log_order(ops in prop::collection::vec(op(), 1..40)) {
        let chat = chat(&ops);
        let session = build(chat.bytes).unwrap();
        let body = serde_json::to_value(annotations(&session, true, Branch::All).annotations).unwrap();
        let units = body.as_array().unwrap();
        for (message, ids) in &chat.calls {
            let unit = units.iter().find(|u| u["event_id"] == format!("A::{message}"));
            let shown: Vec<&str> = unit
                .and_then(|u| u["tool_summary"]["tool_calls"].as_array())
                .map(|c| c.iter().map(|c| c["tool_use_id"].as_str().unwrap()).collect())
                .unwrap_or_default();
            prop_assert_eq!(&shown, ids, "{}", message);
        }
        let shown: Vec<String> = units
            .iter()
            .map(|u| u["event_id"].as_str().unwrap().rsplit(':').next().unwrap().to_owned())
            .collect();
        let expected: Vec<String> = chat.order.iter().filter(|id| shown.contains(id)).cloned().collect();
        prop_assert_eq!(shown, expected);
    }

    #[test]
    fn a_truncated_or_mutated_chat_never_panics(
        ops in prop::collection::vec(op(), 1..20),
        cut in 0.0f64..1.0,
        flips in prop::collection::vec((0.0f64..1.0, any::<u8>()), 0..4),
        legacy in any::<bool>(),
    ) {
        let chat = chat(&ops);
        let mut bytes = if legacy {
            // The same messages as one pretty-printed legacy document.
            let messages: Vec<Value> = chat.bytes.split(|&b| b == b'\n')
                .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
                .filter(|v| v.get("id").is_some())
                .collect();
            serde_json::to_vec_pretty(&json!({"sessionId": "S", "projectHash": "h", "messages": messages})).unwrap()
        } else {
            chat.bytes
        };
        for (at, byte) in flips {
            let i = (at * bytes.len() as f64) as usize;
            if let Some(b) = bytes.get_mut(i) { *b = byte; }
        }
        bytes.truncate((cut * bytes.len() as f64) as usize + 1);
        if let Ok(session) = build(bytes) {
            let _ = serde_json::to_vec(&annotations(&session, true, Branch::All)).unwrap();
            let _ = crate::views::render(&session, crate::views::View::Workflow, crate::views::ViewOptions::default());
        }
    }
}
