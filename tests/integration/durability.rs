//! Durability, with the real binary: an accepted upload survives `kill -9`; an upload killed
//! at any point before its 200 leaves nothing half-visible; a log still being written loads
//! its complete lines and picks up the rest when it is complete.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::fixture;
use crate::helpers::records::Record;
use crate::server::{fixture_files, upload_form};

/// A server process.
struct Process {
    child: Child,
    url: String,
    client: reqwest::Client,
    /// The server's log lines (JSON), as written so far.
    log: Arc<Mutex<Vec<String>>>,
}

impl Process {
    /// Starts `sessiongraph serve` on a free loopback port and waits until it is ready.
    async fn start(data_dir: &Path, sessions_dir: &Path) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
            .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--sessions-dir")
            .arg(sessions_dir)
            .env("RUST_LOG", "sessiongraph=info")
            // Its labels go to SQLite in its data directory, not to a PostgreSQL the
            // label tests were given.
            .env_remove("DATABASE_URL")
            .env_remove("SESSIONGRAPH_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        let address = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stderr).lines();
            let address = lines.by_ref().map_while(Result::ok).find_map(|line| {
                let v: Value = serde_json::from_str(&line).ok()?;
                (v["fields"]["message"] == "listening")
                    .then(|| v["fields"]["address"].as_str().map(str::to_owned))
                    .flatten()
            });
            // Keep reading so that the server never blocks on a full pipe.
            std::thread::spawn(move || {
                for line in lines.map_while(Result::ok) {
                    kept.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
            });
            address
        })
        .await
        .unwrap()
        .expect("the server logs its address");
        let process = Process {
            child,
            url: format!("http://{address}"),
            client: reqwest::Client::new(),
            log,
        };
        for _ in 0..500 {
            if process.get("/readyz").await.0 == StatusCode::OK {
                return process;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the server did not become ready");
    }

    async fn get(&self, path: &str) -> (StatusCode, Vec<u8>) {
        match self.client.get(format!("{}{path}", self.url)).send().await {
            Ok(r) => (r.status(), r.bytes().await.unwrap_or_default().to_vec()),
            Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Vec::new()),
        }
    }

    async fn json(&self, path: &str) -> Value {
        serde_json::from_slice(&self.get(path).await.1).unwrap_or_default()
    }

    /// The log lines written so far that mention `needle`.
    fn log_lines_with(&self, needle: &str) -> Vec<Value> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter()
            .filter(|line| line.contains(needle))
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// `kill -9`.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL is delivered");
        self.child.wait().expect("the process is reaped");
    }
}

/// A test that fails before it kills its server leaves no server running.
impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every entry under `dir`, recursively.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        out.push(path.clone());
        if path.is_dir() {
            out.extend(entries(&path));
        }
    }
    out
}

fn leftovers(data_dir: &Path) -> Vec<PathBuf> {
    entries(&data_dir.join("uploads"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".tmp-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_upload_survives_kill_9() {
    let data = tempfile::tempdir().unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let server = Process::start(data.path(), sessions.path()).await;
    let sample = fixture_files(&fixture("commugraph-sample"));
    let response = server
        .client
        .post(format!("{}/api/upload", server.url))
        .header("x-request-id", "durability-upload-1")
        .multipart(upload_form(&[("framework", "claudecode")], "file", &sample))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-request-id"], "durability-upload-1");
    let id = response.json::<Value>().await.unwrap()["graph_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The log line of the accepted upload carries the request's id, to find it by.
    // (The line is written before the answer; reading it from the pipe may lag a little.)
    let logged =
        |l: &Value| l["span"]["request_id"] == "durability-upload-1" && l["fields"]["id"] == id.as_str();
    for _ in 0..250 {
        if server.log_lines_with("upload accepted").iter().any(logged) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let accepted = server.log_lines_with("upload accepted");
    assert!(accepted.iter().any(logged), "{accepted:?}");
    let mut before = Vec::new();
    for view in ["annotations", "workflow", "chatlog?include_subagents=true"] {
        before.push(server.get(&format!("/api/graph/{id}/{view}")).await);
    }
    server.kill();

    let again = Process::start(data.path(), sessions.path()).await;
    let listed = again.json("/api/sessions").await;
    assert!(
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == id.as_str()),
        "{listed}"
    );
    for (view, expected) in ["annotations", "workflow", "chatlog?include_subagents=true"]
        .iter()
        .zip(before)
    {
        let after = again.get(&format!("/api/graph/{id}/{view}")).await;
        assert_eq!(after.0, StatusCode::OK, "{view}");
        assert!(after.1 == expected.1, "{view} changed across kill -9");
    }
    again.kill();
}

/// The cause of a failure on the server's side is logged once, in the request's span
/// (its id and route), now that the layers around the routes wrap the router once and the
/// span is made on each route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_logged_with_its_cause_in_the_request_span() {
    let Some(disk) = crate::helpers::SmallDisk::mount("1m") else {
        eprintln!(
            "SKIPPED a_failure_is_logged_with_its_cause_in_the_request_span: cannot mount a tmpfs here"
        );
        return;
    };
    let sessions = tempfile::tempdir().unwrap();
    let server = Process::start(disk.path(), sessions.path()).await;
    // A 2 MB session cannot fit on a 1 MB disk: 507, its cause logged.
    let big = Record::prompt("big", &"x".repeat(2 << 20)).line();
    let response = server
        .client
        .post(format!(
            "{}/api/upload?framework=claudecode&filename=big.jsonl",
            server.url
        ))
        .header("x-request-id", "full-disk-1")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::INSUFFICIENT_STORAGE);
    assert_eq!(response.headers()["x-request-id"], "full-disk-1");
    let in_span = |l: &Value| l["span"]["request_id"] == "full-disk-1" && l["span"]["route"] == "/api/upload";
    for _ in 0..250 {
        if server.log_lines_with("request failed").iter().any(in_span) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failed = server.log_lines_with("request failed");
    assert_eq!(failed.iter().filter(|l| in_span(l)).count(), 1, "{failed:?}");
    assert!(
        failed.iter().any(|l| l["fields"]["cause"]
            .as_str()
            .is_some_and(|c| c.contains("No space left on device"))),
        "{failed:?}"
    );
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_killed_before_its_answer_leaves_nothing_half_visible() {
    let data = tempfile::tempdir().unwrap();
    let sessions = tempfile::tempdir().unwrap();
    // A session large enough that parsing and storing it take a while: the sample's main
    // log repeated under fresh uuids.
    let main = std::fs::read(fixture(
        "commugraph-sample/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl",
    ))
    .unwrap();
    let mut big = Vec::new();
    for copy in 0..6 {
        let text = String::from_utf8_lossy(&main).replace("-4", &format!("-{copy}"));
        big.extend_from_slice(text.as_bytes());
    }
    let files = vec![("ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl".to_owned(), big)];

    let mut outcomes = Vec::new();
    let delays = [0u64, 50, 100, 150, 175, 200, 225, 250, 275, 300, 400, 600, 1000];
    // Each round kills the server that long after the upload starts; the last one kills it
    // right after the answer.
    for delay_ms in delays.map(Some).into_iter().chain([None]) {
        // What a kill during a write leaves behind: a temporary directory with part of a
        // file. The next start removes it.
        let partial = data.path().join("uploads/.tmp-0123456789abcdef-999-0/files");
        std::fs::create_dir_all(&partial).unwrap();
        std::fs::write(partial.join("0"), b"{\"type\":\"user\",\"uuid\":\"half").unwrap();
        let server = Process::start(data.path(), sessions.path()).await;
        assert!(leftovers(data.path()).is_empty(), "temporary files after a start");
        let client = server.client.clone();
        let url = format!("{}/api/upload", server.url);
        let form = upload_form(&[("framework", "claudecode")], "file", &files);
        let upload = tokio::spawn(async move { client.post(url).multipart(form).send().await });
        let answered = match delay_ms {
            Some(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                server.kill();
                matches!(upload.await.unwrap(), Ok(r) if r.status() == StatusCode::OK)
            }
            None => {
                let answered = matches!(upload.await.unwrap(), Ok(r) if r.status() == StatusCode::OK);
                server.kill();
                answered
            }
        };

        let again = Process::start(data.path(), sessions.path()).await;
        assert!(leftovers(data.path()).is_empty(), "temporary files after restart");
        let listed = again.json("/api/sessions").await;
        let stored: Vec<String> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["source"] == "upload")
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        if answered {
            assert_eq!(stored.len(), 1, "an answered upload is stored");
        }
        // Whatever is listed is whole: it loads and serves.
        for id in &stored {
            let (status, _) = again.get(&format!("/api/graph/{id}/annotations")).await;
            assert_eq!(status, StatusCode::OK, "killed after {delay_ms:?} ms: {id}");
        }
        outcomes.push((delay_ms, answered, stored.len()));
        // Start the next round from an empty store.
        for id in &stored {
            let _ = again
                .client
                .delete(format!("{}/api/session/{id}", again.url))
                .send()
                .await;
        }
        again.kill();
    }
    // The rounds covered a kill before the upload was stored, and one after its answer.
    assert!(
        outcomes
            .iter()
            .any(|&(_, answered, stored)| !answered && stored == 0),
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.last().map(|o| (o.1, o.2)),
        Some((true, 1)),
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_still_being_written_loads_its_complete_lines_then_the_rest() {
    let data = tempfile::tempdir().unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let project = sessions.path().join("-home-me-project");
    std::fs::create_dir_all(&project).unwrap();
    let id = "11111111-2222-4333-8444-555555555555";
    let path = project.join(format!("{id}.jsonl"));
    let first = Record::prompt("u1", "Please write the docs")
        .at("2025-12-01T10:00:00.000Z")
        .line();
    let second = Record::prompt("u2", "And the tests too")
        .parent("u1")
        .at("2025-12-01T10:01:00.000Z")
        .line();
    let (head, tail) = second.split_at(60);
    std::fs::write(&path, format!("{first}\n{head}")).unwrap();

    let server = Process::start(data.path(), sessions.path()).await;
    let annotations = server.json(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(annotations["user_turn_count"], 1);
    let diagnostics = server.json(&format!("/api/graph/{id}/diagnostics")).await;
    let bad = diagnostics["bad_lines"]["samples"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(bad.contains("may still be being written"), "{diagnostics}");

    // Claude Code finishes the line.
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, format!("{tail}\n").as_bytes()).unwrap();
    drop(file);
    let annotations = server.json(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(annotations["user_turn_count"], 2);
    let diagnostics = server.json(&format!("/api/graph/{id}/diagnostics")).await;
    assert_eq!(diagnostics["summary"]["bad_lines"], 0, "{diagnostics}");
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_burst_of_label_writes_loses_no_acknowledged_write() {
    let data = tempfile::tempdir().unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let project = sessions.path().join("sample");
    std::fs::create_dir_all(&project).unwrap();
    for (name, bytes) in fixture_files(&fixture("commugraph-sample")) {
        std::fs::write(project.join(name), bytes).unwrap();
    }
    let server = Process::start(data.path(), sessions.path()).await;
    let listed = server.json("/api/sessions").await;
    let id = listed["sessions"][0]["id"].as_str().unwrap().to_owned();
    let units: Vec<String> = server.json(&format!("/api/graph/{id}/annotations")).await["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["event_id"].as_str().unwrap().to_owned())
        .collect();
    // Eight writers, each rewriting its own sets in a loop, recording every acknowledged
    // version; the server is killed while they write.
    let acknowledged: Arc<Mutex<Vec<(String, String, i64)>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..8 {
        let (client, url, id, units, acked) = (
            server.client.clone(),
            server.url.clone(),
            id.clone(),
            units.clone(),
            acknowledged.clone(),
        );
        writers.push(tokio::spawn(async move {
            for round in 0.. {
                let unit = &units[(w * 7 + round) % units.len()];
                let annotator = format!("writer{w}");
                let body = serde_json::json!({"annotator": annotator, "status": "draft",
                    "labels": [], "note": format!("round {round}")});
                let sent = client
                    .put(format!("{url}/api/graph/{id}/labels/{unit}"))
                    .json(&body)
                    .send()
                    .await;
                let Ok(response) = sent else { return };
                if !response.status().is_success() {
                    return;
                }
                let Ok(set) = response.json::<Value>().await else {
                    return;
                };
                let version = set["version"].as_i64().unwrap();
                acked.lock().unwrap().push((unit.clone(), annotator, version));
            }
        }));
    }
    while acknowledged.lock().unwrap().len() < 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill();
    for writer in writers {
        writer.await.unwrap();
    }
    let acked = acknowledged.lock().unwrap().clone();
    let again = Process::start(data.path(), sessions.path()).await;
    let stored = again.json(&format!("/api/graph/{id}/labels")).await;
    let version_of = |unit: &str, annotator: &str| {
        stored["labels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["event_id"] == unit && s["annotator"] == annotator)
            .and_then(|s| s["version"].as_i64())
    };
    for (unit, annotator, version) in &acked {
        let kept = version_of(unit, annotator);
        assert!(
            kept.is_some_and(|k| k >= *version),
            "{annotator} on {unit}: acknowledged version {version}, stored {kept:?}"
        );
    }
    again.kill();
}

/// Regression (F15): an upload whose client closed its connection right after sending
/// the whole body was sometimes never stored, and nothing was logged (2 of 8 uploads of
/// 37 MB): the server dropped the request when it read the end of the connection. Every
/// upload whose body arrived whole is stored, raw or multipart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f15_an_upload_whose_client_closes_right_after_sending_is_stored() {
    use std::io::Write;
    const UPLOADS: usize = 16;
    let server = crate::server::TestServer::start(crate::server::Options::default()).await;
    let address = server.url.trim_start_matches("http://").to_owned();
    let sends: Vec<_> = (0..UPLOADS)
        .map(|n| {
            let address = address.clone();
            std::thread::spawn(move || {
                // Distinct contents: distinct sessions. About 4 MB each.
                let text = format!("upload {n}: {}", "words ".repeat(700_000));
                let log = format!("{}\n", Record::prompt("u0", &text).line()).into_bytes();
                let (content_type, body) = if n % 2 == 0 {
                    ("application/octet-stream".to_owned(), log)
                } else {
                    let boundary = "sg-boundary-7d1";
                    let mut body = format!(
                        "--{boundary}\r\nContent-Disposition: form-data; name=\"framework\"\r\n\r\nclaudecode\r\n\
                         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s{n}.jsonl\"\r\n\
                         Content-Type: application/octet-stream\r\n\r\n"
                    )
                    .into_bytes();
                    body.extend_from_slice(&log);
                    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
                    (format!("multipart/form-data; boundary={boundary}"), body)
                };
                let mut stream = std::net::TcpStream::connect(&address).unwrap();
                let head = format!(
                    "POST /api/upload?framework=claudecode&filename=s{n}.jsonl HTTP/1.1\r\nHost: {address}\r\n\
                     Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).unwrap();
                stream.write_all(&body).unwrap();
                // Gone at once, without reading the answer.
                drop(stream);
            })
        })
        .collect();
    for send in sends {
        send.join().unwrap();
    }
    let mut stored = 0;
    for _ in 0..300 {
        let listed = server.get("/api/sessions").await;
        stored = listed.json["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["source"] == "upload")
            .count();
        if stored == UPLOADS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stored, UPLOADS, "every upload whose body arrived is stored");
    server.stop().await;
}
