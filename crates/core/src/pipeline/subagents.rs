//! Sub-agents (CONTRACT 3.6): which log belongs to which Task call.
//!
//! A sub-agent log (`agent-<id>.jsonl`) is tied to the Task call that spawned it by, in
//! order of trust:
//! 1. the Task result in the parent log, whose `toolUseResult.agentId` names the agent and
//!    whose `tool_use_id` names the call;
//! 2. `agent-<id>.meta.json` beside the log, whose `toolUseId` names the call;
//! 3. the sub-agent's first prompt, equal to the `prompt` input of exactly one Task call
//!    not otherwise tied (a sub-agent whose result was never written, because the session
//!    stopped while it ran).
//!
//! Nesting depth is 1 for an agent spawned from the main log and one more than its parent
//! agent otherwise. A log that cannot be tied and whose `sessionId` is another session's
//! is left out: Claude Code's flat layout keeps the agents of every session of a project in
//! one folder.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde::Deserialize;
use serde_json::Number;

use super::classify::prompt_text;
use crate::formats::claude_code::records::{Block, JsonStr, Record, RecordKind, ToolUse};
use crate::formats::input::{agent_id_from_name, FileRole};
use crate::heap::HeapSize;
use crate::json::lenient;

/// How an agent was tied to its Task call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSource {
    /// By the Task result's `toolUseResult.agentId`.
    TaskResult,
    /// By `agent-<id>.meta.json`.
    MetaFile,
    /// By the agent's first prompt.
    Prompt,
    /// By time (Gemini before v0.39): the call that was running when the agent started.
    Time,
}

/// One sub-agent of the session.
#[derive(Debug, Clone, Default)]
pub struct Agent {
    /// The agent id (`80f146b4`).
    pub agent_id: String,
    /// Index of its log in the session's files, when the log was given.
    pub file: Option<usize>,
    /// The spawning Task call's `tool_use` id.
    pub tool_use_id: Option<String>,
    /// The record holding that Task call.
    pub task_record: Option<usize>,
    /// The record holding the Task result that named this agent.
    pub result_record: Option<usize>,
    /// `subagent_type` of the Task call (else `agentType` of the meta file).
    pub subagent_type: Option<String>,
    /// The prompt: the Task result's `prompt`, else the Task call's input `prompt`.
    pub prompt: Option<JsonStr>,
    /// `totalDurationMs` of the Task result.
    pub total_duration_ms: Option<Number>,
    /// `totalTokens` of the Task result.
    pub total_tokens: Option<Number>,
    /// `totalToolUseCount` of the Task result.
    pub total_tool_use_count: Option<Number>,
    /// `status` of the Task result.
    pub status: Option<String>,
    /// Nesting depth: 1 when spawned from the main log; `None` when not tied to a call.
    pub depth: Option<usize>,
    /// How it was tied to its Task call.
    pub linked_by: Option<LinkSource>,
}

/// What linking decided.
#[derive(Debug, Clone, Default)]
pub struct Linking {
    /// The agents, in order of first reference (Task results), then of their files.
    pub agents: Vec<Agent>,
    /// For each file: whether its records take part in the session.
    pub file_included: Vec<bool>,
    /// Agent ids referenced by Task results whose log is missing.
    pub missing: Vec<String>,
    /// Agents with a log but no Task call.
    pub unlinked: Vec<String>,
    /// Files left out, with the reason.
    pub ignored: Vec<(usize, String)>,
}

/// Where every `tool_use` block is: id -> (record index, block index).
pub type ToolUseIndex = HashMap<String, (usize, usize)>;

/// Indexes the `tool_use` blocks of the records for which `kept` is true.
pub fn index_tool_uses(records: &[Record], kept: impl Fn(usize) -> bool) -> ToolUseIndex {
    let mut index = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if r.kind != RecordKind::Assistant || !kept(i) {
            continue;
        }
        for (b, block) in r.blocks().iter().enumerate() {
            if let Block::ToolUse(t) = block {
                if !t.id.is_empty() {
                    index.entry(t.id.clone()).or_insert((i, b));
                }
            }
        }
    }
    index
}

/// The `tool_use` block at `(record, block)`.
pub fn tool_use_at(records: &[Record], at: (usize, usize)) -> Option<&ToolUse> {
    match records.get(at.0)?.blocks().get(at.1)? {
        Block::ToolUse(t) => Some(t),
        _ => None,
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct MetaFile {
    #[serde(deserialize_with = "lenient::string")]
    tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    agent_type: Option<String>,
}

/// The first `agentId`, `sessionId` and user record of a file.
#[derive(Debug, Clone, Copy, Default)]
struct FileFacts<'a> {
    agent_id: Option<&'a str>,
    session_id: Option<&'a str>,
    first_user: Option<usize>,
}

/// One file as linking sees it.
pub struct LinkFile<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its role.
    pub role: FileRole,
    /// Its bytes (read for meta files only).
    pub bytes: &'a [u8],
    /// The first `sessionId` its records carry (every record read, kept or not).
    pub session_id: Option<&'a str>,
    /// The first `agentId` its records carry.
    pub agent_id: Option<&'a str>,
}

/// Ties sub-agent logs to Task calls. `records` are all parsed records (of every file),
/// `main_session_id` the main log's `sessionId`.
pub fn link_subagents(
    records: &[Record],
    files: &[LinkFile<'_>],
    main_file: usize,
    main_session_id: Option<&str>,
) -> Linking {
    let mut linker = Linker::new(records);
    // 1. Task results naming an agent (later results win, as in the reference).
    let referenced = linker.tie_by_task_results();
    let meta = meta_files(files);
    let facts = file_facts(records, files);
    // 2. Agent logs.
    let logs = linker.attach_logs(files, &facts, &meta);
    // 3. By first prompt, for logs still untied.
    linker.tie_by_first_prompt(&facts, &logs);

    // Task call details and inclusion.
    let (file_included, ignored) = linker.include_logs(&facts, &logs, main_file, main_session_id);
    linker.add_task_call_details();
    let mut agents = linker.agents;
    // Keep agents that have a log or a Task result.
    agents.retain(|a| a.file.is_some() || a.result_record.is_some());
    set_depths(&mut agents, records, main_file);

    let missing = referenced
        .iter()
        .filter(|id| agents.iter().any(|a| &a.agent_id == *id && a.file.is_none()))
        .cloned()
        .collect();
    let unlinked = agents
        .iter()
        .filter(|a| a.file.is_some() && a.task_record.is_none())
        .map(|a| a.agent_id.clone())
        .collect();
    Linking {
        agents,
        file_included,
        missing,
        unlinked,
        ignored,
    }
}

/// Linking's state: the records, where their `tool_use` blocks are, and the agents found
/// so far.
struct Linker<'r> {
    /// All parsed records (of every file).
    records: &'r [Record],
    /// Where every `tool_use` block of `records` is.
    tool_uses: ToolUseIndex,
    /// The agents, in order of first mention.
    agents: Vec<Agent>,
    /// Agent id -> its index in `agents`.
    by_id: HashMap<String, usize>,
}

impl<'r> Linker<'r> {
    fn new(records: &'r [Record]) -> Self {
        Linker {
            records,
            tool_uses: index_tool_uses(records, |_| true),
            agents: Vec::new(),
            by_id: HashMap::new(),
        }
    }

    /// The index of agent `id` in `agents`, which gains it when it is first mentioned.
    fn agent(&mut self, id: &str) -> usize {
        let agents = &mut self.agents;
        *self.by_id.entry(id.to_owned()).or_insert_with(|| {
            agents.push(Agent {
                agent_id: id.to_owned(),
                ..Agent::default()
            });
            agents.len() - 1
        })
    }

    /// Step 1: ties each agent a Task result names to the result's call, and takes the
    /// result's figures (later results win, as in the reference). Returns the agent ids
    /// the results name, in order of first reference.
    fn tie_by_task_results(&mut self) -> Vec<String> {
        let records = self.records;
        let mut referenced: Vec<String> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let Some(tur) = r.tool_use_result() else {
                continue;
            };
            let Some(agent_id) = tur.agent_id.as_deref().filter(|s| !s.is_empty()) else {
                continue;
            };
            if r.kind != RecordKind::User || !r.has_tool_result() {
                continue;
            }
            let a = self.agent(agent_id);
            if !referenced.iter().any(|x| x == agent_id) {
                referenced.push(agent_id.to_owned());
            }
            let agent = &mut self.agents[a];
            agent.tool_use_id = r.first_tool_use_id().map(str::to_owned);
            agent.result_record = Some(i);
            agent.prompt = tur.prompt.clone();
            agent.total_duration_ms = tur.total_duration_ms.clone();
            agent.total_tokens = tur.total_tokens.clone();
            agent.total_tool_use_count = tur.total_tool_use_count.clone();
            agent.status = tur.status.clone();
            agent.linked_by = Some(LinkSource::TaskResult);
        }
        referenced
    }

    /// Step 2: gives each agent log to its agent (named by the log's records, else by its
    /// file name; an agent keeps its first log), and ties an agent no Task result tied by
    /// its meta file. Returns `(file, agent)` for each log given, in file order.
    fn attach_logs(
        &mut self,
        files: &[LinkFile<'_>],
        facts: &[FileFacts<'_>],
        meta: &HashMap<String, MetaFile>,
    ) -> Vec<(usize, usize)> {
        let mut logs = Vec::new();
        for (fi, f) in files.iter().enumerate() {
            if f.role != FileRole::SubAgent {
                continue;
            }
            let from_records = facts[fi].agent_id;
            let from_name = agent_id_from_name(crate::formats::input::base_name(f.name));
            let Some(agent_id) = from_records.or(from_name) else {
                continue;
            };
            let a = self.agent(agent_id);
            let agent = &mut self.agents[a];
            if agent.file.is_some() {
                continue;
            }
            agent.file = Some(fi);
            logs.push((fi, a));
            if let Some(m) = meta.get(agent_id).or_else(|| from_name.and_then(|n| meta.get(n))) {
                if agent.tool_use_id.is_none() {
                    if let Some(t) = m.tool_use_id.clone() {
                        agent.tool_use_id = Some(t);
                        agent.linked_by = Some(LinkSource::MetaFile);
                    }
                }
                if agent.subagent_type.is_none() {
                    agent.subagent_type = m.agent_type.clone();
                }
            }
        }
        logs
    }

    /// Step 3: ties each log of `logs` still untied to the Task call whose input `prompt`
    /// is the log's first prompt, when exactly one call not otherwise tied has it.
    fn tie_by_first_prompt(&mut self, facts: &[FileFacts<'_>], logs: &[(usize, usize)]) {
        let records = self.records;
        let taken: HashSet<String> = self.agents.iter().filter_map(|a| a.tool_use_id.clone()).collect();
        let mut by_prompt: HashMap<String, Vec<&str>> = HashMap::new();
        for (id, &at) in &self.tool_uses {
            if taken.contains(id) {
                continue;
            }
            if let Some(t) = tool_use_at(records, at).filter(|t| t.name == "Task") {
                if let Some(p) = t.input_value().get("prompt").and_then(|p| p.as_str()) {
                    by_prompt.entry(p.to_owned()).or_default().push(&t.id);
                }
            }
        }
        for &(fi, a) in logs {
            let agent = &mut self.agents[a];
            if agent.tool_use_id.is_some() {
                continue;
            }
            let first_prompt = facts[fi].first_user.map(|i| prompt_text(&records[i]));
            if let Some(calls) = first_prompt.and_then(|p| by_prompt.get_mut(&*p.to_text())) {
                if calls.len() == 1 {
                    agent.tool_use_id = Some(calls.remove(0).to_owned());
                    agent.linked_by = Some(LinkSource::Prompt);
                }
            }
        }
    }

    /// Decides which files take part: the main log, and each agent log that is tied to a
    /// Task call here, named by a Task result, or of the main log's session (or of no
    /// known one). Any other log is of another session: it is left out and its agent loses
    /// it. Returns whether each file takes part, and the files left out with the reason.
    fn include_logs(
        &mut self,
        facts: &[FileFacts<'_>],
        logs: &[(usize, usize)],
        main_file: usize,
        main_session_id: Option<&str>,
    ) -> (Vec<bool>, Vec<(usize, String)>) {
        let mut file_included = vec![false; facts.len()];
        file_included[main_file] = true;
        let mut ignored = Vec::new();
        for &(fi, a) in logs {
            let agent = &mut self.agents[a];
            let tied = agent
                .tool_use_id
                .as_ref()
                .is_some_and(|t| self.tool_uses.contains_key(t));
            let same_session = facts[fi]
                .session_id
                .is_none_or(|s| main_session_id.is_none_or(|m| m == s));
            if tied || agent.result_record.is_some() || same_session {
                file_included[fi] = true;
            } else {
                ignored.push((
                    fi,
                    "sub-agent log of another session (no Task call here names it)".to_owned(),
                ));
                agent.file = None;
            }
        }
        (file_included, ignored)
    }

    /// Gives each agent tied to a Task call here the call's record and `subagent_type`, and
    /// its input `prompt` when the Task result gave none.
    fn add_task_call_details(&mut self) {
        for agent in &mut self.agents {
            let Some(&at) = agent.tool_use_id.as_ref().and_then(|t| self.tool_uses.get(t)) else {
                continue;
            };
            agent.task_record = Some(at.0);
            if let Some(t) = tool_use_at(self.records, at) {
                let input = t.input_value();
                // Claude Code's Task names `subagent_type` and `prompt`; Codex's
                // `spawn_agent` names `agent_type` and `message`.
                let text = |keys: [&str; 2]| keys.iter().find_map(|k| input.get(*k).and_then(|v| v.as_str()));
                if let Some(kind) = text(["subagent_type", "agent_type"]) {
                    agent.subagent_type = Some(kind.to_owned());
                }
                if agent.prompt.is_none() {
                    agent.prompt = text(["prompt", "message"]).map(JsonStr::new);
                }
            }
        }
    }
}

/// Gemini sessions, after [`link_subagents`]: an agent tied to a call takes the call's
/// tool name as its type (Gemini names the delegating tool after the agent,
/// `codebase_investigator`). An agent no call names (before v0.39 the call carries no
/// `agentId`; only the folder tells whose the chat is) is tied by time: to the main chat's
/// latest call, not otherwise tied, made at or before the agent's first record and
/// answered (if at all) at or after it.
pub(crate) fn finish_gemini_linking(linking: &mut Linking, records: &[Record]) {
    let in_main = |i: usize| records[i].pos.file == 0;
    let tool_uses = index_tool_uses(records, in_main);
    let mut answered: HashMap<&str, Option<i64>> = HashMap::new();
    for r in records
        .iter()
        .filter(|r| r.pos.file == 0 && r.kind == RecordKind::User)
    {
        if let Some(id) = r.first_tool_use_id() {
            answered.insert(id, r.time);
        }
    }
    let mut taken: HashSet<String> = linking
        .agents
        .iter()
        .filter_map(|a| a.tool_use_id.clone())
        .collect();
    for agent in &mut linking.agents {
        let Some(file) = agent.file.filter(|_| agent.tool_use_id.is_none()) else {
            continue;
        };
        let Some(start) = records
            .iter()
            .filter(|r| r.pos.file as usize == file)
            .filter_map(|r| r.time)
            .min()
        else {
            continue;
        };
        let running = tool_uses
            .iter()
            .filter(|(id, _)| !taken.contains(*id))
            .filter(|(_, &(rec, _))| records[rec].time.is_some_and(|t| t <= start))
            .filter(|(id, _)| {
                answered
                    .get(id.as_str())
                    .is_none_or(|t| t.is_none_or(|t| t >= start))
            })
            .max_by_key(|(_, &(rec, block))| (records[rec].time, records[rec].pos, block));
        if let Some((id, &(rec, _))) = running {
            taken.insert(id.clone());
            agent.tool_use_id = Some(id.clone());
            agent.task_record = Some(rec);
            agent.linked_by = Some(LinkSource::Time);
            agent.depth = Some(1);
            linking.unlinked.retain(|u| *u != agent.agent_id);
        }
    }
    for agent in &mut linking.agents {
        if let (None, Some(at)) = (
            &agent.subagent_type,
            agent.tool_use_id.as_ref().and_then(|t| tool_uses.get(t)),
        ) {
            agent.subagent_type = tool_use_at(records, *at).map(|t| t.name.clone());
        }
    }
}

/// The meta files given: agent id (from the file's name) -> (`toolUseId`, `agentType`).
fn meta_files(files: &[LinkFile<'_>]) -> HashMap<String, MetaFile> {
    let mut meta: HashMap<String, MetaFile> = HashMap::new();
    for f in files.iter().filter(|f| f.role == FileRole::SubAgentMeta) {
        if let Some(id) = agent_id_from_name(crate::formats::input::base_name(f.name)) {
            if let Ok(m) = serde_json::from_slice::<MetaFile>(f.bytes) {
                meta.insert(id.to_owned(), m);
            }
        }
    }
    meta
}

/// What linking needs from each file, gathered in one pass.
fn file_facts<'a>(records: &[Record], files: &[LinkFile<'a>]) -> Vec<FileFacts<'a>> {
    let mut facts: Vec<FileFacts> = files
        .iter()
        .map(|f| FileFacts {
            agent_id: f.agent_id,
            session_id: f.session_id,
            first_user: None,
        })
        .collect();
    for (i, r) in records.iter().enumerate() {
        let f = &mut facts[r.pos.file as usize];
        if f.first_user.is_none() && r.kind == RecordKind::User {
            f.first_user = Some(i);
        }
    }
    facts
}

/// Sets each agent's depth: 1 when the Task call is in the main log, else parent agent's
/// depth + 1; none when the chain of Task calls does not reach the main log (an agent not
/// tied, one spawned from a log left out, or a cycle).
fn set_depths(agents: &mut [Agent], records: &[Record], main_file: usize) {
    let agent_of_file: HashMap<usize, usize> = agents
        .iter()
        .enumerate()
        .filter_map(|(a, agent)| agent.file.map(|f| (f, a)))
        .collect();
    for a in 0..agents.len() {
        let mut depth = 0;
        let mut current = Some(a);
        let mut seen = HashSet::new();
        while let Some(c) = current {
            if !seen.insert(c) {
                depth = 0;
                break;
            }
            let Some(task) = agents[c].task_record else {
                depth = 0;
                break;
            };
            depth += 1;
            let file = records[task].pos.file as usize;
            if file == main_file {
                break;
            }
            current = agent_of_file.get(&file).copied();
            if current.is_none() {
                depth = 0;
            }
        }
        agents[a].depth = (depth > 0).then_some(depth);
    }
}

impl HeapSize for Agent {
    fn heap_size(&self) -> usize {
        self.agent_id.heap_size()
            + self.tool_use_id.heap_size()
            + self.subagent_type.heap_size()
            + self.prompt.heap_size()
            + self.status.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::parse::parse_file;
    use crate::pipeline::subagents::*;

    struct Files(Vec<(&'static str, String)>);

    impl Files {
        fn link(&self) -> (Vec<Record>, Linking) {
            let mut records = Vec::new();
            let mut identities = Vec::new();
            for (i, (_, text)) in self.0.iter().enumerate() {
                let parsed = parse_file(i as u32, text.as_bytes());
                records.extend(parsed.records);
                identities.push(parsed.identity);
            }
            let files: Vec<LinkFile> = self
                .0
                .iter()
                .zip(&identities)
                .map(|((name, text), identity)| LinkFile {
                    name,
                    role: FileRole::of(crate::formats::input::base_name(name)),
                    bytes: text.as_bytes(),
                    session_id: identity.session_id.as_deref(),
                    agent_id: identity.agent_id.as_deref(),
                })
                .collect();
            let main_session = identities[0].session_id.clone();
            let linking = link_subagents(&records, &files, 0, main_session.as_deref());
            (records, linking)
        }
    }

    const TASK: &str = r#"{"type":"assistant","uuid":"t","sessionId":"S","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Task","input":{"prompt":"Explore A","subagent_type":"Explore"}}]}}"#;
    const RESULT: &str = r#"{"type":"user","uuid":"r","sessionId":"S","parentUuid":"t","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"done"}]},"toolUseResult":{"status":"completed","agentId":"aaaa","prompt":"Explore A","totalTokens":12}}"#;
    const AGENT: &str = r#"{"type":"user","uuid":"x","sessionId":"S","parentUuid":null,"isSidechain":true,"agentId":"aaaa","message":{"content":"Explore A"}}"#;

    #[test]
    fn ties_by_task_result() {
        let (_, l) = Files(vec![
            ("main.jsonl", format!("{TASK}\n{RESULT}")),
            ("agent-aaaa.jsonl", AGENT.into()),
        ])
        .link();
        assert_eq!(l.agents.len(), 1);
        let a = &l.agents[0];
        assert_eq!(a.tool_use_id.as_deref(), Some("toolu_1"));
        assert_eq!(a.task_record, Some(0));
        assert_eq!(a.file, Some(1));
        assert_eq!(a.subagent_type.as_deref(), Some("Explore"));
        assert_eq!(a.depth, Some(1));
        assert_eq!(a.linked_by, Some(LinkSource::TaskResult));
        assert!(l.missing.is_empty());
    }

    #[test]
    fn reports_missing_logs() {
        let (_, l) = Files(vec![("main.jsonl", format!("{TASK}\n{RESULT}"))]).link();
        assert_eq!(l.missing, vec!["aaaa".to_owned()]);
    }

    #[test]
    fn ties_by_meta_file_then_by_prompt() {
        let meta = r#"{"toolUseId":"toolu_1","agentType":"Explore"}"#;
        let (_, l) = Files(vec![
            ("main.jsonl", TASK.into()),
            ("s/subagents/agent-aaaa.jsonl", AGENT.into()),
            ("s/subagents/agent-aaaa.meta.json", meta.into()),
        ])
        .link();
        assert_eq!(l.agents[0].linked_by, Some(LinkSource::MetaFile));
        assert_eq!(l.agents[0].task_record, Some(0));

        let (_, l) = Files(vec![
            ("main.jsonl", TASK.into()),
            ("agent-aaaa.jsonl", AGENT.into()),
        ])
        .link();
        assert_eq!(l.agents[0].linked_by, Some(LinkSource::Prompt));
        assert_eq!(l.agents[0].tool_use_id.as_deref(), Some("toolu_1"));
    }

    #[test]
    fn leaves_out_agents_of_other_sessions() {
        let other = AGENT
            .replace(r#""sessionId":"S""#, r#""sessionId":"OTHER""#)
            .replace("Explore A", "something else");
        let (_, l) = Files(vec![("main.jsonl", TASK.into()), ("agent-aaaa.jsonl", other)]).link();
        assert!(l.agents.is_empty());
        assert_eq!(l.file_included, vec![true, false]);
        assert_eq!(l.ignored.len(), 1);
    }

    #[test]
    fn nested_agents_are_one_deeper() {
        let nested_task = r#"{"type":"assistant","uuid":"t2","sessionId":"S","agentId":"aaaa","isSidechain":true,"message":{"id":"m2","content":[{"type":"tool_use","id":"toolu_2","name":"Task","input":{"prompt":"Go deeper"}}]}}"#;
        let nested_result = r#"{"type":"user","uuid":"r2","sessionId":"S","agentId":"aaaa","isSidechain":true,"message":{"content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"ok"}]},"toolUseResult":{"agentId":"bbbb","status":"completed"}}"#;
        let deep = r#"{"type":"user","uuid":"y","sessionId":"S","agentId":"bbbb","isSidechain":true,"message":{"content":"Go deeper"}}"#;
        let (_, l) = Files(vec![
            ("main.jsonl", format!("{TASK}\n{RESULT}")),
            (
                "agent-aaaa.jsonl",
                format!("{AGENT}\n{nested_task}\n{nested_result}"),
            ),
            ("agent-bbbb.jsonl", deep.into()),
        ])
        .link();
        let depth = |id: &str| l.agents.iter().find(|a| a.agent_id == id).unwrap().depth;
        assert_eq!(depth("aaaa"), Some(1));
        assert_eq!(depth("bbbb"), Some(2));
    }
}
