//! The HTTP API end to end: a real server on port 0, driven with reqwest.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::Value;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionInput, SourceFile};

use crate::helpers::records::Record;
use crate::helpers::{fixture, sample_main};
use crate::server::{fixture_files, graph_id, Options, TestServer};

fn session_of(files: &[(String, Vec<u8>)]) -> Session {
    let input = SessionInput::new(
        files
            .iter()
            .map(|(n, b)| SourceFile::new(n.clone(), b.clone()))
            .collect(),
    );
    Session::build(&input, LoadOptions::default()).unwrap()
}

/// Every view route with the options it takes, and the core options they mean.
fn view_routes() -> Vec<(&'static str, View, ViewOptions)> {
    let all = ViewOptions::default();
    let sub = ViewOptions {
        include_subagents: true,
        ..all
    };
    let step = ViewOptions {
        step: Some(50),
        ..all
    };
    vec![
        ("annotations", View::Annotations, all),
        ("annotations?include_sidechains=true", View::Annotations, sub),
        ("workflow", View::Workflow, all),
        ("workflow?step=50", View::Workflow, step),
        ("chatlog", View::Chatlog, all),
        ("chatlog?include_subagents=true", View::Chatlog, sub),
        ("metrics", View::Metrics, all),
        ("diagnostics", View::Diagnostics, all),
        ("", View::Graph, all),
        ("?step=50", View::Graph, step),
    ]
}

fn view_path(id: &str, route: &str) -> String {
    match route {
        "" => format!("/api/graph/{id}"),
        r if r.starts_with('?') => format!("/api/graph/{id}{r}"),
        r => format!("/api/graph/{id}/{r}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multipart_upload_serves_every_view_exactly_as_the_core_renders_it() {
    let server = TestServer::start(Options::default()).await;
    let up = server
        .upload_fixture_reply("claudecode", "commugraph-sample")
        .await;
    let id = graph_id(&up);
    let keys: Vec<&String> = up.json.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "graph_id",
            "message_count",
            "node_count",
            "edge_count",
            "total_steps",
            "main_agent_steps",
            "framework",
            "sub_agents_loaded",
            "annotation_count",
            "diagnostics"
        ]
    );
    assert_eq!(up.json["sub_agents_loaded"], 4);
    assert_eq!(up.json["node_count"], 7);

    let session = session_of(&fixture_files(&fixture("commugraph-sample")));
    for (route, view, options) in view_routes() {
        let r = server.get(&view_path(&id, route)).await;
        assert_eq!(r.status, StatusCode::OK, "{route}: {}", r.json);
        assert_eq!(r.headers["content-type"], "application/json", "{route}");
        assert!(
            r.bytes == views::render(&session, view, options).to_bytes(),
            "{route}: body differs from the core's"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_annotations_over_http_are_exactly_what_export_prints() {
    let server = TestServer::start(Options::default()).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let http = server.get(&format!("/api/graph/{id}/annotations")).await;
    let export = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["export", "--view", "annotations"])
        .arg(sample_main())
        .output()
        .unwrap();
    assert!(export.status.success());
    let mut expected = http.bytes.clone();
    expected.push(b'\n');
    assert!(export.stdout == expected, "HTTP and export differ");
    assert_eq!(http.json["total"], 105);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_upload_works_and_the_same_content_keeps_its_id() {
    let server = TestServer::start(Options::default()).await;
    let main = std::fs::read(sample_main()).unwrap();
    let query = "framework=claudecode&filename=ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl";
    let first = server.upload_raw(query, main.clone()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.json);
    assert_eq!(
        first.json["sub_agents_missing"],
        serde_json::json!(["80f146b4", "773d7508", "9507cef4", "6f2b8f7b"])
    );
    let second = server.upload_raw(query, main).await;
    assert_eq!(first.json, second.json, "same content, same id and counts");
    let list = server.get("/api/sessions").await;
    assert_eq!(list.json["sessions"].as_array().unwrap().len(), 1);
    let stored = std::fs::read_dir(server.data_dir.join("uploads"))
        .unwrap()
        .count();
    assert_eq!(stored, 1, "stored once");
    assert_eq!(server.state.store.parses(), 1, "parsed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_info_and_delete() {
    let server = TestServer::start(Options::default()).await;
    let files = fixture_files(&fixture("synthetic/edge_cases"));
    let up = server
        .upload_multipart(&[("framework", "claudecode")], "files", &files)
        .await;
    let id = graph_id(&up);

    let info = server.get(&format!("/api/graph/{id}/info")).await;
    let keys: Vec<&String> = info.json.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "framework",
            "message_count",
            "node_count",
            "edge_count",
            "created_at",
            "last_accessed",
            "source"
        ]
    );
    assert_eq!(info.json["id"], id.as_str());
    assert_eq!(info.json["message_count"], up.json["message_count"]);
    assert_eq!(info.json["source"], "upload");
    let list = server.get("/api/sessions").await;
    assert_eq!(list.json["sessions"][0], info.json);

    let deleted = server.delete(&format!("/api/session/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(
        deleted.json["message"],
        format!("Session '{id}' deleted successfully")
    );
    assert_eq!(
        server.get(&format!("/api/graph/{id}/workflow")).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(
        !server.data_dir.join("uploads").join(&id).exists(),
        "removed from disk too"
    );
    assert_eq!(
        server.get("/api/sessions").await.json["sessions"],
        serde_json::json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_survive_a_restart_with_the_same_ids_and_bodies() {
    let data = tempfile::tempdir().unwrap();
    let options = Options {
        data_dir: Some(data.path().to_owned()),
        ..Options::default()
    };
    let server = TestServer::start(options.clone()).await;
    let up = server
        .upload_fixture_reply("claudecode", "synthetic/subagents")
        .await;
    let id = graph_id(&up);
    let mut before = Vec::new();
    for (route, ..) in view_routes() {
        before.push(server.get(&view_path(&id, route)).await.bytes);
    }
    let info_before = server.get(&format!("/api/graph/{id}/info")).await.json;
    server.stop().await;

    let server = TestServer::start(options).await;
    let list = server.get("/api/sessions").await;
    assert_eq!(list.json["sessions"][0]["id"], id.as_str());
    assert_eq!(
        list.json["sessions"][0]["message_count"], up.json["message_count"],
        "counts known before parsing"
    );
    assert_eq!(server.state.store.parses(), 0);
    for ((route, ..), body) in view_routes().iter().zip(before) {
        assert!(
            server.get(&view_path(&id, route)).await.bytes == body,
            "{route} changed across the restart"
        );
    }
    let info_after = server.get(&format!("/api/graph/{id}/info")).await.json;
    assert_eq!(info_after["created_at"], info_before["created_at"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_on_disk_is_parsed_on_first_use_and_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("-home-me-project");
    std::fs::create_dir_all(&project).unwrap();
    let main = project.join("11111111-2222-4333-8444-555555555555.jsonl");
    std::fs::copy(
        fixture("synthetic/no_results/11111111-2222-4333-8444-555555555555.jsonl"),
        &main,
    )
    .unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![dir.path().to_owned()],
        ..Options::default()
    })
    .await;
    let list = server.get("/api/sessions").await;
    let entry = &list.json["sessions"][0];
    assert_eq!(entry["id"], "11111111-2222-4333-8444-555555555555");
    assert_eq!(entry["source"], "directory");
    assert_eq!(entry["project"], "-home-me-project");
    assert_eq!(entry["message_count"], Value::Null, "listing parses nothing");
    assert_eq!(server.state.store.parses(), 0);

    let path = "/api/graph/11111111-2222-4333-8444-555555555555/annotations";
    let first = server.get(path).await;
    assert_eq!(first.json["total"], 2);
    let etag = first.headers["etag"].to_str().unwrap().to_owned();
    let again = server
        .client
        .get(format!("{}{path}", server.url))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(server.state.store.parses(), 1);

    // Claude Code appends a prompt: the next request sees it.
    let mut text = std::fs::read_to_string(&main).unwrap();
    let appended = Record::prompt("new-1", "And now the docs please")
        .parent("00000000-0000-4000-8000-000000000003")
        .at("2025-12-01T10:05:00.000Z")
        .session("11111111-2222-4333-8444-555555555555");
    text.push_str(&format!("\n{}\n", appended.line()));
    std::fs::write(&main, text).unwrap();
    let changed = server.get(path).await;
    assert_eq!(changed.json["total"], 3);
    assert_ne!(changed.headers["etag"].to_str().unwrap(), etag);
    assert_eq!(server.state.store.parses(), 2);
    let stale = server
        .client
        .get(format!("{}{path}", server.url))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), StatusCode::OK, "an old ETag no longer matches");

    let refused = server
        .delete("/api/session/11111111-2222-4333-8444-555555555555")
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(main.exists(), "files of a sessions directory are never deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_parse_a_session_once() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let id = "ab51623b-c26d-45f5-b98e-f9d0cfa17018";
    let routes = [
        "workflow",
        "annotations",
        "chatlog",
        "info",
        "metrics",
        "diagnostics",
    ];
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..24 {
        let url = format!("{}/api/graph/{id}/{}", server.url, routes[i % routes.len()]);
        let client = server.client.clone();
        requests.spawn(async move { client.get(url).send().await.unwrap().status() });
    }
    let statuses = requests.join_all().await;
    assert!(statuses.iter().all(|s| *s == StatusCode::OK), "{statuses:?}");
    assert_eq!(server.state.store.parses(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_compressed_for_clients_that_accept_it() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let r = server
        .client
        .get(format!(
            "{}/api/graph/ab51623b-c26d-45f5-b98e-f9d0cfa17018/workflow",
            server.url
        ))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    assert!(r.headers().contains_key("x-request-id"));
    let compressed = r.bytes().await.unwrap();
    assert!(compressed.len() < 500_000, "{} bytes", compressed.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_cache_budget_the_least_recently_used_session_reloads() {
    // A budget smaller than one session: each newly parsed session evicts the others.
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("synthetic")],
        cache_bytes: 1,
        ..Options::default()
    })
    .await;
    let list = server.get("/api/sessions").await;
    let ids: Vec<String> = list.json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    let (a, b) = (&ids[0], &ids[1]);
    let first = server.get(&format!("/api/graph/{a}/workflow")).await.bytes;
    assert_eq!(server.state.store.parses(), 1);
    server.get(&format!("/api/graph/{a}/workflow")).await;
    assert_eq!(server.state.store.parses(), 1, "cached while it is the only one");
    server.get(&format!("/api/graph/{b}/workflow")).await;
    assert_eq!(server.state.store.parses(), 2);
    let again = server.get(&format!("/api/graph/{a}/workflow")).await.bytes;
    assert_eq!(
        server.state.store.parses(),
        3,
        "evicted, then parsed again from disk"
    );
    assert!(first == again, "the reloaded session serves the same body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_upload_reloads_from_the_data_directory() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("synthetic/edge_cases")],
        cache_bytes: 1,
        ..Options::default()
    })
    .await;
    let id = server.upload_fixture("claudecode", "synthetic/subagents").await;
    let before = server
        .get(&format!("/api/graph/{id}/chatlog?include_subagents=true"))
        .await
        .bytes;
    server
        .get("/api/graph/11111111-2222-4333-8444-555555555555/workflow")
        .await;
    let parses = server.state.store.parses();
    let after = server
        .get(&format!("/api/graph/{id}/chatlog?include_subagents=true"))
        .await
        .bytes;
    assert_eq!(
        server.state.store.parses(),
        parses + 1,
        "reloaded from the data directory"
    );
    assert!(before == after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_sessions_upload_with_or_without_a_framework_and_export_as_v3() {
    let server = TestServer::start(Options::default()).await;
    let original = std::fs::read(fixture("pi/large-session.jsonl")).unwrap();
    let up = server
        .upload_multipart(
            &[("framework", "pi")],
            "file",
            &[("large-session.jsonl".to_owned(), original.clone())],
        )
        .await;
    let id = graph_id(&up);
    assert_eq!(up.json["framework"], "pi");
    assert_eq!(up.json["annotation_count"], 541);

    // Told from the content when a raw upload names no framework.
    let detected = server
        .upload_raw("filename=large-session.jsonl", original.clone())
        .await;
    assert_eq!(detected.json["framework"], "pi");
    assert_eq!(
        detected.json["graph_id"],
        id.as_str(),
        "same content, same framework, same id"
    );
    let claude = server
        .upload_raw("filename=s.jsonl", std::fs::read(sample_main()).unwrap())
        .await;
    assert_eq!(claude.json["framework"], "claudecode");
    let unknown = server.upload_raw("filename=x.jsonl", b"[1,2,3]\n".to_vec()).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert!(
        unknown.json["message"]
            .as_str()
            .unwrap()
            .starts_with("No framework specified"),
        "{}",
        unknown.json
    );
    let mismatch = server
        .upload_multipart(
            &[("framework", "claudecode")],
            "file",
            &[("pi.jsonl".to_owned(), original.clone())],
        )
        .await;
    assert_eq!(mismatch.status, StatusCode::BAD_REQUEST);
    assert!(mismatch.json["message"]
        .as_str()
        .unwrap()
        .contains("framework=pi"));

    let jsonl = server.get(&format!("/api/graph/{id}/export")).await;
    assert_eq!(jsonl.headers["content-type"], "application/x-ndjson");
    assert!(jsonl.bytes == original, "format=jsonl is the stored file");
    let v3 = server.get(&format!("/api/graph/{id}/export?format=pi-v3")).await;
    assert_eq!(
        v3.headers["content-disposition"],
        "attachment; filename=\"large-session.v3.jsonl\""
    );
    let first: Value = serde_json::from_slice(v3.bytes.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["version"], 3);
    let bad = server.get(&format!("/api/graph/{id}/export?format=zip")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let ctx = server.get(&format!("/api/graph/{id}/context")).await;
    assert_eq!(ctx.json["leaf"], format!("{:08x}", 1018));
    let missing = server.get(&format!("/api/graph/{id}/context?leaf=nope")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        missing.json["message"],
        format!("No entry with id 'nope' in session '{id}'")
    );
    let branch = server
        .get(&format!("/api/graph/{id}/workflow?branch=sideways"))
        .await;
    assert_eq!(branch.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        server.get("/api/frameworks").await.json["frameworks"],
        serde_json::json!(["claudecode", "pi", "autogen", "codex", "gemini"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_codebook_is_served_with_an_etag() {
    let server = TestServer::start(Options::default()).await;
    let reply = server.get("/api/codebook").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json["labels"].as_array().map(Vec::len), Some(12));
    assert_eq!(reply.json["families"].as_array().map(Vec::len), Some(5));
    assert_eq!(reply.json["schema_version"], "0.2");
    let etag = reply.headers["etag"].to_str().unwrap();
    let again = server.get_if_none_match("/api/codebook", etag).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebook_of_the_teams_own_is_served_instead() {
    let text = "schema_name: team\nlabels:\n  - id: PLAN\n    family: planning\n    output_fields:\n      required:\n        steps: { type: integer }\n";
    let codebook = sessiongraph::labels::Codebook::parse("team.yaml", text).unwrap();
    let server = TestServer::start(Options {
        codebook: Some(codebook),
        ..Options::default()
    })
    .await;
    let reply = server.get("/api/codebook").await;
    assert_eq!(reply.json["file"], "team.yaml");
    assert_eq!(reply.json["labels"][0]["id"], "PLAN");
    assert_eq!(
        reply.json["labels"][0]["name"], "PLAN",
        "the name defaults to the id"
    );
    assert_eq!(
        reply.json["labels"][0]["output_fields"][0],
        serde_json::json!({"name": "steps", "type": "integer", "required": true})
    );
}

/// Issue 16, item 9: `/api/sessions` showed `null` counts for directory sessions until each
/// was opened, and again after every restart. Counts are kept in the data directory, and
/// sessions never opened are counted in the background after a start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_sessions_are_listed_with_their_counts_after_a_restart() {
    let sessions = tempfile::tempdir().unwrap();
    let project = sessions.path().join("-home-me-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(
        fixture("synthetic/no_results/11111111-2222-4333-8444-555555555555.jsonl"),
        project.join("11111111-2222-4333-8444-555555555555.jsonl"),
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let options = Options {
        sessions_dirs: vec![sessions.path().to_owned()],
        data_dir: Some(data.path().to_owned()),
        ..Options::default()
    };
    let counts = |list: &Value| list["sessions"][0]["message_count"].clone();

    let first = TestServer::start(options.clone()).await;
    assert_eq!(counts(&first.get("/api/sessions").await.json), Value::Null);
    let opened = first
        .get("/api/graph/11111111-2222-4333-8444-555555555555/info")
        .await;
    let expected = opened.json["message_count"].clone();
    assert!(expected.as_u64().is_some_and(|n| n > 0), "{}", opened.json);
    first.stop().await;

    let restarted = TestServer::start(options.clone()).await;
    assert_eq!(counts(&restarted.get("/api/sessions").await.json), expected);
    assert_eq!(restarted.state.store.parses(), 0, "listed without parsing");
    restarted.stop().await;

    let fresh_data = tempfile::tempdir().unwrap();
    let counting = TestServer::start(Options {
        data_dir: Some(fresh_data.path().to_owned()),
        background_counts: true,
        ..options
    })
    .await;
    let mut listed = Value::Null;
    for _ in 0..200 {
        listed = counts(&counting.get("/api/sessions").await.json);
        if !listed.is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(listed, expected, "counted in the background");
    assert_eq!(counting.state.store.parses(), 0, "and nothing was cached for it");
}

/// Item 11 of the labeling team's report: a raw upload of non-JSON text, or an empty POST,
/// was answered "No framework specified". The answer now says what is wrong with the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item11_a_raw_upload_says_what_is_wrong_with_its_body() {
    let server = TestServer::start(Options::default()).await;
    for (name, body, starts, line) in [
        (
            "empty",
            &b""[..],
            "The request body is empty: send a session log",
            None,
        ),
        (
            "blank",
            b" \n\t\n",
            "The request body is blank: send a session log",
            None,
        ),
        (
            "text",
            b"hello there\nthis is no log\n",
            "The request body is not JSON or JSON Lines: line 1 does not parse as JSON (column 1)",
            Some(1),
        ),
        (
            "a bad line",
            b"\n{\"sender\": 1}}\n",
            "The request body is not JSON or JSON Lines: line 2 does not parse as JSON (column 14)",
            Some(2),
        ),
        (
            "JSON of no format",
            b"{\"hello\": \"world\"}\n",
            "No framework specified, and the body's first record is not one of a format read here",
            None,
        ),
    ] {
        let reply = server.upload_raw("filename=s.jsonl", body.to_vec()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(reply.json["error"], "Bad Request", "{name}");
        let message = reply.json["message"].as_str().unwrap();
        assert!(message.starts_with(starts), "{name}: {message}");
        assert!(
            message.contains("?framework=claudecode, pi or autogen"),
            "{name}: {message}"
        );
        assert_eq!(
            reply.json["details"]["lineNumber"].as_u64(),
            line.map(|l: u64| l),
            "{name}"
        );
    }
    server.stop().await;
}

/// Item 11 of the labeling team's report: the upload's 413 named neither the limit nor
/// `--max-upload-bytes`. Whether refused on its declared length, part way through a body
/// sent in chunks, or in a multipart form, it now names both, in the message and the
/// details; so does `parse-for-dialog`, under the same limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item11_a_body_past_the_upload_limit_names_the_limit_and_its_setting() {
    let limit = 1 << 20;
    let server = TestServer::start(Options {
        max_upload_bytes: limit,
        ..Options::default()
    })
    .await;
    let check = |what: &str, reply: &crate::server::Reply| {
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{what}");
        let message = reply.json["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(
                "limit of 1 MiB (1048576 bytes), set by --max-upload-bytes (SESSIONGRAPH_MAX_UPLOAD_BYTES)"
            ),
            "{what}: {message}"
        );
        assert_eq!(
            reply.json["details"],
            serde_json::json!({"limit_bytes": limit, "setting": "--max-upload-bytes", "env": "SESSIONGRAPH_MAX_UPLOAD_BYTES"}),
            "{what}"
        );
    };
    for path in ["/api/upload?framework=claudecode", "/api/parse-for-dialog"] {
        let declared = server.post_head_only(path, "application/json", limit + 1).await;
        check(&format!("{path}, declared"), &declared);
    }
    let chunks = (0..2).map(move |_| Ok::<_, std::io::Error>(vec![b' '; limit]));
    let streamed = server
        .client
        .post(format!("{}/api/upload?framework=claudecode", server.url))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
        .send()
        .await;
    // The server may close the connection before the client sent it all (the body is
    // never read whole); when the answer arrives, it is the named 413.
    if let Ok(response) = streamed {
        check("streamed", &crate::server::Reply::read(response).await);
    }
    let form = reqwest::multipart::Form::new()
        .text("framework", "claudecode")
        .part(
            "file",
            reqwest::multipart::Part::bytes(vec![b' '; limit + 1]).file_name("s.jsonl"),
        );
    let multipart = server
        .client
        .post(format!("{}/api/upload", server.url))
        .multipart(form)
        .send()
        .await;
    if let Ok(response) = multipart {
        check("multipart", &crate::server::Reply::read(response).await);
    }
    server.stop().await;
}

/// Item 11 of the labeling team's report: `?include_sidechains=maybe` was read as false.
/// Every boolean parameter of the API refuses a value it does not know with a 400 naming
/// the parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item11_boolean_parameters_refuse_values_they_do_not_know() {
    let server = TestServer::start(Options::default()).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let refused = |param: &str, reply: &crate::server::Reply| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{param}: {}", reply.json);
        assert_eq!(reply.json["details"]["field"], param, "{param}");
        let message = reply.json["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{param}: expected true or false"))
                && message.ends_with("got 'maybe'"),
            "{param}: {message}"
        );
    };
    for (path, param) in [
        (format!("/api/graph/{id}/annotations"), "include_sidechains"),
        (format!("/api/graph/{id}/dialog"), "include_sidechains"),
        (format!("/api/graph/{id}/chatlog"), "include_subagents"),
        ("/api/labels/progress".to_owned(), "all"),
        ("/api/labels/export".to_owned(), "all_units"),
        ("/api/search?q=x".to_owned(), "failed"),
        ("/api/search?q=x".to_owned(), "delegation"),
        ("/api/search?q=x".to_owned(), "labeled"),
    ] {
        let sep = if path.contains('?') { '&' } else { '?' };
        refused(param, &server.get(&format!("{path}{sep}{param}=maybe")).await);
        let yes = server.get(&format!("{path}{sep}{param}=yes")).await;
        assert_eq!(yes.status, StatusCode::OK, "{param}=yes: {}", yes.json);
    }
    let upload = server
        .upload_raw(
            "framework=claudecode&strict=maybe",
            std::fs::read(sample_main()).unwrap(),
        )
        .await;
    refused("strict", &upload);
    let round = server
        .post_json("/api/rounds?dry_run=maybe", &serde_json::json!({}), &[])
        .await;
    refused("dry_run", &round);
    server.stop().await;
}
