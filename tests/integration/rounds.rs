//! Rounds over HTTP: a round's units are drawn once, reproducibly, and fixed; its queue
//! hands each to the round's overlap of assigned annotators and no one else; closing stops
//! it; progress, agreement and export see only the round. On SQLite and, with
//! `DATABASE_URL`, PostgreSQL.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::labels::{put, TestDb};
use crate::server::{Options, TestServer};

/// Sessions of several shapes: the sample (sub-agents), pi, and synthetic Claude Code logs.
const SESSIONS: [(&str, &str); 5] = [
    ("claudecode", "commugraph-sample"),
    ("pi", "pi/before-compaction.jsonl"),
    ("claudecode", "synthetic/multi_block"),
    ("claudecode", "synthetic/tool_failures"),
    ("claudecode", "synthetic/subagents"),
];

/// A server with [`SESSIONS`] uploaded, and their ids.
pub async fn study_server(options: Options) -> (TestServer, Vec<String>) {
    let server = TestServer::start(options).await;
    let mut ids = Vec::new();
    for (framework, rel) in SESSIONS {
        ids.push(server.upload_fixture(framework, rel).await);
    }
    (server, ids)
}

/// The (session, event) pairs a round lists, in queue order.
async fn round_units(server: &TestServer, round: &str) -> Vec<(String, String, String)> {
    let units = server.get(&format!("/api/rounds/{round}/units")).await;
    assert_eq!(units.status, StatusCode::OK, "{}", units.json);
    units.json["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["session_id"].as_str().unwrap().to_owned(),
                u["event_id"].as_str().unwrap().to_owned(),
                u["unit_type"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `who` asks round `round`'s queue for their next unit.
pub async fn next_in_round(server: &TestServer, who: &str, round: &str) -> crate::server::Reply {
    server
        .post_json(
            "/api/labels/queue/next",
            &json!({ "annotator": who, "round": round }),
            &[],
        )
        .await
}

/// `who` submits `label` for unit `event` of `session`.
/// The body of `GET /api/labels/export?{query}` (JSON lines).
async fn export_text(server: &TestServer, query: &str) -> String {
    let url = format!("{}/api/labels/export?{query}", server.url);
    server.client.get(url).send().await.unwrap().text().await.unwrap()
}

async fn submit(server: &TestServer, who: &str, session: &str, event: &str, label: &str) {
    let set = json!({ "annotator": who, "status": "submitted", "labels": [{ "id": label }] });
    let written = put(
        server,
        &format!("/api/graph/{session}/labels/{event}"),
        &set,
        None,
    )
    .await;
    assert!(written.status.is_success(), "{}", written.json);
}

fn definition(sessions: &[String]) -> Value {
    json!({
        "name": "pilot",
        "guidelines": "# Pilot\nCode the **primary** act.",
        "selection": { "sessions": sessions },
        "sample": { "size": 12, "seed": 7, "stratify": { "session": true }, "max_per_session": 4 },
        "overlap": 2,
        "annotators": ["ann.a", "ann.b", "ann.c"],
        "reservation_secs": 300,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_is_drawn_reproducibly_and_labeled_through_its_own_queue() {
    TestDb::each(round_scenario).await;
}

async fn round_scenario(db: &TestDb) {
    let (server, ids) = study_server(db.options()).await;
    let body = definition(&ids);
    let preview = server.post_json("/api/rounds?dry_run=true", &body, &[]).await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.json);
    assert_eq!(preview.json["units"], 12);
    assert!(preview.json["candidates"].as_u64().unwrap() > 12);
    let per_session: BTreeMap<String, u64> =
        serde_json::from_value(preview.json["by_session"].clone()).unwrap();
    assert!(per_session.values().all(|n| *n <= 4), "{per_session:?}");
    assert!(
        server.get("/api/rounds").await.json["rounds"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a dry run stores nothing"
    );

    let created = server.post_json("/api/rounds", &body, &[]).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let round = created.json["round"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.json["round"]["codebook"], "delegation");
    assert_eq!(created.json["round"]["status"], "open");
    let units = round_units(&server, &round).await;
    assert_eq!(units.len(), 12);
    assert!(
        units.iter().all(|(_, _, t)| t != "system_turn"),
        "only units the codebook codes"
    );
    let previewed: Vec<(String, String)> = preview.json["preview"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["session_id"].as_str().unwrap().to_owned(),
                u["event_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let stored: Vec<(String, String)> = units.iter().map(|(s, e, _)| (s.clone(), e.clone())).collect();
    assert_eq!(
        previewed, stored,
        "the preview is the round's sample, in its order"
    );
    let again = server.post_json("/api/rounds", &body, &[]).await;
    let second = again.json["round"]["id"].as_str().unwrap().to_owned();
    assert_ne!(second, round);
    assert_eq!(
        round_units(&server, &second).await,
        units,
        "the same definition draws the same sample"
    );

    label_through_the_queue(&server, &round, &units).await;
    closing_stops_the_queue(&server, &round).await;
    round_scoped_reads(&server, &round, &units).await;
    server.stop().await;
}

/// Three annotators take units until the queue is done: each unit goes to exactly the
/// overlap, no annotator twice; someone not assigned is refused.
async fn label_through_the_queue(server: &TestServer, round: &str, units: &[(String, String, String)]) {
    let outsider = next_in_round(server, "ann.d", round).await;
    assert_eq!(outsider.status, StatusCode::FORBIDDEN, "{}", outsider.json);
    let mut holders: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut open: BTreeSet<&str> = ["ann.a", "ann.b", "ann.c"].into();
    let mut turn = 0;
    while !open.is_empty() {
        let who = *open.iter().nth(turn % open.len()).unwrap();
        turn += 1;
        let next = next_in_round(server, who, round).await;
        assert_eq!(next.status, StatusCode::OK, "{}", next.json);
        if next.json["done"] == true {
            open.remove(who);
            continue;
        }
        let (session, event) = (
            next.json["reservation"]["session_id"]
                .as_str()
                .unwrap()
                .to_owned(),
            next.json["reservation"]["event_id"].as_str().unwrap().to_owned(),
        );
        let label = if turn % 2 == 0 {
            "EXEC_COGNITIVE"
        } else {
            "EXEC_DIGITAL"
        };
        submit(server, who, &session, &event, label).await;
        assert!(
            holders
                .entry((session, event))
                .or_default()
                .insert(who.to_owned()),
            "{who} got a unit twice"
        );
        assert!(turn < 200, "the queue keeps handing out units");
    }
    assert_eq!(holders.len(), units.len(), "every unit of the round, none else");
    assert!(
        holders.values().all(|h| h.len() == 2),
        "each unit to exactly the overlap: {holders:?}"
    );
    let progress = server.get(&format!("/api/rounds/{round}")).await;
    assert_eq!(progress.json["progress"]["complete"], 12, "{}", progress.json);
    let submitted: u64 = ["ann.a", "ann.b", "ann.c"]
        .iter()
        .map(|a| {
            progress.json["progress"]["annotators"][a]["submitted"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(submitted, 24);
}

async fn closing_stops_the_queue(server: &TestServer, round: &str) {
    let closed = server
        .post_json(&format!("/api/rounds/{round}/close"), &json!({}), &[])
        .await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.json);
    assert_eq!(closed.json["status"], "closed");
    let refused = next_in_round(server, "ann.a", round).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.json);
    let reopened = server
        .post_json(&format!("/api/rounds/{round}/reopen"), &json!({}), &[])
        .await;
    assert_eq!(reopened.json["status"], "open");
    let done = next_in_round(server, "ann.a", round).await;
    assert_eq!(done.json["done"], true, "{}", done.json);
    let unknown = server.get("/api/rounds/r0000000000000000").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

/// Agreement and export with `?round=` see the round's units only; the export starts with
/// the round's definition.
async fn round_scoped_reads(server: &TestServer, round: &str, units: &[(String, String, String)]) {
    let outside = &units[0];
    let other_unit = crate::labels::units(server, &outside.0)
        .await
        .into_iter()
        .map(|(e, _, _)| e)
        .find(|e| !units.iter().any(|(s, u, _)| s == &outside.0 && u == e))
        .expect("a unit outside the round");
    let set = json!({ "annotator": "ann.a", "status": "submitted", "labels": [{ "id": "EXEC_COGNITIVE" }] });
    let written = put(
        server,
        &format!("/api/graph/{}/labels/{other_unit}", outside.0),
        &set,
        None,
    )
    .await;
    assert!(written.status.is_success());

    let agreement = server.get(&format!("/api/labels/agreement?round={round}")).await;
    assert_eq!(agreement.status, StatusCode::OK, "{}", agreement.json);
    assert_eq!(agreement.json["units"], 12, "{}", agreement.json);
    assert_eq!(agreement.json["codings"], 24);
    let everything = server.get("/api/labels/agreement").await;
    assert_eq!(everything.json["codings"], 25);

    let export = export_text(server, &format!("round={round}")).await;
    let lines: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["round"]["id"], round);
    assert_eq!(lines[0]["units"].as_array().unwrap().len(), 12);
    assert_eq!(
        lines.len(),
        13,
        "the definition, then one line per unit of the round"
    );
    assert!(lines[1..]
        .iter()
        .all(|l| l["annotations"].as_array().unwrap().len() == 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_definition_is_checked_and_managed_by_reviewers() {
    let db = TestDb::fresh(None).await;
    let server = TestServer::start(Options {
        api_keys: vec!["lead:k-lead".into(), "ann.a:k-a".into()],
        label_policy: sessiongraph::labels::LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..db.options()
    })
    .await;
    let log = std::fs::read(crate::helpers::fixture(
        "synthetic/multi_block/11111111-2222-4333-8444-555555555555.jsonl",
    ))
    .unwrap();
    let uploaded = server
        .post_bytes(
            "/api/upload?framework=claudecode&filename=11111111-2222-4333-8444-555555555555.jsonl",
            log,
            &[
                ("x-api-key", "k-lead"),
                ("content-type", "application/octet-stream"),
            ],
        )
        .await;
    let ids = vec![crate::server::graph_id(&uploaded)];
    let mut body = definition(&ids);
    body["sample"]["size"] = json!(2);
    let by_annotator = server
        .post_json("/api/rounds", &body, &[("x-api-key", "k-a")])
        .await;
    assert_eq!(
        by_annotator.status,
        StatusCode::FORBIDDEN,
        "{}",
        by_annotator.json
    );
    let mut bad = body.clone();
    bad["sample"]["size"] = json!(0);
    let refused = server
        .post_json("/api/rounds", &bad, &[("x-api-key", "k-lead")])
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.json["details"]["field"], "sample.size");
    let mut unknown = body.clone();
    unknown["selection"] = json!({ "units": [{ "session_id": ids[0], "event_id": "nope" }] });
    let refused = server
        .post_json("/api/rounds", &unknown, &[("x-api-key", "k-lead")])
        .await;
    assert_eq!(
        refused.json["details"]["field"], "selection.units[0]",
        "{}",
        refused.json
    );
    let created = server
        .post_json("/api/rounds", &body, &[("x-api-key", "k-lead")])
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    assert_eq!(created.json["round"]["created_by"], "lead");
    server.stop().await;
    db.cleanup().await;
}

/// A server that is not blind (`lead` its reviewer) holding a blind round of two units,
/// on the first of which `ann.a` and `ann.b` have submitted sets: the database, the server,
/// the round's id and its units.
async fn blind_round_with_two_submitted() -> (TestDb, TestServer, String, Vec<(String, String, String)>) {
    let db = TestDb::fresh(None).await;
    let (server, ids) = study_server(Options {
        label_policy: sessiongraph::labels::LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..db.options()
    })
    .await;
    let mut body = definition(&ids);
    body["blind"] = json!(true);
    body["sample"]["size"] = json!(2);
    let created = server.post_json("/api/rounds", &body, &[]).await;
    assert_eq!(created.json["round"]["blind"], true);
    let round = created.json["round"]["id"].as_str().unwrap().to_owned();
    let units = round_units(&server, &round).await;
    let (session, event, _) = &units[0];
    for who in ["ann.a", "ann.b"] {
        submit(&server, who, session, event, "EXEC_COGNITIVE").await;
    }
    (db, server, round, units)
}

/// A blind round on a server that is not blind: its agreement and its export show an
/// annotator only what blind mode allows (nothing of others' until they submit their own),
/// a reviewer everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blind_round_hides_others_sets_in_its_agreement_export_and_progress() {
    let (db, server, round, _) = blind_round_with_two_submitted().await;
    let codings = |viewer: &'static str| {
        let server = &server;
        let round = round.clone();
        async move {
            server
                .get(&format!("/api/labels/agreement?round={round}&viewer={viewer}"))
                .await
                .json["codings"]
                .clone()
        }
    };
    assert_eq!(
        codings("ann.c").await,
        0,
        "an annotator who has not submitted sees none"
    );
    assert_eq!(codings("lead").await, 2, "a reviewer sees every set");
    let export = export_text(&server, &format!("round={round}&viewer=ann.c")).await;
    let shown: usize = export
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["annotations"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(shown, 0, "the export hides the sets too");
    let units = server
        .get(&format!("/api/rounds/{round}/units?viewer=ann.c"))
        .await;
    assert_eq!(
        units.json["units"][0]["sets"],
        json!({}),
        "so do the units' statuses"
    );
    let progress = server.get(&format!("/api/rounds/{round}?viewer=ann.c")).await;
    assert_eq!(
        progress.json["progress"]["annotators"],
        json!({}),
        "and the progress"
    );
    let seen = server.get(&format!("/api/rounds/{round}?viewer=lead")).await;
    assert_eq!(seen.json["progress"]["annotators"]["ann.a"]["submitted"], 1);
    server.stop().await;
    db.cleanup().await;
}

/// A blind round on a server that is not blind holds its units blind on every label route,
/// not only on the round's own: the session's sets, the annotations body, a unit's history,
/// the store-wide agreement and export, and a search by label show an annotator nothing of
/// the others' sets on them until they submit their own. A unit outside the round stays
/// open; a reviewer sees everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blind_rounds_units_stay_blind_on_the_label_routes_of_an_open_server() {
    let (db, server, _, units) = blind_round_with_two_submitted().await;
    let (session, event, _) = &units[0];
    let annotations = server
        .get(&format!(
            "/api/graph/{session}/annotations?include_sidechains=true"
        ))
        .await;
    let outside = annotations.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["event_id"].as_str())
        .find(|e| units.iter().all(|(s, u, _)| s != session || u != e))
        .expect("a unit outside the round")
        .to_owned();
    submit(&server, "ann.a", session, &outside, "EXEC_COGNITIVE").await;

    let annotators_on = |viewer: &'static str, unit: String| {
        let server = &server;
        let session = session.clone();
        async move {
            let listed = server
                .get(&format!("/api/graph/{session}/labels?viewer={viewer}"))
                .await;
            assert_eq!(listed.status, StatusCode::OK, "{}", listed.json);
            let mut who: Vec<String> = listed.json["labels"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["event_id"] == unit.as_str())
                .map(|s| s["annotator"].as_str().unwrap().to_owned())
                .collect();
            who.sort();
            who
        }
    };
    assert!(
        annotators_on("ann.c", event.clone()).await.is_empty(),
        "the session's sets"
    );
    assert_eq!(
        annotators_on("ann.c", outside.clone()).await,
        ["ann.a"],
        "outside the round"
    );
    assert_eq!(annotators_on("lead", event.clone()).await, ["ann.a", "ann.b"]);
    assert_eq!(
        annotators_on("ann.a", event.clone()).await,
        ["ann.a", "ann.b"],
        "after submitting"
    );

    let shown = server
        .get(&format!(
            "/api/graph/{session}/annotations?include_sidechains=true&viewer=ann.c"
        ))
        .await;
    let labels_of = |body: &Value, unit: &str| {
        body["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["event_id"] == unit)
            .unwrap()["labels"]
            .clone()
    };
    assert_eq!(labels_of(&shown.json, event), json!([]), "the annotations body");
    assert_ne!(labels_of(&shown.json, &outside), json!([]));

    let history = server
        .get(&format!(
            "/api/graph/{session}/labels/{event}/history?viewer=ann.c"
        ))
        .await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.json);
    assert_eq!(
        history.json["history"],
        json!([]),
        "a unit's history: {}",
        history.json
    );

    let codings = server.get("/api/labels/agreement?viewer=ann.c").await;
    assert_eq!(
        codings.json["codings"], 1,
        "the store's agreement: the unit outside alone"
    );
    let codings = server.get("/api/labels/agreement?viewer=lead").await;
    assert_eq!(codings.json["codings"], 3);

    let export = export_text(&server, "viewer=ann.c").await;
    let exported: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        exported.iter().all(|u| u["event_id"] != event.as_str()),
        "the store's export: {export}"
    );
    assert!(exported.iter().any(|u| u["event_id"] == outside.as_str()));

    let found = crate::search::search_indexed(&server, "label=EXEC_COGNITIVE&viewer=ann.c").await;
    let keys = crate::search::keys(&found);
    assert!(
        !keys.contains(&(session.clone(), event.clone())),
        "a search by label"
    );
    assert!(keys.contains(&(session.clone(), outside.clone())));
    let found = crate::search::search_indexed(&server, "label=EXEC_COGNITIVE&viewer=lead").await;
    assert!(crate::search::keys(&found).contains(&(session.clone(), event.clone())));
    server.stop().await;
    db.cleanup().await;
}

/// A round over a Codex rollout and a Gemini chat: their units are drawn, handed out by
/// the queue and labeled as Claude Code's are, and the round's progress counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_over_codex_and_gemini_sessions_is_labeled_through_its_queue() {
    let server = TestServer::start(Options::default()).await;
    let codex = server
        .upload_fixture("codex", "codex/agtrace/codex_session.jsonl")
        .await;
    let gemini = server
        .upload_fixture("gemini", "gemini/real/session-2025-10-27T19-55-981c87cb.json")
        .await;
    let body = json!({
        "name": "coding agents",
        "selection": { "sessions": [codex, gemini] },
        "sample": { "size": 8, "seed": 3, "stratify": { "session": true }, "max_per_session": 4 },
        "overlap": 1,
        "annotators": ["ann.a"],
    });
    let created = server.post_json("/api/rounds", &body, &[]).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let round = created.json["round"]["id"].as_str().unwrap().to_owned();
    let units = round_units(&server, &round).await;
    assert_eq!(units.len(), 8);
    let sessions: BTreeSet<&str> = units.iter().map(|(s, _, _)| s.as_str()).collect();
    assert_eq!(sessions, [codex.as_str(), gemini.as_str()].into());
    assert!(units.iter().all(|(_, _, t)| t != "system_turn"));

    let mut labeled = BTreeSet::new();
    loop {
        let next = next_in_round(&server, "ann.a", &round).await;
        assert_eq!(next.status, StatusCode::OK, "{}", next.json);
        if next.json["done"] == true {
            break;
        }
        let reservation = &next.json["reservation"];
        let (session, event) = (
            reservation["session_id"].as_str().unwrap().to_owned(),
            reservation["event_id"].as_str().unwrap().to_owned(),
        );
        submit(&server, "ann.a", &session, &event, "EXEC_DIGITAL").await;
        assert!(labeled.insert((session, event)), "a unit handed out twice");
        assert!(labeled.len() <= 8, "the queue keeps handing out units");
    }
    let drawn: BTreeSet<(String, String)> = units.into_iter().map(|(s, e, _)| (s, e)).collect();
    assert_eq!(labeled, drawn, "every unit of the round, none else");
    let progress = server.get(&format!("/api/rounds/{round}")).await;
    assert_eq!(progress.json["progress"]["complete"], 8, "{}", progress.json);
    server.stop().await;
}

/// Regression: the queue of a round and the queue of one of its sessions were serialised
/// by two different locks (the round's row and the session's row in `label_queue_turns`),
/// as were two rounds holding the same unit. Annotators asking through them at the same
/// moment each read the unit's holders before the others' reservations were committed,
/// and all reserved it: on PostgreSQL a unit went to three or four annotators with an
/// overlap of two. Asked at once through two rounds over the same session and through the
/// session itself, no unit gets more holders than the overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_unit_is_not_handed_out_beyond_the_overlap_through_rounds_and_its_session_at_once() {
    TestDb::each(overlap_across_queues).await;
}

async fn overlap_across_queues(db: &TestDb) {
    let server = std::sync::Arc::new(TestServer::start(db.options()).await);
    let annotators: Vec<String> = (0..18).map(|i| format!("ann.{i:02}")).collect();
    for attempt in 0..10 {
        // A session of one unit, new each time: nobody holds it yet.
        let line =
            crate::helpers::records::Record::prompt("u1", &format!("attempt {attempt}: plan the release"))
                .line();
        let upload = server
            .upload_raw(
                "framework=claudecode&filename=11111111-2222-4333-8444-555555555555.jsonl",
                format!("{line}\n").into_bytes(),
            )
            .await;
        let session = crate::server::graph_id(&upload);
        let mut rounds = Vec::new();
        for (name, who) in [("a", &annotators[..6]), ("b", &annotators[6..12])] {
            let body = json!({
                "name": format!("{name}{attempt}"),
                "selection": { "sessions": [session] },
                "overlap": 2,
                "annotators": who,
            });
            let created = server.post_json("/api/rounds", &body, &[]).await;
            assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
            rounds.push(created.json["round"]["id"].as_str().unwrap().to_owned());
        }
        let asks = annotators.iter().enumerate().map(|(i, who)| {
            let (server, session, rounds) = (server.clone(), session.clone(), rounds.clone());
            let who = who.clone();
            tokio::spawn(async move {
                let reply = match i / 6 {
                    0 | 1 => next_in_round(&server, &who, &rounds[i / 6]).await,
                    _ => {
                        server
                            .post_json(
                                "/api/labels/queue/next",
                                &json!({ "annotator": who, "session": session }),
                                &[],
                            )
                            .await
                    }
                };
                assert_eq!(reply.status, StatusCode::OK, "{}", reply.json);
                (
                    who,
                    reply.json["reservation"]["event_id"].as_str().map(str::to_owned),
                )
            })
        });
        let mut holders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for ask in asks.collect::<Vec<_>>() {
            let (who, unit) = ask.await.unwrap();
            if let Some(unit) = unit {
                holders.entry(unit).or_default().insert(who);
            }
        }
        assert_eq!(
            holders.len(),
            1,
            "attempt {attempt}: the session's one unit: {holders:?}"
        );
        assert!(
            holders.values().all(|who| who.len() == 2),
            "attempt {attempt}: the unit went to {holders:?}, overlap 2"
        );
    }
    std::sync::Arc::try_unwrap(server).ok().unwrap().stop().await;
}
