#!/usr/bin/env bash
# First request for a disk session that is not parsed yet: the time from request to the
# last byte of the body, when the server has to read, parse and render the session first.
#
#   benches/first_request.sh [COPIES] [RUNS]     (defaults: 11 copies of the sample ~ 30 MB, 7 runs)
#
# Writes the CommuGraph sample scaled COPIES times into a temporary sessions directory, then
# for each of annotations, workflow and chatlog starts a fresh server RUNS times (on
# 127.0.0.1) and times its first request with curl. Prints the median, fastest and slowest.
set -euo pipefail

COPIES=${1:-11}
RUNS=${2:-7}
PORT=${SG_PORT:-18082}
SAMPLE=ab51623b-c26d-45f5-b98e-f9d0cfa17018

cd "$(dirname "$0")/.."
command -v curl >/dev/null || { echo "first_request.sh: curl is missing" >&2; exit 2; }

work=$(mktemp -d)
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --locked --quiet --bin sessiongraph --example scale
./target/release/examples/scale fixtures/commugraph-sample "$work/sessions/project" -n "$COPIES"

printf '%-12s %10s %10s %10s\n' view "median s" "fastest s" "slowest s"
for view in annotations workflow chatlog; do
    times=()
    for _ in $(seq "$RUNS"); do
        RUST_LOG=warn ./target/release/sessiongraph serve --listen "127.0.0.1:$PORT" \
            --data-dir "$work/data" --sessions-dir "$work/sessions" >"$work/server.log" 2>&1 &
        server=$!
        for _ in $(seq 100); do
            curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
            sleep 0.05
        done
        times+=("$(curl -fsS -o /dev/null -w '%{time_total}' "http://127.0.0.1:$PORT/api/graph/$SAMPLE/$view")")
        kill "$server"
        wait "$server" 2>/dev/null || true
        server=""
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v view="$view" '
        { t[NR] = $1 }
        END { printf "%-12s %10.3f %10.3f %10.3f\n", view, t[int((NR + 1) / 2)], t[1], t[NR] }'
done
