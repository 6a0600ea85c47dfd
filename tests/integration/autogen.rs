//! AutoGen sessions over HTTP, against CommuGraph's bodies for its sample
//! (`tests/reference/autogen/`).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{read_json, reference};
use crate::server::{Options, TestServer};

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
        json!(["claudecode", "pi", "autogen"])
    );

    let files = vec![("mock_chat_history.jsonl".to_owned(), sample())];
    let up = server
        .upload_multipart(&[("framework", "AutoGen")], "file", &files)
        .await;
    assert_eq!(up.status, StatusCode::OK, "{}", up.json);
    let id = up.json["graph_id"].as_str().unwrap().to_owned();
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
