//! `sessiongraph export` against the JSON floor, side by side: each run is a fresh process
//! of each, alternating (floor, export, floor, export, ...), timed from spawn to exit.
//!
//! ```sh
//! cargo build --release --bins --examples
//! cargo run --release --example export_bench -- --runs 7 --view workflow /tmp/x100/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl
//! ```
//!
//! The floor is what `examples/bench` measures in-process, in a process of its own: read
//! every file of the session, split it into lines and check each line is JSON
//! (`serde_json::from_slice::<IgnoredAny>`), on one thread. Both pay the same start-up and
//! the same first touch of fresh memory, which on a virtual machine is much of either.
//! The export writes to `/dev/null`, or to a file with `--to-file`. Peak memory is each
//! process's own (its `ru_maxrss`, from `wait4`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use sessiongraph::core::json::frame;
use sessiongraph::store::disk;

/// mimalloc, as in the server binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Pairs of runs (floor, export) to take the medians of.
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// The view to export.
    #[arg(long, default_value = "workflow")]
    view: String,
    /// Write the export to a file (in the system's temporary directory) instead of
    /// `/dev/null`.
    #[arg(long)]
    to_file: bool,
    /// The `sessiongraph` binary (default: the one beside this example's directory).
    #[arg(long)]
    sessiongraph: Option<PathBuf>,
    /// Measure the floor once in this process and exit (used by the runs).
    #[arg(long, hide = true)]
    floor: bool,
    /// The session: what `sessiongraph export` takes.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Read + split + validate each line as JSON, on one thread.
fn floor(paths: &[PathBuf]) -> usize {
    let input = disk::read_session(paths).expect("the session is readable");
    let mut valid = 0;
    for f in &input.files {
        for line in frame::lines(&f.bytes) {
            valid += usize::from(serde_json::from_slice::<serde::de::IgnoredAny>(line.bytes).is_ok());
        }
    }
    valid
}

/// What one process took: its wall time and its peak resident memory.
struct Run {
    time: Duration,
    peak_bytes: u64,
}

/// Runs `command` to its end; its wall time and peak RSS.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which gives its rusage too"
)]
fn run(mut command: Command) -> Run {
    let started = Instant::now();
    let child = command.spawn().expect("the command starts");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the C struct wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not waited for elsewhere; both pointers are valid for
    // the call.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let time = started.elapsed();
    assert!(
        pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{command:?} failed (status {status})"
    );
    Run {
        time,
        // ru_maxrss is in KiB on Linux.
        peak_bytes: usage.ru_maxrss as u64 * 1024,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// The `sessiongraph` binary built beside this example.
fn sibling_binary() -> PathBuf {
    let me = std::env::current_exe().expect("the example's own path");
    let dir = me
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    dir.join("sessiongraph")
}

fn main() {
    let args = Args::parse();
    if args.floor {
        println!("{}", floor(&args.paths));
        return;
    }
    let sessiongraph = args.sessiongraph.clone().unwrap_or_else(sibling_binary);
    let out_path = std::env::temp_dir().join(format!("export-bench-{}.json", std::process::id()));
    let input_bytes: u64 = disk::read_session(&args.paths)
        .expect("the session is readable")
        .files
        .iter()
        .map(|f| f.bytes.len() as u64)
        .sum();
    let (mut floors, mut exports, mut ratios, mut peaks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.runs.max(1) {
        let mut floor = Command::new(std::env::current_exe().expect("the example's own path"));
        floor.arg("--floor").args(&args.paths).stdout(Stdio::null());
        let floor = run(floor);
        let mut export = Command::new(&sessiongraph);
        export.args(["export", "--view", &args.view]).args(&args.paths);
        let sink = if args.to_file {
            std::fs::File::create(&out_path).expect("a file to write to")
        } else {
            std::fs::File::create("/dev/null").expect("/dev/null")
        };
        export.stdout(sink);
        let export = run(export);
        ratios.push(Duration::from_secs_f64(
            export.time.as_secs_f64() / floor.time.as_secs_f64(),
        ));
        floors.push(floor.time);
        exports.push(export.time);
        peaks.push(export.peak_bytes);
    }
    let _ = std::fs::remove_file(&out_path);
    peaks.sort_unstable();
    let peak = peaks[peaks.len() / 2];
    println!(
        "input {:.1} MiB; {} alternating runs, medians",
        mib(input_bytes),
        args.runs.max(1)
    );
    println!("floor (fresh process)   {:8.1} ms", ms(median(floors)));
    println!(
        "export --view {:<10}{:8.1} ms  (to {})",
        args.view,
        ms(median(exports)),
        if args.to_file { "a file" } else { "/dev/null" }
    );
    println!(
        "export / floor          {:8.2}  (median of each pair's ratio)",
        median(ratios).as_secs_f64()
    );
    println!(
        "export peak RSS         {:8.1} MiB  ({:.2} x input)",
        mib(peak),
        peak as f64 / input_bytes as f64
    );
}
