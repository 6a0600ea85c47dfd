//! The labeling page (issue 12): its embedded files served without a key, with their
//! content types, CSP and ETags, at the page's URLs; and, in a real headless Chromium over
//! WebDriver, labeling a unit by keyboard.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::records::Record;
use crate::server::{graph_id, Options, TestServer};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn content_type(reply: &crate::server::Reply) -> &str {
    reply.headers["content-type"].to_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_page_and_assets_are_served_without_a_key_with_csp_and_etags() {
    let server = TestServer::start(Options {
        api_keys: vec!["alice:secret-key".into()],
        ..Options::default()
    })
    .await;
    let pages = [
        "/",
        "/sessions",
        "/label/0123456789abcdef/A:some-event",
        "/label/0123456789abcdef",
        "/review/0123456789abcdef",
        "/agreement",
    ];
    let shell = server.get("/").await;
    for path in pages {
        let page = server.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert_eq!(content_type(&page), "text/html; charset=utf-8", "{path}");
        assert_eq!(page.headers["content-security-policy"], CSP, "{path}");
        assert_eq!(page.bytes, shell.bytes, "{path}: every page URL is the shell");
    }
    let html = String::from_utf8(shell.bytes.clone()).unwrap();
    assert!(html.contains("/assets/main.js") && !html.contains("<script>"));
    assert!(
        html.contains(r#"<meta name="sg-api-key" content="required">"#),
        "the shell tells the page that the API wants a key"
    );

    for name in sessiongraph::web::asset_names() {
        let path = format!("/assets/{name}");
        let asset = server.get(&path).await;
        assert_eq!(asset.status, StatusCode::OK, "{path}");
        let expected = match name.rsplit('.').next().unwrap() {
            "html" => "text/html; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "js" => "text/javascript; charset=utf-8",
            other => panic!("unexpected asset type {other}"),
        };
        assert_eq!(content_type(&asset), expected, "{path}");
        assert_eq!(asset.headers["content-security-policy"], CSP, "{path}");
        assert_eq!(asset.headers["x-content-type-options"], "nosniff");
        let etag = asset.headers["etag"].to_str().unwrap().to_owned();
        let again = server.get_if_none_match(&path, &etag).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(again.headers["etag"].to_str().unwrap(), etag);
        assert!(again.bytes.is_empty());
        if name.ends_with(".js") {
            every_import_is_an_asset(name, &String::from_utf8(asset.bytes).unwrap());
        }
    }

    let missing = server.get("/assets/nope.js").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json["error"], "Not Found", "a JSON 404");

    let api = server.get("/api/codebook").await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED, "the API still wants a key");
    assert_eq!(
        server.get("/api/no-such-route").await.status,
        StatusCode::UNAUTHORIZED
    );
    let with_key = server
        .get_with("/api/codebook", &[("authorization", "Bearer secret-key")])
        .await;
    assert_eq!(with_key.status, StatusCode::OK);
    assert_eq!(
        with_key.headers["content-security-policy"], "default-src 'none'; frame-ancestors 'none'",
        "API bodies keep their own CSP"
    );
    let me = server.get_with("/api/me", &[("x-api-key", "secret-key")]).await;
    assert_eq!(me.status, StatusCode::OK);
    assert_eq!(
        me.json,
        json!({"annotator": "alice", "reviewer": false, "read_only": false, "blind": false, "queue_overlap": 2}),
        "the named key's annotator, for the page's sign-in"
    );
    assert_eq!(server.get("/api/me").await.status, StatusCode::UNAUTHORIZED);
    server.stop().await;
}

/// Every `from './x.js'` of a module names an embedded asset, and no module builds markup
/// from strings.
fn every_import_is_an_asset(name: &str, source: &str) {
    let names: Vec<&str> = sessiongraph::web::asset_names().collect();
    for part in source.split("from './").skip(1) {
        let target = part.split('\'').next().unwrap();
        assert!(
            names.contains(&target),
            "{name} imports {target}, which is not embedded"
        );
    }
    for forbidden in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!source.contains(forbidden), "{name} uses {forbidden}");
    }
}

/// The embedded files are exactly the files of `web/` (its README aside), and the HTML
/// shell names each of them: the one list of assets, in `src/web`, checked against both.
#[test]
fn the_embedded_files_are_the_web_folder_and_the_shell_names_each() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
    let mut on_disk: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "README.md")
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = sessiongraph::web::asset_names().map(str::to_owned).collect();
    embedded.sort();
    assert_eq!(
        embedded, on_disk,
        "src/web's list of assets against the files of web/"
    );

    let html = std::fs::read_to_string(root.join("index.html")).unwrap();
    let named: Vec<&str> = html
        .split("\"/assets/")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    for name in &named {
        assert!(
            embedded.iter().any(|e| e == name),
            "index.html names {name}, which is not embedded"
        );
    }
    for name in embedded.iter().filter(|n| *n != "index.html") {
        assert!(
            named.contains(&name.as_str()),
            "index.html does not load or preload {name}"
        );
    }
}

mod coding_agents;
mod reports;
mod walkthrough;
mod webdriver;

/// What a hostile unit says: markup that would run if it were ever inserted as HTML.
const HOSTILE: &str =
    "Look: <script>window.__pwned = 1</script> and <img src=x onerror=\"window.__pwned = 2\"> end";

/// Uploads a two-unit session whose prompt is [`HOSTILE`]; its id and the prompt's unit.
async fn upload_hostile(server: &TestServer) -> (String, String) {
    let session = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
    let prompt = "00000000-0000-4000-8000-0000000000a1";
    let user = Record::prompt(prompt, HOSTILE)
        .session(session)
        .at("2025-12-01T10:00:00.000Z");
    let answer = json!({"type": "text", "text": "I will not run that."});
    let assistant = Record::assistant("00000000-0000-4000-8000-0000000000a2", "msg_01", vec![answer])
        .parent(prompt)
        .session(session)
        .at("2025-12-01T10:00:01.000Z");
    let body = format!("{}\n{}\n", user.line(), assistant.line()).into_bytes();
    let up = server
        .upload_raw(&format!("framework=claudecode&filename={session}.jsonl"), body)
        .await;
    let id = graph_id(&up);
    let units = crate::labels::units(server, &id).await;
    let prompt = units.iter().find(|(_, t, _)| t.contains("<script>")).unwrap();
    (id, prompt.0.clone())
}

/// The browser, or `None` (and a loud skip) when it is not installed outside CI.
fn browser_or_skip(test: &str) -> Option<webdriver::Installed> {
    let installed = webdriver::installed();
    if installed.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium and chromedriver are not installed: CI must have them (.ci/run installs them)"
        );
        // Written to the process's stderr, not through eprintln!, which the test harness
        // captures and shows only for failures: a skip must be seen.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: chromium and chromedriver are not installed \
             (apt-get install chromium chromium-driver); this test fails when CI=true"
        );
    }
    installed
}

/// Where the browser tests put their screenshots.
fn output_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web")
}

/// Runs `scenario` in `browser`; on a panic, a screenshot `NAME-failure.png` first.
async fn with_screenshot_on_failure(
    browser: &webdriver::Browser,
    name: &str,
    scenario: impl std::future::Future<Output = ()>,
) {
    let result = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(scenario)).await;
    if let Err(panic) = result {
        let path = output_dir().join(format!("{name}-failure.png"));
        browser.screenshot(&path).await;
        eprintln!("screenshot of the failure: {}", path.display());
        std::panic::resume_unwind(panic);
    }
}

/// A server holding the sample session, where `lead` is a reviewer: its id and units.
async fn sample_server_with_a_reviewer() -> (TestServer, String, Vec<(String, String, bool)>) {
    crate::labels::sample_server(Options {
        label_policy: sessiongraph::labels::LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..Options::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_label_page_in_chromium_labels_by_keyboard_and_shows_markup_as_text() {
    let Some(installed) = browser_or_skip("web_label_page_in_chromium") else {
        return;
    };
    let (server, id, units) = sample_server_with_a_reviewer().await;
    let hostile = upload_hostile(&server).await;
    let browser = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "label", async {
        label_by_keyboard(&server, &browser, &id, &units[0].0).await;
        help_then_skip(&server, &browser, &id).await;
        refused_quote_in_place(&server, &browser, &id).await;
        quote_then_conflict(&server, &browser, &id, &units).await;
        markup_is_text(&server, &browser, &hostile).await;
        review_adjudicates(&server, &browser, &id, &units).await;
        overview_pages(&server, &browser).await;
        browser.no_csp_violations().await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_page_in_chromium_says_when_the_api_key_is_wrong() {
    let Some(installed) = browser_or_skip("web_page_in_chromium_says_when_the_api_key_is_wrong") else {
        return;
    };
    let server = TestServer::start(Options {
        api_keys: vec!["alice:right-key".into()],
        ..Options::default()
    })
    .await;
    let browser = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "key", async {
        browser.goto(&format!("{}/sessions", server.url)).await;
        let focused = "return document.activeElement && document.activeElement.id === 'api-key';";
        browser.wait_for("the key field", focused, json!([])).await;
        browser.press(&["n", "o", "p", "e", webdriver::ENTER]).await;
        browser
            .wait_for(
                "the refusal",
                "const p = document.getElementById('key-problem'); return !!p && p.textContent.includes('refused');",
                json!([]),
            )
            .await;
        browser.wait_for("the key field again", focused, json!([])).await;
        let keys: Vec<String> = "right-key".chars().map(String::from).collect();
        let mut keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        keys.push(webdriver::ENTER);
        browser.press(&keys).await;
        browser
            .wait_for(
                "the sessions page as alice",
                "return document.getElementById('whoami').textContent.includes('alice') && !!document.querySelector('h1') && document.querySelector('h1').textContent === 'Sessions';",
                json!([]),
            )
            .await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// alice opens the first unit, presses 1 then Ctrl+Enter: her submitted set holds the
/// codebook's first label and the page moves on; on the next unit 2 is kept over a reload.
async fn label_by_keyboard(server: &TestServer, browser: &webdriver::Browser, id: &str, event: &str) {
    let first_label = server.get("/api/codebook").await.json["labels"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second_label = server.get("/api/codebook").await.json["labels"][1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    browser.keep_annotator(&server.url, "alice").await;
    browser
        .goto(&format!("{}/label/{id}/{event}?annotator=alice", server.url))
        .await;
    let pressed = "const b = document.querySelector(`button.label[data-id=\"${arguments[0]}\"]`); \
                   return !!b && b.getAttribute('aria-pressed') === 'true';";
    browser
        .wait_for(
            "the codebook",
            "return !!document.querySelector('#current .unit') && !!document.querySelector('button.label');",
            json!([]),
        )
        .await;
    browser.press(&["1", "-", "-"]).await;
    browser
        .wait_for("label 1 chosen", pressed, json!([first_label]))
        .await;
    browser.chord(webdriver::CONTROL, webdriver::ENTER).await;
    browser
        .wait_for(
            "the next unit",
            "return !location.pathname.endsWith(arguments[0]);",
            json!([event]),
        )
        .await;
    let shown = "return performance.getEntriesByName('sg-unit-shown').map(m => [m.startTime, m.duration]);";
    let two = "return performance.getEntriesByName('sg-unit-shown').length >= 2;";
    browser.wait_for("two units shown", two, json!([])).await;
    let timings = browser.run(shown, json!([])).await;
    let first = timings[0][0].as_f64().unwrap() + timings[0][1].as_f64().unwrap();
    let next = timings[1][1].as_f64().unwrap();
    eprintln!(
        "label page, {} units: first unit shown {first:.0} ms after navigation; next unit drawn in {next:.1} ms",
        crate::labels::units(server, id).await.len()
    );
    let sets = server
        .get(&format!("/api/graph/{id}/labels?annotator=alice"))
        .await;
    let mine = sets.json["labels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["event_id"] == event && s["annotator"] == "alice")
        .unwrap_or_else(|| panic!("alice's set on {event}: {}", sets.json));
    assert_eq!(mine["status"], "submitted");
    assert_eq!(mine["labels"][0]["id"], first_label.as_str(), "{mine}");
    assert_eq!(mine["labels"][0]["confidence"], 0.8, "- twice: {mine}");
    assert!(mine["lead_time"].as_f64().is_some(), "the time spent is sent");

    browser
        .wait_for(
            "the next unit drawn",
            "return !!document.querySelector('button.label');",
            json!([]),
        )
        .await;
    browser.press(&["2"]).await;
    browser
        .wait_for("label 2 chosen", pressed, json!([second_label]))
        .await;
    let url = browser.run("return location.href;", json!([])).await;
    browser.goto(url.as_str().unwrap()).await;
    browser
        .wait_for("the draft kept over a reload", pressed, json!([second_label]))
        .await;
    let timings = browser.run(shown, json!([])).await;
    let warm = timings[0][0].as_f64().unwrap() + timings[0][1].as_f64().unwrap();
    eprintln!("label page reloaded: first unit shown {warm:.0} ms after navigation");
}

/// A unit holding `<script>` and `<img onerror>` shows them as text and runs nothing.
async fn markup_is_text(server: &TestServer, browser: &webdriver::Browser, (id, event): &(String, String)) {
    browser.keep_annotator(&server.url, "alice").await;
    browser
        .goto(&format!("{}/label/{id}/{event}?annotator=alice", server.url))
        .await;
    browser
        .wait_for(
            "the hostile unit",
            "return !!document.querySelector('#current .unit');",
            json!([]),
        )
        .await;
    let seen = browser
        .run(
            "const c = document.getElementById('current'); return { text: c.textContent, \
             scripts: c.querySelectorAll('script').length, images: c.querySelectorAll('img').length, \
             pwned: window.__pwned === undefined ? null : window.__pwned };",
            json!([]),
        )
        .await;
    let text = seen["text"].as_str().unwrap();
    assert!(text.contains("<script>window.__pwned = 1</script>"), "{seen}");
    assert!(text.contains("<img src=x onerror="), "{seen}");
    assert_eq!(seen["scripts"], 0);
    assert_eq!(seen["images"], 0);
    assert_eq!(seen["pwned"], Value::Null, "nothing ran");
}

/// `?` shows the shortcuts and Esc hides them; `s` skips the unit (stored as discarded, with
/// no labels) and moves on.
async fn help_then_skip(server: &TestServer, browser: &webdriver::Browser, id: &str) {
    browser.press(&["?"]).await;
    let help = "return !!document.getElementById('help') && document.getElementById('help').textContent.includes('Ctrl+Enter');";
    browser.wait_for("the shortcuts", help, json!([])).await;
    browser.press(&["\u{E00C}"]).await;
    let closed = "return !document.getElementById('help');";
    browser.wait_for("the shortcuts hidden", closed, json!([])).await;
    let here = browser
        .run(
            "return decodeURIComponent(location.pathname).split('/').pop();",
            json!([]),
        )
        .await;
    let event = here.as_str().unwrap().to_owned();
    browser.press(&["s"]).await;
    let skipped = wait_for_set(server, id, &event, "alice", |s| s["status"] == "discarded").await;
    assert_eq!(skipped["labels"], json!([]), "{skipped}");
    let moved = "return !decodeURIComponent(location.pathname).endsWith(arguments[0]);";
    browser
        .wait_for("the next unit after a skip", moved, json!([event]))
        .await;
}

/// On a unit with text, alice chooses label 3, selects text and presses e: the quote is
/// highlighted and stored; then [`conflict_keeps_mine`].
async fn quote_then_conflict(
    server: &TestServer,
    browser: &webdriver::Browser,
    id: &str,
    units: &[(String, String, bool)],
) {
    let (event, text) = units
        .iter()
        .skip(3)
        .find(|(_, t, _)| t.trim().chars().count() >= 40)
        .map(|(e, t, _)| (e.clone(), t.clone()))
        .unwrap();
    let codebook = server.get("/api/codebook").await.json;
    let (third, fourth) = (
        codebook["labels"][2]["id"].as_str().unwrap(),
        codebook["labels"][3]["id"].as_str().unwrap(),
    );
    browser.keep_annotator(&server.url, "alice").await;
    browser
        .goto(&format!("{}/label/{id}/{event}?annotator=alice", server.url))
        .await;
    browser
        .wait_for(
            "the unit's text",
            "return !!document.querySelector('#current pre.text');",
            json!([]),
        )
        .await;
    browser.press(&["3"]).await;
    let select = "const pre = document.querySelector('#current pre.text'); const node = pre.firstChild; \
                  const start = node.textContent.search(/\\S/); const range = document.createRange(); \
                  range.setStart(node, start); range.setEnd(node, start + 20); \
                  const sel = getSelection(); sel.removeAllRanges(); sel.addRange(range); return sel.toString().trim();";
    let quote = browser.run(select, json!([])).await.as_str().unwrap().to_owned();
    assert!(text.contains(&quote), "{quote:?}");
    quote_selection(browser, &quote).await;
    browser.screenshot(&output_dir().join("label-page.png")).await;
    browser.chord(webdriver::CONTROL, webdriver::ENTER).await;
    let stored = wait_for_set(server, id, &event, "alice", |s| s["status"] == "submitted").await;
    assert_eq!(stored["labels"][0]["id"], third, "{stored}");
    assert_eq!(
        stored["labels"][0]["evidence"]["quote"],
        quote.as_str(),
        "{stored}"
    );
    conflict_keeps_mine(server, browser, id, &event, [third, fourth]).await;
}

/// alice is back on a unit she submitted; a write from elsewhere makes her next submit
/// lose the If-Match race: both versions show, and "Keep mine" (Enter) stores hers.
async fn conflict_keeps_mine(
    server: &TestServer,
    browser: &webdriver::Browser,
    id: &str,
    event: &str,
    [third, fourth]: [&str; 2],
) {
    browser
        .wait_for(
            "the next unit",
            "return !decodeURIComponent(location.pathname).endsWith(arguments[0]);",
            json!([event]),
        )
        .await;
    browser.press(&["k"]).await;
    let back = "return decodeURIComponent(location.pathname).endsWith(arguments[0]) && !!document.querySelector('#current') \
                && document.querySelector('.where').textContent.includes('submitted');";
    browser.wait_for("back on the unit", back, json!([event])).await;
    let elsewhere = json!({"annotator": "alice", "status": "draft", "labels": []});
    let path = format!("/api/graph/{id}/labels/{event}");
    let r = crate::labels::put(server, &path, &elsewhere, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    browser.press(&["4"]).await;
    browser.chord(webdriver::CONTROL, webdriver::ENTER).await;
    let conflict = "return !!document.querySelector('.conflict') && document.activeElement.textContent.startsWith('Keep mine');";
    browser.wait_for("both versions", conflict, json!([])).await;
    browser.press(&[webdriver::ENTER]).await;
    let two = |s: &Value| s["status"] == "submitted" && s["labels"].as_array().is_some_and(|l| l.len() == 2);
    let kept = wait_for_set(server, id, event, "alice", two).await;
    let ids: Vec<&str> = kept["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [third, fourth], "{kept}");
    assert_eq!(kept["version"], 3, "{kept}");
}

/// `annotator`'s set on the unit once `done` holds of it (up to 10 s).
async fn wait_for_set(
    server: &TestServer,
    id: &str,
    event: &str,
    annotator: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        let listed = server
            .get(&format!("/api/graph/{id}/labels?annotator={annotator}"))
            .await;
        let labels = listed.json["labels"].as_array().cloned().unwrap_or_default();
        if let Some(set) = labels
            .into_iter()
            .find(|s| s["event_id"] == event && s["annotator"] == annotator)
        {
            if done(&set) {
                return set;
            }
            last = set;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{annotator}'s set on {event} never became as expected: {last}");
}

/// alice and bob disagree on a unit; the reviewer picks alice's label and saves: the
/// annotations body then shows the adjudicated set.
async fn review_adjudicates(
    server: &TestServer,
    browser: &webdriver::Browser,
    id: &str,
    units: &[(String, String, bool)],
) {
    let event = units[units.len() / 2].0.as_str();
    let codebook = server.get("/api/codebook").await.json;
    let (a, b) = (
        codebook["labels"][5]["id"].as_str().unwrap(),
        codebook["labels"][6]["id"].as_str().unwrap(),
    );
    let path = format!("/api/graph/{id}/labels/{event}");
    for (who, label) in [("alice", a), ("bob", b)] {
        let set = json!({"annotator": who, "status": "submitted", "labels": [{"id": label}]});
        assert!(crate::labels::put(server, &path, &set, None)
            .await
            .status
            .is_success());
    }
    browser.keep_annotator(&server.url, "lead").await;
    browser
        .goto(&format!("{}/review/{id}?annotator=lead", server.url))
        .await;
    let card = "const card = [...document.querySelectorAll('.review-unit')].find(c => c.getAttribute('aria-label') === 'Unit ' + arguments[0]);";
    let split = format!("{card} return !!card && card.classList.contains('disagree');");
    browser.wait_for("the disagreement", &split, json!([event])).await;
    let pick = format!("{card} card.querySelector('input[aria-label=\"Adjudicated: ' + arguments[1] + '\"]').click(); card.querySelector('button.save').click();");
    browser.run(&pick, json!([event, a])).await;
    let saved = format!("{card} return card.querySelector('.result').textContent.startsWith('Adjudicated');");
    browser
        .wait_for("the adjudicated set saved", &saved, json!([event]))
        .await;
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    let unit = annotation_unit(&body.json, event);
    assert_eq!(unit["labels"].as_array().unwrap().len(), 1, "{}", unit["labels"]);
    assert_eq!(unit["labels"][0]["id"], a, "the adjudicated set wins");
}

/// The unit `event` of an annotations body.
fn annotation_unit<'a>(body: &'a Value, event: &str) -> &'a Value {
    body["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["event_id"] == event)
        .unwrap_or_else(|| panic!("no unit {event} in the annotations body"))
}

/// Presses `e` to make the selection the focused label's quote, and waits until the unit
/// shows `quote` highlighted.
async fn quote_selection(browser: &webdriver::Browser, quote: &str) {
    browser.press(&["e"]).await;
    let marked =
        "const m = document.querySelector('#current mark'); return !!m && m.textContent === arguments[0];";
    browser
        .wait_for("the quote highlighted", marked, json!([quote]))
        .await;
}

/// The sessions page shows progress bars, the agreement page its chart.
async fn overview_pages(server: &TestServer, browser: &webdriver::Browser) {
    browser.goto(&format!("{}/sessions", server.url)).await;
    let bars = "return document.querySelectorAll('.bar[role=progressbar]').length >= 2;";
    browser.wait_for("progress bars", bars, json!([])).await;
    browser.screenshot(&output_dir().join("sessions-page.png")).await;
    browser.goto(&format!("{}/agreement", server.url)).await;
    let chart = "return !!document.querySelector('svg.chart rect') && document.querySelectorAll('table.grid').length >= 3;";
    browser.wait_for("the chart", chart, json!([])).await;
    browser.screenshot(&output_dir().join("agreement-page.png")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_queue_in_two_browsers_never_gives_the_same_unit_beyond_the_overlap() {
    let Some(installed) = browser_or_skip("web_queue_in_two_browsers") else {
        return;
    };
    let server = TestServer::start(Options {
        label_policy: sessiongraph::labels::LabelPolicy {
            overlap: 1,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let (id, event) = upload_hostile(&server).await;
    let first = webdriver::Browser::start(&installed).await;
    let second = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&first, "queue", async {
        let mut got = Vec::new();
        for (browser, who) in [(&first, "ann1"), (&second, "ann2")] {
            got.push(take_from_queue(&server, browser, &id, &event, who).await);
        }
        assert_ne!(
            got[0], got[1],
            "overlap 1: two annotators never hold the same unit"
        );
        leaving_gives_the_unit_back(&server, &first, &id, &event, &got[0]).await;
        for (browser, who) in [(&first, "ann1"), (&second, "ann2")] {
            browser.press(&["1"]).await;
            browser.chord(webdriver::CONTROL, webdriver::ENTER).await;
            let done = "return document.getElementById('status').textContent.includes('no unit left');";
            browser.wait_for("the queue done", done, json!([])).await;
            let listed = server
                .get(&format!("/api/graph/{id}/labels?annotator={who}"))
                .await;
            assert_eq!(listed.json["total"], 1, "{who}: {}", listed.json);
        }
        let all = server.get(&format!("/api/graph/{id}/labels")).await;
        let mut units: Vec<&str> = all.json["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["event_id"].as_str().unwrap())
            .collect();
        units.sort_unstable();
        units.dedup();
        assert_eq!(units.len(), 2, "each unit labeled once: {}", all.json);
    })
    .await;
    first.quit().await;
    second.quit().await;
    server.stop().await;
}

/// `who` opens the session ("this session only" is ticked by default) and presses n: the
/// unit the queue reserved for them, once the page shows it.
async fn take_from_queue(
    server: &TestServer,
    browser: &webdriver::Browser,
    id: &str,
    event: &str,
    who: &str,
) -> String {
    browser.keep_annotator(&server.url, who).await;
    browser
        .goto(&format!("{}/label/{id}/{event}?annotator={who}", server.url))
        .await;
    let ready = "return !!document.querySelector('.queue input[type=checkbox]:checked') && \
                 document.querySelector('.queue .overlap').textContent.includes('1 annotator');";
    browser.wait_for("the queue controls", ready, json!([])).await;
    browser.press(&["n"]).await;
    let reserved = "return document.getElementById('status').textContent.startsWith('Reserved for you') && !!document.querySelector('#current .unit');";
    browser.wait_for("a reserved unit", reserved, json!([])).await;
    walkthrough::current_event(browser).await
}

/// A quote taken from the reasoning is not in the unit's text: the server refuses it, and
/// the refusal shows beside the label; nothing is stored.
async fn refused_quote_in_place(server: &TestServer, browser: &webdriver::Browser, id: &str) {
    let body = server
        .get(&format!("/api/graph/{id}/annotations?include_sidechains=true"))
        .await;
    let unit = body.json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| {
            let r = &u["text_or_artifact_ref"];
            let thinking = r["thinking"].as_str().unwrap_or("").trim();
            thinking.len() > 40 && !r["text"].as_str().unwrap_or("").contains(&thinking[..20])
        })
        .expect("a unit with reasoning");
    let event = unit["event_id"].as_str().unwrap();
    browser.keep_annotator(&server.url, "carol").await;
    browser
        .goto(&format!("{}/label/{id}/{event}?annotator=carol", server.url))
        .await;
    let ready = "return !!document.querySelector('#current .reasoning pre') && !!document.querySelector('button.label');";
    browser.wait_for("the reasoning", ready, json!([])).await;
    browser.press(&["5"]).await;
    let select = "const node = document.querySelector('#current .reasoning pre').firstChild; \
                  const start = node.textContent.search(/\\S/); const range = document.createRange(); \
                  range.setStart(node, start); range.setEnd(node, start + 20); \
                  getSelection().removeAllRanges(); getSelection().addRange(range);";
    browser.run(select, json!([])).await;
    browser.press(&["e"]).await;
    browser.chord(webdriver::CONTROL, webdriver::ENTER).await;
    let refused = "const e = document.querySelector('.chosen .error[role=alert]'); \
                   return !!e && e.textContent.includes('quote') && document.getElementById('status').textContent.startsWith('Not saved (400)');";
    browser.wait_for("the refusal in place", refused, json!([])).await;
    let listed = server
        .get(&format!("/api/graph/{id}/labels?annotator=carol"))
        .await;
    assert_eq!(listed.json["total"], 0, "{}", listed.json);
}

/// ann1 moves off the unit the queue gave them without labeling it: the page releases the
/// reservation (ann3 is then given that unit), and ann1 comes back to it.
async fn leaving_gives_the_unit_back(
    server: &TestServer,
    browser: &webdriver::Browser,
    id: &str,
    first_unit: &str,
    held: &str,
) {
    let (away, back) = if held == first_unit {
        ("j", "k")
    } else {
        ("k", "j")
    };
    let on = "return decodeURIComponent(location.pathname).endsWith(arguments[0]) && !!document.querySelector('#current .unit');";
    let off = "return !decodeURIComponent(location.pathname).endsWith(arguments[0]) && !!document.querySelector('#current .unit');";
    browser.press(&[away]).await;
    browser.wait_for("ann1 off the unit", off, json!([held])).await;
    let ask = json!({"annotator": "ann3", "session": id, "overlap": 1});
    let mut given = Value::Null;
    for _ in 0..100 {
        given = server.post_json("/api/labels/queue/next", &ask, &[]).await.json;
        if given["done"] == false {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(given["reservation"]["event_id"], held, "released: {given}");
    let release = json!({"annotator": "ann3", "session_id": id, "event_id": held});
    let r = server.post_json("/api/labels/queue/release", &release, &[]).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    browser.press(&[back]).await;
    browser.wait_for("ann1 back on the unit", on, json!([held])).await;
}

/// Regression (F3), in the browser: a page of another origin (another port of 127.0.0.1)
/// sends, without asking (`no-cors`), an import of an adjudicated set as `text/plain`, a
/// multipart upload and a queue request to the server, as it did successfully before.
/// Every request reaches the server (an opaque answer, not a network error) and none
/// changes anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_a_page_of_another_origin_cannot_write_through_the_browser() {
    let Some(installed) = browser_or_skip("web_a_page_of_another_origin") else {
        return;
    };
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        label_policy: sessiongraph::labels::LabelPolicy {
            reviewers: vec!["lead".into()],
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let sessions_before = server.get("/api/sessions").await.json["sessions"].clone();
    let id = sessions_before[0]["id"].as_str().unwrap().to_owned();
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    let event = serde_json::Value::from(crate::labels::first_coded_unit(&units.json));
    let hostile = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { axum::response::Html("<!doctype html><title>a page</title>") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hostile_url = format!("http://{}", listener.local_addr().unwrap());
    let hostile_task = tokio::spawn(async move { axum::serve(listener, hostile).await });
    let browser = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "cross-origin", async {
        browser.goto(&format!("{hostile_url}/")).await;
        let attack = "const [target, line] = arguments; \
            const send = (path, init) => fetch(target + path, { method: 'POST', mode: 'no-cors', ...init }) \
                .then(r => r.type, e => 'failed: ' + e); \
            const form = new FormData(); \
            form.append('file', new Blob([line], { type: 'application/octet-stream' }), 'x.jsonl'); \
            return (async () => [ \
              await send('/api/labels/import', { headers: { 'content-type': 'text/plain' }, body: line }), \
              await send('/api/labels/import', { body: line }), \
              await send('/api/upload', { body: form }), \
              await send('/api/labels/queue/next', { headers: { 'content-type': 'text/plain' }, \
                                                     body: JSON.stringify({ annotator: 'eve' }) }), \
            ])();";
        let line = json!({"session_id": id, "event_id": event, "annotator": "lead",
                          "status": "adjudicated", "labels": [{"id": "EXEC_COGNITIVE"}]});
        let answers = browser
            .run(attack, json!([server.url, format!("{line}\n")]))
            .await;
        assert_eq!(
            answers,
            json!(["opaque", "opaque", "opaque", "opaque"]),
            "every request reached the server"
        );
    })
    .await;
    browser.quit().await;
    hostile_task.abort();
    let labels = server.get(&format!("/api/graph/{id}/labels")).await;
    assert_eq!(labels.json["total"], 0, "{}", labels.json);
    let ids = |sessions: &Value| -> Vec<Value> {
        sessions
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].clone())
            .collect()
    };
    let sessions_after = server.get("/api/sessions").await.json["sessions"].clone();
    assert_eq!(ids(&sessions_after), ids(&sessions_before), "no session uploaded");
    let release = json!({"annotator": "eve", "session_id": id, "event_id": event});
    let held = server.post_json("/api/labels/queue/release", &release, &[]).await;
    assert_eq!(held.status, StatusCode::NOT_FOUND, "eve holds no unit");
    server.stop().await;
}

/// Regression: a link's `?annotator=NAME` silently made NAME the tab's annotator, so a
/// link made by someone else labeled as them. The page offers the name and asks first;
/// the annotator may keep their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_a_link_naming_an_annotator_asks_before_labeling_as_them() {
    let Some(installed) = browser_or_skip("web_a_link_naming_an_annotator") else {
        return;
    };
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let id = server.first_session(&[]).await;
    let browser = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "linked-name", async {
        let whoami = "return document.getElementById('whoami').textContent === arguments[0];";
        browser.keep_annotator(&server.url, "alice").await;
        browser
            .goto(&format!("{}/label/{id}?annotator=mallory", server.url))
            .await;
        let offered = "const p = document.getElementById('linked-name'); \
                       return !!p && p.textContent.includes('mallory') && p.textContent.includes('alice') && \
                       document.getElementById('annotator-name').value === 'mallory';";
        browser
            .wait_for("the linked name offered", offered, json!([]))
            .await;
        browser
            .run("document.getElementById('keep-name').click();", json!([]))
            .await;
        browser
            .wait_for("alice kept", whoami, json!(["Labeling as alice"]))
            .await;
        let address = browser.run("return location.search;", json!([])).await;
        assert_eq!(address, json!(""), "the link's name is gone from the address");

        // A fresh browser: the link's name is offered, and taken on Enter.
        browser.goto(&format!("{}/healthz", server.url)).await;
        browser
            .run("sessionStorage.clear(); localStorage.clear();", json!([]))
            .await;
        browser
            .goto(&format!("{}/label/{id}?annotator=bob", server.url))
            .await;
        let asked = "return document.getElementById('annotator-name')?.value === 'bob';";
        browser.wait_for("bob offered", asked, json!([])).await;
        browser.press(&[webdriver::ENTER]).await;
        browser
            .wait_for("bob signed in", whoami, json!(["Labeling as bob"]))
            .await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// A team too large for a matrix of pairs (47 annotators on one unit: 1,081 pairs, past the
/// agreement route's first page of 1,000): the agreement page lists the pairs as rows and
/// loads the next page on "More pairs" until none is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_a_large_teams_pairs_are_listed_a_page_at_a_time() {
    let Some(installed) = browser_or_skip("web_a_large_teams_pairs") else {
        return;
    };
    let server = TestServer::start(Options {
        sessions_dirs: vec![crate::helpers::fixture("commugraph-sample")],
        ..Options::default()
    })
    .await;
    let id = server.first_session(&[]).await;
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    let event = crate::labels::first_coded_unit(&units.json);
    let annotators = 47;
    let body: String = (0..annotators)
        .map(|i| {
            let label = if i % 2 == 0 {
                "EXEC_COGNITIVE"
            } else {
                "EXEC_DIGITAL"
            };
            let line = json!({"session_id": id, "event_id": event, "annotator": format!("ann{i:02}"),
                "status": "submitted", "labels": [{"id": label}]});
            format!("{line}\n")
        })
        .collect();
    let imported = server
        .post_bytes(
            "/api/labels/import",
            body.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.json);
    let pairs = annotators * (annotators - 1) / 2;
    let browser = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "agreement-pairs", async {
        browser.keep_annotator(&server.url, "lead").await;
        browser.goto(&format!("{}/agreement", server.url)).await;
        let rows = "const b = [...document.querySelectorAll('button')].find((x) => x.textContent === 'More pairs'); \
                    const n = document.querySelectorAll('table.grid')[2]?.querySelectorAll('tbody tr').length; \
                    return n === arguments[0] && !!b && b.hidden === arguments[1];";
        browser
            .wait_for("the first page of pairs", rows, json!([1000, false]))
            .await;
        browser
            .run(
                "[...document.querySelectorAll('button')].find((x) => x.textContent === 'More pairs').click();",
                json!([]),
            )
            .await;
        browser
            .wait_for("every pair", rows, json!([pairs, true]))
            .await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

/// A study on the page: the sessions page's search finds units with their matched words
/// marked; the rounds page counts and previews a round as the form changes, and creates
/// it; labeling in the round takes its units from its queue under its codebook, with its
/// guidelines one key away; its agreement page lists a model beside the humans, and its
/// review page marks where the model differs from the humans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_a_round_is_searched_for_created_labeled_and_compared_in_chromium() {
    let Some(installed) = browser_or_skip("web_a_round_in_chromium") else {
        return;
    };
    let (server, id, _) = sample_server_with_a_reviewer().await;
    let browser = webdriver::Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "rounds", async {
        browser.keep_annotator(&server.url, "ann.a").await;
        search_on_the_sessions_page(&server, &browser).await;
        let round = create_a_round_on_the_page(&server, &browser).await;
        label_in_the_round(&server, &browser, &round).await;
        model_rows_on_the_agreement_page(&server, &browser, &id, &round).await;
        browser.no_csp_violations().await;
    })
    .await;
    browser.quit().await;
    server.stop().await;
}

async fn search_on_the_sessions_page(server: &TestServer, browser: &webdriver::Browser) {
    browser.goto(&format!("{}/sessions", server.url)).await;
    browser
        .wait_for(
            "the search box",
            "return !!document.getElementById('search-q');",
            json!([]),
        )
        .await;
    let search = "document.getElementById('search-q').value = arguments[0]; \
                  document.querySelector('form.search-form button[type=submit]').click();";
    let found = "const t = document.getElementById('search-total'); \
                 return !!t && /^[1-9][0-9]* unit/.test(t.textContent) && !t.textContent.includes('catching up') \
                 && !!document.querySelector('.hits li .hit-snippet b');";
    // The index is built in the background after the upload: search again until it has.
    for _ in 0..100 {
        browser.run(search, json!(["file"])).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if browser.run(found, json!([])).await == json!(true) {
            break;
        }
    }
    browser
        .wait_for("search results with marked words", found, json!([]))
        .await;
    browser.screenshot(&output_dir().join("search.png")).await;
}

async fn create_a_round_on_the_page(server: &TestServer, browser: &webdriver::Browser) -> String {
    browser.goto(&format!("{}/rounds", server.url)).await;
    let counted =
        "const c = document.getElementById('round-count'); return !!c && c.textContent.includes('match');";
    browser.wait_for("the live count", counted, json!([])).await;
    let fill = "const set = (id, v) => { const el = document.getElementById(id); el.value = v; \
                el.dispatchEvent(new Event('input', { bubbles: true })); }; \
                set('round-name', 'page pilot'); set('round-codebook', 'speechact'); set('round-size', '4'); \
                set('round-guidelines', 'Code the primary act only.'); set('round-annotators', 'ann.a, ann.b');";
    browser.run(fill, json!([])).await;
    let four = "const c = document.getElementById('round-count'); \
                return c.textContent.includes('the sample holds 4') && document.querySelectorAll('#round-preview li').length === 4;";
    browser
        .wait_for("the preview of four units", four, json!([]))
        .await;
    browser
        .run("document.getElementById('round-create').click();", json!([]))
        .await;
    let listed = "return document.querySelectorAll('#rounds tbody tr').length === 1;";
    browser.wait_for("the round listed", listed, json!([])).await;
    browser.screenshot(&output_dir().join("rounds-page.png")).await;
    let rounds = server.get("/api/rounds").await;
    assert_eq!(rounds.json["rounds"][0]["codebook"], "speechact");
    assert_eq!(rounds.json["rounds"][0]["units"], 4);
    assert_eq!(rounds.json["rounds"][0]["annotators"], json!(["ann.a", "ann.b"]));
    rounds.json["rounds"][0]["id"].as_str().unwrap().to_owned()
}

async fn label_in_the_round(server: &TestServer, browser: &webdriver::Browser, round: &str) {
    browser
        .goto(&format!("{}/rounds/{round}/label", server.url))
        .await;
    let ready =
        "return !!document.querySelector('.round-bar') && !!document.querySelector('#current .unit') \
                 && !!document.querySelector('button.label[data-id=\"SPEECH_ACT_REPRESENTATIVE\"]');";
    browser
        .wait_for("a unit of the round under its codebook", ready, json!([]))
        .await;
    browser.press(&["g"]).await;
    let guidelines = "const g = document.getElementById('guidelines'); return !!g && g.textContent.includes('primary act only');";
    browser.wait_for("the guidelines", guidelines, json!([])).await;
    browser.press(&[webdriver::ESCAPE]).await;
    browser
        .wait_for(
            "the guidelines closed",
            "return !document.getElementById('guidelines');",
            json!([]),
        )
        .await;
    let units = server.get(&format!("/api/rounds/{round}/units")).await;
    let first = browser.run("return location.pathname;", json!([])).await;
    browser.press(&["1"]).await;
    browser.chord(webdriver::CONTROL, webdriver::ENTER).await;
    let moved = "return location.pathname !== arguments[0] && !!document.querySelector('#current .unit');";
    browser
        .wait_for("the round's next unit", moved, json!([first]))
        .await;
    let in_round: Vec<String> = units.json["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            format!(
                "/label/{}/{}",
                u["session_id"].as_str().unwrap(),
                urlencode(u["event_id"].as_str().unwrap())
            )
        })
        .collect();
    let now = browser.run("return location.pathname;", json!([])).await;
    assert!(
        in_round.iter().any(|p| json!(p) == now),
        "{now} is a unit of the round: {in_round:?}"
    );
    let progress = server.get(&format!("/api/rounds/{round}")).await;
    assert_eq!(
        progress.json["progress"]["annotators"]["ann.a"]["submitted"], 1,
        "{}",
        progress.json
    );
}

/// `text` escaped as the page escapes a path segment (`encodeURIComponent`).
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'!'
            | b'~'
            | b'*'
            | b'\''
            | b'('
            | b')' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn model_rows_on_the_agreement_page(
    server: &TestServer,
    browser: &webdriver::Browser,
    id: &str,
    round: &str,
) {
    let units = server.get(&format!("/api/rounds/{round}/units")).await;
    let lines: String = units.json["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            format!(
                "{}\n",
                json!({"event_id": u["event_id"], "speech_act": {"primary_type": "DIRECTIVE"}})
            )
        })
        .collect();
    let imported = server
        .post_bytes(
            &format!("/api/labels/import?format=commugraph-speechact&model=tagger&session={id}"),
            lines.into_bytes(),
            &[("content-type", "application/x-ndjson")],
        )
        .await;
    assert_eq!(imported.json["failed"], 0, "{}", imported.json);
    browser
        .goto(&format!("{}/rounds/{round}/agreement", server.url))
        .await;
    let model = "const rows = document.querySelectorAll('#round-models tbody tr'); \
                 return rows.length === 1 && rows[0].textContent.includes('tagger') && !!document.getElementById('round-humans');";
    browser.wait_for("the model's row", model, json!([])).await;
    browser
        .screenshot(&output_dir().join("round-agreement.png"))
        .await;
    browser
        .goto(&format!("{}/rounds/{round}/review", server.url))
        .await;
    let review = "return document.querySelectorAll('.review-unit').length === 4 \
                  && !!document.querySelector('.review-unit .badge.model');";
    browser
        .wait_for(
            "the round's units, one where the model differs",
            review,
            json!([]),
        )
        .await;
    browser.screenshot(&output_dir().join("round-review.png")).await;
}
