#!/usr/bin/env bash
# Load benchmark: cached bodies served by sessiongraph against the same bytes served by nginx.
#
#   benches/load.sh [CONNECTIONS] [SECONDS]      (defaults: 64 connections, 10 s)
#
# Starts sessiongraph (release build) on 127.0.0.1 serving the bundled fixtures, warms the
# CommuGraph sample's `annotations`, `workflow` and `info` bodies, copies them into a
# directory that nginx serves on another loopback port, then runs wrk against each URL on
# both servers and prints requests/s and latency percentiles side by side. Everything
# listens on 127.0.0.1 and is stopped on exit. Needs `wrk` and `nginx` (Debian: apt-get
# install wrk nginx); run from anywhere in the repository.
set -euo pipefail

CONNECTIONS=${1:-64}
SECONDS_PER_RUN=${2:-10}
THREADS=2
SG_PORT=${SG_PORT:-18080}
NGINX_PORT=${NGINX_PORT:-18081}
SAMPLE=ab51623b-c26d-45f5-b98e-f9d0cfa17018

cd "$(dirname "$0")/.."
for tool in wrk nginx curl; do
    command -v "$tool" >/dev/null || { echo "load.sh: $tool is missing (apt-get install wrk nginx curl)" >&2; exit 2; }
done

work=$(mktemp -d)
chmod 755 "$work"   # nginx workers may run as another user
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --locked --quiet
RUST_LOG=warn ./target/release/sessiongraph serve \
    --listen "127.0.0.1:$SG_PORT" --data-dir "$work/data" --sessions-dir fixtures \
    >"$work/sessiongraph.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$SG_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

mkdir -p "$work/www/api/graph/$SAMPLE"
paths=("api/graph/$SAMPLE/annotations" "api/graph/$SAMPLE/workflow" "api/graph/$SAMPLE/info")
for path in "${paths[@]}"; do
    curl -fsS "http://127.0.0.1:$SG_PORT/$path" -o "$work/www/$path"
done

cat >"$work/nginx.conf" <<EOF
worker_processes $THREADS;
error_log $work/nginx-error.log;
pid $work/nginx.pid;
daemon off;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    default_type application/json;
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp;
    scgi_temp_path $work/tmp;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $work/www;
    }
}
EOF
mkdir -p "$work/tmp"
nginx -p "$work" -c "$work/nginx.conf" &
pids+=($!)
for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:$NGINX_PORT/${paths[2]}" >/dev/null 2>&1 && break
    sleep 0.1
done

# Prints "requests/s p50 p99" of one wrk run.
measure() {
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --latency "$1" |
        awk '
            function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
            /^ +50%/ { p50 = ms($2) }
            /^ +99%/ { p99 = ms($2) }
            /^Requests\/sec/ { rps = $2 }
            /Non-2xx/ { bad = $NF }
            END { printf "%.0f %.2f %.2f %s\n", rps, p50, p99, (bad == "" ? 0 : bad) }'
}

printf '%-12s %10s | %12s %8s %8s | %12s %8s %8s | %6s\n' \
    view bytes "sg req/s" "p50 ms" "p99 ms" "nginx req/s" "p50 ms" "p99 ms" ratio
for path in "${paths[@]}"; do
    bytes=$(stat -c %s "$work/www/$path")
    read -r sg_rps sg_p50 sg_p99 sg_bad < <(measure "http://127.0.0.1:$SG_PORT/$path")
    read -r ng_rps ng_p50 ng_p99 ng_bad < <(measure "http://127.0.0.1:$NGINX_PORT/$path")
    if [ "$sg_bad$ng_bad" != "00" ]; then
        echo "load.sh: non-2xx answers (sessiongraph $sg_bad, nginx $ng_bad)" >&2
    fi
    ratio=$(awk -v a="$sg_rps" -v b="$ng_rps" 'BEGIN { printf "%.2f", a / b }')
    printf '%-12s %10s | %12s %8s %8s | %12s %8s %8s | %6s\n' \
        "${path##*/}" "$bytes" "$sg_rps" "$sg_p50" "$sg_p99" "$ng_rps" "$ng_p50" "$ng_p99" "$ratio"
done
