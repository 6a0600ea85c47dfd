//! A shared deployment: API keys, read-only mode, the CORS allowlist, security headers, and
//! errors that say nothing about the server's own files.

use reqwest::StatusCode;

use crate::helpers::fixture;
use crate::server::{fixture_files, Options, Reply, TestServer};

const SAMPLE: &str = "ab51623b-c26d-45f5-b98e-f9d0cfa17018";

fn keyed() -> Options {
    Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        api_keys: vec!["team-key-one".into(), "team-key-two".into()],
        ..Options::default()
    }
}

async fn get_with(server: &TestServer, path: &str, header: (&str, &str)) -> Reply {
    let response = server
        .client
        .get(format!("{}{path}", server.url))
        .header(header.0, header.1)
        .send()
        .await
        .unwrap();
    Reply::read(response).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_api_keys_every_route_but_the_probes_wants_one() {
    let server = TestServer::start(keyed()).await;
    let path = format!("/api/graph/{SAMPLE}/annotations");

    let none = server.get(&path).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert_eq!(none.json["error"], "Unauthorized");
    assert!(none.json["message"].as_str().unwrap().contains("API key"));
    assert_eq!(none.headers["www-authenticate"], "Bearer realm=\"sessiongraph\"");

    let wrong = get_with(&server, &path, ("authorization", "Bearer team-key-on")).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong.json["message"], "The API key is not valid");

    let bearer = get_with(&server, &path, ("authorization", "Bearer team-key-two")).await;
    assert_eq!(bearer.status, StatusCode::OK);
    assert_eq!(bearer.json["total"], 105);
    let header = get_with(&server, &path, ("x-api-key", "team-key-one")).await;
    assert_eq!(header.status, StatusCode::OK);

    for probe in ["/healthz", "/readyz"] {
        assert_eq!(server.get(probe).await.status, StatusCode::OK, "{probe}");
    }
    for open in ["/api/sessions", "/api/frameworks", "/nope"] {
        assert_eq!(server.get(open).await.status, StatusCode::UNAUTHORIZED, "{open}");
    }

    // An upload without a key is refused before its body is read: nothing is stored.
    let sample = fixture_files(&fixture("commugraph-sample"));
    let upload = server
        .upload_multipart(&[("framework", "claudecode")], "file", &sample)
        .await;
    assert_eq!(upload.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        server.state.store.parses(),
        1,
        "only the keyed annotations request parsed"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_refuses_uploads_and_deletions_and_serves_the_rest() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        read_only: true,
        ..Options::default()
    })
    .await;
    let sample = fixture_files(&fixture("commugraph-sample"));
    let upload = server
        .upload_multipart(&[("framework", "claudecode")], "file", &sample)
        .await;
    assert_eq!(upload.status, StatusCode::FORBIDDEN);
    assert_eq!(upload.json["error"], "Forbidden");
    assert!(upload.json["message"].as_str().unwrap().contains("read-only"));
    let raw = server
        .upload_raw("framework=claudecode", sample[0].1.clone())
        .await;
    assert_eq!(raw.status, StatusCode::FORBIDDEN);
    let delete = server.delete(&format!("/api/session/{SAMPLE}")).await;
    assert_eq!(delete.status, StatusCode::FORBIDDEN);

    let uploads = std::fs::read_dir(server.data_dir.join("uploads"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(uploads, 0, "nothing was written");
    let annotations = server.get(&format!("/api/graph/{SAMPLE}/annotations")).await;
    assert_eq!(annotations.status, StatusCode::OK);
    assert_eq!(server.get("/api/sessions").await.status, StatusCode::OK);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_only_the_allowed_origins() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        cors_origins: vec!["http://localhost:3000".into()],
        ..Options::default()
    })
    .await;
    let allowed = get_with(&server, "/api/sessions", ("origin", "http://localhost:3000")).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(
        allowed.headers["access-control-allow-origin"],
        "http://localhost:3000"
    );
    assert_eq!(
        allowed.headers["access-control-expose-headers"],
        "etag,retry-after"
    );

    let other = get_with(&server, "/api/sessions", ("origin", "http://evil.example")).await;
    assert!(!other.headers.contains_key("access-control-allow-origin"));

    let preflight = server
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/api/upload", server.url))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-api-key, content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::OK);
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
    // Either way of sending a key works from a browser (found in review: X-API-Key was
    // not an allowed header).
    let allowed_headers = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    for header in ["authorization", "x-api-key", "content-type"] {
        assert!(allowed_headers.contains(header), "{allowed_headers}");
    }
    server.stop().await;

    // Without allowed origins, no CORS header at all.
    let closed = TestServer::start(Options::default()).await;
    let reply = get_with(&closed, "/api/sessions", ("origin", "http://localhost:3000")).await;
    assert!(!reply.headers.contains_key("access-control-allow-origin"));
    closed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_security_headers() {
    let server = TestServer::start(keyed()).await;
    let ok = get_with(&server, "/api/sessions", ("x-api-key", "team-key-one")).await;
    let not_found = get_with(&server, "/api/graph/nope/workflow", ("x-api-key", "team-key-one")).await;
    let unauthorized = server.get("/api/sessions").await;
    let health = server.get("/healthz").await;
    for (what, reply) in [
        ("200", &ok),
        ("404", &not_found),
        ("401", &unauthorized),
        ("healthz", &health),
    ] {
        assert_eq!(reply.headers["x-content-type-options"], "nosniff", "{what}");
        assert_eq!(reply.headers["x-frame-options"], "DENY", "{what}");
        assert_eq!(reply.headers["referrer-policy"], "no-referrer", "{what}");
        assert_eq!(
            reply.headers["content-security-policy"], "default-src 'none'; frame-ancestors 'none'",
            "{what}"
        );
        assert!(reply.headers.contains_key("x-request-id"), "{what}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_names_the_servers_own_directories() {
    let sessions = tempfile::tempdir().unwrap();
    let project = sessions.path().join("-home-someone-secret-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("11111111-2222-4333-8444-555555555555.jsonl"),
        b"{not json\n{\"type\":\"user\",\"uuid\":\"a\",\"message\":{\"content\":\"hello there\"}}\n",
    )
    .unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![sessions.path().to_owned()],
        ..Options::default()
    })
    .await;
    let id = "11111111-2222-4333-8444-555555555555";
    let mut replies = Vec::new();
    for path in [
        "/api/sessions".to_owned(),
        format!("/api/graph/{id}/diagnostics"),
        format!("/api/graph/{id}/info"),
        format!("/api/graph/{id}/workflow"),
        "/api/graph/missing/workflow".to_owned(),
        format!("/api/session/{id}"),
    ] {
        replies.push(server.get(&path).await);
    }
    replies.push(server.delete(&format!("/api/session/{id}")).await);
    replies.push(
        server
            .upload_raw("framework=claudecode", b"\x00\x01garbage".to_vec())
            .await,
    );
    let roots = [
        sessions.path().to_string_lossy().into_owned(),
        server.data_dir.to_string_lossy().into_owned(),
    ];
    for reply in &replies {
        let body = String::from_utf8_lossy(&reply.bytes);
        for root in &roots {
            assert!(!body.contains(root.as_str()), "{root} in {body}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_error_or_diagnostic_echoes_what_a_file_contains() {
    let server = TestServer::start(Options::default()).await;
    const SECRET: &str = "sk-secret-0f9e8d7c";
    let prompt = r#"{"type":"user","uuid":"p1","parentUuid":null,"message":{"content":"hello"}}"#;
    let broken = [
        format!(r#"{{"type":"user","uuid":"b1","message":{{"content":"{SECRET}"#),
        format!(r#"{{"type":"user","uuid":"b2","message":{{"content":"{SECRET}\q"}}}}"#),
        format!(r#"{{"type":"user","uuid":{{"{SECRET}":1}},"parentUuid":["{SECRET}"]}}"#),
        format!(r#"{{"type":"assistant","uuid":"b4","message":"{SECRET}","timestamp":"{SECRET}"}}"#),
        format!(r#"{{"type":"user","uuid":"b5","message":{{"content":[{{"type":"{SECRET}"}}]}}}}"#),
        format!(r#"["{SECRET}"]"#),
        format!(r#"{SECRET} {{"#),
    ];
    // Only broken lines: refused; broken lines next to a good one: loaded with diagnostics.
    let refused = server
        .upload_raw("framework=claudecode", broken[..2].join("\n").into_bytes())
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.json);
    let mut bodies = vec![refused];
    let mut lines = vec![prompt.to_owned()];
    lines.extend(broken.iter().cloned());
    let loaded = server
        .upload_raw("framework=claudecode", lines.join("\n").into_bytes())
        .await;
    assert_eq!(loaded.status, StatusCode::OK, "{}", loaded.json);
    let id = loaded.json["graph_id"].as_str().unwrap().to_owned();
    assert!(
        loaded.json["diagnostics"]["bad_lines"].as_u64() >= Some(3),
        "{}",
        loaded.json
    );
    bodies.push(loaded);
    bodies.push(server.get(&format!("/api/graph/{id}/diagnostics")).await);
    bodies.push(server.get(&format!("/api/graph/{id}/info")).await);
    for reply in &bodies {
        let body = String::from_utf8_lossy(&reply.bytes);
        assert!(!body.contains(SECRET), "{body}");
    }
    server.stop().await;
}

/// Found in review: a refused request declaring a body it never sends held its connection
/// until the request timeout while the server drained the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_cannot_hold_its_connection_with_a_body_it_never_sends() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TestServer::start(Options {
        read_only: true,
        ..keyed()
    })
    .await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    for (head, status) in [
        ("GET /api/sessions HTTP/1.1", "401"),
        (
            "POST /api/upload?framework=claudecode HTTP/1.1\r\nx-api-key: team-key-one",
            "403",
        ),
    ] {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let request = format!("{head}\r\nhost: {addr}\r\ncontent-length: 1000000\r\n\r\n{{");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let closed = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stream.read_to_end(&mut answer),
        )
        .await;
        assert!(closed.is_ok(), "{head}: still open after 10 s");
        let text = String::from_utf8_lossy(&answer).to_lowercase();
        assert!(text.starts_with(&format!("http/1.1 {status}")), "{text}");
        assert!(text.contains("connection: close"), "{text}");
    }
    server.stop().await;
}
