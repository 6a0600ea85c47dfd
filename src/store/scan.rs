//! Finding sessions in a configured directory (`~/.claude/projects`, `~/.codex/sessions` or
//! any tree below them).
//!
//! Every `*.jsonl` file not named `agent-*` is a session's main log (a session's
//! `subagents/` folder holds only `agent-*` files), and so is a `*.json` file whose content
//! is an AutoGen log (an AgentChat or `chat_messages` dump), a Codex single-object session
//! or a Gemini CLI chat; its id is the file's stem (the Claude Code session uuid, Gemini's
//! `session-<time>-<short id>`). A Codex rollout whose thread another rollout of the
//! directory spawned is not a session of its own: it is attached to the top of its chain
//! of parents ([`FoundSession::companions`]), wherever its date folder is. A Gemini
//! sub-agent's chat (`chats/<session id>/<agent id>.json(l)`, `kind: "subagent"`) is no
//! session of its own either: it is read with its parent's. Only the
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
    /// Other logs of the session found by the scan: the rollouts of the threads a Codex
    /// session spawned (at any depth), wherever they are under the root.
    pub companions: Vec<PathBuf>,
}

impl FoundSession {
    /// The main log, relative to [`FoundSession::root`].
    pub fn relative_main(&self) -> &Path {
        self.main.strip_prefix(self.root.path()).unwrap_or(&self.main)
    }

    /// The companions, relative to [`FoundSession::root`].
    pub fn relative_companions(&self) -> Vec<PathBuf> {
        self.companions
            .iter()
            .map(|c| c.strip_prefix(self.root.path()).unwrap_or(c).to_owned())
            .collect()
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
    let mut threads: Vec<Option<Thread>> = Vec::new();
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
            let (
                meta,
                Inspected {
                    format,
                    thread,
                    sub_agent,
                },
            ) = match inspect(&sessions_root, path.strip_prefix(root).unwrap_or(&path)) {
                Ok(found) => found,
                Err(reason) => {
                    out.skipped.push((path, reason));
                    continue;
                }
            };
            if is_json && !matches!(format, Format::Autogen | Format::Codex | Format::Gemini) || sub_agent {
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
                companions: Vec::new(),
            });
            threads.push(thread);
            if out.sessions.len() % 1000 == 0 {
                progress(out.sessions.len());
            }
        }
    }
    attach_spawned_threads(&mut out.sessions, &threads, taken);
    out
}

/// What a Codex rollout's first line says of its thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Thread {
    id: String,
    parent: Option<String>,
}

/// Moves each Codex rollout whose thread was spawned by another rollout found into the
/// companions of the top of its chain of parents (its id freed). A rollout whose parent is
/// not found stays a session of its own.
fn attach_spawned_threads(
    sessions: &mut Vec<FoundSession>,
    threads: &[Option<Thread>],
    taken: &mut HashSet<String>,
) {
    let by_id: std::collections::HashMap<&str, usize> = threads
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.as_ref().map(|t| (t.id.as_str(), i)))
        .collect();
    let top = |mut i: usize| {
        // Bounded: a cycle of parents stops after one pass over the sessions.
        for _ in 0..threads.len() {
            let parent = threads[i].as_ref().and_then(|t| t.parent.as_deref());
            match parent.and_then(|p| by_id.get(p)) {
                Some(&p) if p != i => i = p,
                _ => break,
            }
        }
        i
    };
    let tops: Vec<usize> = (0..sessions.len()).map(top).collect();
    let mut companions: Vec<Vec<PathBuf>> = vec![Vec::new(); sessions.len()];
    for (i, &t) in tops.iter().enumerate() {
        if t != i {
            companions[t].push(sessions[i].main.clone());
        }
    }
    let mut kept = Vec::with_capacity(sessions.len());
    for (i, (mut s, c)) in sessions.drain(..).zip(companions).enumerate() {
        if tops[i] == i {
            s.companions = c;
            kept.push(s);
        } else {
            taken.remove(&s.id);
        }
    }
    *sessions = kept;
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

impl Inspected {
    /// A log of `format` that is neither a Codex rollout nor a Gemini sub-agent's chat.
    fn of(format: Format) -> Inspected {
        Inspected {
            format,
            thread: None,
            sub_agent: false,
        }
    }
}

/// What the walk learns of a log from its start.
struct Inspected {
    /// Its format.
    format: Format,
    /// A Codex rollout's thread.
    thread: Option<Thread>,
    /// True for a Gemini sub-agent's chat.
    sub_agent: bool,
}

/// Opens a log the walk found (a regular file then, which may have been swapped since):
/// its size and time from the opened handle, and what its start says.
fn inspect(root: &SessionsRoot, log: &Path) -> Result<(fs::Metadata, Inspected), String> {
    let file = root.open(log).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    Ok((meta, format_of(file, log)))
}

/// The format of the log at `path`, from its start (a pi session starts with a
/// `{"type":"session"}` header; a Codex rollout is told by
/// [`crate::core::formats::codex::looks_like`], or when its first line is longer than the
/// head read, by that line's start; a Gemini chat by
/// [`crate::core::formats::gemini::sniff`]; an AutoGen log's first message by
/// [`crate::core::formats::autogen::looks_like`]), a Codex rollout's thread, and whether
/// it is a Gemini sub-agent's chat: its header says `kind: "subagent"`, or (a long legacy
/// chat whose start does not say) it lies in `chats/<session id>/`.
fn format_of(file: fs::File, path: &Path) -> Inspected {
    let mut head = Vec::with_capacity(4096);
    let read = file.take(64 * 1024).read_to_end(&mut head);
    let first = head.split(|&b| b == b'\n').find(|l| !l.trim_ascii().is_empty());
    let gemini = crate::core::formats::gemini::sniff(&head);
    match (read, first) {
        (Ok(_), Some(line)) if is_pi_header(line) => Inspected::of(Format::Pi),
        (Ok(_), Some(_)) if is_codex(&head) => Inspected {
            format: Format::Codex,
            thread: Some(codex_thread(&head)),
            sub_agent: false,
        },
        (Ok(_), Some(_)) if gemini.is_some() => {
            let in_chat_folder = path
                .parent()
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .is_some_and(|n| n == "chats");
            let kind = gemini.and_then(|h| h.kind);
            Inspected {
                format: Format::Gemini,
                thread: None,
                sub_agent: kind.map_or(in_chat_folder, |k| k == "subagent"),
            }
        }
        (Ok(_), Some(_)) if crate::core::formats::autogen::looks_like_bytes(&head) => {
            Inspected::of(Format::Autogen)
        }
        _ => Inspected::of(Format::ClaudeCode),
    }
}

/// True when `head`, a log's first bytes, is a Codex rollout's (or starts like one when
/// the head ends inside its first line or object: a `session_meta` envelope, or a
/// single-object session's `{"session":`).
fn is_codex(head: &[u8]) -> bool {
    let start = &head[..head.len().min(200)];
    let object_start = start
        .strip_prefix(b"{")
        .map(|rest| rest.trim_ascii_start().starts_with(b"\"session\":"));
    crate::core::formats::codex::looks_like(head)
        || (start.starts_with(b"{\"timestamp\":")
            && memchr::memmem::find(start, b"\"type\":\"session_meta\",\"payload\"").is_some())
        || object_start == Some(true)
}

/// A Codex rollout's thread and its parent: from its first line, or when that line is
/// longer than `head`, from the first `"id"` and `"parent_thread_id"` strings in it.
fn codex_thread(head: &[u8]) -> Thread {
    if let Some(meta) = crate::core::formats::codex::read_meta(head) {
        return Thread {
            id: meta.id.unwrap_or_default(),
            parent: meta.parent_thread_id,
        };
    }
    Thread {
        id: string_after(head, b"\"id\":\"").unwrap_or_default(),
        parent: string_after(head, b"\"parent_thread_id\":\""),
    }
}

/// The plain string value right after the first `key` (which ends in its opening quote).
fn string_after(head: &[u8], key: &[u8]) -> Option<String> {
    let at = memchr::memmem::find(head, key)? + key.len();
    let len = memchr::memchr2(b'"', b'\\', &head[at..])?;
    String::from_utf8(head[at..at + len].to_vec()).ok()
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
    fn gemini_chats_are_sessions_and_their_subagents_chats_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let chats = dir.path().join("tmp/h1/chats");
        fs::create_dir_all(chats.join("S1")).unwrap();
        fs::create_dir_all(chats.join("S2")).unwrap();
        let header = |id: &str, kind: &str| {
            format!("{{\"sessionId\":\"{id}\",\"projectHash\":\"h\",\"kind\":\"{kind}\"}}\n")
        };
        fs::write(chats.join("session-a-S1.jsonl"), header("S1", "main")).unwrap();
        fs::write(chats.join("S1/A1.jsonl"), header("A1", "subagent")).unwrap();
        fs::write(
            chats.join("session-b-S2.json"),
            "{\n  \"sessionId\": \"S2\",\n  \"projectHash\": \"h\",\n  \"messages\": [\n",
        )
        .unwrap();
        // A legacy sub-agent chat whose start does not say its kind: told by its folder.
        fs::write(
            chats.join("S2/A2.json"),
            "{\n  \"sessionId\": \"A2\",\n  \"projectHash\": \"h\",\n  \"messages\": [\n",
        )
        .unwrap();
        let found = scan_dir(dir.path(), &mut HashSet::new(), |_| {});
        let got: Vec<(&str, &str, Format)> = found
            .sessions
            .iter()
            .map(|s| (s.id.as_str(), s.project.as_str(), s.format))
            .collect();
        assert_eq!(
            got,
            vec![
                ("session-a-S1", "tmp/h1/chats", Format::Gemini),
                ("session-b-S2", "tmp/h1/chats", Format::Gemini)
            ]
        );
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
