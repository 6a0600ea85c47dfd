//! A labeling team's day against sessiongraph replicas behind a load balancer, and a check
//! of every replica afterwards. Not a test: `cluster/run.sh` starts a cluster (PostgreSQL,
//! replicas, nginx), runs this against it with faults injected, and cleans up.
//!
//! `run` replays, through the load balancer (`--url`), for `--duration` seconds:
//!
//! - uploaders (`--uploaders`) posting the bundled fixtures (Claude Code with its
//!   sub-agents, pi, Codex with its spawned threads, Gemini CLI with its sub-agent chats,
//!   AutoGen), raw or multipart as the frontend sends them, each a distinct upload: its main
//!   file gets 32 bytes of JSON whitespace encoding a variant number, so that ids differ
//!   and the views do not. Now and then one sends an earlier variant again (the same id
//!   must come back) or uploads a scratch copy and deletes it;
//! - viewers (`--viewers`) reading every view of uploaded sessions (info, annotations,
//!   dialog, workflow, chat log, graph, metrics, diagnostics, branches, context, export,
//!   labels), the session list, searches, progress, agreement, rounds and the label
//!   exports;
//! - a lead (the reviewer `lead`) creating rounds (`--overlap`, 2 by default) over the
//!   sessions uploaded so far, alternately under the `delegation` and `speechact`
//!   codebooks, and a new one when the team has finished the last;
//! - `--annotators` (32) annotators, each with their named API key, taking units from the
//!   round's queue, reading the session's units, thinking (`--think-ms`) and submitting
//!   labels as the labeling page does (`If-None-Match: *` on a first write; one unit in
//!   ten saved as a draft first, then submitted with `If-Match`);
//! - `--session-annotators` (4) more doing the same through the session queue ("Next unit
//!   for me" in a session), in the current round's sessions and under its codebook, so
//!   that a unit may be asked for through its round and its session at once.
//!
//! After each acknowledged upload and deletion, and after one label write in five, the
//! client reads what it wrote back through the load balancer (most often from another
//! replica than the one that took the write): an upload is served at once, a deleted one
//! answers 404 at once, a set reads back with its status and version.
//!
//! Requests carry `Authorization: Bearer` with the keys of `--keys` (the server's
//! `--api-key-file`: `lead:KEY` and `annNN:KEY` named keys, one plain key for the
//! uploading service). A client that gets a 503 waits for its `Retry-After` and sends the
//! request again; a 500, 502 or 504 or a failed connection is recorded and retried after a
//! second; a request is given up after two minutes. The one request sent only once is the
//! creation of a round (a new round each time): after a failure the lead looks for its
//! round by name before creating it again. A 412 to a label write whose current set is the
//! write itself (a replay of a write whose answer was lost) counts as acknowledged.
//!
//! The results file (`--out`, JSON) holds every acknowledged upload (fixture, variant, the
//! SHA-256 of each file sent, the id computed here and the id returned), every deletion,
//! round and unit handed out, every acknowledged label write (annotator, unit, status,
//! labels, version), and every response: its route template, status, `Retry-After`
//! presence, whether an error had the JSON error body, latency and time.
//!
//! `verify` reads one or more results files and asks every replica directly
//! (`--replica`, repeatable): every acknowledged upload listed and served, its main file
//! byte for byte as sent (`/export`), each view the same on every replica, and the
//! views that show no labels the same as parsed here from the bytes sent, every unit in
//! each replica's search index; deleted uploads gone everywhere; every acknowledged label
//! set present with its status, labels and version; no unit handed out to more annotators
//! than the overlap through whichever queues, nor holding more submitted sets; the rounds,
//! their exports, agreement and progress the same on every replica; no 500, no 502 or 504, every 503 with `Retry-After`, every error
//! with the JSON body, nothing given up. With `--faults` (lines `{"event", "at_ms"}`) the
//! errors are counted inside and outside each fault's window. It prints p50 and p99
//! latency per route for each phase, and writes a markdown table comparing the phases
//! (`--markdown`) and the whole report (`--out`). Exit status 1 when a check failed.
//!
//! ```sh
//! cluster/run.sh                                # starts a cluster, runs both, cleans up
//! cargo run --release --example cluster_day -- run --url http://127.0.0.1:8080 \
//!     --keys keys.txt --duration 240 --phase day --out day.json
//! cargo run --release --example cluster_day -- verify --keys keys.txt \
//!     --replica http://127.0.0.1:8081 --replica http://127.0.0.1:8082 day.json
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sessiongraph::core::pipeline::session::Branch;
use sessiongraph::core::views::graph::GraphMode;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionInput, SourceFile};
use sessiongraph::store::registry::upload_id;
use sessiongraph::store::Framework;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

#[derive(Debug, Parser)]
#[command(about = "A labeling team's day against sessiongraph replicas, and a check of every replica")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a team's day through the load balancer and write the results.
    Run(RunArgs),
    /// Check every replica against results files, and report latency per route.
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The load balancer.
    #[arg(long)]
    url: String,
    /// The server's key file: `NAME:KEY` named keys (`lead`, the annotators) and one plain key.
    #[arg(long)]
    keys: PathBuf,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 240)]
    duration: u64,
    /// The phase's name, kept in the results.
    #[arg(long, default_value = "day")]
    phase: String,
    /// Seed of every choice (variants, sessions visited, labels): each phase its own.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Annotators labeling through the rounds' queue (the first N named keys but `lead`,
    /// by name).
    #[arg(long, default_value_t = 32)]
    annotators: usize,
    /// Annotators labeling through the session queue, in the current round's sessions
    /// under its codebook (the next N named keys).
    #[arg(long, default_value_t = 4)]
    session_annotators: usize,
    /// Annotators per unit in the rounds created.
    #[arg(long, default_value_t = 2)]
    overlap: usize,
    /// Concurrent uploaders.
    #[arg(long, default_value_t = 2)]
    uploaders: usize,
    /// Concurrent viewers.
    #[arg(long, default_value_t = 4)]
    viewers: usize,
    /// Mean pause between two uploads of one uploader, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    upload_every_ms: u64,
    /// Mean time an annotator takes over a unit, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    think_ms: u64,
    /// Units drawn per round (stratified by session).
    #[arg(long, default_value_t = 300)]
    round_size: usize,
    /// The fixtures directory (default: the checkout's).
    #[arg(long)]
    fixtures: Option<PathBuf>,
    /// Where to write the results (JSON).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct VerifyArgs {
    /// A replica, asked directly (repeatable).
    #[arg(long = "replica", required = true)]
    replicas: Vec<String>,
    /// The server's key file (the reviewer's key reads every set).
    #[arg(long)]
    keys: PathBuf,
    /// Fault events, one JSON object a line: `{"event", "at_ms"}`.
    #[arg(long)]
    faults: Option<PathBuf>,
    /// Where to write the whole report (JSON).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where to write the latency table (markdown).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// The fixtures directory (default: the checkout's).
    #[arg(long)]
    fixtures: Option<PathBuf>,
    /// Results files of `run`.
    #[arg(required = true)]
    results: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cli.command {
        Command::Run(args) => runtime.block_on(run(args)),
        Command::Verify(args) => {
            let passed = runtime.block_on(verify(args))?;
            if !passed {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

// --- Shared pieces ---------------------------------------------------------------------

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A small deterministic generator (SplitMix64): every choice of a run follows its seed.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.next();
        rng
    }

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

    /// `mean` scaled by a factor from 0.5 to 1.5.
    fn around(&mut self, mean: u64) -> Duration {
        Duration::from_millis(mean / 2 + self.next() % mean.max(1))
    }
}

/// The keys of the server's key file.
#[derive(Debug, Clone)]
struct Keys {
    /// The plain key: the uploading service.
    service: String,
    /// The reviewer's named key.
    lead: String,
    /// The other named keys, by name.
    annotators: Vec<(String, String)>,
}

fn read_keys(path: &Path) -> anyhow::Result<Keys> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (mut service, mut lead, mut annotators) = (None, None, Vec::new());
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let named = line.split_once(':').filter(|(name, key)| {
            !name.is_empty()
                && name.len() <= 100
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c))
                && !key.trim().is_empty()
        });
        match named {
            Some(("lead", key)) => lead = Some(key.trim().to_owned()),
            Some((name, key)) => annotators.push((name.to_owned(), key.trim().to_owned())),
            None => service = Some(line.to_owned()),
        }
    }
    annotators.sort();
    Ok(Keys {
        service: service.context("the key file has no plain key (the service's)")?,
        lead: lead.context("the key file has no `lead:KEY`")?,
        annotators,
    })
}

/// `segment` for a URL path: every byte but the unreserved ones and `:` `@` escaped.
fn path_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:@".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

// --- Fixtures --------------------------------------------------------------------------

/// The fixtures uploaded: framework, name, files under `fixtures/` (the main file first;
/// several files go as one multipart upload).
const FIXTURES: &[(&str, &str, &[&str])] = &[
    (
        "claudecode",
        "commugraph-sample",
        &[
            "commugraph-sample/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl",
            "commugraph-sample/agent-6f2b8f7b.jsonl",
            "commugraph-sample/agent-773d7508.jsonl",
            "commugraph-sample/agent-80f146b4.jsonl",
            "commugraph-sample/agent-9507cef4.jsonl",
        ],
    ),
    (
        "claudecode",
        "synthetic/subagents",
        &[
            "synthetic/subagents/11111111-2222-4333-8444-555555555555.jsonl",
            "synthetic/subagents/agent-aaaa1111.jsonl",
            "synthetic/subagents/agent-bbbb2222.jsonl",
        ],
    ),
    (
        "claudecode",
        "synthetic/tool_failures",
        &["synthetic/tool_failures/7f3c1a2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b.jsonl"],
    ),
    (
        "claudecode",
        "synthetic/multi_block",
        &["synthetic/multi_block/11111111-2222-4333-8444-555555555555.jsonl"],
    ),
    (
        "claudecode",
        "synthetic/edge_cases",
        &["synthetic/edge_cases/11111111-2222-4333-8444-555555555555.jsonl"],
    ),
    (
        "claudecode",
        "synthetic/escapes",
        &["synthetic/escapes/11111111-2222-4333-8444-555555555555.jsonl"],
    ),
    (
        "claudecode",
        "synthetic/compact_summary_v1",
        &["synthetic/compact_summary_v1/44444444-0000-4000-8000-000000000000.jsonl"],
    ),
    (
        "claudecode",
        "synthetic/typed_beside_result",
        &["synthetic/typed_beside_result/33333333-0000-4000-8000-000000000000.jsonl"],
    ),
    (
        "claudecode",
        "synthetic/duplicate_lines",
        &["synthetic/duplicate_lines/11111111-2222-4333-8444-555555555555.jsonl"],
    ),
    ("pi", "pi/before-compaction", &["pi/before-compaction.jsonl"]),
    ("pi", "pi/large-session", &["pi/large-session.jsonl"]),
    (
        "codex",
        "codex/xurl",
        &[
            "codex/xurl/archived_sessions/rollout-2026-02-23T06-54-42-55fe4488-c6bd-46fa-9390-dab3b8860b95.jsonl",
            "codex/xurl/sessions/2026/02/23/rollout-2026-02-23T06-55-38-29bf19c3-b83e-401d-8f38-5660b7f67152.jsonl",
            "codex/xurl/sessions/2026/02/23/rollout-2026-02-23T06-57-19-f3a61d18-700b-4a4b-919c-f1f9ba37e206.jsonl",
        ],
    ),
    ("codex", "codex/agtrace", &["codex/agtrace/codex_session.jsonl"]),
    (
        "codex",
        "codex/synthetic-jsonl",
        &["codex/synthetic/rollout-2025-05-20T10-00-00-5973b6c0-0000-4000-8000-00000000000b.jsonl"],
    ),
    (
        "codex",
        "codex/synthetic-json",
        &["codex/synthetic/rollout-2025-04-20-7c1d2e3f-0000-4000-8000-00000000000a.json"],
    ),
    (
        "codex",
        "codex/synthetic-spawn",
        &["codex/synthetic/rollout-2026-03-02T14-00-00-0199aa00-0000-7000-8000-00000000000c.jsonl"],
    ),
    (
        "gemini",
        "gemini/real-1027",
        &["gemini/real/session-2025-10-27T19-55-981c87cb.json"],
    ),
    (
        "gemini",
        "gemini/real-1029",
        &["gemini/real/session-2025-10-29T10-39-a63242d9.json"],
    ),
    ("gemini", "gemini/agtrace", &["gemini/real/agtrace_gemini_session.json"]),
    ("gemini", "gemini/jsonl-v040", &["gemini/real/jsonl_v040.jsonl"]),
    (
        "gemini",
        "gemini/system-messages",
        &["gemini/real/agentsview_system_messages.json"],
    ),
    (
        "gemini",
        "gemini/vibecodingtracker",
        &["gemini/real/vibecodingtracker_gemini.jsonl"],
    ),
    (
        "gemini",
        "gemini/synthetic-subagent-jsonl",
        &[
            "gemini/synthetic/chats/session-2026-05-02T09-00-5b1c0d2e.jsonl",
            "gemini/synthetic/chats/5b1c0d2e-4f6a-4c1b-9d8e-0a1b2c3d4e5f/c0ffee00-1111-4222-8333-944445555666.jsonl",
        ],
    ),
    (
        "gemini",
        "gemini/synthetic-subagent-json",
        &[
            "gemini/synthetic/chats/session-2026-02-20T14-00-7e3f9a10.json",
            "gemini/synthetic/chats/7e3f9a10-2b4c-4d6e-8f01-23456789abcd/a9b8c7d6-e5f4-4a3b-8c2d-1e0f9a8b7c6d.json",
        ],
    ),
    (
        "autogen",
        "autogen/selector_planner",
        &["autogen/agentchat/selector_planner.json"],
    ),
    (
        "autogen",
        "autogen/selector_messages",
        &["autogen/agentchat/selector_messages.json"],
    ),
    (
        "autogen",
        "autogen/swarm_task_result",
        &["autogen/agentchat/swarm_task_result.json"],
    ),
    (
        "autogen",
        "autogen/swarm_handoffs",
        &["autogen/agentchat/swarm_handoffs.json"],
    ),
    (
        "autogen",
        "autogen/round_robin_user_proxy",
        &["autogen/agentchat/round_robin_user_proxy.json"],
    ),
    (
        "autogen",
        "autogen/tool_error_parallel",
        &["autogen/agentchat/tool_error_parallel.json"],
    ),
    (
        "autogen",
        "autogen/round_robin_termination",
        &["autogen/agentchat/round_robin_termination.json"],
    ),
    (
        "autogen",
        "autogen/ag2_weather",
        &["autogen/ag2/tools_weather_agent_chat_messages.json"],
    ),
    (
        "autogen",
        "autogen/ag2_groupchat_result",
        &["autogen/ag2/groupchat_result.json"],
    ),
    (
        "autogen",
        "autogen/ag2_tools_chat_result",
        &["autogen/ag2/tools_chat_result.json"],
    ),
    (
        "autogen",
        "autogen/ag2_manager",
        &["autogen/ag2/groupchat_manager_chat_messages.json"],
    ),
    (
        "autogen",
        "autogen/ag2_user_proxy",
        &["autogen/ag2/tools_user_proxy_chat_messages.json"],
    ),
    (
        "autogen",
        "autogen/ag2_groupchat_messages",
        &["autogen/ag2/groupchat_messages.json"],
    ),
    (
        "autogen",
        "autogen/fsm_chat_messages",
        &["autogen/chat_messages/fsm_chat_messages.json"],
    ),
    (
        "autogen",
        "autogen/groupchat_chat_result",
        &["autogen/chat_messages/groupchat_chat_result.json"],
    ),
];

/// A fixture read from disk.
#[derive(Debug)]
struct Fixture {
    name: &'static str,
    framework: &'static str,
    /// Upload names (each file's base name) and bytes, the main file first.
    files: Vec<(String, Bytes)>,
}

impl Fixture {
    /// Variant `n`: the main file with 32 bytes of JSON whitespace (space for 0, tab for 1,
    /// `n`'s bits from the lowest) before its final newline, or at its end: a distinct
    /// upload whose records, and so whose views, are the fixture's.
    fn variant(&self, n: u64) -> Vec<(String, Bytes)> {
        let marker: Vec<u8> = (0..32)
            .map(|bit| if (n >> bit) & 1 == 1 { b'\t' } else { b' ' })
            .collect();
        let mut files = self.files.clone();
        let main = &files[0].1;
        let mut bytes = Vec::with_capacity(main.len() + marker.len());
        match main.strip_suffix(b"\n") {
            Some(head) => {
                bytes.extend_from_slice(head);
                bytes.extend_from_slice(&marker);
                bytes.push(b'\n');
            }
            None => {
                bytes.extend_from_slice(main);
                bytes.extend_from_slice(&marker);
            }
        }
        files[0].1 = Bytes::from(bytes);
        files
    }
}

fn fixtures_dir(given: Option<&PathBuf>) -> PathBuf {
    given
        .cloned()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"))
}

fn load_fixtures(dir: &Path) -> anyhow::Result<Vec<Fixture>> {
    FIXTURES
        .iter()
        .map(|(framework, name, files)| {
            let files = files
                .iter()
                .map(|rel| {
                    let path = dir.join(rel);
                    let bytes =
                        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                    let base = path
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    Ok((base, Bytes::from(bytes)))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(Fixture {
                name,
                framework,
                files,
            })
        })
        .collect()
}

/// The id the server gives `files` uploaded as `framework` (content-addressed).
fn expected_id(framework: &str, files: &[(String, Bytes)]) -> String {
    upload_id(framework, &session_input(files))
}

fn session_input(files: &[(String, Bytes)]) -> SessionInput {
    SessionInput::new(
        files
            .iter()
            .map(|(name, bytes)| SourceFile::new(name.clone(), bytes.clone()))
            .collect(),
    )
}

// --- Results ---------------------------------------------------------------------------

/// One HTTP response (or failed attempt), compact: results hold tens of thousands.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Resp {
    /// Index of the route template in `routes`.
    r: u16,
    /// Status; 0 when no response came (connection failed, body cut).
    s: u16,
    /// `Retry-After` present.
    ra: bool,
    /// For a status of 400 or more: the body is the JSON error (`error` and `message`).
    j: bool,
    /// The logical request's last answer, not one it expected: a failure.
    x: bool,
    /// Latency to the whole body, in microseconds.
    us: u64,
    /// When it was sent (Unix ms).
    t: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileSent {
    name: String,
    len: usize,
    sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UploadRecord {
    fixture: String,
    variant: u64,
    framework: String,
    multipart: bool,
    /// `new`, `again` (an earlier variant sent again) or `scratch` (deleted after).
    kind: String,
    files: Vec<FileSent>,
    /// SHA-256 of the request body for a raw upload (the file), of the files in order for
    /// a multipart one.
    sent_sha256: String,
    expected_id: String,
    graph_id: String,
    at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct DeletionRecord {
    graph_id: String,
    status: u16,
    attempts: u32,
    at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RoundRecord {
    id: String,
    name: String,
    codebook: String,
    overlap: usize,
    sessions: Vec<String>,
    units: usize,
    at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Handout {
    /// The round whose queue handed it out, or whose sessions the session queue was
    /// asked for.
    round: String,
    /// `round` or `session`.
    queue: String,
    codebook: String,
    annotator: String,
    session_id: String,
    event_id: String,
    at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct LabelWrite {
    round: String,
    /// `round` or `session`: the queue the unit came from.
    queue: String,
    codebook: String,
    annotator: String,
    session_id: String,
    event_id: String,
    status: String,
    labels: Vec<String>,
    version: i64,
    /// `2xx`, or `412-replay`: a 412 whose current set is this write.
    ack: String,
    at_ms: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct DayResults {
    phase: String,
    url: String,
    seed: u64,
    started_ms: i64,
    ended_ms: i64,
    duration_secs: u64,
    overlap: usize,
    annotators: Vec<String>,
    routes: Vec<String>,
    responses: Vec<Resp>,
    uploads: Vec<UploadRecord>,
    deletions: Vec<DeletionRecord>,
    rounds: Vec<RoundRecord>,
    handouts: Vec<Handout>,
    labels: Vec<LabelWrite>,
    /// What went wrong in the client's eyes: requests given up, answers it did not expect.
    failures: Vec<String>,
}

/// Every response, and what the team did, as it happens.
#[derive(Debug, Default)]
struct Recorder {
    routes: Mutex<(Vec<String>, HashMap<&'static str, u16>)>,
    responses: Mutex<Vec<Resp>>,
    uploads: Mutex<Vec<UploadRecord>>,
    deletions: Mutex<Vec<DeletionRecord>>,
    rounds: Mutex<Vec<RoundRecord>>,
    handouts: Mutex<Vec<Handout>>,
    labels: Mutex<Vec<LabelWrite>>,
    failures: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Recorder {
    fn route(&self, template: &'static str) -> u16 {
        let mut routes = lock(&self.routes);
        if let Some(i) = routes.1.get(template) {
            return *i;
        }
        let i = routes.0.len() as u16;
        routes.0.push(template.to_owned());
        routes.1.insert(template, i);
        i
    }

    fn response(&self, resp: Resp) -> usize {
        let mut all = lock(&self.responses);
        all.push(resp);
        all.len() - 1
    }

    fn unexpected(&self, index: usize) {
        if let Some(r) = lock(&self.responses).get_mut(index) {
            r.x = true;
        }
    }

    fn failure(&self, what: String) {
        eprintln!("failure: {what}");
        lock(&self.failures).push(what);
    }
}

// --- The HTTP client -------------------------------------------------------------------

/// What a request carries.
#[derive(Debug, Clone)]
enum Payload {
    None,
    Json(Value),
    Raw(Bytes),
    Multipart {
        fields: Vec<(&'static str, String)>,
        files: Vec<(String, Bytes)>,
    },
}

/// One logical request.
#[derive(Debug, Clone)]
struct Call {
    method: reqwest::Method,
    path: String,
    route: &'static str,
    key: String,
    payload: Payload,
    headers: Vec<(&'static str, String)>,
    /// Answers other than 2xx that the caller expects and handles.
    accept: Vec<u16>,
    /// Sent again after a 503, a 5xx or a failed connection (false: once, the caller
    /// decides).
    retry: bool,
}

impl Call {
    fn get(path: impl Into<String>, route: &'static str, key: &str) -> Call {
        Call {
            method: reqwest::Method::GET,
            path: path.into(),
            route,
            key: key.to_owned(),
            payload: Payload::None,
            headers: Vec::new(),
            accept: Vec::new(),
            retry: true,
        }
    }

    fn with(mut self, method: reqwest::Method, payload: Payload) -> Call {
        self.method = method;
        self.payload = payload;
        self
    }

    fn accepting(mut self, statuses: &[u16]) -> Call {
        self.accept.extend_from_slice(statuses);
        self
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Call {
        self.headers.push((name, value.into()));
        self
    }
}

/// A response read whole.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
    /// Attempts it took.
    attempts: u32,
    /// Its record among the responses.
    index: usize,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// How long a request is tried before it is given up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
struct Api {
    http: reqwest::Client,
    base: String,
    rec: Arc<Recorder>,
}

impl Api {
    fn new(base: &str, rec: Arc<Recorder>) -> anyhow::Result<Api> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(330))
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            rec,
        })
    }

    /// One attempt, recorded: the reply, or why none came (with its record's index).
    async fn attempt(&self, call: &Call) -> Result<Reply, (String, usize)> {
        let mut request = self
            .http
            .request(call.method.clone(), format!("{}{}", self.base, call.path))
            .bearer_auth(&call.key);
        for (name, value) in &call.headers {
            request = request.header(*name, value);
        }
        request = match &call.payload {
            Payload::None => request,
            Payload::Json(value) => request
                .header("content-type", "application/json")
                .body(serde_json::to_vec(value).unwrap_or_default()),
            Payload::Raw(bytes) => request
                .header("content-type", "application/octet-stream")
                .body(bytes.clone()),
            Payload::Multipart { fields, files } => {
                let mut form = reqwest::multipart::Form::new();
                for (name, value) in fields {
                    form = form.text(*name, value.clone());
                }
                for (name, bytes) in files {
                    form = form.part(
                        "files",
                        reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(name.clone()),
                    );
                }
                request.multipart(form)
            }
        };
        let route = self.rec.route(call.route);
        let (t, started) = (now_ms(), Instant::now());
        let outcome = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                match response.bytes().await {
                    Ok(body) => Ok((status, headers, body)),
                    Err(e) => Err(format!("{status}, body cut: {e}")),
                }
            }
            Err(e) => Err(format!("no response: {e}")),
        };
        let us = started.elapsed().as_micros() as u64;
        match outcome {
            Ok((status, headers, body)) => {
                let json_error = status < 400 || {
                    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    v["error"].is_string() && v["message"].is_string()
                };
                let index = self.rec.response(Resp {
                    r: route,
                    s: status,
                    ra: headers.contains_key("retry-after"),
                    j: json_error,
                    x: false,
                    us,
                    t,
                });
                Ok(Reply {
                    status,
                    headers,
                    body,
                    attempts: 1,
                    index,
                })
            }
            Err(why) => {
                let index = self.rec.response(Resp {
                    r: route,
                    s: 0,
                    ra: false,
                    j: false,
                    x: false,
                    us,
                    t,
                });
                Err((why, index))
            }
        }
    }

    /// `call`, sent again as a client would after a 503 (after its `Retry-After`), a 500,
    /// 502 or 504 or a failed connection (after a second), until another answer comes or
    /// [`GIVE_UP_AFTER`] passes. `None` when given up (recorded as a failure). An answer
    /// that is neither 2xx nor in `call.accept` is marked unexpected.
    async fn send(&self, call: &Call) -> Option<Reply> {
        let deadline = Instant::now() + GIVE_UP_AFTER;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (wait, last) = match self.attempt(call).await {
                Ok(mut reply) => {
                    reply.attempts = attempts;
                    let again = matches!(reply.status, 500 | 502 | 503 | 504);
                    if !again || !call.retry {
                        if !reply.ok() && !call.accept.contains(&reply.status) {
                            self.rec.unexpected(reply.index);
                            self.rec.failure(format!(
                                "{} {} answered {}: {}",
                                call.method,
                                call.path,
                                reply.status,
                                String::from_utf8_lossy(&reply.body[..reply.body.len().min(300)])
                            ));
                        }
                        return Some(reply);
                    }
                    let wait = if reply.status == 503 {
                        retry_after(&reply.headers).unwrap_or(Duration::from_secs(1))
                    } else {
                        Duration::from_secs(1)
                    };
                    (wait, format!("{}", reply.status))
                }
                Err((why, index)) => {
                    if !call.retry {
                        self.rec.unexpected(index);
                        self.rec
                            .failure(format!("{} {}: {why} (not sent again)", call.method, call.path));
                        return None;
                    }
                    (Duration::from_secs(1), why)
                }
            };
            if Instant::now() + wait > deadline {
                self.rec.failure(format!(
                    "{} {} given up after {attempts} attempts, the last: {last}",
                    call.method, call.path
                ));
                return None;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// A 503's `Retry-After` in seconds, at most 10.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers.get("retry-after")?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.clamp(1, 10)))
}

// --- The day ---------------------------------------------------------------------------

/// A round the annotators are working on.
#[derive(Debug, Clone)]
struct CurrentRound {
    id: String,
    codebook: String,
    /// The sessions it was drawn from.
    sessions: Arc<Vec<String>>,
    /// Labels of the codebook that need no output field.
    labels: Arc<Vec<String>>,
}

/// An upload every member of the team may open.
#[derive(Debug, Clone)]
struct Acked {
    id: String,
    framework: &'static str,
}

struct Team {
    args: RunArgs,
    keys: Keys,
    annotators: Vec<(String, String)>,
    session_annotators: Vec<(String, String)>,
    api: Api,
    fixtures: Vec<Fixture>,
    started: Instant,
    stop: AtomicBool,
    uploads: Mutex<Vec<Acked>>,
    /// Per codebook, its labels that need no output field.
    codebook_labels: HashMap<String, Arc<Vec<String>>>,
    round: watch::Sender<Option<CurrentRound>>,
    /// Annotators the current round's queue has told it is done.
    done: Mutex<(String, BTreeSet<String>)>,
}

impl Team {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn rec(&self) -> &Recorder {
        &self.api.rec
    }

    /// Sleeps `d`, or less when the day ends meanwhile.
    async fn pause(&self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end && !self.stopped() {
            tokio::time::sleep((end - Instant::now()).min(Duration::from_millis(200))).await;
        }
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let keys = read_keys(&args.keys)?;
    ensure!(
        keys.annotators.len() >= args.annotators + args.session_annotators,
        "the key file names {} annotators, {} asked for",
        keys.annotators.len(),
        args.annotators + args.session_annotators
    );
    let fixtures = load_fixtures(&fixtures_dir(args.fixtures.as_ref()))?;
    let rec = Arc::new(Recorder::default());
    let api = Api::new(&args.url, rec.clone())?;
    let mut codebook_labels = HashMap::new();
    for codebook in ["delegation", "speechact"] {
        let reply = api
            .send(&Call::get(
                format!("/api/codebook?codebook={codebook}"),
                "GET /api/codebook",
                &keys.service,
            ))
            .await
            .context("the codebook could not be read")?;
        ensure!(reply.ok(), "GET /api/codebook answered {}", reply.status);
        let labels: Vec<String> = reply.json()["labels"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|l| {
                l["output_fields"]
                    .as_array()
                    .is_none_or(|f| f.iter().all(|f| f["required"] != true))
            })
            .filter_map(|l| l["id"].as_str().map(str::to_owned))
            .collect();
        ensure!(
            !labels.is_empty(),
            "codebook {codebook} has no label without required fields"
        );
        codebook_labels.insert(codebook.to_owned(), Arc::new(labels));
    }
    let started_ms = now_ms();
    let (round, _) = watch::channel(None);
    let team = Arc::new(Team {
        annotators: keys.annotators[..args.annotators].to_vec(),
        session_annotators: keys.annotators[args.annotators..][..args.session_annotators].to_vec(),
        keys,
        api,
        fixtures,
        started: Instant::now(),
        stop: AtomicBool::new(false),
        uploads: Mutex::new(Vec::new()),
        codebook_labels,
        round,
        done: Mutex::new((String::new(), BTreeSet::new())),
        args,
    });
    eprintln!(
        "{}: {} s through {}, {} annotators, {} uploaders, {} viewers",
        team.args.phase,
        team.args.duration,
        team.args.url,
        team.annotators.len(),
        team.args.uploaders,
        team.args.viewers
    );

    let mut tasks = tokio::task::JoinSet::new();
    for u in 0..team.args.uploaders {
        tasks.spawn(uploader(team.clone(), u));
    }
    for v in 0..team.args.viewers {
        tasks.spawn(viewer(team.clone(), v));
    }
    tasks.spawn(lead(team.clone()));
    for a in 0..team.annotators.len() {
        tasks.spawn(annotator(team.clone(), a));
    }
    for a in 0..team.session_annotators.len() {
        tasks.spawn(session_annotator(team.clone(), a));
    }
    let progress = tokio::spawn({
        let team = team.clone();
        async move {
            while !team.stopped() {
                tokio::time::sleep(Duration::from_secs(15)).await;
                let rec = team.rec();
                eprintln!(
                    "{} {:>4} s: {} responses, {} uploads, {} labels, {} failures",
                    team.args.phase,
                    team.started.elapsed().as_secs(),
                    lock(&rec.responses).len(),
                    lock(&rec.uploads).len(),
                    lock(&rec.labels).len(),
                    lock(&rec.failures).len()
                );
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(team.args.duration)).await;
    team.stop.store(true, Ordering::Relaxed);
    let _ = team.round.send(None);
    // Requests in flight finish (or are given up); nothing new starts.
    let grace = tokio::time::timeout(GIVE_UP_AFTER + Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if grace.is_err() {
        team.rec()
            .failure("tasks still running after the grace period".into());
        tasks.abort_all();
    }
    progress.abort();

    let rec = team.rec();
    let results = DayResults {
        phase: team.args.phase.clone(),
        url: team.args.url.clone(),
        seed: team.args.seed,
        started_ms,
        ended_ms: now_ms(),
        duration_secs: team.args.duration,
        overlap: team.args.overlap,
        annotators: team.annotators.iter().map(|(n, _)| n.clone()).collect(),
        routes: lock(&rec.routes).0.clone(),
        responses: std::mem::take(&mut *lock(&rec.responses)),
        uploads: std::mem::take(&mut *lock(&rec.uploads)),
        deletions: std::mem::take(&mut *lock(&rec.deletions)),
        rounds: std::mem::take(&mut *lock(&rec.rounds)),
        handouts: std::mem::take(&mut *lock(&rec.handouts)),
        labels: std::mem::take(&mut *lock(&rec.labels)),
        failures: std::mem::take(&mut *lock(&rec.failures)),
    };
    eprintln!(
        "{}: {} responses, {} uploads, {} deletions, {} rounds, {} units handed out, {} label writes, {} failures",
        results.phase,
        results.responses.len(),
        results.uploads.len(),
        results.deletions.len(),
        results.rounds.len(),
        results.handouts.len(),
        results.labels.len(),
        results.failures.len()
    );
    std::fs::write(&team.args.out, serde_json::to_vec(&results)?)
        .with_context(|| format!("writing {}", team.args.out.display()))?;
    Ok(())
}

/// Uploads fixtures' variants until the day ends: mostly new ones, every tenth an earlier
/// one again (the same id must come back), every seventeenth a scratch copy deleted two
/// seconds later.
async fn uploader(team: Arc<Team>, u: usize) {
    let mut rng = Rng::new(team.args.seed, 100 + u as u64);
    let base = team.args.seed * 10_000_000 + u as u64 * 1_000_000;
    let mut mine: Vec<(usize, u64)> = Vec::new();
    let mut k = 0u64;
    while !team.stopped() {
        k += 1;
        let (fixture, variant, kind) = if k.is_multiple_of(10) && !mine.is_empty() {
            let (f, v) = mine[rng.below(mine.len())];
            (f, v, "again")
        } else if k.is_multiple_of(17) {
            (rng.below(team.fixtures.len()), base + 500_000 + k, "scratch")
        } else {
            (rng.below(team.fixtures.len()), base + k, "new")
        };
        if let Some(id) = upload(&team, fixture, variant, kind).await {
            if kind == "scratch" {
                team.pause(Duration::from_secs(2)).await;
                delete(&team, &id).await;
            } else {
                if kind == "new" {
                    mine.push((fixture, variant));
                }
                lock(&team.uploads).push(Acked {
                    id,
                    framework: team.fixtures[fixture].framework,
                });
            }
        }
        team.pause(rng.around(team.args.upload_every_ms)).await;
    }
}

/// Uploads variant `variant` of fixture `fixture`; its id once acknowledged.
async fn upload(team: &Team, fixture: usize, variant: u64, kind: &str) -> Option<String> {
    let f = &team.fixtures[fixture];
    let files = f.variant(variant);
    let expected = expected_id(f.framework, &files);
    let multipart = files.len() > 1;
    let mut all = Sha256::new();
    for (_, bytes) in &files {
        all.update(bytes);
    }
    let call = if multipart {
        Call::get("/api/upload", "POST /api/upload (multipart)", &team.keys.service).with(
            reqwest::Method::POST,
            Payload::Multipart {
                fields: vec![("framework", f.framework.to_owned())],
                files: files.clone(),
            },
        )
    } else {
        Call::get(
            format!(
                "/api/upload?framework={}&filename={}",
                f.framework,
                path_segment(&files[0].0)
            ),
            "POST /api/upload (raw)",
            &team.keys.service,
        )
        .with(reqwest::Method::POST, Payload::Raw(files[0].1.clone()))
    };
    let reply = team.api.send(&call).await?;
    if !reply.ok() {
        return None;
    }
    let graph_id = reply.json()["graph_id"].as_str().unwrap_or_default().to_owned();
    if graph_id != expected {
        team.rec().failure(format!(
            "upload of {} variant {variant}: id {graph_id}, its content's is {expected}",
            f.name
        ));
    }
    lock(&team.rec().uploads).push(UploadRecord {
        fixture: f.name.to_owned(),
        variant,
        framework: f.framework.to_owned(),
        multipart,
        kind: kind.to_owned(),
        files: files
            .iter()
            .map(|(name, bytes)| FileSent {
                name: name.clone(),
                len: bytes.len(),
                sha256: sha256_hex(bytes),
            })
            .collect(),
        sent_sha256: hex::encode(all.finalize()),
        expected_id: expected,
        graph_id: graph_id.clone(),
        at_ms: now_ms(),
    });
    // Served at once, whichever replica answers.
    let after = Call::get(
        format!("/api/graph/{graph_id}/info"),
        "GET /api/graph/{id}/info",
        &team.keys.service,
    );
    if let Some(reply) = team.api.send(&after).await {
        if !reply.ok() {
            team.rec().failure(format!(
                "upload {graph_id} answers {} right after it was acknowledged",
                reply.status
            ));
        }
    }
    Some(graph_id)
}

/// Deletes upload `id` (a 404 after a first attempt that got no answer: the first one
/// deleted it).
async fn delete(team: &Team, id: &str) {
    let call = Call::get(
        format!("/api/session/{id}"),
        "DELETE /api/session/{id}",
        &team.keys.service,
    )
    .with(reqwest::Method::DELETE, Payload::None)
    .accepting(&[404]);
    let Some(reply) = team.api.send(&call).await else {
        return;
    };
    // A 404: this deletion was sent twice (by nginx after a connection failure, or by
    // this client after a 503) and the first went through. That the upload was there is
    // checked right after it was acknowledged.
    lock(&team.rec().deletions).push(DeletionRecord {
        graph_id: id.to_owned(),
        status: reply.status,
        attempts: reply.attempts,
        at_ms: now_ms(),
    });
    // Gone at once, whichever replica answers.
    let after = Call::get(
        format!("/api/graph/{id}/info"),
        "GET /api/graph/{id}/info",
        &team.keys.service,
    )
    .accepting(&[404]);
    if let Some(reply) = team.api.send(&after).await {
        if reply.status != 404 {
            team.rec().unexpected(reply.index);
            team.rec().failure(format!(
                "upload {id} answers {} after its deletion was acknowledged",
                reply.status
            ));
        }
    }
}

/// The views of an upload a visit reads, with their route templates.
const SESSION_VIEWS: [(&str, &str); 17] = [
    ("/info", "GET /api/graph/{id}/info"),
    ("/annotations", "GET /api/graph/{id}/annotations"),
    (
        "/annotations?include_sidechains=true",
        "GET /api/graph/{id}/annotations?include_sidechains",
    ),
    ("/dialog", "GET /api/graph/{id}/dialog"),
    ("/workflow", "GET /api/graph/{id}/workflow"),
    ("/workflow?step=7", "GET /api/graph/{id}/workflow?step"),
    ("/chatlog", "GET /api/graph/{id}/chatlog"),
    (
        "/chatlog?include_subagents=true",
        "GET /api/graph/{id}/chatlog?include_subagents",
    ),
    ("", "GET /api/graph/{id}"),
    ("?edges=none", "GET /api/graph/{id}?edges=none"),
    ("/metrics", "GET /api/graph/{id}/metrics"),
    ("/diagnostics", "GET /api/graph/{id}/diagnostics"),
    ("/branches", "GET /api/graph/{id}/branches"),
    ("/context", "GET /api/graph/{id}/context"),
    ("/workflow?branch=active", "GET /api/graph/{id}/workflow?branch"),
    ("/export", "GET /api/graph/{id}/export"),
    ("/labels", "GET /api/graph/{id}/labels"),
];

/// Whether an upload of `framework` has the view at `suffix`: an AutoGen log has no
/// workflow (400, as CommuGraph).
fn has_view(framework: &str, suffix: &str) -> bool {
    framework != "autogen" || !suffix.starts_with("/workflow")
}

/// Searches a team runs: words of the fixtures, with and without filters.
const SEARCHES: [&str; 8] = [
    "q=build",
    "q=test&unit_type=assistant_turn",
    "q=file&framework=codex",
    "q=error&failed=true",
    "delegation=true",
    "q=agent%20OR%20plan&limit=50",
    "q=function&tool=Bash",
    "q=%22the%20user%22",
];

/// Reads what a team member reads: every view of an upload, searches, the lists, progress
/// and agreement, rounds, the label exports.
async fn viewer(team: Arc<Team>, v: usize) {
    let mut rng = Rng::new(team.args.seed, 200 + v as u64);
    let key = team.annotators[v % team.annotators.len()].1.clone();
    while !team.stopped() {
        let round = team.round.borrow().clone();
        for call in viewer_calls(&team, &mut rng, round.as_ref(), &key) {
            if team.stopped() {
                break;
            }
            let _ = team.api.send(&call).await;
            team.pause(rng.around(150)).await;
        }
        team.pause(rng.around(400)).await;
    }
}

/// The lists a viewer reads: (path, route).
const LISTS: [(&str, &str); 4] = [
    ("/api/sessions", "GET /api/sessions"),
    ("/api/frameworks", "GET /api/frameworks"),
    ("/api/codebooks", "GET /api/codebooks"),
    ("/api/me", "GET /api/me"),
];

/// What a viewer reads next, picked with `rng`, as `key`: every view of an upload (recent
/// ones more often: what the team is working on), a search, the lists, progress and
/// agreement (of `round` too), or the label exports with a dialog parse.
fn viewer_calls(team: &Team, rng: &mut Rng, round: Option<&CurrentRound>, key: &str) -> Vec<Call> {
    let pick = rng.below(100);
    let uploads = lock(&team.uploads).clone();
    let mut reads: Vec<(String, &'static str)> = Vec::new();
    let mut dialog = None;
    if pick < 60 && !uploads.is_empty() {
        let span = rng.below(uploads.len()) + 1;
        let Acked { id, framework } = &uploads[uploads.len() - 1 - rng.below(span)];
        for (suffix, route) in SESSION_VIEWS {
            if has_view(framework, suffix) {
                reads.push((format!("/api/graph/{id}{suffix}"), route));
            }
        }
    } else if pick < 75 {
        let q = SEARCHES[rng.below(SEARCHES.len())];
        reads.push((format!("/api/search?{q}"), "GET /api/search"));
    } else if pick < 85 {
        reads.extend(LISTS.map(|(path, route)| (path.to_owned(), route)));
    } else if pick < 95 {
        reads.push(("/api/labels/progress?all=true".into(), "GET /api/labels/progress"));
        reads.push(("/api/rounds".into(), "GET /api/rounds"));
        reads.extend(round.into_iter().flat_map(round_reads));
    } else {
        reads.extend(round.into_iter().flat_map(round_exports));
        let studio = "/api/labels/export?format=label-studio";
        reads.push((studio.into(), "GET /api/labels/export?format=label-studio"));
        let small = &team.fixtures[2].files[0].1;
        dialog = Some(
            Call::get("/api/parse-for-dialog", "POST /api/parse-for-dialog", key).with(
                reqwest::Method::POST,
                Payload::Json(json!({ "content": String::from_utf8_lossy(small) })),
            ),
        );
    }
    let gets = reads.into_iter().map(|(path, route)| Call::get(path, route, key));
    gets.chain(dialog).collect()
}

/// What a viewer reads of `round`: (path, route) of its agreement, itself, its units and
/// their agreement.
fn round_reads(round: &CurrentRound) -> [(String, &'static str); 4] {
    let id = &round.id;
    [
        (
            format!("/api/labels/agreement?round={id}"),
            "GET /api/labels/agreement?round",
        ),
        (format!("/api/rounds/{id}"), "GET /api/rounds/{id}"),
        (format!("/api/rounds/{id}/units"), "GET /api/rounds/{id}/units"),
        (
            format!("/api/rounds/{id}/agreement"),
            "GET /api/rounds/{id}/agreement",
        ),
    ]
}

/// The label exports a viewer reads of `round`: (path, route) of its units' export, and
/// its codebook's.
fn round_exports(round: &CurrentRound) -> [(String, &'static str); 2] {
    [
        (
            format!("/api/labels/export?round={}", round.id),
            "GET /api/labels/export?round",
        ),
        (
            format!("/api/labels/export?codebook={}", round.codebook),
            "GET /api/labels/export",
        ),
    ]
}

/// Creates rounds over the sessions uploaded so far (the first once a dozen are in), and
/// a new one over the sessions uploaded since once every annotator is done with the last;
/// reads their progress and agreement meanwhile.
async fn lead(team: Arc<Team>) {
    let key = team.keys.lead.clone();
    let mut in_rounds: BTreeSet<String> = BTreeSet::new();
    let mut number = 0;
    while !team.stopped() {
        let waited = team.started.elapsed() > Duration::from_secs(20);
        let fresh: Vec<String> = {
            let uploads = lock(&team.uploads);
            let mut ids: Vec<String> = uploads
                .iter()
                .map(|a| a.id.clone())
                .filter(|id| !in_rounds.contains(id))
                .collect();
            ids.sort();
            ids.dedup();
            ids
        };
        let ready = fresh.len() >= 12 || (waited && !fresh.is_empty());
        if !ready {
            team.pause(Duration::from_secs(1)).await;
            continue;
        }
        number += 1;
        let codebook = if number % 2 == 1 {
            "delegation"
        } else {
            "speechact"
        };
        let name = format!("{}-{}-round-{number}", team.args.phase, team.args.seed);
        in_rounds.extend(fresh.iter().cloned());
        let Some((id, units)) = create_round(&team, &key, &name, codebook, &fresh).await else {
            continue;
        };
        lock(&team.rec().rounds).push(RoundRecord {
            id: id.clone(),
            name,
            codebook: codebook.to_owned(),
            overlap: team.args.overlap,
            sessions: fresh.clone(),
            units,
            at_ms: now_ms(),
        });
        *lock(&team.done) = (id.clone(), BTreeSet::new());
        let _ = team.round.send(Some(CurrentRound {
            id: id.clone(),
            codebook: codebook.to_owned(),
            sessions: Arc::new(fresh),
            labels: team.codebook_labels[codebook].clone(),
        }));
        eprintln!("{}: round {id} ({codebook}, {units} units) open", team.args.phase);
        // Until the team is done with it.
        let mut last_look = Instant::now();
        while !team.stopped() {
            let done = lock(&team.done).1.len();
            if done >= team.annotators.len() {
                break;
            }
            if last_look.elapsed() > Duration::from_secs(10) {
                last_look = Instant::now();
                for (path, route) in [
                    (format!("/api/rounds/{id}"), "GET /api/rounds/{id}"),
                    (
                        format!("/api/rounds/{id}/agreement"),
                        "GET /api/rounds/{id}/agreement",
                    ),
                ] {
                    let _ = team.api.send(&Call::get(path, route, &key)).await;
                }
            }
            team.pause(Duration::from_millis(500)).await;
        }
    }
}

/// Creates a round over `sessions`; its id and units. Sent once per try: a failure may
/// have created it, so the lead looks for it by name before sending it again.
async fn create_round(
    team: &Team,
    key: &str,
    name: &str,
    codebook: &str,
    sessions: &[String],
) -> Option<(String, usize)> {
    let body = json!({
        "name": name,
        "codebook": codebook,
        "guidelines": "Code the primary act of each unit.",
        "selection": { "sessions": sessions },
        "sample": { "size": team.args.round_size, "seed": team.args.seed, "stratify": { "session": true } },
        "overlap": team.args.overlap,
        "annotators": team.annotators.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        "reservation_secs": 3600,
    });
    let mut call = Call::get("/api/rounds", "POST /api/rounds", key)
        .with(reqwest::Method::POST, Payload::Json(body))
        .accepting(&[503]);
    call.retry = false;
    let deadline = Instant::now() + GIVE_UP_AFTER;
    while Instant::now() < deadline {
        if let Some(reply) = team.api.send(&call).await {
            if reply.status == 201 {
                let json = reply.json();
                let id = json["round"]["id"].as_str().unwrap_or_default().to_owned();
                return Some((id.clone(), round_size(team, key, &id).await));
            }
            if reply.status != 503 {
                // Recorded as unexpected by `send`.
                return None;
            }
            tokio::time::sleep(retry_after(&reply.headers).unwrap_or(Duration::from_secs(1))).await;
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // Did the failed request create it?
        let listed = team
            .api
            .send(&Call::get("/api/rounds", "GET /api/rounds", key))
            .await?;
        let found = listed.json()["rounds"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .find(|r| r["definition"]["name"] == name || r["name"] == name)
            .and_then(|r| r["id"].as_str().map(str::to_owned));
        if let Some(id) = found {
            eprintln!("round {name} was created by a request whose answer was lost: {id}");
            return Some((id.clone(), round_size(team, key, &id).await));
        }
    }
    team.rec().failure(format!("round {name} could not be created"));
    None
}

async fn round_size(team: &Team, key: &str, id: &str) -> usize {
    team.api
        .send(&Call::get(
            format!("/api/rounds/{id}/units"),
            "GET /api/rounds/{id}/units",
            key,
        ))
        .await
        .and_then(|r| r.json()["total"].as_u64())
        .unwrap_or(0) as usize
}

/// Takes units from the current round's queue and labels them until the day ends.
async fn annotator(team: Arc<Team>, a: usize) {
    let (name, key) = team.annotators[a].clone();
    let mut rng = Rng::new(team.args.seed, 1000 + a as u64);
    let mut rounds = team.round.subscribe();
    let mut last_session = String::new();
    let mut finished = String::new();
    'day: while !team.stopped() {
        let current = rounds.borrow_and_update().clone();
        let Some(round) = current.filter(|r| r.id != finished) else {
            // No round yet, or done with this one: wait for the next.
            if tokio::time::timeout(Duration::from_secs(1), rounds.changed())
                .await
                .is_ok_and(|r| r.is_err())
            {
                break;
            }
            continue;
        };
        loop {
            if team.stopped() {
                break 'day;
            }
            let next = Call::get("/api/labels/queue/next", "POST /api/labels/queue/next", &key)
                .with(reqwest::Method::POST, Payload::Json(json!({ "round": round.id })))
                .accepting(&[409]);
            let Some(reply) = team.api.send(&next).await else {
                continue;
            };
            let Some((session, event)) = reserved(&team, &name, &reply) else {
                let mut done = lock(&team.done);
                if done.0 == round.id {
                    done.1.insert(name.clone());
                }
                finished = round.id.clone();
                break;
            };
            let asker = Asker {
                team: &team,
                round: &round,
                queue: "round",
                name: &name,
                key: &key,
            };
            asker.label(&mut rng, &mut last_session, session, event).await;
        }
    }
}

/// Labels as the labeling page's "Next unit for me" in a session does: takes units from
/// the queue of one of the current round's sessions (the session queue, under the round's
/// codebook and the server's overlap), so that the round's queue and the sessions' hand
/// out the same units at once; another session when one is done.
async fn session_annotator(team: Arc<Team>, a: usize) {
    let (name, key) = team.session_annotators[a].clone();
    let mut rng = Rng::new(team.args.seed, 2000 + a as u64);
    let mut rounds = team.round.subscribe();
    let mut last_session = String::new();
    while !team.stopped() {
        let Some(round) = rounds.borrow_and_update().clone() else {
            if tokio::time::timeout(Duration::from_secs(1), rounds.changed())
                .await
                .is_ok_and(|r| r.is_err())
            {
                break;
            }
            continue;
        };
        let session = round.sessions[rng.below(round.sessions.len())].clone();
        let next = Call::get(
            format!("/api/labels/queue/next?codebook={}", round.codebook),
            "POST /api/labels/queue/next (session)",
            &key,
        )
        .with(
            reqwest::Method::POST,
            Payload::Json(json!({ "session": session })),
        );
        let Some(reply) = team.api.send(&next).await else {
            continue;
        };
        let Some((session, event)) = reserved(&team, &name, &reply) else {
            // Done with this session: another one after a while.
            team.pause(rng.around(team.args.think_ms)).await;
            continue;
        };
        let asker = Asker {
            team: &team,
            round: &round,
            queue: "session",
            name: &name,
            key: &key,
        };
        asker.label(&mut rng, &mut last_session, session, event).await;
    }
}

/// The unit a `queue/next` reply reserved (session, event); `None` when the queue is done
/// (or closed, or refused: recorded by `send`).
fn reserved(team: &Team, name: &str, reply: &Reply) -> Option<(String, String)> {
    let json = reply.json();
    if !reply.ok() || json["done"] == true {
        return None;
    }
    let reservation = &json["reservation"];
    match (
        reservation["session_id"].as_str(),
        reservation["event_id"].as_str(),
    ) {
        (Some(session), Some(event)) => Some((session.to_owned(), event.to_owned())),
        _ => {
            team.rec()
                .failure(format!("queue/next for {name}: no reservation in {json}"));
            None
        }
    }
}

/// An annotator taking units from a queue.
struct Asker<'a> {
    team: &'a Team,
    round: &'a CurrentRound,
    /// `round` or `session`: the queue the units come from.
    queue: &'static str,
    name: &'a str,
    key: &'a str,
}

impl Asker<'_> {
    /// Records the unit handed out, reads its session's units as the labeling page does
    /// (when it is another session than the last), thinks, and writes a set on it: one
    /// unit in ten saved as a draft first.
    async fn label(&self, rng: &mut Rng, last_session: &mut String, session: String, event: String) {
        let team = self.team;
        lock(&team.rec().handouts).push(Handout {
            round: self.round.id.clone(),
            queue: self.queue.to_owned(),
            codebook: self.round.codebook.clone(),
            annotator: self.name.to_owned(),
            session_id: session.clone(),
            event_id: event.clone(),
            at_ms: now_ms(),
        });
        if session != *last_session {
            let _ = team
                .api
                .send(&Call::get(
                    format!("/api/graph/{session}/annotations?annotator={}", self.name),
                    "GET /api/graph/{id}/annotations?annotator",
                    self.key,
                ))
                .await;
            last_session.clone_from(&session);
        }
        let think = rng.around(team.args.think_ms);
        tokio::time::sleep(think).await;
        let labels = choose_labels(&self.round.labels, self.name, &session, &event);
        let lead_time = think.as_secs_f64();
        let unit = Unit {
            round: self.round,
            queue: self.queue,
            annotator: self.name,
            key: self.key,
            session: &session,
            event: &event,
        };
        if rng.below(10) == 0 {
            let Some(version) = write_set(team, &unit, "draft", &labels[..1], None, lead_time).await else {
                return;
            };
            tokio::time::sleep(rng.around(team.args.think_ms / 3)).await;
            write_set(team, &unit, "submitted", &labels, Some(version), lead_time).await;
        } else {
            write_set(team, &unit, "submitted", &labels, None, lead_time).await;
        }
    }
}

/// One or two labels for a unit, chosen from its annotator and key: two annotators agree
/// on some units and not on others.
fn choose_labels(labels: &[String], annotator: &str, session: &str, event: &str) -> Vec<String> {
    let unit = Sha256::digest(format!("{session}\0{event}"));
    let who = Sha256::digest(annotator);
    let first = if who[0] % 3 == 0 {
        who[1] as usize
    } else {
        unit[0] as usize
    } % labels.len();
    let mut chosen = vec![labels[first].clone()];
    if unit[1] % 4 == 0 {
        let second = (first + 1 + unit[2] as usize % (labels.len() - 1).max(1)) % labels.len();
        if second != first {
            chosen.push(labels[second].clone());
        }
    }
    chosen
}

/// The unit an annotator is labeling.
struct Unit<'a> {
    round: &'a CurrentRound,
    /// The queue it came from.
    queue: &'a str,
    annotator: &'a str,
    key: &'a str,
    session: &'a str,
    event: &'a str,
}

/// Writes the annotator's set on the unit: with `If-None-Match: *` (a first write), or
/// `If-Match` on `version`. Its version once acknowledged (2xx, or a 412 whose current set
/// is this very write: a replay of a write whose answer was lost).
async fn write_set(
    team: &Team,
    unit: &Unit<'_>,
    status: &str,
    labels: &[String],
    version: Option<i64>,
    lead_time: f64,
) -> Option<i64> {
    let body = json!({
        "status": status,
        "labels": labels.iter().map(|l| json!({ "id": l })).collect::<Vec<_>>(),
        "lead_time": lead_time,
    });
    let path = format!(
        "/api/graph/{}/labels/{}?codebook={}",
        path_segment(unit.session),
        path_segment(unit.event),
        unit.round.codebook
    );
    let call = Call::get(path, "PUT /api/graph/{id}/labels/{event_id}", unit.key)
        .with(reqwest::Method::PUT, Payload::Json(body))
        .accepting(&[412]);
    let call = match version {
        None => call.header("if-none-match", "*"),
        Some(v) => call.header("if-match", format!("\"labels-{v}\"")),
    };
    let reply = team.api.send(&call).await?;
    let json = reply.json();
    let (set, ack) = match reply.status {
        200 | 201 => (json, "2xx"),
        412 => {
            let current = json["details"]["current"].clone();
            let same = current["status"] == status
                && current["annotator"] == unit.annotator
                && current["labels"].as_array().is_some_and(|ls| {
                    ls.iter()
                        .map(|l| l["id"].as_str())
                        .eq(labels.iter().map(|l| Some(l.as_str())))
                });
            if !same {
                team.rec().unexpected(reply.index);
                team.rec().failure(format!(
                    "{} on {}/{}: 412, and the set is not this write: {current}",
                    unit.annotator, unit.session, unit.event
                ));
                return None;
            }
            (current, "412-replay")
        }
        _ => return None,
    };
    let version = set["version"].as_i64()?;
    if Sha256::digest(format!("{}\0{}\0{status}", unit.annotator, unit.event))[0] % 5 == 0 {
        read_back(team, unit, status, version).await;
    }
    lock(&team.rec().labels).push(LabelWrite {
        round: unit.round.id.clone(),
        queue: unit.queue.to_owned(),
        codebook: unit.round.codebook.clone(),
        annotator: unit.annotator.to_owned(),
        session_id: unit.session.to_owned(),
        event_id: unit.event.to_owned(),
        status: status.to_owned(),
        labels: labels.to_vec(),
        version,
        ack: ack.to_owned(),
        at_ms: now_ms(),
    });
    Some(version)
}

/// Reads the annotator's set on the unit back through the load balancer (most often
/// another replica than the one that took the write): an acknowledged write is seen at
/// once, whichever replica answers.
async fn read_back(team: &Team, unit: &Unit<'_>, status: &str, version: i64) {
    let call = Call::get(
        format!(
            "/api/graph/{}/labels?codebook={}&annotator={}",
            path_segment(unit.session),
            unit.round.codebook,
            unit.annotator
        ),
        "GET /api/graph/{id}/labels?annotator",
        unit.key,
    );
    let Some(reply) = team.api.send(&call).await else {
        return;
    };
    let json = reply.json();
    let seen = json["labels"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .find(|s| s["event_id"] == unit.event && s["annotator"] == unit.annotator)
        .map(|s| (s["status"].clone(), s["version"].as_i64()));
    if reply.ok() && seen != Some((Value::from(status), Some(version))) {
        team.rec().failure(format!(
            "{}'s set on {}/{}, acknowledged {status} v{version}, read back as {seen:?}",
            unit.annotator, unit.session, unit.event
        ));
    }
}

// --- Verification ----------------------------------------------------------------------

/// One check's outcome.
#[derive(Debug, Serialize)]
struct Check {
    name: String,
    passed: bool,
    detail: String,
    /// Every problem found (the detail shows the first 20).
    problems: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
struct Report {
    checks: Vec<Check>,
    /// Per phase, per window (`outside faults`, a fault's name), per status: responses.
    statuses: BTreeMap<String, BTreeMap<String, BTreeMap<u16, usize>>>,
    /// Per phase, per route: count, p50, p99, max (ms) of the 2xx responses.
    latency: BTreeMap<String, BTreeMap<String, Latency>>,
    counts: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, Serialize)]
struct Latency {
    count: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl Report {
    fn check(&mut self, name: &str, problems: &[String], passed_detail: String) {
        let passed = problems.is_empty();
        let detail = if passed {
            passed_detail
        } else {
            let mut d = format!("{} problems", problems.len());
            for p in problems.iter().take(20) {
                let _ = write!(d, "\n    {p}");
            }
            d
        };
        println!("{} {name}: {detail}", if passed { "PASS" } else { "FAIL" });
        self.checks.push(Check {
            name: name.to_owned(),
            passed,
            detail,
            problems: problems.to_vec(),
        });
    }
}

/// A fault's window: from its first event to its last, plus five seconds.
#[derive(Debug, Clone)]
struct Window {
    name: String,
    from_ms: i64,
    to_ms: i64,
}

fn fault_windows(path: Option<&PathBuf>) -> anyhow::Result<Vec<Window>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let events: Vec<(String, i64)> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)?;
            Ok((
                v["event"].as_str().unwrap_or_default().to_owned(),
                v["at_ms"].as_i64().unwrap_or(0),
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    // Each start event with the next end event (the faults come one after the other).
    let mut windows = Vec::new();
    for (i, (event, from)) in events.iter().enumerate() {
        let (name, end) = match event.as_str() {
            "replica_killed" => ("replica killed and restarting", "replica_ready"),
            "postgres_restarting" => ("PostgreSQL restarting", "postgres_ready"),
            _ => continue,
        };
        let to = events[i..]
            .iter()
            .find(|(e, _)| e == end)
            .map_or(i64::MAX - 5000, |(_, t)| *t);
        windows.push(Window {
            name: name.into(),
            from_ms: *from,
            to_ms: to + 5000,
        });
    }
    Ok(windows)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn latency_of(mut ms: Vec<f64>) -> Latency {
    ms.sort_by(f64::total_cmp);
    Latency {
        count: ms.len(),
        p50_ms: percentile(&ms, 0.50),
        p99_ms: percentile(&ms, 0.99),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
    }
}

/// A direct client of one replica.
struct Direct {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Direct {
    async fn get(&self, path: &str) -> anyhow::Result<(u16, reqwest::header::HeaderMap, Bytes)> {
        for attempt in 0.. {
            let response = self
                .http
                .get(format!("{}{path}", self.base))
                .bearer_auth(&self.key)
                .send()
                .await
                .with_context(|| format!("GET {}{path}", self.base))?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            // A render past the budget answers 503: wait as told.
            if status == 503 && attempt < 10 {
                tokio::time::sleep(retry_after(&headers).unwrap_or(Duration::from_secs(1))).await;
                continue;
            }
            return Ok((status, headers, body));
        }
        unreachable!("the loop returns")
    }
}

/// Views compared with a parse made here: those that show no labels.
fn local_views() -> Vec<(&'static str, View, ViewOptions)> {
    let base = ViewOptions::default();
    vec![
        ("/workflow", View::Workflow, base),
        (
            "/workflow?step=7",
            View::Workflow,
            ViewOptions {
                step: Some(7),
                ..base
            },
        ),
        (
            "/workflow?branch=active",
            View::Workflow,
            ViewOptions {
                branch: Branch::Active,
                ..base
            },
        ),
        ("/chatlog", View::Chatlog, base),
        (
            "/chatlog?include_subagents=true",
            View::Chatlog,
            ViewOptions {
                include_subagents: true,
                ..base
            },
        ),
        ("", View::Graph, base),
        (
            "?edges=none",
            View::Graph,
            ViewOptions {
                graph: GraphMode::Reference,
                ..base
            },
        ),
        ("/metrics", View::Metrics, base),
        ("/branches", View::Branches, base),
        ("/context", View::Context, base),
    ]
}

/// Views compared across replicas only (they show labels, or what the replica holds).
const REPLICA_VIEWS: [&str; 5] = [
    "/annotations",
    "/annotations?include_sidechains=true",
    "/dialog",
    "/diagnostics",
    "/labels",
];

async fn verify(args: VerifyArgs) -> anyhow::Result<bool> {
    let keys = read_keys(&args.keys)?;
    let fixtures = load_fixtures(&fixtures_dir(args.fixtures.as_ref()))?;
    let mut days = Vec::new();
    for path in &args.results {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let day: DayResults =
            serde_json::from_slice(&text).with_context(|| format!("reading {}", path.display()))?;
        days.push(day);
    }
    let windows = fault_windows(args.faults.as_ref())?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()?;
    let replicas: Vec<Direct> = args
        .replicas
        .iter()
        .map(|base| Direct {
            http: http.clone(),
            base: base.trim_end_matches('/').to_owned(),
            key: keys.lead.clone(),
        })
        .collect();
    let mut report = Report::default();

    verify_uploads(&mut report, &days, &fixtures, &replicas).await?;
    verify_labels(&mut report, &days, &replicas).await?;
    verify_overlap(&mut report, &days, &replicas).await?;
    verify_responses(&mut report, &days, &windows);
    let table = latency_table(&mut report, &days);
    println!("\n{table}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &table)?;
    }
    let passed = report.checks.iter().all(|c| c.passed);
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    println!(
        "\n{}: {} of {} checks passed",
        if passed { "PASSED" } else { "FAILED" },
        report.checks.iter().filter(|c| c.passed).count(),
        report.checks.len()
    );
    Ok(passed)
}

/// Every acknowledged upload listed and served by every replica: its main file as sent,
/// its views the same everywhere and, for those without labels, as parsed here; every
/// deleted one gone.
async fn verify_uploads(
    report: &mut Report,
    days: &[DayResults],
    fixtures: &[Fixture],
    replicas: &[Direct],
) -> anyhow::Result<()> {
    let deleted: BTreeSet<&str> = days
        .iter()
        .flat_map(|d| &d.deletions)
        .map(|d| d.graph_id.as_str())
        .collect();
    let mut problems = Vec::new();
    let mut by_id: BTreeMap<&str, &UploadRecord> = BTreeMap::new();
    for upload in days.iter().flat_map(|d| &d.uploads) {
        if upload.graph_id != upload.expected_id {
            problems.push(format!(
                "{} variant {}: id {} returned, {} is its content's",
                upload.fixture, upload.variant, upload.graph_id, upload.expected_id
            ));
        }
        if let Some(first) = by_id.get(upload.graph_id.as_str()) {
            if first.sent_sha256 != upload.sent_sha256 {
                problems.push(format!(
                    "id {} acknowledged for two different contents",
                    upload.graph_id
                ));
            }
        } else {
            by_id.insert(&upload.graph_id, upload);
        }
    }
    let kept: Vec<&UploadRecord> = by_id
        .values()
        .copied()
        .filter(|u| !deleted.contains(u.graph_id.as_str()))
        .collect();
    let again = days
        .iter()
        .flat_map(|d| &d.uploads)
        .filter(|u| u.kind == "again")
        .count();
    report.counts.insert(
        "uploads acknowledged".into(),
        days.iter().map(|d| d.uploads.len()).sum(),
    );
    report
        .counts
        .insert("uploads sent again (same id expected)".into(), again);
    report.counts.insert("distinct uploads kept".into(), kept.len());
    report.counts.insert("uploads deleted".into(), deleted.len());

    // Listed everywhere; deleted ones nowhere.
    for replica in replicas {
        let (status, _, body) = replica.get("/api/sessions").await?;
        if status != 200 {
            problems.push(format!("{}: GET /api/sessions answered {status}", replica.base));
            continue;
        }
        let listed: BTreeSet<String> = serde_json::from_slice::<Value>(&body)?["sessions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect();
        for u in &kept {
            if !listed.contains(&u.graph_id) {
                problems.push(format!("{}: upload {} not listed", replica.base, u.graph_id));
            }
        }
        for id in &deleted {
            if listed.contains(*id) {
                problems.push(format!("{}: deleted upload {id} still listed", replica.base));
            }
            let (status, _, _) = replica.get(&format!("/api/graph/{id}/info")).await?;
            if status != 404 {
                problems.push(format!("{}: deleted upload {id} answers {status}", replica.base));
            }
        }
    }

    // Each replica's search index has caught up (uploads through the others included).
    for replica in replicas {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, _, body) = replica.get("/api/search?limit=1").await?;
            let pending =
                serde_json::from_slice::<Value>(&body).map_or(true, |v| v["index"]["pending"] != false);
            if status == 200 && !pending {
                break;
            }
            if Instant::now() > deadline {
                problems.push(format!(
                    "{}: the search index is still pending 120 s after the day (status {status})",
                    replica.base
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    let total = kept.len();
    let results = futures_util::stream::iter(kept.into_iter().enumerate().map(|(i, upload)| async move {
        if i % 50 == 0 {
            eprintln!("uploads: {i} of {total} checked");
        }
        check_upload(upload, fixtures, replicas).await
    }))
    .buffer_unordered(4)
    .collect::<Vec<_>>()
    .await;
    let mut compared = 0;
    for result in results {
        let (found, bodies) = result?;
        problems.extend(found);
        compared += bodies;
    }
    report.counts.insert("view bodies compared".into(), compared);
    report.check(
        "uploads",
        &problems,
        format!(
            "{total} distinct uploads present on each of {} replicas, main files byte-identical to what was sent, {compared} view bodies identical across replicas (and to a local parse where they show no labels), every unit in each replica's search index; {} deletions gone everywhere",
            replicas.len(),
            deleted.len()
        ),
    );
    Ok(())
}

/// One upload on every replica: the problems found, and the view bodies compared.
async fn check_upload(
    upload: &UploadRecord,
    fixtures: &[Fixture],
    replicas: &[Direct],
) -> anyhow::Result<(Vec<String>, usize)> {
    let mut problems = Vec::new();
    let id = &upload.graph_id;
    let Some(fixture) = fixtures.iter().find(|f| f.name == upload.fixture) else {
        bail!(
            "results name fixture {} that this build does not have",
            upload.fixture
        );
    };
    let files = fixture.variant(upload.variant);
    let regenerated: Vec<String> = files.iter().map(|(_, b)| sha256_hex(b)).collect();
    let recorded: Vec<String> = upload.files.iter().map(|f| f.sha256.clone()).collect();
    if regenerated != recorded {
        bail!(
            "{} variant {}: the bytes made again are not those sent",
            upload.fixture,
            upload.variant
        );
    }
    // The views parsed here, from the bytes sent.
    let framework = Framework::from_name(&upload.framework).context("unknown framework")?;
    let input = session_input(&files);
    let local: Vec<(&'static str, String)> = tokio::task::spawn_blocking(move || {
        let options = LoadOptions {
            format: Some(framework.format()),
            ..LoadOptions::default()
        };
        let session = Session::build(&input, options)?;
        local_views()
            .into_iter()
            .filter(|(suffix, _, _)| has_view(framework.name(), suffix))
            .map(|(suffix, view, options)| {
                let mut body = Vec::new();
                views::write(&session, view, options, &mut body)?;
                Ok((suffix, sha256_hex(&body)))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })
    .await??;

    let mut compared = 0;
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    for replica in replicas {
        // The main file, byte for byte.
        let (status, headers, body) = replica.get(&format!("/api/graph/{id}/export")).await?;
        if status != 200 {
            problems.push(format!("{}: {id}/export answered {status}", replica.base));
            continue;
        }
        let name = headers
            .get("content-disposition")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split("filename=\"").nth(1))
            .map(|v| v.trim_end_matches('"').to_owned())
            .unwrap_or_default();
        match upload.files.iter().find(|f| f.name == name) {
            Some(sent) if sent.sha256 == sha256_hex(&body) && sent.len == body.len() => {}
            Some(_) => problems.push(format!(
                "{}: {id}/export ({name}) is not the file sent",
                replica.base
            )),
            None => problems.push(format!(
                "{}: {id}/export names {name:?}, not a file sent",
                replica.base
            )),
        }
        let mut paths: Vec<String> = local_views()
            .iter()
            .map(|(s, _, _)| s.to_string())
            .filter(|s| has_view(&upload.framework, s))
            .collect();
        paths.extend(REPLICA_VIEWS.iter().map(|s| s.to_string()));
        for suffix in &paths {
            let (status, _, body) = replica.get(&format!("/api/graph/{id}{suffix}")).await?;
            if status != 200 {
                problems.push(format!("{}: {id}{suffix} answered {status}", replica.base));
                continue;
            }
            compared += 1;
            let digest = sha256_hex(&body);
            if let Some((_, want)) = local.iter().find(|(s, _)| s == suffix) {
                if *want != digest {
                    problems.push(format!(
                        "{}: {id}{suffix} differs from the view parsed here from the bytes sent",
                        replica.base
                    ));
                }
            }
            match first.get(suffix) {
                Some(other) if *other != digest => problems.push(format!(
                    "{}: {id}{suffix} differs from the first replica's",
                    replica.base
                )),
                Some(_) => {}
                None => {
                    first.insert(suffix.clone(), digest);
                }
            }
        }
        // Searchable: the index holds every unit of the session (those of the annotations
        // with sub-agents).
        let (_, _, units) = replica
            .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
            .await?;
        let units = serde_json::from_slice::<Value>(&units).map_or(Value::Null, |v| v["total"].clone());
        let (status, _, found) = replica.get(&format!("/api/search?session={id}&limit=1")).await?;
        let found = serde_json::from_slice::<Value>(&found).map_or(Value::Null, |v| v["total"].clone());
        if status != 200 || found != units || !units.is_u64() {
            problems.push(format!(
                "{}: search finds {found} units of {id} (status {status}), its annotations list {units}",
                replica.base
            ));
        }
        // Info, but for when the replica last read it.
        let (status, _, body) = replica.get(&format!("/api/graph/{id}/info")).await?;
        let mut info: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if status != 200 || !info.is_object() {
            problems.push(format!("{}: {id}/info answered {status}", replica.base));
        } else {
            info.as_object_mut().map(|o| o.remove("last_accessed"));
            let digest = sha256_hex(info.to_string().as_bytes());
            match first.get("/info") {
                Some(other) if *other != digest => problems.push(format!(
                    "{}: {id}/info differs from the first replica's",
                    replica.base
                )),
                Some(_) => {}
                None => {
                    first.insert("/info".into(), digest);
                }
            }
        }
    }
    Ok((problems, compared))
}

/// Every acknowledged label write's set, as last acknowledged, on every replica.
async fn verify_labels(report: &mut Report, days: &[DayResults], replicas: &[Direct]) -> anyhow::Result<()> {
    // The last acknowledged write of each set (an annotator writes a set in order).
    let mut last: BTreeMap<(&str, &str, &str, &str), &LabelWrite> = BTreeMap::new();
    let writes: Vec<&LabelWrite> = days.iter().flat_map(|d| &d.labels).collect();
    for w in &writes {
        let key = (
            w.codebook.as_str(),
            w.session_id.as_str(),
            w.event_id.as_str(),
            w.annotator.as_str(),
        );
        match last.get(&key) {
            Some(before) if before.version > w.version => {}
            _ => {
                last.insert(key, w);
            }
        }
    }
    let sessions: BTreeSet<(&str, &str)> = last.keys().map(|(c, s, _, _)| (*c, *s)).collect();
    let replayed = writes.iter().filter(|w| w.ack == "412-replay").count();
    report
        .counts
        .insert("label writes acknowledged".into(), writes.len());
    report
        .counts
        .insert("label writes acknowledged by a 412 replay".into(), replayed);
    report.counts.insert("label sets checked".into(), last.len());
    let mut problems = Vec::new();
    for replica in replicas {
        for (codebook, session) in &sessions {
            let (status, _, body) = replica
                .get(&format!("/api/graph/{session}/labels?codebook={codebook}"))
                .await?;
            if status != 200 {
                problems.push(format!("{}: labels of {session} answered {status}", replica.base));
                continue;
            }
            let json: Value = serde_json::from_slice(&body)?;
            let stored: HashMap<(String, String), &Value> = json["labels"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|s| {
                    (
                        (
                            s["event_id"].as_str().unwrap_or_default().to_owned(),
                            s["annotator"].as_str().unwrap_or_default().to_owned(),
                        ),
                        s,
                    )
                })
                .collect();
            for ((c, s, event, annotator), w) in last.range((*codebook, *session, "", "")..) {
                if (c, s) != (codebook, session) {
                    break;
                }
                let Some(set) = stored.get(&(event.to_string(), annotator.to_string())) else {
                    problems.push(format!(
                        "{}: {annotator}'s set on {session}/{event} ({codebook}) is missing",
                        replica.base
                    ));
                    continue;
                };
                let labels: Vec<&str> = set["labels"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|l| l["id"].as_str())
                    .collect();
                let want: Vec<&str> = w.labels.iter().map(String::as_str).collect();
                if set["status"] != w.status.as_str() || labels != want || set["version"] != w.version {
                    problems.push(format!(
                        "{}: {annotator}'s set on {session}/{event}: stored {} {labels:?} v{}, acknowledged {} {want:?} v{}",
                        replica.base, set["status"], set["version"], w.status, w.version
                    ));
                }
            }
        }
    }
    report.check(
        "labels",
        &problems,
        format!(
            "{} acknowledged writes ({replayed} through a 412 replay), {} sets, each present with its status, labels and version on each of {} replicas",
            writes.len(),
            last.len(),
            replicas.len()
        ),
    );
    Ok(())
}

/// No unit of a round handed out to more annotators than its overlap, and none holding
/// more submitted sets than that, on any replica.
async fn verify_overlap(report: &mut Report, days: &[DayResults], replicas: &[Direct]) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    // Per unit and codebook, whichever queue handed it out (a round's or its session's):
    // the rounds' overlap is the day's, and so is the server's (--queue-overlap).
    let mut handed: BTreeMap<(&str, &str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut limit: HashMap<&str, usize> = HashMap::new();
    for day in days {
        for h in &day.handouts {
            let key = (h.codebook.as_str(), h.session_id.as_str(), h.event_id.as_str());
            handed.entry(key).or_default().insert(h.annotator.as_str());
            limit.entry(h.codebook.as_str()).or_insert(day.overlap);
        }
    }
    let rounds: Vec<&RoundRecord> = days.iter().flat_map(|d| &d.rounds).collect();
    for ((codebook, session, event), who) in &handed {
        let overlap = limit[codebook];
        if who.len() > overlap {
            problems.push(format!(
                "{session}/{event} ({codebook}) handed out to {} annotators ({who:?}), overlap {overlap}",
                who.len()
            ));
        }
    }
    let through_sessions = days
        .iter()
        .flat_map(|d| &d.handouts)
        .filter(|h| h.queue == "session")
        .count();
    let mut units = 0;
    let mut complete = 0;
    for replica in replicas {
        for round in &rounds {
            let (status, _, body) = replica.get(&format!("/api/rounds/{}/units", round.id)).await?;
            if status != 200 {
                problems.push(format!(
                    "{}: round {} units answered {status}",
                    replica.base, round.id
                ));
                continue;
            }
            let json: Value = serde_json::from_slice(&body)?;
            for unit in json["units"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let submitted = unit["sets"]
                    .as_object()
                    .map_or(0, |sets| sets.values().filter(|s| *s == "submitted").count());
                if submitted > round.overlap {
                    problems.push(format!(
                        "{}: round {} unit {}/{} has {submitted} submitted sets, overlap {}",
                        replica.base, round.id, unit["session_id"], unit["event_id"], round.overlap
                    ));
                }
                if std::ptr::eq(replica, &replicas[0]) {
                    units += 1;
                    complete += usize::from(submitted == round.overlap);
                }
            }
        }
    }
    // What the replicas say of the study is the same on each: the rounds' bodies, their
    // exports, agreement and progress.
    let mut shared: Vec<String> = vec![
        "/api/rounds".into(),
        "/api/labels/agreement".into(),
        "/api/labels/agreement?codebook=speechact".into(),
        "/api/labels/progress?all=true".into(),
        "/api/labels/export".into(),
        "/api/labels/export?codebook=speechact".into(),
    ];
    for round in &rounds {
        for suffix in ["", "/units", "/agreement"] {
            shared.push(format!("/api/rounds/{}{suffix}", round.id));
        }
        shared.push(format!("/api/labels/export?round={}", round.id));
        shared.push(format!("/api/labels/agreement?round={}", round.id));
    }
    for path in &shared {
        let mut first: Option<(String, Bytes)> = None;
        for replica in replicas {
            let (status, _, body) = replica.get(path).await?;
            if status != 200 {
                problems.push(format!("{}: {path} answered {status}", replica.base));
                continue;
            }
            match &first {
                None => first = Some((replica.base.clone(), body)),
                Some((base, other)) if *other != body => problems.push(format!(
                    "{path}: {} and {base} differ ({})",
                    replica.base,
                    first_difference(other, &body)
                )),
                Some(_) => {}
            }
        }
    }
    report
        .counts
        .insert("study bodies compared across replicas".into(), shared.len());
    report.counts.insert("rounds".into(), rounds.len());
    report.counts.insert("round units".into(), units);
    report.counts.insert("round units complete".into(), complete);
    report.counts.insert("units handed out".into(), handed.len());
    report
        .counts
        .insert("hand-outs through a session queue".into(), through_sessions);
    report.check(
        "rounds and overlap",
        &problems,
        format!(
            "{} rounds, {units} units ({complete} complete); {} units handed out ({through_sessions} hand-outs through a session's queue, the rest through a round's), none to more annotators than the overlap, none with more submitted sets on any replica; the rounds, their exports, agreement and progress the same on every replica",
            rounds.len(),
            handed.len()
        ),
    );
    Ok(())
}

/// Where two bodies first differ, with some context from each.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let around = |body: &[u8]| {
        let from = at.saturating_sub(60);
        String::from_utf8_lossy(&body[from..(at + 60).min(body.len())]).into_owned()
    };
    format!("at byte {at}: {:?} / {:?}", around(a), around(b))
}

/// Every response: no 500, no 502 or 504, every 503 with `Retry-After`, every error with
/// the JSON body, no answer the client did not expect, nothing given up.
fn verify_responses(report: &mut Report, days: &[DayResults], windows: &[Window]) {
    let mut problems = Vec::new();
    let mut total = 0;
    for day in days {
        let route = |r: &Resp| day.routes.get(r.r as usize).cloned().unwrap_or_default();
        let statuses = report.statuses.entry(day.phase.clone()).or_default();
        for r in &day.responses {
            total += 1;
            // In a fault's window when it was in flight during it.
            let end = r.t + (r.us / 1000) as i64;
            let window = windows
                .iter()
                .find(|w| r.t <= w.to_ms && end >= w.from_ms)
                .map_or("outside faults", |w| w.name.as_str());
            *statuses
                .entry(window.to_owned())
                .or_default()
                .entry(r.s)
                .or_default() += 1;
            let at = format!("{} {} at {} ({window})", day.phase, route(r), r.t);
            match r.s {
                0 => problems.push(format!("no response: {at}")),
                503 if !r.ra => problems.push(format!("503 without Retry-After: {at}")),
                503 => {}
                500..=599 => problems.push(format!("{}: {at}", r.s)),
                _ => {}
            }
            if r.s >= 400 && !r.j {
                problems.push(format!("{} without the JSON error body: {at}", r.s));
            }
            if r.x {
                problems.push(format!("{} not expected by the client: {at}", r.s));
            }
        }
        for f in &day.failures {
            problems.push(format!("{}: {f}", day.phase));
        }
    }
    for (phase, windows) in &report.statuses {
        for (window, statuses) in windows {
            let line: Vec<String> = statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
            println!("  {phase}, {window}: {}", line.join(", "));
        }
    }
    report.counts.insert("responses".into(), total);
    report.check(
        "errors",
        &problems,
        format!("{total} responses: no 500, 502 or 504, every 503 with Retry-After, every error a JSON body, nothing unexpected or given up"),
    );
}

/// p50 and p99 per route and phase (2xx responses), and the markdown table comparing the
/// phases.
fn latency_table(report: &mut Report, days: &[DayResults]) -> String {
    for day in days {
        let mut per_route: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in day.responses.iter().filter(|r| (200..300).contains(&r.s)) {
            let ms = r.us as f64 / 1000.0;
            let route = day.routes.get(r.r as usize).cloned().unwrap_or_default();
            per_route.entry(route).or_default().push(ms);
            per_route.entry("(all routes)".into()).or_default().push(ms);
        }
        report.latency.insert(
            day.phase.clone(),
            per_route
                .into_iter()
                .map(|(route, ms)| (route, latency_of(ms)))
                .collect(),
        );
    }
    let phases: Vec<&String> = days.iter().map(|d| &d.phase).collect();
    let routes: BTreeSet<&String> = report.latency.values().flat_map(|r| r.keys()).collect();
    let mut table = String::from("| route |");
    for phase in &phases {
        let _ = write!(table, " {phase}: n, p50 / p99 ms |");
    }
    table.push_str("\n|---|");
    for _ in &phases {
        table.push_str("---|");
    }
    table.push('\n');
    for route in routes {
        let _ = write!(table, "| `{route}` |");
        for phase in &phases {
            match report.latency.get(*phase).and_then(|r| r.get(route)) {
                Some(l) => {
                    let _ = write!(table, " {}, {:.1} / {:.1} |", l.count, l.p50_ms, l.p99_ms);
                }
                None => table.push_str(" |"),
            }
        }
        table.push('\n');
    }
    table
}
