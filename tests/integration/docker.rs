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
