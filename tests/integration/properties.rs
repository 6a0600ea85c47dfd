//! Property tests on generated sessions: the ordering and dedup invariants, and no panic on
//! any input.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use serde_json::{json, Value};
use sessiongraph::core::pipeline::dedup::dedup_records;
use sessiongraph::core::pipeline::session::Branch;
use sessiongraph::core::views::{self, View, ViewOptions};
use sessiongraph::core::{LoadOptions, Session, SessionInput, SourceFile};

use crate::helpers::{body, fixture};

const MAIN: &str = "11111111-2222-4333-8444-555555555555.jsonl";

/// How a generated record picks its parent.
#[derive(Debug, Clone)]
pub(crate) enum Parent {
    Null,
    /// An earlier record (index modulo the records so far).
    Earlier(usize),
    /// A uuid never written.
    Missing(u8),
    /// Any record, later ones and itself included (cycles).
    Any(usize),
}

/// What a generated record is.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Prompt {
        image: bool,
    },
    /// An assistant chunk of message `group`: 0 thinking, 1 text, 2 tool use.
    Chunk {
        group: u8,
        block: u8,
        request: bool,
    },
    /// A result for an earlier tool use (index modulo the tool uses so far).
    Result {
        call: usize,
        error: bool,
    },
    Notice,
    Compact,
    Meta,
    /// A copy of an earlier record with the same uuid.
    SameUuid(usize),
    /// A copy of an earlier record with a new uuid and its own parent.
    Copy(usize),
}

#[derive(Debug, Clone)]
pub(crate) struct Spec {
    kind: Kind,
    parent: Parent,
    /// Offset in seconds from the session start.
    time: u16,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => any::<bool>().prop_map(|image| Kind::Prompt { image }),
        6 => (0u8..5, 0u8..3, prop::bool::weighted(0.9)).prop_map(|(group, block, request)| Kind::Chunk { group, block, request }),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(call, error)| Kind::Result { call, error }),
        1 => Just(Kind::Notice),
        1 => Just(Kind::Compact),
        1 => Just(Kind::Meta),
        1 => any::<usize>().prop_map(Kind::SameUuid),
        1 => any::<usize>().prop_map(Kind::Copy),
    ]
}

pub(crate) fn acyclic_parent() -> impl Strategy<Value = Parent> {
    prop_oneof![
        1 => Just(Parent::Null),
        12 => any::<usize>().prop_map(Parent::Earlier),
        1 => any::<u8>().prop_map(Parent::Missing),
    ]
}

fn any_parent() -> impl Strategy<Value = Parent> {
    prop_oneof![
        6 => acyclic_parent(),
        2 => any::<usize>().prop_map(Parent::Any),
    ]
}

pub(crate) fn specs(
    parent: BoxedStrategy<Parent>,
    times: std::ops::Range<u16>,
) -> impl Strategy<Value = Vec<Spec>> {
    prop::collection::vec(
        (kind(), parent, times).prop_map(|(kind, parent, time)| Spec { kind, parent, time }),
        1..40,
    )
}

/// Renders specs as JSONL lines. `distinct_times` gives record i the time i (so no two
/// records tie).
pub(crate) fn render(specs: &[Spec], distinct_times: bool) -> Vec<String> {
    let n = specs.len();
    let mut lines: Vec<Value> = Vec::with_capacity(n);
    let mut tool_ids: Vec<String> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let uuid = format!("u{i}");
        let parent = match s.parent {
            Parent::Null => Value::Null,
            Parent::Earlier(k) if i > 0 => json!(format!("u{}", k % i)),
            Parent::Earlier(_) => Value::Null,
            Parent::Missing(k) => json!(format!("gone{k}")),
            Parent::Any(k) => json!(format!("u{}", k % n)),
        };
        let secs = if distinct_times {
            i as u32
        } else {
            u32::from(s.time)
        };
        let ts = format!(
            "2025-01-01T{:02}:{:02}:{:02}.000Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        let mut rec = json!({"uuid": uuid, "parentUuid": parent, "timestamp": ts, "sessionId": "S", "isSidechain": false});
        let obj = rec.as_object_mut().unwrap();
        match &s.kind {
            Kind::Prompt { image } => {
                obj.insert("type".into(), json!("user"));
                let content = if *image {
                    json!([{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}])
                } else {
                    json!(format!("prompt number {i}"))
                };
                obj.insert("message".into(), json!({"role":"user","content":content}));
            }
            Kind::Chunk {
                group,
                block,
                request,
            } => {
                obj.insert("type".into(), json!("assistant"));
                if *request {
                    obj.insert("requestId".into(), json!(format!("req{group}")));
                }
                let b = match block {
                    0 => {
                        json!({"type":"thinking","thinking":format!("thought {i}"),"signature":format!("SIG{i}")})
                    }
                    1 => json!({"type":"text","text":format!("answer {i}")}),
                    _ => {
                        tool_ids.push(format!("toolu_{i}"));
                        json!({"type":"tool_use","id":format!("toolu_{i}"),"name":"Bash","input":{"command":format!("echo {i}")}})
                    }
                };
                obj.insert(
                    "message".into(),
                    json!({"id":format!("msg{group}"),"role":"assistant","content":[b],"usage":{"input_tokens":3,"output_tokens":i}}),
                );
            }
            Kind::Result { call, error } => {
                obj.insert("type".into(), json!("user"));
                let id = if tool_ids.is_empty() {
                    "toolu_none".to_owned()
                } else {
                    tool_ids[call % tool_ids.len()].clone()
                };
                obj.insert(
                    "message".into(),
                    json!({"role":"user","content":[{"type":"tool_result","tool_use_id":id,"content":format!("out {i}"),"is_error":error}]}),
                );
            }
            Kind::Notice => {
                obj.insert("type".into(), json!("system"));
                obj.insert("subtype".into(), json!("informational"));
                obj.insert("content".into(), json!(format!("notice {i}")));
            }
            Kind::Compact => {
                obj.insert("type".into(), json!("system"));
                obj.insert("subtype".into(), json!("compact_boundary"));
                obj.insert("logicalParentUuid".into(), obj["parentUuid"].clone());
                obj.insert("parentUuid".into(), Value::Null);
            }
            Kind::Meta => {
                obj.insert("type".into(), json!("user"));
                obj.insert("isMeta".into(), json!(true));
                obj.insert(
                    "message".into(),
                    json!({"role":"user","content":"Caveat: injected"}),
                );
            }
            Kind::SameUuid(k) | Kind::Copy(k) => {
                if i == 0 {
                    obj.insert("type".into(), json!("user"));
                    obj.insert("message".into(), json!({"role":"user","content":"first"}));
                } else {
                    let mut copy = lines[k % i].clone();
                    if let Kind::Copy(_) = s.kind {
                        copy["uuid"] = json!(uuid);
                        copy["parentUuid"] = rec["parentUuid"].clone();
                    }
                    rec = copy;
                }
            }
        }
        lines.push(rec);
    }
    lines.iter().map(Value::to_string).collect()
}

pub(crate) fn load(lines: &[String]) -> Session {
    let input = SessionInput::new(vec![SourceFile::new(MAIN, lines.join("\n"))]);
    Session::build(&input, LoadOptions::default()).expect("a main log always loads")
}

fn position_of_ids(items: &[Value], ids_of: impl Fn(&Value) -> Vec<String>) -> HashMap<String, usize> {
    let mut pos = HashMap::new();
    for (i, it) in items.iter().enumerate() {
        for id in ids_of(it) {
            pos.entry(id).or_insert(i);
        }
    }
    pos
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// No unit or node before its parent, when both exist. A parent cycle is broken at one of
/// its units, which is ordered as a root and so may come before the parent it names: that
/// unit and its nodes are exempt.
pub(crate) fn assert_parents_first(session: &Session) -> Result<(), TestCaseError> {
    let everything = ViewOptions {
        include_subagents: true,
        ..Default::default()
    };
    let broken = &session.diagnostics.cycles_broken;
    if broken.count > broken.samples.len() {
        return Ok(()); // more cycles than samples: the exempt units are not all known
    }
    let broken: HashSet<&str> = broken.samples.iter().filter_map(|s| s.uuid.as_deref()).collect();
    let annotations = body(session, View::Annotations, everything);
    let units = annotations["annotations"].as_array().unwrap();
    let mut exempt: HashSet<String> = HashSet::new();
    for u in units {
        let uuids = strs(&u["source"]["raw_uuids"]);
        if uuids.iter().any(|id| broken.contains(id.as_str())) {
            exempt.extend(uuids);
        }
    }
    let pos = position_of_ids(units, |u| strs(&u["source"]["raw_uuids"]));
    for (k, u) in units.iter().enumerate() {
        if strs(&u["source"]["raw_uuids"])
            .iter()
            .any(|id| exempt.contains(id))
        {
            continue;
        }
        if let Some(p) = u["source"]["parent_uuid"].as_str() {
            if let Some(&j) = pos.get(p) {
                prop_assert!(j <= k, "unit {} before its parent {p}", u["event_id"]);
            }
        }
    }
    let workflow = body(session, View::Workflow, everything);
    let nodes = workflow["workflow"]["nodes"].as_array().unwrap();
    let pos = position_of_ids(nodes, |n| vec![n["id"].as_str().unwrap().to_owned()]);
    for (k, n) in nodes.iter().enumerate() {
        let own = n["uuid"].as_str().or(n["id"].as_str()).unwrap_or_default();
        if exempt.contains(own) {
            continue;
        }
        // A turn's nodes hang off the turn's parent (checked with its unit above), not off
        // what each of its chunks names: a chunk may name a record outside its turn.
        if matches!(n["nodeType"].as_str(), Some("agent_reasoning" | "tool_call")) {
            continue;
        }
        // The effective parent is the logical parent when one is named (it may stand for a
        // removed duplicate, or be dangling: then it is not a node and nothing is checked).
        // A record naming itself has no parent (the self-reference is broken and reported).
        let named = n["logicalParentUuid"].as_str().or(n["parentUuid"].as_str());
        let named = named.filter(|&p| Some(p) != n["uuid"].as_str() && Some(p) != n["id"].as_str());
        if let Some((p, &j)) = named.and_then(|p| pos.get(p).map(|j| (p, j))) {
            prop_assert!(j < k, "node {} before its parent {p}", n["id"]);
        }
    }
    for e in workflow["workflow"]["edges"].as_array().unwrap() {
        let (s, t) = (
            pos[e["source"].as_str().unwrap()],
            pos[e["target"].as_str().unwrap()],
        );
        prop_assert!(s < t, "edge {} goes backwards", e["id"]);
    }
    Ok(())
}

/// Every line is read, kept or counted, or reported bad; every record read is counted by
/// type; every record kept is kept or removed with a reason; every kept record that takes
/// part in the order is ordered exactly once.
pub(crate) fn assert_accounted(session: &Session, lines: usize) -> Result<(), TestCaseError> {
    let d = &session.diagnostics;
    let lines_with_records: HashSet<u32> = session.records.iter().map(|r| r.pos.line).collect();
    prop_assert_eq!(d.files[0].lines, lines);
    let read = d.files[0].records;
    let counted: usize = d.record_types.values().sum();
    prop_assert_eq!(counted, read, "every record read is counted by type");
    let not_kept = read - session.records.len();
    prop_assert!(lines_with_records.len() + d.bad_lines.count <= lines);
    prop_assert!(
        lines <= lines_with_records.len() + d.bad_lines.count + not_kept,
        "a line neither kept, counted nor reported bad"
    );
    prop_assert_eq!(session.dedup.dropped.len(), session.records.len());
    let removed = session.dedup.dropped.iter().filter(|r| r.is_some()).count();
    prop_assert_eq!(removed, d.duplicates_total() + d.phantom_branch_removed.count);
    let mut seen = HashSet::new();
    for &r in &session.record_sequence {
        prop_assert!(seen.insert(r), "record {} ordered twice", r);
        prop_assert!(session.dedup.is_kept(r), "a removed record was ordered");
    }
    for (i, r) in session.records.iter().enumerate() {
        if session.dedup.is_kept(i) && (r.kind.is_conversational() || r.uuid.is_some()) {
            prop_assert!(
                seen.contains(&i),
                "kept record {} (line {}) not ordered",
                i,
                r.pos.line
            );
        }
    }
    Ok(())
}

pub(crate) fn all_views(session: &Session) {
    for view in View::ALL {
        for options in [
            ViewOptions::default(),
            ViewOptions {
                step: Some(3),
                include_subagents: true,
                branch: Branch::Active,
                graph: sessiongraph::core::views::graph::GraphMode::Reference,
            },
        ] {
            let bytes = views::render(session, view, options).to_bytes();
            assert!(
                serde_json::from_slice::<Value>(&bytes).is_ok(),
                "{view} is not JSON"
            );
        }
    }
}

/// Strips what depends on line positions (not on content) from a body.
fn without_positions(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("raw_line_range");
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_unit_or_node_comes_before_its_parent(specs in specs(acyclic_parent().boxed(), 0..30)) {
        let session = load(&render(&specs, false));
        if session.diagnostics.cycles_broken.is_empty() {
            assert_parents_first(&session)?;
        }
    }

    #[test]
    fn every_record_is_kept_or_accounted_for(specs in specs(any_parent().boxed(), 0..30)) {
        let lines = render(&specs, false);
        let session = load(&lines);
        assert_accounted(&session, lines.len())?;
        all_views(&session);
    }

    #[test]
    fn dedup_is_idempotent(specs in specs(acyclic_parent().boxed(), 0..5)) {
        let session = load(&render(&specs, false));
        let kept: Vec<_> = (0..session.records.len())
            .filter(|&i| session.dedup.is_kept(i))
            .map(|i| session.records[i].clone())
            .collect();
        let again = dedup_records(&kept, |_| true);
        prop_assert!(again.dropped.iter().all(Option::is_none), "a second dedup removed {:?}", again.dropped);
    }

    #[test]
    fn output_does_not_depend_on_line_order(
        specs in specs(any_parent().boxed(), 0..1),
        seed in any::<u64>(),
    ) {
        // Distinct timestamps and no copies: then only content decides the order.
        let specs: Vec<Spec> = specs
            .into_iter()
            .filter(|s| !matches!(s.kind, Kind::SameUuid(_) | Kind::Copy(_)))
            .collect();
        prop_assume!(!specs.is_empty());
        let lines = render(&specs, true);
        let mut shuffled = lines.clone();
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let (a, b) = (load(&lines), load(&shuffled));
        let everything = ViewOptions { include_subagents: true, ..Default::default() };
        for view in [View::Annotations, View::Workflow, View::Chatlog] {
            prop_assert_eq!(
                without_positions(body(&a, view, everything)),
                without_positions(body(&b, view, everything)),
                "{} differs", view
            );
        }
    }

    #[test]
    fn no_panic_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048), agent in prop::collection::vec(any::<u8>(), 0..256)) {
        let input = SessionInput::new(vec![
            SourceFile::new(MAIN, bytes),
            SourceFile::new("agent-a1.jsonl", agent),
        ]);
        // Bytes that open like gzip, bzip2, xz or zstd are refused with a message saying so
        // (regression: proptest drew 0x1f 0x8b, and the test called that a load failure).
        match Session::build(&input, LoadOptions::default()) {
            Ok(session) => all_views(&session),
            Err(sessiongraph::core::SessionError::Compressed { .. }) => {}
            // Bytes that read as an AutoGen log get its reader's errors.
            Err(sessiongraph::core::SessionError::Autogen(_)) => {}
            Err(e) => panic!("a main log always loads: {e:?}"),
        }
    }

    #[test]
    fn no_panic_on_mutated_real_sessions(edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..6, any::<u8>()), 1..12)) {
        let files = ["synthetic/edge_cases/11111111-2222-4333-8444-555555555555.jsonl", "synthetic/subagents/agent-aaaa1111.jsonl"];
        let mut main = std::fs::read(fixture(files[0])).unwrap();
        let agent = std::fs::read(fixture(files[1])).unwrap();
        for (at, op, byte) in edits {
            if main.is_empty() {
                break;
            }
            let i = at.index(main.len());
            match op {
                0 => { main.remove(i); }
                1 => main.insert(i, byte),
                2 => main[i] = byte,
                3 => main.truncate(i),
                4 => { let tail = main[i..].to_vec(); main.extend_from_slice(&tail[..tail.len().min(400)]); }
                _ => main.insert(i, b'\n'),
            }
        }
        let lines = sessiongraph::core::json::frame::lines(&main).count();
        let input = SessionInput::new(vec![SourceFile::new(MAIN, main), SourceFile::new("agent-aaaa1111.jsonl", agent)]);
        let session = Session::build(&input, LoadOptions::default()).expect("a main log always loads");
        prop_assert_eq!(session.diagnostics.files[0].lines, lines);
        all_views(&session);
    }
}
