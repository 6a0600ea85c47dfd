//! The 53 error and edge cases of `tests/reference/errors/`: each request is replayed against
//! a real server and answered with the reference's status and body, except where a CONTRACT
//! section makes us differ (named at each adapted case).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{fixture, read_json, reference, sample_main};
use crate::server::{fixture_files, Options, Reply, TestServer};

/// The reference's status and body for a case.
fn expected(case: &str) -> (StatusCode, Value) {
    let v = read_json(&reference(&format!("errors/{case}.json")));
    (
        StatusCode::from_u16(v["status"].as_u64().unwrap() as u16).unwrap(),
        v["body"].clone(),
    )
}

fn assert_case(case: &str, got: &Reply) {
    let (status, body) = expected(case);
    assert_eq!(got.status, status, "{case}: {}", got.json);
    assert_eq!(got.json, body, "{case}");
    assert_eq!(got.headers["content-type"], "application/json", "{case}");
}

fn assert_adapted(case: &str, got: &Reply, status: StatusCode, body: Value, why: &str) {
    assert_eq!(got.status, status, "{case} ({why}): {}", got.json);
    assert_eq!(got.json, body, "{case} ({why})");
}

async fn with_sample() -> (TestServer, String) {
    let server = TestServer::start(Options::default()).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    (server, id)
}

fn main_file() -> (String, Vec<u8>) {
    (
        "ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl".to_owned(),
        std::fs::read(sample_main()).unwrap(),
    )
}

fn agent_files() -> Vec<(String, Vec<u8>)> {
    fixture_files(&fixture("commugraph-sample"))
        .into_iter()
        .skip(1)
        .collect()
}

const CLAUDE: [(&str, &str); 1] = [("framework", "claudecode")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_errors_are_the_references() {
    let server = TestServer::start(Options::default()).await;
    assert_case(
        "01_upload_no_framework",
        &server.upload_multipart(&[], "file", &[main_file()]).await,
    );
    assert_case(
        "02_upload_no_files",
        &server.upload_multipart(&CLAUDE, "file", &[]).await,
    );
    assert_case(
        "05_upload_only_agent_files",
        &server.upload_multipart(&CLAUDE, "file", &agent_files()).await,
    );
    let upper = ("AGENT-main.jsonl".to_owned(), main_file().1);
    assert_case(
        "06_upload_agent_prefix_is_case_insensitive",
        &server.upload_multipart(&CLAUDE, "file", &[upper]).await,
    );
    // Issue 16, item 7: an empty main file is named and said to be empty; the reference
    // says it found no main file.
    let empty = (
        "11111111-2222-4333-8444-555555555555.jsonl".to_owned(),
        Vec::new(),
    );
    assert_adapted(
        "09_upload_empty_main_file",
        &server.upload_multipart(&CLAUDE, "file", &[empty]).await,
        StatusCode::BAD_REQUEST,
        json!({"error": "Bad Request", "message": "The main session file 11111111-2222-4333-8444-555555555555.jsonl is empty (0 bytes): nothing to load"}),
        "an empty file is named as empty (issue 16)",
    );

    // CONTRACT 2: we list the frameworks we read.
    let unknown = server
        .upload_multipart(&[("framework", "crewai")], "file", &[main_file()])
        .await;
    assert_adapted(
        "12_upload_unknown_framework",
        &unknown,
        StatusCode::BAD_REQUEST,
        json!({"error": "Parse Error", "message": "Unknown framework: crewai. Available: claudecode, pi, autogen, codex, gemini", "details": {}}),
        "the frameworks read here",
    );

    // D-C20: the reference answers 500 "Invalid time value"; a clear 400 here (CONTRACT 3.9).
    for (case, text) in [
        ("10_upload_whitespace_only_main_file", "\n\n  \n".to_owned()),
        (
            "11_upload_no_conversational_records",
            std::fs::read_to_string(fixture(
                "synthetic/only_snapshots/11111111-2222-4333-8444-555555555555.jsonl",
            ))
            .unwrap(),
        ),
    ] {
        let file = (
            "11111111-2222-4333-8444-555555555555.jsonl".to_owned(),
            text.into_bytes(),
        );
        let got = server.upload_multipart(&CLAUDE, "file", &[file]).await;
        assert_adapted(
            case,
            &got,
            StatusCode::BAD_REQUEST,
            json!({"error": "Bad Request", "message": "No conversational records found in 11111111-2222-4333-8444-555555555555.jsonl (it holds only snapshots, summaries or blank lines)"}),
            "CONTRACT 3.9, D-C20",
        );
    }
    assert_eq!(
        server.get("/api/sessions").await.json["sessions"],
        json!([]),
        "nothing half-stored"
    );

    // The `files` field works like `file`; counts are ours (CONTRACT 3.3, 3.4).
    let all = fixture_files(&fixture("commugraph-sample"));
    let via_files = server.upload_multipart(&CLAUDE, "files", &all).await;
    let (status, body) = expected("13_upload_field_name_files_works");
    assert_eq!(via_files.status, status);
    for key in ["node_count", "framework", "sub_agents_loaded"] {
        assert_eq!(via_files.json[key], body[key], "13: {key}");
    }
    // The reference counts no edge for Claude Code; ours are the graph's (CONTRACT 3.13).
    assert_eq!(body["edge_count"], 0);
    let id = via_files.json["graph_id"].as_str().unwrap();
    let graph = server.get(&format!("/api/graph/{id}")).await;
    assert_eq!(
        via_files.json["edge_count"],
        graph.json["graph"]["metadata"]["edge_count"]
    );
    assert_eq!(via_files.json["message_count"], 654);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_limits_are_configurable_and_answer_413_without_reading_the_body() {
    // CONTRACT 3.11: the reference's 30 MB per file and 100 MB in all (cases 03, 04) are
    // fixed; ours is one configurable limit (default 1 GiB). A body over it is 413 Payload
    // Too Large, refused on its declared length before a byte of it is read.
    let limit = 1 << 20;
    let server = TestServer::start(Options {
        max_upload_bytes: limit,
        ..Options::default()
    })
    .await;
    for content_type in ["multipart/form-data; boundary=x", "application/x-ndjson"] {
        let r = server
            .post_head_only("/api/upload?framework=claudecode", content_type, limit + 1)
            .await;
        assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{content_type}");
        assert_eq!(r.json["error"], "Payload Too Large", "{content_type}");
    }
    // At the limit, the body is read (and here refused for holding no conversation).
    let at_limit = server.upload_raw("framework=claudecode", vec![b' '; limit]).await;
    assert_eq!(at_limit.status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_lines_are_diagnostics_unless_strict() {
    // CONTRACT 3.9: a bad line is recorded and the rest loads; with strict=true it is the
    // reference's 400 Parse Error, naming the file too.
    let server = TestServer::start(Options::default()).await;
    let (name, bytes) = main_file();
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    lines.insert(2, b"{not json");
    let broken = (name.clone(), lines.join(&b'\n'));
    let lenient = server
        .upload_multipart(&CLAUDE, "file", std::slice::from_ref(&broken))
        .await;
    assert_eq!(lenient.status, StatusCode::OK);
    assert_eq!(lenient.json["diagnostics"]["bad_lines"], 1);
    let strict = server
        .upload_multipart(
            &[("framework", "claudecode"), ("strict", "true")],
            "file",
            &[broken],
        )
        .await;
    let (status, body) = expected("07_upload_invalid_json_main_line3");
    assert_eq!(strict.status, status);
    assert_eq!(strict.json["error"], body["error"]);
    assert_eq!(
        strict.json["details"]["lineNumber"],
        body["details"]["lineNumber"]
    );
    assert_eq!(
        strict.json["message"],
        format!("Invalid JSON in {name} on line 3")
    );

    let agent = fixture_files(&fixture("commugraph-sample"))
        .into_iter()
        .find(|(n, _)| n == "agent-6f2b8f7b.jsonl")
        .unwrap();
    let mut agent_lines: Vec<Vec<u8>> = agent.1.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    agent_lines[4] = b"{\"truncated\": ".to_vec();
    let broken_agent = (agent.0.clone(), agent_lines.join(&b'\n'));
    let strict = server
        .upload_multipart(
            &[("framework", "claudecode"), ("strict", "true")],
            "file",
            &[main_file(), broken_agent],
        )
        .await;
    let (status, body) = expected("08_upload_invalid_json_in_agent_file_line5");
    assert_eq!(strict.status, status);
    assert_eq!(
        strict.json["details"]["lineNumber"],
        body["details"]["lineNumber"]
    );
    assert_eq!(strict.json["details"]["file"], "agent-6f2b8f7b.jsonl");
}

/// Issue 16, item 8: the reference stores `ClaudeCode` as sent, parses the first file alone
/// (cases 14-16) and then refuses the session's workflow and annotations. Framework names
/// are case-insensitive here and stored normalised: the same upload as `claudecode`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_name_in_another_case_is_the_same_framework() {
    let server = TestServer::start(Options::default()).await;
    let all = fixture_files(&fixture("commugraph-sample"));
    let lower = server.upload_multipart(&CLAUDE, "file", &all).await;
    for name in ["ClaudeCode", "CLAUDECODE"] {
        let up = server
            .upload_multipart(&[("framework", name)], "file", &all)
            .await;
        assert_eq!(up.status, StatusCode::OK, "{name}");
        assert_eq!(up.json["framework"], "claudecode", "{name}: stored normalised");
        assert_eq!(
            up.json["graph_id"], lower.json["graph_id"],
            "{name}: the same upload"
        );
        assert_eq!(up.json["sub_agents_loaded"], 4, "{name}: every file read");
        let id = up.json["graph_id"].as_str().unwrap();
        for view in ["workflow", "annotations", "chatlog"] {
            let got = server.get(&format!("/api/graph/{id}/{view}")).await;
            assert_eq!(got.status, StatusCode::OK, "{name}: {view}");
        }
    }
    let raw = server
        .upload_raw(
            "framework=Pi&filename=s.jsonl",
            std::fs::read(fixture("pi/before-compaction.jsonl")).unwrap(),
        )
        .await;
    assert_eq!(raw.json["framework"], "pi");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autogen_log_without_messages_gets_the_references_error() {
    // Reference case 17 uploads an AutoGen log; `{}` holds no message.
    let server = TestServer::start(Options::default()).await;
    let got = server
        .upload_multipart(
            &[("framework", "autogen")],
            "file",
            &[("mock_chat_history.jsonl".to_owned(), b"{}".to_vec())],
        )
        .await;
    assert_eq!(got.status, StatusCode::BAD_REQUEST);
    assert_eq!(got.json["error"], "Parse Error");
    assert_eq!(got.json["message"], "No valid messages found in log");
    let unknown = server
        .upload_multipart(
            &[("framework", "crewai")],
            "file",
            &[("x.jsonl".to_owned(), b"{}".to_vec())],
        )
        .await;
    assert!(
        unknown.json["message"]
            .as_str()
            .unwrap()
            .ends_with("claudecode, pi, autogen, codex, gemini"),
        "the same set as /api/frameworks: {}",
        unknown.json
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_are_404_with_the_references_messages() {
    let server = TestServer::start(Options::default()).await;
    assert_case("27_sessions_empty", &server.get("/api/sessions").await);
    for (case, path) in [
        ("20_graph_unknown_id", "/api/graph/nosuchid"),
        (
            "21_graph_unknown_id_with_bad_step",
            "/api/graph/nosuchid?step=abc",
        ),
        ("22_workflow_unknown_id", "/api/graph/nosuchid/workflow"),
        ("23_annotations_unknown_id", "/api/graph/nosuchid/annotations"),
        ("24_metrics_unknown_id", "/api/graph/nosuchid/metrics"),
        ("25_info_unknown_id", "/api/graph/nosuchid/info"),
    ] {
        assert_case(case, &server.get(path).await);
    }
    assert_case(
        "26_delete_unknown_id",
        &server.delete("/api/session/nosuchid").await,
    );
    // CONTRACT 2: the frameworks we read.
    let frameworks = server.get("/api/frameworks").await;
    assert_adapted(
        "28_frameworks",
        &frameworks,
        StatusCode::OK,
        json!({"frameworks": ["claudecode", "pi", "autogen", "codex", "gemini"]}),
        "CONTRACT 2",
    );
}

/// The message of a refused step.
fn invalid_step(value: &str) -> String {
    format!(
        "Invalid step parameter: expected a whole number from 0 to 9007199254740991, in digits only; got '{value}'"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_parameters_are_parsed_strictly() {
    let (server, id) = with_sample().await;
    // The reference refuses these too (29-34) with "Invalid step parameter"; ours goes on to
    // say what is expected. The reference's parseInt reads the others (35-46: `5abc` as 5,
    // `1e3` as 1, `0x10` as 0, `3.9` as 3, `-0` as 0, ` 7` as 7): refused here (issue 15,
    // docs/differences.md).
    for (case, query, value) in [
        ("29_workflow_step_abc", "workflow?step=abc", "abc"),
        ("30_graph_step_abc", "?step=abc", "abc"),
        ("31_workflow_step__1", "workflow?step=-1", "-1"),
        ("32_graph_step__1", "?step=-1", "-1"),
        ("33_workflow_step_empty", "workflow?step=", ""),
        ("34_graph_step_empty", "?step=", ""),
        ("35_workflow_step_5abc", "workflow?step=5abc", "5abc"),
        ("36_graph_step_5abc", "?step=5abc", "5abc"),
        ("37_workflow_step_1e3", "workflow?step=1e3", "1e3"),
        ("38_graph_step_1e3", "?step=1e3", "1e3"),
        ("39_workflow_step_0x10", "workflow?step=0x10", "0x10"),
        ("40_graph_step_0x10", "?step=0x10", "0x10"),
        ("41_workflow_step_3.9", "workflow?step=3.9", "3.9"),
        ("42_graph_step_3.9", "?step=3.9", "3.9"),
        ("43_workflow_step__0", "workflow?step=-0", "-0"),
        ("44_graph_step__0", "?step=-0", "-0"),
        ("45_workflow_step__7", "workflow?step=%207", " 7"),
        ("46_graph_step__7", "?step=%207", " 7"),
    ] {
        let url = if let Some(q) = query.strip_prefix('?') {
            format!("/api/graph/{id}?{q}")
        } else {
            format!("/api/graph/{id}/{query}")
        };
        let got = server.get(&url).await;
        let (status, body) = expected(case);
        if status == StatusCode::BAD_REQUEST {
            let reference = body["message"].as_str().unwrap();
            assert!(
                got.json["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(reference)),
                "{case}: {}",
                got.json
            );
        }
        assert_adapted(
            case,
            &got,
            StatusCode::BAD_REQUEST,
            json!({"error": "Bad Request", "message": invalid_step(value)}),
            "strict steps, issue 15",
        );
    }
    let total_nodes =
        server.get(&format!("/api/graph/{id}/workflow")).await.json["workflow"]["totalSteps"].clone();
    assert_eq!(total_nodes, 654, "CONTRACT 3.3, 3.4: our node count");
    for (case, query) in [
        ("47_workflow_step_0", "step=0"),
        ("49_workflow_step_99999", "step=99999"),
        ("51_workflow_step_repeated_5_then_abc", "step=5&step=abc"),
    ] {
        let (status, want) = expected(case);
        let got = server.get(&format!("/api/graph/{id}/workflow?{query}")).await;
        assert_eq!(got.status, status, "{case}");
        let w = &got.json["workflow"];
        assert_eq!(w["currentStep"], want["currentStep"], "{case}");
        assert_eq!(w["totalSteps"], total_nodes, "{case}");
        let step = want["currentStep"].as_u64().unwrap();
        let nodes = w["nodes"].as_array().unwrap();
        assert_eq!(nodes.len() as u64, (step + 1).min(654), "{case}");
        if step < 648 {
            assert_eq!(want["nodes"].as_u64().unwrap(), nodes.len() as u64, "{case}");
        }
        // The lanes holding a kept node (which lanes those are follows the order, 3.1:
        // sub-agent turns come right after their Task call here).
        let lanes: Vec<&str> = w["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap())
            .collect();
        let mut used: Vec<&str> = nodes.iter().map(|n| n["laneId"].as_str().unwrap()).collect();
        used.sort_unstable();
        used.dedup();
        let mut listed = lanes.clone();
        listed.sort_unstable();
        assert_eq!(listed, used, "{case}");
    }
    // CommuGraph's body: `edges=none` (ours has edges, CONTRACT 3.13).
    for (case, query) in [
        ("48_graph_step_0", "step=0&edges=none"),
        ("50_graph_step_99999", "step=99999&edges=none"),
    ] {
        let (status, want) = expected(case);
        let got = server.get(&format!("/api/graph/{id}?{query}")).await;
        assert_eq!(got.status, status, "{case}");
        let g = &got.json["graph"];
        assert_eq!(g["current_step"], want["current_step"], "{case}");
        assert_eq!(
            g["nodes"],
            json!([]),
            "{case}: every Claude Code sender is isolated"
        );
        assert_eq!(g["edges"], json!([]), "{case}");
        assert_eq!(g["total_steps"], 653, "{case}: CONTRACT 3.3, 3.4");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_then_the_session_is_gone() {
    let (server, id) = with_sample().await;
    let deleted = server.delete(&format!("/api/session/{id}")).await;
    let (status, body) = expected("52_delete_ok");
    assert_eq!(deleted.status, status);
    assert_eq!(
        deleted.json["message"],
        body["message"].as_str().unwrap().replace("<graph_id>", &id)
    );
    let after = server.get(&format!("/api/graph/{id}/workflow")).await;
    let (status, body) = expected("53_workflow_after_delete");
    assert_eq!(after.status, status);
    assert_eq!(
        after.json["message"],
        body["message"].as_str().unwrap().replace("<graph_id>", &id)
    );
}
