//! `openapi.yaml` and the server cannot drift: live responses of every documented route and
//! status are validated against the document's schemas (OpenAPI 3.1 schemas are JSON
//! Schema), and every documented route, method and status is exercised.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::helpers::{fixture, root};
use crate::server::{fixture_files, graph_id, Options, Reply, TestServer};

fn spec() -> Value {
    let text = std::fs::read_to_string(root().join("openapi.yaml")).unwrap();
    yaml_serde::from_str(&text).expect("openapi.yaml is YAML")
}

/// Follows a local `$ref`.
fn resolve<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => spec
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling {r}")),
        None => v,
    }
}

struct Checker {
    spec: Value,
    seen: BTreeSet<(String, String, String)>,
}

impl Checker {
    /// Validates `reply` as the response of `method template` (a path of the document).
    fn check(&mut self, method: &str, template: &str, reply: &Reply) {
        let status = reply.status.as_str().to_owned();
        let operation = &self.spec["paths"][template][method];
        assert!(operation.is_object(), "{method} {template} is not documented");
        let response = operation["responses"].get(&status).unwrap_or_else(|| {
            panic!(
                "{method} {template} answered {status}, which the document does not list: {}",
                reply.json
            )
        });
        let response = resolve(&self.spec, response);
        let got = reply
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json");
        let schema = response.pointer("/content/application~1json/schema");
        if let (Some(schema), "application/json") = (schema, got) {
            let mut root = schema.clone();
            root["components"] = self.spec["components"].clone();
            let validator = jsonschema::validator_for(&root).expect("the schema compiles");
            let errors: Vec<String> = validator
                .iter_errors(&reply.json)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .take(5)
                .collect();
            assert!(errors.is_empty(), "{method} {template} {status}: {errors:#?}");
        } else if let Some(content) = response.get("content").and_then(Value::as_object) {
            assert!(
                content.contains_key(got),
                "{method} {template} {status}: content type {got} is not documented"
            );
        } else {
            assert!(
                reply.bytes.is_empty(),
                "{method} {template} {status} has an undocumented body"
            );
        }
        self.seen.insert((template.to_owned(), method.to_owned(), status));
    }

    fn documented(&self) -> BTreeSet<(String, String, String)> {
        let mut all = BTreeSet::new();
        for (path, item) in self.spec["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for status in op["responses"].as_object().unwrap().keys() {
                    all.insert((path.clone(), method.clone(), status.clone()));
                }
            }
        }
        all
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_response_validates_against_openapi_yaml() {
    let mut c = Checker {
        spec: spec(),
        seen: BTreeSet::new(),
    };
    // `/readyz` before the store is restored.
    let starting = sessiongraph::AppState::build(sessiongraph::AppSettings {
        store: Default::default(),
        api: Default::default(),
        codebooks: sessiongraph::labels::Codebooks::built_in().unwrap(),
        database_url: "sqlite::memory:".into(),
        upload_store: Default::default(),
        s3: Default::default(),
        label_policy: Default::default(),
        search: Default::default(),
    })
    .await
    .unwrap();
    let labels = starting.labels.clone();
    let app = sessiongraph::app(starting);
    let oneshot = |path: &'static str| {
        let app = app.clone();
        async move {
            use http_body_util::BodyExt;
            use tower::ServiceExt;
            let request = axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let status = reqwest::StatusCode::from_u16(response.status().as_u16()).unwrap();
            let mut headers = reqwest::header::HeaderMap::new();
            for (name, value) in response.headers() {
                headers.insert(name.clone(), value.clone());
            }
            let bytes = response.into_body().collect().await.unwrap().to_bytes().to_vec();
            Reply {
                status,
                headers,
                json: serde_json::from_slice(&bytes).unwrap_or_default(),
                bytes,
            }
        }
    };
    c.check("get", "/readyz", &oneshot("/readyz").await);
    // A label database that cannot be reached: the export answers 503 before its body.
    labels.close().await;
    let export = oneshot("/api/labels/export").await;
    assert_eq!(
        export.status,
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        export.json
    );
    c.check("get", "/api/labels/export", &export);
    // The same: a label filter of a search cannot be read.
    let search = oneshot("/api/search?labeled=true").await;
    assert_eq!(
        search.status,
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        search.json
    );
    c.check("get", "/api/search", &search);

    // Two sessions whose main log goes wrong after the scan: one becomes a FIFO (refused,
    // 422), one is removed (it cannot be read, 500).
    let broken = tempfile::tempdir().unwrap();
    let log = fixture("synthetic/subagents/11111111-2222-4333-8444-555555555555.jsonl");
    let refused = broken.path().join("p/eeeeeeee-0000-4000-8000-000000000001.jsonl");
    let gone = broken.path().join("p/eeeeeeee-0000-4000-8000-000000000002.jsonl");
    std::fs::create_dir_all(broken.path().join("p")).unwrap();
    for path in [&refused, &gone] {
        std::fs::copy(&log, path).unwrap();
    }
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("synthetic"), fixture("pi"), broken.path().to_owned()],
        max_upload_bytes: 8 << 20,
        ..Options::default()
    })
    .await;
    std::fs::remove_file(&refused).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&refused)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::remove_file(&gone).unwrap();
    c.check("get", "/healthz", &server.get("/healthz").await);
    c.check("get", "/readyz", &server.get("/readyz").await);
    c.check("get", "/api/frameworks", &server.get("/api/frameworks").await);
    let codebook = server.get("/api/codebook").await;
    c.check("get", "/api/codebook", &codebook);
    let etag = codebook.headers["etag"].to_str().unwrap();
    let not_modified = server.get_if_none_match("/api/codebook", etag).await;
    assert_eq!(not_modified.status, reqwest::StatusCode::NOT_MODIFIED);
    c.check("get", "/api/codebook", &not_modified);
    c.check("get", "/api/codebooks", &server.get("/api/codebooks").await);
    let unknown = server.get("/api/codebook?codebook=nope").await;
    assert_eq!(unknown.status, reqwest::StatusCode::BAD_REQUEST);
    c.check("get", "/api/codebook", &unknown);
    c.check("get", "/api/me", &server.get("/api/me?annotator=ann.a").await);

    // Uploads: the sample (sub-agents loaded), a main log alone (sub-agents missing).
    let up = server
        .upload_fixture_reply("claudecode", "commugraph-sample")
        .await;
    c.check("post", "/api/upload", &up);
    let id = graph_id(&up);
    let sample = fixture_files(&fixture("commugraph-sample"));
    let alone = server
        .upload_raw("framework=claudecode&filename=main.jsonl", sample[0].1.clone())
        .await;
    c.check("post", "/api/upload", &alone);
    c.check(
        "post",
        "/api/upload",
        &server.upload_multipart(&[], "file", &sample[..1]).await,
    );
    let too_big = server
        .post_head_only(
            "/api/upload?framework=claudecode",
            "application/x-ndjson",
            (8 << 20) + 1,
        )
        .await;
    c.check("post", "/api/upload", &too_big);

    let sessions = server.get("/api/sessions").await;
    c.check("get", "/api/sessions", &sessions);
    let ids: Vec<String> = sessions.json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    for session in ids.iter().chain([&id]) {
        for (template, suffix) in [
            ("/api/graph/{id}", ""),
            ("/api/graph/{id}", "?step=3"),
            ("/api/graph/{id}/workflow", "/workflow"),
            ("/api/graph/{id}/workflow", "/workflow?step=7"),
            ("/api/graph/{id}/annotations", "/annotations"),
            (
                "/api/graph/{id}/annotations",
                "/annotations?include_sidechains=true",
            ),
            ("/api/graph/{id}/dialog", "/dialog"),
            ("/api/graph/{id}/dialog", "/dialog?include_sidechains=true"),
            ("/api/graph/{id}/chatlog", "/chatlog"),
            ("/api/graph/{id}/chatlog", "/chatlog?include_subagents=true"),
            ("/api/graph/{id}/metrics", "/metrics"),
            ("/api/graph/{id}/diagnostics", "/diagnostics"),
            ("/api/graph/{id}/info", "/info"),
            ("/api/graph/{id}/branches", "/branches"),
            ("/api/graph/{id}/context", "/context"),
            ("/api/graph/{id}/workflow", "/workflow?branch=active"),
            ("/api/graph/{id}/annotations", "/annotations?branch=active"),
            ("/api/graph/{id}/chatlog", "/chatlog?branch=active"),
            ("/api/graph/{id}/export", "/export"),
        ] {
            let path = format!("/api/graph/{session}{suffix}");
            let reply = server.get(&path).await;
            c.check("get", template, &reply);
            if let Some(etag) = reply.headers.get("etag") {
                let reply = server.get_if_none_match(&path, etag.to_str().unwrap()).await;
                c.check("get", template, &reply);
            }
        }
    }
    for (template, path) in [
        ("/api/graph/{id}", "/api/graph/nope"),
        ("/api/graph/{id}/workflow", "/api/graph/nope/workflow"),
        ("/api/graph/{id}/annotations", "/api/graph/nope/annotations"),
        ("/api/graph/{id}/dialog", "/api/graph/nope/dialog"),
        ("/api/graph/{id}/chatlog", "/api/graph/nope/chatlog"),
        ("/api/graph/{id}/metrics", "/api/graph/nope/metrics"),
        ("/api/graph/{id}/diagnostics", "/api/graph/nope/diagnostics"),
        ("/api/graph/{id}/info", "/api/graph/nope/info"),
        ("/api/graph/{id}/branches", "/api/graph/nope/branches"),
        ("/api/graph/{id}/context", "/api/graph/nope/context"),
        ("/api/graph/{id}/export", "/api/graph/nope/export"),
    ] {
        c.check("get", template, &server.get(path).await);
    }
    c.check(
        "get",
        "/api/graph/{id}",
        &server.get(&format!("/api/graph/{id}?step=-1")).await,
    );
    c.check(
        "get",
        "/api/graph/{id}/export",
        &server.get(&format!("/api/graph/{id}/export?format=pi-v3")).await,
    );
    let pi_session = ids
        .iter()
        .find(|s| s.contains("large-session"))
        .expect("the pi fixture is listed");
    let migrated = server
        .get(&format!("/api/graph/{pi_session}/export?format=pi-v3"))
        .await;
    c.check("get", "/api/graph/{id}/export", &migrated);
    assert!(String::from_utf8_lossy(&migrated.bytes).starts_with(r#"{"type":"session","#));
    c.check(
        "get",
        "/api/graph/{id}/context",
        &server.get(&format!("/api/graph/{id}/context?leaf=nope")).await,
    );
    c.check(
        "get",
        "/api/graph/{id}/workflow",
        &server.get(&format!("/api/graph/{id}/workflow?step=x")).await,
    );
    // A branch that is neither `active` nor `all`.
    for (template, suffix) in [
        ("/api/graph/{id}/annotations", "annotations"),
        ("/api/graph/{id}/dialog", "dialog"),
        ("/api/graph/{id}/chatlog", "chatlog"),
    ] {
        let refused = server
            .get(&format!("/api/graph/{id}/{suffix}?branch=sideways"))
            .await;
        assert_eq!(refused.status, reqwest::StatusCode::BAD_REQUEST);
        c.check("get", template, &refused);
    }

    // An AutoGen session: its units, graph, metrics and chat log; its workflow's 400.
    let autogen = std::fs::read(crate::helpers::reference("autogen/mock_chat_history.jsonl")).unwrap();
    let up = server
        .upload_raw("framework=autogen&filename=chat.jsonl", autogen)
        .await;
    c.check("post", "/api/upload", &up);
    let ag = graph_id(&up);
    for (template, suffix) in [
        ("/api/graph/{id}/annotations", "/annotations"),
        ("/api/graph/{id}", "?step=10"),
        ("/api/graph/{id}/metrics", "/metrics"),
        ("/api/graph/{id}/chatlog", "/chatlog"),
        ("/api/graph/{id}/workflow", "/workflow"),
    ] {
        c.check(
            "get",
            template,
            &server.get(&format!("/api/graph/{ag}{suffix}")).await,
        );
    }
    // AutoGen's own dumps with tool calls, failed results among them (issue 33): the call's
    // `tool_summary`, the result's `is_error`, an interaction per call.
    for fixture in [
        "autogen/agentchat/tool_error_parallel.json",
        "autogen/ag2/tools_chat_result.json",
    ] {
        let up = server.upload_fixture_reply("autogen", fixture).await;
        c.check("post", "/api/upload", &up);
        let tools = graph_id(&up);
        for (template, suffix) in [
            ("/api/graph/{id}/annotations", "/annotations"),
            ("/api/graph/{id}", ""),
        ] {
            c.check(
                "get",
                template,
                &server.get(&format!("/api/graph/{tools}{suffix}")).await,
            );
        }
    }

    parse_for_dialog(&mut c, &server).await;
    label_routes(&mut c, &server, &id).await;
    labeling_routes(&mut c, &server, &id).await;
    search_routes(&mut c, &server).await;
    round_routes(&mut c, &server, &id).await;
    busy_label_store(&mut c, &server, &id).await;

    c.check(
        "delete",
        "/api/session/{id}",
        &server.delete(&format!("/api/session/{}", ids[0])).await,
    );
    c.check(
        "delete",
        "/api/session/{id}",
        &server.delete(&format!("/api/session/{id}")).await,
    );
    c.check(
        "delete",
        "/api/session/{id}",
        &server.delete(&format!("/api/session/{id}")).await,
    );

    server.stop().await;

    // With API keys: every route but the probes answers 401 without one.
    let keyed = TestServer::start(Options {
        api_keys: vec!["a-key".into()],
        ..Options::default()
    })
    .await;
    let documented = c.documented();
    let operations: BTreeSet<(String, String)> = documented
        .iter()
        .map(|(path, method, _)| (path.clone(), method.clone()))
        .collect();
    for (template, method) in operations {
        if template == "/healthz" || template == "/readyz" {
            continue;
        }
        let path = template
            .replace("{id}", "some-id")
            .replace("{event_id}", "some-unit");
        let request = match method.as_str() {
            "get" => keyed.client.get(format!("{}{path}", keyed.url)),
            "put" => keyed.client.put(format!("{}{path}", keyed.url)),
            "post" => keyed.client.post(format!("{}{path}", keyed.url)),
            "delete" => keyed.client.delete(format!("{}{path}", keyed.url)),
            other => panic!("untested method {other}"),
        };
        let response = request.send().await.unwrap();
        let reply = Reply {
            status: response.status(),
            headers: response.headers().clone(),
            bytes: Vec::new(),
            json: response.json().await.unwrap_or_default(),
        };
        assert_eq!(
            reply.status,
            reqwest::StatusCode::UNAUTHORIZED,
            "{method} {template}"
        );
        c.check(&method, &template, &reply);
    }
    keyed.stop().await;

    // Read-only: uploads are refused.
    let read_only = TestServer::start(Options {
        read_only: true,
        ..Options::default()
    })
    .await;
    c.check(
        "post",
        "/api/upload",
        &read_only
            .upload_raw("framework=claudecode", sample[0].1.clone())
            .await,
    );
    for (method, reply) in [
        (
            "put",
            crate::labels::put(&read_only, "/api/graph/x/labels/y", &json!({}), None).await,
        ),
        (
            "delete",
            crate::labels::delete(&read_only, "/api/graph/x/labels/y?annotator=a", None).await,
        ),
    ] {
        assert_eq!(reply.status, reqwest::StatusCode::FORBIDDEN);
        c.check(method, "/api/graph/{id}/labels/{event_id}", &reply);
    }
    let writes = [
        "/api/labels/import",
        "/api/labels/queue/next",
        "/api/labels/queue/release",
    ];
    for path in writes {
        let reply = read_only.post_json(path, &json!({"annotator": "a"}), &[]).await;
        assert_eq!(reply.status, reqwest::StatusCode::FORBIDDEN, "{path}");
        c.check("post", path, &reply);
    }
    for template in ["/api/rounds", "/api/rounds/{id}/close", "/api/rounds/{id}/reopen"] {
        let path = template.replace("{id}", "r0000000000000000");
        let reply = read_only.post_json(&path, &json!({}), &[]).await;
        assert_eq!(reply.status, reqwest::StatusCode::FORBIDDEN, "{path}");
        c.check("post", template, &reply);
    }
    read_only.stop().await;

    // A full disk: a real one where a tmpfs can be mounted, else the response the server
    // gives for it, built in-process.
    match crate::helpers::SmallDisk::mount("1m") {
        Some(disk) => {
            let full = TestServer::start(Options {
                data_dir: Some(disk.path().to_owned()),
                ..Options::default()
            })
            .await;
            let big = [sample[0].1.as_slice(), &vec![b'\n'; 2 << 20]].concat();
            let reply = full.upload_raw("framework=claudecode", big).await;
            assert_eq!(reply.status, reqwest::StatusCode::INSUFFICIENT_STORAGE);
            c.check("post", "/api/upload", &reply);
            full.stop().await;
        }
        None => {
            eprintln!("openapi: cannot mount a tmpfs here; checking the 507 body built in-process");
            use axum::response::IntoResponse;
            use http_body_util::BodyExt;
            use sessiongraph::api::error::{session_not_found, ApiError};
            let full = std::io::Error::from_raw_os_error(28);
            let response = ApiError::from_store(full.into(), session_not_found).into_response();
            let status = reqwest::StatusCode::from_u16(response.status().as_u16()).unwrap();
            let bytes = response.into_body().collect().await.unwrap().to_bytes().to_vec();
            let reply = Reply {
                status,
                headers: Default::default(),
                json: serde_json::from_slice(&bytes).unwrap(),
                bytes,
            };
            c.check("post", "/api/upload", &reply);
        }
    }
    // A render budget held by a body not yet sent: renders of another session are refused.
    let busy = TestServer::start(Options {
        sessions_dirs: vec![fixture("synthetic"), fixture("pi")],
        render_budget_bytes: 1024,
        ..Options::default()
    })
    .await;
    let listed = busy.get("/api/sessions").await.json;
    let id_in = |project: &str| {
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["project"] == project)
            .and_then(|s| s["id"].as_str())
            .unwrap()
            .to_owned()
    };
    let busy_ids = [id_in("subagents"), id_in("edge_cases")];
    let holding =
        crate::render::get_unread(&busy, &format!("/api/graph/{}/workflow?step=1", busy_ids[0])).await;
    assert_eq!(holding.status(), 200);
    let views = [
        ("/api/graph/{id}", ""),
        ("/api/graph/{id}/workflow", "/workflow"),
        ("/api/graph/{id}/annotations", "/annotations"),
        ("/api/graph/{id}/chatlog", "/chatlog"),
        ("/api/graph/{id}/metrics", "/metrics"),
        ("/api/graph/{id}/diagnostics", "/diagnostics"),
        ("/api/graph/{id}/branches", "/branches"),
        ("/api/graph/{id}/context", "/context"),
    ];
    let mut refused: Vec<(&str, String)> = views
        .iter()
        .map(|(template, suffix)| (*template, format!("/api/graph/{}{suffix}", busy_ids[1])))
        .collect();
    refused.push((
        "/api/graph/{id}/export",
        "/api/graph/large-session/export?format=pi-v3".to_owned(),
    ));
    let paths: Vec<&String> = refused.iter().map(|(_, path)| path).collect();
    let replies = futures_util::future::join_all(paths.iter().map(|p| busy.get(p))).await;
    for ((template, _), reply) in refused.iter().zip(&replies) {
        assert_eq!(
            reply.status,
            reqwest::StatusCode::SERVICE_UNAVAILABLE,
            "{template}"
        );
        assert!(reply.headers.contains_key("retry-after"), "{template}");
        c.check("get", template, reply);
    }
    drop(holding);
    busy.stop().await;
    upload_store_unavailable(&mut c).await;

    let missing: Vec<_> = c.documented().difference(&c.seen).cloned().collect();
    assert!(missing.is_empty(), "documented but never exercised: {missing:?}");
    // Sanity: the checker does reject a body that breaks the document.
    let bad = Reply {
        status: reqwest::StatusCode::OK,
        headers: Default::default(),
        bytes: b"{}".to_vec(),
        json: json!({"frameworks": "claudecode"}),
    };
    let rejected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.check("get", "/api/frameworks", &bad)
    }));
    assert!(rejected.is_err(), "a wrong body must fail validation");
}

/// The routes that answer `UploadStoreUnavailable`, with the database keeping the uploads
/// (`--upload-store postgres`) down. PostgreSQL only: without `DATABASE_URL` they are
/// counted as seen after a note (outside CI; with `CI=true` the test fails).
async fn upload_store_unavailable(c: &mut Checker) {
    let unavailable = "#/components/responses/UploadStoreUnavailable";
    let Some(db) = crate::cluster::shared_database("the upload store's 503 in openapi.yaml").await else {
        let documented: Vec<_> = c
            .documented()
            .into_iter()
            .filter(|(path, method, status)| {
                c.spec["paths"][path][method]["responses"][status]["$ref"] == unavailable
            })
            .collect();
        c.seen.extend(documented);
        return;
    };
    let (relay, relayed) = crate::labels::Relay::of_url(db.url.as_deref().unwrap()).await;
    let server = TestServer::start(Options {
        database_url: Some(relayed),
        upload_store: sessiongraph::store::UploadStoreKind::Postgres,
        ..Options::default()
    })
    .await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    relay.cut();
    let upload = server
        .upload_fixture_reply("pi", "pi/before-compaction.jsonl")
        .await;
    let replies = [
        ("post", "/api/upload", upload),
        ("get", "/api/sessions", server.get("/api/sessions").await),
        (
            "get",
            "/api/graph/{id}/info",
            server.get(&format!("/api/graph/{id}/info")).await,
        ),
        (
            "delete",
            "/api/session/{id}",
            server.delete(&format!("/api/session/{id}")).await,
        ),
        (
            "get",
            "/api/graph/{id}",
            server.get(&format!("/api/graph/{id}")).await,
        ),
    ];
    for (method, template, reply) in &replies {
        assert_eq!(reply.status.as_u16(), 503, "{method} {template}: {}", reply.json);
        assert!(reply.headers.contains_key("retry-after"), "{method} {template}");
        c.check(method, template, reply);
    }
    relay.restore().await;
    server.stop().await;
    db.cleanup().await;
}

/// `POST /api/parse-for-dialog`: content, a file in a sessions directory, and each refusal.
async fn parse_for_dialog(c: &mut Checker, server: &TestServer) {
    let template = "/api/parse-for-dialog";
    let main = std::fs::read_to_string(fixture(
        "synthetic/edge_cases/11111111-2222-4333-8444-555555555555.jsonl",
    ))
    .unwrap();
    let bodies = [
        serde_json::json!({ "content": main }),
        serde_json::json!({ "filePath": "subagents/11111111-2222-4333-8444-555555555555.jsonl" }),
        serde_json::json!({}),
        serde_json::json!({ "content": "not json\n" }),
        serde_json::json!({ "filePath": "/etc/passwd" }),
        serde_json::json!({ "filePath": "subagents/none.jsonl" }),
    ];
    for body in &bodies {
        c.check("post", template, &server.post_json(template, body, &[]).await);
    }
    let plain = server
        .post_bytes(template, b"{}".to_vec(), &[("content-type", "text/plain")])
        .await;
    c.check("post", template, &plain);
    let too_big = server
        .post_head_only(template, "application/json", (8 << 20) + 1)
        .await;
    c.check("post", template, &too_big);
}

/// The round routes, and the queue, agreement and export within a round: every
/// documented status of each.
async fn round_routes(c: &mut Checker, server: &TestServer, id: &str) {
    let body = json!({ "name": "r", "selection": { "sessions": [id] }, "sample": { "size": 3, "seed": 1 }, "overlap": 1 });
    let preview = server.post_json("/api/rounds?dry_run=true", &body, &[]).await;
    assert_eq!(preview.status.as_u16(), 200, "{}", preview.json);
    c.check("post", "/api/rounds", &preview);
    let created = server.post_json("/api/rounds", &body, &[]).await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    c.check("post", "/api/rounds", &created);
    let round = created.json["round"]["id"].as_str().unwrap().to_owned();
    let mut bad = body.clone();
    bad["sample"]["size"] = json!(0);
    let refused = server.post_json("/api/rounds", &bad, &[]).await;
    assert_eq!(refused.status.as_u16(), 400);
    c.check("post", "/api/rounds", &refused);
    let text = server
        .post_bytes(
            "/api/rounds",
            b"name=r".to_vec(),
            &[("content-type", "text/plain")],
        )
        .await;
    assert_eq!(text.status.as_u16(), 415);
    c.check("post", "/api/rounds", &text);
    c.check("get", "/api/rounds", &server.get("/api/rounds").await);
    for (template, good) in [
        ("/api/rounds/{id}", format!("/api/rounds/{round}")),
        ("/api/rounds/{id}/units", format!("/api/rounds/{round}/units")),
        (
            "/api/rounds/{id}/agreement",
            format!("/api/rounds/{round}/agreement"),
        ),
    ] {
        let reply = server.get(&good).await;
        assert_eq!(reply.status.as_u16(), 200, "{good}: {}", reply.json);
        c.check("get", template, &reply);
        let missing = server.get(&template.replace("{id}", "r0000000000000000")).await;
        assert_eq!(missing.status.as_u16(), 404, "{template}");
        c.check("get", template, &missing);
    }
    let closed = server
        .post_json(&format!("/api/rounds/{round}/close"), &json!({}), &[])
        .await;
    assert_eq!(closed.status.as_u16(), 200);
    c.check("post", "/api/rounds/{id}/close", &closed);
    let ask = json!({ "annotator": "ann.r", "round": round });
    let refused = server.post_json("/api/labels/queue/next", &ask, &[]).await;
    assert_eq!(refused.status.as_u16(), 409, "{}", refused.json);
    c.check("post", "/api/labels/queue/next", &refused);
    let reopened = server
        .post_json(&format!("/api/rounds/{round}/reopen"), &json!({}), &[])
        .await;
    assert_eq!(reopened.status.as_u16(), 200);
    c.check("post", "/api/rounds/{id}/reopen", &reopened);
    for template in ["/api/rounds/{id}/close", "/api/rounds/{id}/reopen"] {
        let path = template.replace("{id}", "r0000000000000000");
        let missing = server.post_json(&path, &json!({}), &[]).await;
        assert_eq!(missing.status.as_u16(), 404);
        c.check("post", template, &missing);
    }
    let next = server.post_json("/api/labels/queue/next", &ask, &[]).await;
    assert_eq!(next.status.as_u16(), 200, "{}", next.json);
    c.check("post", "/api/labels/queue/next", &next);
    let agreement = server.get(&format!("/api/labels/agreement?round={round}")).await;
    assert_eq!(agreement.status.as_u16(), 200);
    c.check("get", "/api/labels/agreement", &agreement);
}

/// The label routes: every documented status of each.
async fn label_routes(c: &mut Checker, server: &TestServer, id: &str) {
    use crate::labels::{delete, put, quote_of, texty, units};
    const SET: &str = "/api/graph/{id}/labels/{event_id}";
    const LIST: &str = "/api/graph/{id}/labels";
    const HISTORY: &str = "/api/graph/{id}/labels/{event_id}/history";
    let (event, text) = texty(&units(server, id).await);
    let path = format!("/api/graph/{id}/labels/{event}");
    let body = json!({
        "annotator": "ann.a", "status": "submitted", "note": "n", "lead_time": 3,
        "labels": [{"id": "TASK_DECOMPOSITION", "confidence": 0.5,
                    "evidence": {"quote": quote_of(&text), "cue": "steps"},
                    "fields": {"decomposition": ["a"]}}]
    });
    let created = put(server, &path, &body, None).await;
    assert_eq!(created.status, reqwest::StatusCode::CREATED);
    c.check("put", SET, &created);
    let replaced = put(server, &path, &body, Some("\"labels-1\"")).await;
    assert_eq!(replaced.status, reqwest::StatusCode::OK);
    c.check("put", SET, &replaced);
    let untyped = Reply::read(
        server
            .client
            .put(format!("{}{path}", server.url))
            .header("content-type", "text/plain")
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(untyped.status, reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    c.check("put", SET, &untyped);
    for (reply, status) in [
        (put(server, &path, &body, Some("\"labels-1\"")).await, 412),
        (
            put(
                server,
                &path,
                &json!({"annotator": "ann.b", "status": "draft", "labels": []}),
                Some("*"),
            )
            .await,
            412,
        ),
        (
            put(
                server,
                &path,
                &json!({"annotator": "ann.a", "status": "draft", "labels": [{"id": "NOPE"}]}),
                None,
            )
            .await,
            400,
        ),
        (
            put(
                server,
                &path,
                &json!({"annotator": "ann.a", "status": "adjudicated", "labels": []}),
                None,
            )
            .await,
            403,
        ),
        (put(server, "/api/graph/nope/labels/x", &body, None).await, 404),
        (
            put(server, &path, &json!({"note": "x".repeat(3 << 20)}), None).await,
            413,
        ),
        (
            put(
                server,
                &format!("/api/graph/{id}/labels/no-such-unit"),
                &body,
                None,
            )
            .await,
            404,
        ),
    ] {
        assert_eq!(reply.status.as_u16(), status, "{}", reply.json);
        c.check("put", SET, &reply);
    }
    for (path, status) in [
        (format!("/api/graph/{id}/labels"), 200),
        (
            format!("/api/graph/{id}/labels?annotator=ann.a&status=submitted&label=TASK_DECOMPOSITION"),
            200,
        ),
        (format!("/api/graph/{id}/labels?status=done"), 400),
        ("/api/graph/nope/labels".to_owned(), 404),
    ] {
        let reply = server.get(&path).await;
        assert_eq!(reply.status.as_u16(), status, "{path}: {}", reply.json);
        c.check("get", LIST, &reply);
    }
    for (path, status) in [
        (format!("{path}/history"), 200),
        (format!("{path}/history?annotator=ann.a"), 200),
        ("/api/graph/nope/labels/x/history".to_owned(), 404),
        (format!("{path}/history?codebook=nope"), 400),
    ] {
        let reply = server.get(&path).await;
        assert_eq!(reply.status.as_u16(), status, "{path}: {}", reply.json);
        c.check("get", HISTORY, &reply);
    }
    for (query, if_match, status) in [
        ("", None, 400),
        ("?annotator=ann.a", Some("\"labels-1\""), 412),
        ("?annotator=ann.a", Some("\"labels-2\""), 204),
        ("?annotator=ann.a", None, 404),
    ] {
        let reply = delete(server, &format!("{path}{query}"), if_match).await;
        assert_eq!(reply.status.as_u16(), status, "{query}: {}", reply.json);
        c.check("delete", SET, &reply);
    }
    let history = server.get(&format!("{path}/history")).await;
    c.check("get", HISTORY, &history);
}

/// The label writes while another connection holds SQLite's write lock: each waits out the
/// busy timeout (10 s, all at once), then answers 503 with `Retry-After`.
async fn busy_label_store(c: &mut Checker, server: &TestServer, id: &str) {
    use crate::labels::{delete, hold_write_lock, put, release_write_lock, texty, units};
    let (event, _) = texty(&units(server, id).await);
    let set = format!("/api/graph/{id}/labels/{event}");
    let line = json!({"session_id": id, "event_id": event, "annotator": "ann.c", "labels": []});
    let body = json!({"annotator": "ann.c", "status": "draft", "labels": []});
    let removed = format!("{set}?annotator=ann.a");
    let (ask, unit) = (
        json!({"annotator": "q", "session": id}),
        json!({"annotator": "q", "session_id": id, "event_id": event}),
    );
    let lock = hold_write_lock(server).await;
    let (put, delete, next, release, import) = tokio::join!(
        put(server, &set, &body, None),
        delete(server, &removed, None),
        server.post_json("/api/labels/queue/next", &ask, &[]),
        server.post_json("/api/labels/queue/release", &unit, &[]),
        server.post_bytes(
            "/api/labels/import",
            format!("{line}\n").into_bytes(),
            &[("content-type", "application/x-ndjson")]
        ),
    );
    release_write_lock(lock).await;
    for (method, template, reply) in [
        ("put", "/api/graph/{id}/labels/{event_id}", &put),
        ("delete", "/api/graph/{id}/labels/{event_id}", &delete),
        ("post", "/api/labels/queue/next", &next),
        ("post", "/api/labels/queue/release", &release),
        ("post", "/api/labels/import", &import),
    ] {
        assert_eq!(
            reply.status,
            reqwest::StatusCode::SERVICE_UNAVAILABLE,
            "{template}: {}",
            reply.json
        );
        assert!(reply.headers.contains_key("retry-after"), "{template}");
        c.check(method, template, reply);
    }
    assert_eq!(import.json["details"]["next_line"], 1, "{}", import.json);
}

/// `GET /api/search`: results (with text, filters, labels), bad parameters, and a label
/// filter naming another annotator's sets in blind mode.
async fn search_routes(c: &mut Checker, server: &TestServer) {
    for query in [
        "q=migration&limit=3",
        "q=plan%20OR%20tests&tool=Bash&failed=false&offset=1",
        "unit_type=user_turn&from=2025-01-01T00:00:00Z",
        "labeled=true&annotator=ann.a",
        "label=EXEC_COGNITIVE&labeled=false&limit=1",
        "q=zzzznothing",
    ] {
        let reply = server.get(&format!("/api/search?{query}")).await;
        assert_eq!(reply.status, reqwest::StatusCode::OK, "{query}: {}", reply.json);
        c.check("get", "/api/search", &reply);
    }
    for query in ["limit=0", "q=(", "framework=cobol", "label=NOPE"] {
        let reply = server.get(&format!("/api/search?{query}")).await;
        assert_eq!(reply.status, reqwest::StatusCode::BAD_REQUEST, "{query}");
        c.check("get", "/api/search", &reply);
    }
    let blind = TestServer::start(Options {
        api_keys: vec!["alice:k-alice".into()],
        label_policy: sessiongraph::labels::LabelPolicy {
            blind: true,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let refused = blind
        .get_with(
            "/api/search?annotator=bob",
            &[("authorization", "Bearer k-alice")],
        )
        .await;
    assert_eq!(refused.status, reqwest::StatusCode::FORBIDDEN);
    c.check("get", "/api/search", &refused);
    blind.stop().await;
}

/// The routes across sessions (import, queue, agreement, progress, export) and the
/// annotations body with labels: every documented status of each.
async fn labeling_routes(c: &mut Checker, server: &TestServer, id: &str) {
    use crate::labels::{put, texty, units};
    let (event, _) = texty(&units(server, id).await);
    let set =
        |who: &str| json!({"annotator": who, "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]});
    for who in ["ann.a", "ann.b"] {
        let written = put(
            server,
            &format!("/api/graph/{id}/labels/{event}"),
            &set(who),
            None,
        )
        .await;
        assert!(written.status.is_success(), "{}", written.json);
    }
    let labeled = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert!(labeled.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["labels"] != json!([])));
    c.check("get", "/api/graph/{id}/annotations", &labeled);
    c.check(
        "get",
        "/api/graph/{id}/annotations",
        &server
            .get(&format!("/api/graph/{id}/annotations?annotator=ann.a"))
            .await,
    );

    const IMPORT: &str = "/api/labels/import";
    let line = json!({"session_id": id, "event_id": event, "model": "m", "score": 0.5, "labels": []});
    let jsonl = format!("{line}\n{{\"session_id\": 1}}\n").into_bytes();
    let imported = server
        .post_bytes(IMPORT, jsonl, &[("content-type", "application/x-ndjson")])
        .await;
    assert_eq!(imported.json["failed"], 1, "{}", imported.json);
    c.check("post", IMPORT, &imported);
    let tasks = server
        .get(&format!("/api/labels/export?format=label-studio&session={id}"))
        .await;
    assert_eq!(tasks.status, reqwest::StatusCode::OK);
    c.check("get", "/api/labels/export", &tasks);
    let from_ls = server
        .post_bytes(
            &format!("{IMPORT}?format=label-studio"),
            tasks.bytes.clone(),
            &[("content-type", "application/json")],
        )
        .await;
    c.check("post", IMPORT, &from_ls);
    for (path, body) in [
        (format!("{IMPORT}?format=csv"), b"x".to_vec()),
        (format!("{IMPORT}?format=label-studio"), b"{}".to_vec()),
        (IMPORT.to_owned(), vec![0xff, 0xfe]),
    ] {
        let reply = server
            .post_bytes(&path, body, &[("content-type", "application/x-ndjson")])
            .await;
        assert_eq!(reply.status, reqwest::StatusCode::BAD_REQUEST, "{path}");
        c.check("post", IMPORT, &reply);
    }
    let untyped = server
        .post_bytes(IMPORT, b"{}".to_vec(), &[("content-type", "text/plain")])
        .await;
    assert_eq!(untyped.status, reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    c.check("post", IMPORT, &untyped);
    let too_big = server
        .post_head_only(IMPORT, "application/x-ndjson", (64 << 20) + 1)
        .await;
    assert_eq!(too_big.status, reqwest::StatusCode::PAYLOAD_TOO_LARGE);
    c.check("post", IMPORT, &too_big);

    const NEXT: &str = "/api/labels/queue/next";
    const RELEASE: &str = "/api/labels/queue/release";
    let next = server
        .post_json(NEXT, &json!({"annotator": "q", "session": id, "overlap": 2}), &[])
        .await;
    assert_eq!(next.json["done"], false, "{}", next.json);
    c.check("post", NEXT, &next);
    let reserved = next.json["reservation"]["event_id"].clone();
    for (body, status) in [
        (json!({"annotator": "q", "session": id, "overlap": 0}), 400),
        (json!({"annotator": "q", "session": id, "overlap": 3}), 400),
        (json!({"annotator": "q", "session": "nope"}), 404),
    ] {
        let reply = server.post_json(NEXT, &body, &[]).await;
        assert_eq!(reply.status.as_u16(), status, "{}", reply.json);
        c.check("post", NEXT, &reply);
    }
    for (body, status) in [
        (
            json!({"annotator": "q", "session_id": id, "event_id": reserved}),
            204,
        ),
        (
            json!({"annotator": "q", "session_id": id, "event_id": reserved}),
            404,
        ),
        (json!({"annotator": "q"}), 400),
    ] {
        let reply = server.post_json(RELEASE, &body, &[]).await;
        assert_eq!(reply.status.as_u16(), status, "{}", reply.json);
        c.check("post", RELEASE, &reply);
    }
    for path in [NEXT, RELEASE] {
        let untyped = server
            .post_bytes(path, b"{}".to_vec(), &[("content-type", "text/plain")])
            .await;
        assert_eq!(
            untyped.status,
            reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{path}"
        );
        c.check("post", path, &untyped);
    }

    for (template, path, status) in [
        (
            "/api/labels/agreement",
            format!("/api/labels/agreement?session={id}"),
            200,
        ),
        ("/api/labels/agreement", "/api/labels/agreement".to_owned(), 200),
        (
            "/api/labels/agreement",
            "/api/labels/agreement?label=NOPE".to_owned(),
            400,
        ),
        (
            "/api/labels/agreement",
            "/api/labels/agreement?session=nope".to_owned(),
            404,
        ),
        ("/api/labels/progress", "/api/labels/progress".to_owned(), 200),
        (
            "/api/labels/progress",
            format!("/api/labels/progress?session={id}"),
            200,
        ),
        (
            "/api/labels/progress",
            "/api/labels/progress?session=nope".to_owned(),
            404,
        ),
        ("/api/labels/export", "/api/labels/export".to_owned(), 200),
        (
            "/api/labels/export",
            "/api/labels/export?format=label-studio-config".to_owned(),
            200,
        ),
        (
            "/api/labels/export",
            "/api/labels/export?format=csv".to_owned(),
            400,
        ),
        (
            "/api/labels/export",
            "/api/labels/export?session=nope".to_owned(),
            404,
        ),
    ] {
        let reply = server.get(&path).await;
        assert_eq!(reply.status.as_u16(), status, "{path}: {}", reply.json);
        c.check("get", template, &reply);
    }
}
