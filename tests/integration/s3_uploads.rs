//! Replicas keeping uploads in an S3-compatible bucket (`--upload-store s3`), their records
//! in one PostgreSQL database, each replica with its own empty data directory: an upload
//! through one is served byte for byte through another from the bucket's objects; a
//! deletion through one is a 404 on the others and removes its objects; the same content
//! uploaded through several at once is stored once, in one generation; the bucket going
//! down is a 503 with `Retry-After`, and everything is served again once it is back; a
//! restart of every replica with fresh data directories loses nothing; uploads stored in
//! PostgreSQL before stay served; objects no record names are swept.
//!
//! The bucket is a real S3 server, `s3s-fs` (`cargo install s3s-fs --features binary`), run
//! on 127.0.0.1 with a temporary root: found as `SESSIONGRAPH_S3S_FS`, else `s3s-fs` on the
//! `PATH`. Without it, or without `DATABASE_URL`, the tests say they skip (with `CI=true`
//! they fail); the start errors that need neither always run.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use sessiongraph::store::s3_bucket::{new_generation, S3Bucket, S3Credentials};
use sessiongraph::store::{S3Settings, UploadStoreKind};
use sqlx::{Connection, Executor, PgConnection};

use crate::cluster::{
    assert_cli_exports_as_served, assert_served_alike, assert_unavailable, assert_view_bodies, connect,
    database_contents, delete_upload, eventually, info, label_exports, listed, serve_fails, shared_database,
    stop_all, the_same_content_at_once, upload_prompt, view_bodies,
};
use crate::helpers::records::Record;
use crate::labels::{Relay, TestDb};
use crate::server::{fixture_files, graph_id, Options, TestServer};

/// The bucket the tests keep uploads in.
const BUCKET: &str = "sessions";

/// The prefix of the keys (a team's part of a shared bucket).
const PREFIX: &str = "team-a/sg";

/// The keys s3s-fs is started with.
const ACCESS_KEY: &str = "sg-test-access";
const SECRET_KEY: &str = "sg-test-secret-key-0123456789";

/// The s3s-fs binary: `SESSIONGRAPH_S3S_FS`, else `s3s-fs` on the `PATH`; `None` after a
/// note on standard error when there is none (outside CI: with `CI=true` the test fails).
fn s3s_fs(test: &str) -> Option<PathBuf> {
    let found = match std::env::var_os("SESSIONGRAPH_S3S_FS").filter(|p| !p.is_empty()) {
        Some(given) => {
            let given = PathBuf::from(given);
            assert!(
                given.is_file(),
                "SESSIONGRAPH_S3S_FS={} is not a file",
                given.display()
            );
            Some(given)
        }
        None => std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("s3s-fs"))
                .find(|candidate| candidate.is_file())
        }),
    };
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "s3s-fs is not installed: CI must run the S3 upload tests (.ci/run installs it)"
        );
        // Written to the process's stderr: the harness shows captured output only for
        // failures, and a skip must be seen.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: s3s-fs is not installed (cargo install s3s-fs --features binary, \
             or SESSIONGRAPH_S3S_FS=/path/to/s3s-fs); this test fails when CI=true"
        );
    }
    found
}

/// An s3s-fs server on a free port of 127.0.0.1, its data in a temporary root holding the
/// bucket (a directory, to s3s-fs). Killed when dropped.
struct S3Server {
    binary: PathBuf,
    root: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl S3Server {
    /// Starts one with an empty bucket.
    async fn start(binary: PathBuf) -> S3Server {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = S3Server {
            binary,
            root,
            port,
            child: None,
        };
        server.run().await;
        server
    }

    /// Runs the server (again, on the same port and root), once it accepts connections.
    async fn run(&mut self) {
        let child = Command::new(&self.binary)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(self.root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not run: {e}", self.binary.display()));
        self.child = Some(child);
        for _ in 0..1000 {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("s3s-fs exited at start: {status}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("s3s-fs did not listen on port {} within 10 s", self.port);
    }

    /// The server goes down: killed, its port refusing connections.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The settings of a replica keeping uploads in the bucket under [`PREFIX`].
    fn settings(&self) -> S3Settings {
        S3Settings {
            bucket: Some(BUCKET.into()),
            prefix: PREFIX.into(),
            endpoint: Some(self.endpoint()),
            credentials: Some(S3Credentials {
                access_key_id: ACCESS_KEY.into(),
                secret_access_key: SECRET_KEY.into(),
            }),
        }
    }

    /// `http://127.0.0.1:<port>`.
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every object under `<PREFIX>/uploads/<id>/` by its key, with its bytes.
    fn objects_of(&self, id: &str) -> BTreeMap<String, Vec<u8>> {
        self.objects_under(&format!("{PREFIX}/uploads/{id}"))
    }

    /// Every object of the bucket whose key starts with `prefix/` (every one for an empty
    /// `prefix`) by its key, with its bytes, as s3s-fs keeps them on disk (an object is a
    /// file of the bucket's directory).
    fn objects_under(&self, prefix: &str) -> BTreeMap<String, Vec<u8>> {
        let bucket = self.root.path().join(BUCKET);
        let mut objects = BTreeMap::new();
        let mut dirs = vec![bucket.join(prefix)];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let key = path.strip_prefix(&bucket).unwrap().to_string_lossy().into_owned();
                    objects.insert(key, std::fs::read(&path).unwrap());
                }
            }
        }
        objects
    }

    /// The generations upload `id` has objects of.
    fn generations_of(&self, id: &str) -> Vec<String> {
        let mut generations: Vec<String> = self
            .objects_of(id)
            .keys()
            .filter_map(|key| key.split('/').rev().nth(1).map(str::to_owned))
            .collect();
        generations.dedup();
        generations
    }

    /// The file of object `key` in s3s-fs's root.
    fn object_file(&self, key: &str) -> PathBuf {
        self.root.path().join(BUCKET).join(key)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The bucket and a fresh database, or `None` after a note when either is missing.
async fn bucket_and_database(test: &str) -> Option<(S3Server, TestDb)> {
    let binary = s3s_fs(test)?;
    let db = shared_database(test).await?;
    Some((S3Server::start(binary).await, db))
}

/// `N` replicas on a fresh database keeping uploads in a fresh bucket (see [`replica`]),
/// started one after the other, with the bucket and the database; `None` after a note when
/// s3s-fs or the database is missing.
async fn replicas<const N: usize>(test: &str) -> Option<(S3Server, TestDb, [TestServer; N])> {
    let (s3, db) = bucket_and_database(test).await?;
    let url = db.url.clone().unwrap();
    let mut started = Vec::with_capacity(N);
    for _ in 0..N {
        started.push(replica(&url, &s3).await);
    }
    let started = started
        .try_into()
        .unwrap_or_else(|_| unreachable!("{N} replicas started"));
    Some((s3, db, started))
}

/// A replica on `database_url` keeping uploads in `s3`'s bucket, with a fresh data
/// directory.
async fn replica(database_url: &str, s3: &S3Server) -> TestServer {
    TestServer::start(Options {
        database_url: Some(database_url.to_owned()),
        upload_store: UploadStoreKind::S3,
        s3: s3.settings(),
        request_timeout: Duration::from_secs(60),
        ..Options::default()
    })
    .await
}

/// What upload `id`'s row says: the generation of its objects (`None`: chunks), its file
/// names, and how many chunks it has; `None` when it is not stored.
async fn row(conn: &mut PgConnection, id: &str) -> Option<(Option<String>, Vec<String>, i64)> {
    sqlx::query_as(
        "SELECT object_generation, names, \
         (SELECT count(*) FROM upload_chunks WHERE upload_id = $1) FROM uploads WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(conn)
    .await
    .unwrap()
}

/// A Claude Code session of about `bytes` bytes: prompts of 400 KiB, each following the
/// last.
fn large_session(bytes: usize) -> Vec<u8> {
    let text = "quokka ".repeat(400 << 10 >> 3);
    let mut log = Vec::with_capacity(bytes + (1 << 20));
    let mut n = 0;
    while log.len() < bytes {
        let mut record = Record::prompt(&format!("u{n}"), &format!("{n} {text}"));
        if n > 0 {
            record = record.parent(&format!("u{}", n - 1));
        }
        log.extend_from_slice(record.line().as_bytes());
        log.push(b'\n');
        n += 1;
    }
    log
}

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Two hours in milliseconds: past the age at which a sweep removes objects.
const TWO_HOURS_MS: i64 = 2 * 60 * 60 * 1000;

/// What a sweep of `server`'s bucket as if it were `now_ms` removed: (generations,
/// objects); `None` when its uploads are not kept in a bucket.
async fn sweep(server: &TestServer, now_ms: i64) -> Option<(usize, usize)> {
    let swept = server.state.store.sweep_objects_at(now_ms).await.unwrap();
    swept.map(|s| (s.generations, s.objects))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_through_one_replica_is_served_byte_for_byte_through_another_from_the_bucket() {
    let Some((s3, db, [a, b])) = replicas("an_upload_through_one_replica_is_served_from_the_bucket").await
    else {
        return;
    };

    let id = a.upload_fixture("claudecode", "commugraph-sample").await;
    assert!(listed(&b).await.contains(&id), "B lists what A acknowledged");
    assert_served_alike(&a, &b, &id).await;

    // Each file is one object of the generation the row names, byte for byte; the
    // database holds none of their bytes.
    let mut conn = connect(&db).await;
    let (generation, names, chunks) = row(&mut conn, &id).await.expect("a row");
    let generation = generation.expect("the row names its objects' generation");
    assert_eq!(chunks, 0);
    let uploaded: BTreeMap<String, Vec<u8>> = fixture_files(&crate::helpers::fixture("commugraph-sample"))
        .into_iter()
        .collect();
    let objects = s3.objects_of(&id);
    assert_eq!(objects.len(), names.len(), "{:?}", objects.keys());
    for (file_no, name) in names.iter().enumerate() {
        let key = format!("{PREFIX}/uploads/{id}/{generation}/{file_no}");
        assert!(objects.get(&key) == uploaded.get(name), "{key} is not {name}");
    }

    // A file larger than one request carries: written in parts, read back in ranges.
    let large = large_session(17 << 20);
    let large_id = graph_id(
        &a.upload_raw(
            "framework=claudecode&filename=11111111-2222-4333-8444-555555555555.jsonl",
            large.clone(),
        )
        .await,
    );
    let exported = b.get(&format!("/api/graph/{large_id}/export")).await;
    assert_eq!(exported.status, StatusCode::OK);
    assert!(
        exported.bytes == large,
        "the export spooled from the bucket differs"
    );
    let path = format!("/api/graph/{large_id}/annotations");
    let (from_a, from_b) = (a.get(&path).await, b.get(&path).await);
    assert_eq!(from_b.status, StatusCode::OK, "{}", from_b.json);
    assert!(from_a.bytes == from_b.bytes);
    assert_eq!(s3.objects_of(&large_id).values().next(), Some(&large));

    conn.close().await.ok();
    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_through_one_replica_is_a_404_on_the_other_and_removes_the_objects() {
    let Some((s3, db, [a, b])) = replicas("a_deletion_through_one_replica_removes_the_objects").await else {
        return;
    };
    let id = a.upload_fixture("claudecode", "commugraph-sample").await;
    let annotations = format!("/api/graph/{id}/annotations");
    // Cached on both.
    assert_eq!(a.get(&annotations).await.status, StatusCode::OK);
    assert_eq!(b.get(&annotations).await.status, StatusCode::OK);
    assert_eq!(s3.objects_of(&id).len(), 5);

    delete_upload(&b, &id).await;
    for path in [
        annotations.clone(),
        format!("/api/graph/{id}/workflow"),
        format!("/api/graph/{id}/export"),
    ] {
        assert_eq!(a.get(&path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    assert!(!listed(&a).await.contains(&id));
    assert_eq!(
        a.delete(&format!("/api/session/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(s3.objects_of(&id).is_empty(), "{:?}", s3.objects_of(&id).keys());
    let mut conn = connect(&db).await;
    assert_eq!(row(&mut conn, &id).await, None);

    // Uploaded again after the deletion: stored anew, in a generation of its own.
    let again = a.upload_fixture("claudecode", "commugraph-sample").await;
    assert_eq!(again, id);
    assert_eq!(b.get(&annotations).await.status, StatusCode::OK);
    let (generation, ..) = row(&mut conn, &id).await.expect("stored again");
    assert_eq!(s3.generations_of(&id), [generation.unwrap()]);

    conn.close().await.ok();
    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_content_through_two_replicas_four_times_at_once_is_stored_once_in_one_generation() {
    let Some((s3, db, [a, b])) = replicas("the_same_content_four_times_at_once_is_stored_once").await else {
        return;
    };
    the_same_content_at_once(&db, &a, &b, async |conn, round, id| {
        let (generation, names, chunks) = row(conn, id).await.expect("a row");
        assert_eq!((names.len(), chunks), (1, 0), "round {round}");
        assert_eq!(
            s3.generations_of(id),
            [generation.expect("objects")],
            "round {round}: one generation left, the row's"
        );
        assert_eq!(s3.objects_of(id).len(), 1, "round {round}");
    })
    .await;
    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_bucket_down_uploads_and_first_loads_answer_503_and_all_is_served_once_it_is_back() {
    let Some((mut s3, db, [a, b])) = replicas("with_the_bucket_down_uploads_answer_503").await else {
        return;
    };
    let id = graph_id(&upload_prompt(&a, "stored before the outage").await);
    let gone = graph_id(&upload_prompt(&a, "deleted during the outage").await);
    let workflow = format!("/api/graph/{id}/workflow");
    // Parsed on A when it was uploaded; B has never read it.
    assert_eq!(a.get(&workflow).await.status, StatusCode::OK);

    s3.kill();
    assert_unavailable("an upload", &upload_prompt(&a, "sent during the outage").await);
    assert_unavailable("the first view of an upload here", &b.get(&workflow).await);
    assert_unavailable(
        "an export, spooled from the bucket",
        &b.get(&format!("/api/graph/{id}/export")).await,
    );
    // What needs only the database, or only memory, is served.
    assert_eq!(a.get(&workflow).await.status, StatusCode::OK, "cached on A");
    assert!(listed(&b).await.contains(&id));
    // A deletion stands: its record goes, its objects stay until a sweep.
    delete_upload(&b, &gone).await;
    assert_eq!(
        a.get(&format!("/api/graph/{gone}/workflow")).await.status,
        StatusCode::NOT_FOUND
    );
    let mut conn = connect(&db).await;
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM uploads")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(total, 1, "nothing of the refused upload is stored");

    s3.run().await;
    assert_eq!(b.get(&workflow).await.status, StatusCode::OK, "no restart needed");
    let during = graph_id(&upload_prompt(&a, "sent during the outage").await);
    assert_eq!(
        b.get(&format!("/api/graph/{during}/annotations")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        s3.objects_of(&gone).len(),
        1,
        "left by the deletion during the outage"
    );
    assert_eq!(sweep(&a, now_ms() + TWO_HOURS_MS).await, Some((1, 1)));
    assert!(s3.objects_of(&gone).is_empty());
    assert_eq!(s3.objects_of(&id).len(), 1, "a stored upload's objects stay");
    conn.close().await.ok();
    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_survive_a_restart_of_both_replicas_with_fresh_data_directories() {
    let Some((s3, db, [a, b])) = replicas("uploads_in_a_bucket_survive_a_restart").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let id = a.upload_fixture("claudecode", "commugraph-sample").await;
    let other = graph_id(&upload_prompt(&b, "uploaded through B").await);
    let before = view_bodies(&a, &id).await;
    let before_info = info(&b, &id).await;
    a.stop().await;
    b.stop().await;

    let (c, d) = (replica(&url, &s3).await, replica(&url, &s3).await);
    let both = listed(&d).await;
    assert!(both.contains(&id) && both.contains(&other), "{both:?}");
    assert_view_bodies(&c, &id, before, "the body changed across the restart").await;
    assert_eq!(info(&d, &id).await, before_info);
    assert_eq!(
        d.get(&format!("/api/graph/{other}/chatlog")).await.status,
        StatusCode::OK
    );
    stop_all(db, [c, d]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_stored_in_postgresql_by_an_older_version_stay_served_and_deletable_with_s3() {
    let Some((s3, db)) = bucket_and_database("uploads_stored_in_postgresql_stay_served_with_s3").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    // Stored in chunks by --upload-store postgres, on a database of the version before
    // object storage.
    let before = TestServer::start(Options {
        database_url: Some(url.clone()),
        upload_store: UploadStoreKind::Postgres,
        ..Options::default()
    })
    .await;
    let id = before.upload_fixture("claudecode", "commugraph-sample").await;
    let old = graph_id(&upload_prompt(&before, "stored in chunks, deleted with s3").await);
    let bodies = view_bodies(&before, &id).await;
    before.stop().await;
    let mut conn = connect(&db).await;
    for statement in [
        "ALTER TABLE uploads DROP COLUMN object_generation",
        "DELETE FROM _sqlx_migrations WHERE version = 6",
    ] {
        conn.execute(statement).await.unwrap();
    }

    let (a, b) = (replica(&url, &s3).await, replica(&url, &s3).await);
    assert_view_bodies(&a, &id, bodies, "served differently from its chunks").await;
    delete_upload(&b, &old).await;
    assert_eq!(
        a.get(&format!("/api/graph/{old}/workflow")).await.status,
        StatusCode::NOT_FOUND
    );
    let chunks: i64 = sqlx::query_scalar("SELECT count(*) FROM upload_chunks WHERE upload_id = $1")
        .bind(&old)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(chunks, 0, "its chunks went with its row");
    // New uploads go to the bucket.
    let new = graph_id(&upload_prompt(&a, "stored in the bucket").await);
    let (generation, _, chunks) = row(&mut conn, &new).await.unwrap();
    assert!(generation.is_some() && chunks == 0);
    a.stop().await;
    b.stop().await;

    // A replica still on --upload-store postgres cannot read the bucket: a 500 whose
    // body says nothing of it (the log says which store to run).
    let postgres = TestServer::start(Options {
        database_url: Some(url.clone()),
        upload_store: UploadStoreKind::Postgres,
        ..Options::default()
    })
    .await;
    let refused = postgres.get(&format!("/api/graph/{new}/workflow")).await;
    assert_eq!(
        refused.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        refused.json
    );
    assert!(
        !String::from_utf8_lossy(&refused.bytes).contains("s3"),
        "{}",
        refused.json
    );
    assert_eq!(
        postgres.get(&format!("/api/graph/{id}/workflow")).await.status,
        StatusCode::OK,
        "its chunked uploads are still its own"
    );
    conn.close().await.ok();
    stop_all(db, [postgres]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_object_of_a_stored_upload_is_a_500_that_names_nothing_of_the_bucket() {
    let Some((s3, db, [a, b])) = replicas("a_missing_object_of_a_stored_upload_is_a_500").await else {
        return;
    };
    let id = graph_id(&upload_prompt(&a, "its object goes missing").await);
    let (key, _) = s3.objects_of(&id).into_iter().next().expect("one object");
    std::fs::remove_file(s3.object_file(&key)).unwrap();

    for path in [
        format!("/api/graph/{id}/workflow"),
        format!("/api/graph/{id}/export"),
    ] {
        let reply = b.get(&path).await;
        assert_eq!(
            reply.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{path}: {}",
            reply.json
        );
        let body = String::from_utf8_lossy(&reply.bytes);
        assert!(!body.contains(&key) && !body.contains(BUCKET), "{path}: {body}");
    }
    // Its record is still there: the listing shows it, a deletion removes it.
    assert!(listed(&b).await.contains(&id));
    delete_upload(&b, &id).await;
    stop_all(db, [a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_removes_only_old_generations_no_record_names() {
    let Some((s3, db, [a])) = replicas("a_sweep_removes_only_old_generations_no_record_names").await else {
        return;
    };
    let kept = graph_id(&upload_prompt(&a, "stored, and kept by every sweep").await);
    let old = now_ms() - TWO_HOURS_MS;
    // Left by a save that crashed before its row (an upload never stored), by a second
    // save of a stored upload, and by a save in progress; and an object of another program.
    let bucket = S3Bucket::open(&s3.settings()).unwrap();
    let crashed = ("00000000000000aa", new_generation(old));
    let second = (kept.clone(), new_generation(old));
    let in_progress = ("00000000000000bb", new_generation(now_ms()));
    for (id, generation) in [
        (crashed.0, &crashed.1),
        (kept.as_str(), &second.1),
        (in_progress.0, &in_progress.1),
    ] {
        for file_no in 0..2 {
            bucket
                .put(&bucket.key(id, generation, file_no), "left over".into())
                .await
                .unwrap();
        }
    }
    let foreign = s3.object_file(&format!("{PREFIX}/uploads/README"));
    std::fs::write(&foreign, "not an upload").unwrap();

    assert_eq!(sweep(&a, now_ms()).await, Some((2, 4)));
    assert!(s3.objects_of(crashed.0).is_empty());
    assert_eq!(
        s3.generations_of(in_progress.0),
        std::slice::from_ref(&in_progress.1),
        "too young"
    );
    let mut conn = connect(&db).await;
    let (generation, ..) = row(&mut conn, &kept).await.unwrap();
    assert_eq!(s3.generations_of(&kept), [generation.unwrap()]);

    // Later, the save in progress is old enough to be no save's.
    assert_eq!(sweep(&a, now_ms() + TWO_HOURS_MS).await, Some((1, 2)));
    assert!(s3.objects_of(in_progress.0).is_empty());
    assert_eq!(s3.objects_of(&kept).len(), 1);
    assert!(foreign.is_file(), "keys of another layout are never removed");
    assert_eq!(
        a.get(&format!("/api/graph/{kept}/annotations")).await.status,
        StatusCode::OK
    );
    conn.close().await.ok();
    stop_all(db, [a]).await;
}

/// `labels export` on a server keeping uploads in the bucket (`--upload-store s3` and the
/// bucket's settings, given as flags or in the environment as the server takes them)
/// reads them from there and prints what the route serves; it changes nothing in the
/// bucket or the database. A bucket that does not exist is an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_export_reads_uploads_from_the_bucket_as_the_route_does_and_changes_nothing() {
    let Some((s3, db, [a])) = replicas("labels_export_reads_uploads_from_the_bucket").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    let exports = label_exports(&a).await;
    a.stop().await;
    let before = (database_contents(&db).await, s3.objects_under(""));
    let endpoint = s3.endpoint();
    let keys = [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
    ];

    let flags = [
        "--upload-store",
        "s3",
        "--s3-bucket",
        BUCKET,
        "--s3-prefix",
        PREFIX,
        "--s3-endpoint",
        &endpoint,
        "--database-url",
        &url,
    ];
    assert_cli_exports_as_served(&exports, &flags, &keys);
    let env = [
        ("SESSIONGRAPH_UPLOAD_STORE", "s3"),
        ("SESSIONGRAPH_S3_BUCKET", BUCKET),
        ("SESSIONGRAPH_S3_PREFIX", PREFIX),
        ("SESSIONGRAPH_S3_ENDPOINT", &endpoint),
        ("SESSIONGRAPH_DATABASE_URL", &url),
    ];
    assert_cli_exports_as_served(&exports, &[], &[&env[..], &keys].concat());
    assert_eq!(
        (database_contents(&db).await, s3.objects_under("")),
        before,
        "the export changed the database or the bucket"
    );

    let elsewhere = tempfile::tempdir().unwrap();
    let args: Vec<&std::ffi::OsStr> = flags
        .map(|flag| if flag == BUCKET { "no-such-bucket" } else { flag })
        .into_iter()
        .map(std::ffi::OsStr::new)
        .collect();
    let out = crate::cli::labels_export_in(elsewhere.path(), &args, &keys);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot open the S3 bucket no-such-bucket"),
        "{err}"
    );
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_that_does_not_exist_stops_the_server_at_start() {
    let Some((s3, db)) = bucket_and_database("a_bucket_that_does_not_exist_stops_the_server").await else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .args([
            "--upload-store",
            "s3",
            "--s3-bucket",
            "no-such-bucket",
            "--s3-endpoint",
        ])
        .arg(s3.endpoint())
        .env("SESSIONGRAPH_DATABASE_URL", db.url.as_deref().unwrap())
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env_remove("SESSIONGRAPH_UPLOAD_STORE")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success(), "started on a bucket that does not exist");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open the S3 bucket no-such-bucket"), "{err}");
    db.cleanup().await;
}

#[test]
fn s3_uploads_without_a_bucket_or_a_postgres_database_stop_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |extra: &[&str], env: &[(&str, &str)]| serve_fails(dir.path(), extra, env);
    // Nothing listens there: the settings are refused before anything is opened.
    let postgres = "postgres://sg:secret@127.0.0.1:9/sg";
    for err in [
        serve(&["--upload-store", "s3", "--database-url", postgres], &[]),
        serve(
            &[],
            &[
                ("SESSIONGRAPH_UPLOAD_STORE", "s3"),
                ("SESSIONGRAPH_DATABASE_URL", postgres),
            ],
        ),
    ] {
        assert!(err.contains("--s3-bucket NAME"), "{err}");
        assert!(err.contains("SESSIONGRAPH_S3_BUCKET"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
    for err in [
        serve(&["--upload-store", "s3", "--s3-bucket", "sessions"], &[]),
        serve(
            &[],
            &[
                ("SESSIONGRAPH_UPLOAD_STORE", "s3"),
                ("SESSIONGRAPH_S3_BUCKET", "sessions"),
                ("SESSIONGRAPH_DATABASE_URL", "sqlite://x.sqlite3?mode=rwc"),
            ],
        ),
    ] {
        assert!(err.contains("--upload-store s3"), "{err}");
        assert!(err.contains("--database-url postgres://"), "{err}");
        assert!(err.contains("SQLite"), "{err}");
    }
    let err = serve(
        &[
            "--upload-store",
            "s3",
            "--s3-bucket",
            "sessions",
            "--s3-prefix",
            "team//a",
            "--database-url",
            postgres,
        ],
        &[],
    );
    assert!(err.contains("--s3-prefix \"team//a\""), "{err}");
    assert!(
        !dir.path().join("labels.sqlite3").exists(),
        "refused before anything was opened"
    );
}

/// Regression: a replica that could not read an upload when its search index was told of
/// it (the bucket unreachable from it, or the database down) marked it indexed, without
/// units: it was never searchable there, the bucket back or not, until the index was
/// rebuilt. A session that cannot be read for a passing reason is left unmarked, and the
/// next check indexes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_an_upload_unreadable_when_indexed_was_marked_indexed_and_never_searchable() {
    let Some((s3, db, [a])) = replicas("bug_an_upload_unreadable_when_indexed").await else {
        return;
    };
    let url = db.url.clone().unwrap();
    // B reaches the bucket through a relay that can be cut, and checks its index often.
    let relay = Relay::to(([127, 0, 0, 1], s3.port).into()).await;
    let b = TestServer::start(Options {
        database_url: Some(url.clone()),
        upload_store: UploadStoreKind::S3,
        s3: S3Settings {
            endpoint: Some(format!("http://127.0.0.1:{}", relay.port)),
            ..s3.settings()
        },
        search: sessiongraph::search::SearchConfig {
            recheck: Some(Duration::from_millis(200)),
            ..Default::default()
        },
        ..Options::default()
    })
    .await;

    relay.cut();
    let id = graph_id(&upload_prompt(&a, "the wombatquest of the unreachable bucket").await);
    eventually("B hearing of the upload", || b.state.store.slot(&id).is_ok()).await;
    let during = crate::search::search_indexed(&b, "q=wombatquest").await;
    assert_eq!(during.json["total"], 0, "B cannot read it yet: {}", during.json);

    relay.restore().await;
    let mut found = serde_json::Value::Null;
    for _ in 0..2000 {
        found = crate::search::search_indexed(&b, "q=wombatquest").await.json;
        if found["total"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(found["results"][0]["session_id"], id.as_str(), "{found}");
    stop_all(db, [a, b]).await;
}
