#!/usr/bin/env bash
# Screenshots of CommuGraph's own, unmodified frontend drawing sessiongraph's answers.
#
#   docs/commugraph-frontend/run.sh COMMUGRAPH_DIR SESSIONGRAPH_BIN [OUT_DIR]
#
# COMMUGRAPH_DIR: a checkout of https://github.com/CH-chuan/CommuGraph, already installed and
#   built as its README says (`.next/BUILD_ID` must exist); this script only starts it.
# SESSIONGRAPH_BIN: a sessiongraph binary (e.g. target/release/sessiongraph).
# OUT_DIR: where screenshots and logs go (default: a new directory under /tmp).
#
# Starts, all on 127.0.0.1: sessiongraph (empty data dir), CommuGraph's Next.js server
# (`next start`), and two copies of proxy.mjs that give the browser one origin: `/api/*` to
# sessiongraph, the rest to Next.js. The first proxy (--graph-view) renames the upload's
# framework so that CommuGraph shows its node-link graph view (README.md says why); the
# second changes nothing (CommuGraph's Claude Code dialog and workflow views). shoot.mjs then
# uploads fixtures/commugraph-sample through CommuGraph's upload dialog in headless Chromium
# and takes the screenshots. Everything started is stopped on exit.
#
# Needs: node and npm (playwright-core is installed into OUT_DIR unless PLAYWRIGHT_CORE_DIR
# names a node_modules holding it), Chromium (CHROMIUM, default /usr/bin/chromium), curl.
# Ports: SG_PORT (18080), NEXT_PORT (3000), PROXY_PORT (3300), PROXY_PLAIN_PORT (3301).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,22p' "$0"
  exit 2
fi
CG=$(cd "$1" && pwd)
SG_BIN=$(realpath "$2")
OUT=${3:-$(mktemp -d /tmp/commugraph-frontend.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
FILES=${FILES:-$REPO/fixtures/commugraph-sample}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SG_PORT=${SG_PORT:-18080}
NEXT_PORT=${NEXT_PORT:-3000}
PROXY_PORT=${PROXY_PORT:-3300}
PROXY_PLAIN_PORT=${PROXY_PLAIN_PORT:-3301}

[ -f "$CG/.next/BUILD_ID" ] || { echo "$CG has no .next/BUILD_ID: build CommuGraph first (its README: npm install, npm run build)" >&2; exit 2; }
[ -x "$CG/node_modules/.bin/next" ] || { echo "$CG/node_modules/.bin/next missing: npm install in $CG first" >&2; exit 2; }

if [ -z "${PLAYWRIGHT_CORE_DIR:-}" ]; then
  if [ ! -d "$OUT/tools/node_modules/playwright-core" ]; then
    echo "installing playwright-core into $OUT/tools"
    npm install --silent --no-audit --no-fund --prefix "$OUT/tools" playwright-core >/dev/null
  fi
  PLAYWRIGHT_CORE_DIR=$OUT/tools/node_modules
fi

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_http() { # URL NAME
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "$2 did not answer at $1" >&2
  exit 1
}

"$SG_BIN" serve --listen "127.0.0.1:$SG_PORT" --data-dir "$OUT/sg-data" >"$OUT/sessiongraph.log" 2>&1 &
PIDS+=($!)
(cd "$CG" && NEXT_TELEMETRY_DISABLED=1 exec node_modules/.bin/next start -H 127.0.0.1 -p "$NEXT_PORT") >"$OUT/next.log" 2>&1 &
PIDS+=($!)
node "$HERE/proxy.mjs" --listen "127.0.0.1:$PROXY_PORT" --api "127.0.0.1:$SG_PORT" \
  --ui "127.0.0.1:$NEXT_PORT" --graph-view --log "$OUT/requests-graph.jsonl" &
PIDS+=($!)
node "$HERE/proxy.mjs" --listen "127.0.0.1:$PROXY_PLAIN_PORT" --api "127.0.0.1:$SG_PORT" \
  --ui "127.0.0.1:$NEXT_PORT" --log "$OUT/requests-plain.jsonl" &
PIDS+=($!)

wait_http "http://127.0.0.1:$SG_PORT/healthz" sessiongraph
wait_http "http://127.0.0.1:$NEXT_PORT/" "CommuGraph (next start)"
wait_http "http://127.0.0.1:$PROXY_PORT/favicon.ico" proxy
wait_http "http://127.0.0.1:$PROXY_PLAIN_PORT/favicon.ico" proxy

export NODE_PATH=$PLAYWRIGHT_CORE_DIR
node "$HERE/shoot.mjs" --url "http://127.0.0.1:$PROXY_PORT/" --files "$FILES" --out "$OUT" \
  --chromium "$CHROMIUM" --mode graph | tee "$OUT/shoot-graph.txt"
node "$HERE/shoot.mjs" --url "http://127.0.0.1:$PROXY_PLAIN_PORT/" --files "$FILES" --out "$OUT" \
  --chromium "$CHROMIUM" --mode workflow | tee "$OUT/shoot-workflow.txt"

echo
echo "API requests the frontend made (method, route, status, count):"
cat "$OUT"/requests-*.jsonl | node -e '
  const counts = new Map();
  for (const line of require("fs").readFileSync(0, "utf8").split("\n")) {
    if (!line) continue;
    const e = JSON.parse(line);
    if (e.side !== "api") continue;
    const route = e.url.replace(/\/api\/(graph|session)\/[^/?]+/, "/api/$1/{id}").replace(/step=\d+/, "step=N");
    const key = `${e.method} ${route} ${e.status ?? e.error}`;
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  for (const [k, n] of counts) console.log(`  ${k}  x${n}`);
'
if grep -h '"side":"api"' "$OUT"/requests-*.jsonl | grep -qv '"status":[23]'; then
  echo "some API requests failed; see $OUT/requests-*.jsonl"
fi
echo
echo "screenshots and logs in $OUT"
ls -l "$OUT"/*.png
