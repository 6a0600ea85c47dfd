//! Helpers of the tests of servers sharing one store (replicas on one PostgreSQL database,
//! with their uploads there or in a bucket): a fresh database, uploads, deletions,
//! listings, every view compared across replicas or a restart, the same content uploaded
//! through several at once, waiting for what a replica hears of in the background, start
//! errors, stopping them all, and the label exports of such a store with `labels
//! export`'s.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};

use crate::helpers::records::Record;
use crate::labels::TestDb;
use crate::server::{graph_id, Reply, TestServer};

/// Every view route of a session, with the options the frontend uses.
pub(crate) const VIEWS: [&str; 11] = [
    "",
    "/workflow",
    "/workflow?step=7",
    "/annotations?include_sidechains=true",
    "/dialog",
    "/chatlog",
    "/metrics",
    "/diagnostics",
    "/branches",
    "/context",
    "/export",
];

/// A fresh PostgreSQL database on `DATABASE_URL`'s server, or `None` after a note on
/// standard error when it is not set (outside CI: with `CI=true` the test fails).
pub(crate) async fn shared_database(test: &str) -> Option<TestDb> {
    let Some(admin) = TestDb::backends().into_iter().flatten().next() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "DATABASE_URL is not set: CI must run the replica tests on PostgreSQL"
        );
        // Written to the process's stderr: the harness shows captured output only for
        // failures, and a skip must be seen.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: DATABASE_URL is not set (a PostgreSQL server whose user may create databases)"
        );
        return None;
    };
    Some(TestDb::fresh(Some(admin)).await)
}

/// A direct connection to the test database, to look at what is stored.
pub(crate) async fn connect(db: &TestDb) -> PgConnection {
    PgConnection::connect(db.url.as_deref().unwrap()).await.unwrap()
}

/// A one-prompt Claude Code session saying `text`, uploaded raw through `server`.
pub(crate) async fn upload_prompt(server: &TestServer, text: &str) -> Reply {
    let line = Record::prompt("u1", text).line();
    server
        .upload_raw(
            "framework=claudecode&filename=11111111-2222-4333-8444-555555555555.jsonl",
            format!("{line}\n").into_bytes(),
        )
        .await
}

/// The ids `/api/sessions` lists on `server`.
pub(crate) async fn listed(server: &TestServer) -> Vec<String> {
    let reply = server.get("/api/sessions").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
    reply.json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits up to 20 s for `done` to hold of `server`'s store, polled without a request.
pub(crate) async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 20 s");
}

/// `reply` is a 503 with `Retry-After` and the JSON error body.
pub(crate) fn assert_unavailable(what: &str, reply: &Reply) {
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{what}: {}",
        reply.json
    );
    assert!(reply.headers.contains_key("retry-after"), "{what}");
    assert!(reply.json["message"].is_string(), "{what}: {}", reply.json);
}

/// Session `id`'s info body on `server`, without what differs per replica (when it was
/// last read there).
pub(crate) async fn info(server: &TestServer, id: &str) -> Value {
    let mut info = server.get(&format!("/api/graph/{id}/info")).await.json;
    assert!(info.is_object(), "no info: {info}");
    info.as_object_mut().unwrap().remove("last_accessed");
    info
}

/// `b` serves every view of upload `id` as `a` does (200, the same bytes and ETag), and its
/// info alike.
pub(crate) async fn assert_served_alike(a: &TestServer, b: &TestServer, id: &str) {
    for view in VIEWS {
        let path = format!("/api/graph/{id}{view}");
        let (from_a, from_b) = (a.get(&path).await, b.get(&path).await);
        assert_eq!(from_b.status, StatusCode::OK, "{path}: {}", from_b.json);
        assert!(from_a.bytes == from_b.bytes, "{path}: B's body differs from A's");
        assert_eq!(from_a.headers.get("etag"), from_b.headers.get("etag"), "{path}");
    }
    assert_eq!(info(a, id).await, info(b, id).await);
}

/// Every view body of session `id` on `server`, in the order of [`VIEWS`].
pub(crate) async fn view_bodies(server: &TestServer, id: &str) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for view in VIEWS {
        bodies.push(server.get(&format!("/api/graph/{id}{view}")).await.bytes);
    }
    bodies
}

/// `server` answers every view of session `id` with 200 and the body `bodies` holds for it
/// (see [`view_bodies`]); `differs` says what a body that is not is.
pub(crate) async fn assert_view_bodies(server: &TestServer, id: &str, bodies: Vec<Vec<u8>>, differs: &str) {
    for (view, body) in VIEWS.iter().zip(bodies) {
        let reply = server.get(&format!("/api/graph/{id}{view}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{view}: {}", reply.json);
        assert!(reply.bytes == body, "{view}: {differs}");
    }
}

/// Deletes upload `id` through `server`, which answers 200.
pub(crate) async fn delete_upload(server: &TestServer, id: &str) {
    let deleted = server.delete(&format!("/api/session/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.json);
}

/// Five rounds of one prompt uploaded four times at once, twice through each of `a` and
/// `b`: each round's four answers name one upload, which `check` is given (with a
/// connection to `db` and the round's number) to look at how it is stored, and whose
/// creation time both replicas give alike; then the database holds those five uploads.
pub(crate) async fn the_same_content_at_once(
    db: &TestDb,
    a: &TestServer,
    b: &TestServer,
    mut check: impl AsyncFnMut(&mut PgConnection, usize, &str),
) {
    let mut conn = connect(db).await;
    for round in 0..5 {
        let text = format!("round {round} of the same content at once");
        let (r1, r2, r3, r4) = tokio::join!(
            upload_prompt(a, &text),
            upload_prompt(b, &text),
            upload_prompt(a, &text),
            upload_prompt(b, &text)
        );
        let id = graph_id(&r1);
        for reply in [&r2, &r3, &r4] {
            assert_eq!(graph_id(reply), id, "round {round}");
        }
        check(&mut conn, round, &id).await;
        assert_eq!(info(a, &id).await, info(b, &id).await, "one creation time");
    }
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM uploads")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.ok();
    assert_eq!(total, 5);
}

/// Stops `servers`, then drops the test database.
pub(crate) async fn stop_all(db: TestDb, servers: impl IntoIterator<Item = TestServer>) {
    for server in servers {
        server.stop().await;
    }
    db.cleanup().await;
}

/// The environment variables that name a server's stores (the label database, the data
/// directory, the upload store and its bucket): a command a test runs is given its own.
pub(crate) const STORE_VARIABLES: [&str; 7] = [
    "DATABASE_URL",
    "SESSIONGRAPH_DATABASE_URL",
    "SESSIONGRAPH_DATA_DIR",
    "SESSIONGRAPH_UPLOAD_STORE",
    "SESSIONGRAPH_S3_BUCKET",
    "SESSIONGRAPH_S3_PREFIX",
    "SESSIONGRAPH_S3_ENDPOINT",
];

/// `sessiongraph serve` on a free port with the data directory `dir`, the arguments
/// `extra` and the environment `env` (the environment's [`STORE_VARIABLES`] removed
/// first), which must fail at start: what it says on standard error.
pub(crate) fn serve_fails(dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sessiongraph"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(extra);
    for name in STORE_VARIABLES {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let out = command.output().expect("the binary runs");
    assert!(!out.status.success(), "{extra:?} {env:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every table of the test database with a digest of all its rows: what a read changes
/// nothing of.
pub(crate) async fn database_contents(db: &TestDb) -> BTreeMap<String, String> {
    let mut conn = connect(db).await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut contents = BTreeMap::new();
    for table in tables {
        let rows = format!(
            "SELECT md5(COALESCE(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM \"{table}\" t"
        );
        let digest: String = sqlx::query_scalar(&rows).fetch_one(&mut conn).await.unwrap();
        contents.insert(table, digest);
    }
    conn.close().await.ok();
    contents
}

/// Uploads the CommuGraph sample and a prompt through `server`, submits labels on a unit of
/// each (two annotators on the sample's), and gives the label exports the server then
/// serves, each with the `labels export` arguments that ask for the same and what it prints
/// for them: everything labeled, every unit, Label Studio tasks (the command ends them with
/// a newline), and one session's.
pub(crate) async fn label_exports(server: &TestServer) -> Vec<(Vec<String>, Vec<u8>)> {
    let sample = server.upload_fixture("claudecode", "commugraph-sample").await;
    let text = "a prompt whose unit is labeled";
    let prompt = graph_id(&upload_prompt(server, text).await);
    for (id, annotator) in [(&sample, "ann.a"), (&sample, "ann.b"), (&prompt, "ann.a")] {
        let (event, _) = crate::labels::texty(&crate::labels::units(server, id).await);
        let body =
            json!({"annotator": annotator, "status": "submitted", "labels": [{"id": "EXEC_COGNITIVE"}]});
        let path = format!("/api/graph/{id}/labels/{event}");
        let written = crate::labels::put(server, &path, &body, None).await;
        assert!(written.status.is_success(), "{path}: {}", written.json);
    }
    let asked = [
        ("", vec![]),
        ("?all_units=true", vec!["--all-units"]),
        ("?format=label-studio", vec!["--format", "label-studio"]),
        (&format!("?session={prompt}"), vec!["--session", &prompt]),
    ];
    let mut exports = Vec::new();
    for (query, args) in asked {
        let served = server.get(&format!("/api/labels/export{query}")).await;
        assert_eq!(served.status, StatusCode::OK, "{query}: {}", served.json);
        let mut printed = served.bytes;
        let shown = String::from_utf8_lossy(&printed);
        assert!(shown.contains(text), "{query}: the upload's unit is not exported");
        if query.contains("label-studio") {
            printed.push(b'\n');
        }
        exports.push((args.into_iter().map(str::to_owned).collect(), printed));
    }
    exports
}

/// Runs `labels export` for each of `exports` (see [`label_exports`]) with `store`, the
/// arguments naming the server's stores, and the environment `env`, in an empty directory
/// (no `./fixtures` to serve), and checks that it prints what the route served.
pub(crate) fn assert_cli_exports_as_served(
    exports: &[(Vec<String>, Vec<u8>)],
    store: &[&str],
    env: &[(&str, &str)],
) {
    let empty = tempfile::tempdir().unwrap();
    for (args, printed) in exports {
        let args: Vec<&std::ffi::OsStr> = store
            .iter()
            .copied()
            .chain(args.iter().map(String::as_str))
            .map(std::ffi::OsStr::new)
            .collect();
        let out = crate::cli::labels_export_in(empty.path(), &args, env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(
            out.stdout == *printed,
            "{args:?}: printed {} bytes, not the {} bytes of the route's export",
            out.stdout.len(),
            printed.len()
        );
    }
    assert!(
        crate::cli::files_under(empty.path()).is_empty(),
        "nothing created where it ran"
    );
}
