//! Rendering under load (issue 15 D3, D4): bodies cut at a step assembled from the whole
//! body, the render budget, and compressed variants of cached bodies.

use http_body_util::BodyExt;
use reqwest::StatusCode;
use serde_json::Value;
use sessiongraph::core::pipeline::session::Branch;
use sessiongraph::core::views::step::WholeWorkflow;
use sessiongraph::core::views::{self, View, ViewOptions};

use crate::helpers::{fixture, load_path};
use crate::server::{Options, TestServer};

/// Every view, with and without sub-agents, for the whole session and its active branch.
fn every_view_and_option() -> impl Iterator<Item = (View, ViewOptions)> {
    View::ALL.into_iter().flat_map(|view| {
        [false, true].into_iter().flat_map(move |include_subagents| {
            [Branch::All, Branch::Active].into_iter().map(move |branch| {
                let options = ViewOptions {
                    include_subagents,
                    branch,
                    ..ViewOptions::default()
                };
                (view, options)
            })
        })
    })
}

/// Steps worth checking in a workflow of `len` nodes: the first ones, a spread, the last
/// ones and past the end.
fn steps_to_check(len: usize, spread: usize) -> Vec<u64> {
    let len = len as u64;
    let mut steps: Vec<u64> = (0..12).collect();
    steps.extend((0..len).step_by((len as usize / spread).max(1)));
    steps.extend(len.saturating_sub(3)..len + 2);
    steps.push(u64::MAX);
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// Issue 15 D3: a body cut at a step is assembled from the whole body (only the nodes next
/// to the cut, the lanes and the totals are rendered) and is byte for byte the body
/// rendered from scratch, for every branch.
#[test]
fn d3_a_body_cut_at_a_step_is_the_whole_body_shared_and_equals_a_fresh_render() {
    let sessions = [
        ("commugraph-sample", 40),
        ("synthetic/subagents", 1000),
        ("synthetic/edge_cases", 1000),
        ("synthetic/multi_block", 1000),
        ("synthetic/duplicate_lines", 1000),
    ];
    for (dir, spread) in sessions {
        let session = load_path(&fixture(dir));
        for branch in [Branch::All, Branch::Active] {
            let whole = WholeWorkflow::render(&session, branch);
            let options = ViewOptions {
                branch,
                ..ViewOptions::default()
            };
            assert_eq!(
                whole.body.to_bytes(),
                views::render(&session, View::Workflow, options).to_bytes(),
                "{dir} {branch:?}: the whole body"
            );
            let len = session.workflow_for(branch).nodes.len();
            for step in steps_to_check(len, spread) {
                let cut = whole.cut(&session, step);
                let fresh = views::render(
                    &session,
                    View::Workflow,
                    ViewOptions {
                        step: Some(step),
                        ..options
                    },
                );
                assert!(
                    cut.to_bytes() == fresh.to_bytes(),
                    "{dir} {branch:?} step {step}: the cut body differs from a fresh render"
                );
            }
        }
    }
    // Most of a cut body is shared: the sample cut half way renders a few nodes.
    let session = load_path(&fixture("commugraph-sample"));
    let whole = WholeWorkflow::render(&session, Branch::All);
    let half = session.workflow.nodes.len() as u64 / 2;
    let (fresh, cut) = (whole.cut_fresh_bytes(&session, half), whole.cut(&session, half));
    assert!(
        fresh * 20 < cut.len(),
        "{fresh} fresh bytes of {} in the body cut at {half}",
        cut.len()
    );
}

/// The sample's id, served from `fixtures/commugraph-sample`.
pub const SAMPLE: &str = "ab51623b-c26d-45f5-b98e-f9d0cfa17018";

/// Sends `GET path` through the server's router in this process, without reading the
/// body: a body holding part of the render budget keeps it as long as it is not dropped.
pub async fn get_unread(server: &TestServer, path: &str) -> axum::response::Response {
    use tower::ServiceExt;
    let request = axum::http::Request::get(path)
        .body(axum::body::Body::empty())
        .unwrap();
    sessiongraph::app(server.state.clone())
        .oneshot(request)
        .await
        .unwrap()
}

/// A refusal for lack of render budget: 503, `Retry-After` in seconds, the JSON error body.
fn assert_busy(status: u16, retry_after: Option<&str>, body: &[u8], what: &str) {
    assert_eq!(status, 503, "{what}");
    let secs: u64 = retry_after
        .unwrap_or_else(|| panic!("{what}: a 503 without Retry-After"))
        .parse()
        .expect("Retry-After in seconds");
    assert!(secs >= 1, "{what}");
    let json: Value = serde_json::from_slice(body).expect("a JSON error body");
    assert_eq!(json["error"], "Service Unavailable", "{what}");
    assert!(json["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
    assert_eq!(json.as_object().map(|o| o.len()), Some(2), "{what}: {json}");
}

/// Issue 15 D3: renders not served from the cache are bounded by a budget in bytes. With a
/// budget smaller than one render, concurrent requests for distinct steps get 200s and
/// 503s (with `Retry-After` and a JSON body), at least one 503 while a body holds the
/// budget; the budget comes back when bodies are sent or dropped, and requests succeed
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_step_renders_past_the_render_budget_are_503_and_the_budget_comes_back() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        render_budget_bytes: 1024,
        ..Options::default()
    })
    .await;
    let budget = || server.state.store.render_budget();
    let whole = server.get(&format!("/api/graph/{SAMPLE}/workflow")).await;
    assert_eq!(whole.status, StatusCode::OK);
    assert_eq!(budget().available_bytes(), budget().total_bytes());

    // In this process, bodies are held until dropped: the first render keeps the budget and
    // the others find no room.
    let paths: Vec<String> = (1..=6)
        .map(|step| format!("/api/graph/{SAMPLE}/workflow?step={}", step * 50))
        .collect();
    let responses = futures_util::future::join_all(paths.iter().map(|p| get_unread(&server, p))).await;
    let mut refused = 0;
    let mut held = Vec::new();
    for (i, response) in responses.into_iter().enumerate() {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if status == 200 {
            held.push(response);
            continue;
        }
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_busy(status, retry_after.as_deref(), &body, &format!("request {i}"));
        refused += 1;
    }
    assert!(
        refused >= 1,
        "a budget below one render refuses concurrent renders"
    );
    assert!(!held.is_empty(), "one render fits");
    assert!(budget().available_bytes() < budget().total_bytes());
    drop(held);
    assert_eq!(budget().available_bytes(), budget().total_bytes());

    // Over HTTP: every answer is a 200 (the body cut at its step) or a well-formed 503.
    let paths: Vec<String> = (0..16)
        .map(|i| format!("/api/graph/{SAMPLE}/workflow?step={}", 3 + 37 * i))
        .collect();
    let replies = futures_util::future::join_all(paths.iter().map(|p| server.get(p))).await;
    for (i, reply) in replies.iter().enumerate() {
        if reply.status == StatusCode::OK {
            assert_eq!(reply.json["workflow"]["currentStep"], 3 + 37 * i as u64);
        } else {
            let retry_after = reply.headers.get("retry-after").and_then(|v| v.to_str().ok());
            assert_busy(
                reply.status.as_u16(),
                retry_after,
                &reply.bytes,
                &format!("step {i}"),
            );
        }
    }
    // Each body gives its share back once sent (the server may finish a moment after the
    // client has read the last byte).
    for _ in 0..200 {
        if budget().available_bytes() == budget().total_bytes() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(budget().available_bytes(), budget().total_bytes());
    for step in [7, 70, 700] {
        let reply = server
            .get(&format!("/api/graph/{SAMPLE}/workflow?step={step}"))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "step {step} after the storm");
    }
    server.stop().await;
}

/// Decodes a `gzip` or `br` body.
fn decode(encoding: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match encoding {
        "gzip" => flate2::read::GzDecoder::new(bytes).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out),
        other => panic!("unexpected coding {other}"),
    }
    .expect("the body decodes");
    out
}

/// Issue 15 D4: a large kept body is compressed once per coding, on the CPU pool, and the
/// variant is kept and sent as it is: concurrent `gzip` and `br` requests each get the
/// same bytes, which decode to exactly the body, with `Content-Encoding`, `Vary` and an
/// ETag of their own; `/healthz` answers meanwhile; the variants count towards the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_concurrent_compressed_requests_share_one_kept_variant_per_coding() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let path = format!("/api/graph/{SAMPLE}/workflow");
    let plain = server.get(&path).await;
    assert_eq!(plain.status, StatusCode::OK);
    assert!(!plain.headers.contains_key("content-encoding"));
    assert_eq!(plain.headers["vary"], "accept-encoding");
    let plain_etag = plain.headers["etag"].to_str().unwrap().to_owned();
    let (_, loaded) = server.state.store.get(SAMPLE).await.unwrap();
    let cached_before = loaded.approximate_bytes();

    let requests: Vec<(&str, &str)> = (0..24)
        .map(|i| ("accept-encoding", if i % 2 == 0 { "gzip" } else { "br" }))
        .collect();
    let (replies, health) = tokio::join!(
        futures_util::future::join_all(
            requests
                .iter()
                .map(|h| server.get_with(&path, std::slice::from_ref(h)))
        ),
        server.get("/healthz"),
    );
    assert_eq!(health.status, StatusCode::OK);
    let mut variants: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
    for ((_, asked), reply) in requests.iter().zip(&replies) {
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.headers["content-encoding"], *asked);
        assert_eq!(reply.headers["vary"], "accept-encoding");
        let etag = reply.headers["etag"].to_str().unwrap();
        assert_eq!(etag, format!("{}-{asked}\"", plain_etag.trim_end_matches('"')));
        assert!(
            decode(asked, &reply.bytes) == plain.bytes,
            "{asked} decodes to the body"
        );
        let first = variants
            .entry(asked.to_string())
            .or_insert_with(|| reply.bytes.clone());
        assert!(*first == reply.bytes, "every {asked} request gets the same bytes");
    }
    assert_eq!(loaded.bodies.compressions(), 2, "one compression per coding");
    let variant_bytes: usize = variants.values().map(Vec::len).sum();
    assert!(loaded.approximate_bytes() >= cached_before + variant_bytes);

    // The variant's ETag gives a 304, with Vary.
    let gzip_etag = replies[0].headers["etag"].to_str().unwrap();
    let again = server
        .get_with(
            &path,
            &[("accept-encoding", "gzip"), ("if-none-match", gzip_etag)],
        )
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers["etag"], gzip_etag);
    assert_eq!(again.headers["vary"], "accept-encoding");

    // A body cut at a step is compressed for its request.
    let step = format!("/api/graph/{SAMPLE}/workflow?step=300");
    let plain_step = server.get(&step).await;
    let gzip_step = server.get_with(&step, &[("accept-encoding", "gzip")]).await;
    assert_eq!(gzip_step.headers["content-encoding"], "gzip");
    assert!(decode("gzip", &gzip_step.bytes) == plain_step.bytes);
    assert_eq!(loaded.bodies.compressions(), 2, "a cut body is not kept");

    // A small body is sent as it is, and the compression layer leaves it so.
    let graph = server
        .get_with(
            &format!("/api/graph/{SAMPLE}?step=3&edges=none"),
            &[("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(graph.status, StatusCode::OK);
    assert!(graph.bytes.len() < 1024);
    assert!(!graph.headers.contains_key("content-encoding"));
    assert_eq!(graph.headers["vary"], "accept-encoding");
    assert!(graph.json["graph"].is_object());
    server.stop().await;
}

/// Issue 15: `/export` was outside the render budget: it read the whole stored upload (the
/// sub-agents' files too) for every request, and migrated pi sessions to v3 without a
/// bound. Now `jsonl` streams the file and needs no budget (it is served while the budget
/// is full), and `pi-v3` reserves its estimate first: 503 with `Retry-After` while
/// another holds the budget, 200 once it is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_streams_the_log_and_its_pi_v3_migration_is_within_the_render_budget() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("pi")],
        render_budget_bytes: 1024,
        ..Options::default()
    })
    .await;
    let budget = || server.state.store.render_budget();
    let migrate = "/api/graph/large-session/export?format=pi-v3";
    let held = get_unread(&server, migrate).await;
    assert_eq!(held.status(), 200);
    assert_eq!(
        budget().available_bytes(),
        0,
        "the migrated body holds the budget"
    );

    let refused = server.get(migrate).await;
    let retry_after = refused.headers.get("retry-after").and_then(|v| v.to_str().ok());
    assert_busy(
        refused.status.as_u16(),
        retry_after,
        &refused.bytes,
        "a second migration",
    );

    let stored = std::fs::read(fixture("pi/large-session.jsonl")).unwrap();
    let log = server.get("/api/graph/large-session/export").await;
    assert_eq!(log.status, StatusCode::OK, "the stored log needs no budget");
    assert_eq!(log.headers["content-length"], stored.len().to_string().as_str());
    assert!(log.bytes == stored, "the log as stored");

    let first = held.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(budget().available_bytes(), budget().total_bytes());
    let again = server.get(migrate).await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.bytes == first, "the same migration once the budget is back");
    let header: Value = serde_json::from_slice(first.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(header["version"], 3, "{header}");
    server.stop().await;
}

/// The workflow and chat log are written in parallel windows of segments (in memory for
/// the server, streamed for `export`): their bytes are those of serialising the body in
/// one sequential pass, on sessions larger than one window too.
#[test]
fn bodies_written_in_parallel_windows_are_the_sequential_serialisation() {
    use sessiongraph::core::views::{chatlog, workflow};
    use sessiongraph::core::{LoadOptions, Session};

    let scaled = crate::scaled::scaled(&crate::helpers::fixture_input("commugraph-sample"), 8, false);
    let sessions = [
        ("commugraph-sample", load_path(&fixture("commugraph-sample"))),
        (
            "synthetic/edge_cases",
            load_path(&fixture("synthetic/edge_cases")),
        ),
        (
            "the sample x8",
            Session::build(&scaled, LoadOptions::default()).unwrap(),
        ),
    ];
    assert!(
        sessions[2].1.workflow.nodes.len() > 4 * 512 * rayon::current_num_threads(),
        "the scaled session spans more than one window"
    );
    for (name, session) in &sessions {
        for branch in [Branch::All, Branch::Active] {
            let w = session.workflow_for(branch);
            for step in [None, Some(3)] {
                let body = workflow::workflow(session, &w, step);
                let sequential = serde_json::to_vec(&body).unwrap();
                let mut streamed = Vec::new();
                workflow::write_parallel(&body, &mut views::StreamWriter::new(&mut streamed)).unwrap();
                assert!(
                    streamed == sequential,
                    "{name} {branch:?} {step:?}: streamed workflow"
                );
                let options = ViewOptions {
                    branch,
                    step,
                    ..ViewOptions::default()
                };
                let rendered = views::render(session, View::Workflow, options).to_bytes();
                assert!(
                    rendered == sequential,
                    "{name} {branch:?} {step:?}: rendered workflow"
                );
            }
            for include_subagents in [false, true] {
                let body = chatlog::chatlog(session, &w, include_subagents);
                let sequential = serde_json::to_vec(&body).unwrap();
                let mut streamed = Vec::new();
                chatlog::write_parallel(&body, &mut views::StreamWriter::new(&mut streamed)).unwrap();
                assert!(streamed == sequential, "{name} {branch:?}: streamed chat log");
            }
        }
    }
}

/// Issue 15 D1, issue 14: kept bodies keep the input's long texts by reference instead of
/// holding a copy each. A body rendered so is byte for byte the body written out to a
/// stream, for every view and option of every kind of session, and a workflow cut at a
/// step from a whole body that keeps references is the fresh render too.
#[test]
fn d1_bodies_that_keep_input_texts_by_reference_are_the_bodies_written_out() {
    let sessions = [
        "commugraph-sample",
        "pi/large-session.jsonl",
        "pi/before-compaction.jsonl",
        "autogen/chat_messages/groupchat_chat_result.json",
        "autogen/ag2/tools_chat_result.json",
        "synthetic/subagents",
        "synthetic/edge_cases",
        "synthetic/multi_block",
    ];
    for path in sessions {
        let session = load_path(&fixture(path));
        let mut shared_bytes = 0;
        for (view, options) in every_view_and_option() {
            let kept = views::render(&session, view, options);
            let mut streamed = Vec::new();
            // A view the session cannot show (a context without a leaf) writes nothing
            // either way.
            let _ = views::write(&session, view, options, &mut streamed);
            assert!(
                kept.to_bytes() == streamed,
                "{path} {view} {options:?}: the bodies differ"
            );
            shared_bytes += kept.shared_len();
        }
        if path == "commugraph-sample" {
            assert!(shared_bytes > 100_000, "{shared_bytes} bytes kept by reference");
            let whole = WholeWorkflow::render(&session, Branch::All);
            assert!(whole.body.shared_len() > 0);
            for step in steps_to_check(session.workflow.nodes.len(), 40) {
                let fresh = views::render(
                    &session,
                    View::Workflow,
                    ViewOptions {
                        step: Some(step),
                        ..ViewOptions::default()
                    },
                );
                assert!(
                    whole.cut(&session, step).to_bytes() == fresh.to_bytes(),
                    "step {step}: the cut differs"
                );
            }
        }
    }
}

/// A tool call's description is made by the first body that shows it and kept on its node
/// (the workflow, the chat log and the graph all show it): every body is the same whichever
/// view made it, and the kept description is the node's content.
#[test]
fn a_tool_calls_description_is_made_once_and_every_view_shows_the_same() {
    let dir = fixture("commugraph-sample");
    let fresh = |view: View| views::render(&load_path(&dir), view, ViewOptions::default()).to_bytes();
    let views = [View::Chatlog, View::Graph, View::Workflow];
    let alone: Vec<_> = views.iter().map(|&v| fresh(v)).collect();

    let session = load_path(&dir);
    let calls: Vec<_> = session
        .workflow
        .nodes
        .iter()
        .filter(|n| n.tool.is_some())
        .collect();
    assert!(calls.len() > 10, "the sample has tool calls");
    assert!(calls.iter().all(|n| n.description.get().is_none()));
    // The workflow first: the graph and the chat log then show what it kept.
    for &view in views.iter().rev() {
        let body = views::render(&session, view, ViewOptions::default()).to_bytes();
        let i = views.iter().position(|&v| v == view).unwrap();
        assert_eq!(body, alone[i], "{view} after other views");
    }
    for node in calls {
        let kept = node.description.get().expect("made by a body");
        assert_eq!(session.node_content(node).to_text(), **kept);
    }
}

/// `sessiongraph export` of a view that does not read the workflow loads the session
/// without it: the annotations, the branches and the context are the bodies of a whole
/// session, for every option, and a view that reads the workflow refuses to render
/// instead of giving an empty DAG's body.
#[test]
fn a_session_loaded_without_its_workflow_gives_the_same_bodies_of_the_views_that_do_not_read_it() {
    use sessiongraph::core::{LoadOptions, Session};

    let dirs = [
        "commugraph-sample",
        "synthetic/subagents",
        "synthetic/edge_cases",
        "pi/before-compaction.jsonl",
        "autogen/chat_messages/fsm_chat_messages.json",
    ];
    for dir in dirs {
        let input = sessiongraph::store::disk::read_session(&[fixture(dir)]).expect("fixture is readable");
        let whole = Session::build(&input, LoadOptions::default()).expect("fixture loads");
        let without = LoadOptions {
            without_workflow: true,
            ..LoadOptions::default()
        };
        let lean = Session::build(&input, without).expect("fixture loads");
        assert!(whole.workflow_built && !lean.workflow_built);
        for (view, options) in every_view_and_option() {
            let mut expected = Vec::new();
            views::write(&whole, view, options, &mut expected).unwrap();
            let mut written = Vec::new();
            let result = views::write(&lean, view, options, &mut written);
            if view.reads_workflow() {
                let error = result.expect_err("a view that reads the workflow refuses");
                assert_eq!(
                    error.to_string(),
                    format!("the {view} view reads the workflow, which this session was loaded without")
                );
                assert!(written.is_empty(), "{dir} {view}: nothing written");
            } else {
                result.unwrap();
                assert!(written == expected, "{dir} {view} {options:?}");
            }
        }
    }
}
