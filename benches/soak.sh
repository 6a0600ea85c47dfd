#!/usr/bin/env bash
# Soak: a release server on 127.0.0.1 with a small cache budget, under mixed uploads, reads,
# listings and deletions from several clients for a bounded time. Reports errors (expected:
# none), latency percentiles and the server's resident memory over time (expected: flat
# once the cache budget is reached). Stops by itself.
#
#   benches/soak.sh [SECONDS] [CLIENTS] [CACHE]     (defaults: 180 s, 8 clients, 64M)
#
# The server inherits the environment: MIMALLOC_ALLOW_THP=0 MIMALLOC_PURGE_DELAY=0 measure
# it as the Docker image runs it (docs/performance.md, "Memory over time").
set -euo pipefail

SECONDS_TO_RUN=${1:-180}
CLIENTS=${2:-8}
CACHE=${3:-64M}
PORT=${SG_PORT:-18083}

cd "$(dirname "$0")/.."
work=$(mktemp -d)
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --locked --quiet --bin sessiongraph --example soak
RUST_LOG=warn ./target/release/sessiongraph serve --listen "127.0.0.1:$PORT" \
    --data-dir "$work/data" --sessions-dir fixtures --cache-bytes "$CACHE" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

status=0
./target/release/examples/soak --url "http://127.0.0.1:$PORT" --pid "$server" \
    --seconds "$SECONDS_TO_RUN" --clients "$CLIENTS" --fixtures fixtures || status=$?
if ! kill -0 "$server" 2>/dev/null; then
    echo "soak: the server died" >&2
    status=1
fi
echo "server log: $(grep -c . "$work/server.log" || true) lines at warn or above"
grep -m 5 . "$work/server.log" || true
exit $status
