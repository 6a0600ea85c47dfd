//! The shell examples of the README and the docs, run against a server as a reader runs
//! them (bash, curl and jq, from a directory where `fixtures/` is the repository's), so the
//! docs cannot drift from the binary: every command exits 0 (curl fails on an HTTP error),
//! and prints what the docs show after it: the status of a `curl -i` line, and every
//! field and value shown in a `# {...}` comment (`…` or `...` elides; `"ab…"` is a prefix).
//!
//! Only `sh` blocks run (a synopsis is a `text` block), and not those that build or start
//! things (`cargo`, `docker`): the test server stands for `cargo run --release` (the
//! bundled fixtures, `./data` as its data directory, no keys); `sessiongraph` is the binary
//! the tests build.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::server::{Options, TestServer};

/// One command of an example block, with what the docs show it prints.
#[derive(Debug, PartialEq)]
struct Step {
    /// The command as written (continuation lines joined, comments left out).
    command: String,
    /// The line of the document where the command starts.
    line: usize,
    /// What the docs show it prints, a line each (none: nothing shown).
    shown: Vec<String>,
}

/// The commands of every `sh` block of `markdown` that is meant to be run against a server.
fn example_steps(markdown: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut in_block = false;
    let mut block: Vec<(usize, &str)> = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        if !in_block && fence && line.trim() == "```sh" {
            in_block = true;
            block.clear();
        } else if in_block && fence {
            in_block = false;
            let commands = block_steps(&block);
            let runs_against_server = commands
                .iter()
                .all(|s| !s.command.starts_with("cargo ") && !s.command.starts_with("docker "));
            if runs_against_server {
                steps.extend(commands);
            }
        } else if in_block {
            block.push((index + 1, line));
        }
    }
    steps
}

/// Splits one block into commands: a command runs on while a quote is open or a line ends
/// in `\`, `|` or `&&`; a comment line right after a command, or a command's trailing comment, that
/// starts like output (`{`, `[`, `HTTP/`, or is a bare JSON scalar) is what it prints.
fn block_steps(lines: &[(usize, &str)]) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut lexer = Lexer::default();
    let mut current: Option<Step> = None;
    let mut after_command = false;
    for &(number, line) in lines {
        if current.is_none() {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                after_command = false;
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                let comment = comment.trim();
                match steps.last_mut() {
                    Some(last) if after_command && is_output(comment) => {
                        last.shown.push(comment.to_owned());
                    }
                    _ => after_command = false,
                }
                continue;
            }
        }
        let (code, comment) = lexer.split_comment(line);
        let step = current.get_or_insert_with(|| Step {
            command: String::new(),
            line: number,
            shown: Vec::new(),
        });
        if !step.command.is_empty() {
            step.command.push('\n');
        }
        step.command.push_str(code.trim_end());
        let code = code.trim_end();
        if lexer.in_quote() || code.ends_with('\\') || code.ends_with('|') || code.ends_with("&&") {
            continue;
        }
        let mut step = current.take().expect("a command is being read");
        if let Some(comment) = comment.filter(|c| is_output(c)) {
            step.shown.push(comment.to_owned());
        }
        steps.push(step);
        after_command = true;
    }
    steps
}

/// Whether a comment shows output rather than explaining.
fn is_output(comment: &str) -> bool {
    comment.starts_with('{')
        || comment.starts_with('[')
        || comment.starts_with("HTTP/")
        || serde_json::from_str::<Value>(comment).is_ok()
}

/// Tracks shell quotes across the lines of a command, to tell a `#` that starts a comment
/// from one inside a string.
#[derive(Default)]
struct Lexer {
    quote: Option<char>,
}

impl Lexer {
    fn in_quote(&self) -> bool {
        self.quote.is_some()
    }

    /// The code of `line`, and its trailing comment if any.
    fn split_comment<'a>(&mut self, line: &'a str) -> (&'a str, Option<&'a str>) {
        let mut previous = ' ';
        let mut escaped = false;
        for (at, c) in line.char_indices() {
            match self.quote {
                Some('\'') if c == '\'' => self.quote = None,
                Some('"') if c == '"' && !escaped => self.quote = None,
                Some(_) => {}
                None if c == '\'' || (c == '"' && !escaped) => self.quote = Some(c),
                None if c == '#' && previous.is_whitespace() => {
                    return (&line[..at], Some(line[at + 1..].trim()));
                }
                None => {}
            }
            escaped = c == '\\' && !escaped;
            previous = c;
        }
        (line, None)
    }
}

/// A field the docs show, and what its value must be.
#[derive(Debug, PartialEq)]
enum Shown {
    /// The value, exactly.
    Equal(Value),
    /// A string that starts so (shown as `"ab…"`).
    Prefix(String),
    /// Any value (shown as `…`, `{...}` or `[...]`).
    Present,
}

/// The `"key": value` pairs of a shown body, read leniently: the body may elide with `…`
/// or `...`, so it is not JSON; pairs nested in shown objects count too.
fn shown_fields(shown: &str) -> Vec<(String, Shown)> {
    let mut fields = Vec::new();
    let mut rest = shown;
    while let Some(start) = rest.find('"') {
        let Some((key, after_key)) = string_token(&rest[start..]) else {
            break;
        };
        let after_key = after_key.trim_start();
        let Some(value_text) = after_key.strip_prefix(':') else {
            rest = after_key;
            continue;
        };
        let value_text = value_text.trim_start();
        let (value, next) = shown_value(value_text);
        fields.push((key, value));
        rest = next;
    }
    fields
}

/// The value at the start of `text`, and what follows it (nested bodies are not skipped,
/// so their pairs are read too).
fn shown_value(text: &str) -> (Shown, &str) {
    if text.starts_with('{') || text.starts_with('[') {
        return (Shown::Present, &text[1..]);
    }
    if text.starts_with('"') {
        if let Some((value, next)) = string_token(text) {
            let shown = match value.strip_suffix('…') {
                Some(prefix) => Shown::Prefix(prefix.to_owned()),
                None => Shown::Equal(Value::String(value)),
            };
            return (shown, next);
        }
    }
    let end = text.find([',', '}', ']']).unwrap_or(text.len());
    let scalar = text[..end].trim();
    match serde_json::from_str::<Value>(scalar) {
        Ok(value) => (Shown::Equal(value), &text[end..]),
        Err(_) => (Shown::Present, &text[end..]),
    }
}

/// The JSON string at the start of `text`, decoded, and what follows it.
fn string_token(text: &str) -> Option<(String, &str)> {
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        if c == '"' && !escaped {
            let value = serde_json::from_str(&text[..=at]).ok()?;
            return Some((value, &text[at + 1..]));
        }
        escaped = c == '\\' && !escaped;
    }
    None
}

/// The JSON values a command printed (after the head of a `curl -i` answer).
fn printed_values(output: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(body_of(output))
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect()
}

/// The body of `curl -i` output, or the whole output.
fn body_of(output: &str) -> &str {
    if output.starts_with("HTTP/") {
        let normalized = output.find("\r\n\r\n").map(|at| at + 4);
        let plain = output.find("\n\n").map(|at| at + 2);
        if let Some(at) = normalized.or(plain) {
            return &output[at..];
        }
    }
    output
}

/// Whether some object in `value` (at any depth) has `key` as shown.
fn has_field(value: &Value, key: &str, shown: &Shown) -> bool {
    match value {
        Value::Object(map) => {
            let here = map.get(key).is_some_and(|v| match shown {
                Shown::Equal(expected) => v == expected,
                Shown::Prefix(prefix) => v.as_str().is_some_and(|s| s.starts_with(prefix)),
                Shown::Present => true,
            });
            here || map.values().any(|v| has_field(v, key, shown))
        }
        Value::Array(items) => items.iter().any(|v| has_field(v, key, shown)),
        _ => false,
    }
}

/// What is wrong with `output` given what the docs show, if anything.
fn mismatch(shown: &str, output: &str) -> Option<String> {
    if let Some(status_line) = shown.strip_prefix("HTTP/") {
        let status = status_line.split_whitespace().nth(1).unwrap_or_default();
        let printed = output.lines().next().unwrap_or_default();
        let printed_status = printed.split_whitespace().nth(1).unwrap_or_default();
        return (printed_status != status).then(|| format!("shown status {status}, printed `{printed}`"));
    }
    let values = printed_values(output);
    if let Ok(expected) = serde_json::from_str::<Value>(shown) {
        if !expected.is_object() && !expected.is_array() {
            return (values.first() != Some(&expected))
                .then(|| format!("shown {expected}, printed {values:?}"));
        }
    }
    let fields = shown_fields(shown);
    if fields.is_empty() {
        return Some("shown output names no field to check".into());
    }
    let missing: Vec<String> = fields
        .iter()
        .filter(|(key, value)| !values.iter().any(|v| has_field(v, key, value)))
        .map(|(key, value)| format!("{key}: {value:?}"))
        .collect();
    (!missing.is_empty()).then(|| format!("not printed: {}", missing.join(", ")))
}

/// bash, curl and jq, which the examples need; CI installs them. Elsewhere a missing one
/// skips the test, loudly.
fn tools_missing() -> Option<&'static str> {
    ["bash", "curl", "jq"].into_iter().find(|tool| {
        Command::new(tool)
            .arg("--version")
            .output()
            .map_or(true, |o| !o.status.success())
    })
}

/// `curl` as the examples run it: its output only once the answer is final (a 503 is
/// retried after a second, up to a minute: the search index catches up with an upload in
/// the background), and a failing exit status on an HTTP error, with the body printed.
const CURL_WRAPPER: &str = r#"set -uo pipefail
curl() {
    local out status
    out=$(mktemp)
    for _ in $(seq 1 60); do
        status=$(command curl -sS -o "$out" -w '%{http_code}' "$@") || { cat "$out"; rm -f "$out"; return 1; }
        [ "$status" = 503 ] || break
        sleep 1
    done
    cat "$out"
    rm -f "$out"
    [ "$status" -lt 400 ]
}
"#;

/// Runs `steps` in one bash, each command's output and status kept apart; stops at the
/// first command that fails.
fn run_steps(steps: &[Step], server_url: &str, workdir: &Path) -> Vec<(String, i32)> {
    let address = server_url.trim_start_matches("http://");
    let mut script = String::from(CURL_WRAPPER);
    script.push_str(&format!(
        "sessiongraph() {{ '{}' \"$@\"; }}\n",
        env!("CARGO_BIN_EXE_sessiongraph")
    ));
    for (index, step) in steps.iter().enumerate() {
        let command = step.command.replace("localhost:8080", address);
        script.push_str(&format!(
            "{{ {command}\n}} > out/{index} 2>&1\nrc=$?; echo $rc > out/{index}.rc; [ $rc -eq 0 ] || exit 0\n"
        ));
    }
    std::fs::create_dir_all(workdir.join("out")).unwrap();
    // The server the docs' commands talk to keeps its labels in `./data`, as
    // `cargo run --release` does: a database URL of the test environment is not theirs.
    let run = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(workdir)
        .env_remove("DATABASE_URL")
        .env_remove("SESSIONGRAPH_DATABASE_URL")
        .output()
        .expect("bash runs");
    assert!(
        run.status.success(),
        "the example script itself failed: {}\n{script}",
        String::from_utf8_lossy(&run.stderr)
    );
    (0..steps.len())
        .map_while(|index| {
            let rc = std::fs::read_to_string(workdir.join(format!("out/{index}.rc"))).ok()?;
            let output = std::fs::read_to_string(workdir.join(format!("out/{index}"))).unwrap();
            Some((output, rc.trim().parse().unwrap()))
        })
        .collect()
}

/// Runs the examples of one document against a fresh server and checks them.
async fn check_document(relative: &str) {
    if let Some(tool) = tools_missing() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is missing; CI must install it"
        );
        eprintln!("SKIPPED: the docs' examples need {tool}");
        return;
    }
    let root = crate::helpers::root();
    let markdown = std::fs::read_to_string(root.join(relative)).unwrap();
    let steps = example_steps(&markdown);
    assert!(!steps.is_empty(), "{relative} has no example to run");
    let workdir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root.join("fixtures"), workdir.path().join("fixtures")).unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![root.join("fixtures")],
        data_dir: Some(workdir.path().join("data")),
        ..Options::default()
    })
    .await;
    let url = server.url.clone();
    let dir: PathBuf = workdir.path().to_owned();
    let results = {
        let steps = &steps;
        tokio::task::block_in_place(|| run_steps(steps, &url, &dir))
    };
    let mut failures = Vec::new();
    for (step, (output, rc)) in steps.iter().zip(&results) {
        let place = format!("{relative}:{}: {}", step.line, step.command);
        if *rc != 0 {
            failures.push(format!("{place}\n  exited {rc}:\n{output}"));
            break;
        }
        for problem in step.shown.iter().filter_map(|s| mismatch(s, output)) {
            failures.push(format!("{place}\n  {problem}\n  printed:\n{output}"));
        }
    }
    if results.len() < steps.len() && failures.is_empty() {
        failures.push(format!(
            "{relative}: only {} of {} commands ran",
            results.len(),
            steps.len()
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_examples_print_what_the_readme_shows() {
    check_document("README.md").await;
}

#[test]
fn a_command_runs_on_over_open_quotes_and_backslashes() {
    let markdown = "```sh\n# Explains\ncurl -s a \\\n  -d '{\n  \"x\": 1}' | jq .  # {\"x\": 1}\n\
                    curl -s b   # the DAG, cut at step 50\n# [1]\n\ncurl -s c\n# HTTP/1.1 201 Created\n```\n\
                    ```sh\ncargo run --release\n```\n";
    let steps = example_steps(markdown);
    assert_eq!(
        steps,
        vec![
            Step {
                command: "curl -s a \\\n  -d '{\n  \"x\": 1}' | jq .".into(),
                line: 3,
                shown: vec!["{\"x\": 1}".into()],
            },
            Step {
                command: "curl -s b".into(),
                line: 6,
                shown: vec!["[1]".into()],
            },
            Step {
                command: "curl -s c".into(),
                line: 9,
                shown: vec!["HTTP/1.1 201 Created".into()],
            },
        ]
    );
}

#[test]
fn shown_bodies_are_read_with_their_elisions() {
    let fields = shown_fields(
        r#"{"graph_id":"35186e","message_count":654,...,"diagnostics":{...},"event_id":"S:…","at":…}"#,
    );
    assert_eq!(
        fields,
        vec![
            ("graph_id".into(), Shown::Equal("35186e".into())),
            ("message_count".into(), Shown::Equal(654.into())),
            ("diagnostics".into(), Shown::Present),
            ("event_id".into(), Shown::Prefix("S:".into())),
            ("at".into(), Shown::Present),
        ]
    );
    let printed = "HTTP/1.1 200 OK\r\netag: x\r\n\r\n{\"a\":{\"event_id\":\"S:1\"}}";
    assert_eq!(mismatch(r#"{"event_id":"S:…"}"#, printed), None);
    assert!(mismatch(r#"{"event_id":"A:…"}"#, printed).is_some());
    assert_eq!(mismatch("HTTP/1.1 200 OK", printed), None);
    assert!(mismatch("HTTP/1.1 201 Created", printed).is_some());
    assert_eq!(mismatch("105", "105\n"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_doc_examples_print_what_the_doc_shows() {
    check_document("docs/api.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_doc_examples_print_what_the_doc_shows() {
    check_document("docs/labels.md").await;
}
