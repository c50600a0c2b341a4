#!/usr/bin/env bash
# What one batch costs PostgreSQL, function by function, on an idle database: the three batch
# functions of a turn (`convo_turn_facts_2`, as a replica that holds none of the sessions'
# histories calls it, `convo_turn_write_counted_n`, `convo_turn_complete_n`) called by pgbench
# with batches of N turns, each batch in a transaction that is rolled back, so that every
# batch finds the same tables. A private cluster (crates/testpg/pg-cluster.sh, removed at
# exit) with a fresh server's durability; a release `convo serve` with 1,000 enterprise keys
# fills one database first (wrk, POPULATE seconds, 8,000 sessions), then pgbench runs
# TRANSACTIONS batches per row and PostgreSQL's own function timing (`track_functions =
# all`) gives each function's time per call: `self` without the functions it calls, `total`
# with them. The database is vacuumed before each
# row (a rolled-back batch leaves dead index entries behind).
#
# Rows: batches of 1 and 16 turns of distinct accounts (the 1,000-key benchmark's batches)
# and of 6 turns of one account (the one-key benchmark's). A row's first-call costs and its
# per-turn costs separate by comparing 1 with 16.
#
# CYCLE=1 compares instead a replica's cycle of batches (the replies of one batch, the start of
# the next) committed in two transactions, as a replica writes them, with the same statements
# in one transaction: ms per cycle, the statements' latencies summed (docs/perf-log.md, 27 Nov).
#
# To try a changed function without a migration: create it under another name in the
# database the script leaves (KEEP=1 keeps the cluster and prints its URL) and run again
# with FACTS=name, WRITE=name or COMPLETE=name (same arguments as the function it stands
# for) and DB=the URL.
#
#   apt-get install -y wrk postgresql-client   (pgbench is in postgresql-client)
#   scripts/perf/pg-batch-functions.sh
source "$(dirname "$0")/common.sh"
need_wrk
command -v pgbench >/dev/null || { echo "pgbench is missing: apt-get install -y postgresql-client" >&2; exit 2; }
TRANSACTIONS=${TRANSACTIONS:-600} POPULATE=${POPULATE:-10}
FACTS=${FACTS:-convo_turn_facts_2} WRITE=${WRITE:-convo_turn_write_counted_n}
COMPLETE=${COMPLETE:-convo_turn_complete_n}
# The request limit the batches count under (the shards' allowances are handed out for it).
LIMIT=1000000
work=$(mktemp -d)
cluster="" serve=""
cleanup() {
    [[ -n $serve ]] && { kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null; }
    [[ -n $cluster && -z ${KEEP:-} ]] && crates/testpg/pg-cluster.sh remove "$cluster"
    rm -rf "$work"
}
trap cleanup EXIT

if [[ -z ${DB:-} ]]; then
    # A kept cluster is owned by init, so that its watchdog does not remove it when this ends.
    out=$(crates/testpg/pg-cluster.sh new "$([[ -n ${KEEP:-} ]] && echo 1 || echo $$)")
    PG=$(sed -n 's/^url=//p' <<<"$out")
    cluster=$(sed -n 's/^dir=//p' <<<"$out")
    printf 'fsync = on\nfull_page_writes = on\nsynchronous_commit = on\ntrack_functions = all\n' \
        >>"$cluster/data/postgresql.conf"
    crates/testpg/pg-cluster.sh restart "$cluster"
    psql -q "$PG/postgres" -c 'CREATE DATABASE convo_batches'
    DB=$PG/convo_batches
    args=$(for i in $(seq 0 999); do printf -- "--api-key service_live_perfkey%012d=enterprise " "$i"; done)
    # shellcheck disable=SC2086
    "$BIN" serve --addr 127.0.0.1:0 --db "$DB" $args --jwt-secret perf-pg-batch-functions \
        --engine builtin --engine-pace-ms 0 >"$work/out" 2>"$work/err" &
    serve=$!
    for _ in $(seq 300); do grep -q '^listening on' "$work/out" 2>/dev/null && break; sleep 0.1; done
    url=$(sed -n 's/^listening on //p' "$work/out")
    [[ -n $url ]] || { cat "$work/err" >&2; exit 1; }
    KEYS=1000 KEY_PREFIX=service_live_perfkey SESSIONS=8000 wrk -t 1 -c 32 -d "${POPULATE}s" \
        -s scripts/perf/post.lua "$url" >/dev/null
    kill "$serve"; wait "$serve" 2>/dev/null; serve=""
    # A turn in flight when the replica stopped would make its session busy.
    psql -qAt "$DB" -c 'DELETE FROM turns'
    [[ -n ${KEEP:-} ]] && echo "# kept: DB=$DB (crates/testpg/pg-cluster.sh remove $cluster)"
fi
echo "# $(psql -qAt "$DB" -c "SELECT count(*) FROM sessions") sessions, $(psql -qAt "$DB" -c "SELECT count(*) FROM messages") messages; $TRANSACTIONS batches per row"

# The pgbench statement choosing a batch of $1 turns, `same` (one account's sessions) or
# `distinct`, into the variables s, a, m, r (arrays as text), n and now; with $3 = free, only
# sessions without a turn in flight.
pick() {
    local n=$1 free=""
    [[ ${3:-} == free ]] && free="AND id NOT IN (SELECT session_id FROM turns)"
    local sessions
    if [[ $2 == same ]]; then
        sessions="SELECT id, account_id FROM sessions WHERE deleted_at IS NULL $free AND account_id = (
                  SELECT account_id FROM sessions GROUP BY 1 HAVING count(*) >= $n
                  ORDER BY md5(account_id::text || :seed) LIMIT 1)
              ORDER BY md5(id || :seed) LIMIT $n"
    else
        sessions="SELECT DISTINCT ON (account_id) id, account_id FROM (
                  SELECT id, account_id FROM sessions WHERE deleted_at IS NULL $free
                  ORDER BY md5(id || :seed) LIMIT $((n * 3))) z
              ORDER BY account_id LIMIT $n"
    fi
    cat <<SQL
\set seed random(1, 100000000)
SELECT array_agg(id ORDER BY account_id, id)::text AS s,
       array_agg(account_id ORDER BY account_id, id)::text AS a,
       array_agg('m' || md5(random()::text) ORDER BY account_id, id)::text AS m,
       array_agg('r' || md5(random()::text) ORDER BY account_id, id)::text AS r,
       count(*) AS n, (extract(epoch FROM now()) * 1000)::bigint AS now
FROM ($sessions) x \gset
SQL
}

# The first transaction of pgbench's connection makes that connection's counter shard for
# every account, committed, and then starts the statistics afresh: an account's shards are
# made as connections first count on it (migration 16), and every batch, rolled back, would
# otherwise run a refill for each of its accounts, which a replica's connection does once.
warm() {
    cat <<SQL
SELECT (SELECT count(*) FROM usage_shards WHERE shard = convo_usage_shard())
       < (SELECT count(*) FROM accounts) AS cold \gset
\if :cold
SELECT bool_or(convo_usage_refill_n(a.id, convo_period_start((extract(epoch FROM now()) * 1000)::bigint),
                                    $LIMIT, 0))
FROM accounts a;
SELECT pg_stat_force_next_flush();
SELECT pg_stat_reset();
\endif
SQL
}

# The start of a batch (its facts, then its writes) of the picked turns.
start() {
    local each="ARRAY[:n::int]" now=":now::bigint" period="convo_period_start(:now::bigint)"
    cat <<SQL
SELECT count(*) FROM $FACTS(:a::bigint[], :s::text[], array_fill(NULL::text, $each), 0,
    array_fill($period, $each), array_fill(-1::bigint, $each), array_fill(0::bigint, $each));
SELECT $WRITE(array_fill(true, $each), :a::bigint[], :s::text[], array_fill(false, $each),
    array_fill(100000::bigint, $each), array_fill($now, $each), :m::text[],
    array_fill('user'::text, $each),
    array_fill('Hello from wrk: how do lifetimes work in Rust?'::text, $each),
    array_fill(12::bigint, $each), array_fill(NULL::text, $each), array_fill(NULL::text, $each),
    array_fill(NULL::int, $each), array_fill(NULL::text, $each), 'pgbench', :r::text[],
    array_fill($period, $each), array_fill(${LIMIT}::bigint, $each));
SQL
}

# The replies of a batch whose variables are those of pick with the prefix $1 ("" or "p").
complete() {
    local p=$1 each="ARRAY[:${1}n::int]" now=":now::bigint"
    cat <<SQL
SELECT $COMPLETE(:${p}a::bigint[], :${p}s::text[], :${p}r::text[], 'assistant',
    array_fill('A reply of some words, as the builtin engine writes it.'::text, $each),
    array_fill(14::bigint, $each), array_fill($now, $each), array_fill(NULL::text, $each),
    array_fill(NULL::int, $each), array_fill(NULL::text, $each), array_fill($now, $each),
    array_fill('stop'::text, $each));
SQL
}

# The pgbench script of a batch of $1 turns ($2 as for pick): its start and its replies in a
# transaction that is rolled back.
script() {
    warm
    pick "$1" "$2"
    echo 'BEGIN;'
    start
    complete ""
    echo 'ROLLBACK;'
}

# CYCLE=1: a cycle of a replica's batches, the replies of the batch before and the start of a
# new one, committed, in two transactions (`two`: the start, then the replies, as a replica
# writes them) or in one (`one`), batches of $2 turns ($3 as for pick).
cycle_script() {
    warm
    pick "$2" "$3" free
    if [[ $1 == one ]]; then
        echo 'BEGIN;'; complete p; start; echo 'COMMIT;'
    else
        echo 'BEGIN;'; start; echo 'COMMIT;'; complete p
    fi
    echo 'SELECT :s::text AS ps, :a::text AS pa, :r::text AS pr, :n AS pn \gset'
}

if [[ -n ${CYCLE:-} ]]; then
    # Committed batches (synchronous_commit off, so that the WAL flush does not count), one
    # client: the latency pgbench gives each statement of the transactions, summed.
    echo "| batch | cycle in two transactions (ms) | in one (ms) |"
    echo "|---|---|---|"
    for row in "1 distinct" "16 distinct" "6 same"; do
        set -- $row
        label="$1 turns of $([[ $2 == same ]] && echo one account || echo distinct accounts)"
        cells=()
        for way in two one; do
            cycle_script "$way" "$1" "$2" >"$work/cycle.sql"
            psql -qAt "$DB" -c 'VACUUM' >/dev/null
            PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -r -t "$TRANSACTIONS" \
                -c 1 -D ps='{}' -D pa='{}' -D pr='{}' -D pn=0 -f "$work/cycle.sql" "$DB" \
                >"$work/pgbench" 2>&1 || { cat "$work/pgbench" >&2; exit 1; }
            cells+=("$(awk '/^ +[0-9.]+ +[0-9]+ +(BEGIN|COMMIT|SELECT count|SELECT convo)/ { t += $1 }
                          END { printf "%.2f", t }' "$work/pgbench")")
            # The last batch's turns stay in flight otherwise.
            psql -qAt "$DB" -c 'DELETE FROM turns' >/dev/null
        done
        echo "| $label | ${cells[0]} | ${cells[1]} |"
    done
    exit 0
fi

echo "| batch | function | µs per call (self) | µs per call (total) |"
echo "|---|---|---|---|"
for row in "1 distinct" "16 distinct" "6 same"; do
    set -- $row
    label="$1 turns of $([[ $2 == same ]] && echo one account || echo distinct accounts)"
    script "$1" "$2" >"$work/batch.sql"
    psql -qAt "$DB" -c 'VACUUM' -c 'SELECT pg_stat_reset()' >/dev/null
    PGOPTIONS='-c track_functions=all' pgbench -n -M prepared -t "$TRANSACTIONS" -c 1 \
        -f "$work/batch.sql" "$DB" >"$work/pgbench" 2>&1 \
        || { cat "$work/pgbench" >&2; exit 1; }
    sleep 0.6 # a backend's counters reach the statistics once it is gone
    psql -qAt -F ' | ' "$DB" -c "
        SELECT '$label', funcname,
               round((self_time * 1000 / calls)::numeric), round((total_time * 1000 / calls)::numeric)
        FROM pg_stat_user_functions WHERE calls > 0
          AND funcname NOT IN ('convo_period_start', 'convo_usage_shards')
        ORDER BY total_time DESC" |
        sed 's/^/| /; s/$/ |/'
done
