//! Load client for a burst of view requests: N requests at once against a running server,
//! while `/healthz` is probed every 10 ms, then a report of statuses, total time, `/healthz`
//! latency percentiles and the server's peak memory (VmHWM).
//!
//! Modes:
//! - `steps`: N workflow requests, each with a distinct `?step=` spread over the session;
//! - `gzip`, `br`, `identity`: N requests of the whole workflow with that
//!   `Accept-Encoding` (the body is read and counted, not decoded).
//!
//! ```sh
//! cargo run --release --example step_storm -- --url http://127.0.0.1:18090 --pid <server pid> \
//!     --id ab51623b-c26d-45f5-b98e-f9d0cfa17018 --mode steps --requests 1000
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use reqwest::header::{HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, RETRY_AFTER};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Distinct `?step=` values.
    Steps,
    /// The whole workflow, `Accept-Encoding: gzip`.
    Gzip,
    /// The whole workflow, `Accept-Encoding: br`.
    Br,
    /// The whole workflow, no `Accept-Encoding`.
    Identity,
}

#[derive(Parser)]
struct Args {
    /// The server, e.g. http://127.0.0.1:18090 (loopback only).
    #[arg(long)]
    url: String,
    /// The server's process id, to read its peak resident memory.
    #[arg(long)]
    pid: Option<u32>,
    /// The session to request.
    #[arg(long)]
    id: String,
    /// What to request.
    #[arg(long, value_enum, default_value = "steps")]
    mode: Mode,
    /// Requests sent at once.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// A request taking longer than this counts as an error.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
    /// `Accept-Encoding` of the `steps` requests (the other modes set their own).
    #[arg(long)]
    accept_encoding: Option<String>,
}

/// What one request got.
struct Outcome {
    status: String,
    bytes: usize,
    encoding: Option<String>,
    /// For a 503: it carried `Retry-After` and a JSON error body.
    well_formed_refusal: bool,
}

/// A number of `/proc/<pid>/status` (`VmHWM:` in kB, `Threads:`).
fn status_field(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A memory figure of `pid` (`VmHWM:`, `VmRSS:`) in MiB.
fn memory_mib(pid: u32, field: &str) -> Option<f64> {
    status_field(pid, field).map(|kb| kb / 1024.0)
}

/// User plus system CPU time of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Sends one request and reads its body whole.
async fn one(http: reqwest::Client, url: String, accept: Option<String>) -> Outcome {
    let mut request = http.get(url);
    if let Some(accept) = accept.and_then(|a| HeaderValue::from_str(&a).ok()) {
        request = request.header(ACCEPT_ENCODING, accept);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                status: format!("error: {e}"),
                bytes: 0,
                encoding: None,
                well_formed_refusal: false,
            }
        }
    };
    let status = response.status();
    let encoding = response
        .headers()
        .get(CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let retry_after = response.headers().contains_key(RETRY_AFTER);
    // Bodies are counted as they arrive; only a refusal's (small) body is kept.
    let mut response = response;
    let (mut bytes, mut kept) = (0, Vec::new());
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                bytes += chunk.len();
                if status.as_u16() == 503 && kept.len() < 64 * 1024 {
                    kept.extend_from_slice(&chunk);
                }
            }
            Ok(None) => break,
            Err(e) => {
                return Outcome {
                    status: format!("body error: {e}"),
                    bytes,
                    encoding,
                    well_formed_refusal: false,
                }
            }
        }
    }
    let kept = decoded(encoding.as_deref(), kept);
    let json_error = serde_json::from_slice::<serde_json::Value>(&kept)
        .is_ok_and(|v| v["error"] == "Service Unavailable" && v["message"].is_string());
    Outcome {
        status: status.as_u16().to_string(),
        bytes,
        encoding,
        well_formed_refusal: status.as_u16() == 503 && retry_after && json_error,
    }
}

/// A refusal's body as the server meant it: small error bodies are compressed too when the
/// request accepts it.
fn decoded(encoding: Option<&str>, bytes: Vec<u8>) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = match encoding {
        Some("gzip") => flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut out),
        Some("br") => brotli::Decompressor::new(&bytes[..], 4096).read_to_end(&mut out),
        _ => return bytes,
    };
    if read.is_ok() {
        out
    } else {
        bytes
    }
}

/// Probes `/healthz` every 10 ms until `done`, on a thread and runtime of its own (so that
/// the load's tasks do not delay it); returns the latencies in ms and the failures.
fn spawn_health_probe(url: String, done: Arc<AtomicBool>) -> std::thread::JoinHandle<(Vec<f64>, usize)> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(probe_health(url, done))
    })
}

async fn probe_health(url: String, done: Arc<AtomicBool>) -> (Vec<f64>, usize) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("a client");
    let mut latencies = Vec::new();
    let mut failures = 0;
    while !done.load(Ordering::Relaxed) {
        let started = Instant::now();
        match http.get(format!("{url}/healthz")).send().await {
            Ok(r) if r.status().is_success() => {
                let _ = r.bytes().await;
                latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            _ => failures += 1,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (latencies, failures)
}

/// The number of workflow steps of the session.
async fn total_steps(http: &reqwest::Client, url: &str, id: &str) -> anyhow::Result<u64> {
    let info: serde_json::Value = http
        .get(format!("{url}/api/graph/{id}/info"))
        .send()
        .await?
        .json()
        .await?;
    info["message_count"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no message_count in {info}"))
}

/// The URL and `Accept-Encoding` of request `i` of the burst.
fn request_for(args: &Args, steps: u64, i: usize) -> (String, Option<String>) {
    let workflow = format!("{}/api/graph/{}/workflow", args.url, args.id);
    match args.mode {
        Mode::Steps => {
            // Spread over the session, distinct even when there are more requests than steps.
            let n = args.requests as u64;
            let step = if n <= steps {
                i as u64 * steps / n
            } else {
                i as u64
            };
            (format!("{workflow}?step={step}"), args.accept_encoding.clone())
        }
        Mode::Gzip => (workflow, Some("gzip".into())),
        Mode::Br => (workflow, Some("br".into())),
        Mode::Identity => (workflow, None),
    }
}

/// The server's figures during the burst: peak memory, threads, CPU time.
struct ServerWatch {
    pid: u32,
    hwm_before: f64,
    cpu_before: f64,
    threads: Arc<std::sync::atomic::AtomicUsize>,
    sampler: std::thread::JoinHandle<()>,
}

impl ServerWatch {
    /// Starts sampling `pid`'s thread count until `done`.
    fn start(pid: u32, done: Arc<AtomicBool>) -> ServerWatch {
        let threads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = threads.clone();
        let sampler = std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(n) = status_field(pid, "Threads:") {
                    seen.fetch_max(n as usize, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        ServerWatch {
            pid,
            hwm_before: memory_mib(pid, "VmHWM:").unwrap_or(0.0),
            cpu_before: cpu_seconds(pid).unwrap_or(0.0),
            threads,
            sampler,
        }
    }

    fn report(self) {
        let _ = self.sampler.join();
        println!(
            "server VmHWM: before {:.0} MiB, after {:.0} MiB; VmRSS now {:.0} MiB; at most {} threads; CPU {:.1} s",
            self.hwm_before,
            memory_mib(self.pid, "VmHWM:").unwrap_or(0.0),
            memory_mib(self.pid, "VmRSS:").unwrap_or(0.0),
            self.threads.load(Ordering::Relaxed),
            cpu_seconds(self.pid).unwrap_or(0.0) - self.cpu_before,
        );
    }
}

/// Prints the outcomes by status and coding.
fn report_outcomes(outcomes: &[Outcome]) {
    let mut by_status: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut encodings: BTreeMap<String, usize> = BTreeMap::new();
    let mut malformed_refusals = 0;
    for o in outcomes {
        let entry = by_status.entry(o.status.clone()).or_default();
        entry.0 += 1;
        entry.1 += o.bytes;
        *encodings
            .entry(o.encoding.clone().unwrap_or_else(|| "identity".into()))
            .or_default() += 1;
        if o.status == "503" && !o.well_formed_refusal {
            malformed_refusals += 1;
        }
    }
    for (status, (n, bytes)) in &by_status {
        println!("  {status}: {n} (bodies {:.1} MiB)", *bytes as f64 / 1048576.0);
    }
    println!("  content encodings: {encodings:?}");
    println!("  503 without Retry-After or JSON body: {malformed_refusals}");
}

/// Prints the `/healthz` latencies.
fn report_health(mut health: Vec<f64>, failures: usize) {
    health.sort_by(f64::total_cmp);
    println!(
        "/healthz: {} probes, {} failed, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        health.len(),
        failures,
        percentile(&health, 0.5),
        percentile(&health, 0.99),
        percentile(&health, 1.0)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.url.starts_with("http://127.0.0.1") || args.url.starts_with("http://localhost"),
        "the storm runs against loopback only"
    );
    anyhow::ensure!(args.requests <= 10_000, "at most 10,000 requests");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout_secs))
        .pool_max_idle_per_host(0)
        .build()?;
    let steps = total_steps(&http, &args.url, &args.id).await?.max(1);
    let done = Arc::new(AtomicBool::new(false));
    let watch = args.pid.map(|pid| ServerWatch::start(pid, done.clone()));
    let probe = spawn_health_probe(args.url.clone(), done.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let tasks: Vec<_> = (0..args.requests)
        .map(|i| {
            let (url, accept) = request_for(&args, steps, i);
            tokio::spawn(one(http.clone(), url, accept))
        })
        .collect();
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await?);
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    done.store(true, Ordering::Relaxed);
    let (health, health_failures) = probe
        .join()
        .map_err(|_| anyhow::anyhow!("the /healthz probe panicked"))?;

    println!(
        "{:?}: {} requests at once, {} steps in the session, {}",
        args.mode, args.requests, steps, args.url
    );
    println!("total time {:.2} s", elapsed.as_secs_f64());
    report_outcomes(&outcomes);
    report_health(health, health_failures);
    if let Some(watch) = watch {
        watch.report();
    }
    Ok(())
}
