//! Fuzzing on stable Rust, as property tests: real sessions mutated line by line and byte
//! by byte, and records whose every field holds a value of any JSON type. Whatever comes in,
//! the core must not panic, must account for every line, and must keep its ordering
//! invariants. CI runs a few hundred cases of each; a campaign runs more:
//!
//! ```sh
//! PROPTEST_CASES=20000 cargo test --release --test integration fuzz::
//! ```
//!
//! Failures proptest finds are kept in `tests/proptest-regressions/fuzz.txt` and replayed
//! first on every run.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sessiongraph::core::json::frame;
use sessiongraph::core::{LoadOptions, Session, SessionInput, SourceFile};

use crate::helpers::fixture;
use crate::properties::{all_views, assert_accounted, assert_parents_first};

const MAIN: &str = "11111111-2222-4333-8444-555555555555.jsonl";

/// The real sessions mutations start from.
const BASES: [&str; 6] = [
    "synthetic/edge_cases/11111111-2222-4333-8444-555555555555.jsonl",
    "synthetic/multi_block/11111111-2222-4333-8444-555555555555.jsonl",
    "synthetic/no_results/11111111-2222-4333-8444-555555555555.jsonl",
    "synthetic/subagents/11111111-2222-4333-8444-555555555555.jsonl",
    "synthetic/duplicate_lines/11111111-2222-4333-8444-555555555555.jsonl",
    "synthetic/subagents/agent-aaaa1111.jsonl",
];

/// One mutation: an operation, where, and a byte or a line to use.
#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(prop::sample::Index),
    DuplicateLine(prop::sample::Index, prop::sample::Index),
    SwapLines(prop::sample::Index, prop::sample::Index),
    TruncateLine(prop::sample::Index, prop::sample::Index),
    GlueLines(prop::sample::Index),
    /// A line from another base (its records may name parents that are not here).
    ForeignLine(usize, prop::sample::Index, prop::sample::Index),
    SetByte(prop::sample::Index, u8),
    InsertByte(prop::sample::Index, u8),
    /// Replaces a line with a copy whose every uuid is the same: self-parents and cycles.
    SelfParent(prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = any::<prop::sample::Index>;
    prop_oneof![
        i().prop_map(Mutation::DeleteLine),
        (i(), i()).prop_map(|(a, b)| Mutation::DuplicateLine(a, b)),
        (i(), i()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (i(), i()).prop_map(|(a, b)| Mutation::TruncateLine(a, b)),
        i().prop_map(Mutation::GlueLines),
        (0..BASES.len(), i(), i()).prop_map(|(b, l, at)| Mutation::ForeignLine(b, l, at)),
        (i(), any::<u8>()).prop_map(|(a, b)| Mutation::SetByte(a, b)),
        (i(), any::<u8>()).prop_map(|(a, b)| Mutation::InsertByte(a, b)),
        i().prop_map(Mutation::SelfParent),
    ]
}

fn read_lines(rel: &str) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(fixture(rel)).unwrap();
    frame::lines(&bytes).map(|l| l.bytes.to_vec()).collect()
}

fn apply(lines: &mut Vec<Vec<u8>>, m: &Mutation) {
    if lines.is_empty() {
        return;
    }
    let n = lines.len();
    match m {
        Mutation::DeleteLine(i) => {
            lines.remove(i.index(lines.len()));
        }
        Mutation::DuplicateLine(i, at) => {
            let line = lines[i.index(lines.len())].clone();
            lines.insert(at.index(lines.len() + 1), line);
        }
        Mutation::SwapLines(a, b) => {
            let (a, b) = (a.index(lines.len()), b.index(lines.len()));
            lines.swap(a, b);
        }
        Mutation::TruncateLine(i, at) => {
            let line = &mut lines[i.index(n)];
            let cut = at.index(line.len() + 1);
            line.truncate(cut);
        }
        Mutation::GlueLines(i) => {
            let i = i.index(lines.len());
            if i + 1 < lines.len() {
                let next = lines.remove(i + 1);
                lines[i].extend_from_slice(&next);
            }
        }
        Mutation::ForeignLine(base, l, at) => {
            let foreign = read_lines(BASES[*base]);
            if !foreign.is_empty() {
                let line = foreign[l.index(foreign.len())].clone();
                lines.insert(at.index(lines.len() + 1), line);
            }
        }
        Mutation::SetByte(i, byte) => {
            let line = &mut lines[i.index(n)];
            if !line.is_empty() {
                let at = i.index(line.len());
                line[at] = *byte;
            }
        }
        Mutation::InsertByte(i, byte) => {
            let line = &mut lines[i.index(n)];
            let at = i.index(line.len() + 1);
            line.insert(at, *byte);
        }
        Mutation::SelfParent(i) => {
            let i = i.index(lines.len());
            if let Ok(Value::Object(mut record)) = serde_json::from_slice::<Value>(&lines[i]) {
                if let Some(uuid) = record.get("uuid").cloned() {
                    record.insert("parentUuid".into(), uuid.clone());
                    record.insert("logicalParentUuid".into(), uuid);
                    lines[i] = serde_json::to_vec(&record).unwrap();
                }
            }
        }
    }
}

/// The keys the core reads, at the top level of a record.
const RECORD_KEYS: [&str; 17] = [
    "type",
    "uuid",
    "parentUuid",
    "logicalParentUuid",
    "timestamp",
    "sessionId",
    "requestId",
    "agentId",
    "isSidechain",
    "isMeta",
    "isCompactSummary",
    "subtype",
    "content",
    "compactMetadata",
    "message",
    "toolUseResult",
    "isActive",
];

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z0-9 <>/\\-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("u1"),
            Just("u2"),
            Just("u3"),
            Just("user"),
            Just("assistant"),
            Just("tool_use"),
            Just("text")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("type"),
                        Just("text"),
                        Just("thinking"),
                        Just("id"),
                        Just("name"),
                        Just("input"),
                        Just("tool_use_id"),
                        Just("content"),
                        Just("is_error"),
                        Just("source"),
                        Just("data"),
                        Just("usage"),
                        Just("input_tokens"),
                        Just("stdout"),
                        Just("stderr"),
                        Just("agentId"),
                        Just("file"),
                        Just("status"),
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

/// A record: known keys with values of any type.
fn any_record() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(RECORD_KEYS.to_vec()), any_json()), 0..8)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// Loads `lines` as a main log and checks everything the core promises.
fn check(lines: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let mut bytes = lines.join(&b'\n');
    bytes.push(b'\n');
    let count = frame::lines(&bytes).count();
    let input = SessionInput::new(vec![SourceFile::new(MAIN, bytes)]);
    let session = Session::build(&input, LoadOptions::default()).expect("a main log always loads");
    assert_accounted(&session, count)?;
    assert_parents_first(&session)?;
    all_views(&session);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_sessions_keep_every_invariant(
        base in 0..BASES.len(),
        mutations in prop::collection::vec(mutation(), 1..10),
    ) {
        let mut lines = read_lines(BASES[base]);
        for m in &mutations {
            apply(&mut lines, m);
        }
        check(&lines)?;
    }

    #[test]
    fn records_with_fields_of_any_type_keep_every_invariant(
        records in prop::collection::vec(any_record(), 1..12),
    ) {
        let lines: Vec<Vec<u8>> = records.iter().map(|r| serde_json::to_vec(r).unwrap()).collect();
        check(&lines)?;
    }
}

/// The keys of AutoGen's own dumps (AgentChat and 0.2 / AG2).
const AUTOGEN_KEYS: [&str; 12] = [
    "source",
    "type",
    "content",
    "target",
    "role",
    "name",
    "tool_calls",
    "function_call",
    "tool_responses",
    "created_at",
    "models_usage",
    "arguments",
];

/// An AutoGen dump entry: its keys with values of any type, or a known AgentChat type.
fn any_autogen_entry() -> impl Strategy<Value = Value> {
    use sessiongraph::core::formats::autogen::agentchat;
    let value = prop_oneof![
        any_json(),
        prop::sample::select(
            [
                agentchat::AGENTCHAT_TYPES.as_slice(),
                agentchat::MODEL_CONTEXT_TYPES.as_slice()
            ]
            .concat()
        )
        .prop_map(|t| Value::String(t.to_owned())),
        prop::sample::select(vec!["a", "b", "user", "tools", "assistant", "tool"])
            .prop_map(|s| Value::String(s.to_owned())),
    ];
    prop::collection::vec((prop::sample::select(AUTOGEN_KEYS.to_vec()), value), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// `entries` as one of the shapes a dump comes in.
fn autogen_document(entries: Vec<Value>, shape: u8) -> Vec<u8> {
    let document = match shape {
        0 => Value::Array(entries),
        1 => json!({ "messages": entries }),
        2 => json!({ "agent_states": { "manager": { "message_thread": entries } } }),
        3 => json!({ "chat_manager": entries }),
        _ => {
            let lines: Vec<String> = entries.iter().map(Value::to_string).collect();
            return lines.join("\n").into_bytes();
        }
    };
    serde_json::to_vec_pretty(&document).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn autogen_dumps_with_fields_of_any_type_keep_their_edges_on_nodes(
        entries in prop::collection::vec(any_autogen_entry(), 0..12),
        shape in 0u8..5,
    ) {
        use sessiongraph::core::formats::autogen;
        use sessiongraph::core::views::autogen_graph;
        if shape == 4 && !entries.is_empty() {
            let lines = autogen_document(entries.clone(), 4);
            let array = autogen_document(entries.clone(), 0);
            prop_assert_eq!(
                autogen::parse(&String::from_utf8_lossy(&lines)),
                autogen::parse(&String::from_utf8_lossy(&array)),
                "JSON lines read as the same entries in an array"
            );
        }
        let bytes = autogen_document(entries, shape);
        let _ = autogen::looks_like_bytes(&bytes);
        let _ = autogen::looks_like_bytes(&bytes[..bytes.len() / 2]);
        let Ok(messages) = autogen::parse(&String::from_utf8_lossy(&bytes)) else {
            return Ok(());
        };
        for m in &messages {
            prop_assert_ne!(Some(&m.sender), m.receiver.as_ref(), "no message to its sender");
        }
        let graph = serde_json::to_value(autogen_graph::graph(&messages, None)).unwrap();
        let nodes: Vec<&Value> = graph["graph"]["nodes"].as_array().unwrap().iter().map(|n| &n["id"]).collect();
        for e in graph["graph"]["edges"].as_array().unwrap() {
            prop_assert!(nodes.contains(&&e["source"]) && nodes.contains(&&e["target"]));
        }
        let _ = serde_json::to_value(autogen_graph::metrics(&messages)).unwrap();
        let _ = serde_json::to_value(autogen_graph::chatlog(&messages)).unwrap();
    }
}
