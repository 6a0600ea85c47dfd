//! Loads every Gemini CLI chat under a directory (with the sub-agents' chats beside each,
//! as a sessions directory is read) and prints one row per file: the units of the
//! annotation view (sub-agents' included), the tool calls they make, the calls the log
//! marks failed, the sub-agents tied to the chat, and what loading recorded in the
//! diagnostics (bad lines, orphans, unknown types, sub-agents missing or not tied).
//!
//! ```sh
//! cargo run --example gemini_table -- fixtures/gemini
//! ```

use std::path::{Path, PathBuf};

use clap::Parser;
use sessiongraph::core::formats::gemini;
use sessiongraph::core::pipeline::load::LoadOptions;
use sessiongraph::core::pipeline::session::{Branch, Session};
use sessiongraph::core::views::annotations::annotations;
use sessiongraph::store::disk;

#[derive(Parser)]
struct Args {
    /// The directory to walk (every `*.json` and `*.jsonl` file below it).
    dir: PathBuf,
}

/// Every `*.json` and `*.jsonl` file below `dir`, in path order.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if path.is_dir() {
                dirs.push(path);
            } else if ext == "json" || ext == "jsonl" {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// One row of the table, or why the file did not load.
fn row(path: &Path) -> Result<String, String> {
    let input = disk::read_session(&[path.to_owned()]).map_err(|e| e.to_string())?;
    let session = Session::build(&input, LoadOptions::default()).map_err(|e| e.to_string())?;
    let body = annotations(&session, true, Branch::All);
    let calls: Vec<_> = body.annotations.iter().flat_map(|u| u.tool_calls()).collect();
    let failed = calls.iter().filter(|c| c.is_error).count();
    let d = session.diagnostics.summary();
    let issues = d.bad_lines
        + d.orphans
        + d.unknown_record_types
        + d.subagents_missing
        + session.diagnostics.subagents_unlinked.len();
    Ok(format!(
        "{:<8} {:>5} {:>5} {:>6} {:>9} {:>11}",
        session.format.name(),
        body.total,
        calls.len(),
        failed,
        session.subagents_loaded(),
        issues
    ))
}

fn main() {
    let args = Args::parse();
    println!(
        "{:<70} {:<8} {:>5} {:>5} {:>6} {:>9} {:>11}",
        "file", "format", "units", "calls", "failed", "subagents", "diagnostics"
    );
    for path in files_below(&args.dir) {
        let shown = path
            .strip_prefix(&args.dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        let head = std::fs::read(&path).unwrap_or_default();
        if gemini::sniff(&head).is_some_and(|h| h.is_subagent()) {
            println!("{shown:<70} (a sub-agent's chat: counted with its parent)");
            continue;
        }
        match row(&path) {
            Ok(row) => println!("{shown:<70} {row}"),
            Err(reason) => println!("{shown:<70} not loaded: {reason}"),
        }
    }
}
