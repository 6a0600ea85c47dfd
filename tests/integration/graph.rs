//! The communication graph's inferred edges (CONTRACT 3.13) on the CommuGraph sample, and
//! their invariants on random sessions.

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use serde_json::Value;
use sessiongraph::core::views::graph::GraphMode;
use sessiongraph::core::views::{View, ViewOptions};
use sessiongraph::core::Session;

use crate::helpers::{body, fixture, load_path};
use crate::server::{Options, TestServer};

fn graph(session: &Session, step: Option<u64>) -> Value {
    let options = ViewOptions {
        step,
        ..ViewOptions::default()
    };
    body(session, View::Graph, options)["graph"].clone()
}

/// Every edge's (source, target, weight), and the invariants every graph keeps: weights
/// count the interactions, no edge points at a missing node, no self-loop, counts add up.
fn checked_edges(g: &Value, steps: usize) -> BTreeMap<(String, String), u64> {
    let nodes: HashSet<&str> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    let mut out = BTreeMap::new();
    let mut received = BTreeMap::<&str, u64>::new();
    for e in g["edges"].as_array().unwrap() {
        let (s, t) = (e["source"].as_str().unwrap(), e["target"].as_str().unwrap());
        assert!(
            nodes.contains(s) && nodes.contains(t),
            "{s} -> {t} points at a missing node"
        );
        assert_ne!(s, t, "a self-loop");
        let interactions = e["interactions"].as_array().unwrap();
        assert_eq!(e["weight"].as_u64().unwrap(), interactions.len() as u64);
        for i in interactions {
            let step = i["step_index"].as_u64().unwrap() as usize;
            assert!(step < steps, "step {step} outside the session ({steps} steps)");
            assert_eq!(i["message_id"], i["step_index"]);
        }
        *received.entry(t).or_default() += interactions.len() as u64;
        out.insert((s.to_owned(), t.to_owned()), interactions.len() as u64);
    }
    for n in g["nodes"].as_array().unwrap() {
        let id = n["id"].as_str().unwrap();
        assert_eq!(
            n["messages_received"].as_u64().unwrap(),
            received.get(id).copied().unwrap_or(0),
            "{id}"
        );
    }
    assert_eq!(g["metadata"]["edge_count"].as_u64().unwrap(), out.len() as u64);
    out
}

#[test]
fn the_samples_graph_has_a_delegation_and_a_return_edge_per_loaded_sub_agent() {
    let session = load_path(&fixture("commugraph-sample"));
    let steps = session.workflow.nodes.len();
    let g = graph(&session, None);
    let edges = checked_edges(&g, steps);
    let agents: Vec<String> = session
        .lanes
        .iter()
        .filter(|l| l.agent.is_some())
        .map(|l| l.id.clone())
        .collect();
    assert_eq!(agents.len(), 4);
    for agent in &agents {
        assert!(
            edges.contains_key(&("assistant".into(), agent.clone())),
            "delegation to {agent}"
        );
        assert!(
            edges.contains_key(&(agent.clone(), "assistant".into())),
            "return from {agent}"
        );
    }
    assert!(edges[&("user".into(), "assistant".into())] > 0);
    assert!(edges[&("assistant".into(), "user".into())] > 0);
    let delegations = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "assistant" && agents.iter().any(|a| e["target"] == a.as_str()))
        .flat_map(|e| e["interactions"].as_array().unwrap())
        .all(|i| i["intent"] == "delegation");
    assert!(delegations);
    let metrics = body(&session, View::Metrics, ViewOptions::default());
    assert_eq!(metrics["edge_count"].as_u64().unwrap(), edges.len() as u64);
    assert!(metrics["density"].as_f64().unwrap() > 0.0);
    assert!(metrics["centrality"]["assistant"].as_f64().unwrap() > 0.0);
    for ((s, t), w) in &edges {
        println!("{s} -> {t}: {w}");
    }
}

/// The edge table (docs/internals.md) said every main-lane notice gives `system -> user`,
/// but the sample's four notices (slash commands and local command output, written as user
/// records) gave no edge and there was no `system` node. A notice from a `system` record
/// gives `system -> user`; one written as a user record is sent by `user` and gives none.
#[test]
fn system_notices_give_the_edges_the_table_says() {
    let sample = load_path(&fixture("commugraph-sample"));
    let g = graph(&sample, None);
    let edges = checked_edges(&g, sample.workflow.nodes.len());
    assert!(!edges.keys().any(|(s, _)| s == "system"), "{edges:?}");
    assert!(!g["nodes"].as_array().unwrap().iter().any(|n| n["id"] == "system"));

    let edge_cases = load_path(&fixture("synthetic/edge_cases"));
    let g = graph(&edge_cases, None);
    let edges = checked_edges(&g, edge_cases.workflow.nodes.len());
    let system_records = edge_cases
        .items
        .iter()
        .filter(|i| {
            matches!(i.kind, sessiongraph::core::pipeline::items::ItemKind::Notice { record, .. }
                if edge_cases.records[record].kind == sessiongraph::core::formats::claude_code::records::RecordKind::System)
        })
        .count();
    assert!(system_records > 0);
    assert_eq!(
        edges.get(&("system".to_owned(), "user".to_owned())).copied(),
        Some(system_records as u64),
        "{edges:?}"
    );
}

#[test]
fn edges_none_is_the_references_body() {
    let session = load_path(&fixture("commugraph-sample"));
    let reference = ViewOptions {
        graph: GraphMode::Reference,
        ..ViewOptions::default()
    };
    let ours = body(&session, View::Graph, reference);
    assert_eq!(ours["graph"]["edges"], serde_json::json!([]));
    let theirs = crate::helpers::read_json(&crate::helpers::reference("commugraph-sample/graph.json"));
    let ids = |g: &Value| -> Vec<Value> {
        let mut ids: Vec<Value> = g["graph"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].clone())
            .collect();
        ids.sort_by_key(|v| v.to_string());
        ids
    };
    assert_eq!(ids(&ours), ids(&theirs));
    assert!(ours["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["messages_received"] == 0));
    assert_eq!(ours["graph"]["metadata"]["edge_count"], 0);
}

/// The graph at step N keeps what the full graph has up to N.
fn assert_snapshots_grow(session: &Session) -> Result<(), TestCaseError> {
    let steps = session.workflow.nodes.len();
    let full = graph(session, None);
    let full_edges = checked_edges(&full, steps.max(1));
    let mut previous: BTreeMap<(String, String), u64> = BTreeMap::new();
    for n in 0..steps as u64 {
        let cut = checked_edges(&graph(session, Some(n)), steps);
        for (pair, w) in &previous {
            prop_assert!(cut.get(pair).is_some_and(|c| c >= w), "step {n}: {pair:?} shrank");
        }
        previous = cut;
    }
    if steps > 0 {
        prop_assert_eq!(&previous, &full_edges, "the last step is the whole graph");
        let last = graph(session, Some(steps as u64 - 1));
        prop_assert_eq!(&last["edges"], &full["edges"]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn graph_snapshots_are_monotone_and_end_at_the_whole_graph(
        specs in crate::properties::specs(crate::properties::acyclic_parent().boxed(), 0..25)
    ) {
        let session = crate::properties::load(&crate::properties::render(&specs, false));
        assert_snapshots_grow(&session)?;
    }
}

#[test]
fn the_autogen_sample_gives_commugraphs_graph_and_metrics_exactly() {
    use sessiongraph::core::formats::autogen;
    use sessiongraph::core::views::autogen_graph;
    let dir = crate::helpers::reference("autogen");
    let text = std::fs::read_to_string(dir.join("mock_chat_history.jsonl")).unwrap();
    let messages = autogen::parse(&text).unwrap();
    assert_eq!(messages.len(), 34);
    for (step, file) in [
        (None, "graph.json"),
        (Some(10), "graph_step_10.json"),
        (Some(0), "graph_step_0.json"),
    ] {
        let ours = serde_json::to_value(autogen_graph::graph(&messages, step)).unwrap();
        let theirs = crate::helpers::read_json(&dir.join(file));
        assert_eq!(ours, theirs, "{file}");
    }
    let metrics = serde_json::to_value(autogen_graph::metrics(&messages)).unwrap();
    assert_eq!(metrics, crate::helpers::read_json(&dir.join("metrics.json")));
}

/// The CommuGraph frontend's screenshot run found the upload answer, `info` and the session
/// list saying `edge_count: 0` for the sample while its graph has 19 edges: every route now
/// counts the graph with edges, and an upload whose stored counts were made by the old rules
/// is counted again (in the background after a start, and its manifest rewritten).
#[tokio::test]
async fn edge_counts_agree_in_the_upload_info_session_list_and_graph() {
    let data = tempfile::tempdir().unwrap();
    let options = Options {
        data_dir: Some(data.path().to_owned()),
        ..Options::default()
    };
    let server = TestServer::start(options.clone()).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let graph = server.get(&format!("/api/graph/{id}")).await.json;
    let edges = graph["graph"]["metadata"]["edge_count"].clone();
    assert_eq!(edges, 19, "the sample's graph");
    let info = server.get(&format!("/api/graph/{id}/info")).await.json;
    assert_eq!(info["edge_count"], edges);
    let listed = |body: &Value| {
        body["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id.as_str())
            .unwrap()["edge_count"]
            .clone()
    };
    assert_eq!(listed(&server.get("/api/sessions").await.json), edges);
    server.stop().await;

    // As an older version stored it: no rules, and CommuGraph's count.
    let manifest_path = data.path().join("uploads").join(&id).join("manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    assert_eq!(manifest["counts"]["rules"], 2, "{manifest}");
    manifest["counts"].as_object_mut().unwrap().remove("rules");
    manifest["counts"]["edge_count"] = 0.into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();

    let restarted = TestServer::start(Options {
        background_counts: true,
        ..options
    })
    .await;
    let mut seen = Value::Null;
    for _ in 0..400 {
        seen = listed(&restarted.get("/api/sessions").await.json);
        if seen == edges {
            break;
        }
        assert!(seen.is_null(), "old counts are not shown: {seen}");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(seen, edges, "counted again in the background");
    // The listing shows the new counts as soon as they are made; the manifest is rewritten
    // right after (on a loaded machine, after the listing was read).
    let mut rewritten = Value::Null;
    for _ in 0..400 {
        rewritten = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
        if rewritten["counts"]["edge_count"] == edges {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(rewritten["counts"]["edge_count"], edges);
    assert_eq!(rewritten["counts"]["rules"], 2);
    restarted.stop().await;
}
