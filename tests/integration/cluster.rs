//! Helpers of the tests of servers sharing one store (replicas on one PostgreSQL database,
//! with their uploads there or in a bucket): a fresh database, uploads, listings, and
//! waiting for what a replica hears of in the background.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::{Connection, PgConnection};

use crate::helpers::records::Record;
use crate::labels::TestDb;
use crate::server::{Reply, TestServer};

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
