//! CommuGraph's routes after f28ce03: `GET /api/graph/{id}/dialog` and
//! `POST /api/parse-for-dialog`, including the confinement of its `filePath`.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{fixture, reference};
use crate::server::{graph_id, Options, TestServer};

/// The sample served from a sessions directory (sub-agents beside it).
async fn sample_server() -> (TestServer, String) {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let id = server.first_session(&[]).await;
    (server, id)
}

/// The dialog body is the annotations body, byte for byte, with its units under
/// `records`: the same units, counts and labels (a label written shows in both). (The
/// annotations body is held to f28ce03's by the conformance test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dialog_body_is_the_annotations_body_under_records() {
    let (server, id) = sample_server().await;
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    let event = crate::labels::first_coded_unit(&units.json);
    let set = json!({"annotator": "ann.a", "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]});
    let written = server
        .send_json(
            reqwest::Method::PUT,
            &format!("/api/graph/{id}/labels/{event}"),
            Some(&set),
            &[],
        )
        .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    for query in ["", "?include_sidechains=true", "?branch=active"] {
        let annotations = server.get(&format!("/api/graph/{id}/annotations{query}")).await;
        let dialog = server.get(&format!("/api/graph/{id}/dialog{query}")).await;
        assert_eq!(dialog.status, StatusCode::OK);
        let renamed = String::from_utf8(annotations.bytes.clone()).unwrap().replacen(
            r#"{"annotations":"#,
            r#"{"records":"#,
            1,
        );
        assert_eq!(
            String::from_utf8(dialog.bytes.clone()).unwrap(),
            renamed,
            "{query}"
        );
        assert_ne!(annotations.headers["etag"], dialog.headers["etag"]);
    }
    let dialog = server.get(&format!("/api/graph/{id}/dialog")).await;
    let shown = dialog.json["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["event_id"] == event.as_str())
        .unwrap();
    assert_eq!(shown["labels"][0]["id"], "EXEC_COGNITIVE");
    let missing = server.get("/api/graph/nope/dialog").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json["message"], "Session with ID 'nope' not found");
    server.stop().await;
}

/// `content`: the sample's main log alone, parsed without being stored: one message per
/// workflow node of the same log uploaded, each with its sender, role and a preview of 200
/// UTF-16 units.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_for_dialog_reads_content_without_storing_it() {
    let server = TestServer::start(Options::default()).await;
    let main = std::fs::read_to_string(crate::helpers::sample_main()).unwrap();
    let parsed = server
        .post_json("/api/parse-for-dialog", &json!({ "content": main }), &[])
        .await;
    assert_eq!(parsed.status, StatusCode::OK, "{}", parsed.json);
    assert_eq!(parsed.json["framework"], "claudecode");
    let listed = server.get("/api/sessions").await;
    assert_eq!(listed.json["sessions"], json!([]), "nothing was stored");
    let messages = parsed.json["messages"].as_array().unwrap();
    assert_eq!(parsed.json["total_count"], messages.len());
    let upload = server
        .upload_raw(
            "framework=claudecode&filename=main.jsonl",
            main.clone().into_bytes(),
        )
        .await;
    let workflow = server
        .get(&format!("/api/graph/{}/workflow", graph_id(&upload)))
        .await;
    assert_eq!(
        messages.len(),
        workflow.json["workflow"]["nodes"].as_array().unwrap().len(),
        "one message per workflow node"
    );
    for (i, m) in messages.iter().enumerate() {
        assert_eq!(m["step_index"], i, "steps run in order");
        let expected_role = match m["speaker"].as_str().unwrap() {
            "user" => "user",
            "system" => "system",
            _ => "assistant",
        };
        assert_eq!(m["role"], expected_role, "{m}");
        let content = m["content"].as_str().unwrap();
        let units = content.encode_utf16().count();
        let preview = m["content_preview"].as_str().unwrap();
        if units > 200 {
            let kept: Vec<u16> = content.encode_utf16().take(200).collect();
            assert_eq!(preview, format!("{}...", String::from_utf16_lossy(&kept)));
        } else {
            assert_eq!(preview, content);
        }
    }
    let speakers: std::collections::BTreeSet<&str> =
        messages.iter().map(|m| m["speaker"].as_str().unwrap()).collect();
    assert!(
        speakers.contains("user") && speakers.contains("assistant"),
        "{speakers:?}"
    );

    let autogen = std::fs::read_to_string(reference("autogen/mock_chat_history.jsonl")).unwrap();
    let parsed = server
        .post_json("/api/parse-for-dialog", &json!({ "content": autogen }), &[])
        .await;
    assert_eq!(parsed.status, StatusCode::OK, "{}", parsed.json);
    assert_eq!(parsed.json["framework"], "autogen");
    assert!(parsed.json["total_count"].as_u64().unwrap() > 0);

    for (body, status) in [
        (json!({}), StatusCode::BAD_REQUEST),
        (json!({"content": ""}), StatusCode::BAD_REQUEST),
        (
            json!({"content": "{\"type\":\"summary\"}\n"}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let refused = server.post_json("/api/parse-for-dialog", &body, &[]).await;
        assert_eq!(refused.status, status, "{body}: {}", refused.json);
        assert!(refused.json["message"].is_string());
    }
    server.stop().await;
}

/// `filePath` reads only inside a configured sessions directory, by the rule of its scan:
/// a relative or absolute path to a log there is read; a path outside, a `..` climbing out,
/// and a symbolic link (planted inside, pointing outside or inside) are refused with 403
/// and never read; a missing file is 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_for_dialog_reads_a_file_path_only_inside_a_sessions_directory() {
    let sessions = tempfile::tempdir().unwrap();
    let log = std::fs::read(crate::helpers::sample_main()).unwrap();
    std::fs::create_dir_all(sessions.path().join("p")).unwrap();
    std::fs::write(sessions.path().join("p/main.jsonl"), &log).unwrap();
    let secret = tempfile::tempdir().unwrap();
    let outside = secret.path().join("outside.jsonl");
    std::fs::write(&outside, &log).unwrap();
    std::os::unix::fs::symlink(&outside, sessions.path().join("p/link.jsonl")).unwrap();
    std::os::unix::fs::symlink(
        sessions.path().join("p/main.jsonl"),
        sessions.path().join("p/inner.jsonl"),
    )
    .unwrap();
    std::os::unix::fs::symlink(secret.path(), sessions.path().join("escape")).unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![sessions.path().to_owned()],
        ..Options::default()
    })
    .await;
    let ask = |path: String| {
        let server = &server;
        async move {
            server
                .post_json("/api/parse-for-dialog", &json!({ "filePath": path }), &[])
                .await
        }
    };
    let absolute = sessions.path().join("p/main.jsonl").display().to_string();
    for path in ["p/main.jsonl".to_owned(), absolute] {
        let read = ask(path.clone()).await;
        assert_eq!(read.status, StatusCode::OK, "{path}: {}", read.json);
        assert_eq!(read.json["framework"], "claudecode");
    }
    let climbing = format!("p/../../{}", outside.strip_prefix("/").unwrap().display());
    let refused: Vec<String> = vec![
        outside.display().to_string(),
        "/etc/passwd".to_owned(),
        "../outside.jsonl".to_owned(),
        climbing,
        sessions.path().join("p/../../etc/passwd").display().to_string(),
        "p/link.jsonl".to_owned(),
        "p/inner.jsonl".to_owned(),
        "escape/outside.jsonl".to_owned(),
        sessions.path().join("escape/outside.jsonl").display().to_string(),
    ];
    for path in refused {
        let reply = ask(path.clone()).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}: {}", reply.json);
        let message = reply.json["message"].as_str().unwrap();
        assert!(!message.contains("Desktop"), "{message}");
    }
    let missing = ask("p/none.jsonl".to_owned()).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.json);
    assert_eq!(missing.json["message"], "Could not read file: p/none.jsonl");
    server.stop().await;

    // Without a sessions directory, no path is read.
    let bare = TestServer::start(Options::default()).await;
    let reply = bare
        .post_json(
            "/api/parse-for-dialog",
            &json!({ "filePath": crate::helpers::sample_main() }),
            &[],
        )
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.json);
    bare.stop().await;
}

/// The server keeps one body for annotations and dialog: the dialog body made from the
/// annotations body's bytes is the one the core renders, for every fixture and option.
#[test]
fn the_dialog_body_shares_the_annotations_bytes_and_renders_the_same() {
    use sessiongraph::core::views::{self, annotations::dialog_of, View, ViewOptions};
    for name in ["commugraph-sample", "synthetic/edge_cases", "synthetic/subagents"] {
        let session = crate::helpers::load_path(&fixture(name));
        for include_subagents in [false, true] {
            let options = ViewOptions {
                include_subagents,
                ..ViewOptions::default()
            };
            let annotations = views::render(&session, View::Annotations, options);
            let dialog = dialog_of(&annotations).unwrap();
            let rendered = views::render(&session, View::Dialog, options);
            assert_eq!(dialog.to_bytes(), rendered.to_bytes(), "{name}");
            // Every byte after the new key lies in the annotations body's own chunks.
            let ranges: Vec<std::ops::Range<usize>> = annotations
                .chunks()
                .iter()
                .map(|c| c.as_ptr() as usize..c.as_ptr() as usize + c.len())
                .collect();
            for chunk in &dialog.chunks()[1..] {
                let at = chunk.as_ptr() as usize;
                assert!(
                    ranges
                        .iter()
                        .any(|r| r.contains(&at) && at + chunk.len() <= r.end),
                    "{name}: a chunk of the dialog body was copied"
                );
            }
        }
    }
    let workflow = views::render(
        &crate::helpers::load_path(&fixture("synthetic/edge_cases")),
        View::Workflow,
        ViewOptions::default(),
    );
    assert!(dialog_of(&workflow).is_none());
}
