//! A minimal W3C WebDriver client over reqwest, for Debian's `chromedriver` driving a
//! headless `chromium`: start the driver on a free port, open a session, navigate, press
//! keys, run scripts, take screenshots. Only what the page's tests need.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The browser and its driver, when both are installed.
pub struct Installed {
    /// The `chromium` binary.
    pub chromium: PathBuf,
    /// The `chromedriver` binary.
    pub chromedriver: PathBuf,
}

/// `chromium` and `chromedriver` from `PATH` (Debian's packages), if both are there.
pub fn installed() -> Option<Installed> {
    let find = |names: &[&str]| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
            .find(|p| p.is_file())
    };
    Some(Installed {
        chromium: find(&["chromium", "chromium-browser"])?,
        chromedriver: find(&["chromedriver"])?,
    })
}

/// A running chromedriver with one headless browser session.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// The WebDriver key value of Control.
pub const CONTROL: &str = "\u{E009}";
/// The WebDriver key value of Enter.
pub const ENTER: &str = "\u{E007}";
/// The Escape key.
pub const ESCAPE: &str = "\u{E00C}";
/// The WebDriver key value of Tab.
pub const TAB: &str = "\u{E004}";
/// The WebDriver key value of the space bar.
pub const SPACE: &str = "\u{E00D}";

impl Browser {
    /// Starts `chromedriver --port=0` on 127.0.0.1, reads the port it took, and opens a
    /// headless session.
    pub async fn start(installed: &Installed) -> Browser {
        use std::io::{BufRead, BufReader};
        let mut driver = Command::new(&installed.chromedriver)
            .args(["--port=0", "--allowed-ips=127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = driver.stdout.take().unwrap();
        let port = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            let port = lines
                .by_ref()
                .map_while(Result::ok)
                .find_map(|l| {
                    l.split("started successfully on port ")
                        .nth(1)
                        .map(|p| p.trim_end_matches('.').to_owned())
                })
                .expect("chromedriver reports its port");
            std::thread::spawn(move || lines.for_each(drop));
            port
        })
        .await
        .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _profile: profile,
        };
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1400,1000".to_owned(),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": installed.chromium, "args": args}}}});
        let session = browser.command("POST", "/session", &caps).await;
        let id = session["sessionId"].as_str().expect("a session id").to_owned();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    async fn command(&self, method: &str, path: &str, body: &Value) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(body),
        };
        let response = request.send().await.expect("chromedriver answers");
        let status = response.status();
        let value: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "WebDriver {method} {path}: {status} {value}");
        value.get("value").cloned().unwrap_or(value)
    }

    /// Opens `url`, after checking that the page it leaves had no Content-Security-Policy
    /// violation (the page's boot.js records them in `window.sgViolations`).
    pub async fn goto(&self, url: &str) {
        self.no_csp_violations().await;
        self.command("POST", "/url", &json!({ "url": url })).await;
    }

    /// Makes `name` this browser's annotator on the server at `base`, as signing in on the
    /// page does (the page keeps it for the origin in `localStorage`), without loading the
    /// page: a link's `?annotator=` is then the annotator's own name, and the page does not
    /// ask.
    pub async fn keep_annotator(&self, base: &str, name: &str) {
        self.goto(&format!("{base}/healthz")).await;
        self.run(
            "localStorage.setItem('sg.annotator', arguments[0]);",
            json!([name]),
        )
        .await;
    }

    /// Sets the viewport to `width` x `height` CSS pixels (device pixel ratio 1; a mobile
    /// viewport below 600 pixels wide), through the DevTools protocol: a window may not be
    /// made as narrow as a phone.
    pub async fn viewport(&self, width: u32, height: u32) {
        let params = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600});
        let body = json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": params});
        self.command("POST", "/goog/cdp/execute", &body).await;
    }

    /// Opens a new tab of the same browser and switches to it.
    pub async fn new_tab(&self) {
        let opened = self.command("POST", "/window/new", &json!({"type": "tab"})).await;
        let handle = opened["handle"].as_str().expect("a window handle").to_owned();
        self.command("POST", "/window", &json!({ "handle": handle }))
            .await;
    }

    /// Panics when the current page recorded a Content-Security-Policy violation.
    pub async fn no_csp_violations(&self) {
        let violations = self.run("return window.sgViolations || [];", json!([])).await;
        assert_eq!(violations, json!([]), "the page broke its CSP");
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns its value.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            &json!({ "script": script, "args": args }),
        )
        .await
    }

    /// Presses each key of `keys` in turn, as a person would (keydown then keyup).
    pub async fn press(&self, keys: &[&str]) {
        let actions: Vec<Value> = keys
            .iter()
            .flat_map(|k| {
                [
                    json!({"type": "keyDown", "value": k}),
                    json!({"type": "keyUp", "value": k}),
                ]
            })
            .collect();
        self.actions(actions).await;
    }

    /// Presses `modifier` + `key` together.
    pub async fn chord(&self, modifier: &str, key: &str) {
        self.actions(vec![
            json!({"type": "keyDown", "value": modifier}),
            json!({"type": "keyDown", "value": key}),
            json!({"type": "keyUp", "value": key}),
            json!({"type": "keyUp", "value": modifier}),
        ])
        .await;
    }

    /// Drags the mouse from `from` to `to` (viewport CSS pixels) with the left button held,
    /// as a person selecting text does.
    pub async fn drag(&self, from: (i64, i64), to: (i64, i64)) {
        let moves = json!([
            {"type": "pointerMove", "duration": 0, "x": from.0, "y": from.1, "origin": "viewport"},
            {"type": "pointerDown", "button": 0},
            {"type": "pointerMove", "duration": 200, "x": to.0, "y": to.1, "origin": "viewport"},
            {"type": "pointerUp", "button": 0},
        ]);
        let body = json!({"actions": [{"type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"}, "actions": moves}]});
        self.command("POST", "/actions", &body).await;
    }

    async fn actions(&self, actions: Vec<Value>) {
        let body = json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]});
        self.command("POST", "/actions", &body).await;
    }

    /// Waits until `script` returns true (up to 10 s); panics with `what` otherwise.
    pub async fn wait_for(&self, what: &str, script: &str, args: Value) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if self.run(script, args.clone()).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let text = self
            .run("return document.body.innerText.slice(0, 2000)", json!([]))
            .await;
        panic!("timed out waiting for {what}; the page shows: {text}");
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine;
        let data = self.command("GET", "/screenshot", &Value::Null).await;
        let png = data
            .as_str()
            .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok());
        if let Some(bytes) = png {
            let _ = std::fs::create_dir_all(path.parent().unwrap());
            let _ = std::fs::write(path, bytes);
        }
    }

    /// Ends the session and the driver.
    pub async fn quit(mut self) {
        let _ = self.http.delete(&self.base).send().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
