//! Writes an N-times larger copy of a session (sub-agents included) for benchmarks: the
//! Rust twin of the `scale.py` benchmark tool (see `tests/support/scaled.rs` for the rules).
//!
//! ```sh
//! cargo run --release --example scale -- fixtures/commugraph-sample /tmp/x100 -n 100 [--chain]
//! ```

use std::path::PathBuf;

use clap::Parser;
use sessiongraph::store::disk;

#[path = "../tests/support/scaled.rs"]
mod scaled;

#[derive(Parser)]
struct Args {
    /// The session: a main log or a directory holding one session.
    source: PathBuf,
    /// The directory to write the copy into (created if missing).
    out: PathBuf,
    /// How many copies.
    #[arg(short)]
    n: usize,
    /// Chain the copies into one long conversation instead of independent trees.
    #[arg(long)]
    chain: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let input = disk::read_session(&[args.source])?;
    let scaled = scaled::scaled(&input, args.n, args.chain);
    std::fs::create_dir_all(&args.out)?;
    for file in &scaled.files {
        let name = std::path::Path::new(&file.name)
            .file_name()
            .ok_or_else(|| anyhow::anyhow!("a file without a name: {}", file.name))?;
        std::fs::write(args.out.join(name), &file.bytes)?;
    }
    println!(
        "{} files, {:.1} MiB in {}",
        scaled.files.len(),
        scaled.total_bytes() as f64 / (1 << 20) as f64,
        args.out.display()
    );
    Ok(())
}
