//! Times the reading of one session: its files (a main log and the files beside it, or
//! every file named) loaded `--runs` times; prints the best time of the parse stage and of
//! the whole build, per MB of input. Compares formats on equal terms (used for the Codex
//! figures of `docs/performance.md`).
//!
//! ```sh
//! cargo run --release -p sessiongraph-core --example parse_rate -- 20 main.jsonl [more files...]
//! ```

use std::time::{Duration, Instant};

use sessiongraph_core::{LoadOptions, Session, SessionInput, SourceFile};

/// The server binary's allocator, so that the times are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args
        .next()
        .and_then(|n| n.parse().ok())
        .expect("usage: parse_rate RUNS FILE...");
    let files: Vec<SourceFile> = args
        .map(|p| SourceFile::new(p.clone(), std::fs::read(&p).expect("readable file")))
        .collect();
    let input = SessionInput::new(files);
    let mb = input.total_bytes() as f64 / 1e6;
    let (mut best_parse, mut best_build) = (Duration::MAX, Duration::MAX);
    let mut format = "";
    for _ in 0..runs {
        let start = Instant::now();
        let session = Session::build(&input, LoadOptions::default()).expect("the session loads");
        best_build = best_build.min(start.elapsed());
        let parse = session
            .timings
            .iter()
            .find(|(stage, _)| *stage == "parse")
            .map(|t| t.1);
        best_parse = best_parse.min(parse.unwrap_or_default());
        format = session.format.name();
    }
    let per_mb = |d: Duration| d.as_secs_f64() * 1e3 / mb;
    println!(
        "{format}: {mb:.2} MB; parse {:.2} ms ({:.2} ms/MB); build {:.2} ms ({:.2} ms/MB); best of {runs}",
        best_parse.as_secs_f64() * 1e3,
        per_mb(best_parse),
        best_build.as_secs_f64() * 1e3,
        per_mb(best_build)
    );
}
