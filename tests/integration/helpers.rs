//! Shared test helpers: where the fixtures are, and loading them through the library.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionInput, SourceFile};
use sessiongraph::store::disk;

/// The project's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("fixtures").join(rel)
}

/// `tests/reference/<rel>`.
pub fn reference(rel: &str) -> PathBuf {
    root().join("tests/reference").join(rel)
}

/// The CommuGraph sample's main log.
pub fn sample_main() -> PathBuf {
    fixture("commugraph-sample/ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl")
}

/// The files of the session at `fixtures/<rel>` (a main log or a directory).
pub fn fixture_input(rel: &str) -> SessionInput {
    disk::read_session(&[fixture(rel)]).expect("fixture is readable")
}

/// Loads the session at `path` (a main log or a directory) as `sessiongraph export` does.
pub fn load_path(path: &Path) -> Session {
    let input = disk::read_session(&[path.to_owned()]).expect("fixture is readable");
    Session::build(&input, LoadOptions::default()).expect("fixture loads")
}

/// Loads a session from in-memory files.
pub fn load_files(files: &[(&str, &str)]) -> Session {
    let input = SessionInput::new(
        files
            .iter()
            .map(|(n, t)| SourceFile::new(*n, t.as_bytes().to_vec()))
            .collect(),
    );
    Session::build(&input, LoadOptions::default()).expect("session loads")
}

/// Loads a session made of one main log holding `lines`.
pub fn load_lines(lines: &[String]) -> Session {
    load_files(&[("11111111-2222-4333-8444-555555555555.jsonl", &lines.join("\n"))])
}

/// A view body as JSON.
pub fn body(session: &Session, view: View, options: ViewOptions) -> Value {
    serde_json::from_slice(&views::render(session, view, options).to_bytes()).expect("bodies are JSON")
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A small tmpfs mounted on a temporary directory, unmounted when dropped: a disk that
/// fills up. Mounting needs root; `None` where it is not allowed.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`1m`) on a fresh temporary directory.
    pub fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallDisk { dir })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Builders for hand-written Claude Code records.
pub mod records {
    /// A user record with string or array `content` (JSON text).
    pub fn user(uuid: &str, parent: Option<&str>, ts: &str, content: &str) -> String {
        format!(
            r#"{{"type":"user","uuid":"{uuid}","parentUuid":{},"isSidechain":false,"sessionId":"S","timestamp":"{ts}","message":{{"role":"user","content":{content}}}}}"#,
            json_opt(parent)
        )
    }

    /// An assistant chunk holding one block (JSON text).
    pub fn assistant(
        uuid: &str,
        parent: Option<&str>,
        ts: &str,
        req: Option<&str>,
        msg: &str,
        block: &str,
    ) -> String {
        let req = req.map(|r| format!(r#","requestId":"{r}""#)).unwrap_or_default();
        format!(
            r#"{{"type":"assistant","uuid":"{uuid}","parentUuid":{},"isSidechain":false,"sessionId":"S","timestamp":"{ts}"{req},"message":{{"id":"{msg}","role":"assistant","content":[{block}],"usage":{{"input_tokens":10,"output_tokens":5}}}}}}"#,
            json_opt(parent)
        )
    }

    /// A text block.
    pub fn text(t: &str) -> String {
        format!(r#"{{"type":"text","text":"{t}"}}"#)
    }

    /// A tool_use block.
    pub fn tool_use(id: &str, name: &str, input: &str) -> String {
        format!(r#"{{"type":"tool_use","id":"{id}","name":"{name}","input":{input}}}"#)
    }

    /// A tool result record.
    pub fn tool_result(
        uuid: &str,
        parent: &str,
        ts: &str,
        tool_use_id: &str,
        content: &str,
        extra: &str,
    ) -> String {
        format!(
            r#"{{"type":"user","uuid":"{uuid}","parentUuid":"{parent}","isSidechain":false,"sessionId":"S","timestamp":"{ts}","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{tool_use_id}","content":"{content}"{extra}}}]}}}}"#
        )
    }

    fn json_opt(s: Option<&str>) -> String {
        s.map_or("null".to_owned(), |s| format!(r#""{s}""#))
    }
}

/// `n` user prompts, each the parent of the next: the smallest records that are each a
/// unit, a node and a message.
pub fn tiny_chain(n: usize) -> Vec<u8> {
    let mut out = String::with_capacity(n * 100);
    for i in 0..n {
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"u{}\"", i - 1)
        };
        out.push_str(&format!(
            "{{\"type\":\"user\",\"uuid\":\"u{i}\",\"parentUuid\":{parent},\"sessionId\":\"s\",\"message\":{{\"content\":\"hi {i}\"}}}}\n"
        ));
    }
    out.into_bytes()
}
