//! `GET /api/search` on a real server: what an upload makes searchable, the filters checked
//! against the annotations body, paging, deletions, label filters on both label
//! databases, blind mode, a restart over a current, stale or missing index, and a session
//! on disk that changes.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sessiongraph::search::SearchConfig;

use crate::helpers::fixture;
use crate::labels::{put, TestDb};
use crate::server::{Options, Reply, TestServer};

/// GET `/api/search?{query}` once the index has caught up with the store (`index.pending`
/// false); panics if it never does.
pub(crate) async fn search_indexed(server: &TestServer, query: &str) -> Reply {
    for _ in 0..3000 {
        let reply = server.get(&format!("/api/search?{query}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{query}: {}", reply.json);
        if reply.json["index"]["pending"] == false {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the index never caught up");
}

/// The total of a search, once indexed.
async fn total(server: &TestServer, query: &str) -> u64 {
    search_indexed(server, query).await.json["total"]
        .as_u64()
        .unwrap_or_else(|| panic!("{query}: no total"))
}

/// `(session_id, event_id)` of each result.
pub(crate) fn keys(reply: &Reply) -> Vec<(String, String)> {
    reply.json["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["session_id"].as_str().unwrap().to_owned(),
                r["event_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The units of session `id` as the annotations body lists them (sub-agents included).
async fn annotation_units(server: &TestServer, id: &str) -> Vec<Value> {
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    body.json["annotations"].as_array().expect("units").clone()
}

fn calls(unit: &Value) -> Vec<Value> {
    unit["tool_summary"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_searchable_with_snippets_and_every_filter_agrees_with_its_units() {
    let server = TestServer::start(Options::default()).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let units = annotation_units(&server, &id).await;

    let found = search_indexed(&server, "q=migration%20plan&limit=5").await;
    assert!(found.json["total"].as_u64().unwrap() > 0, "{}", found.json);
    let first = &found.json["results"][0];
    assert_eq!(first["session_id"], id.as_str());
    assert_eq!(first["framework"], "claudecode");
    let html = first["snippet"]["html"].as_str().unwrap();
    assert!(
        html.contains("<b>migration</b>") || html.contains("<b>plan</b>"),
        "{html}"
    );
    assert!(first["score"].as_f64().unwrap() > 0.0);
    assert!(found.json["results"].as_array().unwrap().len() <= 5);
    assert_eq!(found.json["query"], "migration plan");

    // Without text: every unit, in session order, filtered.
    assert_eq!(total(&server, "").await, units.len() as u64);
    let count = |f: &dyn Fn(&Value) -> bool| units.iter().filter(|u| f(u)).count() as u64;
    for (query, expected) in [
        ("unit_type=user_turn", count(&|u| u["unit_type"] == "user_turn")),
        (
            "unit_type=user_turn&unit_type=system_turn",
            count(&|u| u["unit_type"] != "assistant_turn"),
        ),
        ("actor=human", count(&|u| u["actor_id"] == "human")),
        (
            "tool=Bash",
            count(&|u| calls(u).iter().any(|c| c["tool_name"] == "Bash")),
        ),
        (
            "failed=true",
            count(&|u| calls(u).iter().any(|c| c["is_error"] == true)),
        ),
        (
            "delegation=true",
            count(&|u| calls(u).iter().any(|c| c["tool_name"] == "Task")),
        ),
        (
            "delegation=false&failed=false",
            count(&|u| {
                calls(u)
                    .iter()
                    .all(|c| c["tool_name"] != "Task" && c["is_error"] != true)
            }),
        ),
        (
            "from=2025-12-10T00:00:00Z",
            count(&|u| {
                u["timestamp"]
                    .as_str()
                    .is_some_and(|t| t >= "2025-12-10T00:00:00")
            }),
        ),
        ("framework=pi", 0),
        (&format!("session={id}&framework=ClaudeCode"), units.len() as u64),
        ("session=nope", 0),
    ] {
        assert_eq!(total(&server, query).await, expected, "{query}");
    }
    assert!(
        count(&|u| calls(u).iter().any(|c| c["is_error"] == true)) > 0,
        "the sample has failed calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_split_one_ranking_and_a_deleted_upload_leaves_it() {
    let server = TestServer::start(Options::default()).await;
    let sample = server.upload_fixture("claudecode", "commugraph-sample").await;
    let other = server
        .upload_fixture("claudecode", "synthetic/tool_failures")
        .await;
    let whole = search_indexed(&server, "q=the&limit=100").await;
    let all = keys(&whole);
    assert!(all.len() > 12, "{}", all.len());
    let mut paged = Vec::new();
    for offset in (0..all.len()).step_by(7) {
        let page = search_indexed(&server, &format!("q=the&limit=7&offset={offset}")).await;
        assert_eq!(page.json["total"], whole.json["total"]);
        assert_eq!(page.json["offset"], offset);
        paged.extend(keys(&page));
    }
    assert_eq!(paged, all, "pages in a row give the ranking of one page");
    assert_eq!(
        keys(&search_indexed(&server, "q=the&limit=100").await),
        all,
        "the same order again"
    );
    assert!(all.iter().any(|(s, _)| *s == other));

    let deleted = server.delete(&format!("/api/session/{other}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    let after = search_indexed(&server, "q=the&limit=100").await;
    assert!(keys(&after).iter().all(|(s, _)| *s == sample), "{}", after.json);
    assert_eq!(total(&server, &format!("session={other}")).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_400_naming_the_field() {
    let server = TestServer::start(Options::default()).await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("offset=-1", "offset"),
        ("offset=10001", "offset"),
        ("framework=cobol", "framework"),
        ("unit_type=tool_turn", "unit_type"),
        ("failed=maybe", "failed"),
        ("delegation=2", "delegation"),
        ("labeled=maybe", "labeled"),
        ("from=yesterday", "from"),
        ("to=2026-13-01T00:00:00Z", "to"),
        ("label=NOT_A_LABEL", "label"),
        ("annotator=has%20space", "annotator"),
        ("q=tests%20AND%20(", "q"),
        ("q=text:", "q"),
    ] {
        let reply = server.get(&format!("/api/search?{query}")).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "The API did not fail with 400 for {query}: {}",
            reply.json
        );
        assert_eq!(reply.json["error"], "Bad Request", "{query}");
        assert_eq!(reply.json["details"]["field"], field, "{query}: {}", reply.json);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_filters_name_the_units_labeled_by_whom_and_with_what() {
    TestDb::each(async |db: &TestDb| {
        let server = TestServer::start(db.options()).await;
        let id = server.upload_fixture("claudecode", "commugraph-sample").await;
        let all = annotation_units(&server, &id).await;
        let every = all.len() as u64;
        // The units the default codebook codes: system notices take no labels.
        let units: Vec<&Value> = all.iter().filter(|u| u["unit_type"] != "system_turn").collect();
        let event = |i: usize| units[i]["event_id"].as_str().unwrap().to_owned();
        let set = |who: &str, status: &str, label: &str| {
            json!({"annotator": who, "status": status, "labels": [{"id": label}]})
        };
        for (unit, who, status, label) in [
            (1, "ann.a", "submitted", "EXEC_COGNITIVE"),
            (1, "ann.b", "submitted", "TASK_DECOMPOSITION"),
            (2, "ann.a", "submitted", "TASK_DECOMPOSITION"),
            (3, "ann.a", "draft", "EXEC_COGNITIVE"),
        ] {
            let path = format!("/api/graph/{id}/labels/{}", event(unit));
            let written = put(&server, &path, &set(who, status, label), None).await;
            assert!(written.status.is_success(), "{}", written.json);
        }
        let listed = |reply: Reply| {
            let mut events: Vec<String> = keys(&reply).into_iter().map(|(_, e)| e).collect();
            events.sort();
            events
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        assert_eq!(
            listed(search_indexed(&server, "labeled=true").await),
            sorted(vec![event(1), event(2)]),
            "a draft is no label"
        );
        assert_eq!(total(&server, "labeled=false").await, every - 2);
        assert_eq!(
            listed(search_indexed(&server, "annotator=ann.b").await),
            [event(1)]
        );
        assert_eq!(
            listed(search_indexed(&server, "label=TASK_DECOMPOSITION").await),
            sorted(vec![event(1), event(2)])
        );
        assert_eq!(
            listed(search_indexed(&server, "label=EXEC_COGNITIVE&annotator=ann.a").await),
            [event(1)]
        );
        assert_eq!(
            total(&server, "label=EXEC_COGNITIVE&labeled=false").await,
            every - 1
        );
        assert_eq!(
            total(&server, "codebook=delegation&labeled=true").await,
            2,
            "the default codebook named"
        );
        assert_eq!(
            total(&server, "codebook=speechact&labeled=true").await,
            0,
            "no set under the other codebook"
        );
        let unknown = server.get("/api/search?codebook=nope").await;
        assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
        assert_eq!(unknown.json["details"]["field"], "codebook");
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_blind_mode_a_label_filter_names_only_the_askers_own_sets() {
    let server = TestServer::start(Options {
        api_keys: vec!["alice:k-alice".into(), "lead:k-lead".into()],
        label_policy: sessiongraph::labels::LabelPolicy {
            blind: true,
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    for (query, key, status) in [
        ("annotator=alice", "k-alice", StatusCode::OK),
        ("labeled=true&annotator=alice", "k-alice", StatusCode::OK),
        ("labeled=true", "k-alice", StatusCode::FORBIDDEN),
        ("annotator=bob", "k-alice", StatusCode::FORBIDDEN),
        ("label=EXEC_COGNITIVE", "k-alice", StatusCode::FORBIDDEN),
        ("annotator=bob", "k-lead", StatusCode::OK),
        ("labeled=true", "k-lead", StatusCode::OK),
        ("q=anything", "k-alice", StatusCode::OK),
    ] {
        let auth = format!("Bearer {key}");
        let reply = server
            .get_with(&format!("/api/search?{query}"), &[("authorization", &auth)])
            .await;
        assert_eq!(reply.status, status, "{query} as {key}: {}", reply.json);
    }
    let unauthorized = server.get("/api/search?q=x").await;
    assert_eq!(unauthorized.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_a_current_index_and_rebuilds_a_missing_or_stale_one() {
    let data = tempfile::tempdir().unwrap();
    let options = Options {
        data_dir: Some(data.path().to_owned()),
        ..Options::default()
    };
    let server = TestServer::start(options.clone()).await;
    let id = server.upload_fixture("claudecode", "commugraph-sample").await;
    let expected = search_indexed(&server, "q=migration&limit=100").await;
    assert!(expected.json["total"].as_u64().unwrap() > 0);
    server.stop().await;

    let index_dir = data.path().join("search-index");
    for damage in ["none", "missing", "stale"] {
        match damage {
            "missing" => std::fs::remove_dir_all(&index_dir).unwrap(),
            "stale" => std::fs::write(index_dir.join("sessiongraph-search-version"), "0").unwrap(),
            _ => {}
        }
        let server = TestServer::start(options.clone()).await;
        let again = search_indexed(&server, "q=migration&limit=100").await;
        assert_eq!(keys(&again), keys(&expected), "after a restart, index {damage}");
        assert_eq!(again.json["results"], expected.json["results"], "{damage}");
        if damage == "none" {
            assert_eq!(server.state.store.parses(), 0, "a current index parses nothing");
        }
        assert!(keys(&again).iter().all(|(s, _)| *s == id));
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_on_disk_that_changes_is_indexed_again() {
    let sessions = tempfile::tempdir().unwrap();
    let project = sessions.path().join("-home-me-project");
    std::fs::create_dir_all(&project).unwrap();
    let main = project.join("7f3c1a2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b.jsonl");
    std::fs::copy(
        fixture("synthetic/tool_failures/7f3c1a2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b.jsonl"),
        &main,
    )
    .unwrap();
    let server = TestServer::start(Options {
        sessions_dirs: vec![sessions.path().to_owned()],
        search: SearchConfig {
            recheck: Some(Duration::from_millis(50)),
            ..SearchConfig::default()
        },
        ..Options::default()
    })
    .await;
    assert_eq!(total(&server, "q=tests").await, 2, "the prompt and the answer");
    assert_eq!(total(&server, "q=zebrafish").await, 0);

    // Claude Code appends a prompt; no request reads the session: the periodic check
    // finds the file changed.
    let mut log = std::fs::read_to_string(&main).unwrap();
    log.push_str(
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"Now feed the zebrafish"},"uuid":"u-zebra","timestamp":"2026-01-05T11:00:00.000Z","sessionId":"7f3c1a2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b"}"#,
    );
    log.push('\n');
    std::fs::write(&main, log).unwrap();
    let mut found = 0;
    for _ in 0..3000 {
        found = total(&server, "q=zebrafish").await;
        if found > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(found, 1, "the new prompt is found");
    let hit = search_indexed(&server, "q=zebrafish").await;
    assert_eq!(hit.json["results"][0]["event_id"], "U:u-zebra");
    assert_eq!(hit.json["results"][0]["unit_type"], "user_turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_search_off_there_is_no_route_and_no_index() {
    let server = TestServer::start(Options {
        search: SearchConfig {
            enabled: false,
            ..SearchConfig::default()
        },
        ..Options::default()
    })
    .await;
    server.upload_fixture("claudecode", "commugraph-sample").await;
    let reply = server.get("/api/search?q=migration").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(!server.data_dir.join("search-index").exists());
}
