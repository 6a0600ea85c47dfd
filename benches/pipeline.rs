//! Each pipeline stage, on the bundled CommuGraph sample and on the sample scaled 10x in
//! memory (sub-agents included): framing, parsing, dedup, grouping, ordering, the workflow
//! DAG, the whole build, and rendering each view. Ordering is also run on a single parent
//! chain of 1,000,000 units. Run with `cargo bench --bench pipeline`; the end-to-end figures
//! for large sessions come from `cargo run --release --example bench`.

#![expect(
    missing_docs,
    reason = "criterion_group! defines a public function it does not document"
)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sessiongraph::core::formats::claude_code::parse;
use sessiongraph::core::formats::claude_code::records::{Position, Record};
use sessiongraph::core::json::frame;
use sessiongraph::core::pipeline::dedup::dedup_records;
use sessiongraph::core::pipeline::group::group_turns;
use sessiongraph::core::pipeline::order::{order_units, OrderUnit, SortKey};
use sessiongraph::core::pipeline::workflow::{build_workflow, WorkflowInput};
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionInput};
use sessiongraph::store::disk;

#[path = "../tests/support/scaled.rs"]
mod scaled;

/// mimalloc, as in the server binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn sample() -> SessionInput {
    let main = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/commugraph-sample/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl");
    disk::read_session(&[main]).expect("the bundled sample is readable")
}

/// Every file's records, in session order (what dedup and grouping start from).
fn parsed_records(input: &SessionInput) -> Vec<Record> {
    input
        .files
        .iter()
        .enumerate()
        .flat_map(|(i, f)| parse::parse_file(i as u32, &f.bytes).records)
        .collect()
}

/// The ordering input of a built session: each unit's uuids and its first record's
/// parents.
fn order_input(session: &Session) -> Vec<OrderUnit<'_>> {
    session
        .units
        .iter()
        .map(|u| {
            let first = &session.records[u.records[0]];
            OrderUnit {
                ids: u
                    .records
                    .iter()
                    .filter_map(|&r| session.records[r].uuid.as_deref())
                    .collect(),
                parents: [first.logical_parent_uuid(), first.raw_parent(), None],
                key: SortKey::new(first.time, first.pos),
            }
        })
        .collect()
}

fn stages(c: &mut Criterion, name: &str, input: &SessionInput) {
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    g.throughput(Throughput::Bytes(input.total_bytes() as u64));
    g.bench_function("frame", |b| {
        b.iter(|| {
            input
                .files
                .iter()
                .map(|f| frame::lines(&f.bytes).count())
                .sum::<usize>()
        })
    });
    g.bench_function("parse", |b| b.iter(|| parsed_records(input).len()));
    let records = parsed_records(input);
    g.bench_function("dedup", |b| b.iter(|| dedup_records(&records, |_| true)));
    let dedup = dedup_records(&records, |_| true);
    g.bench_function("group", |b| {
        b.iter(|| group_turns(&records, |i| dedup.is_kept(i)).0.len())
    });
    g.bench_function("build", |b| {
        b.iter(|| Session::build(black_box(input), LoadOptions::default()).map(|s| s.items.len()))
    });
    let session = Session::build(input, LoadOptions::default()).expect("the session loads");
    let units = order_input(&session);
    g.bench_function("order", |b| b.iter(|| order_units(&units).sequence.len()));
    g.bench_function("workflow", |b| {
        b.iter(|| {
            build_workflow(&WorkflowInput {
                records: &session.records,
                turns: &session.turns,
                items: &session.items,
                include: None,
                agents: &session.agents,
                lanes: &session.lanes,
                record_sequence: &session.record_sequence,
                record_parent: &session.record_parent,
            })
            .nodes
            .len()
        })
    });
    for view in View::ALL {
        g.bench_function(BenchmarkId::new("render", view), |b| {
            b.iter(|| views::render(&session, view, ViewOptions::default()).len())
        });
    }
    g.finish();
}

fn sample_stages(c: &mut Criterion) {
    stages(c, "sample", &sample());
}

fn scaled_stages(c: &mut Criterion) {
    stages(c, "sample-x10", &scaled::scaled(&sample(), 10, false));
}

/// Ordering a single parent chain of a million units (the `--chain` shape, and the case
/// that would overflow a recursive sort).
fn long_chain(c: &mut Criterion) {
    let n = 1_000_000;
    let ids: Vec<String> = (0..n).map(|i| format!("u{i}")).collect();
    let units: Vec<OrderUnit<'_>> = (0..n)
        .map(|i| OrderUnit {
            ids: vec![ids[i].as_str()],
            parents: [None, i.checked_sub(1).map(|p| ids[p].as_str()), None],
            key: SortKey::new(
                Some(i as i64),
                Position {
                    file: 0,
                    line: i as u32 + 1,
                    seq: 0,
                },
            ),
        })
        .collect();
    let mut g = c.benchmark_group("chain");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("order-1M", |b| b.iter(|| order_units(&units).sequence.len()));
    g.finish();
}

criterion_group!(benches, sample_stages, scaled_stages, long_chain);
criterion_main!(benches);
