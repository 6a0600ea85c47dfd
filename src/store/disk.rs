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
//!
//! Gemini CLI keeps a sub-agent's chat in a folder named after its parent's session id:
//!
//! ```text
//! ~/.gemini/tmp/<project>/chats/session-<time>-<short id>.json(l)   the main chat
//! ~/.gemini/tmp/<project>/chats/<session id>/<agent id>.json(l)    its sub-agents' chats
//! ```

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use foldhash::HashSet;

use super::confined::{Entry, EntryKind, ReadError, SessionsRoot};
use crate::core::diagnostics::LineIssue;
use crate::core::formats::input::{FileRole, SessionInput, SourceFile};

/// Why a session's files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// A file of a sessions directory was refused (a symbolic link, not a regular file) or
    /// could not be read; it is named relative to the sessions directory.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A file given explicitly (on the command line) could not be read.
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

/// Reads a session from `paths` given by the operator (the command line): a main log (its
/// sub-agents are found beside it), a directory holding one session, or several files given
/// explicitly. What is found beside a main log is read under the sessions-directory rule
/// ([`super::confined`]), with the log's folder as the root; files refused are left out.
pub fn read_session(paths: &[PathBuf]) -> Result<SessionInput, DiskError> {
    match paths {
        [one] if one.is_dir() => read_beside(&find_main_log(one)?),
        [one] => read_beside(one),
        many => {
            let mut files = Vec::with_capacity(many.len());
            for p in many {
                if p.is_dir() {
                    return Err(DiskError::DirectoryAmongFiles(p.clone()));
                }
                files.push(SourceFile::new(file_name(p), map_path(p)?));
            }
            Ok(SessionInput::new(files))
        }
    }
}

/// The file at `path`, given by the operator, mapped into memory ([`super::mapped`]).
fn map_path(path: &Path) -> Result<Bytes, DiskError> {
    fs::File::open(path)
        .and_then(|f| super::mapped::map_file(&f))
        .map_err(io(path))
}

/// The session of the main log at `main`, a path the operator gave: the log is read as
/// given, its sub-agents under the sessions-directory rule. The files are mapped, not read
/// ([`super::mapped`]): the operator gave them to be read once.
fn read_beside(main: &Path) -> Result<SessionInput, DiskError> {
    let bytes = map_path(main)?;
    let folder = main.parent().filter(|p| !p.as_os_str().is_empty());
    let root = SessionsRoot::new(folder.unwrap_or(Path::new(".")));
    let name = Path::new(main.file_name().unwrap_or(main.as_os_str()));
    let read = with_subagents(&root, name, bytes, Reading::Map)?;
    for skipped in &read.skipped {
        tracing::warn!(file = %skipped.name, reason = %skipped.reason, "left out");
    }
    Ok(read.input)
}

/// The one main log in `dir`.
pub fn find_main_log(dir: &Path) -> Result<PathBuf, DiskError> {
    let mut logs: Vec<PathBuf> = SessionsRoot::new(dir)
        .list(Path::new(""))?
        .into_iter()
        .filter(|e| e.kind == EntryKind::File && is_jsonl(&e.name))
        .filter(|e| FileRole::of(&e.name.to_string_lossy()) == FileRole::Main)
        .map(|e| dir.join(e.name))
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
    /// Files of the session that were left out: links, files that are not regular files,
    /// files that could not be read.
    pub skipped: Vec<SkippedFile>,
}

/// A file of a session that was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    /// Its name as the session's files are named (`agent-x.jsonl`, `<stem>/subagents/...`).
    pub name: String,
    /// Its path (to notice when it changes).
    pub path: PathBuf,
    /// Why: `is a symbolic link (...)`.
    pub reason: String,
}

impl SkippedFile {
    /// The diagnostics entry that reports it (line 0: the whole file).
    pub fn issue(&self) -> LineIssue {
        LineIssue {
            file: self.name.clone(),
            line: 0,
            reason: self.reason.clone(),
        }
    }
}

/// Reads the main log `main` (relative to `root`) and the sub-agent logs that belong to
/// it. Sub-agent files that the rule refuses or that cannot be read are left out (see
/// [`DiskSession::skipped`]); the main log must be read.
pub fn read_main(root: &SessionsRoot, main: &Path) -> Result<DiskSession, DiskError> {
    read_main_with(root, main, &[])
}

/// [`read_main`], and the `companions` the scan found for the session (the rollouts of the
/// threads a Codex session spawned; relative to `root`, each named by that path). A
/// companion that cannot be read is left out, as a sub-agent log is.
pub fn read_main_with(
    root: &SessionsRoot,
    main: &Path,
    companions: &[PathBuf],
) -> Result<DiskSession, DiskError> {
    let bytes = root.read(main)?;
    let mut session = with_subagents(root, main, bytes.into(), Reading::Copy)?;
    for companion in companions {
        let name = companion.to_string_lossy().into_owned();
        let path = root.path().join(companion);
        match root.read(companion) {
            Ok(bytes) => {
                session.input.files.push(SourceFile::new(name, bytes));
                session.paths.push(path);
            }
            Err(e) => session.skipped.push(SkippedFile {
                name,
                path,
                reason: e.reason(),
            }),
        }
    }
    Ok(session)
}

/// How a session's files are taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Read into memory: live logs of a sessions directory.
    Copy,
    /// Mapped ([`super::mapped`]): files nothing rewrites while they are used.
    Map,
}

/// A session's files as they are being gathered.
struct Gathered<'a> {
    root: &'a SessionsRoot,
    reading: Reading,
    /// The main log's folder, relative to the root: names are shown relative to it.
    folder: &'a Path,
    session: DiskSession,
    /// The base names of the files read so far: a folder of thousands of agent logs made
    /// comparing each with every file read before it quadratic.
    read_names: HashSet<String>,
}

impl Gathered<'_> {
    fn has(&self, name: &str) -> bool {
        self.read_names.contains(name)
    }

    /// Reads `file` (relative to the root) as `name`, or records why it was left out.
    fn read(&mut self, file: &Path, name: String) {
        let path = self.root.path().join(file);
        let bytes = match self.reading {
            Reading::Copy => self.root.read(file).map(Bytes::from),
            Reading::Map => self.root.map(file),
        };
        match bytes {
            Ok(bytes) => {
                let file = SourceFile::new(name, bytes);
                self.read_names.insert(file.base_name().to_owned());
                self.session.input.files.push(file);
                self.session.paths.push(path);
            }
            Err(e) => self.skip(&e, name, path),
        }
    }

    fn skip(&mut self, error: &ReadError, name: String, path: PathBuf) {
        self.session.skipped.push(SkippedFile {
            name,
            path,
            reason: error.reason(),
        });
    }
}

/// The session of the main log `main` (relative to `root`, its bytes read): the main log,
/// then the sub-agents of both layouts.
fn with_subagents(
    root: &SessionsRoot,
    main: &Path,
    bytes: Bytes,
    reading: Reading,
) -> Result<DiskSession, DiskError> {
    let folder = main.parent().unwrap_or(Path::new(""));
    let stem = main
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut gathered = Gathered {
        root,
        reading,
        folder,
        read_names: HashSet::from_iter([file_name(main)]),
        session: DiskSession {
            input: SessionInput::new(vec![SourceFile::new(file_name(main), Vec::new())]),
            paths: vec![root.path().join(main)],
            skipped: Vec::new(),
        },
    };
    match crate::core::formats::gemini::sniff(&bytes) {
        Some(header) => read_gemini_children(&mut gathered, header.session_id.as_deref()),
        None => {
            read_nested(&mut gathered, &stem);
            read_flat(&mut gathered, &bytes)?;
        }
    }
    gathered.session.input.files[0].bytes = bytes;
    Ok(gathered.session)
}

/// The entries of `folder`, a folder beside the main log: `None` when there is none, or
/// when it cannot be listed (then recorded as skipped).
fn list_beside(gathered: &mut Gathered<'_>, folder: &Path) -> Option<Vec<Entry>> {
    match gathered.root.list(folder) {
        Ok(entries) => Some(entries),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            let name = shown_name(gathered.folder, e.file());
            let path = gathered.root.path().join(e.file());
            gathered.skip(&e, name, path);
            None
        }
    }
}

/// `<stem>/subagents/`: every file there is this session's.
fn read_nested(gathered: &mut Gathered<'_>, stem: &str) {
    let nested = gathered.folder.join(stem).join("subagents");
    // Most sessions have no sub-agents folder.
    let Some(entries) = list_beside(gathered, &nested) else {
        return;
    };
    for entry in entries {
        let name = entry.name.to_string_lossy().into_owned();
        if entry.kind == EntryKind::Directory || FileRole::of(&name) == FileRole::Main {
            continue;
        }
        gathered.read(&nested.join(&entry.name), format!("{stem}/subagents/{name}"));
    }
}

/// A Gemini chat's sub-agents: every `*.json` and `*.jsonl` file in `<session id>/` beside
/// it (the core tells the sub-agents' chats, `kind: "subagent"`, from anything else).
fn read_gemini_children(gathered: &mut Gathered<'_>, session_id: Option<&str>) {
    let Some(id) = session_id.filter(|id| is_plain_name(id)) else {
        return;
    };
    let nested = gathered.folder.join(id);
    let Some(entries) = list_beside(gathered, &nested) else {
        return;
    };
    for entry in entries {
        let json = Path::new(&entry.name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json") || e.eq_ignore_ascii_case("jsonl"));
        if entry.kind != EntryKind::Directory && json {
            let name = entry.name.to_string_lossy().into_owned();
            gathered.read(&nested.join(&entry.name), format!("{id}/{name}"));
        }
    }
}

/// True for a name that is one path component (no separator, not `.` or `..`).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Flat layout: agents beside the main log that the session names, or whose log carries its
/// `sessionId`. An agent that cannot be read is reported only when the session names it
/// (otherwise it may well be another session's).
fn read_flat(gathered: &mut Gathered<'_>, main_bytes: &[u8]) -> Result<(), DiskError> {
    // The scan of the whole main log waits for an agent whose head does not say it.
    let mut named: Option<HashSet<String>> = None;
    let session_id = first_string_field(main_bytes, b"sessionId");
    for entry in gathered.root.list(gathered.folder)? {
        let name = entry.name.to_string_lossy().into_owned();
        let candidate = entry.kind != EntryKind::Directory
            && is_jsonl(&entry.name)
            && FileRole::of(&name) == FileRole::SubAgent;
        if !candidate || gathered.has(&name) {
            continue;
        }
        let file = gathered.folder.join(&entry.name);
        let id = crate::core::formats::input::agent_id_from_name(&name).unwrap_or_default();
        let belongs = session_id.is_some() && head_session_id(gathered.root, &file) == session_id
            || named
                .get_or_insert_with(|| named_agent_ids(main_bytes))
                .contains(id);
        if belongs {
            gathered.read(&file, name);
        }
    }
    Ok(())
}

/// How far into an agent log its session id is looked for: a first record without one (a
/// long summary) can push it past the first few kilobytes.
const HEAD_BYTES: [u64; 2] = [4 * 1024, 64 * 1024];

/// The first `sessionId` in the head of the log `file` (relative to the root): read from its
/// first 4 KiB, and from its first 64 KiB only when those do not hold the whole value. A
/// project folder holds the agent logs of all its sessions, and each is read this far.
fn head_session_id(root: &SessionsRoot, file: &Path) -> Option<String> {
    for limit in HEAD_BYTES {
        let head = root.read_head(file, limit).unwrap_or_default();
        if let Some(id) = first_string_field(&head, b"sessionId") {
            return Some(id);
        }
        if (head.len() as u64) < limit {
            return None;
        }
    }
    None
}

/// `file` (relative to the root) as the session's files are named: relative to the main
/// log's folder.
fn shown_name(folder: &Path, file: &Path) -> String {
    file.strip_prefix(folder)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn is_jsonl(name: &OsStr) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
}

/// Every distinct value of `"agentId":"..."` in `bytes` (a set: a log naming tens of
/// thousands of agents made a list's lookups quadratic).
fn named_agent_ids(bytes: &[u8]) -> HashSet<String> {
    memchr::memmem::find_iter(bytes, b"\"agentId\"")
        .filter_map(|at| string_value_at(&bytes[at + 9..]))
        .collect()
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
        let mut ids: Vec<String> = named_agent_ids(text).into_iter().collect();
        ids.sort();
        assert_eq!(ids, ["aaaa1111", "bbbb"]);
        assert_eq!(
            first_string_field(br#"{"x":1,"sessionId":"S1"}"#, b"sessionId").as_deref(),
            Some("S1")
        );
        assert_eq!(first_string_field(br#"{"sessionId":5}"#, b"sessionId"), None);
    }

    /// The id past the first 4 KiB, or cut by them, is found in the first 64 KiB, as it was
    /// when 64 KiB were read at once; past those it is not looked for.
    #[test]
    fn an_agents_session_id_is_read_from_its_head_however_far_into_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = SessionsRoot::new(dir.path());
        let id_at = |offset: usize| {
            let pad = "x".repeat(offset);
            format!("{{\"summary\":\"{pad}\"}}\n{{\"sessionId\":\"S1\"}}\n")
        };
        for (offset, expected) in [
            (10, Some("S1")),
            (4 * 1024 - 30, Some("S1")),
            (4 * 1024 - 16, Some("S1")),
            (20 * 1024, Some("S1")),
            (64 * 1024, None),
        ] {
            fs::write(dir.path().join("agent-a.jsonl"), id_at(offset)).unwrap();
            assert_eq!(
                head_session_id(&root, Path::new("agent-a.jsonl")).as_deref(),
                expected,
                "id after {offset} bytes"
            );
        }
        fs::write(dir.path().join("agent-b.jsonl"), r#"{"type":"user"}"#).unwrap();
        assert_eq!(head_session_id(&root, Path::new("agent-b.jsonl")), None);
        assert_eq!(head_session_id(&root, Path::new("missing.jsonl")), None);
    }

    #[test]
    fn reads_both_layouts_and_leaves_other_sessions_agents_out() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(
            d.join("s1.jsonl"),
            "{\"sessionId\":\"S1\",\"toolUseResult\":{\"agentId\":\"a1\"}}\n\
             {\"sessionId\":\"S1\",\"toolUseResult\":{\"agentId\":\"a4\"}}\n",
        )
        .unwrap();
        fs::write(d.join("agent-a1.jsonl"), r#"{"sessionId":"S1"}"#).unwrap();
        fs::write(d.join("agent-a2.jsonl"), r#"{"sessionId":"S1"}"#).unwrap();
        fs::write(d.join("agent-a3.jsonl"), r#"{"sessionId":"OTHER"}"#).unwrap();
        // Named by the main log, though its head does not carry the session's id.
        fs::write(d.join("agent-a4.jsonl"), r#"{"type":"user"}"#).unwrap();
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
                "agent-a2.jsonl",
                "agent-a4.jsonl"
            ]
        );
    }

    /// Regression: the agents a main log names were a list, searched for each new name and
    /// for each agent file, and each agent file was compared with every file read before
    /// it: with the release binary, 80,000 names took 7.5 s and 20,000 files 5.4 s; this
    /// test took 27 s in a debug build. Both are sets now.
    #[test]
    fn a_log_naming_many_agents_beside_many_agent_files_is_read_in_linear_time() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let names = 80_000;
        let main: String = (0..names)
            .map(|i| format!("{{\"sessionId\":\"S1\",\"toolUseResult\":{{\"agentId\":\"n{i}\"}}}}\n"))
            .collect();
        fs::write(d.join("s1.jsonl"), main).unwrap();
        let files = 3_000;
        for i in 0..files {
            fs::write(d.join(format!("agent-f{i}.jsonl")), r#"{"sessionId":"S1"}"#).unwrap();
        }
        // Named by the main log, its head without the session's id: the names are read.
        fs::write(
            d.join(format!("agent-n{}.jsonl", names - 1)),
            r#"{"type":"user"}"#,
        )
        .unwrap();

        let input = read_session(&[d.join("s1.jsonl")]).unwrap();
        assert_eq!(input.files.len(), 1 + files + 1);
        assert!(input
            .files
            .iter()
            .any(|f| f.name == format!("agent-n{}.jsonl", names - 1)));
    }

    #[test]
    fn links_and_fifos_among_sub_agents_are_left_out_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("p/s1/subagents")).unwrap();
        fs::write(d.join("p/s1.jsonl"), r#"{"sessionId":"S1","agentId":"f1"}"#).unwrap();
        fs::write(d.join("p/s1/subagents/agent-n1.jsonl"), "{}").unwrap();
        fs::write(d.join("p/elsewhere.txt"), r#"{"sessionId":"S1"}"#).unwrap();
        std::os::unix::fs::symlink("../../elsewhere.txt", d.join("p/s1/subagents/agent-n2.jsonl")).unwrap();
        std::os::unix::fs::symlink("elsewhere.txt", d.join("p/agent-f1.jsonl")).unwrap();
        // Not named by the session: it may be another session's, so it is not reported.
        std::os::unix::fs::symlink("elsewhere.txt", d.join("p/agent-f2.jsonl")).unwrap();
        let fifo = d.join("p/s1/subagents/agent-n3.jsonl");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();

        let root = SessionsRoot::new(d);
        let read = read_main(&root, Path::new("p/s1.jsonl")).unwrap();
        let names: Vec<&str> = read.input.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["s1.jsonl", "s1/subagents/agent-n1.jsonl"]);
        assert_eq!(
            read.paths,
            [d.join("p/s1.jsonl"), d.join("p/s1/subagents/agent-n1.jsonl")]
        );
        let skipped: Vec<(&str, &str)> = read
            .skipped
            .iter()
            .map(|s| (s.name.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(
            skipped,
            [
                (
                    "s1/subagents/agent-n2.jsonl",
                    "is a symbolic link (symbolic links in a sessions directory are not followed)"
                ),
                ("s1/subagents/agent-n3.jsonl", "is a FIFO, not a regular file"),
                (
                    "agent-f1.jsonl",
                    "is a symbolic link (symbolic links in a sessions directory are not followed)"
                ),
            ]
        );
        assert!(matches!(
            read_main(&root, Path::new("p/s1/subagents/agent-n3.jsonl")),
            Err(DiskError::Read(ReadError::NotRegular { .. }))
        ));
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
