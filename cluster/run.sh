#!/usr/bin/env bash
# cluster/run.sh: three sessiongraph replicas behind nginx on one machine, a team's day of
# load through nginx with faults injected, then a check of every replica.
#
#   cluster/run.sh [--upload-store s3|postgres] [--duration SECS] [--phase-secs SECS]
#                  [--seed N] [--kills N] [--pg-restarts N] [--out DIR] [--keep] [--skip-build]
#
# What it starts, each on 127.0.0.1 only and on a free port, all under one temporary
# directory that is removed at the end (also on failure or Ctrl-C; --keep leaves it):
#   - a private PostgreSQL (Debian's /usr/lib/postgresql/<newest>/bin: initdb, pg_ctl) on a
#     data directory of its own, run as the `postgres` user when this runs as root; the
#     system's cluster is never touched;
#   - with --upload-store s3 (the default when the binary has --s3-bucket), s3s-fs
#     (`cargo install s3s-fs --version 0.14.1 --features binary --locked` when missing) on
#     a directory of its own, with a bucket created through the S3 API;
#   - sessiongraph replicas (`cargo build --release --locked`), each with its own data
#     directory, all on the one PostgreSQL, uploads in PostgreSQL or S3, with named API
#     keys for 36 annotators, a reviewer (`lead`) and a service key;
#   - nginx (`apt-get install -y nginx` when missing) with deploy/nginx/nginx.conf, the
#     configuration deploy/compose.yaml uses too: round robin, no stickiness, refused
#     connections retried on the next replica, 503 with Retry-After when none answers.
#
# Then, with examples/cluster_day.rs as the team (uploads, every view, searches, exports,
# rounds with 32 annotators taking units from the round's queue and 4 from its sessions'
# queues):
#   1. one-replica:    nginx over replica 1 alone, --phase-secs (60) of load;
#   2. three-replicas: replicas 2 and 3 started, nginx reloaded over the three, the same load;
#   3. faults:         --duration (240) of load; at a quarter of it replica 2 is killed
#                      (kill -9) and restarted 10 s later; at 60% PostgreSQL is restarted
#                      (pg_ctl restart -m fast). --kills N spreads N kills over the first
#                      half (replicas 2, 3, 1, ... in turn), --pg-restarts N spreads N
#                      restarts over 60% to 90%.
# --seed N (1) seeds the phases' choices (N, N+1, N+2): another seed, another day.
# Finally `cluster_day verify` reads every phase's results and asks every replica
# directly: each acknowledged upload present and byte-identical (its main file as sent,
# its views the same on every replica and as parsed here), each acknowledged label
# present with its value, no unit handed out beyond its round's overlap, every error a
# 503 with Retry-After (no 500, no 502 or 504 reaching the client); and prints p50 and
# p99 latency per route for each phase, and the markdown table comparing one replica
# with three. The exit status is the check's: 0 when every check passed.
#
# Results (each phase's JSON, faults.json, verify.json, latency.md, the replicas',
# PostgreSQL's and nginx's logs) go to --out, by default
# ${CARGO_TARGET_DIR:-target}/cluster/<date>-<time>.
#
# Needs: Debian with PostgreSQL installed (apt-get install postgresql), a Rust toolchain,
# python3 (to find free ports), curl; root or the postgres user's rights for PostgreSQL.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

UPLOAD_STORE=""
DURATION=240
PHASE_SECS=60
OUT=""
KEEP=0
SKIP_BUILD=0
SEED=1
KILLS=1
PG_RESTARTS=1
ANNOTATORS=32
SESSION_ANNOTATORS=4
S3_FS_VERSION=0.14.1

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit "${1:-0}"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --upload-store) UPLOAD_STORE=${2:?}; shift 2 ;;
        --duration) DURATION=${2:?}; shift 2 ;;
        --phase-secs) PHASE_SECS=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --seed) SEED=${2:?}; shift 2 ;;
        --kills) KILLS=${2:?}; shift 2 ;;
        --pg-restarts) PG_RESTARTS=${2:?}; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --skip-build) SKIP_BUILD=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
case "$UPLOAD_STORE" in
    ""|s3|postgres) ;;
    *) echo "--upload-store: s3 or postgres, not '$UPLOAD_STORE'" >&2; exit 2 ;;
esac

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release/sessiongraph
DAY=$TARGET/release/examples/cluster_day
OUT=${OUT:-$TARGET/cluster/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

log() {
    printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    else
        sudo -n "$@"
    fi
}

# Runs a PostgreSQL binary as the postgres user (PostgreSQL refuses to run as root).
as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

now_ms() {
    date +%s%3N
}

# A free TCP port on 127.0.0.1 (the kernel's pick; free when asked).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Waits up to $2 seconds for $1 to answer 200.
wait_http() {
    local url=$1 limit=$2 i
    for ((i = 0; i < limit * 10; i++)); do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url" 2>/dev/null)" = 200 ]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# --- Tools -----------------------------------------------------------------------------

PG_BIN=$(find /usr/lib/postgresql -maxdepth 3 -path '*/bin/initdb' 2>/dev/null | sort -V | tail -n 1 | xargs -r dirname)
if [ -z "$PG_BIN" ]; then
    echo "PostgreSQL's binaries are not installed (apt-get install postgresql)" >&2
    exit 1
fi
if ! command -v nginx >/dev/null 2>&1; then
    log "installing nginx"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [ "$SKIP_BUILD" -eq 0 ]; then
    log "building sessiongraph and cluster_day (release)"
    cargo build --release --locked --bin sessiongraph --example cluster_day
fi
for f in "$BIN" "$DAY"; do
    [ -x "$f" ] || { echo "missing $f (build without --skip-build)" >&2; exit 1; }
done

# s3 when the binary has the S3 upload store, unless told otherwise.
if "$BIN" serve --help | grep -q -- '--s3-bucket'; then
    HAS_S3=1
else
    HAS_S3=0
fi
if [ -z "$UPLOAD_STORE" ]; then
    if [ "$HAS_S3" -eq 1 ]; then UPLOAD_STORE=s3; else UPLOAD_STORE=postgres; fi
    log "upload store: $UPLOAD_STORE (default; this binary has$([ "$HAS_S3" -eq 1 ] || echo ' no') --upload-store s3)"
elif [ "$UPLOAD_STORE" = s3 ] && [ "$HAS_S3" -eq 0 ]; then
    echo "--upload-store s3: this build of sessiongraph has no S3 upload store (no --s3-bucket in serve --help)" >&2
    exit 2
fi
if [ "$UPLOAD_STORE" = s3 ]; then
    S3FS=$(command -v s3s-fs || true)
    if [ -z "$S3FS" ]; then
        log "installing s3s-fs $S3_FS_VERSION"
        cargo install s3s-fs --version "$S3_FS_VERSION" --features binary --locked
        S3FS=$(command -v s3s-fs || echo "$HOME/.cargo/bin/s3s-fs")
    fi
fi

# --- Cleanup ---------------------------------------------------------------------------

WORK=$(mktemp -d /tmp/sessiongraph-cluster.XXXXXX)
# PostgreSQL (the postgres user) and nginx's workers (nobody) reach their directories.
chmod 755 "$WORK"
declare -a REPLICA_PID=("" "" "" "")
declare -a REPLICA_PORT=("" "" "" "")
NGINX_PID=""
S3_PID=""
DAY_PID=""
PG_STARTED=0

# Stops what was started, keeps the logs, removes the temporary directory (the EXIT trap).
# shellcheck disable=SC2317  # reached through the trap
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    [ -n "$DAY_PID" ] && kill "$DAY_PID" 2>/dev/null && wait "$DAY_PID" 2>/dev/null
    for i in 1 2 3; do
        if [ -n "${REPLICA_PID[$i]}" ]; then
            kill "${REPLICA_PID[$i]}" 2>/dev/null
            wait "${REPLICA_PID[$i]}" 2>/dev/null
        fi
    done
    if [ -n "$NGINX_PID" ]; then
        kill -QUIT "$NGINX_PID" 2>/dev/null
        wait "$NGINX_PID" 2>/dev/null
    fi
    if [ -n "$S3_PID" ]; then
        kill "$S3_PID" 2>/dev/null
        wait "$S3_PID" 2>/dev/null
    fi
    if [ "$PG_STARTED" -eq 1 ]; then
        as_postgres "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -m fast -w stop >/dev/null 2>&1
    fi
    # The logs are kept with the results.
    for f in "$WORK"/replica*.log "$WORK"/pg/postgres.log "$WORK"/nginx/error.log "$WORK"/nginx/access.log "$WORK"/s3s-fs.log; do
        [ -f "$f" ] && cp "$f" "$OUT/" 2>/dev/null
    done
    if [ "$KEEP" -eq 1 ]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- PostgreSQL ------------------------------------------------------------------------

PG_PORT=$(free_port)
PG_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
mkdir -p "$WORK/pg/data" "$WORK/pg/sock"
printf '%s\n' "$PG_PASSWORD" > "$WORK/pg/pwfile"
if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres: "$WORK/pg"
fi
chmod 700 "$WORK/pg/data"
log "PostgreSQL: initdb ($PG_BIN), port $PG_PORT"
as_postgres "$PG_BIN/initdb" -D "$WORK/pg/data" -U postgres --pwfile="$WORK/pg/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$WORK/pg/initdb.log"
as_postgres tee -a "$WORK/pg/data/postgresql.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$WORK/pg/sock'
max_connections = 200
EOF
as_postgres "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/postgres.log" -w start >/dev/null
PG_STARTED=1
as_postgres "$PG_BIN/psql" -h "$WORK/pg/sock" -p "$PG_PORT" -U postgres -q -c 'CREATE DATABASE sessiongraph' postgres
DATABASE_URL="postgres://postgres:$PG_PASSWORD@127.0.0.1:$PG_PORT/sessiongraph"

# --- S3 --------------------------------------------------------------------------------

S3_ARGS=()
if [ "$UPLOAD_STORE" = s3 ]; then
    S3_PORT=$(free_port)
    export AWS_ACCESS_KEY_ID="sg-cluster"
    AWS_SECRET_ACCESS_KEY=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    export AWS_SECRET_ACCESS_KEY
    export AWS_REGION=us-east-1
    mkdir -p "$WORK/s3"
    log "s3s-fs on port $S3_PORT"
    # s3s-fs keeps a bucket as a directory of its root.
    mkdir -p "$WORK/s3/sessiongraph"
    "$S3FS" --host 127.0.0.1 --port "$S3_PORT" --access-key "$AWS_ACCESS_KEY_ID" \
        --secret-key "$AWS_SECRET_ACCESS_KEY" "$WORK/s3" >"$WORK/s3s-fs.log" 2>&1 &
    S3_PID=$!
    for _ in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$S3_PORT/" && break
        sleep 0.1
    done
    S3_ARGS=(--s3-bucket sessiongraph --s3-prefix uploads/ --s3-endpoint "http://127.0.0.1:$S3_PORT")
fi

# --- Keys ------------------------------------------------------------------------------

# Named keys make each annotator who they are (docs/labels.md, "Identity"); `lead` is the
# reviewer who creates rounds; the plain key is the uploading service.
KEYS=$WORK/keys.txt
SECRET=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
{
    echo "# sessiongraph cluster test: NAME:KEY (named) or KEY (plain)"
    echo "lead:$SECRET-lead"
    for i in $(seq -w 1 $((ANNOTATORS + SESSION_ANNOTATORS))); do
        echo "ann$i:$SECRET-ann$i"
    done
    echo "$SECRET-service"
} > "$KEYS"
chmod 600 "$KEYS"

# --- Replicas --------------------------------------------------------------------------

start_replica() {
    local i=$1
    [ -n "${REPLICA_PORT[$i]}" ] || REPLICA_PORT[i]=$(free_port)
    mkdir -p "$WORK/replica$i/data"
    # Run from its own directory: no ./fixtures there, so it serves uploads only.
    (
        cd "$WORK/replica$i"
        exec "$BIN" serve --listen "127.0.0.1:${REPLICA_PORT[$i]}" --data-dir "$WORK/replica$i/data" \
            --database-url "$DATABASE_URL" --upload-store "$UPLOAD_STORE" "${S3_ARGS[@]}" \
            --api-key-file "$KEYS" --reviewer lead
    ) >>"$WORK/replica$i.log" 2>&1 &
    REPLICA_PID[i]=$!
    if ! wait_http "http://127.0.0.1:${REPLICA_PORT[$i]}/readyz" 60; then
        echo "replica $i did not become ready; its log:" >&2
        tail -n 30 "$WORK/replica$i.log" >&2
        exit 1
    fi
    log "replica $i ready on 127.0.0.1:${REPLICA_PORT[$i]} (pid ${REPLICA_PID[$i]})"
}

# --- nginx -----------------------------------------------------------------------------

NGINX_PORT=$(free_port)
NGINX_DIR=$WORK/nginx
mkdir -p "$NGINX_DIR"
cp deploy/nginx/nginx.conf "$NGINX_DIR/nginx.conf"
echo "listen 127.0.0.1:$NGINX_PORT;" > "$NGINX_DIR/listen.conf"

# Writes upstreams.conf with the replicas named.
nginx_upstreams() {
    local i
    : > "$NGINX_DIR/upstreams.conf"
    for i in "$@"; do
        echo "server 127.0.0.1:${REPLICA_PORT[$i]} max_fails=1 fail_timeout=2s;" >> "$NGINX_DIR/upstreams.conf"
    done
}

start_nginx() {
    "$NGINX" -t -q -p "$NGINX_DIR/" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/error.log"
    "$NGINX" -p "$NGINX_DIR/" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/error.log" -g 'daemon off;' &
    NGINX_PID=$!
    wait_http "http://127.0.0.1:$NGINX_PORT/healthz" 10
    log "nginx on 127.0.0.1:$NGINX_PORT (pid $NGINX_PID)"
}

# Reloads nginx's configuration (new workers; the old ones finish their requests).
reload_nginx() {
    "$NGINX" -t -q -p "$NGINX_DIR/" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/error.log"
    kill -HUP "$NGINX_PID"
    sleep 1
}

# --- The day ---------------------------------------------------------------------------

FAULTS=$OUT/faults.jsonl
: > "$FAULTS"
# Records fault event $1 (of replica $2, if given) with the time, for verify's windows.
fault() {
    if [ -n "${2:-}" ]; then
        printf '{"event":"%s","at_ms":%s,"replica":%s}\n' "$1" "$(now_ms)" "$2" >> "$FAULTS"
        log "fault: $1 (replica $2)"
    else
        printf '{"event":"%s","at_ms":%s}\n' "$1" "$(now_ms)" >> "$FAULTS"
        log "fault: $1"
    fi
}

run_day() {
    local phase=$1 secs=$2 seed=$3
    "$DAY" run --url "http://127.0.0.1:$NGINX_PORT" --keys "$KEYS" --phase "$phase" \
        --duration "$secs" --seed "$seed" --annotators "$ANNOTATORS" \
        --session-annotators "$SESSION_ANNOTATORS" --out "$OUT/$phase.json" &
    DAY_PID=$!
}

{
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "command: cluster/run.sh --upload-store $UPLOAD_STORE --duration $DURATION --phase-secs $PHASE_SECS --seed $SEED --kills $KILLS --pg-restarts $PG_RESTARTS"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "postgresql: $("$PG_BIN/postgres" --version)"
    echo "nginx: $("$NGINX" -v 2>&1)"
} > "$OUT/setup.txt"
cat "$OUT/setup.txt" >&2

start_replica 1
nginx_upstreams 1
start_nginx

log "phase one-replica: nginx over replica 1, ${PHASE_SECS}s"
run_day one-replica "$PHASE_SECS" "$SEED"
wait "$DAY_PID"
DAY_PID=""

start_replica 2
start_replica 3
nginx_upstreams 1 2 3
reload_nginx
log "phase three-replicas: nginx over replicas 1-3, ${PHASE_SECS}s"
run_day three-replicas "$PHASE_SECS" $((SEED + 1))
wait "$DAY_PID"
DAY_PID=""

# The faults: the kills spread over the first half (replicas 2, 3, 1, 2, ... in turn, each
# down for 10 s), the PostgreSQL restarts over 60% to 90% of the phase.
EVENTS=()
for ((k = 1; k <= KILLS; k++)); do
    EVENTS+=("$((DURATION * (2 * k - 1) / (4 * KILLS))) kill $((k % 3 + 1))")
done
for ((j = 1; j <= PG_RESTARTS; j++)); do
    EVENTS+=("$((DURATION * 6 / 10 + DURATION * 3 * (j - 1) / (10 * PG_RESTARTS))) postgres -")
done
SCHEDULE=$(printf '%s\n' "${EVENTS[@]}" | sort -n)
log "phase faults: ${DURATION}s; faults at (s, what, replica): $(echo "$SCHEDULE" | tr '\n' ';')"
STARTED=$(date +%s)
run_day faults "$DURATION" $((SEED + 2))
while read -r at what replica; do
    delay=$((STARTED + at - $(date +%s)))
    [ "$delay" -le 0 ] || sleep "$delay"
    case "$what" in
        kill)
            kill -9 "${REPLICA_PID[$replica]}"
            fault replica_killed "$replica"
            wait "${REPLICA_PID[$replica]}" 2>/dev/null || true
            REPLICA_PID[replica]=""
            sleep 10
            fault replica_restarting "$replica"
            start_replica "$replica"
            fault replica_ready "$replica"
            ;;
        postgres)
            fault postgres_restarting
            as_postgres "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/postgres.log" -m fast -w restart >/dev/null
            fault postgres_ready
            ;;
    esac
done <<< "$SCHEDULE"
wait "$DAY_PID"
DAY_PID=""

# --- Verification ----------------------------------------------------------------------

log "verifying through every replica"
REPLICA_ARGS=()
for i in 1 2 3; do
    REPLICA_ARGS+=(--replica "http://127.0.0.1:${REPLICA_PORT[$i]}")
done
status=0
"$DAY" verify "${REPLICA_ARGS[@]}" --keys "$KEYS" --faults "$FAULTS" \
    --out "$OUT/verify.json" --markdown "$OUT/latency.md" \
    "$OUT/one-replica.json" "$OUT/three-replicas.json" "$OUT/faults.json" || status=$?

# What the servers logged as failures of their own (the checks above count what the
# clients saw).
for i in 1 2 3; do
    panics=$(grep -c 'panicked' "$WORK/replica$i.log" || true)
    internal=$(grep -c 'internal error' "$WORK/replica$i.log" || true)
    log "replica $i log: $panics panics, $internal internal errors"
    [ "$panics" -eq 0 ] || status=1
done
log "results in $OUT"
exit "$status"
