use crate::formats::claude_code::records::{Block, RecordKind};
use crate::formats::codex::*;

fn parse(lines: &[&str]) -> CodexFile {
    parse_codex_file(0, lines.join("\n").as_bytes())
}

const META: &str = r#"{"timestamp":"2025-09-25T02:12:23.966Z","type":"session_meta","payload":{"id":"T1","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.40.0"}}"#;

#[test]
fn tells_every_layout_and_nothing_else() {
    assert!(looks_like(META.as_bytes()));
    assert!(looks_like(
        br#"{"id":"x","timestamp":"2025-05-07T17:24:21.123Z","instructions":null}"#
    ));
    assert!(looks_like(
        b"{\n  \"session\": {\"id\": \"x\"},\n  \"items\": []\n}\n"
    ));
    assert!(!looks_like(
        br#"{"type":"user","uuid":"u","message":{"content":"x"}}"#
    ));
    assert!(!looks_like(br#"{"type":"session","id":"x"}"#));
    assert!(!looks_like(b"not json"));
}

#[test]
fn one_model_response_is_one_run_of_records_and_outputs_end_it() {
    let f = parse(&[
        META,
        r#"{"timestamp":"2025-09-25T02:12:24Z","type":"turn_context","payload":{"model":"gpt-5"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:24Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]}}"#,
        r#"{"timestamp":"2025-09-25T02:12:24Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}}"#,
        r#"{"timestamp":"2025-09-25T02:12:24Z","type":"event_msg","payload":{"type":"user_message","message":"fix it","images":[]}}"#,
        r#"{"timestamp":"2025-09-25T02:12:25Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Plan**"}],"content":null,"encrypted_content":"gAAA"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:25Z","type":"event_msg","payload":{"type":"agent_reasoning","text":"**Plan**"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:25Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:25Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"false\"]}","call_id":"c2"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":100,"output_tokens":7}}}}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"a\\n\",\"metadata\":{\"exit_code\":0}}"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c2","output":"{\"output\":\"\",\"metadata\":{\"exit_code\":1}}"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:27Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}"#,
        r#"{"timestamp":"2025-09-25T02:12:27Z","type":"event_msg","payload":{"type":"agent_message","message":"done"}}"#,
    ]);
    let r = &f.parsed.records;
    let kinds: Vec<&str> = r.iter().map(|r| r.kind.name()).collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "assistant",
            "assistant",
            "user",
            "user",
            "assistant"
        ]
    );
    assert_eq!(r[0].uuid.as_deref(), Some("T1:5"));
    assert_eq!(r[1].raw_parent(), Some("T1:5"));
    // The reasoning and both calls are one response; the text after the outputs another.
    assert_eq!(r[1].message_id(), r[3].message_id());
    assert_ne!(r[1].message_id(), r[6].message_id());
    assert_eq!(r[1].message.as_ref().unwrap().model.as_deref(), Some("gpt-5"));
    assert_eq!(
        r[3].message
            .as_ref()
            .unwrap()
            .usage
            .as_ref()
            .map(|u| u.output_tokens),
        Some(7)
    );
    let failed: Vec<bool> = r[4..6]
        .iter()
        .map(|r| matches!(&r.blocks()[0], Block::ToolResult(t) if t.is_error))
        .collect();
    assert_eq!(failed, [false, true]);
    assert_eq!(f.meta.id.as_deref(), Some("T1"));
    assert!(f
        .parsed
        .types
        .iter()
        .any(|(name, n)| name == "event_msg:token_count" && n == 1));
}

#[test]
fn events_give_verdicts_aborts_errors_and_compactions() {
    let f = parse(&[
        META,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"p1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"p1","output":"Success."}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"patch_apply_end","call_id":"p1","success":false}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"error","message":"context window exceeded"}}"#,
        r#"{"timestamp":"t","type":"compacted","payload":{"message":"SUMMARY","replacement_history":[{},{}],"window_number":1}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"context_compacted"}}"#,
        r#"{"timestamp":"t","type":"world_state","payload":{"full":true}}"#,
        "{broken",
    ]);
    let r = &f.parsed.records;
    assert!(matches!(&r[1].blocks()[0], Block::ToolResult(t) if t.is_error));
    assert_eq!(r[2].subtype(), Some("turn_aborted"));
    assert_eq!(r[3].subtype(), Some("error"));
    assert!(r[4].is_compact_boundary());
    assert_eq!(
        r[4].compact_metadata().unwrap().get(),
        r#"{"trigger":"compacted","replacementHistoryItems":2,"windowNumber":1}"#
    );
    assert_eq!(
        r.len(),
        5,
        "context_compacted right after compacted is the same compaction"
    );
    assert_eq!(f.parsed.bad_lines.count, 1);
    assert!(!is_known_type("world_state"));
    assert!(is_known_type("event_msg:token_count"));
}

#[test]
fn the_older_layouts_read_as_the_modern_one() {
    let bare = parse(&[
        r#"{"id":"B1","timestamp":"2025-05-07T17:24:21.123Z","instructions":null,"git":{"branch":"main"}}"#,
        r#"{"record_type":"state"}"#,
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>x</user_instructions>"}]}"#,
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}"#,
        r#"{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}"#,
        r#"{"type":"function_call_output","call_id":"c","output":"Exit code: 2\nOutput:\n"}"#,
    ]);
    let r = &bare.parsed.records;
    assert_eq!(bare.meta.id.as_deref(), Some("B1"));
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].kind, RecordKind::User);
    assert_eq!(r[0].timestamp.as_deref(), Some("2025-05-07T17:24:21.123Z"));
    assert!(matches!(&r[2].blocks()[0], Block::ToolResult(t) if t.is_error));

    let single = parse_codex_file(
        0,
        br#"{
  "session": {"id": "A1", "timestamp": "2025-04-20T10:00:00Z", "instructions": ""},
  "items": [
    {"role": "user", "content": "list files"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":[\"ls\"]}"}}]},
    {"role": "tool", "tool_call_id": "t1", "content": "a.txt"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one file"}]}
  ]
}"#,
    );
    let kinds: Vec<&str> = single.parsed.records.iter().map(|r| r.kind.name()).collect();
    assert_eq!(kinds, ["user", "assistant", "user", "assistant"]);
    assert_eq!(single.parsed.records[2].first_tool_use_id(), Some("t1"));
}

#[test]
fn spawned_threads_are_sub_agents_of_their_parent() {
    let parent = br#"{"timestamp":"t","type":"session_meta","payload":{"id":"P"}}"#;
    let child = br#"{"timestamp":"t","type":"session_meta","payload":{"id":"C","source":{"subagent":{"thread_spawn":{"parent_thread_id":"P","depth":1,"agent_role":"explorer"}}}}}"#;
    let meta = read_meta(child).unwrap();
    assert_eq!(meta.parent_thread_id.as_deref(), Some("P"));
    assert_eq!(meta.agent_role.as_deref(), Some("explorer"));
    assert_eq!(meta.subagent.as_deref(), Some("thread_spawn"));
    let (main, roles) = session_roles(&[child, parent]);
    assert_eq!(main, 1);
    assert_eq!(roles, [FileRole::SubAgent, FileRole::Main]);
    // Alone, a child is its own session.
    assert_eq!(session_roles(&[child]).0, 0);
}

#[test]
fn a_spawn_output_names_its_agent() {
    let f = parse(&[
        META,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"spawn_agent","arguments":"{\"agent_type\":\"worker\",\"message\":\"go\"}","call_id":"s1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"s1","output":"{\"agent_id\":\"C\"}"}}"#,
    ]);
    let result = f.parsed.records[1].tool_use_result().unwrap();
    assert_eq!(result.agent_id.as_deref(), Some("C"));
}

/// What a file's records say, as text: kinds, subtypes, blocks, tokens and verdicts.
fn summary(f: &CodexFile) -> Vec<String> {
    f.parsed
        .records
        .iter()
        .map(|r| {
            let tokens = r
                .message
                .as_ref()
                .and_then(|m| m.usage.as_ref())
                .map(|u| u.output_tokens);
            format!(
                "{} {:?} {:?} {:?} {:?}",
                r.kind.name(),
                r.subtype(),
                r.blocks(),
                tokens,
                r.timestamp
            )
        })
        .collect()
}

#[test]
fn lines_and_payloads_in_another_key_order_read_the_same() {
    let ordered = parse(&[
        META,
        r#"{"timestamp":"2025-09-25T02:12:25Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"false\"]}","call_id":"c1"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":3,"output_tokens":2}}}}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"event_msg","payload":{"type":"exec_command_end","call_id":"c1","exit_code":1}}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"no"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:27Z","type":"event_msg","payload":{"type":"error","message":"boom"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:27Z","type":"event_msg","payload":{"type":"agent_reasoning","text":"x"}}"#,
    ]);
    let shuffled = parse(&[
        META,
        r#"{"payload":{"call_id":"c1","arguments":"{\"command\":[\"false\"]}","name":"shell","type":"function_call"},"type":"response_item","timestamp":"2025-09-25T02:12:25Z"}"#,
        r#"{"type":"event_msg","payload":{"info":{"last_token_usage":{"output_tokens":2,"input_tokens":3}},"type":"token_count"},"timestamp":"2025-09-25T02:12:26Z"}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","payload":{"exit_code":1,"call_id":"c1","type":"exec_command_end"},"type":"event_msg"}"#,
        r#"{"timestamp":"2025-09-25T02:12:26Z","type":"response_item","payload":{"output":"no","call_id":"c1","type":"function_call_output"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:27Z","type":"event_msg","payload":{"message":"boom","type":"error"}}"#,
        r#"{"timestamp":"2025-09-25T02:12:27Z","type":"event_msg","payload":{"text":"x","type":"agent_reasoning"}}"#,
    ]);
    assert_eq!(summary(&ordered), summary(&shuffled));
    assert_eq!(ordered.parsed.records.len(), 3);
    assert!(matches!(&ordered.parsed.records[1].blocks()[0], Block::ToolResult(t) if t.is_error));
    let counts = |f: &CodexFile| {
        f.parsed
            .types
            .iter()
            .map(|(n, c)| format!("{n}={c}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&ordered), counts(&shuffled));
}

#[test]
fn texts_stay_slices_of_the_file_and_json_outputs_are_read_once() {
    let f = parse(&[
        META,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done \u00e9\n"}]}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"a\\n\\\"b\\\"\",\"metadata\":{\"exit_code\":3}}"}}"#,
    ]);
    let r = &f.parsed.records;
    let Block::Text(text) = &r[0].blocks()[0] else {
        panic!("a text block")
    };
    assert_eq!(text.text(), "done é\n");
    assert_eq!(text.own_heap_size(), 0, "the answer is a slice of the file");
    let Block::ToolUse(call) = &r[1].blocks()[0] else {
        panic!("a call")
    };
    assert_eq!(call.input.as_ref().unwrap().get(), r#"{"command":["ls"]}"#);
    let Block::ToolResult(result) = &r[2].blocks()[0] else {
        panic!("a result")
    };
    assert!(result.is_error);
    assert_eq!(result.texts[0].text(), "a\n\"b\"");
    assert_eq!(result.texts[0].literal(), r#""a\n\"b\"""#);
}

proptest::proptest! {
    /// Framing a file batch by batch (as it is read) numbers and cuts its lines as one
    /// framing of the whole file does: blank lines, CRLF, a byte-order mark, no final
    /// newline; no batch holds more than its most lines, and each but the last spans at
    /// least its bytes.
    #[test]
    fn lines_framed_in_batches_are_the_lines_framed_at_once(
        lines in proptest::collection::vec("[ a-z{}\"é\\r]{0,12}", 0..60),
        bom in proptest::bool::ANY,
        last_newline in proptest::bool::ANY,
        size in 1usize..16,
        max_lines in 1usize..5,
    ) {
        let mut data = if bom { "\u{feff}".to_owned() } else { String::new() };
        data.push_str(&lines.join("\n"));
        if last_newline {
            data.push('\n');
        }
        let at_once: Vec<(u32, Vec<u8>, bool)> = crate::json::frame::lines(data.as_bytes())
            .map(|l| (l.number, l.bytes.to_vec(), l.terminated))
            .collect();
        let mut framing = crate::json::frame::lines(data.as_bytes());
        let mut in_batches = Vec::new();
        loop {
            let start = framing.offset();
            let mut batch = Vec::new();
            super::next_batch_lines(&mut framing, size, max_lines, &mut batch);
            if batch.is_empty() {
                break;
            }
            proptest::prop_assert!(batch.len() <= max_lines);
            proptest::prop_assert!(batch.len() == max_lines || framing.offset() - start >= size || framing.clone().next().is_none());
            in_batches.extend(batch.iter().map(|l| (l.number, l.bytes.to_vec(), l.terminated)));
        }
        proptest::prop_assert_eq!(at_once, in_batches);
    }

    /// The pieces a file's UTF-8 is checked in are the file, cut after line ends.
    #[test]
    fn pieces_are_the_file_cut_after_line_ends(
        data in "[a-zé\n]{0,80}",
        size in 1usize..16,
    ) {
        let pieces = super::pieces(data.as_bytes(), size);
        for piece in &pieces[..pieces.len().saturating_sub(1)] {
            proptest::prop_assert!(piece.ends_with(b"\n") && piece.len() > size);
        }
        proptest::prop_assert_eq!(pieces.concat(), data.as_bytes().to_vec());
    }
}
