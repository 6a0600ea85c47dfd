//! Session trees: pi sessions (v1, v2, v3) through the same core, the design documents'
//! branching and compaction examples, and the Claude Code DAG's edge cases.

use serde_json::{json, Value};
use sessiongraph::core::pipeline::session::Branch;
use sessiongraph::core::views::branches::context_body;
use sessiongraph::core::views::{View, ViewOptions};
use sessiongraph::core::Session;

use crate::helpers::records::{assistant, text, tool_result, tool_use, user, Record};
use crate::helpers::{body, fixture, load_files, load_lines, load_path};

/// The roles and texts of the context at `leaf`.
fn context_of(session: &Session, leaf: Option<&str>) -> Vec<(String, String)> {
    let body = context_body(session, leaf).expect("leaf exists");
    body.messages
        .iter()
        .map(|m| (m.role.to_owned(), m.text.to_text().into_owned()))
        .collect()
}

fn texts(ctx: &[(String, String)]) -> Vec<&str> {
    ctx.iter().map(|(_, t)| t.as_str()).collect()
}

fn pi(lines: &[&str]) -> Session {
    load_files(&[("session.jsonl", &lines.join("\n"))])
}

/// A design-document (v2, uuid) message entry.
fn msg(uuid: &str, parent: &str, role: &str, content: &str) -> String {
    format!(
        r#"{{"type":"message","uuid":"{uuid}","parentUuid":"{parent}","message":{{"role":"{role}","content":"{content}"}}}}"#
    )
}

// ---------------------------------------------------------------------------------------
// pi: the real fixtures

#[test]
fn the_pi_fixtures_are_read_through_the_same_core() {
    for (name, users, assistants, compactions) in [
        ("before-compaction.jsonl", 55, 484, 2),
        ("large-session.jsonl", 88, 453, 0),
    ] {
        let session = load_path(&fixture(&format!("pi/{name}")));
        assert_eq!(session.diagnostics.bad_lines.count, 0, "{name}");
        assert!(
            session.diagnostics.unknown_record_types.is_empty(),
            "{name}: {:?}",
            session.diagnostics.unknown_record_types
        );
        let a = body(&session, View::Annotations, ViewOptions::default());
        assert_eq!(a["assistant_turn_count"], assistants, "{name}");
        assert_eq!(a["user_turn_count"], users, "{name}");
        let units = a["annotations"].as_array().unwrap();
        let compaction_units = units
            .iter()
            .filter(|u| u.get("compact_metadata").is_some())
            .count();
        assert_eq!(compaction_units, compactions, "{name}");
        // Tool calls are answered by their results.
        let summaries: Vec<&Value> = units
            .iter()
            .filter_map(|u| u["tool_summary"]["tool_calls"].as_array())
            .flatten()
            .collect();
        assert!(!summaries.is_empty());
        let answered = summaries.iter().filter(|t| t["result_count"] == 1).count();
        assert!(
            answered * 100 >= summaries.len() * 95,
            "{name}: {answered} of {} calls answered",
            summaries.len()
        );
        let w = body(&session, View::Workflow, ViewOptions::default());
        let results = w["workflow"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["nodeType"].as_str().unwrap().starts_with("result_"));
        assert!(
            results.clone().all(|n| n.get("toolName").is_some()),
            "{name}: every result names its call"
        );
        // A linear v1 session has no branch.
        assert_eq!(session.tree.forks.len(), 0, "{name}");
    }
}

#[test]
fn the_context_of_a_compacted_pi_session_starts_with_the_latest_summary() {
    let path = fixture("pi/before-compaction.jsonl");
    let session = load_path(&path);
    let raw: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last_compaction = raw.iter().rposition(|e| e["type"] == "compaction").unwrap();
    let kept = raw[last_compaction]["firstKeptEntryIndex"].as_u64().unwrap() as usize;
    let is_message = |e: &Value| {
        e["type"] == "message"
            && !(e["message"]["role"] == "bashExecution" && e["message"]["excludeFromContext"] == true)
    };
    let expected = 1
        + raw[kept..last_compaction]
            .iter()
            .filter(|e| is_message(e))
            .count()
        + raw[last_compaction + 1..]
            .iter()
            .filter(|e| is_message(e))
            .count();
    let ctx = context_body(&session, None).unwrap();
    assert_eq!(ctx.messages.len(), expected);
    assert_eq!(ctx.messages[0].role, "compactionSummary");
    assert_eq!(
        ctx.messages[0].text,
        raw[last_compaction]["summary"].as_str().unwrap()
    );
    assert_eq!(
        ctx.messages[1].id,
        format!("{kept:08x}"),
        "then the first kept entry"
    );
    assert_eq!(
        ctx.leaf,
        Some(format!("{:08x}", raw.len() - 1).as_str()),
        "the last entry is the current leaf"
    );
}

#[test]
fn pi_v1_is_offered_as_a_migrated_v3_file_that_reads_the_same() {
    let path = fixture("pi/before-compaction.jsonl");
    let original = std::fs::read(&path).unwrap();
    let migrated = sessiongraph::core::formats::pi::migrate_to_v3(&original);
    let first: Value = serde_json::from_slice(migrated.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["version"], 3);
    let a = load_files(&[("s.jsonl", std::str::from_utf8(&original).unwrap())]);
    let b = load_files(&[("s.jsonl", std::str::from_utf8(&migrated).unwrap())]);
    for view in [View::Annotations, View::Workflow, View::Chatlog, View::Context] {
        assert_eq!(
            body(&a, view, ViewOptions::default()),
            body(&b, view, ViewOptions::default()),
            "{view}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The design documents' examples (spec/session-tree-format.md)

#[test]
fn full_session_with_branching_gives_the_listed_context() {
    let session = pi(&[
        r#"{"type":"session","version":2,"uuid":"ses1","parentUuid":null,"id":"abc","cwd":"/project"}"#,
        &msg("m1", "ses1", "user", "Build a CLI"),
        &msg("m2", "m1", "assistant", "I'll create..."),
        &msg("m3", "m2", "user", "Add --verbose flag"),
        &msg("m4", "m3", "assistant", "Here's the flag..."),
        &msg("m5", "m4", "user", "Actually use Python"),
        &msg("m6", "m5", "assistant", "Converting to Python..."),
        r#"{"type":"branch_summary","uuid":"bs1","parentUuid":"m2","summary":"Attempted Node.js CLI with --verbose flag"}"#,
        &msg("m7", "bs1", "user", "Use Rust instead"),
        &msg("m8", "m7", "assistant", "Creating Rust CLI..."),
    ]);
    // "Context path: m8→m7→bs1→m2→m1→ses1", five messages.
    let ctx = context_of(&session, None);
    assert_eq!(
        ctx,
        [
            ("user".to_owned(), "Build a CLI".to_owned()),
            ("assistant".to_owned(), "I'll create...".to_owned()),
            (
                "branchSummary".to_owned(),
                "Attempted Node.js CLI with --verbose flag".to_owned()
            ),
            ("user".to_owned(), "Use Rust instead".to_owned()),
            ("assistant".to_owned(), "Creating Rust CLI...".to_owned()),
        ]
    );
    // "Entries m3-m6 ... are preserved but not in context."
    let b = body(&session, View::Branches, ViewOptions::default());
    assert_eq!(b["current_leaf"], "m8");
    assert_eq!(
        b["forks"],
        json!([{"id": "m2", "children": [
            {"id": "m3", "leaf": "m6", "size": 4, "active": false},
            {"id": "bs1", "leaf": "m8", "size": 3, "active": true}
        ]}])
    );
    assert_eq!(b["abandoned_records"], 4);
    let all = body(&session, View::Annotations, ViewOptions::default());
    let active = body(
        &session,
        View::Annotations,
        ViewOptions {
            branch: Branch::Active,
            ..Default::default()
        },
    );
    assert_eq!(
        all["total"].as_u64().unwrap() - active["total"].as_u64().unwrap(),
        4,
        "nothing lost, four abandoned"
    );
    // The context of the abandoned leaf is its own path.
    assert_eq!(
        texts(&context_of(&session, Some("m6"))),
        [
            "Build a CLI",
            "I'll create...",
            "Add --verbose flag",
            "Here's the flag...",
            "Actually use Python",
            "Converting to Python..."
        ]
    );
}

#[test]
fn compaction_keeps_the_summary_and_the_entries_from_the_first_kept_one() {
    // root → m1 … m10 → compaction (firstKeptEntryUuid m6): "[summary, m6, m7, m8, m9, m10]".
    let mut lines =
        vec![r#"{"type":"session","version":2,"uuid":"root","parentUuid":null,"id":"c"}"#.to_owned()];
    let mut parent = "root".to_owned();
    for i in 1..=10 {
        let role = if i % 2 == 1 { "user" } else { "assistant" };
        lines.push(msg(&format!("m{i}"), &parent, role, &format!("m{i}")));
        parent = format!("m{i}");
    }
    lines.push(r#"{"type":"compaction","uuid":"c1","parentUuid":"m10","summary":"summary","firstKeptEntryUuid":"m6","tokensBefore":50000}"#.to_owned());
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let session = pi(&lines);
    assert_eq!(
        texts(&context_of(&session, None)),
        ["summary", "m6", "m7", "m8", "m9", "m10"]
    );
}

/// The "Compaction + Stacking" tree: compaction1 inline on the first branch, a stack summary
/// branching at m3, compaction2 inline on the second branch.
fn compaction_and_stacking() -> Session {
    let mut lines: Vec<String> =
        vec![r#"{"type":"session","version":2,"uuid":"root","parentUuid":null,"id":"cs"}"#.to_owned()];
    let chain = |lines: &mut Vec<String>, from: &str, names: &[&str]| {
        let mut parent = from.to_owned();
        for n in names {
            lines.push(msg(
                n,
                &parent,
                if n.ends_with(['1', '3', '5', '7', '9']) {
                    "user"
                } else {
                    "assistant"
                },
                n,
            ));
            parent = (*n).to_owned();
        }
    };
    chain(&mut lines, "root", &["m1", "m2", "m3", "m4", "m5"]);
    lines.push(r#"{"type":"compaction","uuid":"compaction1","parentUuid":"m5","summary":"summary1","firstKeptEntryUuid":"m4","tokensBefore":1}"#.to_owned());
    chain(&mut lines, "compaction1", &["m6", "m7", "m8"]);
    lines.push(
        r#"{"type":"stack_summary","uuid":"stack","parentUuid":"m3","summary":"stack summary"}"#.to_owned(),
    );
    chain(&mut lines, "stack", &["m9", "m10"]);
    lines.push(r#"{"type":"compaction","uuid":"compaction2","parentUuid":"m10","summary":"summary2","firstKeptEntryUuid":"m10","tokensBefore":2}"#.to_owned());
    chain(&mut lines, "compaction2", &["m11"]);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    pi(&lines)
}

#[test]
fn each_branch_has_its_own_compaction_history() {
    let session = compaction_and_stacking();
    // The current branch: compaction2 applies, compaction1 (on the other branch) does not.
    assert_eq!(texts(&context_of(&session, None)), ["summary2", "m10", "m11"]);
    assert_eq!(
        texts(&context_of(&session, Some("m9"))),
        ["m1", "m2", "m3", "stack summary", "m9"]
    );
    assert_eq!(
        texts(&context_of(&session, Some("m8"))),
        ["summary1", "m4", "m5", "m6", "m7", "m8"]
    );
    let b = body(&session, View::Branches, ViewOptions::default());
    assert_eq!(b["forks"][0]["id"], "m3");
    assert_eq!(b["forks"][0]["children"][0]["id"], "m4");
    assert_eq!(b["forks"][0]["children"][0]["active"], false);
    assert_eq!(b["forks"][0]["children"][1]["id"], "stack");
    assert_eq!(b["forks"][0]["children"][1]["active"], true);
}

#[test]
fn multiple_pops_walk_the_current_branch_only() {
    // a─b─c─d─e─f─g─h; c─i:summary─j─k─l; k─m:summary─n:current. "Context: n→m→k→j→i→c→b→a."
    let mut lines = vec![r#"{"type":"session","version":3,"id":"pops"}"#.to_owned()];
    let entry = |id: &str, parent: Option<&str>, kind: &str| match kind {
        "summary" => format!(
            r#"{{"type":"branch_summary","id":"{id}","parentId":{},"summary":"{id}"}}"#,
            parent.map_or("null".to_owned(), |p| format!("\"{p}\""))
        ),
        role => format!(
            r#"{{"type":"message","id":"{id}","parentId":{},"message":{{"role":"{role}","content":"{id}"}}}}"#,
            parent.map_or("null".to_owned(), |p| format!("\"{p}\""))
        ),
    };
    let mut parent: Option<&str> = None;
    for (id, role) in [
        ("a", "user"),
        ("b", "assistant"),
        ("c", "user"),
        ("d", "assistant"),
        ("e", "user"),
        ("f", "assistant"),
        ("g", "user"),
        ("h", "assistant"),
    ] {
        lines.push(entry(id, parent, role));
        parent = Some(id);
    }
    for (id, parent, kind) in [
        ("i", "c", "summary"),
        ("j", "i", "user"),
        ("k", "j", "assistant"),
        ("l", "k", "user"),
        ("m", "k", "summary"),
        ("n", "m", "user"),
    ] {
        lines.push(entry(id, Some(parent), kind));
    }
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let session = pi(&lines);
    assert_eq!(
        texts(&context_of(&session, None)),
        ["a", "b", "c", "i", "j", "k", "m", "n"]
    );
    let b = body(&session, View::Branches, ViewOptions::default());
    let forks: Vec<(&str, Vec<(&str, bool)>)> = b["forks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let children = f["children"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c["id"].as_str().unwrap(), c["active"] == true))
                .collect();
            (f["id"].as_str().unwrap(), children)
        })
        .collect();
    assert_eq!(
        forks,
        [
            ("c", vec![("d", false), ("i", true)]),
            ("k", vec![("l", false), ("m", true)])
        ]
    );
    let active = body(
        &session,
        View::Chatlog,
        ViewOptions {
            branch: Branch::Active,
            ..Default::default()
        },
    );
    let shown: Vec<&str> = active["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        shown,
        ["a", "[Response]\nb", "c", "i", "j", "[Response]\nk", "m", "n"]
    );
}

// ---------------------------------------------------------------------------------------
// Claude Code (spec/claude-code-dag.md "Edge Cases")

#[test]
fn a_regenerated_response_is_a_branch_reported_but_not_lost() {
    let lines = vec![
        user("p", None, "2025-01-01T00:00:00.000Z", r#""Write a haiku""#),
        assistant(
            "a1",
            Some("p"),
            "2025-01-01T00:00:01.000Z",
            Some("r1"),
            "m1",
            &text("First try."),
        ),
        assistant(
            "a2",
            Some("p"),
            "2025-01-01T00:00:05.000Z",
            Some("r2"),
            "m2",
            &text("Second try."),
        ),
        user("q", Some("a2"), "2025-01-01T00:00:09.000Z", r#""Better, thanks""#),
    ];
    let session = load_lines(&lines);
    let b = body(&session, View::Branches, ViewOptions::default());
    assert_eq!(b["current_leaf"], "q");
    assert_eq!(
        b["forks"],
        json!([{"id": "p", "timestamp": "2025-01-01T00:00:00.000Z", "children": [
            {"id": "a1", "leaf": "a1", "size": 1, "first_timestamp": "2025-01-01T00:00:01.000Z", "active": false},
            {"id": "a2", "leaf": "q", "size": 2, "first_timestamp": "2025-01-01T00:00:05.000Z", "active": true}
        ]}])
    );
    let ids = |v: &Value| -> Vec<String> {
        v["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["event_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(&body(&session, View::Annotations, ViewOptions::default())),
        ["U:p", "A:r1:m1", "A:r2:m2", "U:q"]
    );
    let active = ViewOptions {
        branch: Branch::Active,
        ..Default::default()
    };
    assert_eq!(
        ids(&body(&session, View::Annotations, active)),
        ["U:p", "A:r2:m2", "U:q"]
    );
    let w = body(&session, View::Workflow, active);
    let nodes: Vec<&str> = w["workflow"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["p", "a2", "q"]);
    assert_eq!(
        w["workflow"]["nodes"][1]["stepIndex"], 1,
        "steps are dense in the active branch"
    );
}

#[test]
fn off_the_active_path_is_active_marks_the_active_child() {
    // Two forks: one on the active path, one inside a side branch with `isActive` on its
    // first child.
    let mut lines = vec![
        user("p", None, "2025-01-01T00:00:00.000Z", r#""Start here""#),
        assistant(
            "s1",
            Some("p"),
            "2025-01-01T00:00:01.000Z",
            Some("r1"),
            "m1",
            &text("side"),
        ),
        user("x", Some("s1"), "2025-01-01T00:00:02.000Z", r#""first edit""#),
        user("y", Some("s1"), "2025-01-01T00:00:03.000Z", r#""second edit""#),
        assistant(
            "main",
            Some("p"),
            "2025-01-01T00:00:04.000Z",
            Some("r2"),
            "m2",
            &text("main"),
        ),
    ];
    lines[2] = lines[2].replacen("{", r#"{"isActive":true,"#, 1);
    let session = load_lines(&lines);
    let b = body(&session, View::Branches, ViewOptions::default());
    assert_eq!(
        b["forks"][0]["children"][1]["active"], true,
        "main is on the active path"
    );
    assert_eq!(b["forks"][1]["id"], "s1");
    assert_eq!(b["forks"][1]["children"][0]["id"], "x");
    assert_eq!(
        b["forks"][1]["children"][0]["active"], true,
        "isActive wins over file position"
    );
}

#[test]
fn broken_parent_references_become_roots_that_are_reported() {
    let lines = vec![
        user("a", None, "2025-01-01T00:00:00.000Z", r#""The beginning""#),
        user(
            "b",
            Some("never-written"),
            "2025-01-01T00:00:01.000Z",
            r#""Lost parent""#,
        ),
    ];
    let session = load_lines(&lines);
    assert_eq!(session.diagnostics.orphans.count, 1);
    assert_eq!(
        session.diagnostics.orphans.samples[0].related_uuid.as_deref(),
        Some("never-written")
    );
    assert_eq!(session.items.len(), 2);
}

#[test]
fn several_compactions_keep_only_the_latest_summary_in_context() {
    let mut lines = vec![user("u0", None, "2025-01-01T00:00:00.000Z", r#""Long task""#)];
    let mut last = "u0".to_owned();
    for k in 1..=3 {
        let b = format!("b{k}");
        let s = format!("s{k}");
        let u = format!("u{k}");
        lines.push(format!(
            r#"{{"type":"system","subtype":"compact_boundary","uuid":"{b}","parentUuid":null,"logicalParentUuid":"{last}","timestamp":"2025-01-01T0{k}:00:00.000Z","content":"Conversation compacted","compactMetadata":{{"trigger":"auto","preTokens":{k}}}}}"#
        ));
        lines.push(
            Record::prompt(&s, &format!("Summary {k}"))
                .parent(&b)
                .at(&format!("2025-01-01T0{k}:00:00.001Z"))
                .with("isCompactSummary", json!(true))
                .line(),
        );
        lines.push(user(
            &u,
            Some(&s),
            &format!("2025-01-01T0{k}:00:01.000Z"),
            &format!(r#""After compaction {k}""#),
        ));
        last = u;
    }
    let session = load_lines(&lines);
    let a = body(&session, View::Annotations, ViewOptions::default());
    let system: Vec<&Value> = a["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["unit_type"] == "system_turn")
        .collect();
    assert_eq!(system.len(), 3);
    assert_eq!(system[2]["text_or_artifact_ref"]["text"], "Summary 3");
    assert_eq!(
        texts(&context_of(&session, None)),
        ["Summary 3", "After compaction 3"]
    );
    assert_eq!(
        texts(&context_of(&session, Some("u2"))),
        ["Summary 2", "After compaction 2"]
    );
    assert_eq!(session.tree.forks.len(), 0, "compactions are not branches");
}

#[test]
fn interleaved_and_delayed_tool_results_find_their_calls() {
    // Two calls in one record (a batch), results in the opposite order, the first one
    // arriving after a sub-agent ran.
    let batch = format!(
        "{},{}",
        tool_use("t1", "Task", r#"{"prompt":"Look around","description":"Look"}"#),
        tool_use("t2", "Read", r#"{"file_path":"/a"}"#)
    );
    let main = [
        user("p", None, "2025-01-01T00:00:00.000Z", r#""Do both things""#),
        assistant(
            "c",
            Some("p"),
            "2025-01-01T00:00:01.000Z",
            Some("r1"),
            "m1",
            &batch,
        ),
        tool_result("r2", "c", "2025-01-01T00:00:02.000Z", "t2", "contents of a", ""),
        tool_result("r1", "r2", "2025-01-01T00:00:30.000Z", "t1", "looked around", "").replacen(
            r#""message""#,
            r#""toolUseResult":{"agentId":"ab12","status":"completed"},"message""#,
            1,
        ),
        assistant(
            "d",
            Some("r1"),
            "2025-01-01T00:00:31.000Z",
            Some("r3"),
            "m3",
            &text("Done."),
        ),
    ]
    .join("\n");
    let agent = [
        Record::prompt("s1", "Look around")
            .sidechain("ab12")
            .at("2025-01-01T00:00:03.000Z")
            .line(),
        Record::assistant("s2", "ms", vec![json!({"type": "text", "text": "Looked."})])
            .parent("s1")
            .sidechain("ab12")
            .at("2025-01-01T00:00:10.000Z")
            .request("rs")
            .line(),
    ]
    .join("\n");
    let session = load_files(&[("main.jsonl", &main), ("agent-ab12.jsonl", &agent)]);
    let w = body(&session, View::Workflow, ViewOptions::default());
    let nodes = w["workflow"]["nodes"].as_array().unwrap();
    let by_id = |id: &str| nodes.iter().find(|n| n["id"] == id).unwrap();
    assert_eq!(by_id("r2")["toolName"], "Read");
    assert_eq!(by_id("r2")["parentNodeIds"], json!(["c/t2"]));
    assert_eq!(by_id("r1")["toolName"], "Task");
    assert_eq!(
        by_id("r1")["parentNodeIds"],
        json!(["c", "s2"]),
        "from its call and from the sub-agent's last node"
    );
    let lane = &w["workflow"]["lanes"][1];
    assert_eq!(
        (lane["id"].as_str(), lane["depth"].as_u64()),
        (Some("agent-ab12"), Some(1))
    );
    assert_eq!(
        lane["agentName"], "unknown",
        "the Task call names no subagent_type"
    );
    let a = body(&session, View::Annotations, ViewOptions::default());
    let calls = &a["annotations"][1]["tool_summary"]["tool_calls"];
    assert_eq!(
        calls,
        &json!([
            {"tool_use_id": "t1", "tool_name": "Task", "success": true, "is_error": false, "result_count": 1},
            {"tool_use_id": "t2", "tool_name": "Read", "success": true, "is_error": false, "result_count": 1}
        ])
    );
}

#[test]
fn sidechains_nested_deeper_than_fifty_are_linked_level_by_level() {
    let depth = 60;
    let mut files: Vec<(String, String)> = Vec::new();
    let task = |uuid: &str, parent: &str, agent: Option<&str>, id: usize| {
        let in_log = |record: Record| match agent {
            Some(agent) => record.sidechain(agent),
            None => record,
        };
        let call = Record::assistant(
            uuid,
            &format!("mq{id}"),
            vec![
                json!({"type": "tool_use", "id": format!("t{id:03}"), "name": "Task",
                        "input": {"prompt": format!("level {id}"), "subagent_type": "Nested"}}),
            ],
        )
        .parent(parent)
        .at(&format!("2025-01-01T00:00:00.{id:03}Z"))
        .request(&format!("rq{id}"));
        let result = Record::user(
            &format!("{uuid}-r"),
            json!([{"type": "tool_result", "tool_use_id": format!("t{id:03}"), "content": "ok"}]),
        )
        .parent(uuid)
        .at(&format!("2025-01-01T00:00:{:02}.000Z", 59 - (id % 60)))
        .with(
            "toolUseResult",
            json!({"agentId": format!("a{id:03}"), "status": "completed"}),
        );
        format!("{}\n{}", in_log(call).line(), in_log(result).line())
    };
    files.push((
        "main.jsonl".into(),
        format!(
            "{}\n{}",
            user("p", None, "2025-01-01T00:00:00.000Z", r#""Go deep""#),
            task("c0", "p", None, 0)
        ),
    ));
    for level in 0..depth {
        let agent = format!("a{level:03}");
        let root = Record::prompt(&format!("{agent}-p"), &format!("level {level}"))
            .sidechain(&agent)
            .at(&format!("2025-01-01T00:00:00.{level:03}Z"))
            .line();
        let body = if level + 1 < depth {
            format!(
                "{root}\n{}",
                task(
                    &format!("{agent}-c"),
                    &format!("{agent}-p"),
                    Some(&agent),
                    level + 1
                )
            )
        } else {
            root
        };
        files.push((format!("agent-{agent}.jsonl"), body));
    }
    let refs: Vec<(&str, &str)> = files.iter().map(|(n, b)| (n.as_str(), b.as_str())).collect();
    let session = load_files(&refs);
    let depths: Vec<Option<usize>> = session.agents.iter().map(|a| a.depth).collect();
    assert_eq!(depths.len(), depth);
    assert_eq!(depths.iter().flatten().max(), Some(&depth));
    assert!(depths.iter().all(Option::is_some), "every level is linked");
    let w = body(&session, View::Workflow, ViewOptions::default());
    let lanes = w["workflow"]["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), depth + 1);
    assert_eq!(lanes[depth]["agentName"], "Nested");
    let annotations = body(
        &session,
        View::Annotations,
        ViewOptions {
            include_subagents: true,
            ..Default::default()
        },
    );
    let deepest = annotations["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["text_or_artifact_ref"]["text"] == format!("level {}", depth - 1))
        .unwrap();
    assert_eq!(
        deepest["actor_id"],
        format!("agent-a{:03}", depth - 2),
        "the prompt comes from the agent one level up"
    );
}
