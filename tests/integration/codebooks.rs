//! Several codebooks on one server: labels kept per codebook, each set recording the
//! codebook version it was written under, unit types honoured by writes, the queue and
//! progress, and labels written before codebooks had ids adopted by the default one. On
//! SQLite and, with `DATABASE_URL`, PostgreSQL.

use reqwest::StatusCode;
use serde_json::json;
use sqlx::{Connection, Executor};

use crate::labels::{put, quote_of, TestDb};
use crate::server::{Options, TestServer};

const TEAM: &str = "id: team\nschema_name: team\nannotation_unit:\n  unit_types: [user_turn, assistant_turn]\nlabels:\n  - id: PLAN\n    family: planning\n  - id: ACT\n    family: acting\n";

/// (event_id, unit_type, text) of every unit of session `id`, sub-agents included.
async fn typed_units(server: &TestServer, id: &str) -> Vec<(String, String, String)> {
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    body.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            let text = u["text_or_artifact_ref"]["text"].as_str().unwrap_or("");
            (
                u["event_id"].as_str().unwrap().to_owned(),
                u["unit_type"].as_str().unwrap().to_owned(),
                text.to_owned(),
            )
        })
        .collect()
}

async fn team_server(db: &TestDb) -> (TestServer, String) {
    let team = sessiongraph::labels::Codebook::parse("team.yaml", TEAM).unwrap();
    let server = TestServer::start(Options {
        codebook: Some(team),
        ..db.options()
    })
    .await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    (server, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_codebooks_keep_their_labels_apart() {
    TestDb::each(labels_apart).await;
}

async fn labels_apart(db: &TestDb) {
    let (server, id) = team_server(db).await;
    let listed = server.get("/api/codebooks").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.json["default"], "team");
    let ids: Vec<&str> = listed.json["codebooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"delegation"),
        "the built-in codebook stays: {ids:?}"
    );
    let team_version = listed.json["codebooks"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(team_version.starts_with("sha256:"), "{team_version}");
    let delegation = server.get("/api/codebook?codebook=delegation").await;
    assert_eq!(delegation.json["id"], "delegation");
    assert_eq!(
        delegation.json["unit_types"],
        json!(["assistant_turn", "user_turn"])
    );

    let units = typed_units(&server, &id).await;
    let (event, _, text) = units
        .iter()
        .find(|(_, t, x)| t == "user_turn" && x.chars().count() >= 20)
        .unwrap();
    let path = format!("/api/graph/{id}/labels/{event}");
    let team_set = json!({ "annotator": "alice", "status": "submitted", "labels": [{ "id": "PLAN" }] });
    let written = put(&server, &path, &team_set, None).await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.json);
    assert_eq!(written.json["codebook_version"], team_version.as_str());
    let refused = put(&server, &format!("{path}?codebook=delegation"), &team_set, None).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "PLAN is not a delegation label"
    );
    let delegation_set = json!({
        "annotator": "alice",
        "status": "submitted",
        "labels": [{ "id": "EXEC_COGNITIVE", "evidence": { "quote": quote_of(text) } }],
    });
    let written = put(
        &server,
        &format!("{path}?codebook=delegation"),
        &delegation_set,
        None,
    )
    .await;
    assert_eq!(
        written.status,
        StatusCode::CREATED,
        "a set of its own under the other codebook"
    );

    let team_list = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(team_list.json["codebook"]["id"], "team");
    assert_eq!(team_list.json["total"], 1);
    assert_eq!(team_list.json["labels"][0]["labels"][0]["id"], "PLAN");
    let other = server
        .get(&format!("/api/graph/{id}/labels?codebook=delegation"))
        .await;
    assert_eq!(other.json["total"], 1);
    assert_eq!(other.json["labels"][0]["labels"][0]["id"], "EXEC_COGNITIVE");
    let history = server
        .get(&format!(
            "/api/graph/{id}/labels/{event}/history?codebook=delegation"
        ))
        .await;
    assert_eq!(history.json["total"], 1);

    let unknown = server.get(&format!("/api/graph/{id}/labels?codebook=nope")).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.json["details"]["field"], "codebook");
    assert!(
        unknown.json["message"].as_str().unwrap().contains("team"),
        "it lists the known ones"
    );

    let removed = server
        .delete(&format!("{path}?annotator=alice&codebook=delegation"))
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let kept = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(kept.json["total"], 1, "the team set is untouched");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_a_codebook_does_not_code_are_not_written_handed_out_or_counted() {
    TestDb::each(coded_units_only).await;
}

async fn coded_units_only(db: &TestDb) {
    let (server, id) = team_server(db).await;
    let units = typed_units(&server, &id).await;
    let system: Vec<&str> = units
        .iter()
        .filter(|(_, t, _)| t == "system_turn")
        .map(|(e, _, _)| e.as_str())
        .collect();
    assert!(!system.is_empty(), "the sample has a system turn");
    let coded = units.len() - system.len();

    let on_system = json!({ "annotator": "alice", "status": "discarded", "labels": [] });
    let refused = put(
        &server,
        &format!("/api/graph/{id}/labels/{}", system[0]),
        &on_system,
        None,
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.json["details"]["field"], "event_id");
    assert!(
        refused.json["message"].as_str().unwrap().contains("system_turn"),
        "{}",
        refused.json
    );

    let mut handed = Vec::new();
    loop {
        let next = server
            .post_json(
                "/api/labels/queue/next",
                &json!({ "annotator": "alice", "session": id }),
                &[],
            )
            .await;
        assert_eq!(next.status, StatusCode::OK, "{}", next.json);
        if next.json["done"] == true {
            break;
        }
        let event = next.json["reservation"]["event_id"].as_str().unwrap().to_owned();
        let skip = json!({ "annotator": "alice", "status": "discarded", "labels": [] });
        let written = put(&server, &format!("/api/graph/{id}/labels/{event}"), &skip, None).await;
        assert!(written.status.is_success(), "{}", written.json);
        handed.push(event);
        assert!(handed.len() <= units.len(), "the queue keeps handing out units");
    }
    assert_eq!(handed.len(), coded, "every coded unit, once");
    assert!(
        handed.iter().all(|e| !system.contains(&e.as_str())),
        "no system turn"
    );

    let progress = server.get(&format!("/api/labels/progress?session={id}")).await;
    let session = &progress.json["sessions"][0];
    assert_eq!(session["units"]["total"], coded, "{session}");
    assert!(session["by_unit_type"].get("system_turn").is_none(), "{session}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_written_before_codebooks_had_ids_belong_to_the_default_codebook() {
    TestDb::each(adopted).await;
}

/// The label database as the release before several codebooks left it: the first two
/// migrations, a set, its history and a suggestion.
async fn old_database(url: &str) {
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    use std::borrow::Cow;
    let sqlite = url.starts_with("sqlite:");
    let first = if sqlite {
        include_str!("../../migrations/sqlite/0001_labels.sql")
    } else {
        include_str!("../../migrations/postgres/0001_labels.sql")
    };
    let second = include_str!("../../migrations/common/0002_suggestions_queue.sql");
    let migrations = [("labels", first), ("suggestions queue", second)]
        .into_iter()
        .zip(1..)
        .map(|((name, sql), version)| {
            Migration::new(
                version,
                Cow::Borrowed(name),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    let migrator = Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    };
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(url).await.unwrap();
    migrator.run(&mut conn).await.unwrap();
    let set = r#"[{"id":"EXEC_COGNITIVE"}]"#;
    conn.execute(
        format!(
            "INSERT INTO label_sets (session_id, event_id, annotator, status, labels, version, updated_at) \
             VALUES ('s', 'U:1', 'alice', 'submitted', '{set}', 1, '2026-01-01T00:00:00.000Z')"
        )
        .as_str(),
    )
    .await
    .unwrap();
    conn.execute(
        "INSERT INTO label_history (session_id, event_id, annotator, version, action, actor, at) \
         VALUES ('s', 'U:1', 'alice', 1, 'put', 'alice', '2026-01-01T00:00:00.000Z')",
    )
    .await
    .unwrap();
    conn.execute(
        format!(
            "INSERT INTO label_suggestions (session_id, event_id, model, labels, updated_at) \
             VALUES ('s', 'U:1', 'm', '{set}', '2026-01-01T00:00:00.000Z')"
        )
        .as_str(),
    )
    .await
    .unwrap();
    conn.close().await.unwrap();
}

async fn adopted(db: &TestDb) {
    let data = tempfile::tempdir().unwrap();
    let url = db
        .url
        .clone()
        .unwrap_or_else(|| sessiongraph::labels::store::default_url(data.path()).unwrap());
    old_database(&url).await;
    let (_, store) = db.open_store(data.path()).await;
    let sets = store.list("delegation", "s").await.unwrap();
    assert_eq!(sets.len(), 1, "the set is the default codebook's");
    assert_eq!(sets[0].codebook_version, None, "written under an unknown version");
    let history = store.history("delegation", "s", "U:1", None).await.unwrap();
    assert_eq!(history.len(), 1);
    let suggestions = store.suggestions("delegation", "s", None).await.unwrap();
    assert_eq!(suggestions.len(), 1);
    assert!(
        store.list("", "s").await.unwrap().is_empty(),
        "nothing is left unassigned"
    );
    store.close().await;
    let (_, again) = db.open_store(data.path()).await;
    assert_eq!(
        again.list("delegation", "s").await.unwrap().len(),
        1,
        "opening twice changes nothing"
    );
    again.close().await;
}

/// A set whose labels the codebook no longer has is listed apart, never dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_naming_labels_a_changed_codebook_lacks_are_reported() {
    let db = TestDb::fresh(None).await;
    let data = tempfile::tempdir().unwrap();
    let first = sessiongraph::labels::Codebook::parse("team.yaml", TEAM).unwrap();
    let server = TestServer::start(Options {
        codebook: Some(first),
        data_dir: Some(data.path().to_owned()),
        ..db.options()
    })
    .await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let units = typed_units(&server, &id).await;
    let (event, _, _) = units.iter().find(|(_, t, _)| t == "assistant_turn").unwrap();
    let set = json!({ "annotator": "alice", "status": "submitted", "labels": [{ "id": "ACT" }] });
    let written = put(&server, &format!("/api/graph/{id}/labels/{event}"), &set, None).await;
    assert_eq!(written.status, StatusCode::CREATED);
    let old_version = written.json["codebook_version"].clone();
    server.stop().await;

    let changed = TEAM.replace(
        "  - id: ACT\n    family: acting\n",
        "  - id: DO\n    family: acting\n",
    );
    let second = sessiongraph::labels::Codebook::parse("team.yaml", &changed).unwrap();
    let server = TestServer::start(Options {
        codebook: Some(second),
        data_dir: Some(data.path().to_owned()),
        ..db.options()
    })
    .await;
    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.json["total"], 1, "the set is kept");
    assert_ne!(listed.json["codebook"]["version"], old_version);
    assert_eq!(
        listed.json["unknown_labels"],
        json!([{ "event_id": event, "annotator": "alice", "codebook_version": old_version, "labels": ["ACT"] }])
    );
    server.stop().await;
    db.cleanup().await;
}
