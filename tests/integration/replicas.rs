//! Replicas sharing one PostgreSQL database with `--upload-store postgres`, each with its
//! own empty data directory, as behind a load balancer: an upload through one is served,
//! listed, exported and searched through another; a deletion through one is a 404 on the
//! others at once, notified or not; uploads survive a restart of every replica; the same
//! upload through two replicas at once is stored once; an older database is migrated; the
//! database going down is a 503 with `Retry-After`, and the replicas catch up once it is
//! back. PostgreSQL only (`DATABASE_URL`; skipped, loudly, without it, and failing with
//! `CI=true`), but for the start error without a PostgreSQL URL.

use std::time::Duration;

use reqwest::StatusCode;
use sessiongraph::store::UploadStoreKind;
use sqlx::{Connection, Executor, Row};

use crate::cluster::{
    assert_served_alike, assert_unavailable, assert_view_bodies, connect, delete_upload, eventually, info,
    listed, serve_fails, shared_database, stop_all, the_same_content_at_once, upload_prompt, view_bodies,
};
use crate::labels::Relay;
use crate::server::{graph_id, Options, TestServer};

/// A replica on `database_url` keeping uploads there, with a fresh data directory.
async fn replica(database_url: &str) -> TestServer {
    TestServer::start(Options {
        database_url: Some(database_url.to_owned()),
        upload_store: UploadStoreKind::Postgres,
        ..Options::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_through_one_replica_is_served_listed_and_searched_through_another() {
    let Some(db) = shared_database("an_upload_through_one_replica_is_served").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let (a, b) = (replica(&url).await, replica(&url).await);

    let id = a.upload_fixture("claudecode", "commugraph-sample").await;
    assert!(
        listed(&b).await.contains(&id),
        "B lists an upload A has acknowledged"
    );
    assert_served_alike(&a, &b, &id).await;

    // An upload B has not been asked about: its search index hears of it (notified).
    let text = "the quokkaventure plan for the shared store";
    let other = graph_id(&upload_prompt(&a, text).await);
    eventually("B registering the upload it was notified of", || {
        b.state.store.slot(&other).is_ok()
    })
    .await;
    let found = crate::search::search_indexed(&b, "q=quokkaventure").await;
    assert_eq!(
        crate::search::keys(&found).first().map(|(s, _)| s.clone()),
        Some(other),
        "{}",
        found.json
    );

    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_through_one_replica_is_a_404_on_the_others_at_once() {
    let Some(db) = shared_database("a_deletion_through_one_replica_is_a_404").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let (a, b) = (replica(&url).await, replica(&url).await);
    let id = a.upload_fixture("claudecode", "commugraph-sample").await;
    let annotations = format!("/api/graph/{id}/annotations");
    // Cached on both.
    assert_eq!(a.get(&annotations).await.status, StatusCode::OK);
    assert_eq!(b.get(&annotations).await.status, StatusCode::OK);

    delete_upload(&b, &id).await;
    // At once, not once A has been notified.
    for path in [
        annotations.clone(),
        format!("/api/graph/{id}/workflow"),
        format!("/api/graph/{id}/export"),
        format!("/api/graph/{id}/info"),
        format!("/api/graph/{id}/labels"),
    ] {
        let status = a.get(&path).await.status;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{path}: a stale answer after the deletion"
        );
    }
    assert!(!listed(&a).await.contains(&id));
    let again = a.delete(&format!("/api/session/{id}")).await;
    assert_eq!(
        again.status,
        StatusCode::NOT_FOUND,
        "deleted through B first: {}",
        again.json
    );

    // A deletion whose notification never comes (the row removed by hand): the check
    // before serving still answers 404.
    let other = graph_id(&upload_prompt(&a, "another session").await);
    let path = format!("/api/graph/{other}/annotations");
    assert_eq!(a.get(&path).await.status, StatusCode::OK);
    assert_eq!(b.get(&path).await.status, StatusCode::OK);
    let mut conn = connect(&db).await;
    conn.execute(format!("DELETE FROM uploads WHERE id = '{other}'").as_str())
        .await
        .unwrap();
    for server in [&a, &b] {
        assert_eq!(server.get(&path).await.status, StatusCode::NOT_FOUND);
        assert!(!listed(server).await.contains(&other));
    }
    conn.close().await.ok();

    // Notified: a replica asked nothing lets go of a deleted upload.
    let third = graph_id(&upload_prompt(&a, "a third session").await);
    eventually("B registering the third upload", || {
        b.state.store.slot(&third).is_ok()
    })
    .await;
    delete_upload(&a, &third).await;
    eventually("B forgetting the upload deleted through A", || {
        b.state.store.slot(&third).is_err()
    })
    .await;

    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_survive_a_restart_of_every_replica_with_fresh_data_directories() {
    let Some(db) = shared_database("uploads_survive_a_restart_of_every_replica").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let (a, b) = (replica(&url).await, replica(&url).await);
    let id = a.upload_fixture("claudecode", "commugraph-sample").await;
    let before = view_bodies(&a, &id).await;
    let before_info = info(&b, &id).await;
    a.stop().await;
    b.stop().await;

    let (c, d) = (replica(&url).await, replica(&url).await);
    assert!(listed(&d).await.contains(&id));
    assert!(
        c.state.store.slot(&id).is_ok(),
        "restored at start, before any request"
    );
    assert_view_bodies(&c, &id, before, "the body changed across the restart").await;
    assert_eq!(info(&d, &id).await, before_info);
    stop_all(db, [c, d]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_upload_through_two_replicas_at_once_is_stored_once() {
    let Some(db) = shared_database("the_same_upload_through_two_replicas_at_once").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let (a, b) = (replica(&url).await, replica(&url).await);
    the_same_content_at_once(&db, &a, &b, async |conn, round, id| {
        let row = sqlx::query(
            "SELECT (SELECT count(*) FROM uploads WHERE id = $1), \
             (SELECT count(*) FROM upload_chunks WHERE upload_id = $1)",
        )
        .bind(id)
        .fetch_one(conn)
        .await
        .unwrap();
        assert_eq!(
            (row.get::<i64, _>(0), row.get::<i64, _>(1)),
            (1, 1),
            "round {round}: one row, one chunk"
        );
    })
    .await;
    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_an_older_version_is_migrated_and_keeps_uploads() {
    let Some(db) = shared_database("a_database_of_an_older_version_is_migrated").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    // Labels only, as the version before upload storage left the database.
    let labels = TestServer::start(Options {
        database_url: Some(url.clone()),
        ..Options::default()
    })
    .await;
    labels.stop().await;
    let mut conn = connect(&db).await;
    for statement in [
        "DROP TABLE upload_chunks",
        "DROP TABLE uploads",
        "DELETE FROM _sqlx_migrations WHERE version >= 5",
    ] {
        conn.execute(statement).await.unwrap();
    }

    let a = replica(&url).await;
    let id = graph_id(&upload_prompt(&a, "stored after the migration").await);
    assert_eq!(
        a.get(&format!("/api/graph/{id}/annotations")).await.status,
        StatusCode::OK
    );
    let latest: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(latest, 6);
    conn.close().await.ok();
    stop_all(db, [a]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_postgresql_down_uploads_answer_503_and_replicas_catch_up_once_it_is_back() {
    let Some(db) = shared_database("with_postgresql_down_uploads_answer_503").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let (relay, relayed) = Relay::of_url(&url).await;
    let a = TestServer::start(Options {
        database_url: Some(relayed),
        upload_store: UploadStoreKind::Postgres,
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        request_timeout: Duration::from_secs(20),
        ..Options::default()
    })
    .await;
    let b = replica(&url).await;
    let id = graph_id(&upload_prompt(&a, "stored before the outage").await);
    let on_disk = "ab51623b-c26d-45f5-b98e-f9d0cfa17018";

    relay.cut();
    let path = format!("/api/graph/{id}/workflow");
    assert_unavailable("a view of an upload", &a.get(&path).await);
    assert_unavailable("the session list", &a.get("/api/sessions").await);
    assert_unavailable("an upload", &upload_prompt(&a, "sent during the outage").await);
    assert_unavailable("a deletion", &a.delete(&format!("/api/session/{id}")).await);
    assert_unavailable("an export", &a.get(&format!("/api/graph/{id}/export")).await);
    assert_unavailable(
        "an upload id unknown here",
        &a.get("/api/graph/0123456789abcdef/workflow").await,
    );
    let disk = a.get(&format!("/api/graph/{on_disk}/workflow")).await;
    assert_eq!(
        disk.status,
        StatusCode::OK,
        "a session on disk needs no database: {}",
        disk.json
    );
    // Meanwhile, through a replica that reaches the database.
    let during = graph_id(&upload_prompt(&b, "stored through B during the outage").await);

    relay.restore().await;
    // The follower listens again and catches up, without a request.
    eventually("A catching up with B's upload once the database is back", || {
        a.state.store.slot(&during).is_ok()
    })
    .await;
    assert_eq!(a.get(&path).await.status, StatusCode::OK);
    let both = listed(&a).await;
    assert!(both.contains(&id) && both.contains(&during), "{both:?}");
    stop_all(db, [a, b]).await;
}

#[test]
fn postgres_uploads_without_a_postgres_database_stop_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |extra: &[&str], env: &[(&str, &str)]| serve_fails(dir.path(), extra, env);
    for err in [
        serve(&["--upload-store", "postgres"], &[]),
        serve(&[], &[("SESSIONGRAPH_UPLOAD_STORE", "postgres")]),
        serve(
            &[
                "--upload-store",
                "postgres",
                "--database-url",
                "sqlite://x.sqlite3?mode=rwc",
            ],
            &[],
        ),
    ] {
        assert!(err.contains("--upload-store postgres"), "{err}");
        assert!(err.contains("--database-url postgres://"), "{err}");
        assert!(err.contains("SQLite"), "{err}");
    }
    assert!(
        !dir.path().join("labels.sqlite3").exists(),
        "refused before anything was opened"
    );
}
