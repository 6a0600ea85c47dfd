//! Writes the AutoGen logs that a review for hostile input measured the reader and the
//! graph with (finding F10 and the `?step` cut of a graph of many agents), for measuring
//! them again:
//!
//! - `empty-objects.json`: a JSON array of `{}` (28 MiB by default), no message in it;
//! - `small-messages.jsonl`: a million small sender/recipient messages, one a line;
//! - `agentchat-dump.json`: an AgentChat `TaskResult` (`{"messages": [...]}`) of about the
//!   same size as the small messages (600,000 messages, 52 MiB);
//! - `agents-100k.jsonl`: 100,000 messages, each from one agent to the next, so that the
//!   graph has 100,001 parties and 100,000 edges.
//!
//! ```sh
//! cargo run --release --example autogen_inputs -- /tmp/autogen
//! /usr/bin/time -v target/release/sessiongraph export --view graph /tmp/autogen/empty-objects.json
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// The directory to write the logs into (created if missing).
    out: PathBuf,
    /// Size of the array of empty objects, in MiB.
    #[arg(long, default_value_t = 28)]
    empty_mib: usize,
    /// Number of small messages.
    #[arg(long, default_value_t = 1_000_000)]
    messages: usize,
    /// Number of AgentChat messages.
    #[arg(long, default_value_t = 600_000)]
    agentchat_messages: usize,
    /// Number of agents of the graph of many agents (one message fewer).
    #[arg(long, default_value_t = 100_000)]
    agents: usize,
}

/// `[{},{},...]` of about `bytes` bytes.
fn empty_objects(out: &mut impl Write, bytes: usize) -> std::io::Result<()> {
    out.write_all(b"[{}")?;
    for _ in 1..bytes / 3 {
        out.write_all(b",{}")?;
    }
    out.write_all(b"]")
}

/// `n` sender/recipient messages among ten agents, one a line (about 50 bytes each).
fn small_messages(out: &mut impl Write, n: usize) -> std::io::Result<()> {
    for i in 0..n {
        writeln!(
            out,
            r#"{{"sender":"a{}","recipient":"a{}","message":"m{i}"}}"#,
            i % 10,
            (i + 1) % 10
        )?;
    }
    Ok(())
}

/// A `TaskResult` of `n` AgentChat text messages among ten agents, as AgentChat dumps them.
fn agentchat_dump(out: &mut impl Write, n: usize) -> std::io::Result<()> {
    out.write_all(b"{\"messages\": [\n")?;
    for i in 0..n {
        let comma = if i + 1 < n { "," } else { "" };
        writeln!(
            out,
            r#"  {{"source": "agent{}", "models_usage": null, "content": "m{i}", "type": "TextMessage"}}{comma}"#,
            i % 10
        )?;
    }
    out.write_all(b"], \"stop_reason\": \"Maximum number of messages reached.\"}\n")
}

/// `agents - 1` messages, message `i` from agent `i` to agent `i + 1`.
fn many_agents(out: &mut impl Write, agents: usize) -> std::io::Result<()> {
    for i in 0..agents.saturating_sub(1) {
        writeln!(
            out,
            r#"{{"sender":"agent{i}","recipient":"agent{}","message":"hello {i}"}}"#,
            i + 1
        )?;
    }
    Ok(())
}

fn write(
    dir: &Path,
    name: &str,
    body: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let path = dir.join(name);
    let mut out = BufWriter::new(File::create(&path)?);
    body(&mut out)?;
    out.flush()?;
    let bytes = std::fs::metadata(&path)?.len();
    println!("{}: {:.1} MiB", path.display(), bytes as f64 / (1 << 20) as f64);
    Ok(())
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    write(&args.out, "empty-objects.json", |o| {
        empty_objects(o, args.empty_mib << 20)
    })?;
    write(&args.out, "small-messages.jsonl", |o| {
        small_messages(o, args.messages)
    })?;
    write(&args.out, "agentchat-dump.json", |o| {
        agentchat_dump(o, args.agentchat_messages)
    })?;
    write(&args.out, "agents-100k.jsonl", |o| many_agents(o, args.agents))
}
