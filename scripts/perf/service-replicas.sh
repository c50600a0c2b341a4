#!/usr/bin/env bash
# POST throughput and latency of convo serve on one SQLite node, one PostgreSQL node and two
# PostgreSQL replicas, side by side in one run, each with LISTENERS (200) WebSocket listeners
# spread over its replicas (examples/listeners.rs) on sessions that wrk POSTs to.
#   apt-get update && apt-get install -y wrk postgresql-client
# PG (default postgres://postgres@127.0.0.1:5432) is the server; a database of its own per
# setup is created and dropped. PG_QUERY is appended to the replicas' URLs, e.g.
# PG_QUERY='options=-c%20synchronous_commit%3Doff' (see docs/performance.md). wrk: CONNECTIONS (32) connections in all for DURATION (10s),
# split evenly over the replicas (one wrk per replica, their rates summed, p99 per replica).
# Builtin engine at pace 0, an enterprise key, SESSIONS (8000) sessions.
source "$(dirname "$0")/common.sh"
need_wrk
command -v psql >/dev/null || { echo "psql is missing: apt-get install -y postgresql-client" >&2; exit 2; }
LISTENERS_BIN=target/release/examples/listeners
[[ -x $LISTENERS_BIN ]] || cargo build --release --example listeners
PG=${PG:-postgres://postgres@127.0.0.1:5432}
key=service_live_perfreplicas0000001
work=$(mktemp -d "${SERVE_TMP:-/tmp}/convo-perf-replicas.XXXXXX")
pids=() dbs=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    for d in "${dbs[@]}"; do psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)"; done
    rm -rf "$work"
}
trap cleanup EXIT

# Starts a replica on database $1 (a path or URL); adds its URL to `urls`.
urls=()
replica() {
    local n=${#pids[@]}
    "$BIN" serve --addr 127.0.0.1:0 --db "$1" --api-key "$key=enterprise" --jwt-secret perf \
        --engine builtin --engine-pace-ms 0 >"$work/out$n" 2>"$work/err$n" &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^listening on' "$work/out$n" 2>/dev/null && break; sleep 0.1; done
    local url
    url=$(sed -n 's/^listening on //p' "$work/out$n")
    [[ -n $url ]] || { cat "$work/err$n" >&2; exit 1; }
    urls+=("$url")
}

# One setup named $1, on the replicas in `urls`.
measure() {
    local name=$1 n=${#urls[@]}
    curl -sf -o /dev/null "${urls[0]}/v1/sessions/session_wrkwarmup0000000/messages" \
        -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d '{"content":"warm up"}'
    "$LISTENERS_BIN" --key "$key" --count "${LISTENERS:-200}" "${urls[@]}" >"$work/listeners" &
    local listeners=$!
    sleep 2
    local i=0 wrks=()
    for u in "${urls[@]}"; do
        KEY=$key SESSIONS=${SESSIONS:-8000} wrk -t 1 -c $(( ${CONNECTIONS:-32} / n )) \
            -d "${DURATION:-10s}" --latency -s scripts/perf/post.lua "$u" >"$work/wrk$i" &
        wrks+=($!); i=$((i + 1))
    done
    wait "${wrks[@]}"
    kill -TERM "$listeners"; wait "$listeners" || true
    echo "## $name ($n replica(s), ${LISTENERS:-200} listeners)"
    for f in "$work"/wrk*; do grep -E '^(requests|latency)' "$f" | sed 's/^/  /'; done
    awk '/^requests/ {sum += $7} END {printf "  total: %.0f POSTs/s\n", sum}' "$work"/wrk*
    sed 's/^/  /' "$work/listeners"
    rm -f "$work"/wrk*
}

# A new database named after $1; sets `db` to its URL.
new_db() {
    local d=convo_perf_$1_$$
    psql -q "$PG/postgres" -c "CREATE DATABASE $d"
    dbs+=("$d")
    db=$PG/$d${PG_QUERY:+?$PG_QUERY}
}

stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pids=() urls=()
}

replica "$work/service.db"
measure "SQLite, one node"
stop_all
new_db one
replica "$db"
measure "PostgreSQL, one node"
stop_all
new_db two
replica "$db"
replica "$db"
measure "PostgreSQL, two replicas"
