//! End-to-end benchmark of one session: reads its files, builds it, renders every view, and
//! prints the time of each stage, the total, the throughput, the peak memory, and the same
//! run's floor (read + split + `serde_json::from_slice::<IgnoredAny>` per line).
//!
//! ```sh
//! python3 ../shared/tools/scale.py fixtures/commugraph-sample /tmp/x100 -n 100
//! cargo run --release --example bench -- /tmp/x100/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl
//! ```
//!
//! PATH is what `sessiongraph export` takes: a main log, a directory, or several files.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use sessiongraph::core::session::Branch;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{frame, LoadOptions, Session};
use sessiongraph::store::disk;

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

fn main() {
    let paths: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        eprintln!("usage: bench PATH...");
        std::process::exit(2);
    }

    // Warm the page cache, so that floor and pipeline read the same way.
    let warm = disk::read_session(&paths).expect("the session is readable");
    let bytes: usize = warm.total_bytes();
    let files = warm.files.len();
    drop(warm);

    // The floor: read, split, validate each line as JSON.
    let started = Instant::now();
    let input = disk::read_session(&paths).expect("the session is readable");
    let mut lines = 0usize;
    for f in &input.files {
        for line in frame::lines(&f.bytes) {
            lines += 1;
            let _ = serde_json::from_slice::<serde::de::IgnoredAny>(line.bytes);
        }
    }
    let floor = started.elapsed();
    drop(input);

    // The pipeline: read, build, render every view.
    let started = Instant::now();
    let input = disk::read_session(&paths).expect("the session is readable");
    let read = started.elapsed();
    let session = Session::build(&input, LoadOptions::default()).expect("the session loads");
    drop(input);
    let built = started.elapsed();
    let mut rendered = Vec::new();
    let all = ViewOptions::default();
    let variants = [
        ("annotations", View::Annotations, all),
        (
            "annotations+sub",
            View::Annotations,
            ViewOptions {
                include_subagents: true,
                ..all
            },
        ),
        ("workflow", View::Workflow, all),
        (
            "workflow active",
            View::Workflow,
            ViewOptions {
                branch: Branch::Active,
                ..all
            },
        ),
        ("chatlog", View::Chatlog, all),
        (
            "chatlog+sub",
            View::Chatlog,
            ViewOptions {
                include_subagents: true,
                ..all
            },
        ),
        ("graph", View::Graph, all),
        ("metrics", View::Metrics, all),
        ("diagnostics", View::Diagnostics, all),
        ("branches", View::Branches, all),
        ("context", View::Context, all),
    ];
    let mut render_times = Vec::new();
    for (name, view, options) in variants {
        let t = Instant::now();
        let body = views::render(&session, view, options);
        render_times.push((name, t.elapsed(), body.len()));
        rendered.push(body);
    }
    let total = started.elapsed();
    let rss = peak_rss_mb();

    let mb = bytes as f64 / (1 << 20) as f64;
    println!(
        "input            {files} files, {mb:.1} MiB, {lines} lines, {} records",
        session.records.len()
    );
    println!(
        "floor            {:8.1} ms  (read + split + IgnoredAny per line)",
        ms(floor)
    );
    println!("read             {:8.1} ms", ms(read));
    for (stage, d) in &session.timings {
        println!("build/{stage:<10} {:8.1} ms", ms(*d));
    }
    println!("build (all)      {:8.1} ms", ms(built - read));
    for (name, d, len) in &render_times {
        println!(
            "render/{name:<16} {:8.1} ms  {:7.1} MiB",
            ms(*d),
            *len as f64 / (1 << 20) as f64
        );
    }
    println!("total            {:8.1} ms", ms(total));
    println!("throughput       {:8.1} MiB/s", mb / total.as_secs_f64());
    println!(
        "total / floor    {:8.2}",
        total.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "peak RSS         {rss:8.1} MiB  ({:.2} x input, all views rendered and held)",
        rss / mb
    );
    std::hint::black_box(&rendered);
}
