//! Gemini CLI chats (CONTRACT 3.17): snapshots of every view of a real chat of each layout
//! and of the synthetic chats with sub-agents, and an upload of each form that is read
//! through every view, labeled and found by search.

use reqwest::StatusCode;
use serde_json::{json, Value};
use sessiongraph::core::views::{View, ViewOptions};

use crate::helpers::{body, fixture, load_path};
use crate::search::{keys, search_indexed};
use crate::server::{graph_id, Options, TestServer};
use crate::snapshots::{annotations_dump, workflow_dump};

/// One line per graph edge and per chat log message, then the metrics' counts.
fn talk_dump(graph: &Value, chatlog: &Value, metrics: &Value) -> String {
    let mut out = String::new();
    for e in graph["graph"]["edges"].as_array().unwrap() {
        out.push_str(&format!(
            "edge {} -> {} x{}\n",
            e["source"].as_str().unwrap(),
            e["target"].as_str().unwrap(),
            e["weight"]
        ));
    }
    for m in chatlog["messages"].as_array().unwrap() {
        let text = m["content"].as_str().unwrap_or_default().replace('\n', " ");
        out.push_str(&format!(
            "chat {:<16} {:<40} {}\n",
            m["nodeType"].as_str().unwrap_or_default(),
            m["sender"].as_str().unwrap_or_default(),
            text.chars().take(50).collect::<String>()
        ));
    }
    out.push_str(&format!(
        "metrics nodes {} edges {} density {}\n",
        metrics["node_count"], metrics["edge_count"], metrics["density"]
    ));
    out
}

/// Every view of the chat at `fixtures/gemini/<rel>`, sub-agents included.
fn dump(rel: &str) -> String {
    let session = load_path(&fixture(&format!("gemini/{rel}")));
    let all = ViewOptions {
        include_subagents: true,
        ..ViewOptions::default()
    };
    let diagnostics = body(&session, View::Diagnostics, all);
    format!(
        "# workflow\n{}\n# annotations (with sub-agents)\n{}\n# graph, chat log, metrics\n{}\n# diagnostics\n{}\n",
        workflow_dump(&body(&session, View::Workflow, all)),
        annotations_dump(&body(&session, View::Annotations, all)),
        talk_dump(
            &body(&session, View::Graph, all),
            &body(&session, View::Chatlog, all),
            &body(&session, View::Metrics, all)
        ),
        diagnostics["summary"]
    )
}

#[test]
fn real_legacy_chat_dump() {
    insta::assert_snapshot!(dump("real/session-2025-10-27T19-55-981c87cb.json"));
}

#[test]
fn real_jsonl_chat_dump() {
    insta::assert_snapshot!(dump("real/vibecodingtracker_gemini.jsonl"));
}

#[test]
fn synthetic_jsonl_chat_with_a_subagent_dump() {
    insta::assert_snapshot!(dump("synthetic/chats/session-2026-05-02T09-00-5b1c0d2e.jsonl"));
}

#[test]
fn synthetic_legacy_chat_with_a_subagent_dump() {
    insta::assert_snapshot!(dump("synthetic/chats/session-2026-02-20T14-00-7e3f9a10.json"));
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(&format!("gemini/{rel}"))).unwrap()
}

/// Every view of session `id` answers 200.
async fn every_view_answers(server: &TestServer, id: &str) {
    for view in [
        "",
        "/workflow",
        "/annotations?include_sidechains=true",
        "/dialog",
        "/chatlog?include_subagents=true",
        "/metrics",
        "/info",
        "/diagnostics",
    ] {
        let got = server.get(&format!("/api/graph/{id}{view}")).await;
        assert_eq!(got.status, StatusCode::OK, "{view}: {}", got.json);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_uploads_are_read_labeled_and_searched() {
    let server = TestServer::start(Options::default()).await;
    // A legacy chat, raw, its framework told from its content.
    let legacy = server
        .upload_raw(
            "filename=session.json",
            read("real/session-2025-10-27T19-55-981c87cb.json"),
        )
        .await;
    assert_eq!(legacy.status, StatusCode::OK, "{}", legacy.json);
    assert_eq!(legacy.json["framework"], "gemini");
    every_view_answers(&server, &graph_id(&legacy)).await;
    // A JSONL chat, raw, framework named.
    let jsonl = server
        .upload_raw(
            "framework=gemini&filename=session.jsonl",
            read("real/vibecodingtracker_gemini.jsonl"),
        )
        .await;
    assert_eq!(jsonl.status, StatusCode::OK, "{}", jsonl.json);
    every_view_answers(&server, &graph_id(&jsonl)).await;
    // Claude Code's framework is refused for it.
    let wrong = server
        .upload_raw(
            "framework=claudecode&filename=s.jsonl",
            read("real/jsonl_v040.jsonl"),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);

    // Multipart, the sub-agent's chat first: the main chat is the one that is no
    // sub-agent's, and the sub-agent is tied to the delegating call.
    let dir = "synthetic/chats/5b1c0d2e-4f6a-4c1b-9d8e-0a1b2c3d4e5f";
    let files = vec![
        (
            "c0ffee00-1111-4222-8333-944445555666.jsonl".to_owned(),
            read(&format!("{dir}/c0ffee00-1111-4222-8333-944445555666.jsonl")),
        ),
        (
            "session-2026-05-02T09-00-5b1c0d2e.jsonl".to_owned(),
            read("synthetic/chats/session-2026-05-02T09-00-5b1c0d2e.jsonl"),
        ),
    ];
    let up = server
        .upload_multipart(&[("framework", "gemini")], "files", &files)
        .await;
    assert_eq!(up.status, StatusCode::OK, "{}", up.json);
    assert_eq!(up.json["sub_agents_loaded"], 1, "{}", up.json);
    let id = graph_id(&up);
    every_view_answers(&server, &id).await;
    let workflow = server.get(&format!("/api/graph/{id}/workflow")).await;
    let lanes = &workflow.json["workflow"]["lanes"];
    assert_eq!(lanes[1]["toolUseId"], "d1ci0003", "{lanes}");
    assert_eq!(lanes[1]["subagentType"], "codebase_investigator");

    let label = crate::labels::put(
        &server,
        &format!("/api/graph/{id}/labels/A::m11"),
        &json!({"annotator": "a", "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]}),
        None,
    )
    .await;
    assert_eq!(label.status, StatusCode::CREATED, "{}", label.json);
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    let labeled = units.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["event_id"] == "A::m11")
        .unwrap();
    assert_eq!(labeled["labels"][0]["id"], "EXEC_COGNITIVE");
    assert_eq!(labeled["tool_summary"]["tool_calls"][0]["is_error"], true);

    let found = search_indexed(&server, "framework=gemini&failed=true").await;
    let found = keys(&found);
    assert!(found.contains(&(id.clone(), "A::m11".to_owned())), "{found:?}");
    let elsewhere = search_indexed(&server, "framework=claudecode").await;
    assert_eq!(elsewhere.json["total"], 0);
    server.stop().await;
}

/// A response whose call started a sub-agent delegates (the search's `delegation`
/// filter), whatever the agent's tool is called (`codebase_investigator` here): the call's
/// result names the agent, by its `agentId` (JSONL) or by time (the legacy chat).
#[test]
fn a_call_that_starts_a_sub_agent_is_a_delegation() {
    for rel in [
        "synthetic/chats/session-2026-05-02T09-00-5b1c0d2e.jsonl",
        "synthetic/chats/session-2026-02-20T14-00-7e3f9a10.json",
    ] {
        let session = load_path(&fixture(&format!("gemini/{rel}")));
        let body = sessiongraph::core::views::annotations::annotations(
            &session,
            false,
            sessiongraph::core::pipeline::session::Branch::All,
        );
        let delegating: Vec<String> = body
            .annotations
            .iter()
            .filter(|u| u.delegates())
            .map(|u| u.event_id().to_owned())
            .collect();
        let investigating: Vec<String> = body
            .annotations
            .iter()
            .filter(|u| {
                u.tool_calls()
                    .iter()
                    .any(|c| c.tool_name == Some("codebase_investigator"))
            })
            .map(|u| u.event_id().to_owned())
            .collect();
        assert!(!investigating.is_empty(), "{rel}: the chat calls its sub-agent");
        assert_eq!(delegating, investigating, "{rel}");
    }
}
