#!/usr/bin/env bash
# What a request refused at the request limit costs on PostgreSQL: a free key is spent (wrk, 3
# s, `GET /v1/sessions`), then sent on for DURATION (5s) on CONNECTIONS (4) connections, every
# answer a 429; per refusal it prints the CPU time of the replica's PostgreSQL backends and of
# the replica, and the rows of `usage_shards` and `usage_totals` written. A database of its own
# on the server at PG (default postgres://postgres@127.0.0.1:5432), created and dropped.
#   apt-get install -y wrk postgresql-client
source "$(dirname "$0")/common.sh"
need_wrk
PG=${PG:-postgres://postgres@127.0.0.1:5432} DURATION=${DURATION:-5s} CONNECTIONS=${CONNECTIONS:-4}
name=convo_refusals_$$
key=service_live_perfspent0000000000
work=$(mktemp -d) serve=""
cleanup() {
    [[ -n $serve ]] && { kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null; }
    psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $name" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
psql -q "$PG/postgres" -c "CREATE DATABASE $name TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
db=$PG/$name
"$BIN" serve --addr 127.0.0.1:0 --db "$db" --api-key "$key=free" --jwt-secret perf-pg-refusals \
    --engine builtin --engine-pace-ms 0 >"$work/out" 2>"$work/err" &
serve=$!
for _ in $(seq 300); do grep -q '^listening on' "$work/out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$work/out")
[[ -n $url ]] || { cat "$work/err" >&2; exit 1; }
wrk -t 1 -c "$CONNECTIONS" -d 3s -H "Authorization: Bearer $key" "$url/v1/sessions" >/dev/null
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $key" "$url/v1/sessions")
[[ $status == 429 ]] || { echo "the key is not spent (HTTP $status)" >&2; exit 1; }

tick=$(getconf CLK_TCK)
backends=$(psql -qAt "$PG/postgres" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$name'")
ticks() {
    local sum=0 p t
    for p in "$@"; do
        t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) && sum=$((sum + t))
    done
    echo "$sum"
}
written() {
    psql -qAt "$db" -c "SELECT COALESCE(SUM(n_tup_upd + n_tup_ins + n_tup_del), 0) FROM pg_stat_user_tables
                        WHERE relname IN ('usage_shards', 'usage_totals')"
}
# shellcheck disable=SC2086
pg0=$(ticks $backends) replica0=$(ticks "$serve") rows0=$(written)
wrk -t 1 -c "$CONNECTIONS" -d "$DURATION" -H "Authorization: Bearer $key" "$url/v1/sessions" >"$work/wrk"
sleep 1 # a backend's counters reach the statistics when it is idle
# shellcheck disable=SC2086
pg1=$(ticks $backends) replica1=$(ticks "$serve") rows1=$(written)
n=$(sed -n 's/.*Non-2xx or 3xx responses: *//p' "$work/wrk")
[[ -n $n && $n -gt 0 ]] || { cat "$work/wrk" >&2; exit 1; }
awk -v n="$n" -v d="$DURATION" -v pg=$((pg1 - pg0)) -v r=$((replica1 - replica0)) -v rows=$((rows1 - rows0)) \
    -v tick="$tick" 'BEGIN {
        printf "%d refusals in %s; per refusal: PostgreSQL CPU %.0f µs, replica CPU %.0f µs, counter rows written %.2f\n",
            n, d, pg / tick / n * 1e6, r / tick / n * 1e6, rows / n
    }'
