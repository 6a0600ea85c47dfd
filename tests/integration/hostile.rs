//! Hostile input, through the upload route and through the disk loader: every case gets a
//! clear JSON error or loads with a diagnostic, and the server serves everything else
//! afterwards.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::records::Record;
use crate::helpers::{fixture, tiny_chain, SmallDisk};
use crate::server::{Options, Reply, TestServer};

const SAMPLE: &str = "ab51623b-c26d-45f5-b98e-f9d0cfa17018";
const MAIN: &str = "11111111-2222-4333-8444-555555555555.jsonl";

/// A prompt that makes a session of any file it is added to.
fn prompt(uuid: &str) -> String {
    Record::prompt(uuid, "Please look at this")
        .at("2025-12-01T10:00:00.000Z")
        .line()
}

/// Lines joined with newlines, one at the end.
fn jsonl(lines: &[String]) -> Vec<u8> {
    let mut out = lines.join("\n").into_bytes();
    out.push(b'\n');
    out
}

/// What a case must get.
enum Expect {
    /// A JSON error with this status whose message contains this text.
    Error(StatusCode, &'static str),
    /// Accepted; the upload's diagnostics summary satisfies the check.
    Loaded(fn(&Value) -> bool),
}

fn assert_outcome(case: &str, reply: &Reply, expect: &Expect) {
    match expect {
        Expect::Error(status, text) => {
            assert_eq!(reply.status, *status, "{case}: {}", reply.json);
            let error = reply.json["error"].as_str().unwrap_or_default();
            assert!(
                error == status.canonical_reason().unwrap_or("") || error == "Parse Error",
                "{case}: {}",
                reply.json
            );
            let message = reply.json["message"].as_str().unwrap_or_default();
            assert!(message.contains(text), "{case}: {message:?} lacks {text:?}");
        }
        Expect::Loaded(check) => {
            assert_eq!(reply.status, StatusCode::OK, "{case}: {}", reply.json);
            assert!(
                check(&reply.json["diagnostics"]),
                "{case}: {}",
                reply.json["diagnostics"]
            );
        }
    }
}

/// The server still answers: health, and a view of the bundled sample.
async fn assert_still_serving(server: &TestServer, case: &str) {
    assert_eq!(
        server.get("/healthz").await.status,
        StatusCode::OK,
        "after {case}"
    );
    let view = server.get(&format!("/api/graph/{SAMPLE}/annotations")).await;
    assert_eq!(view.status, StatusCode::OK, "after {case}");
    assert_eq!(view.json["total"], 105, "after {case}");
}

fn gzip_of(data: &[u8]) -> Vec<u8> {
    // A stored (uncompressed) deflate block is enough to be a real gzip file.
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    out.push(1);
    let len = data.len() as u16;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&[0; 8]);
    out
}

/// The raw-body cases: (name, query, body, expected).
fn raw_cases() -> Vec<(&'static str, &'static str, Vec<u8>, Expect)> {
    let deep_record = format!(
        r#"{{"type":"user","uuid":"deep","x":{}1{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let deep_object = format!("{}{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_001));
    vec![
        (
            "empty body",
            "framework=claudecode",
            Vec::new(),
            // Issue 16, item 7: the file is named and said to be empty.
            Expect::Error(StatusCode::BAD_REQUEST, "is empty (0 bytes): nothing to load"),
        ),
        (
            "whitespace only",
            "framework=claudecode",
            b" \n\t\r\n  \n".to_vec(),
            Expect::Error(StatusCode::BAD_REQUEST, "No conversational records"),
        ),
        (
            "binary garbage",
            "framework=claudecode",
            (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect(),
            Expect::Error(StatusCode::BAD_REQUEST, "line(s) could not be read"),
        ),
        (
            "a gzip file",
            "framework=claudecode",
            gzip_of(&jsonl(&[prompt("g1")])),
            Expect::Error(StatusCode::BAD_REQUEST, "gzip"),
        ),
        (
            "invalid UTF-8 inside a record",
            "framework=claudecode",
            [
                prompt("u1").into_bytes(),
                b"\n{\"type\":\"user\",\"uuid\":\"u2\",\"parentUuid\":\"u1\",\"message\":{\"content\":\"caf\xe9 \xff\"}}\n".to_vec(),
            ]
            .concat(),
            Expect::Loaded(|d| d["repaired_lines"] == 1 && d["bad_lines"] == 0),
        ),
        (
            "lone UTF-16 surrogate escapes",
            "framework=claudecode",
            jsonl(&[
                prompt("s1"),
                r#"{"type":"user","uuid":"s2","parentUuid":"s1","message":{"content":"half \ud83d of a pair, and \udc00"}}"#.into(),
            ]),
            Expect::Loaded(|d| d["repaired_lines"] == 1 && d["bad_lines"] == 0),
        ),
        (
            "JSON arrays and scalars instead of objects",
            "framework=claudecode",
            jsonl(&[
                prompt("a1"),
                "[1,2,3]".into(),
                "42".into(),
                "\"a string\"".into(),
                "null".into(),
                "true".into(),
            ]),
            Expect::Loaded(|d| d["bad_lines"] == 5),
        ),
        (
            "only arrays and scalars",
            "framework=claudecode",
            jsonl(&["[]".into(), "{}".into(), "1".into()]),
            Expect::Error(StatusCode::BAD_REQUEST, "line(s) could not be read"),
        ),
        (
            "nesting 10,000 deep in a skipped field",
            "framework=claudecode",
            jsonl(&[prompt("d0"), deep_record]),
            Expect::Loaded(|d| d["bad_lines"] == 0),
        ),
        (
            "an object nested 10,000 deep",
            "framework=claudecode",
            jsonl(&[prompt("d1"), deep_object]),
            Expect::Loaded(|d| d["bad_lines"] == 1),
        ),
        (
            "duplicate keys in a record",
            "framework=claudecode",
            jsonl(&[
                prompt("k1"),
                r#"{"type":"user","uuid":"k2","uuid":"k3","parentUuid":"k1","message":{"content":"first"},"message":{"content":"second, kept"}}"#.into(),
            ]),
            Expect::Loaded(|d| d["bad_lines"] == 0 && d["repaired_lines"] == 1),
        ),
        (
            "duplicated uuids",
            "framework=claudecode",
            jsonl(&[prompt("x1"), prompt("x1"), prompt("x1")]),
            Expect::Loaded(|d| d["duplicates_removed"] == 2),
        ),
        (
            "a self-parent and a parent cycle",
            "framework=claudecode",
            jsonl(&[
                r#"{"type":"user","uuid":"c0","parentUuid":"c0","message":{"content":"I am my own parent"}}"#.into(),
                r#"{"type":"user","uuid":"c1","parentUuid":"c2","message":{"content":"cycle one"}}"#.into(),
                r#"{"type":"user","uuid":"c2","parentUuid":"c1","message":{"content":"cycle two"}}"#.into(),
            ]),
            Expect::Loaded(|d| d["cycles_broken"].as_u64() >= Some(2)),
        ),
        (
            "an unknown framework",
            "framework=langchain",
            jsonl(&[prompt("f1")]),
            Expect::Error(StatusCode::BAD_REQUEST, "Unknown framework"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_raw_uploads_get_an_error_or_a_diagnostic() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    for (name, query, body, expect) in raw_cases() {
        let reply = server.upload_raw(&format!("{query}&filename={MAIN}"), body).await;
        assert_outcome(name, &reply, &expect);
        assert_still_serving(&server, name).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_files_on_disk_are_listed_and_answered_the_same_way() {
    let sessions = tempfile::tempdir().unwrap();
    let cases = raw_cases();
    for (i, (_, _, body, _)) in cases.iter().enumerate() {
        let dir = sessions.path().join(format!("project-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("aaaaaaaa-0000-4000-8000-{i:012}.jsonl")), body).unwrap();
    }
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample"), sessions.path().to_owned()],
        ..Options::default()
    })
    .await;
    let listed = server.get("/api/sessions").await;
    assert_eq!(listed.status, StatusCode::OK);
    for (i, (name, query, _, expect)) in cases.iter().enumerate() {
        if query.contains("langchain") {
            continue; // a framework is an upload's choice
        }
        let reply = server
            .get(&format!("/api/graph/aaaaaaaa-0000-4000-8000-{i:012}/annotations"))
            .await;
        // A file on disk may be a session Claude Code has only begun: one without
        // conversation is served empty, its diagnostics telling what was in it. A file
        // that cannot be a session at all (compressed) is a JSON error.
        match expect {
            Expect::Error(status, text) if text.contains("gzip") => {
                assert_eq!(reply.status, *status, "{name} on disk: {}", reply.json);
                assert!(
                    reply.json["message"].as_str().unwrap().contains("gzip"),
                    "{name} on disk"
                );
            }
            _ => {
                assert_eq!(reply.status, StatusCode::OK, "{name} on disk: {}", reply.json);
                let diagnostics = server
                    .get(&format!("/api/graph/aaaaaaaa-0000-4000-8000-{i:012}/diagnostics"))
                    .await;
                assert_eq!(diagnostics.status, StatusCode::OK, "{name} on disk");
            }
        }
        assert_still_serving(&server, name).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_multipart_uploads_get_an_error_or_a_diagnostic() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;

    let zero = server
        .upload_multipart(
            &[("framework", "claudecode")],
            "file",
            &[(MAIN.into(), Vec::new())],
        )
        .await;
    assert_outcome(
        "a 0-byte file",
        &zero,
        &Expect::Error(
            StatusCode::BAD_REQUEST,
            "The main session file 11111111-2222-4333-8444-555555555555.jsonl is empty (0 bytes)",
        ),
    );

    // 1,000 files: the main log and 999 sub-agent logs nobody spawned.
    let mut files = vec![(MAIN.to_owned(), jsonl(&[prompt("m1")]))];
    for i in 0..999 {
        let agent = format!("{i:08x}");
        let record = Record::prompt(&format!("a{i}"), &format!("sub-agent task {i}")).sidechain(&agent);
        files.push((format!("agent-{agent}.jsonl"), jsonl(&[record.line()])));
    }
    let many = server
        .upload_multipart(&[("framework", "claudecode")], "files", &files)
        .await;
    assert_outcome("a multipart with 1,000 files", &many, &Expect::Loaded(|_| true));
    assert_still_serving(&server, "1,000 files").await;

    // A NUL cannot be in a header: the part is refused as malformed.
    let nul = server
        .upload_multipart(
            &[("framework", "claudecode")],
            "file",
            &[(format!("evil\0{MAIN}"), jsonl(&[prompt("p0")]))],
        )
        .await;
    assert_outcome(
        "a filename with NUL",
        &nul,
        &Expect::Error(StatusCode::BAD_REQUEST, "multipart"),
    );
    // `../`: the last component is kept; nothing lands outside the data directory.
    let named = server
        .upload_multipart(
            &[("framework", "claudecode")],
            "file",
            &[(format!("../../../../tmp/evil/{MAIN}"), jsonl(&[prompt("p1")]))],
        )
        .await;
    assert_outcome("a filename with ../", &named, &Expect::Loaded(|_| true));
    let id = named.json["graph_id"].as_str().unwrap();
    let diagnostics = server.get(&format!("/api/graph/{id}/diagnostics")).await;
    let shown = diagnostics.json.to_string();
    assert!(!shown.contains(".."), "{shown}");
    assert!(shown.contains(MAIN), "{shown}");
    for entry in walk(&server.data_dir) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains(".."), "{}", entry.display());
    }
    assert!(!std::path::Path::new("/tmp/evil").exists());

    // A multipart content type without a boundary, and a body that is not multipart.
    for (name, content_type, body) in [
        (
            "multipart without a boundary",
            "multipart/form-data",
            b"--x\r\n".to_vec(),
        ),
        (
            "a body that is not multipart",
            "multipart/form-data; boundary=zzz",
            jsonl(&[prompt("w1")]),
        ),
    ] {
        let response = server
            .client
            .post(format!("{}/api/upload?framework=claudecode", server.url))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        let reply = Reply::read(response).await;
        assert_outcome(name, &reply, &Expect::Error(StatusCode::BAD_REQUEST, "multipart"));
        assert_still_serving(&server, name).await;
    }
    // A JSONL body sent as application/json is read as a raw upload.
    let response = server
        .client
        .post(format!(
            "{}/api/upload?framework=claudecode&filename={MAIN}",
            server.url
        ))
        .header("content-type", "application/json")
        .body(jsonl(&[prompt("j1")]))
        .send()
        .await
        .unwrap();
    assert_outcome(
        "JSONL sent as application/json",
        &Reply::read(response).await,
        &Expect::Loaded(|_| true),
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_refused_before_it_is_read() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        max_upload_bytes: 1 << 20,
        ..Options::default()
    })
    .await;
    // Only the head is sent: the 413 comes without waiting for 1 GiB.
    let reply = server
        .post_head_only(
            "/api/upload?framework=claudecode",
            "application/x-ndjson",
            1 << 30,
        )
        .await;
    assert_outcome(
        "a declared body over the limit",
        &reply,
        &Expect::Error(StatusCode::PAYLOAD_TOO_LARGE, "--max-upload-bytes"),
    );
    // A body without a declared length, streamed past the limit.
    let chunks = (0..32).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 64 << 10]));
    let sent = server
        .client
        .post(format!("{}/api/upload?framework=claudecode", server.url))
        .body(reqwest::Body::wrap_stream(futures_stream(chunks)))
        .send()
        .await;
    // 2 MiB usually fit in the socket buffers, and the client reads the answer; when the
    // machine is busy the server may close the connection before the client has sent it
    // all, which refuses the body too (it is never read whole).
    match sent {
        Ok(response) => assert_outcome(
            "a streamed body over the limit",
            &Reply::read(response).await,
            &Expect::Error(StatusCode::PAYLOAD_TOO_LARGE, "--max-upload-bytes"),
        ),
        Err(e) => assert!(e.is_request() || e.is_body(), "the upload failed otherwise: {e}"),
    }
    assert_still_serving(&server, "bodies over the limit").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_answered_408_and_the_server_carries_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A 3 s budget for every request: no index is built beside them (on two busy cores the
    // first view of the sample could otherwise share them with its indexing).
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        request_timeout: Duration::from_secs(3),
        search: sessiongraph::search::SearchConfig {
            enabled: false,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    assert_still_serving(&server, "nothing yet").await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/upload?framework=claudecode HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-ndjson\r\ncontent-length: 100000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"{\"type\":\"user\"").await.unwrap();
    // Then nothing: the server gives up on its own.
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await;
    assert!(read.is_ok(), "the server never answered the stalled upload");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains(r#""error":"Request Timeout""#), "{text}");
    assert_still_serving(&server, "a slow client").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_tiny_lines_and_a_200_mb_line_load() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        max_upload_bytes: 300 << 20,
        ..Options::default()
    })
    .await;
    // 1,000,000 tiny lines: a prompt, then one-key records of an unknown type.
    let mut body = jsonl(&[prompt("t0")]);
    body.reserve(1_000_000 * 12);
    for _ in 1..1_000_000 {
        body.extend_from_slice(b"{\"type\":\"x\"}\n");
    }
    let tiny = server
        .upload_raw(&format!("framework=claudecode&filename={MAIN}"), body)
        .await;
    assert_outcome(
        "1,000,000 tiny lines",
        &tiny,
        &Expect::Loaded(|d| d["unknown_record_types"] == 999_999),
    );
    assert_still_serving(&server, "1,000,000 tiny lines").await;

    // One 200 MB line: a prompt carrying a base64 image.
    let line = [
        br#"{"type":"user","uuid":"big","parentUuid":null,"sessionId":"s","message":{"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":""#.as_slice(),
        &vec![b'A'; 200 << 20],
        b"\"}}]}}\n",
    ]
    .concat();
    let big = server
        .upload_raw(&format!("framework=claudecode&filename={MAIN}"), line)
        .await;
    assert_outcome(
        "a single 200 MB line",
        &big,
        &Expect::Loaded(|d| d["bad_lines"] == 0),
    );
    assert_eq!(
        big.json["annotation_count"], 1,
        "the prompt with its image is a unit"
    );
    let id = big.json["graph_id"].as_str().unwrap();
    let info = server.get(&format!("/api/graph/{id}/info")).await;
    assert_eq!(info.status, StatusCode::OK);
    assert_still_serving(&server, "a 200 MB line").await;
    server.stop().await;
}

/// A stream of chunks for a body of unknown length.
fn futures_stream<I>(chunks: I) -> impl futures_util::Stream<Item = I::Item>
where
    I: Iterator + Send + 'static,
{
    futures_util::stream::iter(chunks)
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Opens a connection, sends `first`, and returns how long the server took to close it.
async fn time_until_closed(addr: &str, first: &[u8]) -> Option<Duration> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(first).await.unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
    closed.is_ok().then(|| started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_headers_is_disconnected() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        header_read_timeout: Duration::from_secs(1),
        ..Options::default()
    })
    .await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    let partial = format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\nx-slow: ");
    let waited = time_until_closed(&addr, partial.as_bytes()).await;
    assert!(waited.is_some(), "a half-sent head was still open after 10 s");
    assert!(waited >= Some(Duration::from_millis(900)), "{waited:?}");
    // Found in review: a connection that sent nothing, or HTTP/2's preface, escaped the
    // timeout while the server waited to tell the protocol.
    let silent = time_until_closed(&addr, b"").await;
    assert!(silent.is_some(), "a silent connection was still open after 10 s");
    let h2 = time_until_closed(&addr, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    assert!(h2.is_some(), "an HTTP/2 preface was still open after 10 s");
    assert_still_serving(&server, "a client trickling its headers").await;
    server.stop().await;
}

/// The synthetic session with two sub-agents, laid out as Claude Code writes it today:
/// `<dir>/<stem>.jsonl` and `<dir>/<stem>/subagents/agent-<id>.jsonl`.
fn write_nested_session(dir: &std::path::Path, stem: &str) {
    let fixture_dir = fixture("synthetic/subagents");
    let nested = dir.join(stem).join("subagents");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::copy(
        fixture_dir.join("11111111-2222-4333-8444-555555555555.jsonl"),
        dir.join(format!("{stem}.jsonl")),
    )
    .unwrap();
    for agent in ["agent-aaaa1111.jsonl", "agent-bbbb2222.jsonl"] {
        std::fs::copy(fixture_dir.join(agent), nested.join(agent)).unwrap();
    }
}

/// Replaces `path` by a FIFO.
fn swap_in_a_fifo(path: &std::path::Path) {
    std::fs::remove_file(path).unwrap();
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Opens the FIFOs for writing when dropped, so that a reader still blocked on one (the
/// defect this guards against) is released and the test can end.
struct FifoReleaser(Vec<std::path::PathBuf>);

impl Drop for FifoReleaser {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        for fifo in &self.0 {
            // Non-blocking: succeeds only when a reader is waiting, which is all we need.
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(fifo);
        }
    }
}

/// How long any answer may take while FIFOs sit in the sessions directory (issue 15's
/// target: within 1 s).
const FIFO_ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// GET `path`, failing the test if the answer takes longer than [`FIFO_ANSWER_WITHIN`].
async fn get_within_bound(server: &TestServer, path: &str) -> Reply {
    let started = std::time::Instant::now();
    let reply = tokio::time::timeout(Duration::from_secs(5), server.get(path))
        .await
        .unwrap_or_else(|_| panic!("GET {path}: no answer after 5 s"));
    let took = started.elapsed();
    assert!(took < FIFO_ANSWER_WITHIN, "GET {path} took {took:?}");
    reply
}

/// D5 (issue 15): a session file replaced by a FIFO after the scan was opened by every
/// request for the session, each blocking a thread forever (threads 6 -> 517); other
/// uncached views and uploads then timed out until a restart. Files of a sessions
/// directory are now opened without blocking and refused unless they are regular files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d5_a_fifo_swapped_into_the_sessions_directory_does_not_wedge_the_server() {
    let sessions = tempfile::tempdir().unwrap();
    let main_fifo = "aaaaaaaa-0000-4000-8000-00000000000a";
    let agent_fifo = "aaaaaaaa-0000-4000-8000-00000000000b";
    let untouched = "aaaaaaaa-0000-4000-8000-00000000000c";
    for (project, stem) in [
        ("project-a", main_fifo),
        ("project-b", agent_fifo),
        ("project-c", untouched),
    ] {
        write_nested_session(&sessions.path().join(project), stem);
    }
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample"), sessions.path().to_owned()],
        ..Options::default()
    })
    .await;
    for stem in [main_fifo, agent_fifo] {
        let loaded = server
            .get(&format!("/api/graph/{stem}/chatlog?include_subagents=true"))
            .await;
        assert_eq!(loaded.status, StatusCode::OK, "{stem}: {}", loaded.json);
    }

    let main_log = sessions.path().join(format!("project-a/{main_fifo}.jsonl"));
    let agent_log = sessions
        .path()
        .join(format!("project-b/{agent_fifo}/subagents/agent-aaaa1111.jsonl"));
    swap_in_a_fifo(&main_log);
    swap_in_a_fifo(&agent_log);
    let _release = FifoReleaser(vec![main_log, agent_log]);

    let views = [
        "annotations?include_sidechains=true",
        "chatlog?include_subagents=true",
        "workflow",
        "diagnostics",
        "info",
        "export",
    ];
    for round in 0..20 {
        let view = views[round % views.len()];
        let refused = get_within_bound(&server, &format!("/api/graph/{main_fifo}/{view}")).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{view}: {}",
            refused.json
        );
        let message = refused.json["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(main_fifo)
                && message.contains(&format!("project-a/{main_fifo}.jsonl"))
                && message.contains("not a regular file"),
            "{view}: {message}"
        );
        let root = sessions.path().to_string_lossy().into_owned();
        assert!(!message.contains(&root), "{view}: {message}");

        let skipped = get_within_bound(&server, &format!("/api/graph/{agent_fifo}/{view}")).await;
        assert_eq!(skipped.status, StatusCode::OK, "{view}: {}", skipped.json);
    }
    // The sub-agent that is a FIFO is left out, and the diagnostics say why.
    let diagnostics = get_within_bound(&server, &format!("/api/graph/{agent_fifo}/diagnostics")).await;
    let ignored = diagnostics.json["ignored_files"].to_string();
    assert!(
        ignored.contains(&format!("{agent_fifo}/subagents/agent-aaaa1111.jsonl"))
            && ignored.contains("not a regular file"),
        "{ignored}"
    );
    let files = diagnostics.json["files"].to_string();
    assert!(!files.contains("agent-aaaa1111"), "{files}");

    // Everything else keeps working: another session on disk, the sample, an upload.
    let other = get_within_bound(&server, &format!("/api/graph/{untouched}/workflow")).await;
    assert_eq!(other.status, StatusCode::OK);
    assert_still_serving(&server, "FIFOs in the sessions directory").await;
    let upload = server
        .upload_raw(
            &format!("framework=claudecode&filename={MAIN}"),
            jsonl(&[prompt("fifo")]),
        )
        .await;
    assert_eq!(upload.status, StatusCode::OK, "{}", upload.json);
    server.stop().await;
}

/// Issue 15: a file of a sessions directory that could not be read gave the generic
/// "An internal error occurred". The error names the session and the file, relative to its
/// sessions directory (never the server's paths): 500 when the file cannot be read, 422
/// when it is there but refused (a link swapped in for the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_session_file_is_a_clear_error_naming_the_session() {
    let sessions = tempfile::tempdir().unwrap();
    let gone = "bbbbbbbb-0000-4000-8000-000000000001";
    let linked = "bbbbbbbb-0000-4000-8000-000000000002";
    for stem in [gone, linked] {
        write_nested_session(&sessions.path().join("project"), stem);
    }
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample"), sessions.path().to_owned()],
        ..Options::default()
    })
    .await;
    let project = sessions.path().join("project");
    std::fs::remove_file(project.join(format!("{gone}.jsonl"))).unwrap();
    std::fs::remove_file(project.join(format!("{linked}.jsonl"))).unwrap();
    std::os::unix::fs::symlink(
        project.join(format!("{linked}/subagents/agent-aaaa1111.jsonl")),
        project.join(format!("{linked}.jsonl")),
    )
    .unwrap();
    let root = sessions.path().to_string_lossy().into_owned();
    for (id, status, why) in [
        (
            gone,
            StatusCode::INTERNAL_SERVER_ERROR,
            "No such file or directory",
        ),
        (linked, StatusCode::UNPROCESSABLE_ENTITY, "is a symbolic link"),
    ] {
        for path in [
            format!("/api/graph/{id}/workflow"),
            format!("/api/graph/{id}/info"),
            format!("/api/graph/{id}/export"),
        ] {
            let reply = server.get(&path).await;
            assert_eq!(reply.status, status, "{path}: {}", reply.json);
            assert_eq!(reply.json["error"], status.canonical_reason().unwrap(), "{path}");
            let message = reply.json["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with(&format!(
                    "Session '{id}' cannot be loaded from its sessions directory: project/{id}.jsonl "
                )) && message.contains(why),
                "{path}: {message}"
            );
            assert!(!message.contains(&root), "{path}: {message}");
        }
    }
    assert_still_serving(&server, "unreadable session files").await;
    server.stop().await;
}

/// Issue 15: a full disk answered 500 "upload storage failed: No space left on device".
/// It is 507 Insufficient Storage, and nothing of the refused upload stays behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_507_and_keeps_nothing_of_the_upload() {
    let Some(disk) = SmallDisk::mount("1m") else {
        eprintln!(
            "SKIPPED a_full_disk_answers_507_and_keeps_nothing_of_the_upload: cannot mount a tmpfs \
             here (not root?); the 507 mapping is still checked by the unit tests of api::error"
        );
        return;
    };
    let server = TestServer::start(Options {
        data_dir: Some(disk.path().to_owned()),
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    // A 2 MB session cannot fit on a 1 MB disk.
    let big = Record::prompt("big", &"x".repeat(2 << 20)).line();
    let full = server
        .upload_raw(&format!("framework=claudecode&filename={MAIN}"), jsonl(&[big]))
        .await;
    assert_eq!(full.status, StatusCode::INSUFFICIENT_STORAGE, "{}", full.json);
    assert_eq!(full.json["error"], "Insufficient Storage");
    let message = full.json["message"].as_str().unwrap_or_default();
    assert!(message.contains("no space left"), "{message}");
    assert!(!message.contains(&*disk.path().to_string_lossy()), "{message}");
    let left: Vec<_> = std::fs::read_dir(disk.path().join("uploads"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "nothing half-written: {left:?}");
    assert_eq!(
        server.get("/api/sessions").await.json["sessions"]
            .as_array()
            .map_or(0, |s| s.iter().filter(|s| s["source"] == "upload").count()),
        0
    );
    // The space it took is free again: a small upload is stored.
    let small = server
        .upload_raw(
            &format!("framework=claudecode&filename={MAIN}"),
            jsonl(&[prompt("fits")]),
        )
        .await;
    assert_eq!(small.status, StatusCode::OK, "{}", small.json);
    assert_still_serving(&server, "a full disk").await;
    server.stop().await;
}

/// Issue 15: `?step=1e99` was read as step 1 and a 40-digit step as the whole body (the
/// reference's `parseInt`, saturating). A step is digits only and at most 2^53 - 1;
/// anything else is 400 saying what is expected. Plain numbers work as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_1e99_and_a_40_digit_step_are_refused_not_read_as_numbers() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let forty_digits = "1234567890".repeat(4);
    for route in ["/workflow", ""] {
        for value in [
            "1e99",
            forty_digits.as_str(),
            "9007199254740992",
            "5abc",
            "-0",
            "%207",
            "+3",
        ] {
            let reply = server
                .get(&format!("/api/graph/{SAMPLE}{route}?step={value}"))
                .await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{route} {value}");
            assert_eq!(reply.json["error"], "Bad Request");
            let message = reply.json["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with(
                    "Invalid step parameter: expected a whole number from 0 to 9007199254740991"
                ),
                "{route} {value}: {message}"
            );
        }
    }
    for (value, step, nodes) in [("0", 0, 1), ("7", 7, 8), ("007", 7, 8)] {
        let reply = server
            .get(&format!("/api/graph/{SAMPLE}/workflow?step={value}"))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{value}");
        assert_eq!(reply.json["workflow"]["currentStep"], step, "{value}");
        assert_eq!(reply.json["workflow"]["nodes"].as_array().unwrap().len(), nodes);
    }
    let largest = server
        .get(&format!("/api/graph/{SAMPLE}?step=9007199254740991"))
        .await;
    assert_eq!(largest.status, StatusCode::OK);
    assert_eq!(largest.json["graph"]["current_step"], 9007199254740991u64);
    server.stop().await;
}

/// Issue 16, item 6: a 70 KB URL got 414 and a 1 MB header block 431, both with an empty
/// body. Heads over our limits (8 KiB of target, 64 KiB of headers) get the contract's JSON
/// error; only heads over hyper's own limits (a target over 65,534 bytes, a head over its
/// ~400 KiB buffer) are answered by hyper, before any of our code runs, without a body
/// (reqwest cannot even send such a target).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_heads_are_json_errors() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let long_target = format!("/api/graph/{SAMPLE}/annotations?pad={}", "x".repeat(20_000));
    let reply = server.get(&long_target).await;
    assert_eq!(reply.status, StatusCode::URI_TOO_LONG);
    assert_eq!(reply.json["error"], "URI Too Long");
    assert!(reply.json["message"].as_str().unwrap().contains("at most 8192"));

    let big_header = server
        .client
        .get(format!("{}/api/graph/{SAMPLE}/annotations", server.url))
        .header("x-padding", "y".repeat(100_000))
        .send()
        .await
        .unwrap();
    let reply = Reply::read(big_header).await;
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(reply.json["error"], "Request Header Fields Too Large");
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");

    assert_still_serving(&server, "oversized heads").await;
}

/// A memory bound small enough for a test: four times the input plus 4 MiB beyond the
/// process's reserve.
fn small_memory_bound() -> Option<sessiongraph::core::memory_bound::MemoryBound> {
    use sessiongraph::core::memory_bound::{MemoryBound, PROCESS_RESERVE};
    Some(MemoryBound {
        per_input_byte: 4.0,
        allowance: PROCESS_RESERVE + (4 << 20),
    })
}

/// D1 (issue 15): a 442 MB upload of 5,000,000 tiny records took 9.9 GB. Records too many
/// for the upload's size are refused with a JSON 413 naming the bound's settings; nothing
/// of the upload is kept, and a session within the bound still loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_an_upload_of_records_too_many_for_its_size_is_413_and_not_kept() {
    let server = TestServer::start(Options {
        memory_bound: small_memory_bound(),
        ..Options::default()
    })
    .await;
    let query = format!("framework=claudecode&filename={MAIN}");
    let refused = server.upload_raw(&query, tiny_chain(20_000)).await;
    assert_eq!(
        refused.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{:?}",
        refused.json
    );
    let message = refused.json["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("too many records for the session's size"),
        "{message}"
    );
    assert!(message.contains("--memory-per-input-byte"), "{message}");
    let listed = server.get("/api/sessions").await;
    assert_eq!(
        listed.json["sessions"].as_array().map(Vec::len),
        Some(0),
        "nothing kept"
    );
    let stored = std::fs::read_dir(server.data_dir.join("uploads"))
        .map(|dir| dir.count())
        .unwrap_or(0);
    assert_eq!(stored, 0, "nothing of the refused upload is on disk");

    let accepted = server.upload_raw(&query, tiny_chain(200)).await;
    assert_eq!(accepted.status, StatusCode::OK, "{:?}", accepted.json);
    server.stop().await;
}

/// D1 (issue 15): a session of a sessions directory whose records are too many for its
/// size is listed, and its views are a JSON 422 (the session stands as it is on disk),
/// while the other sessions are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_session_on_disk_too_many_records_for_its_size_is_422() {
    let sessions = tempfile::tempdir().unwrap();
    let project = sessions.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join(MAIN), tiny_chain(20_000)).unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![fixture("commugraph-sample"), sessions.path().to_owned()],
        memory_bound: small_memory_bound(),
        ..Options::default()
    })
    .await;
    let id = MAIN.trim_end_matches(".jsonl");
    let reply = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", reply.json);
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("too many records"),
        "{:?}",
        reply.json
    );
    assert_still_serving(&server, "a session too dense on disk").await;
    server.stop().await;
}

/// An AgentChat `TaskResult` of `n` messages of a few words among ten agents.
fn agentchat_dump(n: usize) -> Vec<u8> {
    let messages: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"source":"a{}","type":"TextMessage","content":"m{i}"}}"#,
                i % 10
            )
        })
        .collect();
    format!("{{\"messages\":[{}]}}", messages.join(",")).into_bytes()
}

/// F10: an AutoGen log was read whole before its messages were charged. Charged as they
/// are read, messages too many for the log's size are refused as records are: a JSON 413
/// for an upload (nothing kept), a JSON 422 for the session of a sessions directory, both
/// naming the bound's settings; a log within the bound still loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f10_autogen_messages_past_the_memory_bound_are_413_uploaded_and_422_on_disk() {
    let sessions = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sessions.path().join("team")).unwrap();
    std::fs::write(sessions.path().join("team/run.json"), agentchat_dump(20_000)).unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![sessions.path().to_owned()],
        memory_bound: small_memory_bound(),
        ..Options::default()
    })
    .await;
    let refused = server
        .upload_raw("framework=autogen&filename=run.json", agentchat_dump(20_000))
        .await;
    assert_eq!(
        refused.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{:?}",
        refused.json
    );
    let message = refused.json["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("too many records for the session's size"),
        "{message}"
    );
    assert!(message.contains("--memory-per-input-byte"), "{message}");
    let stored = std::fs::read_dir(server.data_dir.join("uploads"))
        .map(|dir| dir.count())
        .unwrap_or(0);
    assert_eq!(stored, 0, "nothing of the refused upload is on disk");

    let on_disk = server.get("/api/graph/run").await;
    assert_eq!(
        on_disk.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        on_disk.json
    );
    let message = on_disk.json["message"].as_str().unwrap_or_default();
    assert!(message.contains("too many records"), "{message}");

    let accepted = server
        .upload_raw("framework=autogen&filename=small.json", agentchat_dump(200))
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{:?}", accepted.json);
    assert_eq!(accepted.json["message_count"], 200);
    server.stop().await;
}
