//! Labeling across units on a real server, on SQLite and (with `DATABASE_URL`) PostgreSQL:
//! import with good and bad lines, the labels the annotations body shows, the queue under
//! 32 concurrent annotators, blind mode and named keys, export round trips, progress and
//! agreement, orphaned labels.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sessiongraph::labels::import::{MAX_IMPORT_LINES, MAX_LINE_VALUES, MAX_RECORDS_PER_LINE};
use sessiongraph::labels::import_body::BATCH_LINES;
use sessiongraph::labels::LabelPolicy;

use crate::complexity::{CountedRuntime, Work};
use crate::helpers::records::Record;
use crate::labels::{
    hold_write_lock, labels_shown, put, quote_of, release_write_lock, sample_server, TestDb,
};
use crate::server::{Options, Reply, TestServer};

/// A server's options with `lead` as its reviewer.
fn with_reviewer_lead() -> Options {
    Options {
        label_policy: LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..Options::default()
    }
}

/// Imports `lines` (JSONL), with `headers`.
async fn import(server: &TestServer, lines: &[Value], headers: &[(&str, &str)]) -> Reply {
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut headers = headers.to_vec();
    headers.push(("content-type", "application/x-ndjson"));
    server
        .post_bytes("/api/labels/import", body.into_bytes(), &headers)
        .await
}

fn set(annotator: &str, status: &str, ids: &[&str]) -> Value {
    let labels: Vec<Value> = ids.iter().map(|id| json!({ "id": id })).collect();
    json!({ "annotator": annotator, "status": status, "labels": labels })
}

/// The units with text (`event_id`, text), main chain first.
fn texty_units(units: &[(String, String, bool)], n: usize) -> Vec<(String, String)> {
    units
        .iter()
        .filter(|(_, t, _)| t.chars().count() >= 20)
        .take(n)
        .map(|(e, t, _)| (e.clone(), t.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_answers_per_line_stores_the_valid_ones_and_twice_changes_nothing() {
    TestDb::each(import_lines).await;
}

async fn import_lines(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let picked = texty_units(&units, 2);
    let (e1, t1) = &picked[0];
    let (e2, _) = &picked[1];
    let good_set = json!({"session_id": id, "event_id": e1, "annotator": "ann.a", "labels": [
        {"id": "EXEC_COGNITIVE", "confidence": 0.8, "evidence": {"quote": quote_of(t1)}}]});
    let good_suggestion = json!({"session_id": id, "event_id": e1, "model": "gpt-4o:2024-08-06",
        "score": 0.7, "labels": [{"id": "EXEC_COGNITIVE"}]});
    let lines = [
        good_set.clone(),
        good_suggestion.clone(),
        json!({"session_id": id, "event_id": e2, "annotator": "ann.b", "labels": [{"id": "NOT_A_LABEL"}]}),
        json!({"session_id": id, "event_id": e2, "annotator": "ann.b", "labels": [
            {"id": "EXEC_COGNITIVE", "evidence": {"quote": "words that are nowhere in the unit"}}]}),
        json!({"session_id": id, "event_id": "U:nowhere", "annotator": "ann.b", "labels": []}),
        json!({"session_id": "no-such-session", "event_id": e2, "annotator": "ann.b", "labels": []}),
        json!({"session_id": id, "event_id": e2, "model": "m", "score": 2, "labels": []}),
    ];
    let mut body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    body.push_str("\n{not json\n");
    let first = server
        .post_bytes(
            "/api/labels/import",
            body.clone().into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.json);
    assert_eq!(first.json["lines"], 8);
    assert_eq!(first.json["ok"], 2);
    assert_eq!(first.json["written"], 2);
    let results = first.json["results"].as_array().unwrap();
    let field = |line: u64| {
        results
            .iter()
            .find(|r| r["line"] == line)
            .map(|r| (r["ok"].clone(), r["field"].clone()))
            .unwrap()
    };
    assert_eq!(field(1), (json!(true), Value::Null));
    assert_eq!(field(3), (json!(false), json!("labels[0].id")));
    assert_eq!(field(4), (json!(false), json!("labels[0].evidence.quote")));
    assert_eq!(field(5), (json!(false), json!("event_id")));
    assert_eq!(field(6), (json!(false), json!("event_id")));
    assert_eq!(field(7), (json!(false), json!("score")));
    assert_eq!(
        field(9),
        (json!(false), json!("line")),
        "a blank line is skipped, not answered"
    );

    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.json["total"], 1);
    assert_eq!(listed.json["labels"][0]["annotator"], "ann.a");
    assert_eq!(listed.json["suggestions"][0]["model"], "gpt-4o:2024-08-06");
    assert_eq!(listed.json["suggestions"][0]["score"], 0.7);

    let again = server
        .post_bytes(
            "/api/labels/import",
            body.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(again.json["written"], 0, "{}", again.json);
    assert_eq!(again.json["unchanged"], 2);
    let history = server.get(&format!("/api/graph/{id}/labels/{e1}/history")).await;
    assert_eq!(history.json["total"], 1, "the second import wrote no history");
    assert_eq!(
        server.get(&format!("/api/graph/{id}/labels")).await.json,
        listed.json
    );

    let bad_format = server
        .post_bytes(
            "/api/labels/import?format=csv",
            b"x".to_vec(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(bad_format.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_format.json["details"]["field"], "format");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_annotations_body_shows_the_adjudicated_set_else_the_majority() {
    let (server, id, units) = sample_server(with_reviewer_lead()).await;
    let plain = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    let picked = texty_units(&units, 2);
    let (unit, _) = &picked[0];
    let path = format!("/api/graph/{id}/labels/{unit}");
    for (who, ids) in [
        ("ann.a", &["EXEC_COGNITIVE", "EXEC_DIGITAL"][..]),
        ("ann.b", &["EXEC_COGNITIVE"][..]),
        ("ann.c", &["EXEC_COGNITIVE", "EXEC_DIGITAL"][..]),
    ] {
        let written = put(&server, &path, &set(who, "submitted", ids), None).await;
        assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    }
    put(
        &server,
        &path,
        &set("ann.d", "draft", &["TASK_DECOMPOSITION"]),
        None,
    )
    .await;
    let labeled = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    let labels_of = |body: &Value| {
        body["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["event_id"] == unit.as_str())
            .unwrap()["labels"]
            .clone()
    };
    assert_eq!(
        labels_of(&labeled.json),
        json!([{"id": "EXEC_COGNITIVE", "confidence": 1.0}, {"id": "EXEC_DIGITAL", "confidence": 2.0 / 3.0}])
    );
    assert_ne!(labeled.headers["etag"], plain.headers["etag"]);
    assert_eq!(
        strip_labels(&labeled.json),
        strip_labels(&plain.json),
        "labels are the only difference"
    );

    let one = server
        .get(&format!(
            "/api/graph/{id}/annotations?include_sidechains=true&annotator=ann.b"
        ))
        .await;
    assert_eq!(labels_of(&one.json), json!([{"id": "EXEC_COGNITIVE"}]));
    let drafted = server
        .get(&format!(
            "/api/graph/{id}/annotations?include_sidechains=true&annotator=ann.d"
        ))
        .await;
    assert_eq!(labels_of(&drafted.json), json!([]), "a draft is not shown");

    let adjudicated = put(
        &server,
        &path,
        &set("lead", "adjudicated", &["TASK_DECOMPOSITION"]),
        None,
    )
    .await;
    assert_eq!(adjudicated.status, StatusCode::CREATED);
    let after = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    assert_eq!(labels_of(&after.json), json!([{"id": "TASK_DECOMPOSITION"}]));
    assert_ne!(after.headers["etag"], labeled.headers["etag"]);
    let etag = after.headers["etag"].to_str().unwrap().to_owned();
    let cached = server
        .get_if_none_match(
            &format!("/api/graph/{id}/annotations?include_sidechains=true"),
            &etag,
        )
        .await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);
    server.stop().await;
}

/// Regression: the annotations body reads a session's sets from memory on SQLite; every
/// write (a PUT, a DELETE, an import) must show in the next body, after a read that kept
/// the sets as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_annotations_body_shows_every_write_at_once() {
    TestDb::each(every_write_shows).await;
}

async fn every_write_shows(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let (unit, _) = &texty_units(&units, 1)[0];
    let labels_now = || labels_shown(&server, &id, unit);
    assert_eq!(
        labels_now().await,
        json!([]),
        "read twice: the second from memory"
    );

    let path = format!("/api/graph/{id}/labels/{unit}");
    let written = put(
        &server,
        &path,
        &set("ann.a", "submitted", &["EXEC_COGNITIVE"]),
        None,
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    assert_eq!(
        labels_now().await,
        json!([{"id": "EXEC_COGNITIVE", "confidence": 1.0}])
    );

    let deleted = server.delete(&format!("{path}?annotator=ann.a")).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.json);
    assert_eq!(labels_now().await, json!([]));

    let line = json!({"session_id": id, "event_id": unit, "annotator": "ann.b", "status": "submitted",
        "labels": [{"id": "EXEC_DIGITAL"}]});
    let imported = import(&server, &[line], &[]).await;
    assert_eq!(imported.json["written"], 1, "{}", imported.json);
    assert_eq!(
        labels_now().await,
        json!([{"id": "EXEC_DIGITAL", "confidence": 1.0}])
    );
    server.stop().await;
}

/// Regression: writes and reads of one session's sets at once (the reads keep what they
/// read in memory on SQLite): once every write has answered, a read sees all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_written_while_others_read_are_all_seen_once_written() {
    TestDb::each(writes_among_reads).await;
}

async fn writes_among_reads(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let (unit, _) = &texty_units(&units, 1)[0];
    let path = format!("/api/graph/{id}/labels/{unit}");
    let annotators: Vec<String> = (0..8).map(|i| format!("ann.{i}")).collect();
    let bodies: Vec<Value> = annotators
        .iter()
        .map(|who| set(who, "submitted", &["EXEC_COGNITIVE"]))
        .collect();
    let writes = futures_util::future::join_all(bodies.iter().map(|body| put(&server, &path, body, None)));
    let reads = futures_util::future::join_all((0..16).map(|_| labels_shown(&server, &id, unit)));
    let (written, _) = tokio::join!(writes, reads);
    for reply in &written {
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.json);
    }
    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.json["total"], annotators.len(), "{}", listed.json);
    assert_eq!(
        labels_shown(&server, &id, unit).await,
        json!([{"id": "EXEC_COGNITIVE", "confidence": 1.0}])
    );
    server.stop().await;
}

/// The body with every unit's `labels` emptied.
fn strip_labels(body: &Value) -> Value {
    let mut body = body.clone();
    for unit in body["annotations"].as_array_mut().unwrap() {
        unit["labels"] = json!([]);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_never_gives_a_unit_to_more_annotators_than_the_overlap() {
    TestDb::each(queue_under_load).await;
}

async fn queue_under_load(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let server = Arc::new(server);
    let mut tasks = Vec::new();
    for n in 0..32 {
        let server = server.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let me = format!("ann{n:02}");
            let mut taken = Vec::new();
            loop {
                let next = server
                    .post_json(
                        "/api/labels/queue/next",
                        &json!({"annotator": me, "session": id, "overlap": 2}),
                        &[],
                    )
                    .await;
                assert_eq!(next.status, StatusCode::OK, "{}", next.json);
                if next.json["done"] == true {
                    return taken;
                }
                let unit = next.json["reservation"]["event_id"].as_str().unwrap().to_owned();
                let path = format!("/api/graph/{id}/labels/{unit}");
                let written = put(&server, &path, &set(&me, "submitted", &[]), None).await;
                assert!(written.status.is_success(), "{}", written.json);
                taken.push(unit);
            }
        }));
    }
    let mut per_unit: BTreeMap<String, usize> = BTreeMap::new();
    for task in tasks {
        let taken = task.await.unwrap();
        let distinct: HashSet<&String> = taken.iter().collect();
        assert_eq!(
            distinct.len(),
            taken.len(),
            "an annotator never gets a unit twice"
        );
        for unit in taken {
            *per_unit.entry(unit).or_default() += 1;
        }
    }
    assert_eq!(per_unit.len(), units.len(), "every unit was handed out");
    assert!(per_unit.values().all(|&n| n == 2), "{per_unit:?}");
    let server = Arc::try_unwrap(server).ok().unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_comes_back_on_asking_again_and_ends_on_release_or_expiry() {
    let (server, id, _) = sample_server(Options {
        label_policy: LabelPolicy {
            reservation: std::time::Duration::from_secs(1),
            overlap: 1,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let ask = |who: &str| json!({"annotator": who, "session": id, "overlap": 1});
    let a = server.post_json("/api/labels/queue/next", &ask("a"), &[]).await;
    let first = a.json["reservation"]["event_id"].clone();
    let again = server.post_json("/api/labels/queue/next", &ask("a"), &[]).await;
    assert_eq!(
        again.json["reservation"]["event_id"], first,
        "a reload keeps the unit"
    );
    let b = server.post_json("/api/labels/queue/next", &ask("b"), &[]).await;
    assert_ne!(
        b.json["reservation"]["event_id"], first,
        "overlap 1: b gets another unit"
    );
    let release = json!({"annotator": "a", "session_id": id, "event_id": first});
    let released = server.post_json("/api/labels/queue/release", &release, &[]).await;
    assert_eq!(released.status, StatusCode::NO_CONTENT);
    let twice = server.post_json("/api/labels/queue/release", &release, &[]).await;
    assert_eq!(twice.status, StatusCode::NOT_FOUND);
    let c = server.post_json("/api/labels/queue/next", &ask("c"), &[]).await;
    assert_eq!(
        c.json["reservation"]["event_id"], first,
        "a released unit is handed out again"
    );
    // c's reservation expires (one second): d gets the unit.
    tokio::time::sleep(std::time::Duration::from_millis(1_300)).await;
    let d = server.post_json("/api/labels/queue/next", &ask("d"), &[]).await;
    assert_eq!(
        d.json["reservation"]["event_id"], first,
        "an expired reservation returns the unit"
    );
    let bad = server
        .post_json(
            "/api/labels/queue/next",
            &json!({"annotator": "a", "overlap": 0}),
            &[],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json["details"]["field"], "overlap");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_keys_are_annotators_and_blind_mode_hides_others_until_submitted() {
    let (server, id, unit) = team_server().await;
    let path = format!("/api/graph/{id}/labels/{unit}");
    let as_key = |key: &'static str| [("authorization", format!("Bearer {key}"))];
    let put_as = |key: &'static str, body: Value| {
        let request = server
            .client
            .put(format!("{}{path}", server.url))
            .header("authorization", format!("Bearer {key}"))
            .json(&body);
        async move { Reply::read(request.send().await.unwrap()).await }
    };
    let forged = put_as("k-alice", set("bob", "submitted", &["EXEC_COGNITIVE"])).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.json);
    assert_eq!(
        put_as("k-alice", set("alice", "submitted", &["EXEC_COGNITIVE"]))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        put_as("k-bob", set("bob", "draft", &["TASK_DECOMPOSITION"]))
            .await
            .status,
        StatusCode::CREATED
    );
    let listed = |key: &'static str| {
        let headers = as_key(key);
        let server = &server;
        let id = id.clone();
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let r = server
                .get_with(&format!("/api/graph/{id}/labels"), &headers)
                .await;
            r.json["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["annotator"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed("k-bob").await,
        ["bob"],
        "bob has not submitted: he sees only his own"
    );
    assert_eq!(
        listed("k-alice").await,
        ["alice", "bob"],
        "alice submitted: she sees all"
    );
    assert_eq!(listed("k-lead").await, ["alice", "bob"], "reviewers see all");
    // `?annotator=` does not let bob look as alice: the key decides.
    let headers = as_key("k-bob");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let peek = server
        .get_with(&format!("/api/graph/{id}/labels?annotator=alice"), &headers)
        .await;
    assert_eq!(peek.json["total"], 0);
    let body = server
        .get_with(&format!("/api/graph/{id}/annotations?annotator=alice"), &headers)
        .await;
    let shown: Vec<&Value> = body.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["labels"] != json!([]))
        .collect();
    assert!(
        shown.is_empty(),
        "bob sees no labels of others in the annotations body"
    );
    let lead = server
        .client
        .put(format!("{}{path}", server.url))
        .header("authorization", "Bearer k-lead")
        .json(&set("alice", "submitted", &["TASK_DECOMPOSITION"]))
        .send()
        .await
        .unwrap();
    assert_eq!(
        lead.status(),
        StatusCode::OK,
        "a reviewer may correct another's set"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_named_keys_viewer_says_who_asks_in_blind_mode() {
    let (server, id, units) = sample_server(Options {
        label_policy: LabelPolicy {
            reviewers: vec!["lead".into()],
            blind: true,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let (unit, _) = texty_units(&units, 1).remove(0);
    let path = format!("/api/graph/{id}/labels/{unit}");
    put(&server, &path, &set("a", "submitted", &["EXEC_COGNITIVE"]), None).await;
    put(&server, &path, &set("b", "draft", &["EXEC_DIGITAL"]), None).await;
    let count = |query: &'static str| {
        let server = &server;
        let id = id.clone();
        async move { server.get(&format!("/api/graph/{id}/labels{query}")).await.json["total"].clone() }
    };
    assert_eq!(count("?viewer=lead").await, 2, "a reviewer sees every set");
    assert_eq!(
        count("?annotator=lead").await,
        0,
        "annotator= filters to lead's own"
    );
    assert_eq!(count("?viewer=b").await, 1, "b has not submitted: only b's own");
    assert_eq!(
        count("?viewer=a&annotator=b").await,
        1,
        "a submitted: a sees b's set"
    );
    assert_eq!(count("").await, 0, "nobody named: no sets in blind mode");
    server.stop().await;
}

/// What a round trip must keep of an export line: the unit, and each set's annotator,
/// status, labels, note and lead time, and each suggestion.
fn essence(line: &Value, keep_drafts: bool) -> Value {
    let sets: Vec<Value> = line["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| keep_drafts || s["status"] != "draft")
        .map(|s| {
            json!([
                s["annotator"],
                s["status"],
                s["labels"],
                s["note"],
                s["lead_time"]
            ])
        })
        .collect();
    let suggestions: Vec<Value> = line["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| json!([s["model"], s["score"], s["labels"]]))
        .collect();
    json!([
        line["session_id"],
        line["event_id"],
        line["unit"],
        sets,
        suggestions
    ])
}

async fn export_lines(server: &TestServer) -> Vec<Value> {
    let exported = server.get("/api/labels/export?format=jsonl").await;
    assert_eq!(exported.status, StatusCode::OK);
    assert_eq!(exported.headers["content-type"], "application/x-ndjson");
    String::from_utf8(exported.bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_imported_into_a_fresh_store_exports_the_same() {
    for backend in TestDb::backends() {
        let db = TestDb::fresh(backend.clone()).await;
        let fresh = TestDb::fresh(backend).await;
        export_round_trip(&db, &fresh).await;
        db.cleanup().await;
        fresh.cleanup().await;
    }
}

async fn export_round_trip(db: &TestDb, fresh: &TestDb) {
    let policy = LabelPolicy {
        reviewers: vec!["lead".into()],
        ..Default::default()
    };
    let (server, id, units) = sample_server(Options {
        label_policy: policy.clone(),
        ..db.options()
    })
    .await;
    let picked = texty_units(&units, 3);
    for (i, (unit, text)) in picked.iter().enumerate() {
        let path = format!("/api/graph/{id}/labels/{unit}");
        let body = json!({"annotator": "ann.a", "status": "submitted", "note": format!("n{i}"), "lead_time": 12.5,
            "labels": [{"id": "EXEC_COGNITIVE", "confidence": 0.75, "evidence": {"quote": quote_of(text)}}]});
        assert!(put(&server, &path, &body, None).await.status.is_success());
        put(
            &server,
            &path,
            &set(
                "ann.b",
                if i == 2 { "draft" } else { "submitted" },
                &["EXEC_DIGITAL"],
            ),
            None,
        )
        .await;
    }
    let (unit, _) = &picked[0];
    put(
        &server,
        &format!("/api/graph/{id}/labels/{unit}"),
        &set("lead", "adjudicated", &["EXEC_COGNITIVE"]),
        None,
    )
    .await;
    put(
        &server,
        &format!("/api/graph/{id}/labels/{}", picked[1].0),
        &set("ann.c", "discarded", &[]),
        None,
    )
    .await;
    let suggestion = json!({"session_id": id, "event_id": unit, "model": "m1", "score": 0.5, "labels": [{"id": "TASK_DECOMPOSITION"}]});
    assert_eq!(import(&server, &[suggestion], &[]).await.json["written"], 1);

    let lines = export_lines(&server).await;
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["adjudicated"]["annotator"], "lead");
    assert_eq!(lines[0]["unit"]["event_id"], unit.as_str());

    let (copy, copy_id, _) = sample_server(Options {
        label_policy: policy.clone(),
        ..fresh.options()
    })
    .await;
    assert_eq!(copy_id, id);
    let imported = import(&copy, &lines, &[]).await;
    assert_eq!(imported.json["failed"], 0, "{}", imported.json);
    let again = export_lines(&copy).await;
    let essences = |ls: &[Value], drafts| ls.iter().map(|l| essence(l, drafts)).collect::<Vec<_>>();
    assert_eq!(essences(&again, true), essences(&lines, true));

    // Label Studio: tasks out, and the same tasks read back as Label Studio exports them
    // (drafts stay behind: Label Studio keeps none).
    let tasks = server.get("/api/labels/export?format=label-studio").await;
    assert_eq!(tasks.status, StatusCode::OK);
    let config = server.get("/api/labels/export?format=label-studio-config").await;
    assert!(String::from_utf8_lossy(&config.bytes).contains("EXEC_COGNITIVE"));
    copy.stop().await;
    let second = TestDb::fresh(fresh.url.as_ref().map(|_| std::env::var("DATABASE_URL").unwrap())).await;
    let (ls_copy, _, _) = sample_server(Options {
        label_policy: policy,
        ..second.options()
    })
    .await;
    let read_back = ls_copy
        .post_bytes(
            "/api/labels/import?format=label-studio",
            tasks.bytes,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(read_back.json["failed"], 0, "{}", read_back.json);
    let from_ls = export_lines(&ls_copy).await;
    assert_eq!(essences(&from_ls, false), essences(&lines, false));
    ls_copy.stop().await;
    second.cleanup().await;
    server.stop().await;
}

/// The sessions page showed only ids: the progress listing names each session's
/// framework, main log, project (for a session on disk), the time of its log and of the
/// latest label the asker may see, beside the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_lists_each_sessions_file_framework_project_and_times() {
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let on_disk = server.first_session(&[]).await;
    let uploaded = server
        .upload_fixture("autogen", "autogen/agentchat/swarm_task_result.json")
        .await;
    let units = server.get(&format!("/api/graph/{on_disk}/annotations")).await;
    let event = crate::labels::first_coded_unit(&units.json);
    let written = put(
        &server,
        &format!("/api/graph/{on_disk}/labels/{event}"),
        &set("a", "draft", &["EXEC_COGNITIVE"]),
        None,
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);

    let listed = server.get("/api/labels/progress?all=true").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.json);
    let session = |id: &str| {
        listed.json["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["session_id"] == id)
            .unwrap_or_else(|| panic!("{id} listed: {}", listed.json))
            .clone()
    };
    let disk = session(&on_disk);
    assert_eq!(disk["framework"], "claudecode");
    assert_eq!(disk["file_name"], format!("{on_disk}.jsonl"));
    assert_eq!(disk["project"], "", "the sessions directory itself");
    assert_eq!(disk["last_labeled_at"], written.json["updated_at"]);
    let upload = session(&uploaded);
    assert_eq!(upload["framework"], "autogen");
    assert_eq!(upload["file_name"], "swarm_task_result.json");
    assert_eq!(upload["project"], Value::Null);
    assert_eq!(upload["last_labeled_at"], Value::Null);
    assert_eq!(upload["units"]["total"], 27);
    let sessions = server.get("/api/sessions").await;
    for s in sessions.json["sessions"].as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        assert_eq!(session(id)["modified_at"], s["created_at"], "{id}");
        assert!(
            s.get("file_name").is_none(),
            "the CommuGraph listing is unchanged"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_agreement_report_the_submitted_sets() {
    let (server, id, units) = sample_server(with_reviewer_lead()).await;
    let picked = texty_units(&units, 4);
    // a and b agree on three units and disagree on the fourth.
    for (i, (unit, _)) in picked.iter().enumerate() {
        let path = format!("/api/graph/{id}/labels/{unit}");
        let mut a = set("a", "submitted", &["EXEC_COGNITIVE"]);
        a["lead_time"] = json!(10 * (i + 1));
        put(&server, &path, &a, None).await;
        let b = if i == 3 {
            &["TASK_DECOMPOSITION"][..]
        } else {
            &["EXEC_COGNITIVE"][..]
        };
        put(&server, &path, &set("b", "submitted", b), None).await;
    }
    put(
        &server,
        &format!("/api/graph/{id}/labels/{}", picked[3].0),
        &set("lead", "adjudicated", &["TASK_DECOMPOSITION"]),
        None,
    )
    .await;

    let progress = server.get(&format!("/api/labels/progress?session={id}")).await;
    assert_eq!(progress.status, StatusCode::OK, "{}", progress.json);
    let session = &progress.json["sessions"][0];
    assert_eq!(session["units"]["total"], units.len());
    assert_eq!(session["units"]["labeled"], 4);
    assert_eq!(session["adjudicated"], 1);
    let a = &session["annotators"][0];
    assert_eq!(a["annotator"], "a");
    assert_eq!(a["units"]["labeled"], 4);
    assert_eq!(a["median_lead_time"], 25.0);
    assert_eq!(a["agreement_with_adjudicated"], 0.0);
    assert_eq!(session["annotators"][1]["exact_with_adjudicated"], 1.0);

    let agreement = server.get(&format!("/api/labels/agreement?session={id}")).await;
    assert_eq!(agreement.status, StatusCode::OK, "{}", agreement.json);
    assert_eq!(agreement.json["units"], 4);
    assert_eq!(agreement.json["annotators"], json!(["a", "b"]));
    let pair = &agreement.json["pairs"][0];
    assert_eq!(pair["annotators"], json!(["a", "b"]));
    assert_eq!(pair["units"], 4);
    let label = agreement.json["labels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == "EXEC_COGNITIVE")
        .unwrap();
    assert!(label["krippendorff_alpha"].as_f64().unwrap() < 1.0);
    let filtered = server
        .get(&format!("/api/labels/agreement?session={id}&annotators=a"))
        .await;
    assert_eq!(
        filtered.json["units"], 0,
        "one annotator alone agrees with nobody"
    );
    server.stop().await;
}

/// A sessions directory holding one log of two prompts, the log's path and its first line:
/// the log rewritten with that line alone no longer has the second prompt's unit.
fn two_prompt_log() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("proj");
    std::fs::create_dir_all(&session).unwrap();
    let file = session.join("s.jsonl");
    let first = Record::prompt("u1", "Please refactor the parser module")
        .at("2026-01-01T00:00:00Z")
        .line();
    let second = Record::prompt("u2", "And then write the tests for it")
        .parent("u1")
        .at("2026-01-01T00:01:00Z")
        .line();
    std::fs::write(&file, format!("{first}\n{second}\n")).unwrap();
    (dir, file, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_on_a_unit_that_disappears_are_kept_and_reported_orphaned() {
    let (dir, file, first) = two_prompt_log();
    let server = TestServer::start(Options {
        sessions_dirs: vec![dir.path().to_owned()],
        ..Options::default()
    })
    .await;
    let listed = server.get("/api/sessions").await;
    let id = listed.json["sessions"][0]["id"].as_str().unwrap().to_owned();
    let annotations = server.get(&format!("/api/graph/{id}/annotations")).await;
    let last = annotations.json["annotations"][1]["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/graph/{id}/labels/{last}");
    assert_eq!(
        put(
            &server,
            &path,
            &set("a", "submitted", &["TASK_DECOMPOSITION"]),
            None
        )
        .await
        .status,
        StatusCode::CREATED
    );
    // The log is rewritten without its second prompt.
    std::fs::write(&file, format!("{first}\n")).unwrap();
    let labels = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(labels.json["total"], 1, "the set is kept");
    assert_eq!(labels.json["orphaned"], json!([last]));
    let diagnostics = server.get(&format!("/api/graph/{id}/diagnostics")).await;
    assert_eq!(
        diagnostics.json["orphaned_labels"][0]["event_id"],
        last.as_str(),
        "{}",
        diagnostics.json
    );
    let exported = export_lines(&server).await;
    assert_eq!(exported[0]["orphaned"], true);
    server.stop().await;
}

/// A server with named keys for `alice`, `bob` and the reviewer `lead`, a plain key
/// `k-plain`, blind mode, serving the sample: (server, session id, the first unit with
/// text).
async fn team_server() -> (TestServer, String, String) {
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        api_keys: vec![
            "alice:k-alice".into(),
            "bob:k-bob".into(),
            "lead:k-lead".into(),
            "k-plain".into(),
        ],
        label_policy: LabelPolicy {
            reviewers: vec!["lead".into()],
            blind: true,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let key = [("x-api-key", "k-lead")];
    let id = server.first_session(&key).await;
    let body = server
        .get_with(&format!("/api/graph/{id}/annotations"), &key)
        .await;
    let units: Vec<(String, String, bool)> = body.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["unit_type"] != "system_turn")
        .map(|u| {
            let text = u["text_or_artifact_ref"]["text"].as_str().unwrap_or("");
            (u["event_id"].as_str().unwrap().to_owned(), text.to_owned(), false)
        })
        .collect();
    let (unit, _) = texty_units(&units, 1).remove(0);
    (server, id, unit)
}

/// Regression (F4): with named keys, one plain key and `--reviewer lead`, the plain key
/// adjudicated as `lead` and overwrote `bob`'s set. A plain key among named ones may act
/// for no named key's annotator and no reviewer: not by `PUT`, `DELETE`, import, the
/// queue, nor by reading as them in blind mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f4_a_plain_key_among_named_ones_acts_for_no_named_annotator_or_reviewer() {
    use reqwest::Method;
    let (server, id, unit) = team_server().await;
    let path = format!("/api/graph/{id}/labels/{unit}");
    let bob = [("x-api-key", "k-bob")];
    let plain = [("x-api-key", "k-plain")];
    let bobs = set("bob", "submitted", &["EXEC_COGNITIVE"]);
    let written = server.send_json(Method::PUT, &path, Some(&bobs), &bob).await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);

    let adjudicated = set("lead", "adjudicated", &["EXEC_DIGITAL"]);
    for (who, body) in [("lead", &adjudicated), ("bob", &set("bob", "submitted", &[]))] {
        let forged = server.send_json(Method::PUT, &path, Some(body), &plain).await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN, "as {who}: {}", forged.json);
    }
    let removed = server
        .send_json(Method::DELETE, &format!("{path}?annotator=bob"), None, &plain)
        .await;
    assert_eq!(removed.status, StatusCode::FORBIDDEN, "{}", removed.json);
    let mut line = set("lead", "adjudicated", &["EXEC_DIGITAL"]);
    line["session_id"] = json!(id);
    line["event_id"] = json!(unit);
    let imported = import(&server, &[line], &plain).await;
    assert_eq!(imported.json["ok"], 0, "{}", imported.json);
    let queued = server
        .post_json("/api/labels/queue/next", &json!({"annotator": "alice"}), &plain)
        .await;
    assert_eq!(queued.status, StatusCode::FORBIDDEN, "{}", queued.json);
    let peek = server
        .get_with(&format!("/api/graph/{id}/labels?viewer=lead"), &plain)
        .await;
    assert_eq!(peek.json["total"], 0, "not a reviewer's view: {}", peek.json);

    let stored = server
        .get_with(&format!("/api/graph/{id}/labels"), &[("x-api-key", "k-lead")])
        .await;
    assert_eq!(stored.json["total"], 1, "{}", stored.json);
    assert_eq!(stored.json["labels"][0], written.json, "bob's set untouched");
    // Anyone else it may still act for, as before.
    let own = set("importer", "submitted", &["EXEC_COGNITIVE"]);
    let ok = server.send_json(Method::PUT, &path, Some(&own), &plain).await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.json);
    server.stop().await;
}

/// Regression (F5): a reviewer's write to alice's set recorded `actor: alice`. History
/// names who wrote a change (the key's annotator) and whose set it changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f5_history_names_who_wrote_a_change_and_for_whom() {
    use reqwest::Method;
    let (server, id, unit) = team_server().await;
    let path = format!("/api/graph/{id}/labels/{unit}");
    let alices = set("alice", "submitted", &["EXEC_COGNITIVE"]);
    for key in ["k-alice", "k-lead"] {
        let written = server
            .send_json(Method::PUT, &path, Some(&alices), &[("x-api-key", key)])
            .await;
        assert!(written.status.is_success(), "{}", written.json);
    }
    let removed = server
        .send_json(
            Method::DELETE,
            &format!("{path}?annotator=alice"),
            None,
            &[("x-api-key", "k-lead")],
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let history = server
        .get_with(&format!("{path}/history"), &[("x-api-key", "k-lead")])
        .await;
    let who: Vec<(&str, &str, &str)> = history.json["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["action"].as_str().unwrap(),
                h["annotator"].as_str().unwrap(),
                h["actor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        who,
        [
            ("put", "alice", "alice"),
            ("put", "alice", "lead"),
            ("delete", "alice", "lead")
        ]
    );
    server.stop().await;
}

/// F8 (review): an import held SQLite's write lock for the whole request, and label `PUT`s
/// made meanwhile waited out the busy timeout (10 s) to get 500 "database is locked". An
/// import now commits in batches, and a busy store answers 503 with `Retry-After`: every
/// `PUT` made during a long import is stored or told when to retry, and every line of the
/// import is stored (re-sent whole after a 503: what is stored comes back unchanged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f8_puts_during_a_long_import_answer_2xx_or_503_and_every_line_is_stored() {
    TestDb::each(puts_during_an_import).await;
}

async fn puts_during_an_import(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    // On SQLite the import must write for longer than the busy timeout (10 s) for the
    // finding to show; PostgreSQL locks rows, not the database: a shorter one shows enough.
    let wanted: usize = if db.url.is_none() { 15_000 } else { 2_000 };
    let per_unit = wanted.div_ceil(units.len());
    let lines: Vec<Value> = units
        .iter()
        .flat_map(|(event, _, _)| {
            let id = &id;
            (0..per_unit).map(move |i| json!({"session_id": id, "event_id": event, "annotator": format!("imp.{i}"), "labels": []}))
        })
        .collect();
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let importing = std::sync::atomic::AtomicBool::new(true);
    let import = async {
        let reply = import_until_not_busy(&server, &body).await;
        importing.store(false, std::sync::atomic::Ordering::Relaxed);
        reply
    };
    let putters = futures_util::future::join_all((0..4).map(|c| {
        let (server, id, units, importing) = (&server, &id, &units, &importing);
        async move {
            let mut replies = Vec::new();
            while importing.load(std::sync::atomic::Ordering::Relaxed) {
                let (event, _, _) = &units[(replies.len() * 7 + c) % units.len()];
                let labels: &[&str] = if replies.len() % 2 == 0 {
                    &["EXEC_COGNITIVE"]
                } else {
                    &[]
                };
                let body = set(&format!("put.{c}"), "submitted", labels);
                let reply = put(server, &format!("/api/graph/{id}/labels/{event}"), &body, None).await;
                replies.push((
                    reply.status,
                    reply.headers.contains_key("retry-after"),
                    reply.json,
                ));
                // A PUT every 20 ms or so per client: people labeling, not a stream of writes
                // (the import gives way to writes in progress, up to 250 ms a transaction).
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            replies
        }
    }));
    let (imported, putters) = tokio::join!(import, putters);
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.json);
    assert_eq!(imported.json["ok"], lines.len(), "every line is stored");
    let replies: Vec<_> = putters.into_iter().flatten().collect();
    assert!(!replies.is_empty(), "PUTs were made during the import");
    for (status, retry_after, json) in &replies {
        let busy = *status == StatusCode::SERVICE_UNAVAILABLE && *retry_after;
        assert!(
            status.is_success() || busy,
            "a PUT during the import: {status} {json}"
        );
    }
    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    let imported_sets = listed.json["labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["annotator"].as_str().is_some_and(|a| a.starts_with("imp.")))
        .count();
    assert_eq!(imported_sets, lines.len());
    server.stop().await;
}

/// F8: an import the store is too busy to go on with answers 503 with `Retry-After`, the
/// lines answered before it stopped (here a first batch of lines that are not JSON, which
/// need no lock) and the line to resume from; sent again once the store is free, it stores
/// every line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f8_an_import_cut_by_a_busy_store_says_where_it_stopped_and_resumes_when_sent_again() {
    let (server, id, units) = sample_server(Options::default()).await;
    let mut body = "{not json\n".repeat(BATCH_LINES);
    for (event, _, _) in units.iter().take(10) {
        let line = json!({"session_id": id, "event_id": event, "annotator": "ann.a", "labels": []});
        body.push_str(&format!("{line}\n"));
    }
    let lock = hold_write_lock(&server).await;
    let cut = server
        .post_bytes(
            "/api/labels/import",
            body.clone().into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    release_write_lock(lock).await;
    assert_eq!(cut.status, StatusCode::SERVICE_UNAVAILABLE, "{}", cut.json);
    assert!(cut.headers.contains_key("retry-after"));
    let details = &cut.json["details"];
    assert_eq!(details["next_line"], BATCH_LINES + 1, "{}", cut.json);
    assert_eq!(
        (&details["lines"], &details["failed"]),
        (&json!(BATCH_LINES), &json!(BATCH_LINES))
    );
    assert_eq!(details["results"][BATCH_LINES - 1]["field"], "line");
    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.json["total"], 0, "nothing from the cut on was stored");

    let resumed = server
        .post_bytes(
            "/api/labels/import",
            body.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.json);
    assert_eq!(
        (&resumed.json["ok"], &resumed.json["written"]),
        (&json!(10), &json!(10))
    );
    server.stop().await;
}

/// Regression (F17): the queue's overlap was the client's choice: after B held a unit under
/// overlap 1, three others asking with `overlap: 100` got the same unit. The overlap is the
/// server's; a request naming another is refused, and the reservation rule holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f17_a_client_cannot_widen_the_queues_overlap() {
    let (server, id, _) = sample_server(Options {
        label_policy: LabelPolicy {
            overlap: 1,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    const NEXT: &str = "/api/labels/queue/next";
    let held = server
        .post_json(NEXT, &json!({"annotator": "b", "session": id}), &[])
        .await;
    let held = held.json["reservation"]["event_id"].clone();
    let mut given = Vec::new();
    for who in ["c", "d", "e"] {
        let widened = server
            .post_json(
                NEXT,
                &json!({"annotator": who, "session": id, "overlap": 100}),
                &[],
            )
            .await;
        assert_eq!(widened.status, StatusCode::BAD_REQUEST, "{}", widened.json);
        assert_eq!(widened.json["details"]["field"], "overlap");
        let asked = server
            .post_json(NEXT, &json!({"annotator": who, "session": id, "overlap": 1}), &[])
            .await;
        given.push(asked.json["reservation"]["event_id"].clone());
    }
    assert!(
        !given.contains(&held),
        "{held} went to another annotator: {given:?}"
    );
    let distinct: HashSet<String> = given.iter().map(|g| g.to_string()).collect();
    assert_eq!(distinct.len(), 3, "{given:?}");
    let me = server.get("/api/me").await;
    assert_eq!(me.json["queue_overlap"], 1);
    server.stop().await;
}

/// The content type an import to `path` is sent with: JSON for a Label Studio export, JSON
/// lines otherwise.
fn import_type(path: &str) -> &'static str {
    if path.contains("format=label-studio") {
        "application/json"
    } else {
        "application/x-ndjson"
    }
}

/// Imports JSONL `body`, sending it again after each 503 once `Retry-After` has passed.
async fn import_until_not_busy(server: &TestServer, body: &str) -> Reply {
    for _ in 0..20 {
        let reply = server
            .post_bytes(
                "/api/labels/import",
                body.as_bytes().to_vec(),
                &[("content-type", "application/x-ndjson")],
            )
            .await;
        if reply.status != StatusCode::SERVICE_UNAVAILABLE {
            return reply;
        }
        let wait: u64 = reply.headers["retry-after"].to_str().unwrap().parse().unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    }
    panic!("the import was refused as busy 20 times");
}

/// An import of `body` to `path` on a fresh server, with what the server allocated for it.
fn import_measured(path: &str, body: Vec<u8>) -> (Work, Reply) {
    let runtime = CountedRuntime::new();
    runtime.block_on(async {
        let server = TestServer::start(Options::default()).await;
        let measured =
            CountedRuntime::window(server.post_bytes(path, body, &[("content-type", import_type(path))]))
                .await;
        server.stop().await;
        measured
    })
}

/// F9 (review): an import's record limit was checked after every line was parsed: a
/// million JSONL lines (59 MB) peaked at 796 MB. The lines are now counted first and a body
/// over the limit is refused before any is parsed: a few allocations, about the body held.
#[test]
fn f9_an_import_over_the_line_limit_is_refused_before_parsing() {
    let lines = 2 * MAX_IMPORT_LINES;
    let line = r#"{"session_id":"s","event_id":"U:1","annotator":"ann.a","labels":[]}"#;
    let body = format!("{line}\n").repeat(lines).into_bytes();
    let size = body.len() as i64;
    let (work, reply) = import_measured("/api/labels/import", body);
    assert_refused_over_the_limit_unparsed(&work, &reply, lines, size);
}

/// F9 (review): a Label Studio export was read whole as one `Value` before its tasks were
/// counted: an array of 20 million `{}` (60 MB) peaked at 3.15 GB. The array is now read a
/// task at a time, counting, and refused at the first task past the limit.
#[test]
fn f9_a_label_studio_array_over_the_task_limit_is_refused_without_building_it() {
    let tasks = 20 * MAX_IMPORT_LINES;
    let body = format!("[{}{{}}]", "{},".repeat(tasks - 1)).into_bytes();
    let size = body.len() as i64;
    let (work, reply) = import_measured("/api/labels/import?format=label-studio", body);
    assert_refused_over_the_limit_unparsed(&work, &reply, tasks, size);
}

/// An import of `records` records in a body of `size` bytes was refused as over the record
/// limit, with far fewer allocations than records (none was built) and a peak under three
/// times the body.
fn assert_refused_over_the_limit_unparsed(work: &Work, reply: &Reply, records: usize, size: i64) {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.json);
    assert_eq!(reply.json["details"]["field"], "body");
    let message = reply.json["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("more than the {MAX_IMPORT_LINES}")),
        "{message}"
    );
    assert!(
        work.allocations < records as u64 / 10,
        "{} allocations for {records} records: they were built",
        work.allocations
    );
    assert!(
        work.peak < 3 * size,
        "{} bytes at the peak for a body of {size}",
        work.peak
    );
}

/// F9 (review): a body of one line is a whole-body `Value` too: a line of a million empty
/// annotations (3 MB) was built whole, at some 50 times its size, before anything was
/// checked. A line is now refused, as a line, past [`MAX_LINE_VALUES`] JSON values,
/// counted before it is built.
#[test]
fn f9_a_line_of_a_million_values_is_refused_without_building_it() {
    let values = 1_000_000;
    let body = format!(
        r#"{{"session_id":"s","event_id":"U:1","annotations":[{}{{}}]}}"#,
        "{},".repeat(values - 1)
    )
    .into_bytes();
    let size = body.len() as i64;
    let (work, reply) = import_measured("/api/labels/import", body);
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
    assert!(
        work.peak < 3 * size,
        "{} bytes at the peak for a body of {size}",
        work.peak
    );
    assert_eq!(reply.json["failed"], 1);
    assert_eq!(reply.json["results"][0]["field"], "line");
    let error = reply.json["results"][0]["error"].as_str().unwrap();
    assert!(error.contains(&format!("more than {MAX_LINE_VALUES}")), "{error}");
}

/// F9: within the value limit a line could still hold 200,000 records, each built (its
/// set body, its unit's names) before the line was refused for holding more than
/// [`MAX_RECORDS_PER_LINE`]: a line of 199,990 `{}` annotations (0.6 MB) held 158 MiB. The
/// records a line lists are now counted as soon as it is parsed, before any is built.
#[test]
fn f9_a_line_of_too_many_records_is_refused_before_they_are_built() {
    let records = MAX_LINE_VALUES - 10;
    let body = format!(
        r#"{{"session_id":"s","event_id":"U:1","annotations":[{}{{}}]}}"#,
        "{},".repeat(records - 1)
    )
    .into_bytes();
    let (work, reply) = import_measured("/api/labels/import", body);
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
    assert!(work.peak < 48 << 20, "{} bytes at the peak", work.peak);
    let error = reply.json["results"][0]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("more than the {MAX_RECORDS_PER_LINE}")),
        "{error}"
    );
}

/// A blind server with named keys (`alice:k-a`, `bob:k-b`, `lead:k-l`, lead the reviewer)
/// on the CommuGraph sample, and three units labeled:
///
/// - the first: alice, bob and carol submitted, lead adjudicated;
/// - the second: bob and carol submitted (bob with the note `bob-secret`), alice's draft;
/// - the third: carol alone submitted.
///
/// (carol has no key: lead writes her sets.) Returns the server, its data directory, the
/// session and the three units.
async fn blind_team(db: &TestDb) -> (TestServer, tempfile::TempDir, String, Vec<String>) {
    let data = tempfile::tempdir().unwrap();
    let server = TestServer::start(Options {
        data_dir: Some(data.path().to_owned()),
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        api_keys: vec!["alice:k-a".into(), "bob:k-b".into(), "lead:k-l".into()],
        label_policy: LabelPolicy {
            reviewers: vec!["lead".into()],
            blind: true,
            ..Default::default()
        },
        ..db.options()
    })
    .await;
    let lead = [("x-api-key", "k-l")];
    let id = server.get_with("/api/sessions", &lead).await.json["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = server
        .get_with(&format!("/api/graph/{id}/annotations"), &lead)
        .await;
    let units: Vec<(String, String, bool)> = body.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["unit_type"] != "system_turn")
        .map(|u| {
            let text = u["text_or_artifact_ref"]["text"].as_str().unwrap_or("");
            (u["event_id"].as_str().unwrap().to_owned(), text.to_owned(), false)
        })
        .collect();
    let units: Vec<String> = texty_units(&units, 3).into_iter().map(|(e, _)| e).collect();
    let writes = [
        (0, "k-a", set("alice", "submitted", &["EXEC_COGNITIVE"])),
        (0, "k-b", set("bob", "submitted", &["EXEC_COGNITIVE"])),
        (0, "k-l", set("carol", "submitted", &["EXEC_DIGITAL"])),
        (0, "k-l", set("lead", "adjudicated", &["EXEC_COGNITIVE"])),
        (1, "k-a", set("alice", "draft", &["TASK_DECOMPOSITION"])),
        (1, "k-b", {
            let mut bob = set("bob", "submitted", &["EXEC_DIGITAL"]);
            bob["note"] = json!("bob-secret");
            bob
        }),
        (1, "k-l", set("carol", "submitted", &["EXEC_COGNITIVE"])),
        (2, "k-l", set("carol", "submitted", &["EXEC_DIGITAL"])),
    ];
    for (unit, key, body) in writes {
        let written = server
            .client
            .put(format!("{}/api/graph/{id}/labels/{}", server.url, units[unit]))
            .header("x-api-key", key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(written.status().is_success(), "{body}: {}", written.status());
    }
    (server, data, id, units)
}

/// `path` as the holder of `key`.
async fn get_as(server: &TestServer, path: &str, key: &str) -> Reply {
    let reply = server.get_with(path, &[("x-api-key", key)]).await;
    assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.json);
    reply
}

/// Per exported line (JSONL), its unit and the annotators of its sets.
fn exported_sets(reply: &Reply) -> Vec<(String, Vec<String>)> {
    String::from_utf8_lossy(&reply.bytes)
        .lines()
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            let who = line["annotations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["annotator"].as_str().unwrap().to_owned())
                .collect();
            (line["event_id"].as_str().unwrap().to_owned(), who)
        })
        .collect()
}

/// Regression (F2): in blind mode the export listed every annotator's sets and notes to
/// anyone. It now lists, per unit, what `/labels` shows the asker: alice sees everyone on
/// the unit she submitted, only her draft on the one she has not, and nothing of a unit
/// only carol labeled; bob sees the two units he submitted; the reviewer and the
/// operator's command-line export see everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_blind_mode_hides_other_annotators_in_the_export() {
    TestDb::each(blind_export).await;
}

async fn blind_export(db: &TestDb) {
    let (server, data, id, units) = blind_team(db).await;
    let alice = get_as(&server, "/api/labels/export", "k-a").await;
    let sets = |who: &[&str]| who.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        exported_sets(&alice),
        [
            (units[0].clone(), sets(&["alice", "bob", "carol", "lead"])),
            (units[1].clone(), sets(&["alice"])),
        ]
    );
    assert!(!String::from_utf8_lossy(&alice.bytes).contains("bob-secret"));
    let first: Value =
        serde_json::from_str(String::from_utf8_lossy(&alice.bytes).lines().next().unwrap()).unwrap();
    assert_eq!(first["adjudicated"]["annotator"], "lead");
    let second: Value =
        serde_json::from_str(String::from_utf8_lossy(&alice.bytes).lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["adjudicated"], Value::Null);

    let studio = get_as(&server, "/api/labels/export?format=label-studio", "k-a").await;
    assert_eq!(studio.json.as_array().unwrap().len(), 2, "{}", studio.json);
    assert!(!String::from_utf8_lossy(&studio.bytes).contains("bob-secret"));

    let every = get_as(
        &server,
        &format!("/api/labels/export?all_units=true&session={id}"),
        "k-a",
    )
    .await;
    let every = exported_sets(&every);
    let third = every.iter().find(|(unit, _)| *unit == units[2]).unwrap();
    assert!(
        third.1.is_empty(),
        "all_units keeps the unit, without carol's set"
    );

    let bob = exported_sets(&get_as(&server, "/api/labels/export", "k-b").await);
    assert_eq!(
        bob,
        [
            (units[0].clone(), sets(&["alice", "bob", "carol", "lead"])),
            (units[1].clone(), sets(&["alice", "bob", "carol"])),
        ],
        "bob submitted the first two units, not carol's third"
    );
    let lead = exported_sets(&get_as(&server, "/api/labels/export", "k-l").await);
    assert_eq!(lead.len(), 3, "the reviewer sees every unit");
    assert_eq!(lead[2], (units[2].clone(), sets(&["carol"])));
    server.stop().await;

    let mut cli = std::process::Command::new(env!("CARGO_BIN_EXE_sessiongraph"));
    // The operator's export takes no label policy: blind mode is the server's, for its
    // annotators, and `labels export` does not accept it.
    cli.args(["labels", "export", "--data-dir"])
        .arg(data.path())
        .arg("--sessions-dir")
        .arg(crate::helpers::fixture("commugraph-sample"))
        .env_remove("DATABASE_URL")
        .env_remove("SESSIONGRAPH_DATABASE_URL");
    if let Some(url) = &db.url {
        cli.args(["--database-url", url]);
    }
    let out = cli.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let operator = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        operator.lines().count(),
        3,
        "the operator sees every labeled unit"
    );
    assert!(operator.contains("bob-secret"));
}

/// Regression (F2): in blind mode agreement named every annotator and gave every pair's
/// figures to anyone. It is now computed over the sets the asker may see: alice, who
/// submitted only the first unit, gets that unit's codings alone (carol's other units and
/// the bob-carol pair on the second stay hidden); bob gets the two units he submitted, the
/// reviewer everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_blind_mode_hides_other_annotators_in_agreement() {
    TestDb::each(blind_agreement).await;
}

async fn blind_agreement(db: &TestDb) {
    let (server, _data, id, _) = blind_team(db).await;
    let pairs = |report: &Value| -> Vec<(String, u64)> {
        report["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    format!(
                        "{}+{}",
                        p["annotators"][0].as_str().unwrap(),
                        p["annotators"][1].as_str().unwrap()
                    ),
                    p["units"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let alice = get_as(&server, &format!("/api/labels/agreement?session={id}"), "k-a")
        .await
        .json;
    assert_eq!(alice["annotators"], json!(["alice", "bob", "carol"]));
    assert_eq!(
        (alice["units"].clone(), alice["codings"].clone()),
        (json!(1), json!(3))
    );
    assert_eq!(
        pairs(&alice),
        [
            ("alice+bob".into(), 1),
            ("alice+carol".into(), 1),
            ("bob+carol".into(), 1)
        ]
    );
    // bob submitted the first two units (not carol's third); the reviewer sees all three.
    for (key, codings) in [("k-b", 5), ("k-l", 6)] {
        let all = get_as(&server, "/api/labels/agreement", key).await.json;
        assert_eq!(
            (all["units"].clone(), all["codings"].clone()),
            (json!(2), json!(codings)),
            "{key}"
        );
        assert_eq!(
            pairs(&all),
            [
                ("alice+bob".into(), 1),
                ("alice+carol".into(), 1),
                ("bob+carol".into(), 2)
            ]
        );
    }
    server.stop().await;
}

/// Regression (F2): in blind mode progress listed every annotator with their counts to
/// anyone. It is now computed over the sets the asker may see: alice sees the annotators of
/// the unit she submitted, and her own draft, not carol's units she has not submitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_blind_mode_hides_other_annotators_in_progress() {
    TestDb::each(blind_progress).await;
}

async fn blind_progress(db: &TestDb) {
    let (server, _data, id, _) = blind_team(db).await;
    let counts = |progress: &Value| -> Vec<(String, u64, u64)> {
        progress["sessions"][0]["annotators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["annotator"].as_str().unwrap().to_owned(),
                    a["units"]["labeled"].as_u64().unwrap(),
                    a["drafts"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let path = format!("/api/labels/progress?session={id}");
    let alice = get_as(&server, &path, "k-a").await.json;
    assert_eq!(
        counts(&alice),
        [
            ("alice".into(), 1, 1),
            ("bob".into(), 1, 0),
            ("carol".into(), 1, 0)
        ]
    );
    assert_eq!(alice["sessions"][0]["units"]["labeled"], 1);
    // bob submitted the first two units (not carol's third); the reviewer sees all three.
    for (key, carols) in [("k-b", 2), ("k-l", 3)] {
        let all = get_as(&server, &path, key).await.json;
        assert_eq!(
            counts(&all),
            [
                ("alice".into(), 1, 1),
                ("bob".into(), 2, 0),
                ("carol".into(), carols, 0)
            ],
            "{key}"
        );
        assert_eq!(all["sessions"][0]["units"]["labeled"], carols);
        assert_eq!(all["sessions"][0]["adjudicated"], 1);
    }
    server.stop().await;
}

/// Regression (F2): in blind mode `/labels` listed every orphaned unit (labels kept on a
/// unit the session no longer has) and `/diagnostics` who labeled each, to anyone. Both
/// now follow the viewer rule: alice, who never submitted the unit, sees neither; bob, who
/// labeled it, and the reviewer see both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_blind_mode_hides_who_labeled_an_orphaned_unit() {
    TestDb::each(blind_orphans).await;
}

async fn blind_orphans(db: &TestDb) {
    let (dir, file, first) = two_prompt_log();
    let server = TestServer::start(Options {
        sessions_dirs: vec![dir.path().to_owned()],
        api_keys: vec!["alice:k-a".into(), "bob:k-b".into(), "lead:k-l".into()],
        label_policy: LabelPolicy {
            reviewers: vec!["lead".into()],
            blind: true,
            ..Default::default()
        },
        ..db.options()
    })
    .await;
    let id = get_as(&server, "/api/sessions", "k-b").await.json["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let written = server
        .client
        .put(format!("{}/api/graph/{id}/labels/U:u2", server.url))
        .header("x-api-key", "k-b")
        .json(&set("bob", "submitted", &["TASK_DECOMPOSITION"]))
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), StatusCode::CREATED);
    std::fs::write(&file, format!("{first}\n")).unwrap();
    let alice = get_as(&server, &format!("/api/graph/{id}/labels"), "k-a").await;
    assert_eq!(alice.json["orphaned"], json!([]), "{}", alice.json);
    let diagnostics = get_as(&server, &format!("/api/graph/{id}/diagnostics"), "k-a").await;
    assert_eq!(
        diagnostics.json.get("orphaned_labels"),
        None,
        "{}",
        diagnostics.json
    );
    for key in ["k-b", "k-l"] {
        let listed = get_as(&server, &format!("/api/graph/{id}/labels"), key).await;
        assert_eq!(listed.json["orphaned"], json!(["U:u2"]), "{key}");
        let diagnostics = get_as(&server, &format!("/api/graph/{id}/diagnostics"), key).await;
        assert_eq!(
            diagnostics.json["orphaned_labels"],
            json!([{"event_id": "U:u2", "annotators": ["bob"]}]),
            "{key}"
        );
    }
    server.stop().await;
}

/// Regression (F6): agreement listed every pair of annotators, sharing units or not, in
/// one body (3,000 annotators on one unit: a 1.2 GB body). Pairs that share no unit are
/// no longer listed, and the others come a page at a time (`pairs_limit`, default 1,000;
/// `pairs_after` the previous page's `pairs_next`), the figures unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f6_agreement_lists_a_page_of_the_pairs_that_share_units() {
    TestDb::each(agreement_pages).await;
}

async fn agreement_pages(db: &TestDb) {
    let (server, id, units) = sample_server(db.options()).await;
    let picked = texty_units(&units, 4);
    // 50 annotators on the first unit (1,225 pairs); three more alone on other units.
    let mut writes: Vec<(String, Value)> = (0..50)
        .map(|a| {
            (
                picked[0].0.clone(),
                set(&format!("a-{a:02}"), "submitted", &["EXEC_COGNITIVE"]),
            )
        })
        .collect();
    writes.extend((1..4).map(|i| (picked[i].0.clone(), set(&format!("solo-{i}"), "submitted", &[]))));
    let writes: Vec<(String, Value)> = writes
        .into_iter()
        .map(|(unit, body)| (format!("/api/graph/{id}/labels/{unit}"), body))
        .collect();
    for chunk in writes.chunks(10) {
        let written =
            futures_util::future::join_all(chunk.iter().map(|(path, body)| put(&server, path, body, None)))
                .await;
        assert!(written.iter().all(|w| w.status == StatusCode::CREATED));
    }
    let agreement = |query: String| {
        let server = &server;
        async move { server.get(&format!("/api/labels/agreement{query}")).await }
    };
    let first = agreement(String::new()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.json);
    assert_eq!(first.json["pairs"].as_array().unwrap().len(), 1_000);
    assert_eq!(first.json["pairs_next"], "a-28,a-34", "the last pair listed");
    assert_eq!(first.json["annotators"].as_array().unwrap().len(), 53);
    assert_eq!(
        (first.json["units"].clone(), first.json["codings"].clone()),
        (json!(1), json!(53))
    );
    let next = agreement("?pairs_after=a-28,a-34&pairs_limit=500".to_owned()).await;
    let rest = next.json["pairs"].as_array().unwrap();
    assert_eq!(rest.len(), 225);
    assert_eq!(rest[0]["annotators"], json!(["a-28", "a-35"]));
    assert_eq!(next.json["pairs_next"], Value::Null, "the last page");
    assert_eq!(
        next.json["overall"], first.json["overall"],
        "every page has the figures"
    );
    let every: Vec<&Value> = first.json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest)
        .collect();
    assert!(
        every.iter().all(|p| p["units"] == 1),
        "only pairs that share a unit"
    );
    assert!(every
        .iter()
        .all(|p| !p["annotators"][1].as_str().unwrap().starts_with("solo")));
    let pairs: HashSet<String> = every.iter().map(|p| p["annotators"].to_string()).collect();
    assert_eq!(pairs.len(), 50 * 49 / 2, "each pair once");

    for (query, field) in [
        ("?pairs_limit=0", "pairs_limit"),
        ("?pairs_limit=10001", "pairs_limit"),
        ("?pairs_limit=ten", "pairs_limit"),
        ("?pairs_after=a-01", "pairs_after"),
    ] {
        let refused = agreement(query.to_owned()).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(refused.json["details"]["field"], field, "{query}");
    }
    server.stop().await;
}

/// A named key is its annotator on every route: a `PUT` naming no annotator writes the
/// key's set (it answered 400 "annotator: is required", where the queue took the key's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_keys_put_without_an_annotator_writes_the_keys_set() {
    let (server, id, unit) = team_server().await;
    let path = format!("/api/graph/{id}/labels/{unit}");
    let body = json!({ "status": "draft", "labels": [] });
    let written = server
        .send_json(
            reqwest::Method::PUT,
            &path,
            Some(&body),
            &[("x-api-key", "k-bob")],
        )
        .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    assert_eq!(written.json["annotator"], "bob");
    let plain = server
        .send_json(
            reqwest::Method::PUT,
            &path,
            Some(&body),
            &[("x-api-key", "k-plain")],
        )
        .await;
    assert_eq!(plain.status, StatusCode::BAD_REQUEST, "a plain key names nobody");
    assert_eq!(plain.json["details"]["field"], "annotator");
}

/// Regression: `If-Match: labels-1` (the ETag without its quotes) answered 412 "the set is
/// at \"labels-1\"", which reads like a match. A tag that is not an entity tag is a 400
/// saying so; quoted tags, weak ones and `*` are read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unquoted_if_match_is_refused_as_malformed_not_as_a_conflict() {
    let (server, id, unit) = team_server().await;
    let path = format!("/api/graph/{id}/labels/{unit}");
    let body = json!({ "annotator": "alice", "status": "draft", "labels": [] });
    let alice = ("x-api-key", "k-alice");
    let created = server
        .send_json(reqwest::Method::PUT, &path, Some(&body), &[alice])
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    for tag in ["labels-1", "\"labels-1\", labels-1", "W/labels-1"] {
        let refused = server
            .send_json(
                reqwest::Method::PUT,
                &path,
                Some(&body),
                &[alice, ("if-match", tag)],
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{tag}: {}", refused.json);
        assert_eq!(refused.json["details"]["field"], "If-Match", "{tag}");
        assert!(refused.json["message"]
            .as_str()
            .unwrap()
            .contains("quotes included"));
    }
    let matched = server
        .send_json(
            reqwest::Method::PUT,
            &path,
            Some(&body),
            &[alice, ("if-match", "\"labels-1\"")],
        )
        .await;
    assert_eq!(matched.status, StatusCode::OK, "{}", matched.json);
    let stale = server
        .send_json(
            reqwest::Method::PUT,
            &path,
            Some(&body),
            &[alice, ("if-match", "\"labels-1\"")],
        )
        .await;
    assert_eq!(
        stale.status,
        StatusCode::PRECONDITION_FAILED,
        "a quoted stale tag is still a 412"
    );
    let delete = format!("{path}?annotator=alice");
    let refused = server
        .send_json(
            reqwest::Method::DELETE,
            &delete,
            None,
            &[alice, ("if-match", "labels-2")],
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "a delete reads If-Match alike"
    );
    assert_eq!(refused.json["details"]["field"], "If-Match");
}
