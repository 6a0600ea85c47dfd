//! Loads every Codex rollout under a directory and prints, per session: units, tool calls,
//! failed calls, sub-agents and diagnostics. A rollout whose thread was spawned by another
//! rollout under the directory is loaded with its parent (as the sessions-directory scan
//! attaches it), not on its own.
//!
//! ```sh
//! cargo run --release -p sessiongraph-core --example codex_table -- ~/.codex/sessions
//! ```

use std::path::{Path, PathBuf};

use sessiongraph_core::formats::codex::{looks_like, read_meta};
use sessiongraph_core::formats::input::{SessionInput, SourceFile};
use sessiongraph_core::pipeline::load::LoadOptions;
use sessiongraph_core::pipeline::session::{Branch, Session};
use sessiongraph_core::views::annotations::{annotations, AnnotationUnit};

/// Every `.jsonl` and `.json` file under `dir`, in path order.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            files_under(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("jsonl" | "json")) {
            out.push(p);
        }
    }
}

/// One row of the table: the session's counts, or why it did not load.
fn row(root: &Path, files: &[(PathBuf, Vec<u8>)]) -> String {
    let name = files[0]
        .0
        .strip_prefix(root)
        .unwrap_or(&files[0].0)
        .display()
        .to_string();
    let input = SessionInput::new(
        files
            .iter()
            .map(|(p, b)| SourceFile::new(p.display().to_string(), b.clone()))
            .collect(),
    );
    let session = match Session::build(&input, LoadOptions::default()) {
        Ok(s) => s,
        Err(e) => return format!("| {name} | error: {e} | | | | | |"),
    };
    let body = annotations(&session, true, Branch::All);
    let (mut calls, mut failed) = (0, 0);
    for unit in &body.annotations {
        if let AnnotationUnit::Assistant(_) = unit {
            for call in unit.tool_calls() {
                calls += 1;
                failed += usize::from(call.is_error);
            }
        }
    }
    let d = session.diagnostics.summary();
    format!(
        "| {name} | {} | {} | {calls} | {failed} | {} | bad lines {}, unknown types {}, orphans {} |",
        files.len(),
        body.total,
        session.agents.len(),
        d.bad_lines,
        d.unknown_record_types,
        d.orphans
    )
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).expect("usage: codex_table <dir>"));
    let mut paths = Vec::new();
    files_under(&root, &mut paths);
    let rollouts: Vec<(PathBuf, Vec<u8>)> = paths
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
        .filter(|(_, b)| looks_like(b))
        .collect();
    let metas: Vec<_> = rollouts
        .iter()
        .map(|(_, b)| read_meta(b).unwrap_or_default())
        .collect();
    let ids: Vec<Option<&str>> = metas.iter().map(|m| m.id.as_deref()).collect();
    // The thread at the top of a file's chain of parents, among the files found.
    let top = |mut i: usize| {
        for _ in 0..metas.len() {
            let parent = metas[i].parent_thread_id.as_deref();
            match parent.and_then(|p| ids.iter().position(|id| *id == Some(p))) {
                Some(p) if p != i => i = p,
                _ => break,
            }
        }
        i
    };
    println!("| file | files | units | calls | failed | sub-agents | diagnostics |");
    println!("|---|---|---|---|---|---|---|");
    for i in 0..rollouts.len() {
        if top(i) != i {
            continue;
        }
        let group: Vec<(PathBuf, Vec<u8>)> = (0..rollouts.len())
            .filter(|&j| top(j) == i)
            .map(|j| rollouts[j].clone())
            .collect();
        println!("{}", row(&root, &group));
    }
}
