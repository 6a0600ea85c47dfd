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
# binary; the runtime image (the last stage, what `docker build .` makes) is distroless,
# holds only the binary, and runs as non-root. The `s3s-fs` stage is an S3-compatible
# server for deploy/compose.yaml, built only when asked for (`--target s3s-fs`).

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

# An S3-compatible server for deploy/compose.yaml, not part of the sessiongraph image:
# s3s-fs from crates.io, serving a directory, with the bucket `sessiongraph` in it.
#   docker build --target s3s-fs -t sessiongraph-s3s-fs .
FROM chef AS s3s-fs-builder
RUN cargo install s3s-fs --version 0.14.1 --features binary --locked --root /out \
 && mkdir -p /out/s3/sessiongraph

FROM gcr.io/distroless/cc-debian12:nonroot AS s3s-fs
COPY --from=s3s-fs-builder /out/bin/s3s-fs /usr/local/bin/s3s-fs
COPY --from=s3s-fs-builder --chown=65532:65532 /out/s3 /data
USER 65532:65532
EXPOSE 8014
VOLUME ["/data"]
ENTRYPOINT ["/usr/local/bin/s3s-fs"]
CMD ["--host", "0.0.0.0", "--port", "8014", "/data"]

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
