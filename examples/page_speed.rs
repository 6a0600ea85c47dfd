//! How fast the label page shows a unit, measured in a real headless Chromium with the
//! page's own Performance API marks: `sg-unit-shown` (the unit's DOM built, from the
//! route's start) and `sg-unit-painted` (the frame after it painted).
//!
//! Against a running server (warm: the session's units are rendered once before
//! measuring), for the session with the most units unless `--session` names one:
//! - first unit: `--rounds` navigations to the label page's URL of the session's first unit
//!   (a fresh page load each: modules, codebook, units, sets), time from navigation start;
//!   the first round also runs with an empty browser cache and is reported apart;
//! - next unit: after each navigation, `--moves` presses of `j`, time from the key's event to
//!   the next unit shown and painted.
//!
//! ```sh
//! cargo run --release &                       # serves the bundled sample on 127.0.0.1:8080
//! cargo run --release --example page_speed -- --url http://127.0.0.1:8080
//! ```
//! Needs Debian's `chromium` and `chromium-driver` on `PATH`.

// Shared with the browser tests; this benchmark drives only part of it.
#[allow(dead_code)]
#[path = "../tests/integration/web/webdriver.rs"]
mod webdriver;

use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser)]
struct Args {
    /// The server, e.g. http://127.0.0.1:8080 (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The session to label (default: the one with the most units).
    #[arg(long)]
    session: Option<String>,
    /// Page loads measured.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// `j` presses measured after each page load.
    #[arg(long, default_value_t = 10)]
    moves: usize,
}

/// The session with the most units.
async fn largest_session(http: &reqwest::Client, url: &str) -> String {
    let progress: Value = http
        .get(format!("{url}/api/labels/progress?all=true"))
        .send()
        .await
        .expect("the server answers")
        .json()
        .await
        .expect("a progress body");
    progress["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| {
            let id = s["session_id"].as_str().unwrap_or_default().to_owned();
            (id, s["units"]["total"].as_u64().unwrap_or(0))
        })
        .max_by_key(|(_, units)| *units)
        .expect("the server holds a session with units")
        .0
}

/// The first unit's event id, the number of units and the annotations body's size (asking
/// for it also warms the server's cache).
async fn first_unit(http: &reqwest::Client, url: &str, session: &str) -> (String, usize, usize) {
    let body = http
        .get(format!(
            "{url}/api/graph/{session}/annotations?include_sidechains=true"
        ))
        .send()
        .await
        .expect("the server answers")
        .bytes()
        .await
        .expect("a body");
    let json: Value = serde_json::from_slice(&body).expect("an annotations body");
    let event = json["annotations"][0]["event_id"]
        .as_str()
        .expect("a unit")
        .to_owned();
    let units = json["annotations"].as_array().map_or(0, Vec::len);
    (event, units, body.len())
}

/// The latest `name` measure's end (from navigation start) and duration, once there are `count`.
const MEASURE: &str = "const m = performance.getEntriesByName(arguments[0]); \
    if (m.length < arguments[1]) return null; const last = m[m.length - 1]; \
    return [last.startTime + last.duration, last.duration, window.sgKeyAt ?? null];";

/// Waits for the `count`-th `name` measure: (end from navigation start, duration, last key time).
async fn measure(browser: &webdriver::Browser, name: &str, count: usize) -> (f64, f64, Option<f64>) {
    for _ in 0..400 {
        let got = browser.run(MEASURE, json!([name, count])).await;
        if let Some(v) = got.as_array() {
            let f = |i: usize| v[i].as_f64();
            return (f(0).unwrap_or(0.0), f(1).unwrap_or(0.0), f(2));
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("no {name} measure #{count} after 400 looks");
}

/// One page load and `moves` presses of `j`: (shown, painted) of the first unit from
/// navigation start, then (shown, painted) of each next unit from its key event.
async fn one_round(browser: &webdriver::Browser, page: &str, moves: usize) -> ((f64, f64), Vec<(f64, f64)>) {
    browser.goto(page).await;
    let shown = measure(browser, "sg-unit-shown", 1).await.0;
    let painted = measure(browser, "sg-unit-painted", 1).await.0;
    let remember_keys =
        "document.addEventListener('keydown', (e) => { window.sgKeyAt = e.timeStamp; }, true);";
    browser.run(remember_keys, json!([])).await;
    let mut next = Vec::with_capacity(moves);
    for i in 2..moves + 2 {
        browser.press(&["j"]).await;
        let (shown_end, _, key) = measure(browser, "sg-unit-shown", i).await;
        let (painted_end, _, _) = measure(browser, "sg-unit-painted", i).await;
        let key = key.expect("the key's time");
        next.push((shown_end - key, painted_end - key));
    }
    ((shown, painted), next)
}

/// "median / p90 / max" of `values` in ms ("none" without values).
fn spread(values: &mut [f64]) -> String {
    if values.is_empty() {
        return "none".to_owned();
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {:6.1}  p90 {:6.1}  max {:6.1} ms",
        at(0.5),
        at(0.9),
        at(1.0)
    )
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let installed = webdriver::installed()
        .expect("chromium and chromedriver on PATH (apt-get install chromium chromium-driver)");
    let http = reqwest::Client::new();
    let session = match &args.session {
        Some(id) => id.clone(),
        None => largest_session(&http, &args.url).await,
    };
    let (event, units, bytes) = first_unit(&http, &args.url, &session).await;
    let page = format!("{}/label/{session}/{event}?annotator=page-speed", args.url);
    println!("session {session}: {units} units, annotations body {bytes} bytes");

    let browser = webdriver::Browser::start(&installed).await;
    browser.keep_annotator(&args.url, "page-speed").await;
    let (cold, _) = one_round(&browser, &page, 0).await;
    println!(
        "first unit, empty browser cache: shown {:.1} ms, painted {:.1} ms",
        cold.0, cold.1
    );
    let (mut shown, mut painted, mut next_shown, mut next_painted) = (vec![], vec![], vec![], vec![]);
    for _ in 0..args.rounds {
        let (first, next) = one_round(&browser, &page, args.moves).await;
        shown.push(first.0);
        painted.push(first.1);
        next_shown.extend(next.iter().map(|n| n.0));
        next_painted.extend(next.iter().map(|n| n.1));
    }
    browser.quit().await;
    println!("first unit, {} page loads (from navigation start):", args.rounds);
    println!("  shown   {}", spread(&mut shown));
    println!("  painted {}", spread(&mut painted));
    println!("next unit (j), {} moves (from the key event):", next_shown.len());
    println!("  shown   {}", spread(&mut next_shown));
    println!("  painted {}", spread(&mut next_painted));
}
