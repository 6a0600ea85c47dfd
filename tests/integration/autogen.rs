//! AutoGen sessions over HTTP, against CommuGraph's bodies for its sample
//! (`tests/reference/autogen/`).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::autogen_frameworks::edges as edges_of;
use crate::autogen_frameworks::{
    Edge, AG2_GROUP_CHAT, AG2_TOOLS, ROUND_ROBIN_TERMINATION, ROUND_ROBIN_USER_PROXY, SELECTOR_PLANNER,
    SWARM_HANDOFFS, TOOL_ERROR_PARALLEL,
};
use crate::helpers::{read_json, reference};
use crate::server::{graph_id, Options, TestServer};

fn sample() -> Vec<u8> {
    std::fs::read(reference("autogen/mock_chat_history.jsonl")).unwrap()
}

fn expected(name: &str) -> Value {
    read_json(&reference("autogen").join(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autogen_sample_is_served_as_commugraph_serves_it() {
    let server = TestServer::start(Options::default()).await;
    let frameworks = server.get("/api/frameworks").await;
    assert_eq!(
        frameworks.json["frameworks"],
        json!(["claudecode", "pi", "autogen", "codex", "gemini"])
    );

    let files = vec![("mock_chat_history.jsonl".to_owned(), sample())];
    let up = server
        .upload_multipart(&[("framework", "AutoGen")], "file", &files)
        .await;
    let id = graph_id(&up);
    for (key, value) in expected("upload.json").as_object().unwrap() {
        assert_eq!(&up.json[key], value, "upload {key}");
    }
    for (path, file) in [
        (format!("/api/graph/{id}"), "graph.json"),
        (format!("/api/graph/{id}?step=10"), "graph_step_10.json"),
        (format!("/api/graph/{id}?step=0"), "graph_step_0.json"),
        (format!("/api/graph/{id}/metrics"), "metrics.json"),
    ] {
        let got = server.get(&path).await;
        assert_eq!(got.status, StatusCode::OK, "{path}");
        assert_eq!(got.json, expected(file), "{path}");
    }
    // The chat log CommuGraph's interface builds from the edges, in our chat log's body.
    let chatlog = server.get(&format!("/api/graph/{id}/chatlog")).await;
    assert_eq!(chatlog.json["messages"], expected("chatlog.json"));
    assert_eq!(chatlog.json["total"], 34);
    let workflow = server.get(&format!("/api/graph/{id}/workflow")).await;
    assert_eq!(workflow.status, StatusCode::BAD_REQUEST);
    assert_eq!(workflow.json, expected("workflow.json"));
    // Past CommuGraph (whose annotations answer 400): one unit per message, labelable.
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(units.status, StatusCode::OK, "{}", units.json);
    assert_eq!(units.json["total"], 34);
    let third = &units.json["annotations"][3];
    assert_eq!(third["event_id"], "M:3");
    assert_eq!(third["actor_id"], "Coder");
    assert_eq!(third["receiver"], "Manager");
    assert_eq!(
        units.json["annotations"][0]["unit_type"], "user_turn",
        "User speaks first"
    );
    let quote: String = third["text_or_artifact_ref"]["text"]
        .as_str()
        .unwrap()
        .chars()
        .take(12)
        .collect();
    let put = crate::labels::put(
        &server,
        &format!("/api/graph/{id}/labels/M:3"),
        &json!({"annotator": "a", "status": "submitted",
                "labels": [{"id": "TASK_SUBTASK_DELEGATION", "evidence": {"quote": quote}}]}),
        None,
    )
    .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.json);
    let labeled = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(
        labeled.json["annotations"][3]["labels"][0]["id"],
        "TASK_SUBTASK_DELEGATION"
    );
    let info = server.get(&format!("/api/graph/{id}/info")).await;
    for key in ["framework", "message_count", "node_count", "edge_count"] {
        assert_eq!(info.json[key], expected("info.json")[key], "info {key}");
    }
    // A raw upload without a framework is told from its content.
    let raw = server.upload_raw("filename=chat.jsonl", sample()).await;
    assert_eq!(raw.status, StatusCode::OK, "{}", raw.json);
    assert_eq!(raw.json["framework"], "autogen");
    let array: Vec<Value> = String::from_utf8(sample())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let as_array = server
        .upload_raw("filename=chat.json", serde_json::to_vec(&array).unwrap())
        .await;
    assert_eq!(as_array.json["edge_count"], 8, "{}", as_array.json);
    let deleted = server.delete(&format!("/api/session/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_autogen_logs_get_commugraphs_errors() {
    let server = TestServer::start(Options::default()).await;
    for (body, message, line) in [
        (
            "{\"sender\": \"a\", \"message\": \"hi\"}\n{oops\n",
            "Invalid JSON on line 2",
            json!(2),
        ),
        (
            "{\"sender\": \"a\"}\n{\"sender\": \"b\", \"message\": \"  \"}\n",
            "No valid messages found in log",
            Value::Null,
        ),
    ] {
        let got = server
            .upload_raw("framework=autogen&filename=log.jsonl", body.as_bytes().to_vec())
            .await;
        assert_eq!(got.status, StatusCode::BAD_REQUEST, "{}", got.json);
        assert_eq!(got.json["error"], "Parse Error");
        assert_eq!(got.json["message"], message);
        assert_eq!(got.json["details"]["lineNumber"], line);
    }
    server.stop().await;
}

/// A real AutoGen dump kept under `fixtures/autogen/` (see the README beside each).
struct Dump {
    path: &'static str,
    /// Every node the graph has.
    nodes: &'static [&'static str],
    /// (source, target, weight) of every edge.
    edges: &'static [(&'static str, &'static str, u64)],
}

/// The Swarm of AgentChat's notebook: each analyst answers the planner, who handed it
/// control, and the planner's TERMINATE the user (before issue 33: the writer).
pub(crate) const SWARM_NOTEBOOK: &[Edge] = &[
    ("user", "planner", 1),
    ("planner", "tools", 3),
    ("planner", "financial_analyst", 1),
    ("planner", "news_analyst", 1),
    ("planner", "writer", 1),
    ("planner", "user", 1),
    ("tools", "planner", 3),
    ("tools", "financial_analyst", 2),
    ("tools", "news_analyst", 2),
    ("tools", "writer", 1),
    ("financial_analyst", "tools", 2),
    ("financial_analyst", "planner", 2),
    ("news_analyst", "tools", 2),
    ("news_analyst", "planner", 3),
    ("writer", "tools", 1),
    ("writer", "planner", 1),
];

/// The SelectorGroupChat of AgentChat's notebook: its thought addresses nobody and the
/// planner's last answer goes to the user (before issue 33: `WebSearchAgent ->
/// DataAnalystAgent` 4, and `PlanningAgent -> DataAnalystAgent`).
pub(crate) const SELECTOR_NOTEBOOK: &[Edge] = &[
    ("user", "PlanningAgent", 1),
    ("PlanningAgent", "WebSearchAgent", 1),
    ("PlanningAgent", "user", 1),
    ("WebSearchAgent", "tools", 3),
    ("WebSearchAgent", "DataAnalystAgent", 3),
    ("tools", "WebSearchAgent", 3),
    ("tools", "DataAnalystAgent", 1),
    ("DataAnalystAgent", "tools", 1),
    ("DataAnalystAgent", "PlanningAgent", 1),
];

const AG2_GROUP_CHAT_NODES: &[&str] = &["admin", "planner", "coder", "critic"];

const AG2_TOOLS_NODES: &[&str] = &["user_proxy", "weather_agent"];

const DUMPS: [Dump; 15] = [
    Dump {
        path: "autogen/agentchat/swarm_task_result.json",
        nodes: &[
            "user",
            "planner",
            "tools",
            "financial_analyst",
            "news_analyst",
            "writer",
        ],
        edges: SWARM_NOTEBOOK,
    },
    Dump {
        path: "autogen/agentchat/selector_messages.json",
        nodes: &[
            "user",
            "PlanningAgent",
            "WebSearchAgent",
            "tools",
            "DataAnalystAgent",
        ],
        edges: SELECTOR_NOTEBOOK,
    },
    Dump {
        path: "autogen/chat_messages/groupchat_chat_result.json",
        nodes: &["assistant", "Planner", "Engineer", "Executor", "Scientist"],
        edges: &[
            ("assistant", "Planner", 1),
            ("assistant", "Engineer", 1),
            ("assistant", "Scientist", 1),
            ("Planner", "assistant", 1),
            ("Engineer", "Executor", 1),
            ("Executor", "Scientist", 1),
            ("Scientist", "assistant", 1),
        ],
    },
    Dump {
        path: "autogen/chat_messages/fsm_chat_messages.json",
        nodes: &["assistant", "A1", "A2", "B0", "B1", "B2", "C0", "C1", "C2"],
        // C2's TERMINATE answers the task giver (before issue 33: C1).
        edges: &[
            ("assistant", "A1", 1),
            ("assistant", "B0", 1),
            ("A1", "A2", 1),
            ("A2", "assistant", 1),
            ("B0", "B1", 1),
            ("B0", "C0", 1),
            ("B1", "B2", 1),
            ("B2", "B0", 1),
            ("C0", "C1", 1),
            ("C1", "C2", 1),
            ("C2", "assistant", 1),
        ],
    },
    Dump {
        path: "autogen/agentchat/selector_planner.json",
        nodes: &["user", "planner", "web_search", "tools", "data_analyst"],
        edges: SELECTOR_PLANNER,
    },
    Dump {
        path: "autogen/agentchat/swarm_handoffs.json",
        nodes: &["user", "planner", "tools", "analyst", "writer"],
        edges: SWARM_HANDOFFS,
    },
    Dump {
        path: "autogen/agentchat/round_robin_termination.json",
        nodes: &["user", "writer", "critic"],
        edges: ROUND_ROBIN_TERMINATION,
    },
    Dump {
        path: "autogen/agentchat/round_robin_user_proxy.json",
        nodes: &["user", "assistant", "user_proxy"],
        edges: ROUND_ROBIN_USER_PROXY,
    },
    Dump {
        path: "autogen/agentchat/tool_error_parallel.json",
        nodes: &["user", "assistant", "tools"],
        edges: TOOL_ERROR_PARALLEL,
    },
    Dump {
        path: "autogen/ag2/groupchat_manager_chat_messages.json",
        nodes: AG2_GROUP_CHAT_NODES,
        edges: AG2_GROUP_CHAT,
    },
    Dump {
        path: "autogen/ag2/groupchat_messages.json",
        nodes: AG2_GROUP_CHAT_NODES,
        edges: AG2_GROUP_CHAT,
    },
    Dump {
        path: "autogen/ag2/groupchat_result.json",
        nodes: AG2_GROUP_CHAT_NODES,
        edges: AG2_GROUP_CHAT,
    },
    Dump {
        path: "autogen/ag2/tools_chat_result.json",
        nodes: AG2_TOOLS_NODES,
        edges: AG2_TOOLS,
    },
    Dump {
        path: "autogen/ag2/tools_user_proxy_chat_messages.json",
        nodes: AG2_TOOLS_NODES,
        edges: AG2_TOOLS,
    },
    Dump {
        path: "autogen/ag2/tools_weather_agent_chat_messages.json",
        nodes: AG2_TOOLS_NODES,
        edges: AG2_TOOLS,
    },
];

fn dump_bytes(dump: &Dump) -> Vec<u8> {
    std::fs::read(crate::helpers::fixture(dump.path)).unwrap()
}

fn node_ids(graph: &Value) -> Vec<String> {
    graph["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Checks one uploaded dump's graph, steps, metrics, chat log and units.
async fn check_dump(server: &TestServer, id: &str, dump: &Dump) {
    let graph = server.get(&format!("/api/graph/{id}")).await;
    assert_eq!(graph.status, StatusCode::OK, "{}", graph.json);
    let nodes = node_ids(&graph.json);
    let edges = edges_of(&graph.json);
    eprintln!("{}: nodes {nodes:?}\n edges {edges:?}", dump.path);
    assert_eq!(nodes, dump.nodes, "{}", dump.path);
    let expected: Vec<(String, String, u64)> = dump
        .edges
        .iter()
        .map(|(s, t, w)| ((*s).to_owned(), (*t).to_owned(), *w))
        .collect();
    assert_eq!(edges, expected, "{}", dump.path);
    for (s, t, _) in &edges {
        assert!(
            nodes.contains(s) && nodes.contains(t),
            "edge {s} -> {t} to a missing node"
        );
        assert_ne!(s, t, "no edge from a party to itself");
    }
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(units.status, StatusCode::OK, "{}", units.json);
    let units = units.json["annotations"].as_array().unwrap().clone();
    let addressed = units.iter().filter(|u| u["receiver"].is_string()).count() as u64;
    let total: u64 = edges.iter().map(|(_, _, w)| w).sum();
    // A message carrying several tool calls (or results) is an interaction per call.
    let received: u64 = graph.json["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["messages_received"].as_u64().unwrap())
        .sum();
    assert_eq!(total, received, "edge weights sum to the interactions received");
    assert!(
        total >= addressed,
        "each addressed message is an interaction at least"
    );
    for u in &units {
        let event = u["event_id"].as_str().unwrap();
        assert!(event.starts_with("M:"), "{event}");
        assert!(u["actor_id"].is_string() && u["intent"].is_string(), "{u}");
    }
    let metrics = server.get(&format!("/api/graph/{id}/metrics")).await;
    assert_eq!(metrics.json["node_count"], nodes.len(), "{}", metrics.json);
    assert!(
        metrics.json["density"].as_f64().unwrap() > 0.0,
        "{}",
        metrics.json
    );
    let chatlog = server.get(&format!("/api/graph/{id}/chatlog")).await;
    assert_eq!(chatlog.json["total"], addressed, "{}", chatlog.json);
    let total_steps = graph.json["graph"]["total_steps"].as_u64().unwrap();
    let mut last = 0;
    for step in 0..=total_steps {
        let cut = server.get(&format!("/api/graph/{id}?step={step}")).await;
        let sum: u64 = edges_of(&cut.json).iter().map(|(_, _, w)| w).sum();
        assert!(sum >= last, "?step={step} is monotone");
        last = sum;
    }
    assert_eq!(last, total, "the last step shows the whole graph");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_autogen_dumps_are_read_with_derived_receivers() {
    let server = TestServer::start(Options::default()).await;
    for dump in &DUMPS {
        let name = dump.path.rsplit('/').next().unwrap().to_owned();
        let files = vec![(name.clone(), dump_bytes(dump))];
        let up = server
            .upload_multipart(&[("framework", "autogen")], "file", &files)
            .await;
        let id = graph_id(&up);
        assert_eq!(up.json["framework"], "autogen", "{}", dump.path);
        check_dump(&server, &id, dump).await;
        let raw = server
            .upload_raw(&format!("filename={name}"), dump_bytes(dump))
            .await;
        assert_eq!(raw.status, StatusCode::OK, "{}: {}", dump.path, raw.json);
        assert_eq!(raw.json["framework"], "autogen", "told from its content");
        assert_eq!(raw.json["edge_count"], up.json["edge_count"]);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentchat_units_carry_the_derived_receiver_and_intent() {
    let server = TestServer::start(Options::default()).await;
    let files = vec![("swarm_task_result.json".to_owned(), dump_bytes(&DUMPS[0]))];
    let up = server
        .upload_multipart(&[("framework", "AutoGen")], "file", &files)
        .await;
    let id = graph_id(&up);
    assert_eq!(up.json["message_count"], 27, "{}", up.json);
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    let unit = |event: &str| {
        units.json["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["event_id"] == event)
            .unwrap_or_else(|| panic!("{event}"))
            .clone()
    };
    let expect = [
        ("M:0", "user", "planner", "user_turn"),
        ("M:1", "planner", "tools", "coordination"),
        ("M:2", "tools", "planner", "information_response"),
        ("M:3", "planner", "financial_analyst", "delegation"),
        // The final answer (TERMINATE) goes to the task giver (issue 33).
        ("M:26", "planner", "user", "information_response"),
    ];
    for (event, actor, receiver, kind) in expect {
        let u = unit(event);
        assert_eq!(u["actor_id"], actor, "{event}: {u}");
        assert_eq!(u["receiver"], receiver, "{event}: {u}");
        if kind == "user_turn" {
            assert_eq!(u["unit_type"], "user_turn", "{event}: {u}");
        } else {
            assert_eq!(u["intent"], kind, "{event}: {u}");
        }
    }
    let chatlog = server.get(&format!("/api/graph/{id}/chatlog")).await;
    let first = &chatlog.json["messages"][1];
    assert_eq!(first["displayStepLabel"], "#1");
    assert_eq!(first["content"], "transfer_to_financial_analyst({})");
    let small = server.get(&format!("/api/graph/{id}?step=3")).await;
    insta::assert_json_snapshot!("agentchat_swarm_step_3", small.json);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_agentchat_dumps_get_commugraphs_errors() {
    let server = TestServer::start(Options::default()).await;
    for (body, message) in [
        ("{\"messages\": []}", "No valid messages found in log"),
        (
            "{\"messages\": [{\"source\": \"a\", \"type\": \"TextMessage\", \"content\": \" \"}]}",
            "No valid messages found in log",
        ),
        ("{\n  \"messages\": [\n", "Invalid JSON on line 1"),
        ("{\"messages\": [null]}", "Failed to parse AutoGen log"),
        (
            "{\"chat_manager\": [{\"role\": \"user\", \"content\": \"\"}]}",
            "No valid messages found in log",
        ),
    ] {
        let got = server
            .upload_raw("framework=autogen&filename=dump.json", body.as_bytes().to_vec())
            .await;
        assert_eq!(got.status, StatusCode::BAD_REQUEST, "{body}: {}", got.json);
        assert_eq!(got.json["error"], "Parse Error", "{body}");
        assert_eq!(got.json["message"], message, "{body}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_json_dumps_in_a_sessions_directory_are_served() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("autogen")],
        ..Options::default()
    })
    .await;
    let list = server.get("/api/sessions").await;
    let mut ids: Vec<String> = list.json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut expected: Vec<&str> = DUMPS
        .iter()
        .map(|d| d.path.rsplit('/').next().unwrap().trim_end_matches(".json"))
        .collect();
    expected.sort();
    assert_eq!(
        ids, expected,
        "the READMEs and the generators are not sessions: {}",
        list.json
    );
    for dump in &DUMPS {
        let stem = dump.path.rsplit('/').next().unwrap().trim_end_matches(".json");
        let info = server.get(&format!("/api/graph/{stem}/info")).await;
        assert_eq!(info.status, StatusCode::OK, "{stem}: {}", info.json);
        assert_eq!(info.json["framework"], "autogen", "{stem}");
        assert_eq!(info.json["edge_count"], dump.edges.len(), "{stem}");
    }
    server.stop().await;
}

/// Item 13 of the labeling team's report: `/diagnostics` of the 34-message sample said
/// `records.read: 0`, and AutoGen units lacked the `session_id` Claude Code units carry.
/// An AutoGen session's id is its log's name without the extension: the id a sessions
/// directory serves it under.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item13_autogen_diagnostics_count_the_messages_and_units_carry_the_session_id() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("autogen/agentchat")],
        ..Options::default()
    })
    .await;
    let files = vec![("mock_chat_history.jsonl".to_owned(), sample())];
    let up = server
        .upload_multipart(&[("framework", "autogen")], "file", &files)
        .await;
    let id = graph_id(&up);
    let diagnostics = server.get(&format!("/api/graph/{id}/diagnostics")).await;
    assert_eq!(diagnostics.status, StatusCode::OK);
    assert_eq!(diagnostics.json["session_id"], "mock_chat_history");
    for count in ["read", "kept", "items"] {
        assert_eq!(
            diagnostics.json["records"][count], 34,
            "{count}: {}",
            diagnostics.json
        );
    }
    assert_eq!(diagnostics.json["files"][0]["lines"], 34);
    assert_eq!(diagnostics.json["files"][0]["records"], 34);
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    let units = units.json["annotations"].as_array().unwrap().clone();
    assert_eq!(units.len(), 34);
    assert!(units.iter().all(|u| u["session_id"] == "mock_chat_history"));

    let on_disk = server.get("/api/graph/swarm_handoffs/annotations").await;
    assert_eq!(on_disk.status, StatusCode::OK, "{}", on_disk.json);
    let first = &on_disk.json["annotations"][0];
    assert_eq!(first["session_id"], "swarm_handoffs", "the id it is served under");
    assert_eq!(
        first.as_object().unwrap().keys().next().map(String::as_str),
        Some("session_id"),
        "first, as in a Claude Code unit"
    );
    server.stop().await;
}
