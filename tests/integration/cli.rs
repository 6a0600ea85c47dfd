//! `sessiongraph export`: the offline twin of the view endpoints.

use std::process::{Command, Output};

use serde_json::Value;
use sessiongraph::core::views::{self, View, ViewOptions};

use crate::helpers::{fixture, load_path, sample_main};

fn export(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .arg("export")
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn export_prints_exactly_the_body_of_each_view() {
    let main = sample_main();
    let session = load_path(&main);
    for view in View::ALL {
        let mut cases = vec![(vec![], ViewOptions::default())];
        if view.takes_subagents() {
            let options = ViewOptions {
                include_subagents: true,
                ..Default::default()
            };
            cases.push((vec!["--include-subagents"], options));
        }
        if view.takes_step() {
            let options = ViewOptions {
                step: Some(50),
                ..Default::default()
            };
            cases.push((vec!["--step", "50"], options));
        }
        for (flags, options) in cases {
            let mut args = vec!["--view", view.name()];
            args.extend(flags.iter().copied());
            args.push(main.to_str().unwrap());
            let out = export(&args);
            assert!(
                out.status.success(),
                "{view} {flags:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut expected = views::render(&session, view, options).to_bytes().to_vec();
            expected.push(b'\n');
            assert!(
                out.stdout == expected,
                "{view} {flags:?}: output differs from the library's body"
            );
        }
    }
}

#[test]
fn export_takes_a_directory_or_explicit_files() {
    let dir = fixture("synthetic/subagents");
    let from_dir = export(&["--view", "workflow", dir.to_str().unwrap()]);
    assert!(from_dir.status.success());
    let files: Vec<String> = [
        "11111111-2222-4333-8444-555555555555.jsonl",
        "agent-aaaa1111.jsonl",
        "agent-bbbb2222.jsonl",
    ]
    .iter()
    .map(|f| dir.join(f).to_string_lossy().into_owned())
    .collect();
    let mut args = vec!["--view", "workflow"];
    args.extend(files.iter().map(String::as_str));
    let explicit = export(&args);
    assert!(explicit.status.success());
    assert_eq!(from_dir.stdout, explicit.stdout);
    let body: serde_json::Value = serde_json::from_slice(&from_dir.stdout).unwrap();
    let lanes: Vec<&str> = body["workflow"]["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        lanes,
        ["main", "agent-aaaa1111", "agent-bbbb2222", "agent-cccc3333"]
    );
}

#[test]
fn export_errors_are_one_clear_line() {
    let missing = export(&["--view", "annotations", "/nonexistent/session.jsonl"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.starts_with("error: failed to read /nonexistent/session.jsonl"),
        "{err}"
    );

    let bad_view = export(&["--view", "nope", sample_main().to_str().unwrap()]);
    assert_eq!(bad_view.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad_view.stderr);
    assert!(err.contains("invalid value 'nope'"), "{err}");
    assert!(
        err.contains(&View::NAMES.join(", ")),
        "every view is offered: {err}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jsonl"), "").unwrap();
    std::fs::write(dir.path().join("b.jsonl"), "").unwrap();
    let many = export(&["--view", "annotations", dir.path().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&many.stderr).contains("holds 2 session logs; name the one to load"));
}

#[test]
fn export_strict_fails_on_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"user\",\"uuid\":\"u\",\"message\":{\"content\":\"Look at this\"}}\n{oops\n",
    )
    .unwrap();
    let lenient = export(&["--view", "diagnostics", path.to_str().unwrap()]);
    assert!(lenient.status.success());
    let body: serde_json::Value = serde_json::from_slice(&lenient.stdout).unwrap();
    assert_eq!(body["summary"]["bad_lines"], 1);
    assert_eq!(body["bad_lines"]["samples"][0]["line"], 2);
    let strict = export(&["--view", "diagnostics", "--strict", path.to_str().unwrap()]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stderr).contains("invalid JSON in s.jsonl on line 2"));
}

/// Issue 16, item 3: `export --help` listed 6 of the 8 views.
#[test]
fn export_help_lists_every_view() {
    let help = export(&["--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for name in View::NAMES {
        assert!(text.contains(name), "{name} missing from: {text}");
    }
}

/// Issue 16, item 4: `failed to read X: No such file or directory (os error 2): No such
/// file or directory (os error 2)`.
#[test]
fn an_os_error_is_said_once() {
    let missing = export(&["--view", "annotations", "/nonexistent/session.jsonl"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    let refused = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["healthcheck", "--url", "http://127.0.0.1:9/healthz"])
        .output()
        .expect("the binary runs");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.matches("refused").count(), 1, "{err}");
}

/// Issue 16, item 4: `export ... | head` must end quietly with success, as ripgrep does.
#[test]
fn a_closed_pipe_ends_export_quietly() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["export", "--view", "workflow", sample_main().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut first = [0u8; 16];
    child
        .stdout
        .take()
        .expect("a pipe")
        .read_exact(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Issue 11: a codebook that does not parse or repeats a label id stops the server at
/// start, with a message naming the file and the problem.
#[test]
fn a_bad_codebook_stops_the_server_naming_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, problem) in [
        (
            "twice.yaml",
            "labels:\n  - id: A\n  - id: A\n",
            "repeats the label id A (labels 1 and 2)",
        ),
        ("broken.yaml", "labels: [\n", "does not parse"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
            .args(["serve", "--listen", "127.0.0.1:0", "--codebook"])
            .arg(&path)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .output()
            .expect("the binary runs");
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        let expected = format!("error: the codebook {} {problem}", path.display());
        assert!(err.contains(&expected), "{name}: {err}");
    }
}

/// Issue 16, item 5: `export` of a file that holds no conversation printed an empty body
/// and exited 0, where the upload of the same file is a 400. One core decision, one answer:
/// the CLI fails with the upload's message, word for word; `--lenient` prints the empty
/// view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_without_conversation_fails_export_as_it_fails_upload() {
    let dir = tempfile::tempdir().unwrap();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let server = crate::server::TestServer::start(crate::server::Options::default()).await;
    for (name, bytes) in [("garbage.bin", garbage), ("empty.jsonl", b"\n \n".to_vec())] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let upload = server
            .upload_raw(&format!("framework=claudecode&filename={name}"), bytes)
            .await;
        assert_eq!(upload.status, reqwest::StatusCode::BAD_REQUEST, "{name}");
        let message = upload.json["message"].as_str().unwrap().to_owned();

        let out = export(&["--view", "annotations", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            format!("error: {message}"),
            "{name}"
        );

        let lenient = export(&["--view", "annotations", "--lenient", path.to_str().unwrap()]);
        assert!(lenient.status.success(), "{name}");
        let body: serde_json::Value = serde_json::from_slice(&lenient.stdout).unwrap();
        assert_eq!(body["total"], 0, "{name}");
    }
}

/// A label database that cannot be opened stops the server at start, with a message naming
/// it (password hidden).
#[test]
fn an_unusable_label_database_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    for (url, expected) in [
        (
            "mysql://u:secret@127.0.0.1/db",
            "invalid label database URL: mysql://u:***@127.0.0.1/db",
        ),
        (
            "postgres://u:secret@127.0.0.1:1/db",
            "cannot open the label database postgres://u:***@127.0.0.1:1/db",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url", url])
            .arg("--data-dir")
            .arg(dir.path())
            .env_remove("DATABASE_URL")
            .output()
            .expect("the binary runs");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}

/// A server with data directory `data` serving the bundled sample as a sessions
/// directory: the server, that directory, and the sample's id.
async fn sample_dir_server(
    data: &std::path::Path,
) -> (crate::server::TestServer, std::path::PathBuf, String) {
    use crate::server::{Options, TestServer};
    let sessions = crate::helpers::fixture("commugraph-sample");
    let server = TestServer::start(Options {
        data_dir: Some(data.to_owned()),
        sessions_dirs: vec![sessions.clone()],
        ..Options::default()
    })
    .await;
    let id = server.first_session(&[]).await;
    (server, sessions, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_export_prints_what_the_export_route_serves() {
    let data = tempfile::tempdir().unwrap();
    let (server, sessions, id) = sample_dir_server(data.path()).await;
    let (event, _) = crate::labels::texty(&crate::labels::units(&server, &id).await);
    let body = serde_json::json!({"annotator": "ann.a", "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]});
    let path = format!("/api/graph/{id}/labels/{event}");
    assert!(crate::labels::put(&server, &path, &body, None)
        .await
        .status
        .is_success());
    let served = server.get("/api/labels/export").await.bytes;
    let config = server
        .get("/api/labels/export?format=label-studio-config")
        .await
        .bytes;
    server.stop().await;

    let run = |format: &str| {
        Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
            .args(["labels", "export", "--format", format, "--data-dir"])
            .arg(data.path())
            .arg("--sessions-dir")
            .arg(&sessions)
            .env_remove("DATABASE_URL")
            .env_remove("SESSIONGRAPH_DATABASE_URL")
            .output()
            .unwrap()
    };
    let jsonl = run("jsonl");
    assert!(
        jsonl.status.success(),
        "{}",
        String::from_utf8_lossy(&jsonl.stderr)
    );
    assert_eq!(
        String::from_utf8(jsonl.stdout).unwrap(),
        String::from_utf8(served).unwrap()
    );
    let xml = run("label-studio-config");
    assert!(xml.status.success());
    assert_eq!(xml.stdout, [config, b"\n".to_vec()].concat());
}

/// F10: `export` refuses an AutoGen log whose messages are too many for its size as it does
/// a Claude Code log, with an error naming the bound's settings, while reading it.
#[test]
fn f10_export_refuses_autogen_messages_past_the_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let lines: String = (0..20_000)
        .map(|i| {
            format!(
                "{{\"sender\":\"a{}\",\"recipient\":\"a{}\",\"message\":\"m{i}\"}}\n",
                i % 10,
                (i + 1) % 10
            )
        })
        .collect();
    std::fs::write(&log, lines).unwrap();
    let path = log.to_str().unwrap();
    let refused = export(&["--view", "graph", "--memory-allowance", "68M", path]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("too many records for the session's size"),
        "{stderr}"
    );
    assert!(stderr.contains("--memory-allowance"), "{stderr}");
    let loaded = export(&["--view", "graph", "--memory-per-input-byte", "inf", path]);
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
}

/// Item 11 of the labeling team's report: `export --step` and `--leaf` were ignored on the
/// views they do not apply to. Every such flag is now a usage error naming the flag and the
/// views it applies to, and nothing is printed.
#[test]
fn item11_export_refuses_flags_that_do_not_apply_to_the_view() {
    let main = sample_main();
    let main = main.to_str().unwrap();
    for (view, flags, applies_to) in [
        ("annotations", vec!["--step", "3"], "workflow, graph"),
        ("chatlog", vec!["--leaf", "u1"], "context"),
        (
            "graph",
            vec!["--include-subagents"],
            "annotations, dialog, chatlog",
        ),
        (
            "metrics",
            vec!["--branch", "active"],
            "annotations, dialog, workflow, chatlog",
        ),
        ("workflow", vec!["--no-edges"], "graph, metrics"),
    ] {
        let mut args = vec!["--view", view];
        args.extend(&flags);
        args.push(main);
        let out = export(&args);
        assert_eq!(out.status.code(), Some(2), "{view} {flags:?}");
        assert!(out.stdout.is_empty(), "{view} {flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let expected = format!(
            "error: {} does not apply to --view {view}: it applies to {applies_to}",
            flags[0]
        );
        assert!(err.starts_with(&expected), "{view} {flags:?}: {err}");
        assert!(err.contains("Usage: sessiongraph export"), "{err}");
    }
    let context = export(&["--view", "context", "--leaf", "nope", main]);
    assert_eq!(
        context.status.code(),
        Some(1),
        "--leaf applies to context: read, then refused"
    );
}

/// Item 11 of the labeling team's report: a label database that refuses the connection, or
/// rejects the password, waited for the pool and then said "pool timed out". The server now
/// stops with the driver's own reason (password hidden). The wrong password is tried when
/// `DATABASE_URL` names a PostgreSQL server.
#[test]
fn item11_a_bad_postgresql_url_fails_with_the_connection_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = vec![(
        "postgres://u:secret@127.0.0.1:1/db".to_owned(),
        "refused".to_owned(),
    )];
    if let Some(url) = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| u.starts_with("postgres"))
    {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (userinfo, host) = rest.split_once('@').unwrap();
        let user = userinfo.split(':').next().unwrap();
        cases.push((
            format!("{scheme}://{user}:secret@{host}"),
            "password authentication failed".to_owned(),
        ));
    }
    for (url, reason) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url", &url])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .expect("the binary runs");
        assert_eq!(out.status.code(), Some(1), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("error: cannot open the label database postgres://"),
            "{err}"
        );
        assert!(err.contains(&reason), "{url}: {err}");
        assert!(!err.contains("pool timed out"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}

/// Every file under `dir`, relative to it, sorted (to show that a read changed nothing).
pub(crate) fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            out.push(path.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// `labels export` with `args`, without the environment's label database.
fn labels_export(args: &[&std::ffi::OsStr]) -> Output {
    labels_export_in(std::path::Path::new("."), args, &[])
}

/// `labels export` with `args` run in `dir`, with `env` as the only store settings the
/// environment gives it (its [`crate::cluster::STORE_VARIABLES`] removed first).
pub(crate) fn labels_export_in(
    dir: &std::path::Path,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &str)],
) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sessiongraph"));
    command.current_dir(dir).args(["labels", "export"]).args(args);
    for name in crate::cluster::STORE_VARIABLES {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("the binary runs")
}

/// Item 9 of the labeling team's report: `labels export --data-dir ./typo` created an empty
/// store and exited 0. A command that reads creates nothing: a data directory that is not
/// there, or one without a label database, is an error naming it, and nothing is made.
#[test]
fn item9_labels_export_creates_nothing_and_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let out = labels_export(&["--data-dir".as_ref(), typo.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "error: the data directory {} does not exist",
            typo.display()
        )),
        "{err}"
    );
    assert!(!typo.exists(), "nothing created");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = labels_export(&["--data-dir".as_ref(), empty.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let database = empty.join("labels.sqlite3");
    assert!(
        err.contains(&format!(
            "error: no label store at {}: the file does not exist",
            database.display()
        )),
        "{err}"
    );
    assert!(
        files_under(&empty).is_empty(),
        "nothing created: {:?}",
        files_under(&empty)
    );
}

/// Item 9 of the labeling team's report: `labels export --session nope` printed nothing and
/// exited 0 where `GET /api/labels/export?session=nope` answers 404. It now fails, naming
/// the session; a known session's export reads the data directory without changing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item9_labels_export_refuses_an_unknown_session_as_the_route_does() {
    let data = tempfile::tempdir().unwrap();
    let (server, sessions, id) = sample_dir_server(data.path()).await;
    let route = server.get("/api/labels/export?session=nope").await;
    assert_eq!(route.status, reqwest::StatusCode::NOT_FOUND);
    let served = server
        .get(&format!("/api/labels/export?session={id}&all_units=true"))
        .await;
    server.stop().await;
    let before = files_under(data.path());

    let args = |session: &str| {
        let args: Vec<std::ffi::OsString> = vec![
            "--data-dir".into(),
            data.path().into(),
            "--sessions-dir".into(),
            sessions.clone().into(),
            "--all-units".into(),
            "--session".into(),
            session.into(),
        ];
        args
    };
    let refs = |a: &[std::ffi::OsString]| labels_export(&a.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
    let unknown = refs(&args("nope"));
    assert_eq!(unknown.status.code(), Some(1));
    assert!(unknown.stdout.is_empty());
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(err.starts_with("error: no session 'nope'"), "{err}");
    let known = refs(&args(&id));
    assert!(
        known.status.success(),
        "{}",
        String::from_utf8_lossy(&known.stderr)
    );
    assert_eq!(known.stdout, served.bytes);
    assert_eq!(
        files_under(data.path()),
        before,
        "the data directory is as the server left it"
    );
}

/// `labels export` on a server keeping uploads in PostgreSQL (`--upload-store postgres`,
/// given as flags or in the environment as the server takes it) reads them from the
/// database and prints what the route serves; it changes nothing in the database and
/// neither reads nor creates the data directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_export_reads_uploads_kept_in_postgresql_as_the_route_does() {
    use crate::cluster::{assert_cli_exports_as_served, database_contents, label_exports};
    let Some(db) = crate::cluster::shared_database("labels_export_reads_uploads_kept_in_postgresql").await
    else {
        return;
    };
    let url = db.url.clone().unwrap();
    let server = crate::server::TestServer::start(crate::server::Options {
        database_url: Some(url.clone()),
        upload_store: sessiongraph::store::UploadStoreKind::Postgres,
        ..crate::server::Options::default()
    })
    .await;
    let exports = label_exports(&server).await;
    server.stop().await;
    let before = database_contents(&db).await;
    let elsewhere = tempfile::tempdir().unwrap();
    let data = elsewhere.path().join("data");
    let data = data.to_str().unwrap();

    let flags = [
        "--upload-store",
        "postgres",
        "--database-url",
        &url,
        "--data-dir",
        data,
    ];
    assert_cli_exports_as_served(&exports, &flags, &[]);
    let env = [
        ("SESSIONGRAPH_UPLOAD_STORE", "postgres"),
        ("DATABASE_URL", url.as_str()),
        ("SESSIONGRAPH_DATA_DIR", data),
    ];
    assert_cli_exports_as_served(&exports, &[], &env);
    assert_eq!(
        database_contents(&db).await,
        before,
        "the export changed the database"
    );
    assert!(files_under(elsewhere.path()).is_empty(), "no data directory made");
    db.cleanup().await;
}

/// `labels export` with a shared upload store that cannot be read fails with one line
/// naming what is missing, as `serve` does, before anything is opened or created: `s3`
/// without a bucket, `postgres` or `s3` without a PostgreSQL database, a database that
/// does not answer (its password never shown).
#[test]
fn labels_export_names_what_a_shared_upload_store_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let fails = |args: &[&str], env: &[(&str, &str)]| {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let out = labels_export_in(dir.path(), &args, env);
        assert_eq!(out.status.code(), Some(1), "{args:?} {env:?}");
        assert!(out.stdout.is_empty());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let down = "postgres://sg:secret@127.0.0.1:9/sg";
    for err in [
        fails(&["--upload-store", "s3", "--database-url", down], &[]),
        fails(
            &[],
            &[("SESSIONGRAPH_UPLOAD_STORE", "s3"), ("DATABASE_URL", down)],
        ),
    ] {
        assert!(
            err.starts_with("error: --upload-store s3 keeps uploads in an S3 bucket"),
            "{err}"
        );
        assert!(
            err.contains("--s3-bucket NAME (or SESSIONGRAPH_S3_BUCKET)"),
            "{err}"
        );
    }
    for (store, kept) in [("postgres", "uploads"), ("s3", "the uploads' records")] {
        let err = fails(&["--upload-store", store, "--s3-bucket", "sessions"], &[]);
        let needs = format!("error: --upload-store {store} keeps {kept} in the PostgreSQL database");
        assert!(err.starts_with(&needs), "{err}");
        assert!(err.contains("--database-url postgres://"), "{err}");
    }
    let err = fails(&["--upload-store", "postgres", "--database-url", down], &[]);
    assert!(
        err.starts_with("error: cannot open the upload database postgres://sg:***@127.0.0.1:9/sg"),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
    assert!(files_under(dir.path()).is_empty(), "nothing created");
}

/// The long flags a `--help` lists.
fn flags_of(help: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(help);
    let mut flags: Vec<String> = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| {
            l.split([' ', ',', '=', '<'])
                .find(|w| w.starts_with("--"))
                .map(str::to_owned)
        })
        .collect();
    flags.sort();
    flags
}

/// Item 9 of the labeling team's report: `labels export --help` listed every flag of
/// `serve` (`--listen`, `--cors-origin`, the timeouts). Each subcommand now lists the flags
/// it reads, and only those.
#[test]
fn item9_each_subcommand_lists_only_the_flags_it_reads() {
    let sorted = |flags: &[&str]| {
        let mut all: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
        all.sort();
        all
    };
    let sessions = ["--sessions-dir", "--memory-per-input-byte", "--memory-allowance"];
    let store = ["--data-dir", "--database-url"];
    let uploads = ["--upload-store", "--s3-bucket", "--s3-prefix", "--s3-endpoint"];
    let labels_export = [
        &[
            "--format",
            "--session",
            "--all-units",
            "--codebook-id",
            "--codebook",
            "--help",
        ][..],
        &store,
        &uploads,
        &sessions,
    ]
    .concat();
    let export = [
        "--view",
        "--step",
        "--include-subagents",
        "--strict",
        "--lenient",
        "--branch",
        "--no-edges",
        "--leaf",
        "--memory-per-input-byte",
        "--memory-allowance",
        "--data-dir",
        "--database-url",
        "--session-id",
        "--codebook-id",
        "--codebook",
        "--help",
    ];
    let serve = [
        &[
            "--listen",
            "--max-upload-bytes",
            "--cors-origin",
            "--api-key",
            "--api-key-file",
            "--allowed-host",
            "--read-only",
            "--request-timeout-secs",
            "--header-read-timeout-secs",
            "--log-format",
            "--cache-bytes",
            "--render-budget-bytes",
            "--no-search",
            "--search-recheck-secs",
            "--codebook",
            "--reviewer",
            "--blind-labels",
            "--reservation-secs",
            "--queue-overlap",
            "--help",
        ][..],
        &store,
        &uploads,
        &sessions,
    ]
    .concat();
    for (subcommand, expected) in [
        (&["labels", "export"][..], sorted(&labels_export)),
        (&["export"], sorted(&export)),
        (&["serve"], sorted(&serve)),
        (&["healthcheck"], sorted(&["--url", "--help"])),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
            .args(subcommand)
            .arg("--help")
            .output()
            .expect("the binary runs");
        assert!(out.status.success(), "{subcommand:?}");
        assert_eq!(flags_of(&out.stdout), expected, "{subcommand:?}");
    }
}

/// Item 12 of the labeling team's report: `export --view annotations` printed `labels: []`
/// whatever the label store held, although the README says it prints what the route
/// returns. Given the server's data directory (or database), it prints the route's body
/// for annotations and dialog, and the orphaned labels diagnostics lists, reading the
/// store without changing it; on SQLite and, with `DATABASE_URL`, PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item12_export_shows_the_labels_of_a_label_store_as_the_route_does() {
    crate::labels::TestDb::each(async |db: &crate::labels::TestDb| {
        let data = tempfile::tempdir().unwrap();
        let sessions = crate::helpers::fixture("commugraph-sample");
        let server = crate::server::TestServer::start(crate::server::Options {
            data_dir: Some(data.path().to_owned()),
            sessions_dirs: vec![sessions.clone()],
            ..db.options()
        })
        .await;
        let id = server.first_session(&[]).await;
        let units = crate::labels::units(&server, &id).await;
        let (event, _) = units.iter().find(|(_, t, side)| !side && t.len() > 20).map(|(e, t, _)| (e.clone(), t.clone())).unwrap();
        let body = serde_json::json!({"annotator": "ann.a", "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]});
        let path = format!("/api/graph/{id}/labels/{event}");
        assert!(crate::labels::put(&server, &path, &body, None).await.status.is_success());
        let annotations = server.get(&format!("/api/graph/{id}/annotations")).await.bytes;
        let dialog = server.get(&format!("/api/graph/{id}/dialog")).await.bytes;
        server.stop().await;
        let before = files_under(data.path());

        let store: Vec<std::ffi::OsString> = match &db.url {
            Some(url) => vec!["--database-url".into(), url.into()],
            None => vec!["--data-dir".into(), data.path().into()],
        };
        let run = |view: &str, path: &std::path::Path| {
            Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
                .args(["export", "--view", view])
                .args(&store)
                .arg(path)
                .output()
                .unwrap()
        };
        for (view, served) in [("annotations", &annotations), ("dialog", &dialog)] {
            let out = run(view, &sessions);
            assert!(out.status.success(), "{view}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.stdout, [served.clone(), b"\n".to_vec()].concat(), "{view}");
        }
        let shown: Value = serde_json::from_slice(&run("annotations", &sessions).stdout).unwrap();
        let unit = shown["annotations"].as_array().unwrap().iter().find(|u| u["event_id"] == event.as_str()).unwrap();
        assert_eq!(unit["labels"][0]["id"], "EXEC_COGNITIVE", "{unit}");
        assert_eq!(files_under(data.path()), before, "the data directory is as the server left it");

        // The same log cut short, where the unit is gone: its labels are orphaned.
        let short = tempfile::tempdir().unwrap();
        let main = "ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl";
        let text = std::fs::read_to_string(sessions.join(main)).unwrap();
        let first: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        std::fs::write(short.path().join(main), first).unwrap();
        let diagnostics: Value = serde_json::from_slice(&run("diagnostics", &short.path().join(main)).stdout).unwrap();
        assert_eq!(
            diagnostics["orphaned_labels"],
            serde_json::json!([{"event_id": event, "annotators": ["ann.a"]}])
        );
    })
    .await;
}

/// Item 12: without a label store the units show no labels, and the flags that name what
/// to read need one.
#[test]
fn item12_export_without_a_label_store_shows_no_labels_and_says_what_is_missing() {
    let main = sample_main();
    let plain = export(&["--view", "annotations", main.to_str().unwrap()]);
    let body: Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(body["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .all(|u| u["labels"] == serde_json::json!([])));
    let named = export(&[
        "--view",
        "annotations",
        "--session-id",
        "x",
        main.to_str().unwrap(),
    ]);
    assert_eq!(named.status.code(), Some(1));
    let err = String::from_utf8_lossy(&named.stderr);
    assert!(
        err.contains("--session-id needs a label store to read: give --data-dir or --database-url"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let missing = export(&[
        "--view",
        "annotations",
        "--data-dir",
        typo.to_str().unwrap(),
        main.to_str().unwrap(),
    ]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does not exist (--data-dir)"));
    assert!(!typo.exists());
    let not_here = export(&[
        "--view",
        "workflow",
        "--data-dir",
        dir.path().to_str().unwrap(),
        main.to_str().unwrap(),
    ]);
    assert_eq!(not_here.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&not_here.stderr).contains(
        "--data-dir does not apply to --view workflow: it applies to annotations, dialog, diagnostics"
    ));
}

/// Item 10 of the labeling team's report: `serve --sessions-dir DIR` with a missing DIR
/// started and logged `sessions=0`. A sessions directory given that cannot be served stops
/// the server, naming it (flag or environment).
#[test]
fn item10_serve_refuses_a_sessions_dir_that_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let missing = dir.path().join("nope");
    for (given, problem, by_env) in [
        (&missing, "does not exist", false),
        (&missing, "does not exist", true),
        (&file, "is not a directory", false),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sessiongraph"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"));
        if by_env {
            command.env("SESSIONGRAPH_SESSIONS_DIRS", given);
        } else {
            command.arg("--sessions-dir").arg(given);
        }
        let out = command.output().expect("the binary runs");
        assert_eq!(out.status.code(), Some(1), "{given:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let expected = format!("error: the sessions directory {} {problem}", given.display());
        assert!(err.contains(&expected), "{err}");
    }
}

/// Item 10 of the labeling team's report: the default sessions directory was the build
/// checkout's, compiled in. It is `./fixtures` where the server runs; where there is none,
/// the server says so and serves uploads only.
#[test]
fn item10_the_default_sessions_dir_is_where_the_server_runs() {
    use std::io::BufRead;
    let cwd = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(cwd.path())
        .env_remove("SESSIONGRAPH_SESSIONS_DIRS")
        .env_remove("SESSIONGRAPH_DATA_DIR")
        .env_remove("DATABASE_URL")
        .env_remove("SESSIONGRAPH_DATABASE_URL")
        .env("SESSIONGRAPH_LOG_FORMAT", "text")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut warned = None;
    for line in stderr.lines() {
        let line = line.unwrap();
        if line.contains("no sessions directory") {
            warned = Some(line);
            break;
        }
        assert!(!line.contains("listening"), "started without the warning: {line}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let warned = warned.expect("a warning");
    assert!(warned.contains("WARN"), "{warned}");
    assert!(warned.contains("no ./fixtures here"), "{warned}");
}
