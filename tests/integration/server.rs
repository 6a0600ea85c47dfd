//! A real server on 127.0.0.1:0 for the HTTP tests, driven with reqwest.

use std::path::{Path, PathBuf};

use reqwest::multipart::{Form, Part};
use reqwest::StatusCode;
use serde_json::Value;
use sessiongraph::store::StoreConfig;
use sessiongraph::{ApiConfig, AppSettings, AppState};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How to start a test server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where uploads go (`None`: a fresh temporary directory).
    pub data_dir: Option<PathBuf>,
    /// Sessions directories to serve.
    pub sessions_dirs: Vec<PathBuf>,
    /// Largest upload.
    pub max_upload_bytes: usize,
    /// Cache budget.
    pub cache_bytes: usize,
    /// Render budget.
    pub render_budget_bytes: usize,
    /// API keys (none: open).
    pub api_keys: Vec<String>,
    /// Refuse uploads and deletions.
    pub read_only: bool,
    /// Origins allowed by CORS.
    pub cors_origins: Vec<String>,
    /// How long a request may take.
    pub request_timeout: std::time::Duration,
    /// How long a client may take to send its headers.
    pub header_read_timeout: std::time::Duration,
    /// The labeling codebook (`None`: the built-in one).
    pub codebook: Option<sessiongraph::labels::Codebook>,
    /// Count sessions on disk in the background after the start (off: listings stay as the
    /// scan left them, for tests that look at parsing).
    pub background_counts: bool,
    /// The label database (`None`: SQLite in the data directory).
    pub database_url: Option<String>,
    /// Where uploads are kept (PostgreSQL needs `database_url` to name a PostgreSQL
    /// database).
    pub upload_store: sessiongraph::store::UploadStoreKind,
    /// The bucket, with S3.
    pub s3: sessiongraph::store::S3Settings,
    /// Reviewers, blind mode, the queue's reservation time.
    pub label_policy: sessiongraph::labels::LabelPolicy,
    /// The memory bound sessions are loaded under.
    pub memory_bound: Option<sessiongraph::core::memory_bound::MemoryBound>,
    /// Host names answered besides loopback ones (the server listens on 127.0.0.1).
    pub allowed_hosts: Vec<String>,
    /// Full-text search.
    pub search: sessiongraph::search::SearchConfig,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            data_dir: None,
            sessions_dirs: Vec::new(),
            max_upload_bytes: 64 << 20,
            cache_bytes: 1 << 30,
            render_budget_bytes: 512 << 20,
            api_keys: Vec::new(),
            read_only: false,
            cors_origins: Vec::new(),
            request_timeout: std::time::Duration::from_secs(300),
            header_read_timeout: std::time::Duration::from_secs(30),
            codebook: None,
            background_counts: false,
            database_url: None,
            upload_store: Default::default(),
            s3: Default::default(),
            label_policy: Default::default(),
            memory_bound: Some(Default::default()),
            allowed_hosts: Vec::new(),
            search: Default::default(),
        }
    }
}

/// A running server.
pub struct TestServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// A client that does not follow redirects.
    pub client: reqwest::Client,
    /// The server's state (to look at the store).
    pub state: AppState,
    /// The data directory.
    pub data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// A response: status, headers and the body parsed as JSON (`Null` when it is not JSON).
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
    pub json: Value,
}

impl Reply {
    /// Reads a response whole. A body cut short (the server may close the connection after
    /// refusing a request) reads as what arrived.
    pub async fn read(response: reqwest::Response) -> Reply {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.unwrap_or_default().to_vec();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            bytes,
            json,
        }
    }
}

impl TestServer {
    /// Starts a server and waits until it is ready.
    pub async fn start(options: Options) -> TestServer {
        let (temp, data_dir) = match options.data_dir {
            Some(d) => (None, d),
            None => {
                let t = tempfile::tempdir().unwrap();
                let p = t.path().to_owned();
                (Some(t), p)
            }
        };
        let database_url = match options.database_url {
            Some(url) => url,
            None => sessiongraph::labels::store::default_url(&data_dir).unwrap(),
        };
        let state = AppState::build(AppSettings {
            store: StoreConfig {
                data_dir: Some(data_dir.clone()),
                sessions_dirs: options.sessions_dirs,
                cache_bytes: options.cache_bytes,
                background_counts: options.background_counts,
                render_budget_bytes: options.render_budget_bytes,
                memory_bound: options.memory_bound,
            },
            api: ApiConfig {
                max_upload_bytes: options.max_upload_bytes,
                request_timeout: options.request_timeout,
                header_read_timeout: options.header_read_timeout,
                cors_origins: options
                    .cors_origins
                    .iter()
                    .map(|o| o.parse().expect("a valid origin"))
                    .collect(),
                api_keys: sessiongraph::api::auth::ApiKeys::new(&options.api_keys),
                read_only: options.read_only,
                allowed_hosts: sessiongraph::api::origin::AllowedHosts::new(true, &options.allowed_hosts),
            },
            codebooks: sessiongraph::labels::Codebooks::with(options.codebook.into_iter().collect())
                .expect("the codebooks load"),
            database_url,
            upload_store: options.upload_store,
            s3: options.s3,
            label_policy: options.label_policy,
            search: options.search,
        })
        .await
        .expect("the store and the label database open");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(sessiongraph::run(listener, state.clone(), async {
            let _ = rx.await;
        }));
        // Idle connections are dropped well before the server closes them (its header read
        // timeout, 30 s here): one reused just as the server closes it fails the request
        // with a broken pipe, as a long test once saw.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(std::time::Duration::from_secs(5))
            .build()
            .unwrap();
        let server = TestServer {
            url,
            client,
            state,
            data_dir,
            _temp: temp,
            shutdown: Some(tx),
            task: Some(task),
        };
        for _ in 0..500 {
            if server.get("/readyz").await.status == StatusCode::OK {
                return server;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the server did not become ready");
    }

    /// `POST`s `body` (JSON) to `path`, with `headers`.
    pub async fn post_json(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Reply {
        let mut request = self.client.post(format!("{}{path}", self.url)).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::read(request.send().await.unwrap()).await
    }

    /// Sends `method` to `path` with `body` (JSON, if any) and `headers`.
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = self.client.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(body);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::read(request.send().await.unwrap()).await
    }

    /// `POST`s raw `body` to `path`, with `headers`.
    pub async fn post_bytes(&self, path: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Reply {
        let mut request = self.client.post(format!("{}{path}", self.url)).body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::read(request.send().await.unwrap()).await
    }

    /// Stops the server, letting requests in flight finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
        self.state.store.close().await;
        self.state.labels.close().await;
    }

    /// The id of the first session `/api/sessions` lists (with request `headers`).
    pub async fn first_session(&self, headers: &[(&str, &str)]) -> String {
        let listed = self.get_with("/api/sessions", headers).await;
        listed.json["sessions"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no session listed: {}", listed.json))
            .to_owned()
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> Reply {
        self.get_with(path, &[]).await
    }

    /// GET `path` with request `headers`.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = self.client.get(format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::read(request.send().await.unwrap()).await
    }

    /// Uploads the fixture at `fixtures/<rel>` as `framework` and returns its id; panics
    /// unless the upload is accepted. See [`TestServer::upload_fixture_reply`].
    pub async fn upload_fixture(&self, framework: &str, rel: &str) -> String {
        graph_id(&self.upload_fixture_reply(framework, rel).await)
    }

    /// Uploads the fixture at `fixtures/<rel>` as `framework` and returns the reply: a
    /// directory's logs in one multipart upload (field `file`, main log first, then its
    /// agents), a file as a raw upload under its own name.
    pub async fn upload_fixture_reply(&self, framework: &str, rel: &str) -> Reply {
        let path = crate::helpers::fixture(rel);
        if path.is_dir() {
            self.upload_multipart(&[("framework", framework)], "file", &fixture_files(&path))
                .await
        } else {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            self.upload_raw(&format!("framework={framework}&filename={name}"), bytes)
                .await
        }
    }

    /// GET `path` with `If-None-Match: etag` (the reply's body is not read as JSON).
    pub async fn get_if_none_match(&self, path: &str, etag: &str) -> Reply {
        let r = self
            .client
            .get(format!("{}{path}", self.url))
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        Reply {
            status: r.status(),
            headers: r.headers().clone(),
            bytes: r.bytes().await.unwrap().to_vec(),
            json: Value::Null,
        }
    }

    /// DELETE `path`.
    pub async fn delete(&self, path: &str) -> Reply {
        Reply::read(
            self.client
                .delete(format!("{}{path}", self.url))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// A multipart upload: `fields` are text fields, `files` go in field `file_field`.
    pub async fn upload_multipart(
        &self,
        fields: &[(&str, &str)],
        file_field: &str,
        files: &[(String, Vec<u8>)],
    ) -> Reply {
        let r = self
            .client
            .post(format!("{}/api/upload", self.url))
            .multipart(upload_form(fields, file_field, files))
            .send()
            .await
            .unwrap();
        Reply::read(r).await
    }

    /// A raw upload: the body is the file.
    pub async fn upload_raw(&self, query: &str, body: Vec<u8>) -> Reply {
        let r = self
            .client
            .post(format!("{}/api/upload?{query}", self.url))
            .body(body)
            .send()
            .await
            .unwrap();
        Reply::read(r).await
    }
}

impl TestServer {
    /// Sends only the head of a POST whose declared body is `length` bytes, and reads the
    /// answer: for a body over the limit, the server refuses without reading it.
    pub async fn post_head_only(&self, path: &str, content_type: &str, length: usize) -> Reply {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.url.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(response.len(), |p| p + 4);
        let head = String::from_utf8_lossy(&response[..split]);
        let status = StatusCode::from_u16(head[9..12].parse().unwrap()).unwrap();
        let mut headers = reqwest::header::HeaderMap::new();
        for line in head.lines().skip(1) {
            if let Some((k, v)) = line.split_once(':') {
                if let (Ok(k), Ok(v)) = (
                    reqwest::header::HeaderName::from_bytes(k.trim().as_bytes()),
                    reqwest::header::HeaderValue::from_str(v.trim()),
                ) {
                    headers.insert(k, v);
                }
            }
        }
        let bytes = response[split..].to_vec();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            bytes,
            json,
        }
    }
}

/// The id of an accepted upload; panics, showing the reply's body, unless `reply` is a 200.
pub fn graph_id(reply: &Reply) -> String {
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the upload was refused: {}",
        reply.json
    );
    reply.json["graph_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an accepted upload without graph_id: {}", reply.json))
        .to_owned()
}

/// A multipart upload body: `fields` are text fields, `files` go in field `file_field`.
pub fn upload_form(fields: &[(&str, &str)], file_field: &str, files: &[(String, Vec<u8>)]) -> Form {
    let mut form = Form::new();
    for (k, v) in fields {
        form = form.text(k.to_string(), v.to_string());
    }
    for (name, bytes) in files {
        form = form.part(
            file_field.to_owned(),
            Part::bytes(bytes.clone()).file_name(name.clone()),
        );
    }
    form
}

/// The files of a fixture directory, main log first, then agents by name.
pub fn fixture_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort_by_key(|(n, _)| (n.starts_with("agent-"), n.clone()));
    files
}
