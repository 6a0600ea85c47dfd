#!/usr/bin/env bash
# The AutoGen logs of review finding F10 and of the `?step` cut of a graph of many agents,
# measured on a release server: peak RSS (VmHWM) of uploading each log, and of a server
# start that counts a sessions directory holding it; then the time of the whole graph and
# of cuts of the graph of 100,000 agents.
#
#   benches/autogen_memory.sh [SERVER_BINARY]    (default: target/release/sessiongraph, built)
#
# With a binary given (another build, to compare), nothing is built: the logs are written by
# $SG_GENERATOR (default: target/release/examples/autogen_inputs).
# The logs are written by `examples/autogen_inputs.rs`. The bound of each is four times its
# size plus 100 MiB (the defaults of --memory-per-input-byte and --memory-allowance).
set -euo pipefail

cd "$(dirname "$0")/.."
PORT=${SG_PORT:-18094}
command -v curl >/dev/null || { echo "autogen_memory.sh: curl is missing" >&2; exit 2; }

if [ -z "${1:-}" ]; then
    cargo build --release --locked --quiet --bin sessiongraph --example autogen_inputs
fi
BIN=${1:-./target/release/sessiongraph}
GENERATOR=${SG_GENERATOR:-./target/release/examples/autogen_inputs}

work=$(mktemp -d)
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$GENERATOR" "$work/logs" >/dev/null

# Starts a server on a fresh data directory, with the sessions directory $1 if given
# (an empty $1 for none) and further flags.
start() {
    local sessions=()
    [ -n "${1:-}" ] && sessions=(--sessions-dir "$1")
    shift || true
    RUST_LOG=info "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$(mktemp -d -p "$work")" \
        "${sessions[@]}" "$@" >"$work/server.log" 2>&1 &
    server=$!
    for _ in $(seq 200); do
        curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && return
        sleep 0.05
    done
    echo "the server did not start" >&2
    exit 1
}

stop() {
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=""
}

peak_mib() {
    awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status"
}

bound_mib() {
    local bytes
    bytes=$(stat -c %s "$1")
    awk -v b="$bytes" 'BEGIN { printf "%.0f", (4 * b) / 1048576 + 100 }'
}

printf '%-22s %-8s %12s %10s %12s\n' log size_MiB upload "peak MiB" "bound MiB"
for log in empty-objects.json small-messages.jsonl agentchat-dump.json; do
    start
    status=$(curl -sS -o "$work/answer.json" -w '%{http_code}' \
        --data-binary "@$work/logs/$log" "http://127.0.0.1:$PORT/api/upload?framework=autogen&filename=$log")
    size=$(stat -c %s "$work/logs/$log" | awk '{ printf "%.1f", $1 / 1048576 }')
    printf '%-22s %-8s %12s %10s %12s\n' "$log" "$size" "$status" "$(peak_mib)" "$(bound_mib "$work/logs/$log")"
    stop
done

printf '\n%-22s %12s %10s %12s\n' "sessions directory" counted "peak MiB" "bound MiB"
for log in small-messages.jsonl agentchat-dump.json; do
    mkdir -p "$work/dir-$log/project"
    cp "$work/logs/$log" "$work/dir-$log/project/"
    start "$work/dir-$log"
    for _ in $(seq 1200); do
        grep -q "counted the sessions on disk" "$work/server.log" && break
        sleep 0.05
    done
    counted=$(grep -o 'counted=[0-9]*' "$work/server.log" | head -1)
    printf '%-22s %12s %10s %12s\n' "$log" "${counted:-none}" "$(peak_mib)" "$(bound_mib "$work/logs/$log")"
    stop
done

# The graph of many agents, loaded whatever it costs (its 100,000 tiny messages are past
# the default bound).
printf '\n%-28s %8s %10s\n' "agents-100k.jsonl graph" status seconds
start "" --memory-per-input-byte inf
id=$(curl -fsS --data-binary "@$work/logs/agents-100k.jsonl" \
    "http://127.0.0.1:$PORT/api/upload?framework=autogen&filename=agents-100k.jsonl" |
    sed -n 's/.*"graph_id":"\([^"]*\)".*/\1/p')
for query in "" "?step=1000" "?step=50000" "?step=99998"; do
    curl -sS -o /dev/null -w "%{http_code} %{time_total}\n" "http://127.0.0.1:$PORT/api/graph/$id$query" |
        awk -v q="whole$query" '{ printf "%-28s %8s %10s\n", q, $1, $2 }'
done
stop
