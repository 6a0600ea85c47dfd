//! A shared deployment: API keys, read-only mode, the CORS allowlist, security headers, and
//! errors that say nothing about the server's own files.

use reqwest::StatusCode;

use crate::helpers::fixture;
use crate::helpers::records::Record;
use crate::server::{fixture_files, graph_id, upload_form, Options, Reply, TestServer};

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
        "etag,retry-after,x-labels"
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
    let prompt = Record::prompt("p1", "hello").line();
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
    let mut lines = vec![prompt];
    lines.extend(broken.iter().cloned());
    let loaded = server
        .upload_raw("framework=claudecode", lines.join("\n").into_bytes())
        .await;
    let id = graph_id(&loaded);
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

/// Issue 15: `Authorization: BEARER k` was refused; auth scheme names are case-insensitive
/// (RFC 7235, section 2.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_name_is_case_insensitive() {
    let server = TestServer::start(keyed()).await;
    let path = format!("/api/graph/{SAMPLE}/info");
    for value in [
        "Bearer team-key-one",
        "BEARER team-key-one",
        "bearer team-key-one",
        "bEaReR team-key-one",
        "Bearer   team-key-one",
    ] {
        let reply = get_with(&server, &path, ("authorization", value)).await;
        assert_eq!(reply.status, StatusCode::OK, "{value}: {}", reply.json);
    }
    for value in ["Basic team-key-one", "Bearerteam-key-one", "BEARER wrong-key"] {
        let reply = get_with(&server, &path, ("authorization", value)).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{value}");
    }
    server.stop().await;
}

/// Issue 15: error messages quoted whole what the client sent (a 20 KB `branch=` came back
/// in the 400, a 50 KB `leaf=` in the 404). A quoted value is at most 200 characters,
/// then `…`. (A request target is at most 8 KiB since issue 16: the values here are as
/// long as a target allows.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_messages_quote_at_most_200_characters_of_a_client_value() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let long = "q".repeat(7_000);
    let gzip = [&[0x1f, 0x8b, 8, 0][..], b"not really"].concat();
    let mut replies: Vec<(String, Reply)> = Vec::new();
    for path in [
        format!("/api/graph/{SAMPLE}/workflow?branch={long}"),
        format!("/api/graph/{SAMPLE}/context?leaf={long}"),
        format!("/api/graph/{SAMPLE}?step={long}"),
        format!("/api/graph/{SAMPLE}/workflow?step=1{long}"),
        format!("/api/graph/{SAMPLE}/export?format={long}"),
        format!("/api/graph/{long}"),
        format!("/api/graph/{long}/workflow"),
        format!("/api/graph/{long}/context"),
        format!("/api/graph/{long}/export"),
        format!("/api/graph/{long}/info"),
        format!("/{long}"),
    ] {
        replies.push((path[..40].to_owned(), server.get(&path).await));
    }
    replies.push((
        "DELETE a long id".into(),
        server.delete(&format!("/api/session/{long}")).await,
    ));
    let wrong_method = server
        .client
        .put(format!("{}/api/graph/{long}", server.url))
        .send()
        .await
        .unwrap();
    replies.push(("PUT a long path".into(), Reply::read(wrong_method).await));
    replies.push((
        "a long framework".into(),
        server
            .upload_raw(&format!("framework={long}"), b"{}\n".to_vec())
            .await,
    ));
    replies.push((
        "a long framework field".into(),
        server
            .upload_multipart(
                &[("framework", &long)],
                "file",
                &[("s.jsonl".into(), b"{}\n".to_vec())],
            )
            .await,
    ));
    replies.push((
        "a long file name without conversation".into(),
        server
            .upload_raw(
                &format!("framework=claudecode&filename={long}.jsonl"),
                b"\n \n".to_vec(),
            )
            .await,
    ));
    replies.push((
        "a long file name, compressed".into(),
        server
            .upload_raw(&format!("framework=claudecode&filename={long}.jsonl"), gzip)
            .await,
    ));
    replies.push((
        "a long file name, strict".into(),
        server
            .upload_raw(
                &format!("framework=claudecode&strict=true&filename={long}.jsonl"),
                b"{\"type\":\"user\",\"uuid\":\"a\",\"message\":{\"content\":\"hi\"}}\n{oops\n".to_vec(),
            )
            .await,
    ));
    for (what, reply) in &replies {
        assert!(
            reply.status.is_client_error(),
            "{what}: {} {}",
            reply.status,
            reply.json
        );
        let message = reply.json["message"].as_str().unwrap_or_default();
        assert!(message.contains("…"), "{what}: {message:.300}");
        assert!(
            message.chars().count() < 600,
            "{what}: {} characters",
            message.len()
        );
        assert!(!message.contains(&"q".repeat(201)), "{what}");
        assert!(
            reply.bytes.len() < 1_000,
            "{what}: a body of {} bytes",
            reply.bytes.len()
        );
    }
    server.stop().await;
}

/// A user prompt, a sub-agent turn and a meta file whose text is `marker`: what a link
/// in a sessions directory must never bring into a view.
fn agent_log_saying(marker: &str) -> String {
    std::fs::read_to_string(fixture("synthetic/subagents/agent-aaaa1111.jsonl"))
        .unwrap()
        .replace("Reading two files.", marker)
        .replace("Explore half A", marker)
}

/// D6 (issue 15): `ln -s /outside/secret.json <sessions>/proj/<sid>/subagents/agent-evil.jsonl`
/// served the outside file in `/chatlog?include_subagents=true` and in annotations with
/// `include_sidechains=true`; `/etc/passwd` was read too. Symbolic links in a sessions
/// directory are not followed, whether they lead out of it or stay inside, and whatever
/// they stand for: a sub-agent log (both layouts), a meta file, the `subagents` folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d6_symbolic_links_in_a_sessions_directory_are_never_followed() {
    use std::os::unix::fs::symlink;
    const OUTSIDE: &str = "OUTSIDE-SECRET-7f3a9c";
    const INSIDE: &str = "INSIDE-LINKED-51d2e0";
    let fixture_dir = fixture("synthetic/subagents");
    let main_log = std::fs::read(fixture_dir.join("11111111-2222-4333-8444-555555555555.jsonl")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    std::fs::write(o.join("secret.jsonl"), agent_log_saying(OUTSIDE)).unwrap();
    std::fs::write(
        o.join("secret.meta.json"),
        format!(r#"{{"toolUseId":"toolu_task1","agentType":"{OUTSIDE}"}}"#),
    )
    .unwrap();
    std::fs::create_dir_all(o.join("agents")).unwrap();
    std::fs::write(o.join("agents/agent-aaaa1111.jsonl"), agent_log_saying(OUTSIDE)).unwrap();

    let sessions = tempfile::tempdir().unwrap();
    let s = sessions.path();
    // Nested layout: links out of the tree (a log, a meta file, /etc/passwd) and one inside it.
    let nested = "dddddddd-0000-4000-8000-000000000001";
    std::fs::create_dir_all(s.join(format!("p1/{nested}/subagents"))).unwrap();
    std::fs::create_dir_all(s.join("p1/kept")).unwrap();
    std::fs::write(s.join(format!("p1/{nested}.jsonl")), &main_log).unwrap();
    std::fs::write(s.join("p1/kept/agent-bbbb2222.txt"), agent_log_saying(INSIDE)).unwrap();
    let sub = s.join(format!("p1/{nested}/subagents"));
    symlink(o.join("secret.jsonl"), sub.join("agent-aaaa1111.jsonl")).unwrap();
    symlink(o.join("secret.meta.json"), sub.join("agent-aaaa1111.meta.json")).unwrap();
    symlink("../../kept/agent-bbbb2222.txt", sub.join("agent-bbbb2222.jsonl")).unwrap();
    symlink("/etc/passwd", sub.join("agent-cccc3333.jsonl")).unwrap();
    // The `subagents` folder itself is a link out of the tree.
    let folder = "dddddddd-0000-4000-8000-000000000002";
    std::fs::create_dir_all(s.join(format!("p2/{folder}"))).unwrap();
    std::fs::write(s.join(format!("p2/{folder}.jsonl")), &main_log).unwrap();
    symlink(o.join("agents"), s.join(format!("p2/{folder}/subagents"))).unwrap();
    // Flat layout: agent logs beside the main log, named by it.
    let flat = "dddddddd-0000-4000-8000-000000000003";
    std::fs::create_dir_all(s.join("p3")).unwrap();
    std::fs::write(s.join(format!("p3/{flat}.jsonl")), &main_log).unwrap();
    symlink(o.join("secret.jsonl"), s.join("p3/agent-aaaa1111.jsonl")).unwrap();
    std::fs::write(s.join("p3/agent-bbbb2222.txt"), agent_log_saying(INSIDE)).unwrap();
    symlink("agent-bbbb2222.txt", s.join("p3/agent-bbbb2222.jsonl")).unwrap();
    symlink("/etc/passwd", s.join("p3/agent-cccc3333.jsonl")).unwrap();
    // A main log that is a link is not a session.
    std::fs::create_dir_all(s.join("p4")).unwrap();
    symlink(
        fixture_dir.join("11111111-2222-4333-8444-555555555555.jsonl"),
        s.join("p4/dddddddd-0000-4000-8000-000000000004.jsonl"),
    )
    .unwrap();

    let server = TestServer::start(Options {
        sessions_dirs: vec![s.to_owned()],
        ..Options::default()
    })
    .await;
    let listed = server.get("/api/sessions").await.json.to_string();
    assert!(
        !listed.contains("dddddddd-0000-4000-8000-000000000004"),
        "{listed}"
    );
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let passwd_line = passwd.lines().next().unwrap_or("root:x:0:0");
    for (id, links) in [
        (
            nested,
            vec![
                format!("{nested}/subagents/agent-aaaa1111.jsonl"),
                format!("{nested}/subagents/agent-aaaa1111.meta.json"),
                format!("{nested}/subagents/agent-bbbb2222.jsonl"),
                format!("{nested}/subagents/agent-cccc3333.jsonl"),
            ],
        ),
        (folder, vec![format!("{folder}/subagents")]),
        (
            flat,
            vec![
                "agent-aaaa1111.jsonl".to_owned(),
                "agent-bbbb2222.jsonl".to_owned(),
                "agent-cccc3333.jsonl".to_owned(),
            ],
        ),
    ] {
        for view in [
            "",
            "/workflow",
            "/annotations?include_sidechains=true",
            "/chatlog?include_subagents=true",
            "/metrics",
            "/branches",
            "/context",
            "/info",
            "/export",
        ] {
            let reply = server.get(&format!("/api/graph/{id}{view}")).await;
            assert_eq!(reply.status, StatusCode::OK, "{id}{view}: {}", reply.json);
            let body = String::from_utf8_lossy(&reply.bytes);
            for secret in [OUTSIDE, INSIDE, passwd_line] {
                assert!(!body.contains(secret), "{id}{view} shows {secret}");
            }
        }
        // Each link is left out, and the diagnostics say why.
        let diagnostics = server.get(&format!("/api/graph/{id}/diagnostics")).await;
        assert_eq!(diagnostics.status, StatusCode::OK);
        let read: Vec<&str> = diagnostics.json["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(read.len(), 1, "{id}: only the main log is read: {read:?}");
        let ignored = &diagnostics.json["ignored_files"];
        for link in &links {
            let entry = ignored
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["file"] == link.as_str())
                .unwrap_or_else(|| panic!("{id}: {link} is not in {ignored}"));
            assert!(
                entry["reason"].as_str().unwrap().contains("symbolic link"),
                "{entry}"
            );
        }
    }
    server.stop().await;
}

/// Regression (F3): with keys off (the default on loopback) a page on another port stored
/// an adjudicated set through `POST /api/labels/import` sent `no-cors` as `text/plain`, a
/// session through a multipart upload, and took queue units; any `Host` was answered, so a
/// page that rebinds its name to 127.0.0.1 read the whole export. Writes from another
/// origin are refused (403), JSON writes must say they are JSON (415), and a loopback
/// server answers only loopback names and those allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f3_cross_site_writes_and_rebinding_hosts_are_refused() {
    use reqwest::Method;
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        cors_origins: vec!["http://localhost:3000".into()],
        allowed_hosts: vec!["labels.team.example".into()],
        ..Options::default()
    })
    .await;
    let units = server.get(&format!("/api/graph/{SAMPLE}/annotations")).await;
    let event = crate::labels::first_coded_unit(&units.json);
    let line = serde_json::json!({"session_id": SAMPLE, "event_id": event, "annotator": "eve", "labels": []});
    let send = |method: Method, path: &str, content_type: &'static str, extra: &[(&'static str, String)]| {
        let mut request = server
            .client
            .request(method, format!("{}{path}", server.url))
            .header("content-type", content_type)
            .body(format!("{line}\n"));
        for (name, value) in extra {
            request = request.header(*name, value);
        }
        async move { Reply::read(request.send().await.unwrap()).await }
    };
    let hostile = [("origin", "http://127.0.0.1:9999".to_owned())];
    let fetch_cross_site = [
        ("origin", "http://attacker.example".to_owned()),
        ("sec-fetch-site", "cross-site".to_owned()),
    ];
    const IMPORT: &str = "/api/labels/import";
    for extra in [&hostile[..], &fetch_cross_site[..]] {
        for content_type in ["text/plain", "application/x-ndjson"] {
            let r = send(Method::POST, IMPORT, content_type, extra).await;
            assert_eq!(
                r.status,
                StatusCode::FORBIDDEN,
                "{content_type} {extra:?}: {}",
                r.json
            );
        }
        let r = send(Method::POST, "/api/labels/queue/next", "text/plain", extra).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.json);
        let form = upload_form(&[], "file", &[("a.jsonl".to_owned(), b"{}\n".to_vec())]);
        let mut upload = server
            .client
            .post(format!("{}/api/upload", server.url))
            .multipart(form);
        for (name, value) in extra {
            upload = upload.header(*name, value);
        }
        let r = Reply::read(upload.send().await.unwrap()).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.json);
    }
    // No Origin (an older browser, or a script): the type still has to be JSON.
    for (path, content_type) in [(IMPORT, "text/plain"), ("/api/labels/queue/next", "text/plain")] {
        let r = send(Method::POST, path, content_type, &[]).await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path}: {}", r.json);
    }
    let put = send(
        Method::PUT,
        &format!("/api/graph/{SAMPLE}/labels/{event}"),
        "text/plain",
        &[],
    )
    .await;
    assert_eq!(put.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", put.json);
    assert_eq!(
        server.get(&format!("/api/graph/{SAMPLE}/labels")).await.json["total"],
        0
    );

    // The server's own pages, an allowed origin, and clients without Origin may write.
    let own = [("origin", server.url.clone())];
    let same_origin = [("sec-fetch-site", "same-origin".to_owned())];
    let allowed = [
        ("origin", "http://localhost:3000".to_owned()),
        ("sec-fetch-site", "same-site".to_owned()),
    ];
    for extra in [&own[..], &same_origin[..], &allowed[..], &[]] {
        let r = send(Method::POST, IMPORT, "application/x-ndjson", extra).await;
        assert_eq!(
            (r.status, &r.json["ok"]),
            (StatusCode::OK, &serde_json::json!(1)),
            "{extra:?}: {}",
            r.json
        );
    }

    // A rebinding page's Host is refused, reads included; the probes answer any host.
    let host = |name: &'static str| ("host", name);
    let rebound = server
        .get_with("/api/labels/export", &[host("attacker.example:8080")])
        .await;
    assert_eq!(rebound.status, StatusCode::FORBIDDEN, "{}", rebound.json);
    assert!(rebound.json["message"]
        .as_str()
        .unwrap()
        .contains("--allowed-host"));
    assert_eq!(
        server.get_with("/", &[host("attacker.example")]).await.status,
        StatusCode::FORBIDDEN
    );
    for name in ["localhost:8080", "labels.team.example", "127.0.0.1"] {
        let ok = server.get_with("/api/labels/export", &[("host", name)]).await;
        assert_eq!(ok.status, StatusCode::OK, "{name}");
    }
    assert_eq!(
        server.get_with("/healthz", &[host("10.1.2.3:8080")]).await.status,
        StatusCode::OK
    );
    server.stop().await;
}
