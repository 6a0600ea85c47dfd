//! End-to-end benchmark of one session: reads its files, builds it, renders every view, and
//! prints the time of each stage, the total, the throughput, the peak memory, and the same
//! run's floor (read + split + `serde_json::from_slice::<IgnoredAny>` per line).
//!
//! ```sh
//! cargo run --release --example scale -- fixtures/commugraph-sample /tmp/x100 -n 100
//! cargo run --release --example bench -- --runs 3 /tmp/x100/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl
//! ```
//!
//! PATH is what `sessiongraph export` takes: a main log, a directory, or several files.
//!
//! The total is read + build + one body of each view with default options, the views
//! rendered concurrently as the server renders the concurrent requests of a frontend
//! opening a session. The variants (sub-agents included, active branch) are rendered after
//! the total and listed on their own. Each run is a fresh process (warm the page cache,
//! measure the floor, run the pipeline); with `--runs N` every figure is the median of N.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use rayon::prelude::*;
use sessiongraph::core::json::frame;
use sessiongraph::core::pipeline::session::Branch;
use sessiongraph::core::views::{self, Body, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session};
use sessiongraph::store::disk;

/// mimalloc, as in the server binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Runs to take the median of.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Render only this view, this many times, after the runs (for profiling one view).
    #[arg(long)]
    repeat_view: Option<View>,
    /// How many times to render `--repeat-view`.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Measure once in this process and print tab-separated figures (used by the runs).
    #[arg(long, hide = true)]
    child: bool,
    /// The session: a main log, a directory, or several files.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// One run's figures, by line label, in print order.
type Figures = Vec<(String, Duration, Option<usize>)>;

/// Peak resident memory so far, in MiB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Read + split + validate each line as JSON, on one thread.
fn floor(args: &Args) -> Duration {
    let started = Instant::now();
    let input = disk::read_session(&args.paths).expect("the session is readable");
    for f in &input.files {
        for line in frame::lines(&f.bytes) {
            let _ = serde_json::from_slice::<serde::de::IgnoredAny>(line.bytes);
        }
    }
    started.elapsed()
}

/// One run of the pipeline; returns its figures, the session, the bodies, and the peak
/// resident memory once every view was rendered (before the variants).
fn run(args: &Args) -> (Figures, Session, Vec<Body>, f64) {
    let mut figures = Figures::new();
    let started = Instant::now();
    let input = disk::read_session(&args.paths).expect("the session is readable");
    figures.push(("read".into(), started.elapsed(), None));
    let build_started = Instant::now();
    let session = Session::build(&input, LoadOptions::default()).expect("the session loads");
    drop(input);
    for (stage, d) in &session.timings {
        figures.push((format!("build/{stage}"), *d, None));
    }
    figures.push(("build (all)".into(), build_started.elapsed(), None));

    let render_started = Instant::now();
    let rendered: Vec<(View, Duration, Body)> = View::ALL
        .par_iter()
        .map(|&view| {
            let t = Instant::now();
            let body = views::render(&session, view, ViewOptions::default());
            (view, t.elapsed(), body)
        })
        .collect();
    let render_wall = render_started.elapsed();
    let total = started.elapsed();
    let mut bodies = Vec::new();
    for (view, d, body) in rendered {
        figures.push((format!("render/{view}"), d, Some(body.len())));
        bodies.push(body);
    }
    figures.push(("render (all, concurrent)".into(), render_wall, None));
    figures.push(("total".into(), total, None));
    let rss_views = peak_rss_mb();

    let all = ViewOptions::default();
    let variants = [
        (
            "annotations+sub",
            View::Annotations,
            ViewOptions {
                include_subagents: true,
                ..all
            },
        ),
        (
            "chatlog+sub",
            View::Chatlog,
            ViewOptions {
                include_subagents: true,
                ..all
            },
        ),
        (
            "workflow active",
            View::Workflow,
            ViewOptions {
                branch: Branch::Active,
                ..all
            },
        ),
    ];
    for (name, view, options) in variants {
        let t = Instant::now();
        let body = views::render(&session, view, options);
        figures.push((format!("variant/{name}"), t.elapsed(), Some(body.len())));
        bodies.push(body);
    }
    (figures, session, bodies, rss_views)
}

/// What one process measured: the floor, every figure, and the peak memory.
struct Measured {
    floor: Duration,
    figures: Figures,
    rss_views: f64,
    rss_all: f64,
    views_held: usize,
    all_held: usize,
    /// What the bodies hold themselves (the rest is the input's text, by reference).
    views_own: usize,
    all_own: usize,
    records: usize,
    /// What the built session holds, by part (see `Session::heap_breakdown`).
    held: Vec<(String, usize)>,
}

/// Measures in this process: warm the page cache, then the floor, then the pipeline.
fn measure(args: &Args) -> (Measured, Session) {
    let warm = disk::read_session(&args.paths).expect("the session is readable");
    drop(warm);
    let floor = floor(args);
    let (figures, session, bodies, rss_views) = run(args);
    let measured = Measured {
        floor,
        figures,
        rss_views,
        rss_all: peak_rss_mb(),
        views_held: bodies.iter().take(View::ALL.len()).map(Body::len).sum(),
        all_held: bodies.iter().map(Body::len).sum(),
        views_own: bodies.iter().take(View::ALL.len()).map(Body::held_bytes).sum(),
        all_own: bodies.iter().map(Body::held_bytes).sum(),
        records: session.records.len(),
        held: session
            .heap_breakdown()
            .into_iter()
            .map(|(part, bytes)| (part.to_owned(), bytes))
            .collect(),
    };
    (measured, session)
}

/// One process's figures as tab-separated lines, for the parent to read.
fn print_machine(m: &Measured) {
    println!("floor\t{}\t", m.floor.as_nanos());
    for (label, d, len) in &m.figures {
        println!(
            "{label}\t{}\t{}",
            d.as_nanos(),
            len.map_or(String::new(), |l| l.to_string())
        );
    }
    println!("rss_views\t{}\t{}", m.rss_views, m.views_held);
    println!("rss_all\t{}\t{}", m.rss_all, m.all_held);
    println!("own\t{}\t{}", m.views_own, m.all_own);
    println!("records\t{}\t", m.records);
    for (part, bytes) in &m.held {
        println!("held\t{bytes}\t{part}");
    }
}

/// Reads a child's tab-separated figures.
fn parse_machine(text: &str) -> Measured {
    let mut m = Measured {
        floor: Duration::ZERO,
        figures: Figures::new(),
        rss_views: 0.0,
        rss_all: 0.0,
        views_held: 0,
        all_held: 0,
        views_own: 0,
        all_own: 0,
        records: 0,
        held: Vec::new(),
    };
    for line in text.lines() {
        let mut parts = line.split('\t');
        let (Some(label), Some(value), Some(extra)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let nanos = || Duration::from_nanos(value.parse().unwrap_or(0));
        match label {
            "floor" => m.floor = nanos(),
            "rss_views" => {
                (m.rss_views, m.views_held) = (value.parse().unwrap_or(0.0), extra.parse().unwrap_or(0))
            }
            "rss_all" => (m.rss_all, m.all_held) = (value.parse().unwrap_or(0.0), extra.parse().unwrap_or(0)),
            "records" => m.records = value.parse().unwrap_or(0),
            "own" => (m.views_own, m.all_own) = (value.parse().unwrap_or(0), extra.parse().unwrap_or(0)),
            "held" => m.held.push((extra.to_owned(), value.parse().unwrap_or(0))),
            _ => m.figures.push((label.to_owned(), nanos(), extra.parse().ok())),
        }
    }
    m
}

fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    if args.child {
        let (measured, _) = measure(&args);
        print_machine(&measured);
        return;
    }

    // Each run in a fresh process, so that runs do not inherit each other's memory.
    let runs: Vec<Measured> = (0..args.runs.max(1))
        .map(|_| {
            let out = std::process::Command::new(std::env::current_exe().expect("the bench's own path"))
                .arg("--child")
                .args(&args.paths)
                .output()
                .expect("the bench runs itself");
            assert!(
                out.status.success(),
                "a run failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            parse_machine(&String::from_utf8_lossy(&out.stdout))
        })
        .collect();

    let warm = disk::read_session(&args.paths).expect("the session is readable");
    let bytes = warm.total_bytes();
    let files = warm.files.len();
    let lines: usize = warm.files.iter().map(|f| frame::lines(&f.bytes).count()).sum();
    drop(warm);
    let size = mib(bytes);
    let floor = median(runs.iter().map(|m| m.floor).collect());
    println!(
        "input            {files} files, {size:.1} MiB, {lines} lines, {} records; median of {} runs",
        runs[0].records,
        runs.len()
    );
    println!(
        "floor            {:8.1} ms  (read + split + IgnoredAny per line)",
        ms(floor)
    );
    let mut total = Duration::ZERO;
    for (i, (label, _, len)) in runs[0].figures.iter().enumerate() {
        let d = median(runs.iter().map(|m| m.figures[i].1).collect());
        if label == "total" {
            total = d;
        }
        match len {
            Some(len) => println!("{label:<26} {:8.1} ms  {:7.1} MiB", ms(d), mib(*len)),
            None => println!("{label:<26} {:8.1} ms", ms(d)),
        }
    }
    let ratios: Vec<f64> = runs
        .iter()
        .map(|m| {
            let t = m
                .figures
                .iter()
                .find(|f| f.0 == "total")
                .map_or(Duration::ZERO, |f| f.1);
            t.as_secs_f64() / m.floor.as_secs_f64()
        })
        .collect();
    println!("throughput       {:8.1} MiB/s", size / total.as_secs_f64());
    println!(
        "total / floor    {:8.2}  (median of each run's own ratio)",
        median(ratios)
    );
    let rss_views = median(runs.iter().map(|m| m.rss_views).collect());
    let rss_all = median(runs.iter().map(|m| m.rss_all).collect());
    println!(
        "peak RSS, views  {rss_views:8.1} MiB  ({:.2} x input; {:.1} MiB of bodies held, {:.1} MiB their own)",
        rss_views / size,
        mib(runs[0].views_held),
        mib(runs[0].views_own)
    );
    println!(
        "peak RSS, all    {rss_all:8.1} MiB  ({:.2} x input; {:.1} MiB of bodies held, {:.1} MiB their own, variants too)",
        rss_all / size,
        mib(runs[0].all_held),
        mib(runs[0].all_own)
    );
    let held: usize = runs[0].held.iter().map(|(_, bytes)| bytes).sum();
    let records = runs[0].records.max(1);
    println!(
        "session held     {:8.1} MiB  ({:.2} x input; {} bytes per record)",
        mib(held),
        mib(held) / size,
        held / records
    );
    for (part, bytes) in runs[0].held.iter().filter(|(_, bytes)| *bytes > 0) {
        println!(
            "  {part:<14} {:8.1} MiB  ({} bytes per record)",
            mib(*bytes),
            bytes / records
        );
    }

    if let Some(view) = args.repeat_view {
        let input = disk::read_session(&args.paths).expect("the session is readable");
        let session = Session::build(&input, LoadOptions::default()).expect("the session loads");
        drop(input);
        for _ in 0..args.repeat {
            let t = Instant::now();
            let body = views::render(&session, view, ViewOptions::default());
            println!(
                "repeat/{view:<14} {:8.1} ms  {:7.1} MiB",
                ms(t.elapsed()),
                mib(body.len())
            );
        }
    }
}
