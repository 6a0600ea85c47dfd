//! The complexity guard: loading and rendering a session does work in proportion to its
//! size. Time is not measured (it varies from machine to machine and run to run); the heap
//! allocations made while building a session and rendering every view are counted instead,
//! on a session scaled 4x and 16x. A quadratic pass that allocates per pair of records or
//! nodes (a `collect` or `format!` inside a scan of all the others) makes the counts grow
//! 16-fold per 4x; linear work grows them 4-fold.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use sessiongraph::core::session::Branch;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session};

use crate::helpers::fixture_input;
use crate::scaled::scaled;

/// The allocator of the test binary: the system's, counting the allocations of threads that
/// ask for it.
struct CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

fn count(bytes: usize) {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; counting touches only atomics and
// a const-initialised thread-local, neither of which allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        System.realloc(ptr, layout, new_size)
    }
}

/// Allocations made by a piece of work.
#[derive(Debug, Clone, Copy)]
struct Work {
    allocations: u64,
    bytes: u64,
}

/// One measurement at a time: the counters are shared.
static MEASURING: Mutex<()> = Mutex::new(());

/// Runs `work` on a two-thread pool whose threads are counted (the core parses in
/// parallel), and returns what it allocated.
fn measure(work: impl FnOnce() + Send) -> Work {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .start_handler(|_| COUNTED.with(|c| c.set(true)))
        .build()
        .expect("a thread pool");
    pool.install(|| ());
    ALLOCATIONS.store(0, Ordering::Relaxed);
    ALLOCATED_BYTES.store(0, Ordering::Relaxed);
    pool.install(work);
    Work {
        allocations: ALLOCATIONS.load(Ordering::Relaxed),
        bytes: ALLOCATED_BYTES.load(Ordering::Relaxed),
    }
}

/// Builds the session scaled `n` times and renders every view and variant.
fn load_and_render(n: usize, chain: bool) -> (Work, usize) {
    let input = scaled(&fixture_input("synthetic/subagents"), n, chain);
    let mut records = 0;
    let work = measure(|| {
        let session = Session::build(&input, LoadOptions::default()).expect("the session loads");
        records = session.records.len();
        for view in View::ALL {
            for (include_subagents, branch) in [(false, Branch::All), (true, Branch::Active)] {
                let options = ViewOptions {
                    step: None,
                    include_subagents,
                    branch,
                };
                std::hint::black_box(views::render(&session, view, options));
            }
        }
    });
    (work, records)
}

/// Growth factor allowed per 4x input: linear is 4 (a little more for per-session fixed
/// costs amortised differently); quadratic would be 16.
const MAX_GROWTH: f64 = 5.0;

fn assert_linear(chain: bool) {
    let sizes = [4, 16, 64];
    let runs: Vec<(Work, usize)> = sizes.iter().map(|&n| load_and_render(n, chain)).collect();
    for (pair, sizes) in runs.windows(2).zip(sizes.windows(2)) {
        let (small, large) = (&pair[0], &pair[1]);
        assert_eq!(large.1, small.1 * 4, "the scaled sessions hold 4x the records");
        let allocations = large.0.allocations as f64 / small.0.allocations as f64;
        let bytes = large.0.bytes as f64 / small.0.bytes as f64;
        assert!(
            allocations <= MAX_GROWTH && bytes <= MAX_GROWTH,
            "{}x -> {}x copies (chain: {chain}): allocations grew {allocations:.2}x, bytes {bytes:.2}x \
             ({small:?} -> {large:?})",
            sizes[0],
            sizes[1],
        );
    }
}

#[test]
fn loading_and_rendering_allocate_linearly_in_the_session_size() {
    assert_linear(false);
}

#[test]
fn a_long_parent_chain_allocates_linearly_too() {
    assert_linear(true);
}
