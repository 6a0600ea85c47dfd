//! Many clients at once: uploads of the same and of different sessions, and reads of them
//! and of sessions on disk, all in parallel. Every session is parsed once, nothing
//! deadlocks, and every body equals what the core renders offline for that session.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionInput, SourceFile};

use crate::helpers::{fixture, load_path};
use crate::server::{fixture_files, graph_id, Options, TestServer};

const VIEWS: [(View, &str); 3] = [
    (View::Annotations, "annotations"),
    (View::Workflow, "workflow"),
    (View::Chatlog, "chatlog"),
];

/// The offline bodies of a session, by route suffix.
fn expected_bodies(session: &Session) -> BTreeMap<&'static str, Vec<u8>> {
    VIEWS
        .iter()
        .map(|&(view, suffix)| {
            let body = views::render(session, view, ViewOptions::default());
            (suffix, body.to_bytes().to_vec())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_uploads_and_reads_parse_each_session_once_and_never_mix_them_up() {
    let synthetic = [
        "edge_cases",
        "multi_block",
        "no_results",
        "subagents",
        "duplicate_lines",
    ];
    let server = Arc::new(
        TestServer::start(Options {
            sessions_dirs: vec![fixture("synthetic")],
            ..Options::default()
        })
        .await,
    );

    // What gets uploaded: the sample with its sub-agents, and each synthetic session.
    let mut uploads: Vec<Vec<(String, Vec<u8>)>> = vec![fixture_files(&fixture("commugraph-sample"))];
    uploads.extend(
        synthetic
            .iter()
            .map(|d| fixture_files(&fixture(&format!("synthetic/{d}")))),
    );
    let upload_bodies: Vec<_> = uploads
        .iter()
        .map(|files| {
            let input = SessionInput::new(
                files
                    .iter()
                    .map(|(n, b)| SourceFile::new(n.clone(), b.clone()))
                    .collect(),
            );
            expected_bodies(&Session::build(&input, LoadOptions::default()).unwrap())
        })
        .collect();
    // Each listed disk session, by id, with the directory it is in (its `project`).
    let listed = server.get("/api/sessions").await.json;
    let disk_bodies: BTreeMap<String, _> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| synthetic.contains(&s["project"].as_str().unwrap_or_default()))
        .map(|s| {
            let dir = s["project"].as_str().unwrap();
            let id = s["id"].as_str().unwrap().to_owned();
            (
                id,
                expected_bodies(&load_path(&fixture(&format!("synthetic/{dir}")))),
            )
        })
        .collect();
    assert_eq!(disk_bodies.len(), synthetic.len(), "{listed}");
    let uploads = Arc::new(uploads);
    let upload_bodies = Arc::new(upload_bodies);
    let disk_bodies = Arc::new(disk_bodies);

    let clients = 24;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (server, uploads, upload_bodies, disk_bodies) = (
            server.clone(),
            uploads.clone(),
            upload_bodies.clone(),
            disk_bodies.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let which = client % uploads.len();
            let reply = server
                .upload_multipart(&[("framework", "claudecode")], "file", &uploads[which])
                .await;
            let id = graph_id(&reply);
            let disk = disk_bodies
                .keys()
                .nth(client % disk_bodies.len())
                .unwrap()
                .clone();
            for round in 0..3 {
                for (_, suffix) in VIEWS {
                    let got = server.get(&format!("/api/graph/{id}/{suffix}")).await;
                    assert_eq!(got.status, StatusCode::OK, "client {client} round {round}");
                    assert!(
                        got.bytes == upload_bodies[which][suffix],
                        "client {client}: upload {which} {suffix} differs from the offline body"
                    );
                    let got = server.get(&format!("/api/graph/{disk}/{suffix}")).await;
                    assert!(
                        got.bytes == disk_bodies[&disk][suffix],
                        "client {client}: disk session {disk} {suffix} differs from the offline body"
                    );
                }
            }
            id
        }));
    }
    let ids = tokio::time::timeout(Duration::from_secs(120), async {
        let mut ids = Vec::new();
        for task in tasks {
            ids.push(task.await.expect("a client failed"));
        }
        ids
    })
    .await
    .expect("the clients finished: no deadlock");

    // The same content always got the same id; different content different ids.
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), uploads.len());
    for (client, id) in ids.iter().enumerate() {
        assert_eq!(id, &ids[client % uploads.len()]);
    }
    // Each upload parsed once, each disk session parsed once.
    assert_eq!(
        server.state.store.parses(),
        uploads.len() + disk_bodies.len(),
        "parses"
    );
    Arc::try_unwrap(server)
        .ok()
        .expect("no client holds the server")
        .stop()
        .await;
}

/// Issue 15 D7: a session deleted while a request is using it is a 404 (or the body the
/// request started with), never a 500. Readers of views and `/export`, deleters and
/// re-uploaders of the same sessions run at once over a store whose cache holds almost
/// nothing, so that sessions are unloaded and read back from the data directory all the
/// time, some of them after their directory was removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d7_reads_during_deletes_and_reuploads_never_answer_5xx() {
    let server = Arc::new(
        TestServer::start(Options {
            cache_bytes: 1024,
            ..Options::default()
        })
        .await,
    );
    let sessions = Arc::new(
        ["edge_cases", "multi_block", "subagents", "duplicate_lines"]
            .iter()
            .map(|d| fixture_files(&fixture(&format!("synthetic/{d}"))))
            .collect::<Vec<_>>(),
    );
    let mut ids = Vec::new();
    for files in sessions.iter() {
        let reply = server
            .upload_multipart(&[("framework", "claudecode")], "file", files)
            .await;
        ids.push(graph_id(&reply));
    }
    let ids = Arc::new(ids);
    const ROUNDS: usize = 40;
    let paths = [
        "workflow",
        "annotations",
        "chatlog",
        "export?format=jsonl",
        "info",
        "",
    ];
    let mut tasks = Vec::new();
    for reader in 0..16usize {
        let (server, ids) = (server.clone(), ids.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for round in 0..ROUNDS {
                let id = &ids[(reader + round) % ids.len()];
                let path = paths[(reader * 7 + round) % paths.len()];
                let url = format!("/api/graph/{id}/{path}");
                let got = server.get(url.trim_end_matches('/')).await;
                seen.push((url, got.status, got.bytes));
            }
            seen
        }));
    }
    for deleter in 0..4usize {
        let (server, ids) = (server.clone(), ids.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for round in 0..ROUNDS {
                let url = format!("/api/session/{}", ids[(deleter + round) % ids.len()]);
                let got = server.delete(&url).await;
                seen.push((url, got.status, got.bytes));
            }
            seen
        }));
    }
    for uploader in 0..3usize {
        let (server, sessions) = (server.clone(), sessions.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for round in 0..ROUNDS {
                let files = &sessions[(uploader + round) % sessions.len()];
                let got = server
                    .upload_multipart(&[("framework", "claudecode")], "file", files)
                    .await;
                seen.push(("upload".to_owned(), got.status, got.bytes));
            }
            seen
        }));
    }
    let mut failures = Vec::new();
    let mut answered = 0;
    for task in tasks {
        for (what, status, bytes) in task.await.expect("a client failed") {
            answered += 1;
            if status.is_server_error() {
                failures.push(format!("{what}: {status} {}", String::from_utf8_lossy(&bytes)));
            }
        }
    }
    assert_eq!(answered, (16 + 4 + 3) * ROUNDS);
    assert!(
        failures.is_empty(),
        "{} 5xx answers: {failures:#?}",
        failures.len()
    );
    Arc::try_unwrap(server)
        .ok()
        .expect("no client holds the server")
        .stop()
        .await;
}
