//! Labels on a real server: every route's happy path and validation failures, the
//! `If-Match` race, a restart, read-only mode. Each scenario runs on SQLite (a file in the
//! data directory) and, when `DATABASE_URL` names a PostgreSQL server, again on a fresh
//! PostgreSQL database (`sg_test_<random>`, created through that URL and dropped after).

use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::StatusCode;
use serde_json::{json, Value};
use sessiongraph::labels::store::Backend;
use sqlx::{Connection, Executor};

use crate::server::{Options, Reply, TestServer};

/// A label database for one scenario.
pub struct TestDb {
    /// Its URL (`None`: SQLite in the server's data directory).
    pub url: Option<String>,
    admin: Option<(String, String)>,
}

impl TestDb {
    /// The label store on this database, opened directly (no server), with its URL; SQLite
    /// in `data` when the database is SQLite.
    pub async fn open_store(&self, data: &std::path::Path) -> (String, sessiongraph::labels::LabelStore) {
        let url = self
            .url
            .clone()
            .unwrap_or_else(|| sessiongraph::labels::store::default_url(data).unwrap());
        let codebook = sessiongraph::labels::Codebooks::built_in().unwrap();
        let store = sessiongraph::labels::LabelStore::open(&url, codebook, Default::default())
            .await
            .unwrap();
        (url, store)
    }

    /// The backends to run on: SQLite, and PostgreSQL when `DATABASE_URL` is set.
    pub fn backends() -> Vec<Option<String>> {
        let mut all = vec![None];
        if let Ok(admin) = std::env::var("DATABASE_URL") {
            if !admin.trim().is_empty() {
                all.push(Some(admin));
            }
        }
        all
    }

    /// A fresh database on `admin`'s server (`None`: SQLite).
    pub async fn fresh(admin: Option<String>) -> TestDb {
        let Some(admin) = admin else {
            return TestDb {
                url: None,
                admin: None,
            };
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let seed = (
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now(),
        );
        let name = format!(
            "sg_test_{:016x}",
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), seed)
        );
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&admin)
            .await
            .expect("DATABASE_URL connects");
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("a test database can be created");
        conn.close().await.ok();
        let (base, query) = match admin.split_once('?') {
            Some((b, q)) => (b, format!("?{q}")),
            None => (admin.as_str(), String::new()),
        };
        let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
        TestDb {
            url: Some(format!("{base}/{name}{query}")),
            admin: Some((admin.clone(), name)),
        }
    }

    /// Runs `scenario` on a fresh database of every backend (see [`TestDb::backends`]),
    /// dropping each after.
    pub async fn each(scenario: impl AsyncFn(&TestDb)) {
        for backend in TestDb::backends() {
            let db = TestDb::fresh(backend).await;
            scenario(&db).await;
            db.cleanup().await;
        }
    }

    /// Drops the database (PostgreSQL).
    pub async fn cleanup(self) {
        if let Some((admin, name)) = self.admin {
            let mut conn = sqlx::AnyConnection::connect(&admin).await.unwrap();
            conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                .await
                .unwrap();
            conn.close().await.ok();
        }
    }

    /// Server options on this database.
    pub fn options(&self) -> Options {
        Options {
            database_url: self.url.clone(),
            ..Options::default()
        }
    }
}

/// A server with the CommuGraph sample uploaded: (server, session id, units with their
/// text; sub-agent units included).
pub async fn sample_server(options: Options) -> (TestServer, String, Vec<(String, String, bool)>) {
    let server = TestServer::start(options).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let units = units(&server, &id).await;
    (server, id, units)
}

/// The labels the annotations body (with sidechains) shows on unit `event`.
pub async fn labels_shown(server: &TestServer, id: &str, event: &str) -> Value {
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    body.json["annotations"]
        .as_array()
        .expect("the annotations body lists its units")
        .iter()
        .find(|u| u["event_id"] == event)
        .unwrap_or_else(|| panic!("no unit {event}"))["labels"]
        .clone()
}

/// (event_id, text, is_sidechain) of every unit the built-in codebooks code (user and
/// assistant turns: system turns take no labels).
pub async fn units(server: &TestServer, id: &str) -> Vec<(String, String, bool)> {
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    body.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["unit_type"] != "system_turn")
        .map(|u| {
            (
                u["event_id"].as_str().unwrap().to_owned(),
                u["text_or_artifact_ref"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                u["source"]["is_sidechain"].as_bool() == Some(true),
            )
        })
        .collect()
}

/// The `event_id` of the first unit of an annotations `body` that the built-in codebooks
/// code (a user or assistant turn: system notices take no labels).
pub fn first_coded_unit(body: &Value) -> String {
    body["annotations"]
        .as_array()
        .expect("the annotations body lists its units")
        .iter()
        .find(|u| u["unit_type"] != "system_turn")
        .expect("a unit the codebook codes")["event_id"]
        .as_str()
        .expect("an event id")
        .to_owned()
}

/// The first unit with a text of at least 20 characters.
pub fn texty(units: &[(String, String, bool)]) -> (String, String) {
    units
        .iter()
        .find(|(_, t, _)| t.chars().count() >= 20)
        .map(|(e, t, _)| (e.clone(), t.clone()))
        .expect("a unit with text")
}

/// A quote of `text`: its first 10 characters.
pub fn quote_of(text: &str) -> String {
    text.chars().take(10).collect()
}

/// Takes the write lock of `server`'s SQLite label database from a connection of its own
/// (another process would hold it so), until [`release_write_lock`].
pub async fn hold_write_lock(server: &TestServer) -> sqlx::AnyConnection {
    sqlx::any::install_default_drivers();
    let url = sessiongraph::labels::store::default_url(&server.data_dir).unwrap();
    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
    conn.execute("BEGIN IMMEDIATE").await.unwrap();
    conn
}

/// Gives back the lock [`hold_write_lock`] took.
pub async fn release_write_lock(mut conn: sqlx::AnyConnection) {
    conn.execute("ROLLBACK").await.unwrap();
    conn.close().await.unwrap();
}

/// `PUT` a set, with an optional `If-Match`.
pub async fn put(server: &TestServer, path: &str, body: &Value, if_match: Option<&str>) -> Reply {
    let mut request = server.client.put(format!("{}{path}", server.url)).json(body);
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    Reply::read(request.send().await.unwrap()).await
}

/// `DELETE` with an optional `If-Match`.
pub async fn delete(server: &TestServer, path: &str, if_match: Option<&str>) -> Reply {
    let mut request = server.client.delete(format!("{}{path}", server.url));
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    Reply::read(request.send().await.unwrap()).await
}

fn set(annotator: &str, status: &str, labels: Value) -> Value {
    json!({ "annotator": annotator, "status": status, "labels": labels })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_is_written_listed_replaced_and_deleted_with_its_history() {
    TestDb::each(round_trip).await;
}

async fn round_trip(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let expected = if db.url.is_some() {
        Backend::Postgres
    } else {
        Backend::Sqlite
    };
    assert_eq!(server.state.labels.backend(), expected);
    let (event, text) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let body = json!({
        "annotator": "ann.a",
        "status": "draft",
        "labels": [{"id": "TASK_DECOMPOSITION", "confidence": 0.8,
                    "evidence": {"quote": quote_of(&text), "cue": "split into"},
                    "fields": {"decomposition": ["parse", "render"]}}],
        "note": "first pass",
        "lead_time": 12.5
    });
    let created = put(&server, &path, &body, None).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    assert_eq!(created.headers["etag"], "\"labels-1\"");
    assert_eq!(created.json["version"], 1);
    assert_eq!(created.json["lead_time"], 12.5);
    assert_eq!(created.json["labels"][0]["evidence"]["quote"], quote_of(&text));

    // Replaced without If-Match (last writer wins), then with the current tag.
    let replaced = put(&server, &path, &set("ann.a", "draft", json!([])), None).await;
    assert_eq!(
        (replaced.status, replaced.json["version"].as_i64()),
        (StatusCode::OK, Some(2))
    );
    let submitted = put(
        &server,
        &path,
        &set("ann.a", "submitted", json!([{"id": "EXEC_COGNITIVE"}])),
        Some("\"labels-2\""),
    )
    .await;
    assert_eq!(submitted.status, StatusCode::OK, "{}", submitted.json);
    assert_eq!(submitted.headers["etag"], "\"labels-3\"");
    // A stale tag: 412 with the current set.
    let stale = put(
        &server,
        &path,
        &set("ann.a", "draft", json!([])),
        Some("\"labels-2\""),
    )
    .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(stale.json["details"]["current"]["version"], 3);
    assert_eq!(
        stale.headers["etag"], "\"labels-3\"",
        "a 412 carries the current ETag"
    );
    assert_eq!(stale.json["details"]["current"]["status"], "submitted");
    // `If-Match: *` needs a set: annotator b has none.
    let star = put(&server, &path, &set("ann.b", "draft", json!([])), Some("*")).await;
    assert_eq!(star.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(star.json["details"]["current"], Value::Null);
    let b = put(&server, &path, &set("ann.b", "discarded", json!([])), None).await;
    assert_eq!(b.status, StatusCode::CREATED);

    // A sub-agent unit takes labels too.
    if let Some((side, _, _)) = units.iter().find(|u| u.2) {
        let r = put(
            &server,
            &format!("/api/graph/{id}/labels/{side}"),
            &set("ann.a", "draft", json!([])),
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    }

    let list = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(list.status, StatusCode::OK);
    let expected_total = if units.iter().any(|u| u.2) { 3 } else { 2 };
    assert_eq!(list.json["total"], expected_total);
    let only_b = server
        .get(&format!("/api/graph/{id}/labels?annotator=ann.b"))
        .await;
    assert_eq!(only_b.json["total"], 1);
    assert_eq!(only_b.json["labels"][0]["status"], "discarded");
    let submitted = server
        .get(&format!("/api/graph/{id}/labels?status=submitted"))
        .await;
    assert_eq!(submitted.json["total"], 1);
    let by_label = server
        .get(&format!("/api/graph/{id}/labels?label=EXEC_COGNITIVE"))
        .await;
    assert_eq!(by_label.json["labels"][0]["annotator"], "ann.a");
    assert_eq!(by_label.json["total"], 1);
    let bad_status = server.get(&format!("/api/graph/{id}/labels?status=done")).await;
    assert_eq!(bad_status.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_status.json["details"]["field"], "status");

    // Delete: needs the annotator; honours If-Match; 404 once gone.
    let no_annotator = delete(&server, &path, None).await;
    assert_eq!(no_annotator.status, StatusCode::BAD_REQUEST);
    let stale = delete(&server, &format!("{path}?annotator=ann.a"), Some("\"labels-1\"")).await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    let gone = delete(&server, &format!("{path}?annotator=ann.a"), Some("\"labels-3\"")).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let again = delete(&server, &format!("{path}?annotator=ann.a"), None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);

    let history = server.get(&format!("{path}/history")).await;
    assert_eq!(history.status, StatusCode::OK);
    let entries = history.json["history"].as_array().unwrap();
    let seen: Vec<(&str, &str, i64)> = entries
        .iter()
        .map(|e| {
            (
                e["annotator"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
                e["version"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("ann.a", "put", 1),
            ("ann.a", "put", 2),
            ("ann.a", "put", 3),
            ("ann.b", "put", 1),
            ("ann.a", "delete", 3)
        ]
    );
    assert_eq!(entries[0]["before"], Value::Null);
    assert_eq!(entries[1]["before"]["version"], 1);
    assert_eq!(entries[4]["after"], Value::Null);
    let only_b = server.get(&format!("{path}/history?annotator=ann.b")).await;
    assert_eq!(only_b.json["total"], 1);

    // Written again after the delete: a new version, never an old tag.
    let back = put(&server, &path, &set("ann.a", "draft", json!([])), None).await;
    assert_eq!(
        (back.status, back.json["version"].as_i64()),
        (StatusCode::CREATED, Some(4))
    );

    // Unknown session or unit.
    let unknown = put(
        &server,
        "/api/graph/nope/labels/x",
        &set("ann.a", "draft", json!([])),
        None,
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let no_unit = put(
        &server,
        &format!("/api/graph/{id}/labels/no-such-unit"),
        &set("ann.a", "draft", json!([])),
        None,
    )
    .await;
    assert_eq!(no_unit.status, StatusCode::NOT_FOUND);
    assert!(no_unit.json["message"].as_str().unwrap().contains("no-such-unit"));
    for path in ["/api/graph/nope/labels", "/api/graph/nope/labels/x/history"] {
        assert_eq!(server.get(path).await.status, StatusCode::NOT_FOUND);
    }
    assert_eq!(
        delete(&server, "/api/graph/nope/labels/x?annotator=a", None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_invalid_write_is_refused_naming_the_field() {
    TestDb::each(validation).await;
}

async fn validation(db: &TestDb) {
    let (server, id, units) = sample_server(Options {
        label_policy: sessiongraph::labels::LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..db.options()
    })
    .await;
    let (event, text) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let label = |extra: Value| {
        let mut l = json!({"id": "TASK_DECOMPOSITION"});
        for (k, v) in extra.as_object().unwrap() {
            l[k] = v.clone();
        }
        json!({"annotator": "a", "status": "draft", "labels": [{"id": "EXEC_COGNITIVE"}, l]})
    };
    let too_many: Vec<Value> = (0..65).map(|_| json!({"id": "EXEC_COGNITIVE"})).collect();
    let cases: Vec<(Value, &str)> = vec![
        (json!([]), "body"),
        (json!({"status": "draft", "labels": []}), "annotator"),
        (
            json!({"annotator": "", "status": "draft", "labels": []}),
            "annotator",
        ),
        (
            json!({"annotator": "a b", "status": "draft", "labels": []}),
            "annotator",
        ),
        (
            json!({"annotator": "x".repeat(101), "status": "draft", "labels": []}),
            "annotator",
        ),
        (
            json!({"annotator": "a", "status": "done", "labels": []}),
            "status",
        ),
        (json!({"annotator": "a", "labels": []}), "status"),
        (json!({"annotator": "a", "status": "draft"}), "labels"),
        (
            json!({"annotator": "a", "status": "draft", "labels": {}}),
            "labels",
        ),
        (
            json!({"annotator": "a", "status": "draft", "labels": too_many}),
            "labels",
        ),
        (
            json!({"annotator": "a", "status": "draft", "labels": [], "extra": 1}),
            "extra",
        ),
        (
            json!({"annotator": "a", "status": "draft", "labels": [], "note": "n".repeat(10_001)}),
            "note",
        ),
        (
            json!({"annotator": "a", "status": "draft", "labels": [], "lead_time": -1}),
            "lead_time",
        ),
        (
            json!({"annotator": "a", "status": "draft", "labels": [], "lead_time": "5"}),
            "lead_time",
        ),
        (label(json!({"id": "NOT_A_LABEL"})), "labels[1].id"),
        (label(json!({"id": 7})), "labels[1].id"),
        (label(json!({"id": "EXEC_COGNITIVE"})), "labels[1].id"),
        (label(json!({"confidence": 1.5})), "labels[1].confidence"),
        (label(json!({"confidence": "high"})), "labels[1].confidence"),
        (
            label(json!({"evidence": {"quote": "words that are nowhere in the unit 0xdeadbeef"}})),
            "labels[1].evidence.quote",
        ),
        (
            label(json!({"evidence": {"quote": ""}})),
            "labels[1].evidence.quote",
        ),
        (
            label(json!({"evidence": {"quote": "q".repeat(2_001)}})),
            "labels[1].evidence.quote",
        ),
        (label(json!({"evidence": {"page": 3}})), "labels[1].evidence.page"),
        (
            label(json!({"fields": {"decomposition": "not a list"}})),
            "labels[1].fields.decomposition",
        ),
        (
            label(json!({"fields": {"unknown_field": 1}})),
            "labels[1].fields.unknown_field",
        ),
        (label(json!({"fields": []})), "labels[1].fields"),
        (label(json!({"colour": "red"})), "labels[1].colour"),
    ];
    for (body, field) in cases {
        let r = put(&server, &path, &body, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.json);
        assert_eq!(r.json["details"]["field"], field, "{body}: {}", r.json);
        assert_eq!(r.json["error"], "Bad Request");
    }
    let not_json = server
        .client
        .put(format!("{}{path}", server.url))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);

    // Adjudication is for reviewers.
    let adjudicated = set("a", "adjudicated", json!([]));
    assert_eq!(
        put(&server, &path, &adjudicated, None).await.status,
        StatusCode::FORBIDDEN
    );
    let by_lead = put(&server, &path, &set("lead", "adjudicated", json!([])), None).await;
    assert_eq!(by_lead.status, StatusCode::CREATED, "{}", by_lead.json);

    // A grounded quote passes; nothing refused was stored.
    let ok = put(
        &server,
        &path,
        &label(json!({"evidence": {"quote": quote_of(&text)}, "confidence": 0})),
        None,
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.json);
    let list = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(list.json["total"], 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_with_one_if_match_let_exactly_one_through() {
    TestDb::each(race).await;
}

async fn race(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    for annotator in ["ann.a", "ann.b"] {
        let r = put(&server, &path, &set(annotator, "draft", json!([])), None).await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let server = std::sync::Arc::new(server);
    let mut tasks = Vec::new();
    for i in 0..40 {
        let server = server.clone();
        let path = path.clone();
        let annotator = if i % 2 == 0 { "ann.a" } else { "ann.b" };
        tasks.push(tokio::spawn(async move {
            let body = set(
                annotator,
                "submitted",
                json!([{"id": "EXEC_COGNITIVE", "confidence": i as f64 / 100.0}]),
            );
            let r = put(&server, &path, &body, Some("\"labels-1\"")).await;
            (annotator, r.status, r.json)
        }));
    }
    let mut won = std::collections::BTreeMap::<&str, Vec<Value>>::new();
    for t in tasks {
        let (annotator, status, body) = t.await.unwrap();
        match status {
            StatusCode::OK => won.entry(annotator).or_default().push(body),
            StatusCode::PRECONDITION_FAILED => assert_eq!(body["details"]["current"]["version"], 2),
            other => panic!("{other}: {body}"),
        }
    }
    for annotator in ["ann.a", "ann.b"] {
        let winners = &won[annotator];
        assert_eq!(winners.len(), 1, "exactly one write of {annotator} went through");
        let list = server
            .get(&format!("/api/graph/{id}/labels?annotator={annotator}"))
            .await;
        // The winner's write is what is stored: nothing lost, nothing overwritten.
        assert_eq!(list.json["labels"][0]["labels"], winners[0]["labels"]);
        assert_eq!(list.json["labels"][0]["version"], 2);
        let history = server.get(&format!("{path}/history?annotator={annotator}")).await;
        assert_eq!(history.json["total"], 2);
    }
    std::sync::Arc::into_inner(server).unwrap().stop().await;
}

/// `PUT` with the given extra headers (`If-Match`, `If-None-Match`, ...).
pub async fn put_with(server: &TestServer, path: &str, body: &Value, headers: &[(&str, &str)]) -> Reply {
    let mut request = server.client.put(format!("{}{path}", server.url)).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Reply::read(request.send().await.unwrap()).await
}

/// The page's first write of a unit used to go without a precondition, and silently
/// replaced a set written meanwhile (in another tab, by an import). `If-None-Match: *`
/// creates the set only if there is none: else 412 with the set as it stands, and nothing
/// changes; of concurrent creators exactly one wins. Per annotator and codebook.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn if_none_match_star_creates_a_set_only_when_there_is_none() {
    TestDb::each(create_only).await;
}

async fn create_only(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let create = [("if-none-match", "*")];
    let first = put_with(
        &server,
        &path,
        &set("ann.a", "draft", json!([{"id": "EXEC_COGNITIVE"}])),
        &create,
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.json);
    assert_eq!(first.headers["etag"], "\"labels-1\"");

    let again = put_with(&server, &path, &set("ann.a", "submitted", json!([])), &create).await;
    assert_eq!(again.status, StatusCode::PRECONDITION_FAILED, "{}", again.json);
    assert_eq!(again.json["error"], "Precondition Failed");
    assert!(
        again.json["message"]
            .as_str()
            .unwrap()
            .starts_with("If-None-Match: * does not hold"),
        "{}",
        again.json
    );
    assert_eq!(
        again.json["details"]["current"], first.json,
        "the set as it stands"
    );
    assert_eq!(again.headers["etag"], "\"labels-1\"");
    let history = server.get(&format!("{path}/history?annotator=ann.a")).await;
    assert_eq!(history.json["total"], 1, "the refused write changed nothing");

    // Another annotator's set, and the same annotator's under another codebook, are other sets.
    let other = put_with(&server, &path, &set("ann.b", "draft", json!([])), &create).await;
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.json);
    let speechact = format!("{path}?codebook=speechact");
    let book = put_with(&server, &speechact, &set("ann.a", "draft", json!([])), &create).await;
    assert_eq!(book.status, StatusCode::CREATED, "{}", book.json);

    for (headers, what) in [
        (vec![("if-none-match", "\"labels-1\"")], "a tag"),
        (
            vec![("if-none-match", "*"), ("if-match", "\"labels-1\"")],
            "both headers",
        ),
    ] {
        let refused = put_with(&server, &path, &set("ann.a", "draft", json!([])), &headers).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{what}: {}",
            refused.json
        );
        assert_eq!(refused.json["details"]["field"], "If-None-Match", "{what}");
    }
    concurrent_creates(&server, &path).await;
    server.stop().await;
}

/// Twenty first writes of one set at once, each with `If-None-Match: *`: exactly one is
/// created, every other is a 412 carrying it, and the history holds that one write.
async fn concurrent_creates(server: &TestServer, path: &str) {
    let answers = futures_util::future::join_all((0..20).map(|i| {
        let body = set(
            "racer",
            "submitted",
            json!([{"id": "EXEC_COGNITIVE", "confidence": i as f64 / 20.0}]),
        );
        async move { put_with(server, path, &body, &[("if-none-match", "*")]).await }
    }))
    .await;
    let created: Vec<&Reply> = answers
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .collect();
    assert_eq!(created.len(), 1, "exactly one creator wins");
    for refused in answers.iter().filter(|r| r.status != StatusCode::CREATED) {
        assert_eq!(
            refused.status,
            StatusCode::PRECONDITION_FAILED,
            "{}",
            refused.json
        );
        assert_eq!(refused.json["details"]["current"], created[0].json);
    }
    let stored = server.get(&format!("{path}/history?annotator=racer")).await;
    assert_eq!(stored.json["total"], 1, "{}", stored.json);
    assert_eq!(stored.json["history"][0]["after"], created[0].json);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_survive_a_restart_and_read_only_mode_serves_them() {
    TestDb::each(restart).await;
}

async fn restart(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        data_dir: Some(dir.path().to_owned()),
        ..db.options()
    };
    let (server, id, units) = sample_server(options.clone()).await;
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let body = set(
        "ann.a",
        "submitted",
        json!([{"id": "EXEC_COGNITIVE", "confidence": 0.5}]),
    );
    assert_eq!(put(&server, &path, &body, None).await.status, StatusCode::CREATED);
    let before = server.get(&format!("/api/graph/{id}/labels")).await;
    server.stop().await;
    if db.url.is_none() {
        assert!(dir.path().join("labels.sqlite3").is_file());
    }

    let server = TestServer::start(Options {
        read_only: true,
        ..options
    })
    .await;
    let after = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(after.status, StatusCode::OK);
    assert_eq!(after.json, before.json, "labels intact after a restart");
    assert_eq!(server.get(&format!("{path}/history")).await.json["total"], 1);
    let refused = put(&server, &path, &body, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.json["message"].as_str().unwrap().contains("read-only"));
    let refused = delete(&server, &format!("{path}?annotator=ann.a"), None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(
        server.get(&format!("/api/graph/{id}/labels")).await.json,
        before.json
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_see_each_others_labels() {
    TestDb::each(replicas).await;
}

async fn replicas(db: &TestDb) {
    // SQLite: one file both servers open; PostgreSQL: the test database.
    let shared = tempfile::tempdir().unwrap();
    let url = match &db.url {
        Some(url) => url.clone(),
        None => sessiongraph::labels::store::default_url(shared.path()).unwrap(),
    };
    let options = Options {
        database_url: Some(url),
        ..Options::default()
    };
    // The same bytes uploaded to each give the same session id.
    let (a, id, units) = sample_server(options.clone()).await;
    let (b, id_b, _) = sample_server(options).await;
    assert_eq!(id, id_b);
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let written = put(
        &a,
        &path,
        &set("ann.a", "submitted", json!([{"id": "EXEC_COGNITIVE"}])),
        None,
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED);
    // B read the session's sets for its annotations body before A wrote (listing the
    // units), and keeps them in memory: A's commit must still show at once.
    assert_eq!(
        labels_shown(&b, &id, &event).await,
        json!([{"id": "EXEC_COGNITIVE", "confidence": 1.0}])
    );
    let seen = b.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(seen.json["labels"][0], written.json);
    // B writes on top of what A wrote, conditionally: its If-Match holds.
    let tag = written.headers["etag"].to_str().unwrap().to_owned();
    let on_b = put(&b, &path, &set("ann.a", "discarded", json!([])), Some(&tag)).await;
    assert_eq!(on_b.status, StatusCode::OK, "{}", on_b.json);
    let stale = put(&a, &path, &set("ann.a", "draft", json!([])), Some(&tag)).await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(a.get(&format!("{path}/history")).await.json["total"], 2);
    a.stop().await;
    b.stop().await;
}

/// Regression (F1): eight first writes of one set at once, without `If-Match`, on
/// PostgreSQL: two were acknowledged with the same version, the stored version went
/// backwards (history 1, 2, 3, 2, 4, 2, 5, 6), and a later `If-Match` taken from one
/// writer's answer held against content that writer never saw. Every write, by `PUT` or by
/// import, first or after a removal, must get its own version, the history must climb by
/// one, and the set must be the last write's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn f1_concurrent_first_writes_get_strictly_increasing_versions() {
    TestDb::each(concurrent_creators).await;
}

async fn concurrent_creators(db: &TestDb) {
    const TRIALS: usize = 20;
    let (server, id, units) = sample_server(db.options()).await;
    let (event, _) = texty(&units);
    let server = std::sync::Arc::new(server);
    for trial in 0..TRIALS {
        let annotator = format!("creator.{trial}");
        let acknowledged = write_at_once(&server, &id, &event, &annotator, 0).await;
        let last = check_history(&server, &id, &event, &annotator, &acknowledged, 1).await;
        // Only the last write's tag still holds.
        let path = format!("/api/graph/{id}/labels/{event}");
        let body = json!({"annotator": annotator, "status": "draft", "labels": []});
        for seen in acknowledged.iter().filter(|v| **v != last) {
            let stale = put(&server, &path, &body, Some(&format!("\"labels-{seen}\""))).await;
            assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "{}", stale.json);
        }
        let fresh = put(&server, &path, &body, Some(&format!("\"labels-{last}\""))).await;
        assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.json);
        if trial % 4 == 0 {
            // Created again after a removal: above every version the history knows.
            let gone = delete(&server, &format!("{path}?annotator={annotator}"), None).await;
            assert_eq!(gone.status, StatusCode::NO_CONTENT);
            let again = write_at_once(&server, &id, &event, &annotator, 1).await;
            check_history(&server, &id, &event, &annotator, &again, last + 2).await;
        }
    }
    std::sync::Arc::into_inner(server).unwrap().stop().await;
}

/// Eight writes of `annotator`'s set at once, without `If-Match`: `PUT`s, and with `imports`
/// 1 every other one an import line. The versions the `PUT`s were acknowledged with.
async fn write_at_once(
    server: &std::sync::Arc<TestServer>,
    id: &str,
    event: &str,
    annotator: &str,
    imports: usize,
) -> Vec<i64> {
    const WRITERS: usize = 8;
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(WRITERS));
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (server, start) = (server.clone(), start.clone());
            let (id, event) = (id.to_owned(), event.to_owned());
            let body = json!({"annotator": annotator, "status": "draft", "labels": [],
                              "note": format!("writer {writer}")});
            let by_import = imports == 1 && writer % 2 == 1;
            tokio::spawn(async move {
                start.wait().await;
                if by_import {
                    let mut line = body;
                    line["session_id"] = json!(id);
                    line["event_id"] = json!(event);
                    let reply = server
                        .post_bytes(
                            "/api/labels/import",
                            format!("{line}\n").into_bytes(),
                            &[("content-type", "application/x-ndjson")],
                        )
                        .await;
                    assert_eq!(
                        (reply.status, &reply.json["ok"]),
                        (StatusCode::OK, &json!(1)),
                        "{}",
                        reply.json
                    );
                    None
                } else {
                    let reply = put(&server, &format!("/api/graph/{id}/labels/{event}"), &body, None).await;
                    assert!(reply.status.is_success(), "{}: {}", reply.status, reply.json);
                    Some(reply.json["version"].as_i64().unwrap())
                }
            })
        })
        .collect();
    let mut versions = Vec::new();
    for task in tasks {
        versions.extend(task.await.unwrap());
    }
    versions
}

/// Checks that the history of `annotator`'s set, from version `first` on, climbs by one
/// over eight writes, holds every acknowledged version once, and ends with the stored set.
/// Returns the last version.
async fn check_history(
    server: &TestServer,
    id: &str,
    event: &str,
    annotator: &str,
    acknowledged: &[i64],
    first: i64,
) -> i64 {
    let history = server
        .get(&format!(
            "/api/graph/{id}/labels/{event}/history?annotator={annotator}"
        ))
        .await;
    let puts: Vec<&Value> = history.json["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["action"] == "put" && h["version"].as_i64().unwrap() >= first)
        .collect();
    let versions: Vec<i64> = puts.iter().map(|h| h["version"].as_i64().unwrap()).collect();
    assert_eq!(
        versions,
        (first..first + 8).collect::<Vec<_>>(),
        "one version per write, in order"
    );
    let mut seen = acknowledged.to_vec();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen.len(),
        acknowledged.len(),
        "no version acknowledged twice: {acknowledged:?}"
    );
    assert!(seen.iter().all(|v| versions.contains(v)));
    let stored = server
        .get(&format!("/api/graph/{id}/labels?annotator={annotator}"))
        .await;
    let last = puts.last().unwrap();
    assert_eq!(
        stored.json["labels"][0], last["after"],
        "the set is the last write's"
    );
    first + 7
}

/// Regression (F12): on PostgreSQL a note holding NUL answered 500 (200 on SQLite), a NUL
/// in an id on DELETE, history or queue release 500, and an import of 1,000 good lines and
/// one with a NUL note stored nothing. NUL is refused in every text and id with a 400
/// naming the field, on both backends alike; the import's other lines are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f12_nul_characters_are_refused_naming_the_field_on_both_backends() {
    TestDb::each(nul_characters).await;
}

async fn nul_characters(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let (event, text) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let quote = quote_of(&text);
    for (body, field) in [
        (
            json!({"annotator": "a", "status": "draft", "labels": [], "note": "a\u{0}b"}),
            "note",
        ),
        (
            json!({"annotator": "a", "status": "draft",
                   "labels": [{"id": "EXEC_COGNITIVE", "evidence": {"quote": quote, "cue": "c\u{0}"}}]}),
            "labels[0].evidence.cue",
        ),
        (
            json!({"annotator": "a\u{0}", "status": "draft", "labels": []}),
            "annotator",
        ),
    ] {
        let r = put(&server, &path, &body, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.json);
        assert_eq!(r.json["details"]["field"], field, "{}", r.json);
    }
    let nul = "%00";
    for (method, url, field) in [
        (
            reqwest::Method::DELETE,
            format!("/api/graph/{id}/labels/{event}{nul}?annotator=a"),
            "event_id",
        ),
        (
            reqwest::Method::GET,
            format!("/api/graph/{id}/labels/{event}{nul}/history"),
            "event_id",
        ),
        (
            reqwest::Method::GET,
            format!("{path}/history?annotator=a{nul}"),
            "annotator",
        ),
        (reqwest::Method::PUT, format!("{path}{nul}"), "event_id"),
    ] {
        let body = json!({"annotator": "a", "status": "draft", "labels": []});
        let r = server.send_json(method.clone(), &url, Some(&body), &[]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {url}: {}", r.json);
        assert_eq!(r.json["details"]["field"], field, "{}", r.json);
    }
    let release = json!({"annotator": "a", "session_id": id, "event_id": format!("{event}\u{0}")});
    let r = server.post_json("/api/labels/queue/release", &release, &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert_eq!(r.json["details"]["field"], "event_id");

    let mut lines: String = (0..1_000)
        .map(|n| {
            format!(
                "{}\n",
                json!({"session_id": id, "event_id": event, "annotator": format!("imp.{n}"), "labels": []})
            )
        })
        .collect();
    lines.push_str(&format!(
        "{}\n",
        json!({"session_id": id, "event_id": event, "annotator": "imp.nul", "labels": [], "note": "x\u{0}"})
    ));
    let imported = server
        .post_bytes(
            "/api/labels/import",
            lines.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.json);
    assert_eq!(
        (&imported.json["ok"], &imported.json["failed"]),
        (&json!(1000), &json!(1))
    );
    assert_eq!(
        imported.json["results"][1000]["field"], "note",
        "{}",
        imported.json["results"][1000]
    );
    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.json["total"], 1000);
    server.stop().await;
}

/// A TCP relay to a database that a test can cut (connections dropped, new ones refused)
/// and restore, to play a database going down and coming back.
pub struct Relay {
    /// The port of 127.0.0.1 it listens on.
    pub port: u16,
    upstream: std::net::SocketAddr,
    tasks: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Relay {
    /// A relay to the PostgreSQL server of `url`, and `url` through it.
    pub async fn of_url(url: &str) -> (Relay, String) {
        let (rest, path) = url.split_once("://").unwrap().1.split_once('/').unwrap();
        let (credentials, host) = rest.rsplit_once('@').unwrap();
        let upstream = tokio::net::lookup_host(host).await.unwrap().next().unwrap();
        let relay = Relay::to(upstream).await;
        let relayed = format!("postgres://{credentials}@127.0.0.1:{}/{path}", relay.port);
        (relay, relayed)
    }

    /// A relay to `upstream` on a free port of 127.0.0.1.
    pub async fn to(upstream: std::net::SocketAddr) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            port: listener.local_addr().unwrap().port(),
            upstream,
            tasks: Default::default(),
        };
        relay.serve(listener);
        relay
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (upstream, tasks) = (self.upstream, self.tasks.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let connection = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks.lock().unwrap().push(connection.abort_handle());
            }
        });
        self.tasks.lock().unwrap().push(accepting.abort_handle());
    }

    /// The database goes down: open connections break, new ones are refused.
    pub fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// The database is back on the same address.
    pub async fn restore(&self) {
        for _ in 0..100 {
            if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await {
                return self.serve(listener);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the relay's port was not free again");
    }
}

/// Regression (F11): with PostgreSQL down, label routes and annotations waited 10 s, then
/// answered 500, the export a 200 that broke off, and `/readyz` stayed 200. Label routes
/// and the export answer 503 with `Retry-After` (the request timeout here, 8 s, would
/// answer 408 if they waited for it), the annotations body comes without labels and says
/// so, `/readyz` reports the database, and everything works again once the database is
/// back, without a restart. PostgreSQL only (`DATABASE_URL`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f11_postgresql_down_answers_503_serves_views_without_labels_and_recovers() {
    let Some(admin) = TestDb::backends().into_iter().flatten().next() else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED f11_postgresql_down: DATABASE_URL is not set"
        );
        return;
    };
    let db = TestDb::fresh(Some(admin)).await;
    let (relay, relayed) = Relay::of_url(db.url.as_deref().unwrap()).await;
    let options = Options {
        database_url: Some(relayed),
        request_timeout: std::time::Duration::from_secs(8),
        ..Options::default()
    };
    let (server, id, units) = sample_server(options).await;
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let body = set("ann.a", "submitted", json!([{"id": "EXEC_COGNITIVE"}]));
    assert_eq!(put(&server, &path, &body, None).await.status, StatusCode::CREATED);
    assert_ne!(labels_shown(&server, &id, &event).await, json!([]));

    relay.cut();
    let refused = put(&server, &path, &body, None).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.json
    );
    assert!(refused.headers.contains_key("retry-after"));
    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.status, StatusCode::SERVICE_UNAVAILABLE, "{}", listed.json);
    let exported = server.get("/api/labels/export").await;
    assert_eq!(
        exported.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        exported.json
    );
    assert!(exported.headers.contains_key("retry-after"));
    let annotations = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(annotations.status, StatusCode::OK, "{}", annotations.json);
    assert_eq!(annotations.headers["x-labels"], "unavailable");
    assert!(!annotations.headers.contains_key("etag"));
    let ready = server.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.json["database"], "unreachable", "{}", ready.json);

    relay.restore().await;
    let mut back = None;
    for _ in 0..50 {
        let r = put(&server, &path, &body, None).await;
        if r.status != StatusCode::SERVICE_UNAVAILABLE {
            back = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let back = back.expect("label writes work again once the database is back");
    assert_eq!(back.status, StatusCode::OK, "{}", back.json);
    assert_eq!(server.get("/readyz").await.json["database"], "ok");
    let exported = server.get("/api/labels/export").await;
    assert_eq!(exported.status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&exported.bytes).contains("EXEC_COGNITIVE"));
    assert!(!server
        .get(&format!("/api/graph/{id}/annotations"))
        .await
        .headers
        .contains_key("x-labels"));
    server.stop().await;
    db.cleanup().await;
}

/// Fills the file system holding `dir` with a file there; returns the file.
fn fill_disk(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 4096];
    while file.write_all(&block).is_ok() {}
    let _ = file.sync_all();
    path
}

/// Regression (F16): a full disk gave 507 for uploads but 500 for label writes and imports.
/// Label writes and imports answer 507 too, store nothing, and work again once there is
/// space. SQLite on a 2 MiB tmpfs (needs root to mount; skipped elsewhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f16_a_full_disk_answers_507_to_label_writes_and_imports() {
    let Some(disk) = crate::helpers::SmallDisk::mount("2m") else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED f16_a_full_disk: cannot mount a tmpfs here"
        );
        return;
    };
    let server = TestServer::start(Options {
        data_dir: Some(disk.path().to_owned()),
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let id = server.first_session(&[]).await;
    let units = units(&server, &id).await;
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let note = "n".repeat(10_000);
    let body = |who: &str| json!({"annotator": who, "status": "draft", "labels": [], "note": note});
    assert_eq!(
        put(&server, &path, &body("first"), None).await.status,
        StatusCode::CREATED
    );
    let filler = fill_disk(disk.path());
    let mut full = None;
    for n in 0..50 {
        let r = put(&server, &path, &body(&format!("w{n}")), None).await;
        if r.status != StatusCode::CREATED {
            full = Some(r);
            break;
        }
    }
    let full = full.expect("the disk fills up");
    assert_eq!(full.status, StatusCode::INSUFFICIENT_STORAGE, "{}", full.json);
    assert!(full.json["message"]
        .as_str()
        .unwrap()
        .starts_with("The labels were not stored"));
    let line = json!({"session_id": id, "event_id": event, "annotator": "imp", "labels": [], "note": note});
    let imported = server
        .post_bytes(
            "/api/labels/import",
            format!("{line}\n").into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(
        imported.status,
        StatusCode::INSUFFICIENT_STORAGE,
        "{}",
        imported.json
    );
    std::fs::remove_file(filler).unwrap();
    assert_eq!(
        put(&server, &path, &body("after"), None).await.status,
        StatusCode::CREATED
    );
    let listed = server.get(&format!("/api/graph/{id}/labels?annotator=imp")).await;
    assert_eq!(listed.json["total"], 0, "nothing of the refused import was kept");
    server.stop().await;
}

/// The codings agreement reads, over a store larger than one of SQLite's packed reads
/// (8,192 row ids) with gaps in its row ids, drafts and adjudicated sets, equal what a plain
/// query of every row gives: for the whole store and one session, and for a blind viewer
/// (only the units they submitted or adjudicated).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agreement_reads_every_submitted_set_whatever_the_backend_packs() {
    TestDb::each(codings_read_whole).await;
}

async fn codings_read_whole(db: &TestDb) {
    use sessiongraph::labels::agreement::{report, PairPage};
    use sessiongraph::labels::codings::CodingTable;
    use sessiongraph::labels::consensus::Sight;
    let data = tempfile::tempdir().unwrap();
    let (url, store) = db.open_store(data.path()).await;
    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
    conn.execute("BEGIN").await.unwrap();
    let statuses = ["submitted", "submitted", "submitted", "draft", "adjudicated"];
    let labels = [
        "[]",
        r#"[{"id":"EXEC_COGNITIVE"}]"#,
        r#"[{"id":"EXEC_DIGITAL","confidence":0.5},{"id":"EXEC_COGNITIVE"}]"#,
    ];
    for chunk in (0..21_000usize).collect::<Vec<_>>().chunks(1_000) {
        let rows: Vec<String> = chunk
            .iter()
            .map(|&i| {
                let (session, unit, annotator) = (i % 3, (i / 3) % 2_000, i / 6_000);
                format!(
                    "('delegation', 's{session}', 'U:{unit:05}', 'ann-{annotator}', '{}', '{}', NULL, NULL, 1, '2026-01-01T00:00:00.000Z')",
                    statuses[(i / 7) % statuses.len()],
                    labels[i % labels.len()]
                )
            })
            .collect();
        conn.execute(
            format!(
                "INSERT INTO label_sets (codebook, session_id, event_id, annotator, status, labels, note, \
                 lead_time_ms, version, updated_at) VALUES {}",
                rows.join(",")
            )
            .as_str(),
        )
        .await
        .unwrap();
    }
    conn.execute("DELETE FROM label_sets WHERE event_id LIKE '%7'")
        .await
        .unwrap();
    conn.execute("COMMIT").await.unwrap();
    // Every row, as agreement counts them: (unit, annotator, status, label ids).
    let rows: Vec<(String, String, String, Vec<String>)> =
        sqlx::query_as::<_, (String, String, String, String, String)>(
            "SELECT session_id, event_id, annotator, status, labels FROM label_sets",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .map(|(s, e, a, status, labels)| {
            let ids: Vec<Value> = serde_json::from_str(&labels).unwrap();
            let ids = ids.iter().map(|l| l["id"].as_str().unwrap().to_owned()).collect();
            (format!("{s}\u{0}{e}"), a, status, ids)
        })
        .collect();
    conn.close().await.unwrap();
    let expected = |session: Option<&str>, viewer: Option<&str>| {
        let opened: std::collections::HashSet<&str> = rows
            .iter()
            .filter(|r| viewer == Some(r.1.as_str()) && (r.2 == "submitted" || r.2 == "adjudicated"))
            .map(|r| r.0.as_str())
            .collect();
        let mut table = CodingTable::default();
        for (unit, annotator, status, ids) in &rows {
            let in_session = session.is_none_or(|s| unit.starts_with(&format!("{s}\u{0}")));
            if in_session && status == "submitted" && (viewer.is_none() || opened.contains(unit.as_str())) {
                table.push(unit, annotator, ids.clone());
            }
        }
        table
    };
    let label_ids: Vec<String> = ["EXEC_COGNITIVE", "EXEC_DIGITAL"].map(str::to_owned).to_vec();
    let everything = |_: &str| true;
    for (session, viewer) in [
        (None, None),
        (Some("s1"), None),
        (None, Some("ann-1")),
        (Some("s2"), Some("ann-2")),
    ] {
        let sight = viewer.map_or(Sight::Everything, Sight::OwnUntilSubmitted);
        let read = store
            .submitted_codings("delegation", session, &everything, &everything, sight)
            .await
            .unwrap();
        let want = expected(session, viewer);
        assert!(!want.is_empty());
        assert_eq!(read.len(), want.len(), "{session:?} {viewer:?}");
        assert_eq!(
            report(read, &label_ids, &PairPage::all()),
            report(want, &label_ids, &PairPage::all()),
            "{session:?} {viewer:?}"
        );
    }
    store.close().await;
}

/// A session's sets read in bulk (SQLite packs each unit's into one JSON array) are the
/// stored rows exactly: labels with evidence, typed fields in their order, escapes and
/// numbers as written, notes, lead times, every status; by unit then annotator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_sets_read_in_bulk_are_the_stored_rows() {
    TestDb::each(bulk_read_is_exact).await;
}

/// A `label_sets` row: event_id, annotator, status, labels, note, lead_time_ms, version,
/// updated_at.
type StoredRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    Option<i64>,
    i64,
    String,
);

async fn bulk_read_is_exact(db: &TestDb) {
    use sessiongraph::labels::{LabelSet, Status};
    let data = tempfile::tempdir().unwrap();
    let (url, store) = db.open_store(data.path()).await;
    let labels = [
        r#"[]"#,
        r#"[{"id":"EXEC_COGNITIVE","confidence":0.1,"evidence":{"quote":"caf\u00e9 \"quoted\" é","cue":"c"}}]"#,
        r#"[{"id":"TASK_DECOMPOSITION","confidence":1e-7,"fields":{"zeta":1,"alpha":[1,2.5,null],"big":12345678901234567890,"nested":{"b":true,"a":"x"}}},{"id":"EXEC_DIGITAL"}]"#,
    ];
    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
    for (i, (event, annotator)) in [
        ("U:b", "zed"),
        ("U:a", "bob"),
        ("U:b", "amy"),
        ("U:a", "amy"),
        ("U:c", "x.y@z"),
    ]
    .into_iter()
    .enumerate()
    {
        sqlx::query(
            "INSERT INTO label_sets (codebook, session_id, event_id, annotator, status, labels, note, \
             lead_time_ms, version, updated_at) \
             VALUES ('delegation', 's', $1, $2, $3, $4, $5, $6, $7, '2026-01-01T00:00:00.000Z')",
        )
        .bind(event)
        .bind(annotator)
        .bind(Status::ALL[i % 4].as_str())
        .bind(labels[i % labels.len()])
        .bind((i % 2 == 0).then(|| format!("note {i}: «ünïcode» \\ \"")))
        .bind((i % 3 != 0).then_some(1_500 * i as i64))
        .bind(i as i64 + 1)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let rows: Vec<StoredRow> = sqlx::query_as(
        "SELECT event_id, annotator, status, labels, note, lead_time_ms, version, updated_at FROM label_sets",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let mut expected: Vec<LabelSet> = rows
        .into_iter()
        .map(
            |(event_id, annotator, status, labels, note, lead_time_ms, version, updated_at)| LabelSet {
                event_id,
                annotator,
                status: Status::parse(&status).unwrap(),
                labels: serde_json::from_str(&labels).unwrap(),
                note,
                lead_time: lead_time_ms.map(|ms| ms as f64 / 1000.0),
                version,
                updated_at,
                codebook_version: None,
            },
        )
        .collect();
    expected.sort_by(|a, b| (&a.event_id, &a.annotator).cmp(&(&b.event_id, &b.annotator)));
    let listed = store.list("delegation", "s").await.unwrap();
    assert_eq!(listed.as_slice(), expected.as_slice());
    let fields =
        serde_json::to_string(&listed.iter().find(|s| s.labels.len() == 2).unwrap().labels[0].fields)
            .unwrap();
    assert_eq!(
        fields, r#"{"zeta":1,"alpha":[1,2.5,null],"big":12345678901234567890,"nested":{"b":true,"a":"x"}}"#,
        "fields keep their order and numbers"
    );
    store.close().await;
}

/// A PostgreSQL server that gives up waiting for a lock (its `lock_timeout`) answers a write
/// with 503 and `Retry-After`, as a busy SQLite database does: the write can be sent
/// again, nothing failed for good. Before, such an error was a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_lock_timeout_answers_503_with_retry_after() {
    let Some(db) =
        crate::cluster::shared_database("a_postgres_lock_timeout_answers_503_with_retry_after").await
    else {
        return;
    };
    let url = db.url.clone().unwrap();
    let separator = if url.contains('?') { '&' } else { '?' };
    let impatient = format!("{url}{separator}options=-c%20lock_timeout%3D200");
    let (server, id, units) = sample_server(Options {
        database_url: Some(impatient),
        ..Options::default()
    })
    .await;
    let (event, _) = texty(&units);
    let path = format!("/api/graph/{id}/labels/{event}");
    let set = json!({ "annotator": "ann.a", "status": "draft", "labels": [] });

    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    holder.execute("BEGIN").await.unwrap();
    holder
        .execute("LOCK TABLE label_sets IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let refused = put(&server, &path, &set, None).await;
    holder.execute("ROLLBACK").await.unwrap();
    holder.close().await.unwrap();
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.json
    );
    assert!(refused.headers.contains_key("retry-after"));

    let written = put(&server, &path, &set, None).await;
    assert!(written.status.is_success(), "{}", written.json);
    server.stop().await;
    db.cleanup().await;
}
