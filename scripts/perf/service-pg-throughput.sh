#!/usr/bin/env bash
# POST throughput of convo serve on PostgreSQL against SQLite, side by side in one run: one
# SQLite node, one PostgreSQL node and two PostgreSQL replicas on one database, each with one
# enterprise key and with KEYS (1000) enterprise keys (SESSIONS / KEYS sessions each). ROUNDS
# (3) rounds, every setup once per round, interleaved, so that other work on the machine falls
# on all of them alike. Per run: POSTs/s, p99, errors (non-2xx answers and wrk's 2 s
# timeouts), and the CPU time per POST of the replicas and of PostgreSQL (utime + stime from /proc/PID/stat, before and after the run; for
# PostgreSQL the postmaster, every process under it and the children it reaped).
#   apt-get update && apt-get install -y wrk postgresql-client   (and the PostgreSQL 15 server)
# PostgreSQL is a private cluster (crates/testpg/pg-cluster.sh: initdb on a temporary directory,
# a free port on 127.0.0.1), with durable commits (fsync and synchronous_commit on, as a fresh
# server has them; PG_SYNC_COMMIT=off for commits that do not wait for the WAL flush), stopped
# and removed at exit. Every run gets a database of its own. wrk: CONNECTIONS (32) connections
# in all for DURATION (10s), split evenly over the replicas (one wrk per replica); builtin
# engine at pace 0, SESSIONS (8000) sessions. KEY_SETS ("1 $KEYS") lists the key counts to run.
# Each row ends with the 1-minute load average when its run ended. After each PostgreSQL row,
# stderr gets how its turns were written (the replicas' `convo_db_batched_operations_total`
# and `convo_db_batches_total`, counted from their start): turns per batch, the share that
# ran alone (a failed batch's turns too), the failed batches, and the share of the run a
# replica had one under way (`convo_db_batch_busy_seconds_total` over DURATION, which is then
# in seconds, mean of the replicas: near 100 %, that kind's writes are the bottleneck), for
# starts and for replies.
# PG_SPLIT=1: after each PostgreSQL row, stderr also gets PostgreSQL's CPU per POST by kind of
# process (the connections' backends, the WAL writer, the checkpointer, …; `reaped`: the children
# the postmaster reaped during the run, autovacuum workers mostly).
# PG_SOCKET=1: the replicas reach the cluster through its Unix socket (in its data directory)
# instead of TCP on 127.0.0.1, as a replica on the database's own machine can.
# PG_STATS=FILE: where PostgreSQL's CPU goes. The cluster loads pg_stat_statements (statements
# inside the functions counted too) and counts function calls; after each PostgreSQL run FILE
# gets, per POST, the calls and execution time of each statement and function (counted from
# after the warm-up), the commits, the rows written per table, and the WAL written.
source "$(dirname "$0")/common.sh"
need_wrk
command -v psql >/dev/null || { echo "psql is missing: apt-get install -y postgresql-client" >&2; exit 2; }
ROUNDS=${ROUNDS:-3} KEYS=${KEYS:-1000} SESSIONS=${SESSIONS:-8000}
CONNECTIONS=${CONNECTIONS:-32} DURATION=${DURATION:-10s}
prefix=service_live_perfkey
tick=$(getconf CLK_TCK)
work=$(mktemp -d "${SERVE_TMP:-/tmp}/convo-perf-pg.XXXXXX")
pids=() cluster=""
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    [[ -n $cluster ]] && crates/testpg/pg-cluster.sh remove "$cluster"
    rm -rf "$work"
}
trap cleanup EXIT

out=$(crates/testpg/pg-cluster.sh new $$)
PG=$(sed -n 's/^url=//p' <<<"$out")
cluster=$(sed -n 's/^dir=//p' <<<"$out")
# The test clusters trade durability for speed; this one has a fresh server's settings.
cat >>"$cluster/data/postgresql.conf" <<CONF
fsync = on
full_page_writes = on
synchronous_commit = ${PG_SYNC_COMMIT:-on}
CONF
[[ -n ${PG_SOCKET:-} ]] && echo "unix_socket_directories = '$cluster/data'" >>"$cluster/data/postgresql.conf"
if [[ -n ${PG_STATS:-} ]]; then
    : >"$PG_STATS"
    cat >>"$cluster/data/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.max = 1000
track_functions = all
CONF
fi
crates/testpg/pg-cluster.sh restart "$cluster"
[[ -n ${PG_STATS:-} ]] && psql -q "$PG/postgres" -c 'CREATE EXTENSION pg_stat_statements'
echo "# PostgreSQL $(psql -Atc 'SHOW server_version' "$PG/postgres"), private cluster, synchronous_commit $(psql -Atc 'SHOW synchronous_commit' "$PG/postgres")"

# The `--api-key` arguments of $1 keys.
key_args() {
    if [[ $1 == 1 ]]; then
        echo "--api-key ${prefix}000000000000=enterprise"
    else
        for i in $(seq 0 $(($1 - 1))); do printf -- "--api-key %s%012d=enterprise " "$prefix" "$i"; done
    fi
}

# Starts a replica on database $1 with the keys in `keys`; adds its URL to `urls` and that of
# its metrics to `metrics`.
urls=() metrics=()
replica() {
    local n=${#pids[@]} args
    args=$(key_args "$keys")
    : >"$work/out$n"
    # shellcheck disable=SC2086
    "$BIN" serve --addr 127.0.0.1:0 --db "$1" $args --jwt-secret perf-pg-throughput \
        --engine builtin --engine-pace-ms 0 --metrics-addr 127.0.0.1:0 \
        >"$work/out$n" 2>"$work/err$n" &
    pids+=($!)
    for _ in $(seq 300); do grep -q '^metrics on' "$work/out$n" 2>/dev/null && break; sleep 0.1; done
    local url
    url=$(sed -n 's/^listening on //p' "$work/out$n")
    [[ -n $url ]] || { cat "$work/err$n" >&2; exit 1; }
    urls+=("$url")
    metrics+=("$(sed -n 's/^metrics on //p' "$work/out$n")")
}

# Prints to stderr how the turns of the replicas in `metrics` were written.
batches() {
    local m
    for m in "${metrics[@]}"; do curl -sSf "$m"; done | awk -v run="${DURATION%s}" -v n="${#metrics[@]}" '
        /^convo_db_batch_busy_seconds_total\{/ { match($0, /operation="[a-z]+"/); busy[substr($0, RSTART + 11, RLENGTH - 12)] += $NF }
        /^convo_db_batches_total\{.*outcome="written"/ { match($0, /operation="[a-z]+"/); b[substr($0, RSTART + 11, RLENGTH - 12)] += $NF }
        /^convo_db_batches_total\{.*outcome="failed"/ { match($0, /operation="[a-z]+"/); failed[substr($0, RSTART + 11, RLENGTH - 12)] += $NF }
        /^convo_db_batched_operations_total\{/ {
            match($0, /operation="[a-z]+"/); op = substr($0, RSTART + 11, RLENGTH - 12)
            if ($0 ~ /outcome="batched"/) in_b[op] += $NF; else alone[op] += $NF
        }
        END {
            printf "#   batches:"
            for (op in in_b) {
                all = in_b[op] + alone[op]
                printf " %s %.1f turns each, %.1f %% alone, %d failed batches, under way %.0f %% of the run;", op, b[op] ? in_b[op] / b[op] : 0, all ? 100 * alone[op] / all : 0, failed[op], 100 * busy[op] / n / run
            }
            printf "\n"
        }' >&2
}

# CPU ticks (utime + stime) of the processes $@.
ticks() {
    local sum=0 p t
    for p in "$@"; do
        # A process can end between the listing and the read (a backend that closed).
        t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) || continue
        [[ -n $t ]] && sum=$((sum + t))
    done
    echo "$sum"
}

# CPU ticks of each process under the postmaster, one line each: kind, pid, ticks (kind:
# `backend` for a client's connection, otherwise the process's title, e.g. `walwriter`);
# then `reaped` (the children it reaped: autovacuum workers, closed connections) and
# `postmaster` itself.
pg_split_ticks() {
    local pm p kind
    pm=$(head -1 "$cluster/data/postmaster.pid")
    for p in $(pgrep -P "$pm"); do
        kind=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | sed 's/^postgres: //; s/ *$//')
        [[ $kind == *" 127.0.0.1("* || $kind == *"[local]"* ]] && kind=backend
        echo "${kind// /_} $p $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)"
    done
    awk '{print "reaped 0 " $16 + $17; print "postmaster 0 " $14 + $15}' "/proc/$pm/stat"
}

# Prints to stderr PostgreSQL's CPU per POST by kind, from the split before ($1) and after
# ($2), over $3 POSTs.
pg_split_report() {
    awk -v n="$3" -v tick="$tick" '
        FNR == NR { before[$1 " " $2] = $3; next }
        { d = $3 - before[$1 " " $2]; kind[$1] += d; all += d }
        END {
            printf "#   PostgreSQL CPU µs/POST by process:"
            for (k in kind) if (kind[k] > 0) printf " %s %.0f;", k, kind[k] / tick / n * 1e6
            printf " all %.0f\n", all / tick / n * 1e6
        }' <(echo "$1") <(echo "$2") >&2
}

# CPU ticks of the cluster: the postmaster, every process under it, and its reaped children.
pg_ticks() {
    pg_split_ticks | awk '{ t += $3 } END { print t + 0 }'
}

# The POSTs of the run, from its wrk outputs.
posts() {
    awk '/^requests/ { n += $2 } END { print n + 0 }' "$work"/wrk*
}

# One run of setup $1 (on the replicas in `urls`) with $keys keys; prints one row.
measure() {
    local name=$1 n=${#urls[@]} u i=0 wrks=()
    for u in "${urls[@]}"; do
        curl -sSf -o /dev/null "$u/v1/sessions/session_wrkwarmup0000000/messages" \
            -H "Authorization: Bearer ${prefix}000000000000" -H 'Content-Type: application/json' \
            -d '{"content":"warm up"}' || { cat "$work"/err* >&2; exit 1; }
    done
    local replica_before pg_before
    [[ -n ${PG_STATS:-} && $name != SQLite* ]] && stats_reset
    replica_before=$(ticks "${pids[@]}") pg_before=$(pg_ticks)
    local split_before=""
    [[ -n ${PG_SPLIT:-} && $name != SQLite* ]] && split_before=$(pg_split_ticks)
    for u in "${urls[@]}"; do
        if [[ $keys == 1 ]]; then
            KEY=${prefix}000000000000 SESSIONS=$SESSIONS wrk -t 1 -c $((CONNECTIONS / n)) \
                -d "$DURATION" --latency -s scripts/perf/post.lua "$u" >"$work/wrk$i" &
        else
            KEYS=$keys KEY_PREFIX=$prefix SESSIONS=$SESSIONS wrk -t 1 -c $((CONNECTIONS / n)) \
                -d "$DURATION" --latency -s scripts/perf/post.lua "$u" >"$work/wrk$i" &
        fi
        wrks+=($!); i=$((i + 1))
    done
    wait "${wrks[@]}"
    local replica_cpu=$(($(ticks "${pids[@]}") - replica_before)) pg_cpu=$(($(pg_ticks) - pg_before))
    [[ -n $split_before ]] && pg_split_report "$split_before" "$(pg_split_ticks)" \
        "$(posts)"
    # (After the CPU is read: the report's queries are not the run's.)
    [[ -n ${PG_STATS:-} && $name != SQLite* ]] && stats_report "$name, $keys keys" \
        "$(posts)"
    awk -v name="$name" -v keys="$keys" -v tick="$tick" -v rc="$replica_cpu" -v pc="$pg_cpu" \
        -v sqlite="$([[ $name == SQLite* ]] && echo 1)" -v loadavg="$(cut -d' ' -f1 /proc/loadavg)" '
        /^requests/ { n += $2; rate += $7; bad += $NF + $(NF - 2) + $(NF - 4) + $(NF - 6) + $(NF - 8) }
        /^latency/ { p = $9 + 0; if (p > p99) p99 = p }
        END {
            pg = sqlite ? "-" : sprintf("%.0f", pc / tick / n * 1e6)
            printf "| %s | %d | %.0f | %.2f ms | %d | %.0f | %s | %s |\n", name, keys, rate, p99, bad, rc / tick / n * 1e6, pg, loadavg
        }' "$work"/wrk*
    rm -f "$work"/wrk*
    [[ $name == SQLite* ]] || batches
}

# Zeroes the cluster's statement, function and table counters (the run's database is $db).
stats_reset() {
    psql -qAt "$PG/postgres" -c 'SELECT pg_stat_statements_reset()' >/dev/null
    psql -qAt "$db" -c 'SELECT pg_stat_reset()' >/dev/null
    wal_before=$(psql -qAt "$PG/postgres" -c 'SELECT pg_current_wal_lsn()')
}

# Appends to $PG_STATS what PostgreSQL did per POST in run $1 of $2 POSTs.
stats_report() {
    local n=$2 q
    sleep 1 # the counters of a backend reach the statistics when it is idle (PGSTAT_MIN_INTERVAL)
    {
        echo "## $1: $n POSTs, $(date -u +%T)"
        q="SELECT round(calls::numeric / $n, 2) AS calls_per_post,
                  round((total_exec_time * 1000 / $n)::numeric, 1) AS us_per_post,
                  round((mean_exec_time * 1000)::numeric, 1) AS mean_us,
                  round(total_plan_time::numeric, 1) AS plan_ms, toplevel,
                  left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
           FROM pg_stat_statements WHERE calls >= $n / 20
           ORDER BY total_exec_time DESC LIMIT 40"
        psql -P pager=off -c "$q" "$PG/postgres"
        psql -P pager=off -c "SELECT funcname, round(calls::numeric / $n, 2) AS calls_per_post,
                  round((total_time * 1000 / $n)::numeric, 1) AS total_us_per_post,
                  round((self_time * 1000 / $n)::numeric, 1) AS self_us_per_post
           FROM pg_stat_user_functions ORDER BY total_time DESC" "$db"
        psql -P pager=off -c "SELECT relname, round(n_tup_ins::numeric / $n, 2) AS ins,
                  round(n_tup_upd::numeric / $n, 2) AS upd, round(n_tup_hot_upd::numeric / $n, 2) AS hot_upd,
                  round(n_tup_del::numeric / $n, 2) AS del, n_dead_tup AS dead, autovacuum_count AS autovac,
                  autoanalyze_count AS autoanalyze
           FROM pg_stat_user_tables ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC" "$db"
        psql -P pager=off -c "SELECT round(xact_commit::numeric / $n, 2) AS commits_per_post,
                  round(xact_rollback::numeric / $n, 2) AS rollbacks_per_post,
                  round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal_before') / $n) AS wal_bytes_per_post
           FROM pg_stat_database WHERE datname = current_database()" "$db"
    } >>"$PG_STATS" 2>&1
}

stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pids=() urls=() metrics=()
}

# A new database of the cluster; sets `db` to its URL.
runs=0
new_db() {
    runs=$((runs + 1))
    psql -q "$PG/postgres" -c "CREATE DATABASE convo_perf_$runs"
    db=$PG/convo_perf_$runs
    if [[ -n ${PG_SOCKET:-} ]]; then
        replica_db="postgresql:///convo_perf_$runs?host=$cluster/data&port=${PG##*:}&user=postgres"
    else
        replica_db=$db
    fi
}

echo "| setup | keys | POSTs/s | p99 | errors | replica CPU µs/POST | PostgreSQL CPU µs/POST | load |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    for keys in ${KEY_SETS:-1 $KEYS}; do
        rm -f "$work"/service.db*
        replica "$work/service.db"
        measure "SQLite, one node"
        stop_all
        new_db
        replica "$replica_db"
        measure "PostgreSQL, one node"
        stop_all
        new_db
        replica "$replica_db"
        replica "$replica_db"
        measure "PostgreSQL, two replicas"
        stop_all
    done
done
