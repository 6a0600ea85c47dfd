//! Soak client: mixed uploads, reads and deletions against a running server for a bounded
//! time, then a report of errors, latency percentiles and the server's memory over time.
//! `benches/soak.sh` starts a server and runs this against it.
//!
//! ```sh
//! cargo run --release --example soak -- --url http://127.0.0.1:18083 --pid <server pid> --seconds 180
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use reqwest::StatusCode;
use serde_json::Value;

#[derive(Parser)]
struct Args {
    /// The server, e.g. http://127.0.0.1:18083 (loopback only).
    #[arg(long)]
    url: String,
    /// The server's process id, to sample its resident memory.
    #[arg(long)]
    pid: Option<u32>,
    /// How long to run.
    #[arg(long, default_value_t = 180)]
    seconds: u64,
    /// Clients running at once.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Directory of fixtures to upload (the CommuGraph sample and the synthetic sessions).
    #[arg(long, default_value = "fixtures")]
    fixtures: PathBuf,
}

/// Latencies and outcomes, by operation.
#[derive(Default)]
struct Tally {
    latencies_us: BTreeMap<&'static str, Vec<u64>>,
    errors: BTreeMap<String, u64>,
}

/// A session's files, for a multipart upload.
type Files = Vec<(String, Vec<u8>)>;

fn session_files(dir: &std::path::Path) -> Files {
    let mut files: Files = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap_or_default())
        })
        .collect();
    files.sort_by_key(|(n, _)| (n.starts_with("agent-"), n.clone()));
    files
}

/// Resident memory of `pid` in MiB.
fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

struct Client {
    http: reqwest::Client,
    url: String,
    tally: Arc<Mutex<Tally>>,
}

impl Client {
    async fn timed(&self, op: &'static str, request: reqwest::RequestBuilder) -> Option<Value> {
        let started = Instant::now();
        let outcome = request.send().await;
        let result = match outcome {
            Ok(r) if r.status() == StatusCode::OK => r.json::<Value>().await.map_err(|e| e.to_string()),
            Ok(r) => Err(format!("{op}: HTTP {}", r.status())),
            Err(e) => Err(format!("{op}: {e}")),
        };
        let elapsed = started.elapsed().as_micros() as u64;
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        tally.latencies_us.entry(op).or_default().push(elapsed);
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                *tally.errors.entry(e).or_default() += 1;
                None
            }
        }
    }

    /// Uploads `files`; with `unique`, a line of its own makes the upload new content.
    async fn upload(&self, files: &Files, unique: Option<u64>) -> Option<String> {
        let mut form = reqwest::multipart::Form::new().text("framework", "claudecode");
        for (i, (name, bytes)) in files.iter().enumerate() {
            let mut bytes = bytes.clone();
            if let (0, Some(unique)) = (i, unique) {
                // A line of its own makes each upload new content (a new id, a new parse).
                bytes.extend_from_slice(
                    format!("{{\"type\":\"summary\",\"summary\":\"soak {unique}\",\"leafUuid\":\"x\"}}\n")
                        .as_bytes(),
                );
            }
            form = form.part(
                "file",
                reqwest::multipart::Part::bytes(bytes).file_name(name.clone()),
            );
        }
        let v = self
            .timed(
                "upload",
                self.http.post(format!("{}/api/upload", self.url)).multipart(form),
            )
            .await?;
        v["graph_id"].as_str().map(str::to_owned)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.url.starts_with("http://127.0.0.1") || args.url.starts_with("http://localhost"),
        "the soak runs against loopback only"
    );
    let mut sessions = vec![session_files(&args.fixtures.join("commugraph-sample"))];
    for dir in ["edge_cases", "multi_block", "subagents", "duplicate_lines"] {
        sessions.push(session_files(&args.fixtures.join("synthetic").join(dir)));
    }
    anyhow::ensure!(
        sessions.iter().all(|s| !s.is_empty()),
        "fixtures not found under {}",
        args.fixtures.display()
    );
    let sessions = Arc::new(sessions);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let unique = Arc::new(AtomicU64::new(0));

    let memory = Arc::new(Mutex::new(Vec::<(f64, f64)>::new()));
    let sampler = {
        let memory = memory.clone();
        let pid = args.pid;
        tokio::spawn(async move {
            let started = Instant::now();
            while Instant::now() < deadline {
                if let Some(mib) = pid.and_then(rss_mib) {
                    memory
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((started.elapsed().as_secs_f64(), mib));
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        })
    };

    let mut workers = Vec::new();
    for worker in 0..args.clients {
        let client = Client {
            // A request that hangs is an error, and the soak still ends on time.
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?,
            url: args.url.clone(),
            tally: tally.clone(),
        };
        let (sessions, unique) = (sessions.clone(), unique.clone());
        workers.push(tokio::spawn(async move {
            let mut mine: Vec<String> = Vec::new();
            let mut shared: Vec<String> = Vec::new();
            let mut round = 0usize;
            while Instant::now() < deadline {
                round += 1;
                let n = unique.fetch_add(1, Ordering::Relaxed);
                let files = &sessions[(worker + round) % sessions.len()];
                // Upload a new session now and then; now and then the same bytes every
                // other client sends too (one id, stored and parsed once); read much more.
                if round % 5 == 1 {
                    if let Some(id) = client.upload(files, Some(n)).await {
                        mine.push(id);
                    }
                } else if round % 7 == 3 {
                    if let Some(id) = client.upload(files, None).await {
                        if !shared.contains(&id) {
                            shared.push(id);
                        }
                    }
                }
                // (id, whether it has a workflow view: Claude Code sessions only; the
                // others answer 400, as CommuGraph does).
                let mut reads: Vec<(String, bool)> =
                    mine.last().map(|id| (id.clone(), true)).into_iter().collect();
                reads.extend(
                    shared
                        .get(round % shared.len().max(1))
                        .map(|id| (id.clone(), true)),
                );
                let listing = client
                    .timed("list", client.http.get(format!("{}/api/sessions", client.url)))
                    .await;
                // A session from the sessions directory, read by every client in turn.
                let on_disk: Vec<(String, bool)> = listing
                    .as_ref()
                    .and_then(|l| l["sessions"].as_array())
                    .into_iter()
                    .flatten()
                    .filter(|s| s["source"] == "directory")
                    .filter_map(|s| Some((s["id"].as_str()?.to_owned(), s["framework"] == "claudecode")))
                    .collect();
                reads.extend(on_disk.get(round % on_disk.len().max(1)).cloned());
                for (id, has_workflow) in reads {
                    let views = [
                        "annotations",
                        "workflow",
                        "chatlog?include_subagents=true",
                        "info",
                    ];
                    for view in views.into_iter().filter(|v| has_workflow || *v != "workflow") {
                        client
                            .timed(
                                "read",
                                client.http.get(format!("{}/api/graph/{id}/{view}", client.url)),
                            )
                            .await;
                    }
                }
                // Keep a few uploads per client; delete the oldest beyond that.
                if mine.len() > 3 {
                    let id = mine.remove(0);
                    client
                        .timed(
                            "delete",
                            client.http.delete(format!("{}/api/session/{id}", client.url)),
                        )
                        .await;
                }
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    sampler.await?;

    let tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    println!("soak: {} s, {} clients, {}", args.seconds, args.clients, args.url);
    let mut total = 0;
    for (op, lat) in &tally.latencies_us {
        let mut sorted = lat.clone();
        sorted.sort_unstable();
        total += sorted.len();
        println!(
            "{op:<8} {:>7} requests  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            sorted.len(),
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.99),
            percentile(&sorted, 1.0)
        );
    }
    let errors: u64 = tally.errors.values().sum();
    println!("requests {total}, errors {errors}");
    for (e, n) in &tally.errors {
        println!("  {n} x {e}");
    }
    let memory = memory.lock().unwrap_or_else(|e| e.into_inner());
    if let (Some(first), Some(last)) = (memory.first(), memory.last()) {
        let max = memory.iter().map(|m| m.1).fold(0.0, f64::max);
        // Growth over the second half of the run: flat once the cache is full.
        let half = memory.iter().find(|m| m.0 >= last.0 / 2.0).unwrap_or(first);
        println!(
            "server RSS: start {:.1} MiB, max {max:.1} MiB, end {:.1} MiB, second half {:+.1} MiB",
            first.1,
            last.1,
            last.1 - half.1
        );
        let series: Vec<String> = memory.iter().map(|(t, m)| format!("{t:.0}s:{m:.0}")).collect();
        println!("  samples (MiB): {}", series.join(" "));
    }
    if errors > 0 {
        std::process::exit(1);
    }
    Ok(())
}
