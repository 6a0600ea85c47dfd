//! Properties of Codex rollouts read through the whole pipeline: every tool call appears
//! once, in its own response's `tool_summary`, with the failure its exit code says; units
//! keep the log's order; and no rollout, however mutated or cut, makes loading or a view
//! panic.

use proptest::prelude::*;
use serde_json::{json, Value};
use sessiongraph_core::views::{render, View, ViewOptions};
use sessiongraph_core::{LoadOptions, Session, SessionInput, SourceFile};

/// One step of a generated session.
#[derive(Debug, Clone)]
enum Step {
    /// A typed prompt.
    Prompt(String),
    /// A model response: reasoning or not, the exit codes of its calls, text or not.
    Response {
        reasoning: bool,
        exits: Vec<i32>,
        text: bool,
    },
    /// An interrupted turn.
    Abort,
    /// A compaction.
    Compact,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "[a-z ]{1,12}".prop_map(Step::Prompt),
        (
            any::<bool>(),
            prop::collection::vec(prop_oneof![Just(0), Just(1), Just(127)], 0..4),
            any::<bool>()
        )
            .prop_map(|(reasoning, exits, text)| Step::Response {
                reasoning,
                exits,
                text
            }),
        Just(Step::Abort),
        Just(Step::Compact),
    ]
}

fn line(kind: &str, payload: Value) -> String {
    json!({"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload}).to_string()
}

/// The rollout of `steps`, and each call's id with its exit code.
fn rollout(steps: &[Step]) -> (Vec<String>, Vec<(String, i32)>) {
    let mut lines = vec![line("session_meta", json!({"id": "T", "cwd": "/w"}))];
    let mut calls = Vec::new();
    for (n, s) in steps.iter().enumerate() {
        match s {
            Step::Prompt(text) => {
                lines.push(line(
                    "response_item",
                    json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]}),
                ));
                lines.push(line("event_msg", json!({"type":"user_message","message":text})));
            }
            Step::Response {
                reasoning,
                exits,
                text,
            } => {
                lines.push(line("turn_context", json!({"model": "gpt-5"})));
                if *reasoning {
                    lines.push(line(
                        "response_item",
                        json!({"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]}),
                    ));
                }
                let ids: Vec<String> = (0..exits.len()).map(|c| format!("call_{n}_{c}")).collect();
                for id in &ids {
                    lines.push(line(
                        "response_item",
                        json!({"type":"function_call","name":"shell","arguments":"{}","call_id":id}),
                    ));
                }
                lines.push(line("event_msg", json!({"type":"token_count","info":{"last_token_usage":{"input_tokens":3,"output_tokens":2}}})));
                for (id, code) in ids.iter().zip(exits) {
                    let output = format!("Exit code: {code}\nWall time: 0 seconds\nOutput:\nerror: x");
                    lines.push(line(
                        "response_item",
                        json!({"type":"function_call_output","call_id":id,"output":output}),
                    ));
                    calls.push((id.clone(), *code));
                }
                if *text {
                    lines.push(line("response_item", json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]})));
                }
            }
            Step::Abort => lines.push(line(
                "event_msg",
                json!({"type":"turn_aborted","reason":"interrupted"}),
            )),
            Step::Compact => lines.push(line("compacted", json!({"message":"summary"}))),
        }
    }
    (lines, calls)
}

fn load(text: &[u8]) -> Result<Session, sessiongraph_core::SessionError> {
    let input = SessionInput::new(vec![SourceFile::new("rollout-x.jsonl", text.to_vec())]);
    Session::build(&input, LoadOptions::default())
}

fn annotations(session: &Session) -> Value {
    serde_json::from_slice(&render(session, View::Annotations, ViewOptions::default()).to_bytes()).unwrap()
}

proptest! {
    #[test]
    fn every_call_is_in_its_turns_summary_once_with_its_verdict(steps in prop::collection::vec(step(), 1..12)) {
        let (lines, calls) = rollout(&steps);
        let session = load(lines.join("\n").as_bytes()).unwrap();
        let body = annotations(&session);
        let mut seen: Vec<(String, bool)> = Vec::new();
        for unit in body["annotations"].as_array().unwrap() {
            let summary = unit["tool_summary"]["tool_calls"].as_array().cloned().unwrap_or_default();
            let called = unit["text_or_artifact_ref"]["tool_calls"].as_array().cloned().unwrap_or_default();
            prop_assert_eq!(summary.len(), called.len());
            for c in summary {
                seen.push((c["tool_use_id"].as_str().unwrap().to_owned(), c["is_error"] == true));
            }
        }
        let expected: Vec<(String, bool)> = calls.iter().map(|(id, code)| (id.clone(), *code != 0)).collect();
        prop_assert_eq!(seen, expected);
    }

    #[test]
    fn units_keep_the_logs_order(steps in prop::collection::vec(step(), 1..12)) {
        let (lines, _) = rollout(&steps);
        let session = load(lines.join("\n").as_bytes()).unwrap();
        let body = annotations(&session);
        let starts: Vec<u64> = body["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["source"]["raw_line_range"][0].as_u64().unwrap())
            .collect();
        prop_assert!(starts.windows(2).all(|w| w[0] < w[1]), "{:?}", starts);
    }

    #[test]
    fn no_mutated_or_cut_rollout_panics(
        steps in prop::collection::vec(step(), 1..8),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        nel in any::<prop::sample::Index>(),
    ) {
        let (mut lines, _) = rollout(&steps);
        // A U+0085 inside a string is no line break.
        let at = nel.index(lines.len());
        lines[at] = lines[at].replacen("2026-01-01", "2026-01-01\u{85}", 1);
        let mut bytes = lines.join("\n").into_bytes();
        for (i, b) in flips {
            let i = i.index(bytes.len());
            bytes[i] = b;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        if let Ok(session) = load(&bytes) {
            for view in View::ALL {
                if !view.reads_workflow() || session.workflow_built {
                    let _ = render(&session, view, ViewOptions::default()).to_bytes();
                }
            }
        }
    }
}
