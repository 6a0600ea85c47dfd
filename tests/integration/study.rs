//! A coding study run end to end over HTTP, as a team runs one, on SQLite and (with
//! `DATABASE_URL`) PostgreSQL: twenty sessions uploaded, a search, a stratified round of a
//! hundred units under the speech-act codebook, a model's tags imported, three annotators
//! labeling through the round's queue, a reviewer adjudicating, agreement of the humans and
//! of the model checked against Krippendorff's alpha computed here from the raw sets, and
//! the round exported and imported into a fresh store with nothing lost.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::labels::{put, TestDb};
use crate::server::{Options, TestServer};

/// Twenty sessions of every framework.
const SESSIONS: [(&str, &str); 20] = [
    ("claudecode", "commugraph-sample"),
    ("pi", "pi/before-compaction.jsonl"),
    ("pi", "pi/large-session.jsonl"),
    ("claudecode", "synthetic/compact_summary_v1"),
    ("claudecode", "synthetic/edge_cases"),
    ("claudecode", "synthetic/escapes"),
    ("claudecode", "synthetic/multi_block"),
    ("claudecode", "synthetic/no_results"),
    ("claudecode", "synthetic/subagents"),
    ("claudecode", "synthetic/tool_failures"),
    ("claudecode", "synthetic/typed_beside_result"),
    ("autogen", "autogen/agentchat/selector_planner.json"),
    ("autogen", "autogen/agentchat/selector_messages.json"),
    ("autogen", "autogen/agentchat/swarm_handoffs.json"),
    ("autogen", "autogen/agentchat/round_robin_user_proxy.json"),
    ("autogen", "autogen/agentchat/tool_error_parallel.json"),
    ("autogen", "autogen/ag2/groupchat_messages.json"),
    ("autogen", "autogen/ag2/tools_chat_result.json"),
    ("autogen", "autogen/chat_messages/fsm_chat_messages.json"),
    ("autogen", "autogen/chat_messages/groupchat_chat_result.json"),
];

/// The speech-act codebook's labels, and the act names CommuGraph's tags use for them.
const ACTS: [(&str, &str); 5] = [
    ("SPEECH_ACT_REPRESENTATIVE", "REPRESENTATIVE"),
    ("SPEECH_ACT_DIRECTIVE", "DIRECTIVE"),
    ("SPEECH_ACT_COMMISSIVE", "COMMISSIVE"),
    ("SPEECH_ACT_EXPRESSIVE", "EXPRESSIVE"),
    ("SPEECH_ACT_DECLARATION", "DECLARATION"),
];

const ANNOTATORS: [&str; 3] = ["ann.a", "ann.b", "ann.c"];

/// A number of the unit, to choose labels by.
fn hash(session: &str, event: &str) -> usize {
    session
        .bytes()
        .chain(event.bytes())
        .fold(17usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
}

/// What each annotator chooses: mostly the same act, some disagreeing.
fn human_label(annotator: &str, h: usize) -> &'static str {
    let shift = match annotator {
        "ann.b" if h.is_multiple_of(5) => 1,
        "ann.c" if h.is_multiple_of(7) => 2,
        _ => 0,
    };
    ACTS[(h + shift) % 5].0
}

/// The model's tags: the same act mostly, another on a quarter, a secondary act on some.
fn model_tag(h: usize) -> (usize, Option<usize>) {
    let primary = if h.is_multiple_of(4) { (h + 3) % 5 } else { h % 5 };
    let secondary = h.is_multiple_of(6).then_some((primary + 1) % 5);
    (primary, secondary)
}

async fn upload_all(server: &TestServer) -> Vec<String> {
    let mut ids = Vec::new();
    for (framework, rel) in SESSIONS {
        let reply = server.upload_fixture_reply(framework, rel).await;
        assert_eq!(reply.status, StatusCode::OK, "{rel}: {}", reply.json);
        ids.push(crate::server::graph_id(&reply));
    }
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 20, "twenty distinct sessions");
    ids
}

/// Waits until the search index holds every session (it is built in the background).
async fn index_ready(server: &TestServer) {
    for _ in 0..600 {
        let reply = server.get("/api/search?q=the&limit=1").await;
        if reply.status == StatusCode::OK && reply.json["index"]["pending"] == false {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the search index did not catch up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coding_study_runs_end_to_end() {
    TestDb::each(study).await;
}

fn options(db: &TestDb) -> Options {
    Options {
        label_policy: sessiongraph::labels::LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..db.options()
    }
}

async fn study(db: &TestDb) {
    let server = TestServer::start(options(db)).await;
    upload_all(&server).await;
    index_ready(&server).await;
    let found = server
        .get("/api/search?q=file&unit_type=assistant_turn&limit=5")
        .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.json);
    assert!(found.json["total"].as_u64().unwrap() > 0, "{}", found.json);

    let round = create_round(&server).await;
    let units = round_units(&server, &round).await;
    assert_eq!(units.len(), 100);
    import_model_tags(&server, &units).await;
    label_through_the_queue(&server, &round, &units).await;
    adjudicate(&server, &units).await;
    check_agreement(&server, &round, &units).await;

    let export = export_round(&server, &round).await;
    server.stop().await;
    import_into_a_fresh_store(db, &round, &units, &export).await;
}

async fn create_round(server: &TestServer) -> String {
    let definition = json!({
        "name": "speech acts, pilot",
        "codebook": "speechact",
        "guidelines": "Code the primary act of each turn.",
        "selection": { "query": "", "filters": {} },
        "sample": { "size": 100, "seed": 2026, "stratify": { "session": true, "unit_type": true }, "max_per_session": 15 },
        "overlap": 2,
        "annotators": ANNOTATORS,
    });
    let preview = server
        .post_json("/api/rounds?dry_run=true", &definition, &[])
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.json);
    assert!(
        preview.json["candidates"].as_u64().unwrap() >= 100,
        "{}",
        preview.json
    );
    let created = server.post_json("/api/rounds", &definition, &[]).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    assert_eq!(created.json["round"]["codebook"], "speechact");
    let by_session: BTreeMap<String, u64> =
        serde_json::from_value(preview.json["by_session"].clone()).unwrap();
    assert!(
        by_session.len() > 5,
        "the sample spans the sessions: {by_session:?}"
    );
    assert!(by_session.values().all(|n| *n <= 15));
    created.json["round"]["id"].as_str().unwrap().to_owned()
}

/// (session, event, unit type) of the round's units, in queue order.
async fn round_units(server: &TestServer, round: &str) -> Vec<(String, String, String)> {
    let reply = server.get(&format!("/api/rounds/{round}/units")).await;
    reply.json["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            let field = |k: &str| u[k].as_str().unwrap().to_owned();
            (field("session_id"), field("event_id"), field("unit_type"))
        })
        .collect()
}

async fn import_model_tags(server: &TestServer, units: &[(String, String, String)]) {
    let body: String = units
        .iter()
        .map(|(session, event, unit_type)| {
            let (primary, secondary) = model_tag(hash(session, event));
            let mut act = json!({ "primary_type": ACTS[primary].1, "notes": "tagged" });
            if let Some(s) = secondary {
                act["secondary_type"] = json!(ACTS[s].1.to_lowercase());
            }
            let line = json!({ "session_id": session, "event_id": event, "unit_type": unit_type, "text_preview": "…", "speech_act": act });
            format!("{line}\n")
        })
        .collect();
    let reply = server
        .post_bytes(
            "/api/labels/import?format=commugraph-speechact&model=tagger",
            body.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
    assert_eq!(reply.json["ok"], 100, "{}", reply.json);
}

async fn label_through_the_queue(server: &TestServer, round: &str, units: &[(String, String, String)]) {
    let mut holders: BTreeMap<(String, String), BTreeSet<&str>> = BTreeMap::new();
    let mut open: Vec<&str> = ANNOTATORS.to_vec();
    let mut turn = 0usize;
    while !open.is_empty() {
        let who = open[turn % open.len()];
        turn += 1;
        let next = crate::rounds::next_in_round(server, who, round).await;
        assert_eq!(next.status, StatusCode::OK, "{}", next.json);
        if next.json["done"] == true {
            open.retain(|a| *a != who);
            continue;
        }
        let r = &next.json["reservation"];
        let (session, event) = (r["session_id"].as_str().unwrap(), r["event_id"].as_str().unwrap());
        let label = human_label(who, hash(session, event));
        let set = json!({ "annotator": who, "status": "submitted", "labels": [{ "id": label }] });
        let path = format!("/api/graph/{session}/labels/{event}?codebook=speechact");
        let written = put(server, &path, &set, None).await;
        assert!(written.status.is_success(), "{}", written.json);
        let fresh = holders
            .entry((session.to_owned(), event.to_owned()))
            .or_default()
            .insert(who);
        assert!(fresh, "{who} was handed {event} twice");
        assert!(turn < 1_000, "the queue keeps handing out units");
    }
    assert_eq!(holders.len(), 100, "every unit of the round");
    assert!(
        holders.values().all(|h| h.len() == 2),
        "no unit beyond the overlap"
    );
    let types: BTreeSet<&str> = units.iter().map(|(_, _, t)| t.as_str()).collect();
    assert!(!types.contains("system_turn"), "{types:?}");
}

async fn adjudicate(server: &TestServer, units: &[(String, String, String)]) {
    for (session, event, _) in units {
        let label = ACTS[hash(session, event) % 5].0;
        let set = json!({ "annotator": "lead", "status": "adjudicated", "labels": [{ "id": label }] });
        let path = format!("/api/graph/{session}/labels/{event}?codebook=speechact");
        let written = put(server, &path, &set, None).await;
        assert!(written.status.is_success(), "{}", written.json);
    }
}

/// Krippendorff's alpha (nominal) pooled over every (unit, label) decision of the units
/// with at least two codings, computed from its definition: 1 - (n - 1) * sum over items
/// of p (m - p) / (m - 1), over n0 * n1 (for binary values, the coincidence matrix's
/// off-diagonal and margins).
fn pooled_alpha(units: &[Vec<BTreeSet<&str>>]) -> f64 {
    let (mut n, mut present, mut disagreement) = (0.0, 0.0, 0.0);
    for codings in units.iter().filter(|c| c.len() >= 2) {
        let m = codings.len() as f64;
        for (label, _) in ACTS {
            let p = codings.iter().filter(|c| c.contains(label)).count() as f64;
            n += m;
            present += p;
            disagreement += p * (m - p) / (m - 1.0);
        }
    }
    let absent = n - present;
    1.0 - (n - 1.0) * disagreement / (present * absent)
}

async fn check_agreement(server: &TestServer, round: &str, units: &[(String, String, String)]) {
    let reply = server.get(&format!("/api/rounds/{round}/agreement")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
    let report = &reply.json["report"];
    let sets = server.get(&format!("/api/rounds/{round}/units")).await;
    let mut humans: Vec<Vec<BTreeSet<&str>>> = Vec::new();
    let mut with_model: Vec<Vec<BTreeSet<&str>>> = Vec::new();
    let mut against_adjudicated: Vec<Vec<BTreeSet<&str>>> = Vec::new();
    let (mut tp, mut fp, mut false_negatives) = (0usize, 0usize, 0usize);
    let directive = ACTS[1].0;
    for ((session, event, _), listed) in units.iter().zip(sets.json["units"].as_array().unwrap()) {
        let h = hash(session, event);
        let coders: Vec<&str> = listed["sets"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, status)| *status == "submitted")
            .map(|(who, _)| who.as_str())
            .collect();
        let mut codings: Vec<BTreeSet<&str>> =
            coders.iter().map(|who| [human_label(who, h)].into()).collect();
        humans.push(codings.clone());
        let (primary, secondary) = model_tag(h);
        let model: BTreeSet<&str> = [Some(primary), secondary]
            .into_iter()
            .flatten()
            .map(|i| ACTS[i].0)
            .collect();
        codings.push(model.clone());
        with_model.push(codings);
        let adjudicated: BTreeSet<&str> = [ACTS[h % 5].0].into();
        match (model.contains(directive), adjudicated.contains(directive)) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => false_negatives += 1,
            (false, false) => {}
        }
        against_adjudicated.push(vec![model, adjudicated]);
    }
    let close = |got: &Value, want: f64, what: &str| {
        let got = got.as_f64().unwrap_or_else(|| panic!("{what}: {got}"));
        assert!((got - want).abs() < 1e-9, "{what}: server {got}, computed {want}");
    };
    close(
        &report["humans"]["overall"]["krippendorff_alpha"],
        pooled_alpha(&humans),
        "humans' alpha",
    );
    let tagger = &report["models"][0];
    assert_eq!(tagger["model"], "tagger");
    assert_eq!(tagger["units"], 100);
    close(
        &tagger["with_humans"]["overall"]["krippendorff_alpha"],
        pooled_alpha(&with_model),
        "the model among the humans",
    );
    close(
        &tagger["adjudicated"]["overall"]["krippendorff_alpha"],
        pooled_alpha(&against_adjudicated),
        "the model against the adjudicated sets",
    );
    let scores = tagger["scores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == directive)
        .unwrap();
    close(
        &scores["precision"],
        tp as f64 / (tp + fp) as f64,
        "precision of DIRECTIVE",
    );
    close(
        &scores["recall"],
        tp as f64 / (tp + false_negatives) as f64,
        "recall of DIRECTIVE",
    );
    assert!(
        !tagger["disagreements"].as_array().unwrap().is_empty(),
        "review shows where the model departs"
    );
}

async fn export_round(server: &TestServer, round: &str) -> String {
    let reply = server
        .client
        .get(format!("{}/api/labels/export?round={round}", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    reply.text().await.unwrap()
}

/// Each unit's sets (annotator, status, labels) and suggestions (model, labels), as an
/// export line lists them.
fn labels_of(export: &str) -> BTreeMap<(String, String), Value> {
    export
        .lines()
        .skip(1)
        .map(|line| {
            let unit: Value = serde_json::from_str(line).unwrap();
            let sets: Vec<Value> = unit["annotations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| json!([s["annotator"], s["status"], s["labels"]]))
                .collect();
            let suggestions: Vec<Value> = unit["suggestions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| json!([s["model"], s["labels"]]))
                .collect();
            let key = (
                unit["session_id"].as_str().unwrap().to_owned(),
                unit["event_id"].as_str().unwrap().to_owned(),
            );
            (key, json!({ "sets": sets, "suggestions": suggestions }))
        })
        .collect()
}

async fn import_into_a_fresh_store(
    db: &TestDb,
    round: &str,
    units: &[(String, String, String)],
    export: &str,
) {
    let fresh = TestDb::fresh(db.url.as_ref().map(|_| std::env::var("DATABASE_URL").unwrap())).await;
    let server = TestServer::start(options(&fresh)).await;
    upload_all(&server).await;
    let imported = server
        .post_bytes(
            "/api/labels/import",
            export.as_bytes().to_vec(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.json);
    assert_eq!(imported.json["round"], json!({ "id": round, "created": true }));
    assert_eq!(imported.json["failed"], 0, "{}", imported.json);
    assert_eq!(
        round_units(&server, round).await,
        units,
        "the same round, the same units in order"
    );
    let again = export_round(&server, round).await;
    assert_eq!(labels_of(&again), labels_of(export), "every set and suggestion");
    let first: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    let second: Value = serde_json::from_str(again.lines().next().unwrap()).unwrap();
    for key in [
        "id",
        "name",
        "codebook",
        "codebook_version",
        "guidelines",
        "selection",
        "sample",
        "overlap",
        "annotators",
        "status",
    ] {
        assert_eq!(first["round"][key], second["round"][key], "{key}");
    }
    let twice = server
        .post_bytes(
            "/api/labels/import",
            export.as_bytes().to_vec(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(twice.json["round"]["created"], false);
    assert_eq!(twice.json["written"], 0, "importing it again changes nothing");
    server.stop().await;
    fresh.cleanup().await;
}
