//! The Dockerfile cannot be built here (no Docker engine), so this checks that it agrees
//! with the code: the binary it builds and runs, the port it exposes and listens on, the
//! user it runs as (and owns the data volume), the settings it passes by environment, and
//! that its health check calls the binary's own probe.

use crate::helpers::root;

fn dockerfile() -> String {
    std::fs::read_to_string(root().join("Dockerfile")).unwrap()
}

/// The instructions of the final stage, joined across line continuations.
fn runtime_stage(text: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let stage_start = joined.rfind("\nFROM ").expect("a FROM line");
    joined[stage_start..]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn instruction<'a>(stage: &'a [String], name: &str) -> Vec<&'a str> {
    stage
        .iter()
        .filter_map(|l| l.strip_prefix(&format!("{name} ")))
        .collect()
}

#[test]
fn the_dockerfile_agrees_with_the_code() {
    let text = dockerfile();
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        cargo.contains("name = \"sessiongraph\"\npath = \"src/main.rs\""),
        "the binary is sessiongraph"
    );

    // Builds with cargo-chef, locked, the binary of Cargo.toml.
    assert!(text.contains("cargo chef cook --release --locked"));
    assert!(text.contains("cargo build --release --locked --bin sessiongraph"));
    assert_eq!(
        text.matches("FROM rust:${RUST_VERSION}").count(),
        1,
        "one Rust version for every build stage"
    );

    let stage = runtime_stage(&text);
    assert!(
        stage[0].contains(":nonroot"),
        "a non-root runtime image: {}",
        stage[0]
    );
    assert_eq!(
        instruction(&stage, "COPY")[0],
        "--from=builder /app/target/release/sessiongraph /usr/local/bin/sessiongraph"
    );
    assert_eq!(
        instruction(&stage, "ENTRYPOINT"),
        ["[\"/usr/local/bin/sessiongraph\"]"]
    );
    assert_eq!(instruction(&stage, "CMD"), ["[\"serve\"]"]);

    // The user: not root, and the owner of the data volume.
    let user = instruction(&stage, "USER")[0];
    assert!(!user.starts_with('0') && !user.starts_with("root"), "{user}");
    assert!(
        instruction(&stage, "COPY")[1].starts_with(&format!("--from=builder --chown={user} /out/data /data"))
    );
    assert_eq!(instruction(&stage, "VOLUME"), ["[\"/data\"]"]);

    // The port: what it exposes is what the server listens on and what the probe calls.
    assert_eq!(instruction(&stage, "EXPOSE"), ["8080"]);
    let env = instruction(&stage, "ENV").join(" ");
    assert!(env.contains("SESSIONGRAPH_LISTEN=0.0.0.0:8080"), "{env}");
    assert!(env.contains("SESSIONGRAPH_DATA_DIR=/data"), "{env}");
    let health = instruction(&stage, "HEALTHCHECK")[0];
    assert!(
        health.contains("CMD [\"/usr/local/bin/sessiongraph\", \"healthcheck\", \"--url\", \"http://127.0.0.1:8080/healthz\"]"),
        "{health}"
    );

    // The environment variables it sets are the ones `serve` reads, and the allocator's;
    // docs/configuration.md explains each.
    let configuration = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let config = std::fs::read_to_string(root().join("src/config.rs")).unwrap();
    for var in env
        .split_whitespace()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
    {
        if var.starts_with("MIMALLOC_") {
            assert!(
                configuration.contains(var),
                "{var} is not explained in docs/configuration.md"
            );
            continue;
        }
        assert!(
            config.contains(&format!("env = \"{var}\"")),
            "{var} is not a serve setting"
        );
        assert!(
            configuration.contains(var),
            "{var} is not in docs/configuration.md"
        );
    }
}

#[test]
fn the_healthcheck_probe_reports_a_server() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(crate::server::TestServer::start(Default::default()));
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["healthcheck", "--url", &format!("{}/healthz", server.url)])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_sessiongraph"))
        .args(["healthcheck", "--url", &format!("{}/nope", server.url)])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("unhealthy"));
    runtime.block_on(server.stop());
}

/// `deploy/<rel>` read as YAML (anchors and merge keys applied) into JSON.
fn compose_file(rel: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("deploy").join(rel)).unwrap();
    let mut yaml: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    yaml.apply_merge().unwrap();
    yaml_serde::from_value(yaml).unwrap()
}

/// deploy/compose.yaml and the nginx configuration it shares with cluster/run.sh agree with
/// the code and with each other: the replicas are set through `serve`'s own settings (each
/// documented), built from this Dockerfile, share one database and keep a data volume each;
/// nginx balances over every replica, takes bodies as large as the server's default upload
/// limit, and answers its own 502 and 504 as the server's 503.
#[test]
fn the_compose_file_and_the_proxy_agree_with_the_code() {
    let compose = compose_file("compose.yaml");
    let config = std::fs::read_to_string(root().join("src/config.rs")).unwrap();
    let configuration = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let services = compose["services"].as_object().unwrap();
    let replicas: Vec<&String> = services
        .keys()
        .filter(|name| name.starts_with("replica"))
        .collect();
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    let mut volumes = Vec::new();
    for name in &replicas {
        let replica = &services[name.as_str()];
        assert_eq!(replica["build"]["dockerfile"], "Dockerfile", "{name}");
        assert_eq!(replica["build"]["context"], "..", "{name}");
        let env = replica["environment"].as_object().unwrap();
        for var in env.keys() {
            assert!(
                config.contains(&format!("env = \"{var}\"")),
                "{name}: {var} is not a serve setting"
            );
            assert!(
                configuration.contains(var.as_str()),
                "{name}: {var} is not in docs/configuration.md"
            );
        }
        assert_eq!(env["SESSIONGRAPH_UPLOAD_STORE"], "postgres", "{name}");
        assert!(
            env["SESSIONGRAPH_DATABASE_URL"]
                .as_str()
                .unwrap()
                .contains("@postgres:5432/"),
            "{name}: the compose file's PostgreSQL"
        );
        volumes.push(replica["volumes"][0].as_str().unwrap().to_owned());
    }
    assert!(
        volumes.iter().all(|v| v.ends_with(":/data")),
        "the image's data volume: {volumes:?}"
    );
    volumes.dedup();
    assert_eq!(volumes.len(), 3, "a data volume each: {volumes:?}");
    assert_eq!(
        services["s3"]["build"]["target"], "s3s-fs",
        "the S3 server is the Dockerfile's stage"
    );
    assert!(dockerfile().contains(" AS s3s-fs\n"));

    // The S3 override passes the S3 upload store's flags to every replica.
    let s3 = compose_file("compose.s3.yaml");
    for name in &replicas {
        let command: Vec<&str> = s3["services"][name.as_str()]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(command[..3], ["serve", "--upload-store", "s3"], "{name}");
        assert!(command.contains(&"--s3-bucket"), "{name}");
    }

    // nginx: the shared configuration, over every replica.
    let nginx = &services["nginx"];
    let mounts: Vec<&str> = nginx["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        mounts.iter().any(|m| m.starts_with("./nginx/nginx.conf:")),
        "{mounts:?}"
    );
    let upstreams = std::fs::read_to_string(root().join("deploy/nginx/compose/upstreams.conf")).unwrap();
    for name in &replicas {
        assert!(
            upstreams.contains(&format!("server {name}:8080 ")),
            "{name} is not an upstream"
        );
    }
    let script = std::fs::read_to_string(root().join("cluster/run.sh")).unwrap();
    assert!(
        script.contains("cp deploy/nginx/nginx.conf "),
        "cluster/run.sh tests the same configuration"
    );
    let conf = std::fs::read_to_string(root().join("deploy/nginx/nginx.conf")).unwrap();
    assert!(
        config.contains("env = \"SESSIONGRAPH_MAX_UPLOAD_BYTES\", default_value = \"1G\""),
        "the upload limit nginx allows is the server's default"
    );
    assert!(conf.contains("client_max_body_size 1g;"));
    assert!(conf.contains("error_page 502 504 =503 @unavailable;"));
    assert!(conf.contains("add_header Retry-After 2 always;"));
    assert!(
        conf.contains("proxy_intercept_errors off;"),
        "the replicas' own errors pass through"
    );
}
