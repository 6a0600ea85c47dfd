//! OpenAI Codex CLI rollouts end to end: readable dumps of every view of a real rollout,
//! the spawned-agent trio and the synthetic files (insta snapshots), and on a real server:
//! raw and multipart uploads, every view, a label on a Codex unit and a search by
//! framework, and a sessions directory whose spawned threads sit in other date folders.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sessiongraph::core::formats::input::{SessionInput, SourceFile};
use sessiongraph::core::views::{View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session};

use crate::helpers::{body, fixture};
use crate::labels::put;
use crate::server::{graph_id, Options, TestServer};
use crate::snapshots::{annotations_dump, workflow_dump};

const TRIO: [&str; 3] = [
    "xurl/archived_sessions/rollout-2026-02-23T06-54-42-55fe4488-c6bd-46fa-9390-dab3b8860b95.jsonl",
    "xurl/sessions/2026/02/23/rollout-2026-02-23T06-55-38-29bf19c3-b83e-401d-8f38-5660b7f67152.jsonl",
    "xurl/sessions/2026/02/23/rollout-2026-02-23T06-57-19-f3a61d18-700b-4a4b-919c-f1f9ba37e206.jsonl",
];
const REAL: &str = "agtrace/codex_session.jsonl";
const SYNTHETIC: &str = "synthetic/rollout-2026-03-02T14-00-00-0199aa00-0000-7000-8000-00000000000c.jsonl";

/// The files `fixtures/codex/<rel>`, named by their base names.
fn files(rels: &[&str]) -> Vec<(String, Vec<u8>)> {
    rels.iter()
        .map(|rel| {
            let path = fixture(&format!("codex/{rel}"));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

fn load(rels: &[&str]) -> Session {
    let input = SessionInput::new(
        files(rels)
            .into_iter()
            .map(|(n, b)| SourceFile::new(n, b))
            .collect(),
    );
    Session::build(&input, LoadOptions::default()).expect("the rollouts load")
}

/// One line per chat-log message and graph edge, then the metrics: what the other views
/// make of the session.
fn other_views_dump(session: &Session, options: ViewOptions) -> String {
    let mut out = String::from("# chatlog\n");
    let chatlog = body(session, View::Chatlog, options);
    for m in chatlog["messages"].as_array().expect("messages") {
        out.push_str(&format!(
            "{:>2} {:<15} {:<16} {:<10} {}\n",
            m["stepIndex"],
            m["laneId"].as_str().unwrap_or(""),
            m["nodeType"].as_str().unwrap_or(""),
            m["sender"].as_str().unwrap_or(""),
            m["toolName"].as_str().unwrap_or("")
        ));
    }
    out.push_str("# graph\n");
    let graph = body(session, View::Graph, options);
    for e in graph["graph"]["edges"].as_array().expect("edges") {
        out.push_str(&format!(
            "{} -> {} x{}\n",
            e["source"].as_str().unwrap_or("?"),
            e["target"].as_str().unwrap_or("?"),
            e["weight"]
        ));
    }
    out.push_str("# metrics\n");
    out.push_str(&serde_json::to_string_pretty(&body(session, View::Metrics, options)).unwrap());
    out
}

fn dump(rels: &[&str]) -> String {
    let session = load(rels);
    let all = ViewOptions {
        include_subagents: true,
        ..ViewOptions::default()
    };
    format!(
        "# workflow\n{}\n# annotations (with sub-agents)\n{}\n{}",
        workflow_dump(&body(&session, View::Workflow, all)),
        annotations_dump(&body(&session, View::Annotations, all)),
        other_views_dump(&session, all)
    )
}

#[test]
fn a_real_rollout_dump() {
    insta::assert_snapshot!(dump(&[REAL]));
}

#[test]
fn the_spawned_agent_trio_dump() {
    insta::assert_snapshot!(dump(&TRIO));
}

/// A response calling `spawn_agent` delegates (the search's `delegation` filter), and only
/// such a response: as a Claude Code response calling `Task`.
#[test]
fn a_spawn_agent_call_is_a_delegation() {
    let session = load(&TRIO);
    let body = sessiongraph::core::views::annotations::annotations(
        &session,
        false,
        sessiongraph::core::pipeline::session::Branch::All,
    );
    let mut delegating = 0;
    for unit in &body.annotations {
        let spawns = unit
            .tool_calls()
            .iter()
            .any(|c| c.tool_name == Some("spawn_agent"));
        assert_eq!(unit.delegates(), spawns, "{}", unit.event_id());
        delegating += usize::from(spawns);
    }
    assert!(delegating > 0, "the parent spawns its two threads");
}

#[test]
fn the_synthetic_rollout_dump() {
    insta::assert_snapshot!(dump(&[SYNTHETIC]));
}

#[test]
fn the_older_layouts_dump() {
    insta::assert_snapshot!(dump(&[
        "synthetic/rollout-2025-05-20T10-00-00-5973b6c0-0000-4000-8000-00000000000b.jsonl"
    ]));
    insta::assert_snapshot!(dump(&[
        "synthetic/rollout-2025-04-20-7c1d2e3f-0000-4000-8000-00000000000a.json"
    ]));
}

#[test]
fn the_trio_links_each_child_to_its_spawn_call_in_any_order() {
    let reversed = [TRIO[2], TRIO[1], TRIO[0]];
    for rels in [&TRIO, &reversed] {
        let session = load(rels);
        assert_eq!(
            session.session_id.as_deref(),
            Some("55fe4488-c6bd-46fa-9390-dab3b8860b95")
        );
        assert_eq!(session.subagents_loaded(), 2);
        for agent in &session.agents {
            let call = agent.tool_use_id.as_deref().expect("tied to its call");
            let record = &session.records[agent.task_record.expect("the call's record")];
            assert!(record.blocks().iter().any(|b| matches!(b,
                sessiongraph::core::formats::claude_code::records::Block::ToolUse(t) if t.id == call && t.name == "spawn_agent")));
            assert_eq!(agent.depth, Some(1));
        }
    }
}

/// GET `/api/search?{query}` once the index has caught up.
async fn search_indexed(server: &TestServer, query: &str) -> Value {
    for _ in 0..3000 {
        let reply = server.get(&format!("/api/search?{query}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{query}: {}", reply.json);
        if reply.json["index"]["pending"] == false {
            return reply.json;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the index never caught up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_uploads_serve_every_view_take_labels_and_are_searchable_by_framework() {
    let server = TestServer::start(Options::default()).await;
    // A raw upload is told Codex by its content.
    let raw = files(&[REAL]).remove(0).1;
    let reply = server
        .upload_raw("filename=codex_session.jsonl", raw.clone())
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
    assert_eq!(reply.json["framework"], "codex");
    let single = graph_id(&reply);
    // Under another framework's name it is refused, saying which it is.
    let wrong = server
        .upload_raw("framework=claudecode&filename=codex_session.jsonl", raw)
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert!(
        wrong.json.to_string().contains("framework=codex"),
        "{}",
        wrong.json
    );

    // A multipart upload of the parent and its children links them.
    let trio = server
        .upload_multipart(&[("framework", "codex")], "files", &files(&TRIO))
        .await;
    assert_eq!(trio.status, StatusCode::OK, "{}", trio.json);
    assert_eq!(trio.json["sub_agents_loaded"], 2, "{}", trio.json);
    let id = graph_id(&trio);

    for view in [
        "",
        "/workflow",
        "/annotations",
        "/dialog",
        "/chatlog",
        "/metrics",
        "/diagnostics",
        "/branches",
    ] {
        for session in [&single, &id] {
            let reply = server.get(&format!("/api/graph/{session}{view}")).await;
            assert_eq!(reply.status, StatusCode::OK, "{view}: {}", reply.json);
        }
    }
    let units = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await
        .json;
    let lanes: std::collections::BTreeSet<&str> = units["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["actor_id"].as_str())
        .collect();
    assert!(
        lanes.iter().filter(|a| a.starts_with("agent-")).count() == 2,
        "{lanes:?}"
    );
    let unit = units["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["unit_type"] == "assistant_turn")
        .expect("an assistant turn");
    let event = unit["event_id"].as_str().unwrap();
    let path = format!("/api/graph/{id}/labels/{event}");
    let set = json!({"annotator": "ann.codex", "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]});
    let written = put(&server, &path, &set, None).await;
    assert!(written.status.is_success(), "{}", written.json);

    let found = search_indexed(&server, "framework=codex&labeled=true").await;
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["results"][0]["event_id"], event);
    assert_eq!(found["results"][0]["framework"], "codex");
    let other = search_indexed(&server, "framework=claudecode&labeled=true").await;
    assert_eq!(other["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_sessions_directory_lists_parents_with_their_spawned_threads() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("codex/xurl")],
        ..Options::default()
    })
    .await;
    let listed = server.get("/api/sessions").await.json;
    let sessions = listed["sessions"].as_array().expect("sessions");
    assert_eq!(
        sessions.len(),
        1,
        "the children are not sessions of their own: {listed}"
    );
    assert_eq!(sessions[0]["framework"], "codex");
    let id = sessions[0]["id"].as_str().unwrap();
    let info = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    assert_eq!(info.status, StatusCode::OK);
    let agents = info.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["actor_id"].as_str().is_some_and(|a| a.starts_with("agent-")))
        .count();
    assert!(agents > 0, "the spawned threads' units are there");
}
