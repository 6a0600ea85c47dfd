//! CommuGraph's speech-act tags imported as a model's suggestions
//! (`POST /api/labels/import?format=commugraph-speechact`) on a server whose codebook is the
//! speech-act one, on SQLite and (with `DATABASE_URL`) PostgreSQL.

use reqwest::StatusCode;
use serde_json::{json, Value};
use sessiongraph::labels::speechact;

use crate::labels::{sample_server, TestDb};
use crate::server::{Options, Reply, TestServer};

/// Posts `lines` (JSONL) to the import with `query`.
async fn import(server: &TestServer, query: &str, lines: &[String]) -> Reply {
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    server
        .post_bytes(
            &format!("/api/labels/import?{query}"),
            body.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await
}

/// Each line's (ok, field), by line number.
fn outcomes(reply: &Reply) -> Vec<(u64, bool, Value)> {
    reply.json["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {}", reply.json))
        .iter()
        .map(|r| (r["line"].as_u64().unwrap(), r["ok"] == true, r["field"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_act_tags_import_as_one_models_suggestions() {
    TestDb::each(tags_as_suggestions).await;
}

async fn tags_as_suggestions(db: &TestDb) {
    let options = Options {
        codebook: Some(speechact::codebook().unwrap()),
        ..db.options()
    };
    let (server, id, units) = sample_server(options).await;
    let (e1, e2) = (&units[0].0, &units[1].0);
    let lines = [
        json!({"event_id": e1, "unit_type": "user_turn", "text_preview": "…",
               "speech_act": {"primary_type": "Directive", "secondary_type": "assertive", "notes": "User request"}}),
        json!({"line_num": 2, "event_id": e2, "unit_type": "assistant_turn",
               "speech_act": {"types": ["REPRESENTATIVE", "COMMISSIVE"], "notes": "Reports, then commits"}}),
        json!({"event_id": e1, "speech_act": {"primary_type": "QUESTION"}}),
        json!({"event_id": "U:nowhere", "speech_act": {"primary_type": "EXPRESSIVE"}}),
        json!({"session_id": "another", "event_id": e1, "speech_act": {"primary_type": "EXPRESSIVE"}}),
    ]
    .map(|l| l.to_string());
    let mut lines = lines.to_vec();
    lines.push("{not json".to_owned());
    let query = format!("format=commugraph-speechact&model=haiku:speech-act-tagger&session={id}");

    let first = import(&server, &query, &lines).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.json);
    assert_eq!(
        (first.json["ok"].as_u64(), first.json["written"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(
        outcomes(&first),
        [
            (1, true, Value::Null),
            (2, true, Value::Null),
            (3, false, json!("speech_act.primary_type")),
            (4, false, json!("event_id")),
            (5, false, json!("session_id")),
            (6, false, json!("line")),
        ]
    );

    let listed = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(listed.json["total"], 0, "suggestions are no human sets");
    let suggestions = listed.json["suggestions"].as_array().unwrap();
    let of = |event: &str| {
        suggestions
            .iter()
            .find(|s| s["event_id"] == event)
            .unwrap_or_else(|| panic!("no suggestion on {event}: {}", listed.json))
    };
    assert_eq!(of(e1)["model"], "haiku:speech-act-tagger");
    assert_eq!(
        of(e1)["labels"],
        json!([
            {"id": "SPEECH_ACT_DIRECTIVE", "evidence": {"cue": "User request"}, "fields": {"rank": "primary"}},
            {"id": "SPEECH_ACT_REPRESENTATIVE", "confidence": 0.5, "fields": {"rank": "secondary"}},
        ])
    );
    assert_eq!(
        of(e2)["labels"],
        json!([
            {"id": "SPEECH_ACT_REPRESENTATIVE", "evidence": {"cue": "Reports, then commits"}},
            {"id": "SPEECH_ACT_COMMISSIVE"},
        ])
    );

    let again = import(&server, &query, &lines).await;
    assert_eq!(
        (again.json["written"].as_u64(), again.json["unchanged"].as_u64()),
        (Some(0), Some(2)),
        "{}",
        again.json
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speech_act_import_needs_a_valid_model_and_goes_to_the_speech_act_codebook() {
    let (server, id, units) = sample_server(Options::default()).await;
    let line = json!({"event_id": units[0].0, "speech_act": {"primary_type": "DIRECTIVE"}}).to_string();
    for query in [
        "format=commugraph-speechact".to_owned(),
        format!("format=commugraph-speechact&model=a%20b&session={id}"),
    ] {
        let refused = import(&server, &query, std::slice::from_ref(&line)).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            refused.json
        );
        assert_eq!(refused.json["details"]["field"], "model", "{query}");
    }
    let unknown = import(&server, "format=speechact", std::slice::from_ref(&line)).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert!(
        unknown.json["message"]
            .as_str()
            .is_some_and(|m| m.contains("commugraph-speechact")),
        "{}",
        unknown.json
    );
    // The tags are the speech-act codebook's: imported under another, the line is refused
    // naming `codebook`, nothing is stored; by default they go to the speech-act codebook.
    let query = format!("format=commugraph-speechact&model=tagger&session={id}&codebook=delegation");
    let refused = import(&server, &query, std::slice::from_ref(&line)).await;
    assert_eq!(refused.status, StatusCode::OK, "{}", refused.json);
    assert_eq!(outcomes(&refused), [(1, false, json!("codebook"))]);
    let listed = server
        .get(&format!("/api/graph/{id}/labels?codebook=delegation"))
        .await;
    assert_eq!(listed.json["suggestions"], json!([]));
    let query = format!("format=commugraph-speechact&model=tagger&session={id}");
    let stored = import(&server, &query, std::slice::from_ref(&line)).await;
    assert_eq!(outcomes(&stored), [(1, true, Value::Null)]);
    let listed = server
        .get(&format!("/api/graph/{id}/labels?codebook=speechact"))
        .await;
    assert_eq!(
        listed.json["suggestions"][0]["labels"][0]["id"],
        "SPEECH_ACT_DIRECTIVE"
    );
    // With no session, a line naming none is refused naming `session_id`.
    let bare = import(&server, "format=commugraph-speechact&model=tagger", &[line]).await;
    assert_eq!(outcomes(&bare), [(1, false, json!("session_id"))]);
    server.stop().await;
}
