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

/// Hand-written Claude Code records, one JSONL line each: [`records::Record`] builds one
/// field by field; [`records::user`], [`records::assistant`] and [`records::tool_result`]
/// are the shapes most tests write, taking their content as JSON text.
pub mod records {
    use serde_json::{json, Map, Value};

    /// A Claude Code record built field by field. [`Record::line`] writes its fields in the
    /// order Claude Code does: `type`, `uuid`, `parentUuid`, `isSidechain`, `agentId`,
    /// `sessionId`, `timestamp`, `requestId`, the other fields, then `message`.
    #[derive(Debug, Clone)]
    pub struct Record {
        kind: &'static str,
        uuid: String,
        parent: Option<String>,
        agent: Option<String>,
        session: String,
        timestamp: Option<String>,
        request: Option<String>,
        others: Vec<(String, Value)>,
        message: Value,
    }

    impl Record {
        /// A user record `uuid` without parent, in session `S`, whose message holds
        /// `content` (a string, or an array of blocks).
        pub fn user(uuid: &str, content: Value) -> Record {
            Record::new("user", uuid, json!({"role": "user", "content": content}))
        }

        /// A user prompt: a user record saying `text`.
        pub fn prompt(uuid: &str, text: &str) -> Record {
            Record::user(uuid, Value::from(text))
        }

        /// An assistant record `uuid` without parent, in session `S`: the API message
        /// `message_id` holding `blocks`.
        pub fn assistant(uuid: &str, message_id: &str, blocks: Vec<Value>) -> Record {
            Record::new(
                "assistant",
                uuid,
                json!({"id": message_id, "role": "assistant", "content": blocks}),
            )
        }

        fn new(kind: &'static str, uuid: &str, message: Value) -> Record {
            Record {
                kind,
                uuid: uuid.to_owned(),
                parent: None,
                agent: None,
                session: "S".to_owned(),
                timestamp: None,
                request: None,
                others: Vec::new(),
                message,
            }
        }

        /// The record it follows.
        pub fn parent(mut self, uuid: &str) -> Record {
            self.parent = Some(uuid.to_owned());
            self
        }

        /// When it was written (ISO 8601).
        pub fn at(mut self, timestamp: &str) -> Record {
            self.timestamp = Some(timestamp.to_owned());
            self
        }

        /// The session it belongs to.
        pub fn session(mut self, id: &str) -> Record {
            self.session = id.to_owned();
            self
        }

        /// A record of sub-agent `agent_id`'s log (`isSidechain`).
        pub fn sidechain(mut self, agent_id: &str) -> Record {
            self.agent = Some(agent_id.to_owned());
            self
        }

        /// The API request an assistant record answers.
        pub fn request(mut self, id: &str) -> Record {
            self.request = Some(id.to_owned());
            self
        }

        /// The token usage of an assistant record's message.
        pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Record {
            self.message["usage"] = json!({"input_tokens": input_tokens, "output_tokens": output_tokens});
            self
        }

        /// Any other top-level field (`isCompactSummary`, `toolUseResult`, ...).
        pub fn with(mut self, key: &str, value: Value) -> Record {
            self.others.push((key.to_owned(), value));
            self
        }

        /// The record as one JSONL line, without its newline.
        pub fn line(&self) -> String {
            let mut fields = Map::new();
            fields.insert("type".into(), self.kind.into());
            fields.insert("uuid".into(), self.uuid.clone().into());
            fields.insert("parentUuid".into(), self.parent.clone().into());
            fields.insert("isSidechain".into(), self.agent.is_some().into());
            if let Some(agent) = &self.agent {
                fields.insert("agentId".into(), agent.clone().into());
            }
            fields.insert("sessionId".into(), self.session.clone().into());
            if let Some(timestamp) = &self.timestamp {
                fields.insert("timestamp".into(), timestamp.clone().into());
            }
            if let Some(request) = &self.request {
                fields.insert("requestId".into(), request.clone().into());
            }
            for (key, value) in &self.others {
                fields.insert(key.clone(), value.clone());
            }
            fields.insert("message".into(), self.message.clone());
            Value::Object(fields).to_string()
        }
    }

    /// The JSON value of `text`, which a test wrote as JSON.
    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// A user record with string or array `content` (JSON text).
    pub fn user(uuid: &str, parent: Option<&str>, ts: &str, content: &str) -> String {
        let record = Record::user(uuid, parsed(content)).at(ts);
        match parent {
            Some(parent) => record.parent(parent),
            None => record,
        }
        .line()
    }

    /// An assistant chunk holding `blocks` (JSON text: one block, or several separated by
    /// commas), with token usage.
    pub fn assistant(
        uuid: &str,
        parent: Option<&str>,
        ts: &str,
        req: Option<&str>,
        msg: &str,
        blocks: &str,
    ) -> String {
        let Value::Array(blocks) = parsed(&format!("[{blocks}]")) else {
            unreachable!("a JSON array parses as one")
        };
        let mut record = Record::assistant(uuid, msg, blocks).at(ts).usage(10, 5);
        if let Some(parent) = parent {
            record = record.parent(parent);
        }
        if let Some(req) = req {
            record = record.request(req);
        }
        record.line()
    }

    /// A text block.
    pub fn text(t: &str) -> String {
        json!({"type": "text", "text": t}).to_string()
    }

    /// A tool_use block.
    pub fn tool_use(id: &str, name: &str, input: &str) -> String {
        json!({"type": "tool_use", "id": id, "name": name, "input": parsed(input)}).to_string()
    }

    /// A tool result record; `extra` adds fields to the result block (JSON text starting
    /// with a comma, or empty).
    pub fn tool_result(
        uuid: &str,
        parent: &str,
        ts: &str,
        tool_use_id: &str,
        content: &str,
        extra: &str,
    ) -> String {
        let block = parsed(&format!(
            r#"{{"type":"tool_result","tool_use_id":"{tool_use_id}","content":"{content}"{extra}}}"#
        ));
        Record::user(uuid, json!([block])).parent(parent).at(ts).line()
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
