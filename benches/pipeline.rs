//! Pipeline stages on the bundled CommuGraph sample: framing, parsing, the whole build, and
//! rendering each view. Run with `cargo bench --bench pipeline`.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{frame, parse, LoadOptions, Session};
use sessiongraph::store::disk;

fn sample() -> sessiongraph::core::SessionInput {
    let main = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/commugraph-sample/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl");
    disk::read_session(&[main]).expect("the bundled sample is readable")
}

fn stages(c: &mut Criterion) {
    let input = sample();
    let bytes = input.total_bytes() as u64;
    let mut g = c.benchmark_group("sample");
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("frame", |b| {
        b.iter(|| {
            input
                .files
                .iter()
                .map(|f| frame::lines(&f.bytes).count())
                .sum::<usize>()
        })
    });
    g.bench_function("parse", |b| {
        b.iter(|| {
            input
                .files
                .iter()
                .enumerate()
                .map(|(i, f)| parse::parse_file(i as u32, &f.bytes).records.len())
                .sum::<usize>()
        })
    });
    g.bench_function("build", |b| {
        b.iter(|| Session::build(black_box(&input), LoadOptions::default()).map(|s| s.items.len()))
    });
    let session = Session::build(&input, LoadOptions::default()).expect("the sample loads");
    for view in View::ALL {
        g.bench_function(format!("render/{view}"), |b| {
            b.iter(|| views::render(&session, view, ViewOptions::default()).len())
        });
    }
    g.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
