//! Regression tests, one per quirk of real Claude Code logs.

use serde_json::{json, Value};
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionError, SessionInput, SourceFile};

use crate::helpers::records::{assistant, text, tool_result, tool_use, user, Record};
use crate::helpers::{body, fixture, load_files, load_lines, load_path};

const MAIN: &str = "11111111-2222-4333-8444-555555555555.jsonl";

fn views(session: &Session) -> (Value, Value, Value) {
    let o = ViewOptions::default();
    (
        body(session, View::Annotations, o),
        body(session, View::Workflow, o),
        body(session, View::Chatlog, o),
    )
}

fn node_types(workflow: &Value) -> Vec<String> {
    workflow["workflow"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["nodeType"].as_str().unwrap().to_owned())
        .collect()
}

fn unit_ids(annotations: &Value) -> Vec<String> {
    annotations["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["event_id"].as_str().unwrap().to_owned())
        .collect()
}

fn conversation() -> Vec<String> {
    vec![
        user("u1", None, "2025-01-01T00:00:00.000Z", r#""Please fix the bug""#),
        assistant(
            "a1",
            Some("u1"),
            "2025-01-01T00:00:01.000Z",
            Some("r1"),
            "m1",
            &text("Looking."),
        ),
        user("u2", Some("a1"), "2025-01-01T00:00:02.000Z", r#""Thanks a lot""#),
    ]
}

#[test]
fn truncated_last_line_is_a_diagnostic_and_the_rest_loads() {
    let mut lines = conversation();
    let cut = lines[2][..40].to_owned();
    lines[2] = cut;
    let session = load_lines(&lines);
    let (annotations, ..) = views(&session);
    assert_eq!(unit_ids(&annotations), ["U:u1", "A:r1:m1"]);
    let bad = &session.diagnostics.bad_lines;
    assert_eq!(bad.count, 1);
    assert_eq!(bad.samples[0].line, 3);
    assert_eq!(bad.samples[0].file, MAIN);
    assert!(
        bad.samples[0].reason.contains("truncated"),
        "{}",
        bad.samples[0].reason
    );
    assert!(bad.samples[0].reason.contains("still be being written"));
}

#[test]
fn two_records_glued_on_one_line_both_load() {
    let lines = conversation();
    let glued = vec![lines[0].clone(), format!("{}{}", lines[1], lines[2])];
    let session = load_lines(&glued);
    let (annotations, ..) = views(&session);
    assert_eq!(unit_ids(&annotations), ["U:u1", "A:r1:m1", "U:u2"]);
    assert_eq!(session.diagnostics.repaired_lines.count, 1);
    assert_eq!(session.diagnostics.bad_lines.count, 0);
    // Both records report the physical line they were on.
    let units = annotations["annotations"].as_array().unwrap();
    assert_eq!(units[1]["source"]["raw_line_range"], serde_json::json!([2, 2]));
    assert_eq!(units[2]["source"]["raw_line_range"], serde_json::json!([2, 2]));
}

#[test]
fn a_truncated_record_glued_to_the_next_keeps_the_next() {
    let lines = conversation();
    let glued = vec![lines[0].clone(), format!("{}{}", &lines[1][..60], lines[2])];
    let session = load_lines(&glued);
    let (annotations, ..) = views(&session);
    assert_eq!(unit_ids(&annotations), ["U:u1", "U:u2"]);
    assert_eq!(session.diagnostics.repaired_lines.count, 1);
}

#[test]
fn dangling_logical_parent_falls_back_to_parent_uuid() {
    // A compact boundary whose logicalParentUuid names a record never written.
    let lines = vec![
        user("u1", None, "2025-01-01T00:00:00.000Z", r#""Before compaction""#),
        r#"{"type":"system","subtype":"compact_boundary","uuid":"b1","parentUuid":null,"logicalParentUuid":"never-written","timestamp":"2025-01-01T00:00:05.000Z","content":"Conversation compacted","compactMetadata":{"trigger":"manual","preTokens":10}}"#.to_owned(),
        Record::prompt("s1", "Summary of before.")
            .parent("b1")
            .at("2025-01-01T00:00:05.001Z")
            .with("isCompactSummary", json!(true))
            .line(),
        user("u2", Some("s1"), "2025-01-01T00:00:06.000Z", r#""After compaction""#),
    ];
    let session = load_lines(&lines);
    let (annotations, workflow, _) = views(&session);
    assert_eq!(unit_ids(&annotations), ["U:u1", "S:b1", "U:u2"]);
    let units = annotations["annotations"].as_array().unwrap();
    assert_eq!(units[1]["text_or_artifact_ref"]["text"], "Summary of before.");
    assert_eq!(units[1]["compact_metadata"]["trigger"], "manual");
    assert_eq!(units[1]["source"]["raw_uuids"], serde_json::json!(["b1", "s1"]));
    assert_eq!(session.diagnostics.dangling_logical_parents.count, 1);
    assert_eq!(session.diagnostics.orphans.count, 0);
    // The boundary is a root now; it continues the main lane in the workflow.
    let nodes = workflow["workflow"]["nodes"].as_array().unwrap();
    assert_eq!(nodes[1]["label"], "Context Compact");
    assert_eq!(nodes[1]["parentNodeIds"], serde_json::json!(["u1"]));
}

#[test]
fn assistant_records_without_request_id_are_kept_in_every_view() {
    // Synthetic "API Error" and "Limit reached" messages carry no requestId.
    let mut lines = conversation();
    lines.push(assistant(
        "e1",
        Some("u2"),
        "2025-01-01T00:00:03.000Z",
        None,
        "5a0e1f2c-err",
        &text("API Error: 529 overloaded"),
    ));
    let session = load_lines(&lines);
    let (annotations, workflow, chatlog) = views(&session);
    assert_eq!(unit_ids(&annotations).last().unwrap(), "A::5a0e1f2c-err");
    assert_eq!(node_types(&workflow).last().unwrap(), "agent_reasoning");
    let last = chatlog["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "[Response]\nAPI Error: 529 overloaded");
    assert_eq!(last["id"], "e1");
}

#[test]
fn a_zero_byte_main_file_loads_as_an_empty_session() {
    let session = load_files(&[(MAIN, "")]);
    let (annotations, workflow, chatlog) = views(&session);
    assert_eq!(annotations["total"], 0);
    assert_eq!(workflow["workflow"]["totalSteps"], 0);
    assert_eq!(workflow["workflow"]["toolSuccessRate"], 1);
    assert_eq!(chatlog["total"], 0);
    assert_eq!(session.diagnostics.files[0].lines, 0);
}

#[test]
fn a_summary_only_file_loads_as_an_empty_session() {
    let summary = r#"{"type":"summary","summary":"Fix login bug","leafUuid":"x"}"#;
    let session = load_files(&[(MAIN, summary)]);
    let (annotations, workflow, _) = views(&session);
    assert_eq!(annotations["total"], 0);
    assert_eq!(workflow["workflow"]["nodes"], serde_json::json!([]));
    assert_eq!(session.diagnostics.record_types.get("summary"), Some(&1));
    assert!(session.diagnostics.unknown_record_types.is_empty());
}

#[test]
fn duplicated_uuids_are_loaded_once() {
    let mut lines = conversation();
    lines.push(lines[1].clone());
    lines.push(lines[0].clone());
    let session = load_lines(&lines);
    let (annotations, workflow, _) = views(&session);
    assert_eq!(unit_ids(&annotations), ["U:u1", "A:r1:m1", "U:u2"]);
    assert_eq!(node_types(&workflow).len(), 3);
    assert_eq!(session.diagnostics.duplicates_removed.same_uuid, 2);
    let text = &annotations["annotations"][1]["text_or_artifact_ref"]["text"];
    assert_eq!(text, "Looking.", "a repeated chunk is not concatenated twice");
}

#[test]
fn an_image_only_prompt_is_a_user_turn_and_a_node() {
    let image =
        r#"[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]"#;
    let session = load_lines(&[user("u1", None, "2025-01-01T00:00:00.000Z", image)]);
    let (annotations, workflow, chatlog) = views(&session);
    let unit = &annotations["annotations"][0];
    assert_eq!(unit["unit_type"], "user_turn");
    assert_eq!(unit["text_or_artifact_ref"]["text"], "");
    assert_eq!(
        unit["text_or_artifact_ref"]["images"][0]["mediaType"],
        "image/png"
    );
    let node = &workflow["workflow"]["nodes"][0];
    assert_eq!(node["nodeType"], "user_input");
    assert_eq!(node["images"][0]["data"], "iVBORw0KGgo=");
    assert_eq!(chatlog["messages"][0]["images"][0]["mediaType"], "image/png");
}

fn tool_session(result_extra: &str, tool_use_result: &str) -> Session {
    let mut lines = vec![
        user("u1", None, "2025-01-01T00:00:00.000Z", r#""Run the tests""#),
        assistant(
            "a1",
            Some("u1"),
            "2025-01-01T00:00:01.000Z",
            Some("r1"),
            "m1",
            &tool_use("t1", "Bash", r#"{"command":"npm test"}"#),
        ),
    ];
    let mut result = tool_result("r1", "a1", "2025-01-01T00:00:02.000Z", "t1", "done", result_extra);
    if !tool_use_result.is_empty() {
        result.insert_str(
            result.len() - 1,
            &format!(r#","toolUseResult":{tool_use_result}"#),
        );
    }
    lines.push(result);
    load_lines(&lines)
}

fn summary_of(annotations: &Value) -> Value {
    annotations["annotations"][1]["tool_summary"]["tool_calls"][0].clone()
}

#[test]
fn a_tool_result_with_is_error_is_a_failure_in_every_view() {
    let session = tool_session(r#","is_error":true"#, "");
    let (annotations, workflow, _) = views(&session);
    let s = summary_of(&annotations);
    assert_eq!(
        (
            s["success"].clone(),
            s["is_error"].clone(),
            s["result_count"].clone()
        ),
        (false.into(), true.into(), 1.into())
    );
    let result = &workflow["workflow"]["nodes"][2];
    assert_eq!(result["nodeType"], "result_failure");
    assert_eq!(result["toolResultStatus"], "failure");
    assert_eq!(result["toolName"], "Bash");
    assert_eq!(workflow["workflow"]["toolSuccessRate"], 0);
}

/// Issue 17: stderr alone made a failure; on 90 real sessions every one of 155 results with
/// stderr was a success. A stderr-only result is a success and still shows its stderr.
#[test]
fn stderr_alone_is_no_failure_and_still_shows() {
    let session = tool_session(
        "",
        r#"{"stdout":"","stderr":"npm warn deprecated inflight@1.0.6","interrupted":false}"#,
    );
    let (annotations, workflow, _) = views(&session);
    assert_eq!(summary_of(&annotations)["is_error"], false);
    assert_eq!(summary_of(&annotations)["success"], true);
    let result = &workflow["workflow"]["nodes"][2];
    assert_eq!(result["nodeType"], "result_success");
    assert_eq!(result["toolResultStatus"], "success");
    assert_eq!(result["toolResultStderr"], "npm warn deprecated inflight@1.0.6");
    assert_eq!(
        result["content"],
        "done\n[stderr] npm warn deprecated inflight@1.0.6"
    );
    assert_eq!(workflow["workflow"]["toolSuccessRate"], 1);
}

/// Issue 17: the log's own verdict, in every view, on `fixtures/synthetic/tool_failures`:
/// the cwd-reset notice and a warning on stderr are successes; `is_error: true`,
/// `status: "failed"` and `interrupted: true` are failures.
#[test]
fn a_tool_call_fails_by_the_logs_own_verdict_in_every_view() {
    let session = crate::helpers::load_path(&crate::helpers::fixture("synthetic/tool_failures"));
    let verdicts = [
        ("toolu_cwd", false),
        ("toolu_warn", false),
        ("toolu_err", true),
        ("toolu_status", true),
        ("toolu_stop", true),
    ];
    let (annotations, workflow, chatlog) = views(&session);

    let calls: Vec<(String, bool, bool)> = annotations["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|u| {
            u["tool_summary"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| {
            (
                c["tool_use_id"].as_str().unwrap().to_owned(),
                c["is_error"].as_bool().unwrap(),
                c["success"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, bool, bool)> = verdicts
        .iter()
        .map(|&(id, failed)| (id.to_owned(), failed, !failed))
        .collect();
    assert_eq!(calls, expected, "annotations: tool_summary");

    let w = &workflow["workflow"];
    let results: Vec<(String, String, String)> = w["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["nodeType"].as_str().unwrap().starts_with("result_"))
        .map(|n| {
            (
                n["toolUseId"].as_str().unwrap().to_owned(),
                n["nodeType"].as_str().unwrap().to_owned(),
                n["toolResultStatus"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> = verdicts
        .iter()
        .map(|&(id, failed)| {
            let (t, s) = if failed {
                ("result_failure", "failure")
            } else {
                ("result_success", "success")
            };
            (id.to_owned(), t.to_owned(), s.to_owned())
        })
        .collect();
    assert_eq!(results, expected, "workflow: result nodes");
    assert_eq!(w["toolSuccessRate"], 0.4, "workflow: 2 of 5 succeeded");

    let chat_types: Vec<&str> = chatlog["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["nodeType"].as_str().filter(|t| t.starts_with("result_")))
        .collect();
    assert_eq!(
        chat_types,
        [
            "result_success",
            "result_success",
            "result_failure",
            "result_failure",
            "result_failure"
        ],
        "chat log"
    );

    let context = crate::helpers::body(&session, View::Context, ViewOptions::default());
    let errors: Vec<bool> = context["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "toolResult")
        .map(|m| m.get("is_error").and_then(Value::as_bool).unwrap_or(false))
        .collect();
    assert_eq!(errors, [false, false, true, true, true], "context");
}

#[test]
fn strict_loading_names_the_file_and_line() {
    let mut lines = conversation();
    lines.insert(1, "{not json".to_owned());
    let input = SessionInput::new(vec![SourceFile::new(MAIN, lines.join("\n"))]);
    let err = Session::build(
        &input,
        LoadOptions {
            strict: true,
            ..LoadOptions::default()
        },
    )
    .unwrap_err();
    match &err {
        SessionError::InvalidLine { file, line, .. } => assert_eq!((file.as_str(), *line), (MAIN, 2)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err
        .to_string()
        .starts_with(&format!("invalid JSON in {MAIN} on line 2")));
    // Without strict, the line is a diagnostic and the rest loads.
    let session = Session::build(&input, LoadOptions::default()).unwrap();
    assert_eq!(session.diagnostics.bad_lines.count, 1);
    assert_eq!(session.items.len(), 3);
}

#[test]
fn only_agent_files_is_no_main_file() {
    let input = SessionInput::new(vec![SourceFile::new("agent-aaaa.jsonl", "{}")]);
    assert_eq!(
        Session::build(&input, LoadOptions::default()).unwrap_err(),
        SessionError::NoMainFile
    );
}

#[test]
fn parent_cycles_and_self_parents_are_broken_and_reported() {
    let lines = vec![
        user(
            "a",
            Some("b"),
            "2025-01-01T00:00:02.000Z",
            r#""first of a cycle""#,
        ),
        user(
            "b",
            Some("a"),
            "2025-01-01T00:00:01.000Z",
            r#""second of a cycle""#,
        ),
        user("s", Some("s"), "2025-01-01T00:00:03.000Z", r#""my own parent""#),
    ];
    let session = load_lines(&lines);
    let (annotations, workflow, _) = views(&session);
    assert_eq!(unit_ids(&annotations), ["U:b", "U:a", "U:s"]);
    assert_eq!(session.diagnostics.cycles_broken.count, 2);
    let edges = workflow["workflow"]["edges"].as_array().unwrap();
    assert!(edges.iter().all(|e| e["source"] != e["target"]));
}

#[test]
fn records_of_unknown_types_keep_the_chain_together() {
    // Newer Claude Code writes `attachment` records inside the parent chain.
    let lines = vec![
        user("u1", None, "2025-01-01T00:00:00.000Z", r#""Look at this file""#),
        r#"{"type":"attachment","uuid":"at1","parentUuid":"u1","timestamp":"2025-01-01T00:00:00.500Z","attachment":{"type":"file"}}"#.to_owned(),
        assistant("a1", Some("at1"), "2025-01-01T00:00:01.000Z", Some("r1"), "m1", &text("Seen it.")),
    ];
    let session = load_lines(&lines);
    let (_, workflow, _) = views(&session);
    assert_eq!(session.diagnostics.orphans.count, 0);
    assert_eq!(
        session.diagnostics.unknown_record_types.get("attachment"),
        Some(&1)
    );
    assert_eq!(
        workflow["workflow"]["nodes"][1]["parentNodeIds"],
        serde_json::json!(["u1"])
    );
}

#[test]
fn parallel_tool_results_arrive_before_the_conversation_continues() {
    // Each tool_use is its own record, chained; the conversation continues under the last
    // result. The first result must not be pushed to the end of the session.
    let lines = vec![
        user("u1", None, "2025-01-01T00:00:00.000Z", r#""Read both files""#),
        assistant(
            "c1",
            Some("u1"),
            "2025-01-01T00:00:01.000Z",
            Some("r1"),
            "m1",
            &tool_use("t1", "Read", r#"{"file_path":"/a"}"#),
        ),
        assistant(
            "c2",
            Some("c1"),
            "2025-01-01T00:00:01.100Z",
            Some("r1"),
            "m1",
            &tool_use("t2", "Read", r#"{"file_path":"/b"}"#),
        ),
        tool_result("x1", "c1", "2025-01-01T00:00:02.000Z", "t1", "A", ""),
        tool_result("x2", "c2", "2025-01-01T00:00:02.100Z", "t2", "B", ""),
        assistant(
            "a2",
            Some("x2"),
            "2025-01-01T00:00:03.000Z",
            Some("r2"),
            "m2",
            &text("Both read."),
        ),
    ];
    let session = load_lines(&lines);
    let (_, workflow, _) = views(&session);
    let ids: Vec<&str> = workflow["workflow"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["u1", "c1", "c2", "x1", "x2", "a2"]);
    // Both results join into the next turn; the calls fork in parallel.
    let a2 = &workflow["workflow"]["nodes"][5];
    assert_eq!(a2["parentNodeIds"], serde_json::json!(["x1", "x2"]));
    assert_eq!(workflow["workflow"]["nodes"][1]["parallelCount"], 2);
}

#[test]
fn workflow_step_cuts_nodes_edges_lanes_and_node_lists() {
    // CONTRACT 3.7: unlike the reference (D-C16), the kept nodes' lists are cut too.
    let session = crate::helpers::load_path(&crate::helpers::fixture("synthetic/subagents"));
    let full = body(&session, View::Workflow, ViewOptions::default());
    let cut = body(
        &session,
        View::Workflow,
        ViewOptions {
            step: Some(5),
            ..Default::default()
        },
    );
    let w = &cut["workflow"];
    let nodes = w["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 6);
    let kept: std::collections::HashSet<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert!(nodes.iter().all(|n| n["stepIndex"].as_u64().unwrap() <= 5));
    for n in nodes {
        for list in ["parentNodeIds", "childNodeIds"] {
            for id in n[list].as_array().unwrap() {
                assert!(
                    kept.contains(id.as_str().unwrap()),
                    "{list} of {} names a cut node",
                    n["id"]
                );
            }
        }
    }
    for e in w["edges"].as_array().unwrap() {
        assert!(kept.contains(e["source"].as_str().unwrap()) && kept.contains(e["target"].as_str().unwrap()));
    }
    let lanes: Vec<&str> = w["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert_eq!(lanes, ["main", "agent-aaaa1111"]);
    assert_eq!(w["currentStep"], 5);
    for total in [
        "totalSteps",
        "totalTokens",
        "totalToolCalls",
        "toolSuccessRate",
        "startTime",
        "endTime",
    ] {
        assert_eq!(
            w[total], full["workflow"][total],
            "{total} stays the whole session's"
        );
    }
}

#[test]
fn sub_agents_sit_between_their_task_call_and_its_result() {
    let session = crate::helpers::load_path(&crate::helpers::fixture("synthetic/subagents"));
    let chat = body(
        &session,
        View::Chatlog,
        ViewOptions {
            include_subagents: true,
            ..Default::default()
        },
    );
    let labels: Vec<&str> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["displayStepLabel"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "#1",
            "#2",
            "#3",
            "#4",
            "sub-aaaa-1",
            "sub-aaaa-2",
            "sub-aaaa-3",
            "sub-aaaa-4",
            "sub-aaaa-5",
            "sub-aaaa-6",
            "sub-aaaa-7",
            "sub-bbbb-1",
            "sub-bbbb-2",
            "sub-bbbb-3",
            "sub-bbbb-4",
            "sub-bbbb-5",
            "sub-bbbb-6",
            "sub-bbbb-7",
            "#5",
            "#6",
            "#7",
            "#8",
            "#9",
            "#10"
        ]
    );
    let workflow = body(&session, View::Workflow, ViewOptions::default());
    let edges: Vec<(&str, &str, bool)> = workflow["workflow"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["isCrossLane"] == true)
        .map(|e| {
            (
                e["source"].as_str().unwrap(),
                e["target"].as_str().unwrap(),
                e["isCrossLane"] == true,
            )
        })
        .collect();
    // Task call -> sub-agent's first node; sub-agent's last node -> Task result.
    assert!(edges.contains(&(
        "00000000-0000-4000-8000-000000000003",
        "00000000-0000-4000-9aaa-000000000101",
        true
    )));
    assert!(edges.contains(&(
        "00000000-0000-4000-9aaa-000000000107",
        "00000000-0000-4000-8000-000000000005",
        true
    )));
    assert_eq!(edges.len(), 4);
    assert_eq!(session.diagnostics.subagents_missing, vec!["cccc3333".to_owned()]);
}

#[test]
fn sidechain_units_are_added_on_request() {
    let session = crate::helpers::load_path(&crate::helpers::fixture("synthetic/subagents"));
    let main_only = body(&session, View::Annotations, ViewOptions::default());
    let all = body(
        &session,
        View::Annotations,
        ViewOptions {
            include_subagents: true,
            ..Default::default()
        },
    );
    assert_eq!(main_only["total"], 4);
    assert_eq!(all["total"], 10);
    let sub: Vec<&Value> = all["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["source"]["is_sidechain"] == true)
        .collect();
    assert_eq!(sub.len(), 6);
    assert_eq!(sub[0]["unit_type"], "user_turn");
    assert_eq!(
        sub[0]["actor_id"], "assistant",
        "the main agent delegates the sub-agent's prompt"
    );
    assert_eq!(sub[1]["actor_id"], "agent-aaaa1111");
    assert_eq!(sub[1]["agent_kind"], "sub");
    assert_eq!(sub[1]["source"]["raw_file"], "agent-aaaa1111.jsonl");
}

#[test]
fn a_two_hundred_thousand_record_chain_loads_without_recursion() {
    // Agentic tool loops form unbroken parent chains; CommuGraph's recursive sort fails near
    // 3,500 records (SPEC 10). Every stage here is iterative.
    let n = 200_000;
    let mut lines = Vec::with_capacity(n);
    for i in 0..n {
        let parent = i.checked_sub(1).map(|p| format!("c{p}"));
        lines.push(user(
            &format!("c{i}"),
            parent.as_deref(),
            "2025-01-01T00:00:00.000Z",
            &format!(r#""step {i} of the chain""#),
        ));
    }
    let session = load_lines(&lines);
    assert_eq!(session.items.len(), n);
    assert_eq!(session.workflow.edges.len(), n - 1);
    let in_order = session.record_sequence.windows(2).all(|w| w[0] + 1 == w[1]);
    assert!(
        in_order,
        "a chain is emitted in chain order even when every timestamp ties"
    );
}

/// Issue 14: a text is kept as the JSON literal it was read as, and written through when a
/// writer escapes it as `serde_json` does. Every other escape (`\u0041`, `\/`, uppercase
/// hex, an escaped surrogate pair or `<`) is decoded and written again canonically; lone
/// surrogates and bytes that are not UTF-8 read as U+FFFD. Whatever the input's escapes,
/// a body is what serialising its decoded strings gives (tool inputs and compaction
/// metadata aside: they are passed through as written), and the views read the decoded
/// text (a notice written `\u003ccommand-name>` is a notice).
#[test]
fn escapes_of_every_kind_read_as_their_text_and_are_written_canonically() {
    let session = load_path(&fixture("synthetic/escapes"));
    for view in [View::Chatlog, View::Graph] {
        let raw = views::render(&session, view, ViewOptions::default()).to_bytes();
        let value: Value = serde_json::from_slice(&raw).expect("a body is JSON");
        assert_eq!(
            serde_json::to_vec(&value).unwrap(),
            raw.to_vec(),
            "{view}: every string is written as serde_json writes it"
        );
    }
    let chat = body(&session, View::Chatlog, ViewOptions::default());
    let contents: Vec<&str> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents[0], "Café A / path 😀 end \u{1f} and \u{1f} tab\tq\"uote");
    assert_eq!(
        contents[1],
        "[Thinking]\nthink éé //\n\n[Response]\nlone \u{FFFD} here"
    );
    assert!(contents[3].starts_with("out A\nxxx"));
    assert!(contents[3].ends_with("xé\nstd/out\n[stderr] err \u{FFFD}\n[file: /a]\nfc B"));
    assert_eq!(contents[5], "bad \u{FFFD} in content here");
    assert_eq!(
        contents[11],
        "y".repeat(10_000),
        "an array's text is cut at 10,000 units"
    );
    assert_eq!(contents[14], "part é one\npart two");
    let annotations = body(&session, View::Annotations, ViewOptions::default());
    let unit = |id: &str| {
        annotations["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["event_id"] == id)
            .cloned()
    };
    assert_eq!(unit("S:u14").unwrap()["unit_type"], "system_turn");
    assert!(unit("U:u12").is_none(), "white space alone is no prompt");
}

/// Real logs (2 of 90 sessions): a user typed while a tool ran, and Claude Code wrote the
/// words as a `text` block beside the `tool_result` in one user record. The record was a
/// tool result and nothing else, so the question was lost to coders. It is a user turn
/// (the human's, with its text), and the result still counts for its call.
#[test]
fn words_typed_beside_a_tool_result_are_a_user_turn() {
    let session = load_path(&fixture("synthetic/typed_beside_result"));
    let annotations = body(&session, View::Annotations, ViewOptions::default());
    let units = annotations["annotations"].as_array().unwrap();
    let typed = units
        .iter()
        .find(|u| u["event_id"] == "U:33333333-0000-4000-8000-000000000003")
        .expect("the typed words are a unit");
    assert_eq!(typed["unit_type"], "user_turn");
    assert_eq!(typed["actor_type"], "human");
    assert_eq!(
        typed["text_or_artifact_ref"]["text"],
        "wait, is the model id claude-sonnet-4-20250514 or the dated alias?"
    );
    assert_eq!(
        annotations["user_turn_count"], 3,
        "the prompt, the typed words, \"ok\""
    );
    let call = units.iter().find(|u| u["event_id"] == "A:req_1:msg_1").unwrap();
    let calls = &call["tool_summary"]["tool_calls"];
    assert_eq!(calls[0]["result_count"], 1, "{calls}");
    assert_eq!(calls[0]["is_error"], false, "{calls}");
    let order = unit_ids(&annotations);
    let at = |id: &str| order.iter().position(|u| u == id).unwrap();
    assert!(at("A:req_1:msg_1") < at("U:33333333-0000-4000-8000-000000000003"));
    assert!(at("U:33333333-0000-4000-8000-000000000003") < at("A:req_2:msg_2"));
}

/// Claude Code 1.0.x wrote no compact boundary: after a compaction, a user record with
/// `isCompactSummary: true` ("This session is being continued from a previous
/// conversation...") starts the log. It was read as the human's first prompt. It is the
/// system's compaction: a `system_turn` with `compact_metadata` (empty: none was logged),
/// a compaction node in the workflow, sent by `system - context compact`.
#[test]
fn a_compaction_summary_without_a_boundary_is_a_system_turn() {
    let session = load_path(&fixture("synthetic/compact_summary_v1"));
    let (annotations, workflow, _) = views(&session);
    let units = annotations["annotations"].as_array().unwrap();
    let summary = &units[0];
    assert_eq!(summary["event_id"], "S:44444444-0000-4000-8000-000000000001");
    assert_eq!(summary["unit_type"], "system_turn");
    assert_eq!(summary["actor_type"], "system");
    assert_eq!(summary["compact_metadata"], serde_json::json!({}));
    assert!(summary["text_or_artifact_ref"]["text"]
        .as_str()
        .unwrap()
        .starts_with("This session is being continued"));
    assert_eq!(annotations["user_turn_count"], 1, "only the real prompt");
    assert_eq!(annotations["system_turn_count"], 1);
    let first = &workflow["workflow"]["nodes"][0];
    assert_eq!(first["nodeType"], "system_notice");
    let chatlog = body(&session, View::Chatlog, ViewOptions::default());
    assert_eq!(chatlog["messages"][0]["isContextCompact"], true);
    let graph = body(&session, View::Graph, ViewOptions::default());
    let senders: Vec<&str> = graph["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert!(senders.contains(&"system - context compact"), "{senders:?}");
}
