//! Whole scenarios of the labeling page, each as a person meets it: a new annotator's first
//! three units by keyboard, and a reviewer adjudicating by keyboard.

use serde_json::{json, Value};

use super::webdriver::{Browser, CONTROL, ENTER, SPACE, TAB};
use super::{browser_or_skip, with_screenshot_on_failure};
use crate::server::{Options, TestServer};

/// True once the label page shows a unit whose URL is not `arguments[0]`.
const MOVED_ON: &str = "return !decodeURIComponent(location.pathname).endsWith(arguments[0]) \
                        && !!document.querySelector('#current .unit') && !!document.querySelector('button.label');";

/// True when label `arguments[0]` is chosen with confidence `arguments[1]` (as shown, 2 places).
const CHOSEN_AT: &str = "const b = document.querySelector(`button.label[data-id=\"${arguments[0]}\"]`); \
    const shown = document.querySelector(`.chosen[data-id=\"${arguments[0]}\"] output`); \
    return !!b && b.getAttribute('aria-pressed') === 'true' && !!shown && shown.textContent === arguments[1];";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_new_annotator_labels_three_units_by_keyboard_and_the_api_holds_exactly_those_labels() {
    let Some(installed) = browser_or_skip("web_new_annotator_labels_three_units") else {
        return;
    };
    let (server, id, _) = crate::labels::sample_server(Options::default()).await;
    let codebook = server.get("/api/codebook").await.json;
    let label = |i: usize| codebook["labels"][i]["id"].as_str().unwrap().to_owned();
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "walkthrough", async {
        sign_in_and_pick_the_session(&server, &browser, &id).await;
        let first = current_event(&browser).await;
        browser.press(&["1", "-", "2", "-", "-", "-"]).await;
        browser
            .wait_for("label 1 at 0.90", CHOSEN_AT, json!([label(0), "0.90"]))
            .await;
        browser
            .wait_for("label 2 at 0.70", CHOSEN_AT, json!([label(1), "0.70"]))
            .await;
        browser.chord(CONTROL, ENTER).await;
        browser
            .wait_for("the second unit", MOVED_ON, json!([first]))
            .await;

        let second = current_event(&browser).await;
        browser.press(&["3", "-", "-"]).await;
        browser
            .wait_for("label 3 at 0.80", CHOSEN_AT, json!([label(2), "0.80"]))
            .await;
        let here = browser.run("return location.href;", json!([])).await;
        browser.goto(here.as_str().unwrap()).await;
        browser
            .wait_for("the draft after a reload", CHOSEN_AT, json!([label(2), "0.80"]))
            .await;
        browser.chord(CONTROL, ENTER).await;
        browser
            .wait_for("the third unit", MOVED_ON, json!([second]))
            .await;

        let (third, quote) = quote_by_mouse_on_a_unit_with_text(&browser).await;
        browser.chord(CONTROL, ENTER).await;
        browser
            .wait_for("the unit after the third", MOVED_ON, json!([third]))
            .await;

        let mut sets = newbies_sets(&server, &id).await;
        sets.sort_by_key(|(event, _)| [&first, &second, &third].iter().position(|e| *e == event));
        let expected = vec![
            (first.clone(), vec![(label(0), 0.9, None), (label(1), 0.7, None)]),
            (second.clone(), vec![(label(2), 0.8, None)]),
            (third.clone(), vec![(label(3), 1.0, Some(quote))]),
        ];
        assert_eq!(sets, expected, "exactly the labels chosen, nothing else");
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// Opens `/` in a new tab: the page asks for a name (typed, Enter), shows the sessions, and
/// Tab reaches the sample session's "Label" link, which Enter opens on its first unit.
async fn sign_in_and_pick_the_session(server: &TestServer, browser: &Browser, id: &str) {
    browser.goto(&format!("{}/", server.url)).await;
    let asking = "return document.activeElement && document.activeElement.id === 'annotator-name';";
    browser.wait_for("the name asked", asking, json!([])).await;
    browser.press(&["n", "e", "w", "b", "i", "e", ENTER]).await;
    let sessions =
        "return !!document.querySelector('h1') && document.querySelector('h1').textContent === 'Sessions' \
                    && document.getElementById('whoami').textContent.includes('newbie');";
    browser.wait_for("the sessions page", sessions, json!([])).await;
    let link = format!("/label/{id}");
    let on_link = "return document.activeElement.getAttribute('href') === arguments[0];";
    for _ in 0..80 {
        if browser.run(on_link, json!([link])).await == Value::Bool(true) {
            break;
        }
        browser.press(&[TAB]).await;
    }
    browser
        .wait_for("the session's Label link focused", on_link, json!([link]))
        .await;
    browser.press(&[ENTER]).await;
    let opened = "return decodeURIComponent(location.pathname).startsWith(arguments[0] + '/') \
                  && !!document.querySelector('#current .unit') && !!document.querySelector('button.label');";
    browser
        .wait_for("the session's first unit", opened, json!([link]))
        .await;
}

/// The event id of the unit the label page shows.
pub async fn current_event(browser: &Browser) -> String {
    let event = browser
        .run(
            "return document.querySelector('#current .unit').dataset.eventId;",
            json!([]),
        )
        .await;
    event.as_str().unwrap().to_owned()
}

/// Moves on with `j` to a unit whose text has a line of 25 characters, chooses label 4,
/// selects 20 characters of that line by dragging the mouse and presses `e`: the unit's
/// event id and the quote, once highlighted.
async fn quote_by_mouse_on_a_unit_with_text(browser: &Browser) -> (String, String) {
    let line = "const pre = document.querySelector('#current pre.text'); \
                return !!pre && /\\S[^\\n]{24}/.test(pre.firstChild.textContent);";
    for _ in 0..30 {
        if browser.run(line, json!([])).await == Value::Bool(true) {
            break;
        }
        let here = current_event(browser).await;
        browser.press(&["j"]).await;
        browser.wait_for("the next unit", MOVED_ON, json!([here])).await;
    }
    browser
        .wait_for("a unit with a line of text", line, json!([]))
        .await;
    browser.press(&["4"]).await;
    // The 20 characters' own rectangle is scrolled to the middle of the window (a long unit
    // may be taller than it), and must then lie inside the window and the unit's box.
    let span = "const pre = document.querySelector('#current pre.text'); \
                const node = pre.firstChild; const m = /\\S[^\\n]{24}/.exec(node.textContent); \
                const range = document.createRange(); range.setStart(node, m.index); range.setEnd(node, m.index + 20); \
                window.scrollBy(0, range.getBoundingClientRect().top - innerHeight / 2); \
                const at = (i) => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1); return r.getBoundingClientRect(); }; \
                const a = at(m.index), b = at(m.index + 19), box = pre.getBoundingClientRect(); \
                const inside = (r) => r.top >= Math.max(0, box.top) && r.bottom <= Math.min(innerHeight, box.bottom) && r.left >= box.left && r.right <= box.right; \
                if (!inside(a) || !inside(b)) return null; \
                return [Math.ceil(a.left + 1), Math.round((a.top + a.bottom) / 2), Math.floor(b.right - 1), Math.round((b.top + b.bottom) / 2)];";
    let xy = browser.run(span, json!([])).await;
    let xy: Vec<i64> = xy
        .as_array()
        .unwrap_or_else(|| panic!("the characters to select are not in view: {xy}"))
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    browser.drag((xy[0], xy[1]), (xy[2], xy[3])).await;
    let selected = browser
        .run("return getSelection().toString().trim();", json!([]))
        .await;
    let quote = selected.as_str().unwrap().to_owned();
    assert!(quote.chars().count() >= 10, "the drag selected {quote:?}");
    super::quote_selection(browser, &quote).await;
    (current_event(browser).await, quote)
}

/// Every set of `newbie` in the session: event id and (label, confidence, quote) each.
async fn newbies_sets(server: &TestServer, id: &str) -> Vec<(String, Vec<(String, f64, Option<String>)>)> {
    let listed = server
        .get(&format!("/api/graph/{id}/labels?annotator=newbie"))
        .await;
    listed.json["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|set| {
            assert_eq!(set["status"], "submitted", "{set}");
            assert!(
                set["lead_time"].as_f64().is_some(),
                "the time spent is sent: {set}"
            );
            let labels = set["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| {
                    (
                        l["id"].as_str().unwrap().to_owned(),
                        l["confidence"].as_f64().unwrap(),
                        l["evidence"]["quote"].as_str().map(str::to_owned),
                    )
                })
                .collect();
            (set["event_id"].as_str().unwrap().to_owned(), labels)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_reviewer_adjudicates_by_keyboard_only() {
    let Some(installed) = browser_or_skip("web_reviewer_adjudicates_by_keyboard_only") else {
        return;
    };
    let (server, id, units) = super::sample_server_with_a_reviewer().await;
    let codebook = server.get("/api/codebook").await.json;
    let label = |i: usize| codebook["labels"][i]["id"].as_str().unwrap().to_owned();
    let name = |i: usize| codebook["labels"][i]["name"].as_str().unwrap().to_owned();
    let [majority, split, agreed] = [&units[10].0, &units[20].0, &units[30].0];
    let sets = [
        (majority, [("alice", 5), ("bob", 5), ("carol", 6)].as_slice()),
        (split, &[("alice", 5), ("bob", 6)]),
        (agreed, &[("alice", 7), ("bob", 7)]),
    ];
    for (event, by) in sets {
        for (who, i) in by {
            let set = json!({"annotator": who, "status": "submitted", "labels": [{"id": label(*i)}]});
            let path = format!("/api/graph/{id}/labels/{event}");
            assert!(crate::labels::put(&server, &path, &set, None)
                .await
                .status
                .is_success());
        }
    }
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "review-keyboard", async {
        browser.keep_annotator(&server.url, "lead").await;
        browser
            .goto(&format!("{}/review/{id}?annotator=lead", server.url))
            .await;
        let cards = "return document.querySelectorAll('.review-unit').length === arguments[0];";
        browser.wait_for("three reviewed units", cards, json!([3])).await;
        tab_to(
            &browser,
            "the disagreement filter",
            "return document.activeElement.id === 'only-disagreements';",
        )
        .await;
        browser.press(&[SPACE]).await;
        browser
            .wait_for("the agreed unit filtered out", cards, json!([2]))
            .await;

        let on_card = "return document.activeElement.getAttribute('aria-label') === 'Unit ' + arguments[0];";
        browser.press(&["j"]).await;
        browser
            .wait_for("the first card focused", on_card, json!([majority]))
            .await;
        browser.press(&["a"]).await;
        saved(&browser, majority, &name(5)).await;

        browser.press(&["j"]).await;
        browser
            .wait_for("the second card focused", on_card, json!([split]))
            .await;
        let on_box = format!(
            "return document.activeElement.getAttribute('aria-label') === 'Adjudicated: {}';",
            label(6)
        );
        tab_to(&browser, "the second label's box", &on_box).await;
        browser.press(&[SPACE]).await;
        browser.press(&["k", "j"]).await;
        browser
            .wait_for("back on the second card", on_card, json!([split]))
            .await;
        browser.press(&[ENTER]).await;
        saved(&browser, split, &name(6)).await;
    })
    .await;
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    let shown = |event: &str| {
        let unit = super::annotation_unit(&body.json, event);
        let ids: Vec<String> = unit["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_owned())
            .collect();
        ids
    };
    assert_eq!(shown(majority), [label(5)], "the majority approved with a");
    assert_eq!(
        shown(split),
        [label(6)],
        "the box ticked with Space, saved with Enter"
    );
    assert_eq!(shown(agreed), [label(7)], "no adjudication: the majority");
    browser.quit().await;
    server.stop().await;
}

/// Presses Tab until `script` holds (at most 60 times).
async fn tab_to(browser: &Browser, what: &str, script: &str) {
    for _ in 0..60 {
        if browser.run(script, json!([])).await == Value::Bool(true) {
            return;
        }
        browser.press(&[TAB]).await;
    }
    browser.wait_for(what, script, json!([])).await;
}

/// Waits until the card of `event` says its adjudicated set, holding exactly the label
/// named `label`, is saved.
async fn saved(browser: &Browser, event: &str, label: &str) {
    let result = "const card = [...document.querySelectorAll('.review-unit')].find(c => c.getAttribute('aria-label') === 'Unit ' + arguments[0]); \
                  return !!card && card.querySelector('.result').textContent.startsWith('Adjudicated: ' + arguments[1] + ' (');";
    browser
        .wait_for("the adjudicated set saved", result, json!([event, label]))
        .await;
}
