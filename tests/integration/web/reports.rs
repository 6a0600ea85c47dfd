//! What a labeling team reported about the page, one test per report, each as the team
//! met it in the browser: who speaks in a unit, where "Next unit for me" goes, the actions
//! out of view, a first write overwriting another, the review saving twice, and the rest
//! (others' labels, the name asked in every tab, the sessions listed by id, 401s before the
//! key, label ids instead of names, the agreement page's session).

use reqwest::StatusCode;
use serde_json::{json, Value};

use super::webdriver::{Browser, CONTROL, ENTER};
use super::{browser_or_skip, with_screenshot_on_failure};
use crate::server::{Options, TestServer};

/// True once the label page shows unit `arguments[0]` with the codebook beside it.
const SHOWS_UNIT: &str = "const u = document.querySelector('#current .unit'); \
    return !!u && u.dataset.eventId === arguments[0] && !!document.querySelector('button.label');";

/// Opens unit `event` of session `id` as `who` (kept for the origin, as after signing in).
async fn open_unit(server: &TestServer, browser: &Browser, who: &str, id: &str, event: &str) {
    browser.keep_annotator(&server.url, who).await;
    let path = format!("/label/{}/{}", super::urlencode(id), super::urlencode(event));
    browser.goto(&format!("{}{path}", server.url)).await;
    browser.wait_for("the unit", SHOWS_UNIT, json!([event])).await;
}

/// The units of session `id` (sub-agents included), as the annotations body gives them.
async fn annotations(server: &TestServer, id: &str) -> Vec<Value> {
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    body.json["annotations"].as_array().unwrap().clone()
}

/// The codebook's label `i`: (id, name).
async fn label(server: &TestServer, i: usize) -> (String, String) {
    let codebook = server.get("/api/codebook").await.json;
    let l = &codebook["labels"][i];
    (
        l["id"].as_str().unwrap().to_owned(),
        l["name"].as_str().unwrap().to_owned(),
    )
}

/// Submits `who`'s set of `labels` on unit `event` through the API.
async fn submit(server: &TestServer, id: &str, event: &str, who: &str, labels: &[&str]) -> Value {
    let body = json!({"annotator": who, "status": "submitted",
        "labels": labels.iter().map(|l| json!({"id": l})).collect::<Vec<_>>()});
    let path = format!("/api/graph/{id}/labels/{}", super::urlencode(event));
    let written = crate::labels::put(server, &path, &body, None).await;
    assert!(written.status.is_success(), "{}", written.json);
    written.json
}

/// What the page shows of who speaks to whom in the current unit: [parties, kind badge].
async fn current_parties(browser: &Browser) -> Value {
    let script = "const c = document.querySelector('#current .unit'); \
                  return [c.querySelector('.parties').textContent, c.querySelector('.badge.kind').textContent];";
    browser.run(script, json!([])).await
}

/// Report: on an AutoGen session every message showed as "Assistant", though the API names
/// its sender and receiver. Every unit shows its actor, its receiver and the kind of actor:
/// an AutoGen message as the log names them, a Claude Code sub-agent's prompt and turns
/// with the sub-agent, the main assistant's with the human.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_shows_actor_and_receiver_on_autogen_and_sub_agent_units() {
    let Some(installed) = browser_or_skip("page_shows_actor_and_receiver") else {
        return;
    };
    let (server, sample, _) = crate::labels::sample_server(Options::default()).await;
    let swarm = server
        .upload_fixture("autogen", "autogen/agentchat/swarm_task_result.json")
        .await;
    let messages = annotations(&server, &swarm).await;
    let analyst = messages
        .iter()
        .find(|u| u["actor_id"] == "financial_analyst" && u["receiver"] == "planner")
        .expect("the analyst answers the planner");
    let units = annotations(&server, &sample).await;
    let prompt = units
        .iter()
        .find(|u| u["source"]["is_sidechain"] == true && u["unit_type"] == "user_turn")
        .expect("a sub-agent's prompt");
    let agent = prompt["source"]["raw_file"]
        .as_str()
        .unwrap()
        .trim_end_matches(".jsonl");
    let turn = units
        .iter()
        .find(|u| u["actor_id"] == agent && u["agent_kind"] == "sub")
        .expect("a turn of that sub-agent");
    let main = units
        .iter()
        .find(|u| u["agent_kind"] == "main")
        .expect("a turn of the main assistant");
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "actor-receiver", async {
        let event = |u: &Value| u["event_id"].as_str().unwrap().to_owned();
        open_unit(&server, &browser, "alice", &swarm, &event(analyst)).await;
        assert_eq!(
            current_parties(&browser).await,
            json!(["financial_analyst → planner", "agent"])
        );
        // Every message drawn (the one before and after too) names its sender and receiver.
        let drawn = browser
            .run(
                "return [...document.querySelectorAll('.unit')].map(u => [u.dataset.eventId, u.querySelector('.parties').textContent]);",
                json!([]),
            )
            .await;
        assert_eq!(drawn.as_array().unwrap().len(), 3, "{drawn}");
        for pair in drawn.as_array().unwrap() {
            let unit = messages.iter().find(|u| u["event_id"] == pair[0]).unwrap();
            let actor = unit["actor_id"].as_str().unwrap();
            let expected = match unit["receiver"].as_str() {
                Some(receiver) => format!("{actor} → {receiver}"),
                None => actor.to_owned(),
            };
            assert_eq!(pair[1], json!(expected), "{unit}");
        }
        let expectations = [
            (event(prompt), format!("assistant → {agent}"), "agent"),
            (event(turn), format!("{agent} → assistant"), "sub-agent"),
            (event(main), "assistant → human".to_owned(), "main agent"),
        ];
        for (unit, parties, kind) in expectations {
            open_unit(&server, &browser, "alice", &sample, &unit).await;
            assert_eq!(current_parties(&browser).await, json!([parties, kind]), "{unit}");
        }
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Report: "Next unit for me" left the session chosen, because "this session only" was off
/// by default. It is on by default: `n` takes the next unit of the session the annotator is
/// in, and unticking it takes the queue's next unit of any session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_next_unit_for_me_stays_in_the_session() {
    let Some(installed) = browser_or_skip("page_next_unit_for_me_stays_in_the_session") else {
        return;
    };
    let (server, sample, units) = crate::labels::sample_server(Options::default()).await;
    let (other, other_event) = super::upload_hostile(&server).await;
    // The session the queue gives first when no session is named; the page is opened in
    // the other one.
    let probe = server
        .post_json("/api/labels/queue/next", &json!({"annotator": "probe"}), &[])
        .await;
    let first = probe.json["reservation"].clone();
    let release =
        json!({"annotator": "probe", "session_id": first["session_id"], "event_id": first["event_id"]});
    let released = server.post_json("/api/labels/queue/release", &release, &[]).await;
    assert_eq!(released.status, StatusCode::NO_CONTENT);
    let (here, start) = if first["session_id"] == sample.as_str() {
        (other.clone(), other_event.clone())
    } else {
        (sample.clone(), units.last().unwrap().0.clone())
    };
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "queue-session", async {
        open_unit(&server, &browser, "ann", &here, &start).await;
        let ticked = browser
            .run(
                "return document.getElementById('queue-session-only').checked;",
                json!([]),
            )
            .await;
        assert_eq!(ticked, json!(true), "this session only, by default");
        let reserved = "return document.getElementById('status').textContent.startsWith('Reserved for you') \
                        && decodeURIComponent(location.pathname).split('/')[2] === arguments[0];";
        browser.press(&["n"]).await;
        browser
            .wait_for(
                "a unit of the session the annotator is in",
                reserved,
                json!([here]),
            )
            .await;
        browser
            .run(
                "document.getElementById('queue-session-only').click(); document.activeElement.blur(); \
                 document.getElementById('status').textContent = '';",
                json!([]),
            )
            .await;
        browser.press(&["n"]).await;
        let away = first["session_id"].as_str().unwrap();
        browser
            .wait_for("the queue's unit of any session", reserved, json!([away]))
            .await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Checks that every button of the label page's actions lies inside the viewport and is
/// the element found at its centre (nothing covers it); at a phone's width, that the
/// current unit's text shows. Returns what failed (empty: nothing).
const ACTIONS_IN_VIEW: &str = "const problems = []; \
    const buttons = [...document.querySelectorAll('#label-actions button')]; \
    if (buttons.length < 5) problems.push('only ' + buttons.length + ' buttons'); \
    for (const b of buttons) { \
      const r = b.getBoundingClientRect(); \
      const name = b.getAttribute('aria-label'); \
      if (r.width === 0 || r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight) \
        problems.push(name + ' outside the viewport: ' + JSON.stringify(r)); \
      const at = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2); \
      if (!at || !b.contains(at)) problems.push(name + ' covered by ' + (at ? at.outerHTML.slice(0, 80) : 'nothing')); \
    } \
    if (arguments[0]) { \
      const text = document.querySelector('#current pre.text'); \
      const r = text.getBoundingClientRect(); \
      const x = r.left + Math.min(20, r.width / 2), y = Math.max(r.top, 0) + 8; \
      const at = document.elementFromPoint(x, y); \
      if (r.top >= document.getElementById('dock').getBoundingClientRect().top) problems.push('the unit text starts below the fold: ' + r.top); \
      else if (!at || !text.contains(at)) problems.push('the unit text is covered by ' + (at ? at.outerHTML.slice(0, 80) : 'nothing')); \
    } \
    return problems;";

/// Report: at 1280x800 and 1024x768, once a label was chosen, the actions sat under the
/// side panel's own scroll, partly under the status line; at 390 pixels wide the codebook
/// covered the unit. The actions are docked above the status line: at every size, at the
/// top of the page and scrolled to its end, each button is in view and uncovered, and on a
/// phone the unit's text shows. With `SESSIONGRAPH_SHOTS_DIR` set, a screenshot of each
/// size is written there (`label-WxH.png`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_actions_stay_in_view_at_every_window_size() {
    let Some(installed) = browser_or_skip("page_actions_stay_in_view") else {
        return;
    };
    let (server, id, units) = crate::labels::sample_server(Options::default()).await;
    // The unit with the longest text: the page at its tallest.
    let (event, _, _) = units
        .iter()
        .filter(|(_, _, sidechain)| !sidechain)
        .max_by_key(|(_, text, _)| text.len())
        .unwrap();
    let shots = std::env::var_os("SESSIONGRAPH_SHOTS_DIR").map(std::path::PathBuf::from);
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "actions-in-view", async {
        open_unit(&server, &browser, "alice", &id, event).await;
        // Three labels chosen: the panel lists each with its confidence and fields.
        browser.press(&["1", "2", "3"]).await;
        let chosen = "return document.querySelectorAll('.chosen').length === 3;";
        browser.wait_for("three labels chosen", chosen, json!([])).await;
        for (width, height) in [(1024, 768), (1280, 800), (1920, 1080), (390, 844)] {
            browser.viewport(width, height).await;
            let sized = "return innerWidth === arguments[0] && innerHeight === arguments[1];";
            browser
                .wait_for("the viewport's size", sized, json!([width, height]))
                .await;
            let phone = width < 600;
            for scroll in ["0", "document.documentElement.scrollHeight"] {
                let script = format!("window.scrollTo(0, {scroll}); {ACTIONS_IN_VIEW}");
                let phone_top = phone && scroll == "0";
                let problems = browser.run(&script, json!([phone_top])).await;
                assert_eq!(problems, json!([]), "{width}x{height}, scrolled to {scroll}");
            }
            browser.run("window.scrollTo(0, 0);", json!([])).await;
            if let Some(dir) = &shots {
                browser
                    .screenshot(&dir.join(format!("label-{width}x{height}.png")))
                    .await;
            }
        }
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Report: the first write of a unit went without a precondition, and replaced a set
/// written meanwhile (in another tab). The page's first write sends `If-None-Match: *`:
/// the server refuses it (412), the page shows both versions, labels by their full names,
/// and stores the annotator's only when they choose to keep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_first_write_does_not_overwrite_a_set_written_meanwhile() {
    let Some(installed) = browser_or_skip("page_first_write_does_not_overwrite") else {
        return;
    };
    let (server, id, units) = crate::labels::sample_server(Options::default()).await;
    let (event, _) = crate::labels::texty(&units);
    let (first, first_name) = label(&server, 0).await;
    let (theirs, their_name) = label(&server, 6).await;
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "first-write", async {
        open_unit(&server, &browser, "alice", &id, &event).await;
        // Another tab of alice's writes the unit's set while this one is open.
        let elsewhere = submit(&server, &id, &event, "alice", &[&theirs]).await;
        browser.press(&["1"]).await;
        browser.chord(CONTROL, ENTER).await;
        let shown = "const c = document.querySelector('.conflict'); if (!c) return null; \
                     return [...c.querySelectorAll('.versions > div')].map(v => [...v.querySelectorAll('li')].map(li => \
                       [li.textContent, li.scrollWidth <= li.clientWidth && li.getBoundingClientRect().right <= c.getBoundingClientRect().right]));";
        let conflict = "return !!document.querySelector('.conflict') && document.activeElement.textContent.startsWith('Keep mine');";
        browser.wait_for("both versions", conflict, json!([])).await;
        assert_eq!(
            browser.run(shown, json!([])).await,
            json!([[[their_name, true]], [[first_name, true]]]),
            "the server's and mine, by name, in full"
        );
        let listed = server
            .get(&format!("/api/graph/{id}/labels?annotator=alice"))
            .await;
        assert_eq!(listed.json["labels"], json!([elsewhere]), "the other tab's set is intact");
        browser.press(&[ENTER]).await;
        let mine = super::wait_for_set(&server, &id, &event, "alice", |s| s["version"] == 2).await;
        assert_eq!(mine["labels"][0]["id"], first.as_str(), "kept mine once chosen: {mine}");
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Report: the review page saved twice (`a` wrote the set, `Enter` wrote it again: two
/// identical versions in the history), and before a unit had the focus `a` and `Enter` did
/// nothing and said nothing. Now the status line says what to do first; one adjudication
/// is one version, however often it is confirmed; the table names labels by their names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_review_saves_one_adjudication_as_one_history_version() {
    let Some(installed) = browser_or_skip("page_review_saves_one_adjudication") else {
        return;
    };
    let (server, id, units) = super::sample_server_with_a_reviewer().await;
    let event = units[10].0.clone();
    let (majority, majority_name) = label(&server, 5).await;
    let (other, _) = label(&server, 6).await;
    submit(&server, &id, &event, "alice", &[&majority]).await;
    submit(&server, &id, &event, "bob", &[&majority]).await;
    submit(&server, &id, &event, "carol", &[&other]).await;
    let history = format!(
        "/api/graph/{id}/labels/{}/history?annotator=lead",
        super::urlencode(&event)
    );
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "review-once", async {
        browser.keep_annotator(&server.url, "lead").await;
        browser.goto(&format!("{}/review/{id}", server.url)).await;
        let card = "return document.querySelectorAll('.review-unit').length === 1;";
        browser.wait_for("the unit's card", card, json!([])).await;
        let names = browser
            .run(
                "return [...document.querySelectorAll('.review-unit tbody th')].map(th => th.textContent);",
                json!([]),
            )
            .await;
        assert!(
            names.as_array().unwrap().contains(&json!(majority_name)),
            "labels by name: {names}"
        );
        browser.press(&["a"]).await;
        let told = "return document.getElementById('status').textContent.includes('press j');";
        browser.wait_for("what to do first", told, json!([])).await;
        assert_eq!(server.get(&history).await.json["total"], 0, "nothing written");

        browser.press(&["j", "a"]).await;
        let saved = "return document.querySelector('.review-unit .result').textContent.startsWith('Adjudicated: ' + arguments[0]);";
        browser.wait_for("the adjudicated set", saved, json!([majority_name])).await;
        browser.press(&["a", ENTER]).await;
        let again = "return document.getElementById('status').textContent.startsWith('Already saved as version 1');";
        browser.wait_for("nothing written again", again, json!([])).await;
        let versions = server.get(&history).await;
        assert_eq!(versions.json["total"], 1, "{}", versions.json);
        assert_eq!(versions.json["history"][0]["after"]["status"], "adjudicated");
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Report: others' labels were hidden until the annotator submitted, even on a server that
/// is not blind. They show at once (by label name) unless the server is blind, where the
/// page says they come once the annotator submits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_shows_others_labels_unless_the_server_is_blind() {
    let Some(installed) = browser_or_skip("page_shows_others_labels") else {
        return;
    };
    let browser = Browser::start(&installed).await;
    for blind in [false, true] {
        let options = Options {
            label_policy: sessiongraph::labels::LabelPolicy {
                blind,
                ..Default::default()
            },
            ..Options::default()
        };
        let (server, id, units) = crate::labels::sample_server(options).await;
        let event = units[4].0.clone();
        let (theirs, their_name) = label(&server, 4).await;
        submit(&server, &id, &event, "bob", &[&theirs]).await;
        with_screenshot_on_failure(&browser, "others", async {
            open_unit(&server, &browser, "alice", &id, &event).await;
            let others = if blind {
                "const p = document.getElementById('others-blind'); return !!p && p.textContent.includes('show once you submit yours');"
            } else {
                "const o = document.querySelector('.others li'); return !!o && o.textContent === 'bob (submitted): ' + arguments[0];"
            };
            browser
                .wait_for("others' labels as the mode wants", others, json!([their_name]))
                .await;
        })
        .await;
        server.stop().await;
    }
    browser.quit().await;
}

/// Report: the annotator's name was asked again in every tab. It is kept for the origin:
/// a second tab labels as the name given in the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_keeps_the_annotator_name_across_tabs() {
    let Some(installed) = browser_or_skip("page_keeps_the_annotator_name") else {
        return;
    };
    let server = TestServer::start(Options::default()).await;
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "name-tabs", async {
        browser.goto(&format!("{}/sessions", server.url)).await;
        let asking = "return document.activeElement && document.activeElement.id === 'annotator-name';";
        browser.wait_for("the name asked", asking, json!([])).await;
        browser.press(&["d", "a", "n", ENTER]).await;
        let signed = "return document.getElementById('whoami')?.textContent === 'Labeling as dan' \
                      && document.querySelector('h1')?.textContent === 'Sessions';";
        browser.wait_for("dan signed in", signed, json!([])).await;
        browser.new_tab().await;
        browser.goto(&format!("{}/sessions", server.url)).await;
        browser.wait_for("dan in the new tab", signed, json!([])).await;
        let asked = browser
            .run("return !!document.getElementById('annotator-name');", json!([]))
            .await;
        assert_eq!(asked, json!(false), "the name is not asked again");
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Report: the sessions page showed only ids. Each row names the session's file,
/// framework, project (uploads say so), unit count and latest change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_sessions_list_shows_file_framework_project_units_and_last_change() {
    let Some(installed) = browser_or_skip("page_sessions_list_shows_file") else {
        return;
    };
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let on_disk = server.first_session(&[]).await;
    let swarm = server
        .upload_fixture("autogen", "autogen/agentchat/swarm_task_result.json")
        .await;
    let (disk_units, swarm_units) = (units_of(&server, &on_disk).await, units_of(&server, &swarm).await);
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "sessions-list", async {
        browser.keep_annotator(&server.url, "alice").await;
        browser.goto(&format!("{}/sessions", server.url)).await;
        let rows = "return document.querySelectorAll('#sessions tbody tr').length === 2;";
        browser.wait_for("both sessions", rows, json!([])).await;
        let cells = "return [...document.querySelectorAll('#sessions tbody tr')].map(r => \
                     [r.dataset.session, r.querySelector('.file').textContent, ...[...r.cells].slice(1, 4).map(c => c.textContent), r.cells[7].textContent]);";
        let shown = browser.run(cells, json!([])).await;
        let row = |id: &str| {
            shown
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r[0] == id)
                .unwrap_or_else(|| panic!("{id}: {shown}"))
                .clone()
        };
        let (disk, upload) = (row(&on_disk), row(&swarm));
        assert_eq!(
            disk.as_array().unwrap()[1..5],
            [json!(format!("{on_disk}.jsonl")), json!("claudecode"), json!("(top folder)"), json!(disk_units.to_string())]
        );
        assert_eq!(
            upload.as_array().unwrap()[1..5],
            [json!("swarm_task_result.json"), json!("autogen"), json!("upload"), json!(swarm_units.to_string())]
        );
        for r in [&disk, &upload] {
            let change = r[5].as_str().unwrap();
            assert!(
                reads_as_a_change(change),
                "a date and time, and what changed: {change}"
            );
        }
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// The number of units the codebook codes in session `id`.
async fn units_of(server: &TestServer, id: &str) -> u64 {
    let progress = server.get(&format!("/api/labels/progress?session={id}")).await;
    progress.json["sessions"][0]["units"]["total"].as_u64().unwrap()
}

/// True when `text` reads `YYYY-MM-DD HH:MM (log)` or `(label)`.
fn reads_as_a_change(text: &str) -> bool {
    let (stamp, what) = text.split_once(" (").unwrap_or((text, ""));
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = stamp.split(['-', ' ', ':']).collect();
    parts.len() == 5
        && digits(parts[0], 4)
        && parts[1..].iter().all(|p| digits(p, 2))
        && matches!(what, "log)" | "label)")
}

/// Report: with keys configured, the page called `/api/codebook` and `/api/me` before the
/// key was given (two 401s in the console on every first load). The page asks for the key
/// first: no API request is made before it, on a deep link to a unit either, and none is
/// refused after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_asks_for_the_key_before_calling_the_api() {
    let Some(installed) = browser_or_skip("page_asks_for_the_key_first") else {
        return;
    };
    let server = TestServer::start(Options {
        api_keys: vec!["alice:k-1".into()],
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let id = server.first_session(&[("authorization", "Bearer k-1")]).await;
    let api_requests = "return performance.getEntriesByType('resource') \
                        .filter(e => new URL(e.name).pathname.startsWith('/api/')) \
                        .map(e => [new URL(e.name).pathname, e.responseStatus]);";
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "key-first", async {
        browser.goto(&format!("{}/label/{id}", server.url)).await;
        let focused = "return document.activeElement && document.activeElement.id === 'api-key';";
        browser.wait_for("the key asked", focused, json!([])).await;
        assert_eq!(
            browser.run(api_requests, json!([])).await,
            json!([]),
            "nothing asked of the API yet"
        );
        browser.press(&["k", "-", "1", ENTER]).await;
        let labeling = "return document.getElementById('whoami').textContent.includes('alice') \
                        && !!document.querySelector('#current .unit');";
        browser.wait_for("the unit, as alice", labeling, json!([])).await;
        let requests = browser.run(api_requests, json!([])).await;
        let requests = requests.as_array().unwrap();
        assert!(!requests.is_empty());
        assert!(
            requests.iter().all(|r| r[1] == 200),
            "no request refused: {requests:?}"
        );
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Report: `/agreement?session=` had no control on the page, and the agreement page showed
/// label ids. A picker lists the labeled sessions (by file) and narrows the page to the one
/// chosen; labels are shown by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_agreement_has_a_session_picker_and_label_names() {
    let Some(installed) = browser_or_skip("page_agreement_has_a_session_picker") else {
        return;
    };
    let (server, sample, units) = crate::labels::sample_server(Options::default()).await;
    let swarm = server
        .upload_fixture("autogen", "autogen/agentchat/swarm_task_result.json")
        .await;
    let (cognitive, cognitive_name) = label(&server, 2).await;
    let (digital, _) = label(&server, 3).await;
    for (id, event) in [(&sample, units[3].0.clone()), (&swarm, "M:4".to_owned())] {
        submit(&server, id, &event, "alice", &[&cognitive]).await;
        submit(&server, id, &event, "bob", &[&digital]).await;
    }
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "agreement-picker", async {
        browser.keep_annotator(&server.url, "alice").await;
        browser.goto(&format!("{}/agreement", server.url)).await;
        let picker = "const s = document.getElementById('agreement-session'); \
                      return !!s && [...s.options].map(o => o.value).sort().join(',') === arguments[0];";
        let mut values = [String::new(), sample.clone(), swarm.clone()];
        values.sort();
        browser
            .wait_for("the picker's sessions", picker, json!([values.join(",")]))
            .await;
        let names = browser
            .run(
                "return [...document.querySelectorAll('table.grid')[1].querySelectorAll('tbody tr')].map(r => r.cells[0].textContent);",
                json!([]),
            )
            .await;
        assert!(
            names.as_array().unwrap().contains(&json!(cognitive_name)),
            "labels by name: {names}"
        );
        browser
            .run(
                "const s = document.getElementById('agreement-session'); s.value = arguments[0]; \
                 s.dispatchEvent(new Event('change'));",
                json!([swarm]),
            )
            .await;
        let narrowed = "return new URLSearchParams(location.search).get('session') === arguments[0] \
                        && document.querySelector('h1').textContent === 'Agreement in ' + arguments[0] \
                        && document.getElementById('agreement-session').value === arguments[0];";
        browser
            .wait_for("the page narrowed to the session", narrowed, json!([swarm]))
            .await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}
