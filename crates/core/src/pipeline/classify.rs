//! One classification of records for every view (CONTRACT 3.4).
//!
//! A user record is a tool result (success or failure), a meta record (never shown), a
//! system notice (local command output, bash notification, slash command), or a prompt.
//! The same rule decides the workflow node type, the chat-log entry and the annotation unit.

use std::sync::LazyLock;

use crate::formats::claude_code::records::{Block, Content, JsonStr, Record, ToolUse};
use crate::json::literals::Text;
use crate::json::members::object_members;
use crate::json::raw::Needle;
use crate::json::utf16::prefix_utf16;

/// What a user record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserClass {
    /// Answers one or more tool calls.
    ToolResult {
        /// True when the result reports a failure (see [`tool_result_failed`]).
        failed: bool,
    },
    /// `isMeta`: context injected by Claude Code, not part of the conversation.
    Meta,
    /// Output or notification shown to the user, not a prompt.
    Notice(NoticeKind),
    /// A prompt typed (or pasted, or attached) by the user.
    Prompt,
}

/// The kinds of system notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// A `system` record; its `subtype` says which (`api_error`, `informational`, ...).
    System,
    /// `<local-command-stdout>` and friends: output of a local slash command.
    LocalCommand,
    /// `<bash-notification>`: a background shell changed state.
    BashNotification,
    /// `<command-name>`: a slash command. The specification's user turns exclude slash
    /// commands (`docs/spec/annotation-units.md`) and its graph rules make them system notices
    /// (`docs/spec/graph-nodes-edges.md`).
    SlashCommand,
}

impl NoticeKind {
    /// The `system_subtype` given to annotation units of this kind (system records carry
    /// their own `subtype`).
    pub fn subtype(self) -> Option<&'static str> {
        match self {
            NoticeKind::System => None,
            NoticeKind::LocalCommand => Some("local_command"),
            NoticeKind::BashNotification => Some("bash_notification"),
            NoticeKind::SlashCommand => Some("slash_command"),
        }
    }
}

/// Classifies a `user` record.
pub fn classify_user(r: &Record) -> UserClass {
    if r.has_tool_result() {
        return UserClass::ToolResult {
            failed: tool_result_failed(r),
        };
    }
    if r.is_meta {
        return UserClass::Meta;
    }
    static NOTICES: LazyLock<[(Needle, NoticeKind); 3]> = LazyLock::new(|| {
        [
            (Needle::new("<local-command-"), NoticeKind::LocalCommand),
            (Needle::new("<bash-notification>"), NoticeKind::BashNotification),
            (Needle::new("<command-name>"), NoticeKind::SlashCommand),
        ]
    });
    let notice = |s: &JsonStr| {
        NOTICES
            .iter()
            .find(|(needle, _)| s.contains(needle))
            .map(|&(_, kind)| kind)
    };
    let found = match r.message.as_ref().map(|m| &m.content) {
        Some(Content::Text(s)) => notice(s),
        Some(Content::Blocks(blocks)) => blocks.iter().find_map(|b| match b {
            Block::Text(t) => notice(t),
            _ => None,
        }),
        _ => None,
    };
    found.map_or(UserClass::Prompt, UserClass::Notice)
}

/// The failure rule for tool results, the one every view uses: a `tool_result` block with
/// `is_error: true`, or `toolUseResult.status == "failed"`, or `toolUseResult.interrupted`.
/// A non-empty `stderr` alone is a success (see [`ToolUseResult::reports_failure`]).
///
/// [`ToolUseResult::reports_failure`]: crate::formats::claude_code::records::ToolUseResult::reports_failure
pub fn tool_result_failed(r: &Record) -> bool {
    r.blocks()
        .iter()
        .any(|b| matches!(b, Block::ToolResult(t) if t.is_error))
        || r.tool_use_result().is_some_and(|t| t.reports_failure())
}

/// Maximum length, in UTF-16 units, of the text taken from an array content (a long
/// literal remembers where this cut falls: [`crate::json::raw::CUT_UNITS`]).
pub const ARRAY_TEXT_LIMIT: usize = crate::json::raw::CUT_UNITS;

/// The text of a user record as the workflow and chat log show it: a string content as is;
/// for an array, the text blocks, the tool results' text, then the tool's stdout, stderr
/// (`[stderr] ...`) and file content (`[file: path]\n...`), joined with `\n` and cut to
/// [`ARRAY_TEXT_LIMIT`] units.
///
/// Made of the record's strings as they were read: nothing is copied or decoded.
pub fn user_text(r: &Record) -> Text<'_> {
    let blocks = match r.message.as_ref().map(|m| &m.content) {
        Some(Content::Text(s)) => return Text::json(s),
        Some(Content::Blocks(b)) => b,
        _ => return Text::new(),
    };
    let mut parts: Vec<Text<'_>> = Vec::new();
    for b in blocks {
        match b {
            Block::Text(t) => parts.push(Text::json(t)),
            Block::ToolResult(t) => parts.extend(t.texts.iter().map(Text::json)),
            _ => {}
        }
    }
    if let Some(t) = r.tool_use_result() {
        if let Some(s) = t.stdout.as_ref().filter(|s| !s.is_empty()) {
            parts.push(Text::json(s));
        }
        if let Some(s) = t.stderr.as_ref().filter(|s| !s.is_empty()) {
            let mut stderr = Text::from("[stderr] ");
            stderr.push_json(s);
            parts.push(stderr);
        }
        if let Some(s) = t.file_content.as_ref().filter(|s| !s.is_empty()) {
            let path = t.file_path.as_deref().unwrap_or("undefined");
            let mut file = Text::from(format!("[file: {path}]\n"));
            file.push_json(s);
            parts.push(file);
        }
    }
    let mut joined = Text::join(parts, "\n");
    joined.cut_utf16(ARRAY_TEXT_LIMIT);
    joined
}

/// The text of a `system` record: its `content`, else its `subtype`, else `System event`.
pub fn system_text(r: &Record) -> Text<'_> {
    if let Some(content) = r.system_content().filter(|c| !c.is_empty()) {
        return Text::json(content);
    }
    Text::from(r.subtype().filter(|s| !s.is_empty()).unwrap_or("System event"))
}

/// The text of a notice: [`system_text`] for `system` records, [`user_text`] otherwise.
pub fn notice_text(r: &Record) -> Text<'_> {
    if r.kind == crate::formats::claude_code::records::RecordKind::System {
        system_text(r)
    } else {
        user_text(r)
    }
}

/// The prompt text the annotation view labels: a string content as is, or the text blocks
/// joined with `\n`.
pub fn prompt_text(r: &Record) -> Text<'_> {
    match r.message.as_ref().map(|m| &m.content) {
        Some(Content::Text(s)) => Text::json(s),
        Some(Content::Blocks(blocks)) => Text::join(
            blocks.iter().filter_map(|b| match b {
                Block::Text(t) => Some(Text::json(t)),
                _ => None,
            }),
            "\n",
        ),
        _ => Text::new(),
    }
}

/// An image attached to a message: `{mediaType, data}` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImageRef<'a> {
    /// `source.media_type`.
    #[serde(rename = "mediaType", skip_serializing_if = "Option::is_none")]
    pub media_type: Option<&'a str>,
    /// `source.data` (base64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Text<'a>>,
}

/// The base64 images of a record's content (URL images are not carried).
pub fn images(r: &Record) -> Vec<ImageRef<'_>> {
    r.blocks()
        .iter()
        .filter_map(|b| match b {
            Block::Image(img) if img.source_type.as_deref() == Some("base64") => Some(ImageRef {
                media_type: img.media_type.as_deref(),
                data: img.data.as_ref().map(Text::json),
            }),
            _ => None,
        })
        .collect()
}

/// True when the record's content holds an image block of any source.
fn has_image(r: &Record) -> bool {
    r.blocks().iter().any(|b| matches!(b, Block::Image(_)))
}

/// True when the record's content has something a prompt can be: a string, or an array
/// with a text or image block.
fn has_prompt_content(r: &Record) -> bool {
    match r.message.as_ref().map(|m| &m.content) {
        Some(Content::Text(_)) => true,
        Some(Content::Blocks(b)) => b.iter().any(|b| matches!(b, Block::Text(_) | Block::Image(_))),
        _ => false,
    }
}

/// True when a prompt is an annotation unit: any text that is not blank ("ok", "yes" and
/// "go" are decisions a coder labels), or an image.
pub fn is_labelable_prompt(r: &Record) -> bool {
    has_prompt_content(r) && (has_image(r) || trimmed_reaches(&prompt_text(r), 1))
}

/// True when `text`, trimmed of white space at both ends (as JavaScript's `trim()`), is at
/// least `units` UTF-16 units long. Reads only as far as it needs to.
pub fn trimmed_reaches(text: &Text<'_>, units: usize) -> bool {
    // Units from the first character that is not white space: at one that is not either,
    // the text trimmed is at least that long.
    let mut from_first = 0;
    for c in text.chars() {
        if from_first == 0 && is_js_white_space(c) {
            continue;
        }
        from_first += c.len_utf16();
        if !is_js_white_space(c) && from_first >= units {
            return true;
        }
    }
    units == 0
}

/// White space as JavaScript's `trim()` takes it: Unicode's White_Space but U+0085, and
/// the byte order mark U+FEFF.
fn is_js_white_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// The one-line description of a tool call shown as the node's content.
pub fn tool_description(tool: &ToolUse) -> String {
    let Some(input) = tool.input.as_ref() else {
        return describe(tool, |_| None, || "undefined".to_owned());
    };
    // The input's members as written, their values unread (a file's content is skipped, not
    // read); a repeated key keeps its last value, as in JavaScript. An input that is no
    // object, or has a key with an escape, is read whole.
    match object_members(input.get()) {
        Some(members) => {
            let field = |k: &str| {
                let (_, value) = members.iter().rev().find(|(key, _)| *key == k)?;
                serde_json::from_str(value).ok()
            };
            describe(tool, field, || input.value().to_string())
        }
        None => {
            let value = input.value();
            describe(tool, |k| value.get(k).cloned(), || value.to_string())
        }
    }
}

/// [`tool_description`] of `tool`, whose input field `k` is `field(k)` and whose input
/// written as JSON (for tools of other names) is `whole()`: CommuGraph's descriptions at
/// f28ce03, JavaScript's truthiness and `slice` (UTF-16 units) included.
fn describe(
    tool: &ToolUse,
    field: impl Fn(&str) -> Option<serde_json::Value>,
    whole: impl Fn() -> String,
) -> String {
    // `input.k` when truthy, as JavaScript writes it into a template string.
    let text = |k: &str| field(k).filter(is_truthy).map(|v| js_string(&v));
    let or_unknown = |k: &str| text(k).unwrap_or_else(|| "unknown".to_owned());
    let cut = |s: &str, units: usize| prefix_utf16(s, units).to_owned();
    match tool.name.as_str() {
        "Read" => format!("Read file: {}", or_unknown("file_path")),
        "Write" => format!("Write file: {}", or_unknown("file_path")),
        "Edit" => format!("Edit file: {}", or_unknown("file_path")),
        "NotebookEdit" => format!(
            "Edit notebook: {} ({})",
            or_unknown("notebook_path"),
            text("edit_mode").unwrap_or_else(|| "replace".to_owned())
        ),
        "Glob" => format!("Glob: {}", or_unknown("pattern")),
        "Grep" => match text("path") {
            Some(path) => format!("Grep: {} in {path}", or_unknown("pattern")),
            None => format!("Grep: {}", or_unknown("pattern")),
        },
        "Bash" => format!("Bash: {}", cut(&text("command").unwrap_or_default(), 100)),
        "KillShell" => format!("Kill shell: {}", or_unknown("shell_id")),
        "Task" => {
            let kind = or_unknown("subagent_type");
            let what = text("description").or_else(|| text("prompt")).unwrap_or_default();
            format!("Task ({kind}): {}", cut(&what, 100))
        }
        "TaskOutput" => {
            let blocking = field("block") == Some(serde_json::Value::Bool(false));
            let suffix = if blocking { " (non-blocking)" } else { "" };
            format!("Get task output: {}{suffix}", or_unknown("task_id"))
        }
        "AgentOutputTool" => format!("Get agent output: {}", or_unknown("agentId")),
        "EnterPlanMode" => "Enter plan mode".to_owned(),
        "ExitPlanMode" if text("launchSwarm").is_some() => "Exit plan mode (launch swarm)".to_owned(),
        "ExitPlanMode" => "Exit plan mode".to_owned(),
        "WebFetch" => format!("Fetch URL: {}", cut(&or_unknown("url"), 80)),
        "WebSearch" => format!("Web search: {}", cut(&or_unknown("query"), 80)),
        "AskUserQuestion" => {
            let questions = field("questions");
            let q = questions
                .as_ref()
                .and_then(|q| q.get(0))
                .and_then(|q| q.get("question"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            format!("Ask user: {}", cut(q, 100))
        }
        "TodoWrite" => todo_description(field("todos")),
        "Skill" => format!("Skill: {}", or_unknown("skill")),
        "SlashCommand" => format!("Command: {}", or_unknown("command")),
        name => format!("{name}: {}", cut(&whole(), 100)),
    }
}

/// A `TodoWrite` call: the first todo in progress (`Todo: <content>`, 80 UTF-16 units), or
/// how many todos it writes when none is.
fn todo_description(todos: Option<serde_json::Value>) -> String {
    use serde_json::Value;
    let todos = match todos {
        Some(Value::Array(todos)) => todos,
        _ => Vec::new(),
    };
    let in_progress = todos
        .iter()
        .find(|t| t.get("status").and_then(Value::as_str) == Some("in_progress"));
    match in_progress.and_then(|t| t.get("content")) {
        Some(content) => format!("Todo: {}", prefix_utf16(&js_string(content), 80)),
        None => format!("TodoWrite: {} items", todos.len()),
    }
}

fn is_truthy(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `String(v)` in JavaScript, for the values a tool input may hold.
fn js_string(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(js_string).collect::<Vec<_>>().join(","),
        Value::Object(_) => "[object Object]".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::parse::parse_line;
    use crate::pipeline::classify::*;

    fn record(json: &str) -> Record {
        parse_line(json.as_bytes()).unwrap().records.remove(0).record
    }

    #[test]
    fn tool_results_fail_by_is_error_status_or_interruption_never_by_stderr() {
        let ok = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}}"#,
        );
        assert_eq!(classify_user(&ok), UserClass::ToolResult { failed: false });
        let is_error = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"x","is_error":true}]}}"#,
        );
        assert_eq!(classify_user(&is_error), UserClass::ToolResult { failed: true });
        let status = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t"}]},"toolUseResult":{"status":"failed"}}"#,
        );
        assert_eq!(classify_user(&status), UserClass::ToolResult { failed: true });
        let interrupted = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t"}]},"toolUseResult":{"interrupted":true}}"#,
        );
        assert_eq!(
            classify_user(&interrupted),
            UserClass::ToolResult { failed: true }
        );
        let stderr = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","is_error":false}]},"toolUseResult":{"stdout":"","stderr":"\nShell cwd was reset to /w"}}"#,
        );
        assert_eq!(classify_user(&stderr), UserClass::ToolResult { failed: false });
        let empty_stderr = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t"}]},"toolUseResult":{"stderr":""}}"#,
        );
        assert_eq!(
            classify_user(&empty_stderr),
            UserClass::ToolResult { failed: false }
        );
    }

    #[test]
    fn notices_and_prompts() {
        let c = |content: &str| {
            classify_user(&record(&format!(
                r#"{{"type":"user","message":{{"content":{content}}}}}"#
            )))
        };
        assert_eq!(
            c(r#""<local-command-stdout></local-command-stdout>""#),
            UserClass::Notice(NoticeKind::LocalCommand)
        );
        assert_eq!(
            c(r#""<bash-notification>x</bash-notification>""#),
            UserClass::Notice(NoticeKind::BashNotification)
        );
        assert_eq!(
            c(r#""<command-name>/clear</command-name>""#),
            UserClass::Notice(NoticeKind::SlashCommand)
        );
        assert_eq!(
            c(r#"[{"type":"text","text":"<command-name>/x</command-name>"}]"#),
            UserClass::Notice(NoticeKind::SlashCommand)
        );
        assert_eq!(c(r#""ok""#), UserClass::Prompt);
        assert_eq!(
            c(r#"[{"type":"image","source":{"type":"base64","data":"AA=="}}]"#),
            UserClass::Prompt
        );
        let meta = record(r#"{"type":"user","isMeta":true,"message":{"content":"Caveat"}}"#);
        assert_eq!(classify_user(&meta), UserClass::Meta);
    }

    #[test]
    fn short_prompts_are_user_turns_blank_ones_are_not() {
        let short = record(r#"{"type":"user","message":{"content":"  ok  "}}"#);
        assert!(is_labelable_prompt(&short));
        let blank = record(r#"{"type":"user","message":{"content":" \n\t "}}"#);
        assert!(!is_labelable_prompt(&blank));
        let blank_blocks = record(r#"{"type":"user","message":{"content":[{"type":"text","text":"  "}]}}"#);
        assert!(!is_labelable_prompt(&blank_blocks));
        let long = record(r#"{"type":"user","message":{"content":"fix it"}}"#);
        assert!(is_labelable_prompt(&long));
        let image = record(
            r#"{"type":"user","message":{"content":[{"type":"image","source":{"type":"base64","data":"AA=="}}]}}"#,
        );
        assert!(is_labelable_prompt(&image));
        assert_eq!(images(&image).len(), 1);
    }

    #[test]
    fn user_text_appends_stdout_stderr_and_file() {
        let r = record(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"1 passing"}]},"toolUseResult":{"stdout":"1 passing","stderr":"warn","file":{"filePath":"/a","content":"x"}}}"#,
        );
        assert_eq!(
            user_text(&r),
            "1 passing\n1 passing\n[stderr] warn\n[file: /a]\nx"
        );
    }

    #[test]
    fn user_text_of_arrays_is_capped() {
        let long = "y".repeat(20_000);
        let r = record(&format!(
            r#"{{"type":"user","message":{{"content":[{{"type":"text","text":"{long}"}}]}}}}"#
        ));
        assert_eq!(user_text(&r).to_text().len(), ARRAY_TEXT_LIMIT);
        let s = record(&format!(r#"{{"type":"user","message":{{"content":"{long}"}}}}"#));
        assert_eq!(user_text(&s).to_text().len(), 20_000);
    }

    #[test]
    fn tool_descriptions_follow_the_reference() {
        let tool = |name: &str, input: &str| {
            let r = record(&format!(
                r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t","name":"{name}","input":{input}}}]}}}}"#
            ));
            match &r.blocks()[0] {
                Block::ToolUse(t) => tool_description(t),
                _ => unreachable!(),
            }
        };
        assert_eq!(tool("Read", r#"{"file_path":"/a"}"#), "Read file: /a");
        assert_eq!(tool("Read", r#"{}"#), "Read file: unknown");
        assert_eq!(
            tool("Bash", &format!(r#"{{"command":"{}"}}"#, "x".repeat(150))),
            format!("Bash: {}", "x".repeat(100))
        );
        assert_eq!(
            tool("Task", r#"{"subagent_type":"Explore","description":"Look"}"#),
            "Task (Explore): Look"
        );
        assert_eq!(tool("Task", r#"{"prompt":"P"}"#), "Task (unknown): P");
        assert_eq!(tool("TodoWrite", r#"{"todos":[{"a":1}]}"#), "TodoWrite: 1 items");
        assert_eq!(
            tool(
                "TodoWrite",
                r#"{"todos":[{"content":"Done","status":"completed"},{"content":"Fix test","status":"in_progress"}]}"#
            ),
            "Todo: Fix test"
        );
        assert_eq!(
            tool("AskUserQuestion", r#"{"questions":[{"question":"Which?"}]}"#),
            "Ask user: Which?"
        );
        assert_eq!(tool("mcp__x", r#"{"x":1}"#), r#"mcp__x: {"x":1}"#);
        assert_eq!(
            tool("Grep", r#"{"pattern":"p","path":"/src"}"#),
            "Grep: p in /src"
        );
        assert_eq!(tool("Grep", r#"{"pattern":"p","path":""}"#), "Grep: p");
        assert_eq!(
            tool("KillShell", r#"{"shell_id":"79aef2"}"#),
            "Kill shell: 79aef2"
        );
        assert_eq!(tool("ExitPlanMode", r##"{"plan":"# Plan"}"##), "Exit plan mode");
        assert_eq!(
            tool("ExitPlanMode", r#"{"plan":"x","launchSwarm":true}"#),
            "Exit plan mode (launch swarm)"
        );
        assert_eq!(tool("EnterPlanMode", r#"{}"#), "Enter plan mode");
        assert_eq!(
            tool("NotebookEdit", r#"{"notebook_path":"/n.ipynb"}"#),
            "Edit notebook: /n.ipynb (replace)"
        );
        assert_eq!(
            tool("TaskOutput", r#"{"task_id":"t1","block":false}"#),
            "Get task output: t1 (non-blocking)"
        );
        assert_eq!(tool("TaskOutput", r#"{"task_id":"t1"}"#), "Get task output: t1");
        assert_eq!(
            tool("AgentOutputTool", r#"{"agentId":"a1"}"#),
            "Get agent output: a1"
        );
        assert_eq!(
            tool("WebFetch", &format!(r#"{{"url":"{}"}}"#, "u".repeat(90))),
            format!("Fetch URL: {}", "u".repeat(80))
        );
        assert_eq!(tool("WebSearch", r#"{}"#), "Web search: unknown");
        assert_eq!(tool("Skill", r#"{"skill":"pdf"}"#), "Skill: pdf");
        assert_eq!(
            tool("SlashCommand", r#"{"command":"/review"}"#),
            "Command: /review"
        );
        // Only the shown fields are read; the rest (a file's content) is skipped.
        assert_eq!(
            tool("Write", r#"{"file_path":"/b","content":"long \n text \u0041"}"#),
            "Write file: /b"
        );
        assert_eq!(tool("Read", r#"{"file_path":["/a","/b"]}"#), "Read file: /a,/b");
        assert_eq!(tool("Read", r#"{"file_path":null}"#), "Read file: unknown");
        assert_eq!(tool("TodoWrite", r#"{"todos":null}"#), "TodoWrite: 0 items");
        assert_eq!(tool("Read", r#"{"file_path":""}"#), "Read file: unknown");
        // A repeated key: the last value, as JavaScript reads it.
        assert_eq!(
            tool("Read", r#"{"file_path":"/a","file_path":"/z"}"#),
            "Read file: /z"
        );
        // An input that is no object has none of the fields.
        assert_eq!(tool("Read", r#""/a""#), "Read file: unknown");
        assert_eq!(tool("mcp__y", r#"[1, 2]"#), "mcp__y: [1,2]");
    }
}
