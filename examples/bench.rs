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
//! the total and listed on their own. With `--runs N` every figure is the median of N runs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use rayon::prelude::*;
use sessiongraph::core::session::Branch;
use sessiongraph::core::views::{self, Body, View, ViewOptions};
use sessiongraph::core::{frame, LoadOptions, Session};
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
    /// The session: a main log, a directory, or several files.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// The views of the total, with their default options.
const VIEWS: [View; 8] = [
    View::Annotations,
    View::Workflow,
    View::Chatlog,
    View::Graph,
    View::Metrics,
    View::Diagnostics,
    View::Branches,
    View::Context,
];

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

/// One run of the pipeline; returns its figures and the session.
fn run(args: &Args) -> (Figures, Session, Vec<Body>) {
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
    let rendered: Vec<(View, Duration, Body)> = VIEWS
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
    (figures, session, bodies)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    let runs = args.runs.max(1);

    // Warm the page cache, so that floor and pipeline read the same way.
    let warm = disk::read_session(&args.paths).expect("the session is readable");
    let bytes: usize = warm.total_bytes();
    let files = warm.files.len();
    let lines: usize = warm.files.iter().map(|f| frame::lines(&f.bytes).count()).sum();
    drop(warm);

    let mut floors = Vec::new();
    let mut all: Vec<Figures> = Vec::new();
    let mut last: Option<(Session, Vec<Body>)> = None;
    for _ in 0..runs {
        // The previous run's session and bodies are dropped before the next run starts.
        drop(last.take());
        floors.push(floor(&args));
        let (figures, session, bodies) = run(&args);
        all.push(figures);
        last = Some((session, bodies));
    }
    let rss = peak_rss_mb();
    let (session, bodies) = last.expect("at least one run");

    let floor = median(floors);
    let size = mib(bytes);
    println!(
        "input            {files} files, {size:.1} MiB, {lines} lines, {} records",
        session.records.len()
    );
    println!(
        "floor            {:8.1} ms  (read + split + IgnoredAny per line)",
        ms(floor)
    );
    let mut total = Duration::ZERO;
    for (i, (label, _, len)) in all[0].iter().enumerate() {
        let d = median(all.iter().map(|f| f[i].1).collect());
        if label == "total" {
            total = d;
        }
        match len {
            Some(len) => println!("{label:<26} {:8.1} ms  {:7.1} MiB", ms(d), mib(*len)),
            None => println!("{label:<26} {:8.1} ms", ms(d)),
        }
    }
    println!("throughput       {:8.1} MiB/s", size / total.as_secs_f64());
    println!(
        "total / floor    {:8.2}",
        total.as_secs_f64() / floor.as_secs_f64()
    );
    let held: usize = bodies.iter().map(Body::len).sum();
    println!(
        "peak RSS         {rss:8.1} MiB  ({:.2} x input; {:.1} MiB of bodies held)",
        rss / size,
        mib(held)
    );
    drop(bodies);

    if let Some(view) = args.repeat_view {
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
