//! Benchmark of search: an index of a million units or more, queries with filters (in
//! process and over HTTP), and the upload of a ~300 MB session with and without indexing.
//!
//! ```sh
//! cargo run --release --example search_bench -- [--units 1000000] [--queries 2000] \
//!     [--upload-copies 110] [--upload-runs 3] [--dir /tmp/search-bench] [--skip-upload]
//! ```
//!
//! The index: the units of the bundled fixtures (the CommuGraph sample with its sub-agents,
//! the pi sessions, the AutoGen logs, the synthetic Claude Code sessions), parsed once,
//! then written as copies (each copy a session of its own, its times shifted a day) until
//! `--units`; committed every 200,000 units, as the indexer commits. Every word of a copy
//! is in every other copy: the posting lists are as long as they get for that many units.
//!
//! The queries: `--queries` of them, drawn with a fixed seed: one to three words of the
//! fixtures' texts (frequent, middling and rare ones, phrases), or none, each with one to
//! three filters (unit type, framework, tool, failed call, delegation, time range,
//! sessions, actor, a label filter of 10,000 units kept or left out); the first page of 20
//! with snippets. The latencies of each run (in process; over HTTP, one request at a time
//! against a server opened on the same index) and of listing every match of some queries.
//!
//! The upload: the sample scaled `--upload-copies` times (110: 300 MB), uploaded to a
//! fresh server with search on, then to one with search off, `--upload-runs` times each:
//! the upload's answer time, and with search on the time until its units are searchable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use sessiongraph::core::pipeline::session::Branch;
use sessiongraph::core::views::annotations::annotations;
use sessiongraph::core::{LoadOptions, Session, SessionInput};
use sessiongraph::search::document::UnitDoc;
use sessiongraph::search::index::SearchIndex;
use sessiongraph::search::{LabelFilter, SearchConfig, SearchQuery};
use sessiongraph::store::{disk, StoreConfig};
use sessiongraph::{ApiConfig, AppSettings, AppState};

#[path = "../tests/support/scaled.rs"]
mod scaled;

/// mimalloc, as in the server binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Units to index (at least).
    #[arg(long, default_value_t = 1_000_000)]
    units: usize,
    /// Queries to time.
    #[arg(long, default_value_t = 2000)]
    queries: usize,
    /// Copies of the sample in the uploaded session (110: about 300 MB).
    #[arg(long, default_value_t = 110)]
    upload_copies: usize,
    /// Uploads timed with search on, and as many with it off.
    #[arg(long, default_value_t = 3)]
    upload_runs: usize,
    /// Where the index is written (`<dir>/search-index`; default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Skip the upload measurement.
    #[arg(long)]
    skip_upload: bool,
}

/// One fixture session: its framework, its parsed form.
struct Fixture {
    name: String,
    framework: &'static str,
    session: Session,
}

fn fixture_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// The fixtures the index copies.
fn fixtures() -> anyhow::Result<Vec<Fixture>> {
    let mut out = Vec::new();
    let mut add = |name: &str, framework: &'static str, paths: Vec<PathBuf>| -> anyhow::Result<()> {
        let input = disk::read_session(&paths)?;
        let session = Session::build(&input, LoadOptions::default())?;
        out.push(Fixture {
            name: name.to_owned(),
            framework,
            session,
        });
        Ok(())
    };
    add("sample", "claudecode", vec![fixture_path("commugraph-sample")])?;
    for rel in [
        "synthetic/tool_failures",
        "synthetic/subagents",
        "synthetic/edge_cases",
    ] {
        add(rel, "claudecode", vec![fixture_path(rel)])?;
    }
    for rel in ["pi/large-session.jsonl", "pi/before-compaction.jsonl"] {
        add(rel, "pi", vec![fixture_path(rel)])?;
    }
    for rel in [
        "autogen/agentchat/swarm_handoffs.json",
        "autogen/agentchat/tool_error_parallel.json",
        "autogen/ag2/groupchat_messages.json",
        "autogen/ag2/tools_chat_result.json",
    ] {
        add(rel, "autogen", vec![fixture_path(rel)])?;
    }
    Ok(out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// What the index was made of: every copy's session id and unit keys (for label filters).
struct Built {
    sessions: Vec<String>,
    keys: Vec<(String, String)>,
    units: usize,
}

/// Writes copies of the fixtures' units into the index at `dir` until `units`.
fn build_index(dir: &Path, fixtures: &[Fixture], units: usize) -> anyhow::Result<Built> {
    let index = SearchIndex::open(Some(dir), 256 << 20);
    let bodies: Vec<_> = fixtures
        .iter()
        .map(|f| annotations(&f.session, true, Branch::All))
        .collect();
    let started = Instant::now();
    let mut built = Built {
        sessions: Vec::new(),
        keys: Vec::new(),
        units: 0,
    };
    let mut writer = index.writer();
    let (mut copy, mut since_commit) = (0u64, 0usize);
    while built.units < units {
        for (fixture, body) in fixtures.iter().zip(&bodies) {
            let session_id = format!("{}-{copy:05}", fixture.name.replace('/', "-"));
            for (seq, unit) in body.annotations.iter().enumerate() {
                let mut doc = UnitDoc::of(&session_id, fixture.framework, seq as u64, unit);
                doc.time_ms = doc.time_ms.map(|t| t + copy as i64 * 86_400_000);
                writer.add_document(index.fields.unit_document(&doc))?;
                if built.keys.len() < 200_000 {
                    built.keys.push((session_id.clone(), doc.event_id.to_owned()));
                }
            }
            built.units += body.annotations.len();
            since_commit += body.annotations.len();
            built.sessions.push(session_id);
        }
        copy += 1;
        if since_commit >= 200_000 {
            writer.commit()?;
            since_commit = 0;
        }
    }
    writer.commit()?;
    drop(writer);
    let elapsed = started.elapsed();
    index.reload()?;
    let searcher = index.searcher();
    println!(
        "indexed {} units ({} sessions) in {:.1} s: {:.0} units/s; {} segments, {:.0} MiB on disk",
        built.units,
        built.sessions.len(),
        elapsed.as_secs_f64(),
        built.units as f64 / elapsed.as_secs_f64(),
        searcher.segment_readers().len(),
        dir_bytes(&dir.join("search-index")) as f64 / (1 << 20) as f64
    );
    Ok(built)
}

/// A fixed-seed generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }
}

/// The fixtures' words by falling frequency, and their adjacent pairs (phrases).
fn vocabulary(fixtures: &[Fixture]) -> (Vec<String>, Vec<String>) {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut phrases = Vec::new();
    for f in fixtures {
        for unit in annotations(&f.session, true, Branch::All).annotations {
            let text = unit.text().to_lowercase();
            let words: Vec<&str> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() > 2 && w.len() < 20)
                .collect();
            for w in &words {
                *counts.entry((*w).to_owned()).or_default() += 1;
            }
            if let [a, b, ..] = words[..] {
                phrases.push(format!("\"{a} {b}\""));
            }
        }
    }
    let mut words: Vec<(String, usize)> = counts.into_iter().collect();
    words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    (words.into_iter().map(|(w, _)| w).collect(), phrases)
}

/// The text of query `i`: a frequent word, two middling ones, a rare one, a phrase or none.
fn query_text(rng: &mut Rng, words: &[String], phrases: &[String]) -> Option<String> {
    let band = |rng: &mut Rng, from: usize, to: usize| {
        words[(from + rng.below(to - from)).min(words.len() - 1)].clone()
    };
    match rng.below(6) {
        0 => Some(band(rng, 0, 50)),
        1 => Some(format!("{} {}", band(rng, 50, 1000), band(rng, 50, 1000))),
        2 => Some(band(rng, 1000, words.len())),
        3 => Some(rng.pick(phrases).clone()),
        4 => Some(format!("{} OR {}", band(rng, 0, 300), band(rng, 300, 3000))),
        _ => None,
    }
}

/// Adds one filter to `q`.
fn add_filter(q: &mut SearchQuery, rng: &mut Rng, built: &Built, day_ms: i64) {
    const TOOLS: [&str; 5] = ["Bash", "Read", "Write", "Edit", "Task"];
    match rng.below(10) {
        0 => q.unit_types = vec![["user_turn", "assistant_turn", "system_turn"][rng.below(3)].into()],
        1 => q.frameworks = vec![["claudecode", "pi", "autogen", "codex", "gemini"][rng.below(5)].into()],
        2 => q.tools = vec![rng.pick(&TOOLS).to_string()],
        3 => q.failed = Some(rng.below(2) == 0),
        4 => q.delegation = Some(true),
        5 => {
            let from = 1_735_689_600_000 + rng.below(3000) as i64 * day_ms;
            q.from_ms = Some(from);
            q.to_ms = Some(from + (1 + rng.below(300)) as i64 * day_ms);
        }
        6 => q.sessions = (0..3).map(|_| rng.pick(&built.sessions).clone()).collect(),
        7 => q.actors = vec![["human", "assistant", "agent"][rng.below(3)].into()],
        _ => {
            let start = rng.below(built.keys.len().saturating_sub(10_000));
            q.labels = Some(LabelFilter {
                units: built.keys[start..(start + 10_000).min(built.keys.len())].to_vec(),
                keep: rng.below(2) == 0,
            });
        }
    }
}

/// The queries timed: fixed seed, text and one to three filters each.
fn queries(n: usize, fixtures: &[Fixture], built: &Built) -> Vec<SearchQuery> {
    let (words, phrases) = vocabulary(fixtures);
    let mut rng = Rng(0x5EA2C4);
    (0..n)
        .map(|_| {
            let mut q = SearchQuery {
                text: query_text(&mut rng, &words, &phrases),
                ..SearchQuery::default()
            };
            for _ in 0..1 + rng.below(3) {
                add_filter(&mut q, &mut rng, built, 86_400_000);
            }
            q
        })
        .collect()
}

/// p50, p90, p99 and the maximum of `times`, in ms.
fn percentiles(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |p: f64| ms(times[((times.len() as f64 * p).ceil() as usize).clamp(1, times.len()) - 1]);
    println!(
        "{label}: {} queries, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        times.len(),
        at(0.50),
        at(0.90),
        at(0.99),
        ms(*times.last().unwrap_or(&Duration::ZERO))
    );
}

/// The queries in process: a page of 20 with snippets each, then every match of some.
fn time_in_process(dir: &Path, queries: &[SearchQuery]) -> anyhow::Result<()> {
    let index = SearchIndex::open(Some(dir), 15_000_000);
    for q in queries.iter().take(100) {
        index.search(q, 0, 20)?;
    }
    let (mut times, mut labeled, mut other) = (Vec::new(), Vec::new(), Vec::new());
    let mut matched = 0usize;
    for q in queries {
        let t = Instant::now();
        matched += index.search(q, 0, 20)?.total;
        let took = t.elapsed();
        times.push(took);
        if q.labels.is_some() {
            labeled.push(took);
        } else {
            other.push(took);
        }
    }
    let mut slowest: Vec<(Duration, usize)> = times.iter().copied().zip(0..).collect();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
    percentiles("in process, first page of 20 with snippets", times);
    percentiles("  of which with a label filter of 10,000 units", labeled);
    percentiles("  of which without", other);
    println!(
        "  ({:.0} matches per query on average)",
        matched as f64 / queries.len() as f64
    );
    for (took, i) in slowest.iter().take(5) {
        println!("  slow: {:.1} ms, {}", ms(*took), describe(&queries[*i]));
    }
    let mut all = Vec::new();
    let mut listed = 0;
    for q in queries.iter().step_by((queries.len() / 100).max(1)) {
        let t = Instant::now();
        listed += index.matching_units(q)?.len();
        all.push(t.elapsed());
    }
    let n = all.len();
    percentiles("in process, every matching unit key", all);
    println!("  ({:.0} keys per query on average)", listed as f64 / n as f64);
    Ok(())
}

/// What `q` asks, in a line (a label filter by its size).
fn describe(q: &SearchQuery) -> String {
    let mut parts = vec![format!("q={:?}", q.text.as_deref().unwrap_or(""))];
    if let Some(labels) = &q.labels {
        parts.push(format!("labels({}, keep={})", labels.units.len(), labels.keep));
    }
    let lists = [
        ("framework", &q.frameworks),
        ("session", &q.sessions),
        ("unit_type", &q.unit_types),
        ("actor", &q.actors),
        ("tool", &q.tools),
    ];
    for (key, values) in lists.iter().filter(|(_, v)| !v.is_empty()) {
        parts.push(format!("{key}={values:?}"));
    }
    for (key, value) in [("failed", q.failed), ("delegation", q.delegation)] {
        if let Some(v) = value {
            parts.push(format!("{key}={v}"));
        }
    }
    if q.from_ms.is_some() {
        parts.push("time range".into());
    }
    parts.join(" ")
}

/// The URL query string of `q` (label filters have no HTTP form: they come from the label
/// store; those queries are left out).
fn url_query(q: &SearchQuery) -> Option<String> {
    if q.labels.is_some() {
        return None;
    }
    let iso = |ms: i64| sessiongraph::core::json::time::iso_millis(ms);
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(t) = &q.text {
        pairs.push(("q".into(), t.clone()));
    }
    let lists = [
        ("framework", &q.frameworks),
        ("session", &q.sessions),
        ("unit_type", &q.unit_types),
        ("actor", &q.actors),
        ("tool", &q.tools),
    ];
    for (key, values) in lists {
        pairs.extend(values.iter().map(|v| (key.to_owned(), v.clone())));
    }
    for (key, value) in [("failed", q.failed), ("delegation", q.delegation)] {
        if let Some(v) = value {
            pairs.push((key.into(), v.to_string()));
        }
    }
    for (key, value) in [("from", q.from_ms), ("to", q.to_ms)] {
        if let Some(v) = value {
            pairs.push((key.into(), iso(v)));
        }
    }
    serde_urlencoded::to_string(&pairs).ok()
}

/// A server on 127.0.0.1:0 over `data_dir`; its URL and its stopper.
async fn serve(data_dir: &Path, search: bool) -> anyhow::Result<(String, Server)> {
    let state = AppState::build(AppSettings {
        store: StoreConfig {
            data_dir: Some(data_dir.to_owned()),
            cache_bytes: 8 << 30,
            ..StoreConfig::default()
        },
        api: ApiConfig {
            max_upload_bytes: 2 << 30,
            request_timeout: Duration::from_secs(3600),
            ..ApiConfig::default()
        },
        codebooks: sessiongraph::labels::Codebooks::built_in()?,
        database_url: sessiongraph::labels::store::default_url(data_dir)?,
        upload_store: Default::default(),
        s3: Default::default(),
        label_policy: Default::default(),
        search: SearchConfig {
            enabled: search,
            ..SearchConfig::default()
        },
    })
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(sessiongraph::run(listener, state, async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    loop {
        let ready = client.get(format!("{url}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok((url, Server { stop, task }))
}

/// A server started by [`serve`].
struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.task.await??;
        Ok(())
    }
}

/// The queries over HTTP, one at a time, against a server over the index in `dir`.
async fn time_over_http(dir: &Path, queries: &[SearchQuery]) -> anyhow::Result<()> {
    let (url, server) = serve(dir, true).await?;
    let client = reqwest::Client::new();
    let paths: Vec<String> = queries.iter().filter_map(url_query).collect();
    for path in paths.iter().take(100) {
        client
            .get(format!("{url}/api/search?{path}"))
            .send()
            .await?
            .bytes()
            .await?;
    }
    let mut times = Vec::with_capacity(paths.len());
    for path in &paths {
        let t = Instant::now();
        let response = client.get(format!("{url}/api/search?{path}")).send().await?;
        anyhow::ensure!(response.status().is_success(), "{path}: {}", response.status());
        response.bytes().await?;
        times.push(t.elapsed());
    }
    percentiles("over HTTP, first page of 20 (label filters left out)", times);
    server.stop().await
}

/// A file of an upload: its name and bytes.
type Part = (String, Vec<u8>);

/// The sample scaled `copies` times, as multipart parts.
fn upload_parts(copies: usize) -> anyhow::Result<(Vec<Part>, usize)> {
    let sample = disk::read_session(&[fixture_path("commugraph-sample")])?;
    let big: SessionInput = scaled::scaled(&sample, copies, false);
    let bytes = big.total_bytes();
    let parts = big
        .files
        .into_iter()
        .map(|f| (f.name.clone(), f.bytes.to_vec()))
        .collect();
    Ok((parts, bytes))
}

/// One upload of `parts` to a fresh server (search on or off): the answer's time, and with
/// search on the time from the upload's start until its units are all searchable.
async fn one_upload(parts: &[Part], search: bool) -> anyhow::Result<(Duration, Option<Duration>)> {
    let data = tempfile::tempdir()?;
    let (url, server) = serve(data.path(), search).await?;
    let client = reqwest::Client::new();
    let mut form = reqwest::multipart::Form::new().text("framework", "claudecode");
    for (name, bytes) in parts {
        form = form.part(
            "file",
            reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone()),
        );
    }
    let started = Instant::now();
    let response = client
        .post(format!("{url}/api/upload"))
        .multipart(form)
        .send()
        .await?;
    anyhow::ensure!(response.status().is_success(), "upload: {}", response.status());
    let answered = started.elapsed();
    let body: serde_json::Value = response.json().await?;
    let id = body["graph_id"].as_str().unwrap_or_default().to_owned();
    let searchable = match search {
        true => Some(until_searchable(&client, &url, &id, started).await?),
        false => None,
    };
    server.stop().await?;
    Ok((answered, searchable))
}

/// The time from `started` until the units of session `id` are searchable.
async fn until_searchable(
    client: &reqwest::Client,
    url: &str,
    id: &str,
    started: Instant,
) -> anyhow::Result<Duration> {
    loop {
        let page: serde_json::Value = client
            .get(format!("{url}/api/search?session={id}&limit=1"))
            .send()
            .await?
            .json()
            .await?;
        if page["index"]["pending"] == false && page["total"].as_u64().unwrap_or(0) > 0 {
            println!("  {} units searchable", page["total"]);
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The upload of a scaled sample, with search on then off, `runs` times each.
async fn time_uploads(copies: usize, runs: usize) -> anyhow::Result<()> {
    let (parts, bytes) = upload_parts(copies)?;
    println!(
        "upload: {:.0} MiB in {} files",
        bytes as f64 / (1 << 20) as f64,
        parts.len()
    );
    let (mut on, mut off, mut ready) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        // Alternately first: neither mode gets the warmer machine every time.
        let first_off = run % 2 == 1;
        if first_off {
            off.push(one_upload(&parts, false).await?.0);
        }
        let (answered, searchable) = one_upload(&parts, true).await?;
        on.push(answered);
        ready.extend(searchable);
        if !first_off {
            off.push(one_upload(&parts, false).await?.0);
        }
        println!(
            "  run {run}: answered in {:.0} ms with search on, {:.0} ms off; searchable after {:.0} ms",
            ms(answered),
            ms(off[run]),
            searchable.map_or(f64::NAN, ms)
        );
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v.get(v.len() / 2).copied().map_or(f64::NAN, ms)
    };
    let (on, off) = (median(on), median(off));
    println!(
        "upload answered (median of {runs}): {on:.0} ms with search on, {off:.0} ms off ({:+.1}%); searchable after {:.0} ms",
        (on / off - 1.0) * 100.0,
        median(ready)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let temp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    let fixtures = fixtures()?;
    let units: usize = fixtures
        .iter()
        .map(|f| annotations(&f.session, true, Branch::All).annotations.len())
        .sum();
    println!("{} fixtures, {units} units per copy", fixtures.len());
    let (built, fixtures) = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || (build_index(&dir, &fixtures, args.units), fixtures)).await?
    };
    let built = built?;
    let queries = queries(args.queries, &fixtures, &built);
    let in_process = {
        let (dir, queries) = (dir.clone(), queries.clone());
        tokio::task::spawn_blocking(move || time_in_process(&dir, &queries))
    };
    in_process.await??;
    time_over_http(&dir, &queries).await?;
    if !args.skip_upload {
        time_uploads(args.upload_copies, args.upload_runs).await?;
    }
    Ok(())
}
