//! Benchmark of a round's sample (not a test): draws samples from a synthetic corpus of
//! candidate units, as `POST /api/rounds` does after its selection, and prints the time of
//! each draw (best and median of `--runs`) for each sampling design.
//!
//! ```sh
//! cargo run --release --example round_sample_bench -- --units 1000000 --sessions 2000 --size 100
//! ```
//!
//! The corpus: `--sessions` sessions sharing `--units` units evenly, every third a user
//! turn, the rest assistant turns (the unit types the built-in codebooks code).

use std::time::{Duration, Instant};

use clap::Parser;
use sessiongraph::rounds::sample::{draw, Candidate, SampleSpec, Strata};

/// What to draw from.
#[derive(Parser)]
struct Args {
    /// Candidate units in all.
    #[arg(long, default_value_t = 1_000_000)]
    units: usize,
    /// Sessions they belong to.
    #[arg(long, default_value_t = 2_000)]
    sessions: usize,
    /// Units drawn.
    #[arg(long, default_value_t = 100)]
    size: usize,
    /// Draws per design.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn corpus(units: usize, sessions: usize) -> Vec<Candidate> {
    (0..units)
        .map(|i| Candidate {
            session_id: format!("{:016x}", i % sessions),
            event_id: format!("A:req_{i:08}:msg_{i:08}"),
            unit_type: if i % 3 == 0 { "user_turn" } else { "assistant_turn" }.to_owned(),
        })
        .collect()
}

fn main() {
    let args = Args::parse();
    let started = Instant::now();
    let candidates = corpus(args.units, args.sessions);
    println!(
        "{} candidates in {} sessions, built in {:.2?}; drawing {} ({} runs each)",
        candidates.len(),
        args.sessions,
        started.elapsed(),
        args.size,
        args.runs
    );
    let designs = [
        ("simple", Strata::default(), None),
        (
            "by session",
            Strata {
                session: true,
                unit_type: false,
            },
            None,
        ),
        (
            "by session and unit type",
            Strata {
                session: true,
                unit_type: true,
            },
            None,
        ),
        (
            "by unit type, at most 1 per session",
            Strata {
                session: false,
                unit_type: true,
            },
            Some(1),
        ),
    ];
    for (name, stratify, max_per_session) in designs {
        let spec = SampleSpec {
            size: Some(args.size),
            seed: 2026,
            stratify,
            max_per_session,
        };
        let mut times: Vec<Duration> = (0..args.runs)
            .map(|_| {
                let start = Instant::now();
                let sample = draw(&candidates, &spec);
                let took = start.elapsed();
                assert_eq!(sample.len(), args.size.min(candidates.len()));
                took
            })
            .collect();
        times.sort();
        println!(
            "{name:>38}: best {:.0?}, median {:.0?}",
            times[0],
            times[times.len() / 2]
        );
    }
}
