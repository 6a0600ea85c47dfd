//! Codex CLI and Gemini CLI sessions on the label page: a unit of each is labeled by
//! keyboard as a Claude Code unit is, and the API holds exactly the label chosen.

use serde_json::json;

use super::webdriver::{Browser, CONTROL, ENTER};
use super::{browser_or_skip, with_screenshot_on_failure};
use crate::server::{Options, TestServer};

/// True once the label page shows unit `arguments[0]` with the codebook beside it.
const SHOWS_UNIT: &str = "const u = document.querySelector('#current .unit'); \
    return !!u && u.dataset.eventId === arguments[0] && !!document.querySelector('button.label');";

/// True when label `arguments[0]` is chosen.
const CHOSEN: &str = "const b = document.querySelector(`button.label[data-id=\"${arguments[0]}\"]`); \
    return !!b && b.getAttribute('aria-pressed') === 'true';";

/// True once the page has moved on from unit `arguments[0]`.
const MOVED_ON: &str = "return !decodeURIComponent(location.pathname).endsWith(arguments[0]);";

/// The first assistant turn of session `id`.
async fn first_assistant_turn(server: &TestServer, id: &str) -> String {
    let body = server.get(&format!("/api/graph/{id}/annotations")).await.json;
    body["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["unit_type"] == "assistant_turn")
        .and_then(|u| u["event_id"].as_str())
        .expect("an assistant turn")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_labels_a_codex_and_a_gemini_unit_by_keyboard() {
    let Some(installed) = browser_or_skip("page_labels_a_codex_and_a_gemini_unit") else {
        return;
    };
    let server = TestServer::start(Options::default()).await;
    let sessions = [
        server
            .upload_fixture("codex", "codex/agtrace/codex_session.jsonl")
            .await,
        server
            .upload_fixture("gemini", "gemini/real/agtrace_gemini_session.json")
            .await,
    ];
    let codebook = server.get("/api/codebook").await.json;
    let label = codebook["labels"][0]["id"].as_str().unwrap().to_owned();
    let browser = Browser::start(&installed).await;
    with_screenshot_on_failure(&browser, "coding_agents", async {
        browser.keep_annotator(&server.url, "ann.page").await;
        for id in &sessions {
            let event = first_assistant_turn(&server, id).await;
            let path = format!("/label/{}/{}", super::urlencode(id), super::urlencode(&event));
            browser.goto(&format!("{}{path}", server.url)).await;
            browser.wait_for("the unit", SHOWS_UNIT, json!([event])).await;
            browser.press(&["1"]).await;
            browser.wait_for("the first label", CHOSEN, json!([label])).await;
            browser.chord(CONTROL, ENTER).await;
            browser.wait_for("the next unit", MOVED_ON, json!([event])).await;

            let sets = server
                .get(&format!("/api/graph/{id}/labels?annotator=ann.page"))
                .await;
            assert_eq!(sets.status, reqwest::StatusCode::OK, "{}", sets.json);
            let set = &sets.json["labels"][0];
            assert_eq!(sets.json["total"], 1, "{}", sets.json);
            assert_eq!(set["event_id"], event.as_str(), "{}", sets.json);
            assert_eq!(set["status"], "submitted", "{}", sets.json);
            let ids: Vec<&str> = set["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, [label.as_str()], "{id}: exactly the label chosen");
        }
    })
    .await;
    browser.quit().await;
    server.stop().await;
}
