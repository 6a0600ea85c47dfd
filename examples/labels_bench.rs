//! Benchmark of the label store (not a test): seeds a large store through the HTTP API and
//! measures, on one backend per run:
//!
//! - seeding: `POST /api/labels/import` of `--annotators` x (`--sessions` x `--units`) sets
//!   (JSONL, `--batch` lines per request), time and rows/s;
//! - `PUT /api/graph/{id}/labels/{event_id}` latency (p50, p99, max) and throughput with
//!   `--writers` concurrent annotators, each writing `--puts` submitted sets on distinct units;
//! - `GET /api/labels/agreement` over the whole store: time, body size, peak RSS;
//! - `GET /api/labels/export?format=jsonl` streamed into a byte counter: time, bytes, lines,
//!   peak RSS.
//!
//! The sessions are synthetic Claude Code logs written into a temporary sessions directory
//! (each `--units` user prompts chained by `parentUuid`, one `user_turn` unit each); the
//! server runs in this process on 127.0.0.1. The label database is SQLite in a temporary
//! data directory, or, when `DATABASE_URL` is set, a fresh PostgreSQL database
//! `sg_bench_<random>` created through that URL and dropped after. Memory is this process's
//! (server and client): the resident set before each phase and its peak during it (the peak
//! is reset through `/proc/self/clear_refs` before each phase). Prints a markdown table and
//! one JSON line.
//!
//! ```sh
//! cargo run --release --example labels_bench
//! DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres \
//!     cargo run --release --example labels_bench
//! cargo run --release --example labels_bench -- --sessions 200   # 10x smaller
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use serde_json::{json, Value};
use sessiongraph::labels::{Codebook, LabelPolicy, LabelStore};
use sessiongraph::store::{Store, StoreConfig};
use sessiongraph::{ApiConfig, AppState};
use sqlx::{Connection, Executor};
use tokio::sync::oneshot;

/// mimalloc, as in the server binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Sessions to generate.
    #[arg(long, default_value_t = 2_000)]
    sessions: usize,
    /// User prompts (units) per session.
    #[arg(long, default_value_t = 250)]
    units: usize,
    /// Annotators labeling every unit when the store is seeded.
    #[arg(long, default_value_t = 2)]
    annotators: usize,
    /// JSONL lines per import request.
    #[arg(long, default_value_t = 10_000)]
    batch: usize,
    /// Concurrent annotators writing with `PUT`.
    #[arg(long, default_value_t = 32)]
    writers: usize,
    /// `PUT`s per concurrent annotator.
    #[arg(long, default_value_t = 200)]
    puts: usize,
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

/// The resident set now, after resetting the peak to it.
fn reset_peak() -> f64 {
    // Writing 5 resets VmHWM to the current resident set (Linux 4.0 and later).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    memory_mib("VmRSS:")
}

/// Writes `sessions` Claude Code logs of `units` chained user prompts into `dir/bench/`.
fn write_sessions(dir: &Path, sessions: usize, units: usize) -> anyhow::Result<u64> {
    let project = dir.join("bench");
    std::fs::create_dir_all(&project)?;
    let mut total = 0;
    for s in 0..sessions {
        let session_id = format!("{s:08x}-0000-4000-8000-000000000000");
        let mut text = String::with_capacity(units * 400);
        let mut parent = Value::Null;
        for i in 0..units {
            let uuid = format!("{s:08x}-0000-4000-8000-{:012x}", i + 1);
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
    let store = Store::new(StoreConfig {
        data_dir: Some(data_dir.to_owned()),
        sessions_dirs: vec![sessions_dir],
        cache_bytes: 16 << 30,
        background_counts: false,
        render_budget_bytes: 512 << 20,
        ..StoreConfig::default()
    })?;
    let codebook = Arc::new(Codebook::built_in()?);
    let labels = LabelStore::open(database_url, codebook.clone(), LabelPolicy::default()).await?;
    let state = AppState::new(sessiongraph::SharedState {
        store: Arc::new(store),
        config: Arc::new(ApiConfig {
            max_upload_bytes: 64 << 20,
            request_timeout: Duration::from_secs(3600),
            header_read_timeout: Duration::from_secs(30),
            ..ApiConfig::default()
        }),
        codebook,
        labels: Arc::new(labels),
    });
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
    rss_before: f64,
    peak: f64,
}

impl Phase {
    /// Starts a phase: resets the peak, notes the time.
    fn start() -> (Instant, f64) {
        let rss = reset_peak();
        (Instant::now(), rss)
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

    fn end((started, rss_before): (Instant, f64)) -> Phase {
        Phase {
            seconds: started.elapsed().as_secs_f64(),
            rss_before,
            peak: memory_mib("VmHWM:"),
        }
    }
}

/// Seeds the store: every annotator's set on every unit, `batch` JSONL lines per import.
/// Returns the phase, the rows written and each request's time in seconds.
async fn seed(
    client: &reqwest::Client,
    url: &str,
    units: &[Unit],
    labels: &[String],
    args: &Args,
) -> anyhow::Result<(Phase, u64, Vec<f64>)> {
    let started = Phase::start();
    let lines = (0..units.len()).flat_map(|u| (0..args.annotators).map(move |a| (u, a)));
    let lines: Vec<(usize, usize)> = lines.collect();
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

/// `GET /api/labels/agreement` over the whole store: the phase, the body's size and the
/// overall alpha.
async fn agreement(client: &reqwest::Client, url: &str) -> anyhow::Result<(Phase, usize, Value)> {
    let started = Phase::start();
    let reply = client.get(format!("{url}/api/labels/agreement")).send().await?;
    anyhow::ensure!(reply.status().is_success(), "agreement: HTTP {}", reply.status());
    let body = reply.bytes().await?;
    let phase = Phase::end(started);
    let report: Value = serde_json::from_slice(&body)?;
    let alpha = report
        .get("overall")
        .and_then(|o| o.get("krippendorff_alpha"))
        .cloned()
        .unwrap_or(Value::Null);
    Ok((phase, body.len(), alpha))
}

/// `GET /api/labels/export?format=jsonl` streamed into a counter: the phase, bytes, lines.
async fn export(client: &reqwest::Client, url: &str) -> anyhow::Result<(Phase, u64, u64)> {
    let started = Phase::start();
    let reply = client
        .get(format!("{url}/api/labels/export?format=jsonl"))
        .send()
        .await?;
    anyhow::ensure!(reply.status().is_success(), "export: HTTP {}", reply.status());
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut stream = reply.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        bytes += chunk.len() as u64;
        lines += memchr::memchr_iter(b'\n', &chunk).count() as u64;
    }
    Ok((Phase::end(started), bytes, lines))
}

/// Everything measured in one run.
struct Report {
    backend: &'static str,
    sessions: usize,
    units: usize,
    log_bytes: u64,
    load: Phase,
    seed: Phase,
    rows: u64,
    batches: Vec<f64>,
    put: Phase,
    latencies_us: Vec<u64>,
    agreement: Phase,
    agreement_bytes: usize,
    alpha: Value,
    export: Phase,
    export_bytes: u64,
    export_lines: u64,
    batch: usize,
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

impl Report {
    /// (figure, value) in print order.
    fn figures(&self) -> Vec<(&'static str, String)> {
        let l = &self.latencies_us;
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        vec![
            (
                "sessions x units",
                format!(
                    "{} x {} ({:.0} MiB of logs)",
                    self.sessions,
                    self.units / self.sessions.max(1),
                    mib(self.log_bytes)
                ),
            ),
            (
                "sessions loaded",
                format!("{:.1} s, RSS {:.0} MiB", self.load.seconds, self.load.peak),
            ),
            (
                "seed (import)",
                format!(
                    "{} rows in {:.1} s, {:.0} rows/s, peak RSS {:.0} MiB; a request of {} lines: \
                     {:.2} s (first tenth), {:.2} s (last tenth)",
                    self.rows,
                    self.seed.seconds,
                    self.rows as f64 / self.seed.seconds,
                    self.seed.peak,
                    self.batch,
                    tenth_mean(&self.batches, false),
                    tenth_mean(&self.batches, true)
                ),
            ),
            (
                "PUT p50 / p99 / max",
                format!(
                    "{:.2} / {:.2} / {:.2} ms",
                    percentile_ms(l, 0.5),
                    percentile_ms(l, 0.99),
                    percentile_ms(l, 1.0)
                ),
            ),
            (
                "PUT throughput",
                format!(
                    "{:.0} PUT/s ({} PUTs in {:.2} s)",
                    l.len() as f64 / self.put.seconds,
                    l.len(),
                    self.put.seconds
                ),
            ),
            (
                "agreement (whole store)",
                format!(
                    "{:.2} s, {} B body, alpha {}",
                    self.agreement.seconds, self.agreement_bytes, self.alpha
                ),
            ),
            ("agreement RSS", self.agreement.memory()),
            (
                "export (JSONL)",
                format!(
                    "{:.2} s, {:.1} MiB, {} lines, {:.1} MiB/s",
                    self.export.seconds,
                    mib(self.export_bytes),
                    self.export_lines,
                    mib(self.export_bytes) / self.export.seconds
                ),
            ),
            ("export RSS", self.export.memory()),
        ]
    }

    fn json(&self) -> Value {
        let l = &self.latencies_us;
        json!({
            "backend": self.backend, "sessions": self.sessions, "units": self.units,
            "log_bytes": self.log_bytes, "load_s": self.load.seconds, "load_rss_mib": self.load.peak,
            "rows": self.rows, "seed_s": self.seed.seconds, "import_batch": self.batch,
            "import_request_first_s": tenth_mean(&self.batches, false), "import_request_last_s": tenth_mean(&self.batches, true), "seed_peak_mib": self.seed.peak,
            "puts": l.len(), "put_s": self.put.seconds, "put_p50_ms": percentile_ms(l, 0.5),
            "put_p99_ms": percentile_ms(l, 0.99), "put_max_ms": percentile_ms(l, 1.0),
            "agreement_s": self.agreement.seconds, "agreement_bytes": self.agreement_bytes,
            "agreement_rss_before_mib": self.agreement.rss_before, "agreement_peak_mib": self.agreement.peak,
            "alpha": self.alpha, "export_s": self.export.seconds, "export_bytes": self.export_bytes,
            "export_lines": self.export_lines, "export_rss_before_mib": self.export.rss_before,
            "export_peak_mib": self.export.peak,
        })
    }

    fn print(&self) {
        println!("| figure | {} |", self.backend);
        println!("|---|---|");
        for (name, value) in self.figures() {
            println!("| {name} | {value} |");
        }
        println!("{}", self.json());
    }
}

/// Runs every phase against a started server.
async fn measure(
    server: &Server,
    args: &Args,
    backend: &'static str,
    log_bytes: u64,
) -> anyhow::Result<Report> {
    let started = Phase::start();
    let units = Arc::new(load_units(&server.state).await?);
    let load = Phase::end(started);
    eprintln!("{} units in {:.1} s", units.len(), load.seconds);
    let labels = Arc::new(simple_labels(&server.state.codebook));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3600))
        .build()?;
    let (seed, rows, batches) = seed(&client, &server.url, &units, &labels, args).await?;
    eprintln!("seeded {rows} rows in {:.1} s", seed.seconds);
    let (put, latencies_us) = puts(&client, &server.url, &units, &labels, args).await?;
    eprintln!("{} PUTs in {:.1} s", latencies_us.len(), put.seconds);
    let (agreement, agreement_bytes, alpha) = agreement(&client, &server.url).await?;
    eprintln!("agreement in {:.1} s", agreement.seconds);
    let (export, export_bytes, export_lines) = export(&client, &server.url).await?;
    Ok(Report {
        backend,
        sessions: args.sessions,
        units: units.len(),
        log_bytes,
        load,
        seed,
        rows,
        batches,
        put,
        latencies_us,
        agreement,
        agreement_bytes,
        alpha,
        export,
        export_bytes,
        export_lines,
        batch: args.batch,
    })
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
    let outcome = match start(&data_dir, sessions_dir, &database_url).await {
        Ok(server) => {
            let report = measure(&server, &args, backend, log_bytes).await;
            let _ = server.shutdown.send(());
            let _ = server.task.await;
            report
        }
        Err(e) => Err(e),
    };
    if let Some((admin, name)) = postgres {
        drop_postgres(&admin, &name).await?;
    }
    outcome?.print();
    Ok(())
}
