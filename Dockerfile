# syntax=docker/dockerfile:1
# sessiongraph: one container serving the REST API on port 8080.
#
#   docker build -t sessiongraph .
#   docker run -p 8080:8080 -v sessiongraph-data:/data \
#     -v ~/.claude/projects:/sessions:ro -e SESSIONGRAPH_SESSIONS_DIRS=/sessions sessiongraph
#
# The image holds no fixtures: without SESSIONGRAPH_SESSIONS_DIRS it serves uploads only
# (and warns so at start); a sessions directory named but not mounted stops it.
#
# Stages: cargo-chef plans and builds the dependencies once (a cached layer), then the
# binary; the runtime image is distroless, holds only the binary, and runs as non-root.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS chef
RUN cargo install cargo-chef --locked --version 0.1.78
WORKDIR /app

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS builder
COPY --from=planner /app/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json
COPY . .
RUN cargo build --release --locked --bin sessiongraph \
 && mkdir -p /out/data

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=builder /app/target/release/sessiongraph /usr/local/bin/sessiongraph
COPY --from=builder --chown=65532:65532 /out/data /data
USER 65532:65532
ENV SESSIONGRAPH_LISTEN=0.0.0.0:8080 \
    SESSIONGRAPH_DATA_DIR=/data \
    SESSIONGRAPH_LOG_FORMAT=json
# The allocator returns freed memory at once and without transparent huge pages: a server
# that runs for weeks stays near its cache budget (docs/performance.md, "Memory over time").
ENV MIMALLOC_ALLOW_THP=0 \
    MIMALLOC_PURGE_DELAY=0
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/sessiongraph", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/sessiongraph"]
CMD ["serve"]
