//! Finding sessions in a configured directory (`~/.claude/projects` or any tree below it).
//!
//! Every `*.jsonl` file not named `agent-*` is a session's main log (a session's
//! `subagents/` folder holds only `agent-*` files), and so is a `*.json` file whose content
//! is an AutoGen log (an AgentChat or `chat_messages` dump); its id is the file's stem (the
//! Claude Code session uuid). Only the
//! configured directories are walked, and nothing else is ever read: symbolic links are
//! not followed, and a log is opened as every file of a sessions directory is
//! ([`super::confined`]).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::confined::SessionsRoot;
use crate::core::formats::input::{FileRole, Format};
use crate::core::formats::pi::is_pi_header;

/// A session found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSession {
    /// Its id: the file stem, made unique with a short path hash when two files share it.
    pub id: String,
    /// The sessions directory it was found in: its files are read only below it.
    pub root: SessionsRoot,
    /// The main log.
    pub main: PathBuf,
    /// The folder holding it, relative to the scanned directory (Claude Code's project name).
    pub project: String,
    /// The main log's modification time.
    pub modified: SystemTime,
    /// The main log's size.
    pub bytes: u64,
    /// Its format, from its first line.
    pub format: Format,
}

impl FoundSession {
    /// The main log, relative to [`FoundSession::root`].
    pub fn relative_main(&self) -> &Path {
        self.main.strip_prefix(self.root.path()).unwrap_or(&self.main)
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct ScanOutcome {
    /// The sessions, in path order.
    pub sessions: Vec<FoundSession>,
    /// Logs left out, with the reason (another agent's format, unreadable, ...).
    pub skipped: Vec<(PathBuf, String)>,
}

/// Walks `root` (iteratively; symbolic links are not followed). `taken` holds the ids
/// already in use and receives the new ones. `progress` is called with the number of
/// sessions found so far, every 1000.
pub fn scan_dir(root: &Path, taken: &mut HashSet<String>, mut progress: impl FnMut(usize)) -> ScanOutcome {
    let mut out = ScanOutcome::default();
    let sessions_root = SessionsRoot::new(root);
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<(PathBuf, fs::FileType)> = match fs::read_dir(&dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok().and_then(|e| Some((e.path(), e.file_type().ok()?))))
                .collect(),
            Err(e) => {
                out.skipped.push((dir, e.to_string()));
                continue;
            }
        };
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        // Deeper directories are visited in path order (pushed in reverse).
        for (path, kind) in entries.iter().rev() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if kind.is_dir() && !name.starts_with('.') {
                dirs.push(path.clone());
            }
        }
        for (path, kind) in entries {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let extension = path.extension().map(|e| e.to_ascii_lowercase());
            let is_json = extension.as_deref() == Some(OsStr::new("json"));
            let is_log = kind.is_file()
                && (is_json || extension.as_deref() == Some(OsStr::new("jsonl")))
                && FileRole::of(&name) == FileRole::Main;
            if !is_log {
                continue;
            }
            let (meta, format) = match inspect(&sessions_root, path.strip_prefix(root).unwrap_or(&path)) {
                Ok(found) => found,
                Err(reason) => {
                    out.skipped.push((path, reason));
                    continue;
                }
            };
            if is_json && format != Format::Autogen {
                continue;
            }
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let id = unique_id(&stem, &path, taken);
            let project = dir
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.sessions.push(FoundSession {
                id,
                root: sessions_root.clone(),
                main: path,
                project,
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                bytes: meta.len(),
                format,
            });
            if out.sessions.len() % 1000 == 0 {
                progress(out.sessions.len());
            }
        }
    }
    out
}

/// The id of a session whose main log's name without extension is `stem`, as a sessions
/// directory gives it when no other log there has the same stem: the stem with every
/// character but ASCII letters, digits, `-`, `_` and `.` made `_` (`session` for none).
pub fn id_of_stem(stem: &str) -> String {
    let safe: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() {
        "session".to_owned()
    } else {
        safe
    }
}

/// [`id_of_stem`], or `<id>-<8 hex of the path's hash>` when the id is taken.
fn unique_id(stem: &str, path: &Path, taken: &mut HashSet<String>) -> String {
    let mut id = id_of_stem(stem);
    if taken.contains(&id) {
        let hash = Sha256::digest(path.to_string_lossy().as_bytes());
        let hex = hex::encode(&hash[..4]);
        id = format!("{id}-{hex}");
    }
    taken.insert(id.clone());
    id
}

/// Opens a log the walk found (a regular file then, which may have been swapped since):
/// its size and time from the opened handle, and its format.
fn inspect(root: &SessionsRoot, log: &Path) -> Result<(fs::Metadata, Format), String> {
    let file = root.open(log).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    Ok((meta, format_of(file)))
}

/// The format of a log, from its start (a pi session starts with a `{"type":"session"}`
/// header; an AutoGen log's first message is told by [`crate::core::formats::autogen::looks_like`]).
fn format_of(file: fs::File) -> Format {
    let mut head = Vec::with_capacity(4096);
    let read = file.take(64 * 1024).read_to_end(&mut head);
    let first = head.split(|&b| b == b'\n').find(|l| !l.trim_ascii().is_empty());
    match (read, first) {
        (Ok(_), Some(line)) if is_pi_header(line) => Format::Pi,
        (Ok(_), Some(_)) if crate::core::formats::autogen::looks_like_bytes(&head) => Format::Autogen,
        _ => Format::ClaudeCode,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_main_logs_of_both_formats_and_skips_agent_logs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("proj-a/s1/subagents")).unwrap();
        fs::create_dir_all(d.join("proj-b")).unwrap();
        fs::write(d.join("proj-a/s1.jsonl"), "{}").unwrap();
        fs::write(d.join("proj-a/agent-x.jsonl"), "{}").unwrap();
        fs::write(d.join("proj-a/s1/subagents/agent-y.jsonl"), "{}").unwrap();
        fs::write(d.join("proj-b/s1.jsonl"), "{}").unwrap();
        fs::write(d.join("proj-b/notes.txt"), "").unwrap();
        fs::write(d.join("proj-b/pi.jsonl"), "{\"type\":\"session\",\"id\":\"x\"}\n").unwrap();
        let mut taken = HashSet::new();
        let found = scan_dir(d, &mut taken, |_| {});
        let got: Vec<(&str, &str, Format)> = found
            .sessions
            .iter()
            .map(|s| (s.id.as_str(), s.project.as_str(), s.format))
            .collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], ("s1", "proj-a", Format::ClaudeCode));
        assert_eq!(got[1], ("pi", "proj-b", Format::Pi));
        assert!(got[2].0.starts_with("s1-") && got[2].1 == "proj-b", "{got:?}");
        assert!(found.skipped.is_empty());
    }

    #[test]
    fn agentchat_and_chat_message_dumps_on_disk_are_autogen_logs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("team")).unwrap();
        let task_result = "{\n  \"messages\": [\n    {\"source\": \"user\", \"type\": \"TextMessage\", \"content\": \"hi\"}\n  ]\n}\n";
        fs::write(d.join("team/run.json"), task_result).unwrap();
        let chat = "{\"chat_manager\": [{\"role\": \"user\", \"name\": \"A\", \"content\": \"x\"}]}";
        fs::write(d.join("team/chat.json"), chat).unwrap();
        let claude = "{\"type\":\"user\",\"uuid\":\"u\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n";
        fs::write(d.join("team/claude.jsonl"), claude).unwrap();
        let mut taken = HashSet::new();
        let found = scan_dir(d, &mut taken, |_| {});
        let mut got: Vec<(&str, Format)> = found.sessions.iter().map(|s| (s.id.as_str(), s.format)).collect();
        got.sort_by_key(|(id, _)| *id);
        assert_eq!(
            got,
            vec![
                ("chat", Format::Autogen),
                ("claude", Format::ClaudeCode),
                ("run", Format::Autogen)
            ]
        );
    }
}
