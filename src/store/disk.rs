//! Sessions on disk: finding a session's files the way Claude Code lays them out.
//!
//! ```text
//! ~/.claude/projects/<project>/<session-uuid>.jsonl              the main log
//! ~/.claude/projects/<project>/agent-<id>.jsonl                  flat layout: sub-agents of
//!                                                                every session of the project
//! ~/.claude/projects/<project>/<session-uuid>/subagents/agent-<id>.jsonl
//! ~/.claude/projects/<project>/<session-uuid>/subagents/agent-<id>.meta.json
//! ```
//!
//! In the flat layout a folder holds the agents of many sessions, so an `agent-<id>.jsonl`
//! there belongs to a session only when the session names the agent (`"agentId":"<id>"`)
//! or the agent's log carries the session's `sessionId`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::core::input::{FileRole, SessionInput, SourceFile};

/// Why a session's files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// A file or directory could not be read.
    #[error("failed to read {path}: {source}")]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A directory holds no session log.
    #[error("no session log (*.jsonl other than agent-*.jsonl) in {0}")]
    NoSession(PathBuf),
    /// A directory holds several session logs.
    #[error("{dir} holds {count} session logs; name the one to load")]
    ManySessions {
        /// The directory.
        dir: PathBuf,
        /// How many logs it holds.
        count: usize,
    },
    /// Several paths were given and one of them is a directory.
    #[error("{0} is a directory; give either one directory or files")]
    DirectoryAmongFiles(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DiskError + '_ {
    move |source| DiskError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads a session from `paths`: a main log (its sub-agents are found beside it), a
/// directory holding one session, or several files given explicitly.
pub fn read_session(paths: &[PathBuf]) -> Result<SessionInput, DiskError> {
    match paths {
        [one] if one.is_dir() => Ok(read_main(&find_main_log(one)?)?.input),
        [one] => Ok(read_main(one)?.input),
        many => {
            let mut files = Vec::with_capacity(many.len());
            for p in many {
                if p.is_dir() {
                    return Err(DiskError::DirectoryAmongFiles(p.clone()));
                }
                files.push(SourceFile::new(file_name(p), fs::read(p).map_err(io(p))?));
            }
            Ok(SessionInput::new(files))
        }
    }
}

/// The one main log in `dir`.
pub fn find_main_log(dir: &Path) -> Result<PathBuf, DiskError> {
    let mut logs: Vec<PathBuf> = list_dir(dir)?
        .into_iter()
        .filter(|p| p.is_file() && is_jsonl(p) && FileRole::of(&file_name(p)) == FileRole::Main)
        .collect();
    match logs.len() {
        0 => Err(DiskError::NoSession(dir.to_owned())),
        1 => Ok(logs.remove(0)),
        count => Err(DiskError::ManySessions {
            dir: dir.to_owned(),
            count,
        }),
    }
}

/// A session read from disk, and the paths it was read from (to notice later changes).
#[derive(Debug)]
pub struct DiskSession {
    /// The files, main log first.
    pub input: SessionInput,
    /// The path of each file, in the same order.
    pub paths: Vec<PathBuf>,
}

/// Reads the main log at `main` and the sub-agent logs that belong to it.
pub fn read_main(main: &Path) -> Result<DiskSession, DiskError> {
    let bytes = fs::read(main).map_err(io(main))?;
    let dir = main.parent().unwrap_or(Path::new("."));
    let stem = main
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut files = vec![SourceFile::new(file_name(main), Vec::new())];
    let mut paths = vec![main.to_owned()];

    // <session>/subagents/: every file there is this session's.
    let nested = dir.join(&stem).join("subagents");
    if nested.is_dir() {
        for p in list_dir(&nested)? {
            let name = file_name(&p);
            if p.is_file() && FileRole::of(&name) != FileRole::Main {
                let bytes = fs::read(&p).map_err(io(&p))?;
                files.push(SourceFile::new(format!("{stem}/subagents/{name}"), bytes));
                paths.push(p);
            }
        }
    }

    // Flat layout: agents this session names, or whose log carries its sessionId.
    let named = named_agent_ids(&bytes);
    let session_id = first_string_field(&bytes, b"sessionId");
    for p in list_dir(dir)? {
        let name = file_name(&p);
        if !p.is_file() || !is_jsonl(&p) || FileRole::of(&name) != FileRole::SubAgent {
            continue;
        }
        if files.iter().any(|f| f.base_name() == name) {
            continue;
        }
        let id = crate::core::input::agent_id_from_name(&name).unwrap_or_default();
        let belongs = named.iter().any(|n| n == id) || {
            let head = read_head(&p, 64 * 1024)?;
            session_id.is_some() && first_string_field(&head, b"sessionId") == session_id
        };
        if belongs {
            files.push(SourceFile::new(name, fs::read(&p).map_err(io(&p))?));
            paths.push(p);
        }
    }
    files[0].bytes = bytes;
    Ok(DiskSession {
        input: SessionInput::new(files),
        paths,
    })
}

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, DiskError> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    Ok(out)
}

fn read_head(path: &Path, limit: u64) -> Result<Vec<u8>, DiskError> {
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(limit).read_to_end(&mut head))
        .map_err(io(path))?;
    Ok(head)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn is_jsonl(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
}

/// Every distinct value of `"agentId":"..."` in `bytes`, in order of first appearance.
fn named_agent_ids(bytes: &[u8]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for at in memchr::memmem::find_iter(bytes, b"\"agentId\"") {
        if let Some(v) = string_value_at(&bytes[at + 9..]) {
            if !ids.contains(&v) {
                ids.push(v);
            }
        }
    }
    ids
}

/// The first `"key":"value"` string value in `bytes`.
fn first_string_field(bytes: &[u8], key: &[u8]) -> Option<String> {
    let mut needle = Vec::with_capacity(key.len() + 2);
    needle.push(b'"');
    needle.extend_from_slice(key);
    needle.push(b'"');
    let at = memchr::memmem::find(bytes, &needle)?;
    string_value_at(&bytes[at + needle.len()..])
}

/// For bytes just after a key: `  :  "value"` -> `value` (plain values only).
fn string_value_at(rest: &[u8]) -> Option<String> {
    let rest = rest.trim_ascii_start().strip_prefix(b":")?.trim_ascii_start();
    let rest = rest.strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_named_agent_ids() {
        let text = br#"{"toolUseResult":{"agentId":"aaaa1111"}} {"agentId": "bbbb"} {"agentId":"aaaa1111"}"#;
        assert_eq!(named_agent_ids(text), vec!["aaaa1111", "bbbb"]);
        assert_eq!(
            first_string_field(br#"{"x":1,"sessionId":"S1"}"#, b"sessionId").as_deref(),
            Some("S1")
        );
        assert_eq!(first_string_field(br#"{"sessionId":5}"#, b"sessionId"), None);
    }

    #[test]
    fn reads_both_layouts_and_leaves_other_sessions_agents_out() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(
            d.join("s1.jsonl"),
            r#"{"sessionId":"S1","toolUseResult":{"agentId":"a1"}}"#,
        )
        .unwrap();
        fs::write(d.join("agent-a1.jsonl"), r#"{"sessionId":"S1"}"#).unwrap();
        fs::write(d.join("agent-a2.jsonl"), r#"{"sessionId":"S1"}"#).unwrap();
        fs::write(d.join("agent-a3.jsonl"), r#"{"sessionId":"OTHER"}"#).unwrap();
        fs::create_dir_all(d.join("s1/subagents")).unwrap();
        fs::write(d.join("s1/subagents/agent-n1.jsonl"), "{}").unwrap();
        fs::write(d.join("s1/subagents/agent-n1.meta.json"), "{}").unwrap();

        let input = read_session(&[d.join("s1.jsonl")]).unwrap();
        let names: Vec<&str> = input.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "s1.jsonl",
                "s1/subagents/agent-n1.jsonl",
                "s1/subagents/agent-n1.meta.json",
                "agent-a1.jsonl",
                "agent-a2.jsonl"
            ]
        );
    }

    #[test]
    fn a_directory_must_hold_exactly_one_session() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_session(&[dir.path().to_owned()]),
            Err(DiskError::NoSession(_))
        ));
        fs::write(dir.path().join("a.jsonl"), "").unwrap();
        assert_eq!(read_session(&[dir.path().to_owned()]).unwrap().files.len(), 1);
        fs::write(dir.path().join("b.jsonl"), "").unwrap();
        assert!(matches!(
            read_session(&[dir.path().to_owned()]),
            Err(DiskError::ManySessions { count: 2, .. })
        ));
    }
}
