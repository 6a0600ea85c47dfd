//! Benchmark of the label store (not a test): seeds a large store and measures, on one
//! backend per run, the phases asked for (`--phases`, in order):
//!
//! - seeding (always): `POST /api/labels/import` of every unit's sets (JSONL, `--batch`
//!   lines per request), time and rows/s; or, with `--seed direct`, the same sets written
//!   straight into the database with sqlx (no history rows: for read benchmarks of stores
//!   an import would take long to build, and independent of how import works);
//! - `put`: `PUT /api/graph/{id}/labels/{event_id}` latency (p50, p99, max) and throughput
//!   with `--writers` concurrent annotators, each writing `--puts` submitted sets on
//!   distinct units;
//! - `agreement`: `GET /api/labels/agreement`: time, body size, peak RSS (the body is
//!   counted as it streams in, not kept);
//! - `progress`: `GET /api/labels/progress` of the first session;
//! - `export`: `GET /api/labels/export?format=jsonl` streamed into a byte counter: time,
//!   bytes, lines, peak RSS;
//! - `annotations`: `GET /api/graph/{id}/annotations` of the first session twice (the
//!   first read fills the SQLite store's cache of sets, the second is served from it); the
//!   session itself is loaded before the store is seeded.
//!
//! Every unit is labeled by `--coders` annotators (default: all `--annotators`), picked
//! pseudo-randomly among them per unit, so pairs of annotators share units at random.
//! `--one-session` asks agreement and the export for the first session only (`?session=`).
//!
//! The sessions are synthetic Claude Code logs written into a temporary sessions directory
//! (each `--units` user prompts chained by `parentUuid`, one `user_turn` unit each); the
//! server runs in this process on 127.0.0.1. The label database is SQLite in a temporary
//! data directory, or, when `DATABASE_URL` is set, a fresh PostgreSQL database
//! `sg_bench_<random>` created through that URL and dropped after. Memory is this process's
//! (server and client): the resident set before each phase and its peak during it (the peak
//! is reset through `/proc/self/clear_refs` before each phase); CPU time is the process's
//! (user and system) during the phase. Prints a markdown table and one JSON line.
//! `--keep` leaves the generated sessions and SQLite database behind, to serve them with
//! the release binary and measure it alone (`/usr/bin/time -v`).
//!
//! ```sh
//! cargo run --release --example labels_bench
//! DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres \
//!     cargo run --release --example labels_bench
//! cargo run --release --example labels_bench -- --sessions 200   # 10x smaller
//! # 1,000 annotators on one unit: agreement
//! cargo run --release --example labels_bench -- --seed direct --sessions 1 --units 1 \
//!     --annotators 1000 --phases agreement
//! # 20,000 annotators, 1,000,000 sets, two per unit
//! cargo run --release --example labels_bench -- --seed direct --sessions 200 --units 2500 \
//!     --annotators 20000 --coders 2 --phases agreement
//! # progress of one session of 40,000 units labeled by 20,000 annotators
//! cargo run --release --example labels_bench -- --seed direct --sessions 1 --units 40000 \
//!     --annotators 20000 --coders 1 --phases progress
//! # 2,600,000 sets in one session: export and annotations
//! cargo run --release --example labels_bench -- --seed direct --sessions 1 --units 2600 \
//!     --annotators 1000 --phases export,annotations
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use futures_util::StreamExt;
use serde_json::{json, Value};
use sessiongraph::labels::{Codebook, Codebooks, LabelPolicy};
use sessiongraph::store::StoreConfig;
use sessiongraph::{ApiConfig, AppSettings, AppState};
use sqlx::{Connection, Executor};
use tokio::sync::oneshot;

/// mimalloc, as in the server binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How the store is seeded.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Seeding {
    /// `POST /api/labels/import`, `--batch` lines per request.
    Import,
    /// Rows written straight into `label_sets` with sqlx (no history rows).
    Direct,
}

/// A phase measured after seeding.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PhaseName {
    /// Concurrent `PUT`s.
    Put,
    /// `GET /api/labels/agreement`.
    Agreement,
    /// `GET /api/labels/progress?session=` of the first session.
    Progress,
    /// `GET /api/labels/export?format=jsonl`.
    Export,
    /// `GET /api/graph/{id}/annotations` of the first session, twice.
    Annotations,
}

#[derive(Parser)]
struct Args {
    /// Sessions to generate.
    #[arg(long, default_value_t = 2_000)]
    sessions: usize,
    /// User prompts (units) per session.
    #[arg(long, default_value_t = 250)]
    units: usize,
    /// Annotators the store's sets are spread over.
    #[arg(long, default_value_t = 2)]
    annotators: usize,
    /// Annotators labeling each unit, picked among `--annotators` (default: all of them).
    #[arg(long)]
    coders: Option<usize>,
    /// How the store is seeded.
    #[arg(long, value_enum, default_value_t = Seeding::Import)]
    seed: Seeding,
    /// JSONL lines per import request.
    #[arg(long, default_value_t = 10_000)]
    batch: usize,
    /// Concurrent annotators writing with `PUT`.
    #[arg(long, default_value_t = 32)]
    writers: usize,
    /// `PUT`s per concurrent annotator.
    #[arg(long, default_value_t = 200)]
    puts: usize,
    /// The phases to measure after seeding, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "put,agreement,export"
    )]
    phases: Vec<PhaseName>,
    /// Agreement and the export of the first session only (`?session=`).
    #[arg(long)]
    one_session: bool,
    /// Keep the sessions and data directory (SQLite) after the run, and print where they
    /// are: to serve them with `sessiongraph serve` and measure it alone.
    #[arg(long)]
    keep: bool,
}

impl Args {
    /// Annotators per unit.
    fn coders(&self) -> usize {
        self.coders.unwrap_or(self.annotators).min(self.annotators)
    }
}

/// A unit of the generated store.
struct Unit {
    session_id: String,
    event_id: String,
}

/// Resident memory of this process, in MiB: `VmRSS` (now) or `VmHWM` (peak).
fn memory_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU time this process has used (user and system), in seconds: `/proc/self/stat`
/// fields 14 and 15, in Linux's fixed 100 ticks per second.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces), from field 3 on.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|t| t.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// The resident set now, after resetting the peak to it.
fn reset_peak() -> f64 {
    // Writing 5 resets VmHWM to the current resident set (Linux 4.0 and later).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    memory_mib("VmRSS:")
}

/// The id of generated session `s`.
fn session_id(s: usize) -> String {
    format!("{s:08x}-0000-4000-8000-000000000000")
}

/// The uuid of prompt `i` of generated session `s`.
fn prompt_uuid(s: usize, i: usize) -> String {
    format!("{s:08x}-0000-4000-8000-{:012x}", i + 1)
}

/// Writes `sessions` Claude Code logs of `units` chained user prompts into `dir/bench/`.
fn write_sessions(dir: &Path, sessions: usize, units: usize) -> anyhow::Result<u64> {
    let project = dir.join("bench");
    std::fs::create_dir_all(&project)?;
    let mut total = 0;
    for s in 0..sessions {
        let session_id = session_id(s);
        let mut text = String::with_capacity(units * 400);
        let mut parent = Value::Null;
        for i in 0..units {
            let uuid = prompt_uuid(s, i);
            let record = json!({
                "parentUuid": parent, "isSidechain": false, "userType": "external",
                "cwd": "/work/bench", "sessionId": session_id, "version": "2.0.64",
                "gitBranch": "main", "type": "user", "uuid": uuid,
                "timestamp": format!("2025-12-01T{:02}:{:02}:{:02}.000Z", i / 3600 % 24, i / 60 % 60, i % 60),
                "message": {"role": "user", "content": format!("Prompt {i} of session {s}: split the parser into steps and run the tests")},
            });
            text.push_str(&record.to_string());
            text.push('\n');
            parent = Value::String(uuid);
        }
        total += text.len() as u64;
        std::fs::write(project.join(format!("{session_id}.jsonl")), text)?;
    }
    Ok(total)
}

/// The generated store's units, in session then prompt order, without loading a session:
/// a user prompt's unit is `U:<uuid>`.
fn generated_units(sessions: usize, units: usize) -> Vec<Unit> {
    (0..sessions)
        .flat_map(|s| {
            (0..units).map(move |i| Unit {
                session_id: session_id(s),
                event_id: format!("U:{}", prompt_uuid(s, i)),
            })
        })
        .collect()
}

/// Checks that the server gives the first generated session the units
/// [`generated_units`] says (and loads it).
async fn check_generated_units(state: &AppState, units: &[Unit]) -> anyhow::Result<()> {
    let Some(first) = units.first() else {
        return Ok(());
    };
    let (_, loaded) = state.store.get(&first.session_id).await?;
    let served: Vec<String> = loaded
        .units()
        .units()
        .iter()
        .filter(|u| u.unit_type == "user_turn")
        .map(|u| u.event_id.clone())
        .collect();
    let generated: Vec<&str> = units
        .iter()
        .filter(|u| u.session_id == first.session_id)
        .map(|u| u.event_id.as_str())
        .collect();
    anyhow::ensure!(
        served == generated,
        "the server's units of {} are not the generated ones",
        first.session_id
    );
    Ok(())
}

/// A fresh PostgreSQL database on `admin`'s server: (its URL, its name).
async fn fresh_postgres(admin: &str) -> anyhow::Result<(String, String)> {
    let seed = (std::process::id(), std::time::SystemTime::now());
    let name = format!(
        "sg_bench_{:016x}",
        std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), seed)
    );
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(admin).await?;
    conn.execute(format!("CREATE DATABASE {name}").as_str()).await?;
    conn.close().await.ok();
    let (base, query) = match admin.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (admin, String::new()),
    };
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    Ok((format!("{base}/{name}{query}"), name))
}

async fn drop_postgres(admin: &str, name: &str) -> anyhow::Result<()> {
    let mut conn = sqlx::AnyConnection::connect(admin).await?;
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await?;
    conn.close().await.ok();
    Ok(())
}

/// A running server: its URL, state and shutdown.
struct Server {
    url: String,
    state: AppState,
    shutdown: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts the server on `sessions_dir` with the label database at `database_url`.
async fn start(data_dir: &Path, sessions_dir: PathBuf, database_url: &str) -> anyhow::Result<Server> {
    let state = AppState::build(AppSettings {
        store: StoreConfig {
            data_dir: Some(data_dir.to_owned()),
            sessions_dirs: vec![sessions_dir],
            cache_bytes: 16 << 30,
            background_counts: false,
            render_budget_bytes: 512 << 20,
            // Sessions of tens of thousands of tiny prompts cost more per byte of log than
            // the default bound allows: the bench measures the label reads, not that bound.
            memory_bound: None,
        },
        api: ApiConfig {
            max_upload_bytes: 64 << 20,
            request_timeout: Duration::from_secs(3600),
            header_read_timeout: Duration::from_secs(30),
            ..ApiConfig::default()
        },
        codebooks: Codebooks::built_in()?,
        database_url: database_url.to_owned(),
        upload_store: Default::default(),
        s3: Default::default(),
        label_policy: LabelPolicy::default(),
        // The bench measures the label reads: no indexing beside them.
        search: sessiongraph::search::SearchConfig {
            enabled: false,
            ..Default::default()
        },
    })
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (shutdown, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(sessiongraph::run(listener, state.clone(), async {
        let _ = rx.await;
    }));
    let client = reqwest::Client::new();
    for _ in 0..6000 {
        let ready = client.get(format!("{url}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status() == reqwest::StatusCode::OK) {
            return Ok(Server {
                url,
                state,
                shutdown,
                task,
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the server did not become ready")
}

/// Every session's `user_turn` units, in session then unit order (loads every session).
async fn load_units(state: &AppState) -> anyhow::Result<Vec<Unit>> {
    let mut ids: Vec<String> = state
        .store
        .list()
        .into_iter()
        .map(|i| i.slot.id.clone())
        .collect();
    ids.sort();
    let mut units = Vec::new();
    for id in ids {
        let (_, loaded) = state.store.get(&id).await?;
        units.extend(
            loaded
                .units()
                .units()
                .iter()
                .filter(|u| u.unit_type == "user_turn")
                .map(|u| Unit {
                    session_id: id.clone(),
                    event_id: u.event_id.clone(),
                }),
        );
    }
    Ok(units)
}

/// Cheap deterministic mixing (splitmix64).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The annotators (indices) who label unit `u`: all of them in order when `coders` is all,
/// else `coders` distinct ones picked pseudo-randomly (a random start and a stride prime
/// to the number of annotators), so that pairs share units at random.
fn coders_of(u: usize, coders: usize, annotators: usize) -> impl Iterator<Item = usize> {
    let h = mix(u as u64 ^ 0x5eed_0000_0000);
    let (mut start, mut stride) = (0, 1);
    if coders < annotators {
        start = (h % annotators as u64) as usize;
        stride = 1 + ((h >> 32) % annotators as u64) as usize;
        while gcd(stride, annotators) != 1 {
            stride += 1;
        }
    }
    (0..coders).map(move |j| (start + j * stride) % annotators)
}

/// Annotator `a`'s labels on unit `u`: one or two codebook labels shared by every annotator,
/// except that about one unit in five gets an annotator's own choice (disagreement).
fn labels_for(labels: &[String], u: usize, a: usize) -> Value {
    let h = mix(u as u64);
    let own = mix(h ^ (a as u64 + 1));
    let base = if own.is_multiple_of(5) { own } else { h };
    let n = labels.len() as u64;
    let mut ids = vec![&labels[(base % n) as usize]];
    if (base >> 20) % 3 == 0 {
        let second = &labels[((base >> 8) % n) as usize];
        if second != ids[0] {
            ids.push(second);
        }
    }
    Value::Array(ids.into_iter().map(|id| json!({ "id": id })).collect())
}

/// The codebook's labels that need no output field.
fn simple_labels(codebook: &Codebook) -> Vec<String> {
    codebook
        .labels
        .iter()
        .filter(|l| l.output_fields.iter().all(|f| !f.required))
        .map(|l| l.id.clone())
        .collect()
}

/// A phase's time and this process's memory: resident before, peak during (MiB).
#[derive(Default, Clone, Copy)]
struct Phase {
    seconds: f64,
    cpu_seconds: f64,
    rss_before: f64,
    peak: f64,
}

/// A phase under way: when it started, the CPU time and resident set then.
struct Started {
    at: Instant,
    cpu: f64,
    rss: f64,
}

impl Phase {
    /// Starts a phase: resets the peak, notes the time.
    fn start() -> Started {
        let rss = reset_peak();
        Started {
            at: Instant::now(),
            cpu: cpu_seconds(),
            rss,
        }
    }

    /// The resident set before and the peak during the phase, with the growth.
    fn memory(&self) -> String {
        format!(
            "{:.0} MiB before, peak {:.0} MiB (+{:.0})",
            self.rss_before,
            self.peak,
            (self.peak - self.rss_before).max(0.0)
        )
    }

    fn end(started: Started) -> Phase {
        Phase {
            seconds: started.at.elapsed().as_secs_f64(),
            cpu_seconds: cpu_seconds() - started.cpu,
            rss_before: started.rss,
            peak: memory_mib("VmHWM:"),
        }
    }

    /// Its figures as JSON, named `name_*`.
    fn json(&self, name: &str, out: &mut serde_json::Map<String, Value>) {
        out.insert(format!("{name}_s"), json!(self.seconds));
        out.insert(format!("{name}_cpu_s"), json!(self.cpu_seconds));
        out.insert(format!("{name}_rss_before_mib"), json!(self.rss_before));
        out.insert(format!("{name}_peak_mib"), json!(self.peak));
    }
}

/// Every (unit, annotator) set of the store, unit by unit.
fn sets_to_seed(units: usize, args: &Args) -> impl Iterator<Item = (usize, usize)> + '_ {
    (0..units).flat_map(|u| coders_of(u, args.coders(), args.annotators).map(move |a| (u, a)))
}

/// Seeds the store: every unit's sets, `batch` JSONL lines per import. Returns the phase,
/// the rows written and each request's time in seconds.
async fn seed(
    client: &reqwest::Client,
    url: &str,
    units: &[Unit],
    labels: &[String],
    args: &Args,
) -> anyhow::Result<(Phase, u64, Vec<f64>)> {
    let started = Phase::start();
    let lines: Vec<(usize, usize)> = sets_to_seed(units.len(), args).collect();
    let (mut written, mut batches) = (0, Vec::new());
    for chunk in lines.chunks(args.batch) {
        let sent = Instant::now();
        let mut body = String::with_capacity(chunk.len() * 200);
        for &(u, a) in chunk {
            let line = json!({
                "session_id": units[u].session_id,
                "event_id": units[u].event_id,
                "annotator": format!("seed-{a}"),
                "labels": labels_for(labels, u, a),
            });
            body.push_str(&line.to_string());
            body.push('\n');
        }
        let reply = client
            .post(format!("{url}/api/labels/import?format=jsonl"))
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await?;
        anyhow::ensure!(reply.status().is_success(), "import: HTTP {}", reply.status());
        let summary: Value = reply.json().await?;
        anyhow::ensure!(
            summary["failed"] == 0,
            "import refused lines: {}",
            summary["results"]
                .as_array()
                .and_then(|r| r.iter().find(|o| o["ok"] == false))
                .unwrap_or(&Value::Null)
        );
        written += summary["written"].as_u64().unwrap_or(0);
        batches.push(sent.elapsed().as_secs_f64());
    }
    Ok((Phase::end(started), written, batches))
}

/// Rows per `INSERT` of a direct seed (five parameters each).
const ROWS_PER_INSERT: usize = 1_000;
/// Rows per transaction of a direct seed.
const ROWS_PER_TRANSACTION: usize = 100_000;

/// Seeds the store straight into the database at `database_url`: every unit's sets as
/// submitted rows of `label_sets` (version 1, no history), in multi-row `INSERT`s.
async fn seed_direct(
    database_url: &str,
    units: &[Unit],
    labels: &[String],
    args: &Args,
) -> anyhow::Result<(Phase, u64)> {
    let started = Phase::start();
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(database_url).await?;
    let mut written = 0;
    let all: Vec<(usize, usize)> = sets_to_seed(units.len(), args).collect();
    for transaction in all.chunks(ROWS_PER_TRANSACTION) {
        conn.execute("BEGIN").await?;
        for rows in transaction.chunks(ROWS_PER_INSERT) {
            insert_sets(&mut conn, units, labels, rows).await?;
            written += rows.len() as u64;
        }
        conn.execute("COMMIT").await?;
    }
    conn.close().await.ok();
    Ok((Phase::end(started), written))
}

/// One multi-row `INSERT` of the sets `(unit, annotator)`.
async fn insert_sets(
    conn: &mut sqlx::AnyConnection,
    units: &[Unit],
    labels: &[String],
    rows: &[(usize, usize)],
) -> anyhow::Result<()> {
    let mut sql = String::from(
        "INSERT INTO label_sets (session_id, event_id, annotator, status, labels, note, lead_time_ms, \
         version, updated_at) VALUES ",
    );
    for i in 0..rows.len() {
        let p = 5 * i;
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&format!(
            "(${}, ${}, ${}, 'submitted', ${}, NULL, ${}, 1, '2026-01-01T00:00:00.000Z')",
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5
        ));
    }
    let mut query = sqlx::query(&sql);
    for &(u, a) in rows {
        query = query
            .bind(units[u].session_id.clone())
            .bind(units[u].event_id.clone())
            .bind(format!("seed-{a}"))
            .bind(labels_for(labels, u, a).to_string())
            .bind(1_000 + (mix((u * 31 + a) as u64) % 60_000) as i64);
    }
    query.execute(&mut *conn).await?;
    Ok(())
}

/// `PUT` latencies: `--writers` annotators at once, `--puts` each on distinct units.
/// Returns the phase and the sorted latencies in microseconds.
async fn puts(
    client: &reqwest::Client,
    url: &str,
    units: &Arc<Vec<Unit>>,
    labels: &Arc<Vec<String>>,
    args: &Args,
) -> anyhow::Result<(Phase, Vec<u64>)> {
    let total = args.writers * args.puts;
    let stride = (units.len() / total.max(1)).max(1);
    anyhow::ensure!(total <= units.len(), "more PUTs than units");
    let started = Phase::start();
    let mut tasks = Vec::new();
    for w in 0..args.writers {
        let (client, units, labels) = (client.clone(), units.clone(), labels.clone());
        let (url, count) = (url.to_owned(), args.puts);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(count);
            for i in 0..count {
                let u = (w * count + i) * stride;
                let unit = &units[u];
                let body = json!({
                    "annotator": format!("writer-{w:02}"),
                    "status": "submitted",
                    "labels": labels_for(&labels, u, 100 + w),
                });
                let path = format!("{url}/api/graph/{}/labels/{}", unit.session_id, unit.event_id);
                let sent = Instant::now();
                let reply = client.put(path).json(&body).send().await?;
                let status = reply.status();
                reply.bytes().await?;
                latencies.push(sent.elapsed().as_micros() as u64);
                anyhow::ensure!(status.is_success(), "PUT: HTTP {status}");
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut all = Vec::with_capacity(total);
    for task in tasks {
        all.extend(task.await??);
    }
    let phase = Phase::end(started);
    all.sort_unstable();
    Ok((phase, all))
}

/// Bodies up to this size are kept and parsed; larger ones are only counted.
const KEPT_BODY_BYTES: usize = 64 << 20;

/// A `GET` measured: its phase, status, bytes and lines received, and the body parsed as
/// JSON when it is JSON and at most [`KEPT_BODY_BYTES`].
struct Fetched {
    phase: Phase,
    bytes: u64,
    lines: u64,
    json: Option<Value>,
}

/// `GET url`, the body streamed into a counter (not kept whole unless small).
async fn fetch_measured(client: &reqwest::Client, url: &str) -> anyhow::Result<Fetched> {
    let started = Phase::start();
    let reply = client.get(url).send().await?;
    anyhow::ensure!(reply.status().is_success(), "{url}: HTTP {}", reply.status());
    let (mut bytes, mut lines, mut kept) = (0u64, 0u64, Vec::new());
    let mut stream = reply.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        bytes += chunk.len() as u64;
        lines += memchr::memchr_iter(b'\n', &chunk).count() as u64;
        if kept.len() + chunk.len() <= KEPT_BODY_BYTES {
            kept.extend_from_slice(&chunk);
        }
    }
    let phase = Phase::end(started);
    let json = (bytes as usize == kept.len())
        .then(|| serde_json::from_slice(&kept).ok())
        .flatten();
    Ok(Fetched {
        phase,
        bytes,
        lines,
        json,
    })
}

/// The figures of one phase, for the table and the JSON line.
#[derive(Default)]
struct Figures {
    table: Vec<(String, String)>,
    json: serde_json::Map<String, Value>,
}

impl Figures {
    fn row(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.table.push((name.into(), value.into()));
    }
}

/// `?session=<first>` when asked for one session, else nothing (`prefix`: `?` or `&`).
fn scope(args: &Args, prefix: char) -> String {
    if args.one_session {
        format!("{prefix}session={}", session_id(0))
    } else {
        String::new()
    }
}

/// `GET /api/labels/agreement`: time, body, the overall alpha and the pairs listed.
async fn agreement(
    client: &reqwest::Client,
    url: &str,
    args: &Args,
    out: &mut Figures,
) -> anyhow::Result<()> {
    let got = fetch_measured(client, &format!("{url}/api/labels/agreement{}", scope(args, '?'))).await?;
    let report = got.json.unwrap_or(Value::Null);
    let alpha = report["overall"]["krippendorff_alpha"].clone();
    let pairs = report["pairs"].as_array().map(Vec::len);
    let next = report.get("pairs_next").cloned();
    out.row(
        "agreement",
        format!(
            "{:.2} s ({:.2} s CPU), {} B body, alpha {alpha}, {} pairs listed{}",
            got.phase.seconds,
            got.phase.cpu_seconds,
            got.bytes,
            pairs.map_or("?".to_owned(), |n| n.to_string()),
            next.map_or(String::new(), |n| format!(", pairs_next {n}"))
        ),
    );
    out.row("agreement RSS", got.phase.memory());
    got.phase.json("agreement", &mut out.json);
    out.json.insert("agreement_bytes".into(), json!(got.bytes));
    out.json.insert("alpha".into(), alpha);
    out.json.insert("agreement_pairs".into(), json!(pairs));
    Ok(())
}

/// `GET /api/labels/progress?session=<first>`: time, body, annotators listed.
async fn progress(client: &reqwest::Client, url: &str, out: &mut Figures) -> anyhow::Result<()> {
    let got = fetch_measured(
        client,
        &format!("{url}/api/labels/progress?session={}", session_id(0)),
    )
    .await?;
    let annotators = got
        .json
        .as_ref()
        .and_then(|p| p["sessions"][0]["annotators"].as_array().map(Vec::len));
    out.row(
        "progress (first session)",
        format!(
            "{:.2} s ({:.2} s CPU), {} B body, {} annotators",
            got.phase.seconds,
            got.phase.cpu_seconds,
            got.bytes,
            annotators.map_or("?".to_owned(), |n| n.to_string())
        ),
    );
    out.row("progress RSS", got.phase.memory());
    got.phase.json("progress", &mut out.json);
    out.json.insert("progress_bytes".into(), json!(got.bytes));
    Ok(())
}

/// `GET /api/labels/export?format=jsonl` streamed into a counter.
async fn export(client: &reqwest::Client, url: &str, args: &Args, out: &mut Figures) -> anyhow::Result<()> {
    let got = fetch_measured(
        client,
        &format!("{url}/api/labels/export?format=jsonl{}", scope(args, '&')),
    )
    .await?;
    let mib = got.bytes as f64 / (1 << 20) as f64;
    out.row(
        "export (JSONL)",
        format!(
            "{:.2} s ({:.2} s CPU), {mib:.1} MiB, {} lines, {:.1} MiB/s",
            got.phase.seconds,
            got.phase.cpu_seconds,
            got.lines,
            mib / got.phase.seconds
        ),
    );
    out.row("export RSS", got.phase.memory());
    got.phase.json("export", &mut out.json);
    out.json.insert("export_bytes".into(), json!(got.bytes));
    out.json.insert("export_lines".into(), json!(got.lines));
    Ok(())
}

/// `GET /api/graph/<first>/annotations`, twice.
async fn annotations(client: &reqwest::Client, url: &str, out: &mut Figures) -> anyhow::Result<()> {
    let path = format!("{url}/api/graph/{}/annotations", session_id(0));
    for read in ["first", "second"] {
        let got = fetch_measured(client, &path).await?;
        out.row(
            format!("annotations, {read} read"),
            format!(
                "{:.2} s ({:.2} s CPU), {} B body; {}",
                got.phase.seconds,
                got.phase.cpu_seconds,
                got.bytes,
                got.phase.memory()
            ),
        );
        got.phase.json(&format!("annotations_{read}"), &mut out.json);
    }
    Ok(())
}

/// The mean of the first (or last) tenth of `values` (at least one value).
fn tenth_mean(values: &[f64], last: bool) -> f64 {
    let n = (values.len() / 10).max(1).min(values.len());
    let part = if last {
        &values[values.len() - n..]
    } else {
        &values[..n]
    };
    part.iter().sum::<f64>() / n.max(1) as f64
}

fn percentile_ms(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
}

/// The `put` phase's figures.
fn put_figures(phase: &Phase, latencies: &[u64], out: &mut Figures) {
    out.row(
        "PUT p50 / p99 / max",
        format!(
            "{:.2} / {:.2} / {:.2} ms",
            percentile_ms(latencies, 0.5),
            percentile_ms(latencies, 0.99),
            percentile_ms(latencies, 1.0)
        ),
    );
    out.row(
        "PUT throughput",
        format!(
            "{:.0} PUT/s ({} PUTs in {:.2} s)",
            latencies.len() as f64 / phase.seconds,
            latencies.len(),
            phase.seconds
        ),
    );
    for (name, value) in [
        ("puts", json!(latencies.len())),
        ("put_s", json!(phase.seconds)),
        ("put_p50_ms", json!(percentile_ms(latencies, 0.5))),
        ("put_p99_ms", json!(percentile_ms(latencies, 0.99))),
        ("put_max_ms", json!(percentile_ms(latencies, 1.0))),
    ] {
        out.json.insert(name.into(), value);
    }
}

/// Seeds the store as `--seed` says, recording the figures; returns the units.
async fn seed_store(
    server: &Server,
    client: &reqwest::Client,
    database_url: &str,
    args: &Args,
    out: &mut Figures,
) -> anyhow::Result<Vec<Unit>> {
    let labels = simple_labels(server.state.codebooks.default());
    let started = Phase::start();
    let units = match args.seed {
        Seeding::Import => load_units(&server.state).await?,
        Seeding::Direct => {
            let units = generated_units(args.sessions, args.units);
            check_generated_units(&server.state, &units).await?;
            units
        }
    };
    let load = Phase::end(started);
    eprintln!("{} units in {:.1} s", units.len(), load.seconds);
    out.row(
        "sessions loaded",
        format!("{:.1} s, RSS {:.0} MiB", load.seconds, load.peak),
    );
    out.json.insert("units".into(), json!(units.len()));
    out.json.insert("load_s".into(), json!(load.seconds));
    out.json.insert("load_rss_mib".into(), json!(load.peak));
    if args.phases.contains(&PhaseName::Annotations) {
        // The session is parsed and its plain body kept before any label exists.
        fetch_measured(
            client,
            &format!("{}/api/graph/{}/annotations", server.url, session_id(0)),
        )
        .await?;
    }
    let (phase, rows) = match args.seed {
        Seeding::Import => {
            let (phase, rows, batches) = seed(client, &server.url, &units, &labels, args).await?;
            out.row(
                "seed (import)",
                format!(
                    "{rows} rows in {:.1} s, {:.0} rows/s, peak RSS {:.0} MiB; a request of {} lines: \
                     {:.2} s (first tenth), {:.2} s (last tenth)",
                    phase.seconds,
                    rows as f64 / phase.seconds,
                    phase.peak,
                    args.batch,
                    tenth_mean(&batches, false),
                    tenth_mean(&batches, true)
                ),
            );
            out.json.insert("import_batch".into(), json!(args.batch));
            out.json.insert(
                "import_request_first_s".into(),
                json!(tenth_mean(&batches, false)),
            );
            out.json
                .insert("import_request_last_s".into(), json!(tenth_mean(&batches, true)));
            (phase, rows)
        }
        Seeding::Direct => {
            let (phase, rows) = seed_direct(database_url, &units, &labels, args).await?;
            out.row(
                "seed (direct)",
                format!(
                    "{rows} rows in {:.1} s, {:.0} rows/s",
                    phase.seconds,
                    rows as f64 / phase.seconds
                ),
            );
            (phase, rows)
        }
    };
    eprintln!("seeded {rows} rows in {:.1} s", phase.seconds);
    out.json.insert("rows".into(), json!(rows));
    out.json.insert("seed_s".into(), json!(phase.seconds));
    out.json.insert("seed_peak_mib".into(), json!(phase.peak));
    Ok(units)
}

/// Seeds the store, then runs every phase asked for against a started server.
async fn measure(server: &Server, database_url: &str, args: &Args, out: &mut Figures) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3600))
        .build()?;
    let units = Arc::new(seed_store(server, &client, database_url, args, out).await?);
    let labels = Arc::new(simple_labels(server.state.codebooks.default()));
    for phase in &args.phases {
        match phase {
            PhaseName::Put => {
                let (put, latencies) = puts(&client, &server.url, &units, &labels, args).await?;
                eprintln!("{} PUTs in {:.1} s", latencies.len(), put.seconds);
                put_figures(&put, &latencies, out);
            }
            PhaseName::Agreement => agreement(&client, &server.url, args, out).await?,
            PhaseName::Progress => progress(&client, &server.url, out).await?,
            PhaseName::Export => export(&client, &server.url, args, out).await?,
            PhaseName::Annotations => annotations(&client, &server.url, out).await?,
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let temp = tempfile::tempdir()?;
    let (sessions_dir, data_dir) = (temp.path().join("sessions"), temp.path().join("data"));
    std::fs::create_dir_all(&data_dir)?;
    let log_bytes = write_sessions(&sessions_dir, args.sessions, args.units)?;
    let admin = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let (backend, database_url, postgres) = match &admin {
        Some(admin) => {
            let (url, name) = fresh_postgres(admin).await?;
            ("PostgreSQL", url, Some((admin.clone(), name)))
        }
        None => (
            "SQLite",
            sessiongraph::labels::store::default_url(&data_dir)?,
            None,
        ),
    };
    let mut figures = Figures::default();
    figures.row(
        "sessions x units",
        format!(
            "{} x {} ({:.0} MiB of logs), {} annotators, {} per unit",
            args.sessions,
            args.units,
            log_bytes as f64 / (1 << 20) as f64,
            args.annotators,
            args.coders()
        ),
    );
    for (name, value) in [
        ("backend", json!(backend)),
        ("sessions", json!(args.sessions)),
        ("log_bytes", json!(log_bytes)),
        ("annotators", json!(args.annotators)),
        ("coders", json!(args.coders())),
    ] {
        figures.json.insert(name.into(), value);
    }
    let outcome = match start(&data_dir, sessions_dir, &database_url).await {
        Ok(server) => {
            let measured = measure(&server, &database_url, &args, &mut figures).await;
            let _ = server.shutdown.send(());
            let _ = server.task.await;
            measured
        }
        Err(e) => Err(e),
    };
    if let Some((admin, name)) = postgres {
        drop_postgres(&admin, &name).await?;
    }
    if args.keep {
        let kept = temp.keep();
        eprintln!(
            "kept: sessiongraph serve --sessions-dir {} --data-dir {}",
            kept.join("sessions").display(),
            kept.join("data").display()
        );
    }
    outcome?;
    println!("| figure | {backend} |");
    println!("|---|---|");
    for (name, value) in &figures.table {
        println!("| {name} | {value} |");
    }
    println!("{}", Value::Object(figures.json));
    Ok(())
}
