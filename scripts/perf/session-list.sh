#!/usr/bin/env bash
# What listing an account's sessions costs as its messages grow, on each store (STORES:
# "postgres sqlite" by default): one account of SESSIONS (2000) sessions of MESSAGES (250)
# messages each, written straight into a database of its own (PostgreSQL: on the server at PG,
# default postgres://postgres@127.0.0.1:5432, created and dropped; SQLite: a file in a
# temporary directory), then `GET /v1/sessions` LISTS (5) times through `convo serve`, each
# list's time printed (the first sums every session and writes the summaries of
# `session_summaries`, the others read them); then one message more in every session, and the
# lists again; and, for comparison, the execution time of the statement that summed every
# message of the account at each list before the summaries (PostgreSQL: `EXPLAIN ANALYZE`
# with the server's JIT setting and with JIT off; SQLite: the statement run by Python's
# sqlite3), on the same tables.
#   apt-get install -y postgresql-client
source "$(dirname "$0")/common.sh"
PG=${PG:-postgres://postgres@127.0.0.1:5432} STORES=${STORES:-postgres sqlite}
SESSIONS=${SESSIONS:-2000} MESSAGES=${MESSAGES:-250} LISTS=${LISTS:-5}
name=convo_list_$$
key=service_live_perfsessionlist00000
work=$(mktemp -d) serve=""
stop() {
    [[ -n $serve ]] && { kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null; }
    serve=""
}
cleanup() {
    stop
    psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $name" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# `convo serve` on database $1; sets serve and url.
serve_on() {
    "$BIN" serve --addr 127.0.0.1:0 --db "$1" --api-key "$key=enterprise" \
        --jwt-secret perf-session-list-perf-session-list --engine builtin --engine-pace-ms 0 \
        >"$work/out" 2>"$work/err" &
    serve=$!
    for _ in $(seq 300); do grep -q '^listening on' "$work/out" 2>/dev/null && break; sleep 0.1; done
    url=$(sed -n 's/^listening on //p' "$work/out")
    [[ -n $url ]] || { cat "$work/err" >&2; exit 1; }
}

# The statement of the lists before the summaries: every message of the account summed.
BEFORE="SELECT s.id, s.created_at, COALESCE(MAX(m.created_at), s.created_at),
       COUNT(m.pk), COALESCE(SUM(m.tokens), 0), s.title,
       (SELECT f.content FROM messages f
        WHERE f.session_id = s.id AND f.role = 'user' ORDER BY f.pk LIMIT 1),
       s.forked_from_session, s.forked_from_message
FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
WHERE s.account_id = (SELECT account_id FROM api_keys LIMIT 1) AND s.deleted_at IS NULL
GROUP BY s.id ORDER BY 3 DESC, s.id"

# The account's sessions and messages (as the service writes them: messages of a session in
# `pk` order, user and assistant in turn), and one message more in every session.
pg_seed() {
    psql -q -v ON_ERROR_STOP=1 "$db" <<SQL
INSERT INTO sessions (id, account_id, created_at)
SELECT 'session_list' || lpad(g::text, 8, '0'), (SELECT account_id FROM api_keys LIMIT 1), g
FROM generate_series(1, $SESSIONS) g;
INSERT INTO messages (id, session_id, role, content, tokens, created_at)
SELECT 'msg_list' || g || '_' || r, 'session_list' || lpad(g::text, 8, '0'),
       CASE WHEN r % 2 = 1 THEN 'user' ELSE 'assistant' END, repeat('x', 200), 40, 1000 * r + g
FROM generate_series(1, $MESSAGES) r, generate_series(1, $SESSIONS) g;
ANALYZE;
SQL
}
pg_grow() {
    psql -q -v ON_ERROR_STOP=1 "$db" -c "
INSERT INTO messages (id, session_id, role, content, tokens, created_at)
SELECT 'msg_list_more' || g, 'session_list' || lpad(g::text, 8, '0'), 'user', 'one more', 3, 10000000 + g
FROM generate_series(1, $SESSIONS) g"
}
pg_before() {
    local jit
    for jit in default off; do
        psql -qAt "$db" -c "$([[ $jit == off ]] && echo 'SET jit = off;')
EXPLAIN (ANALYZE, TIMING OFF) $BEFORE" |
            sed -n "s/^Execution Time: /before the summaries, every message summed (JIT $jit): /p"
    done
}
sqlite_seed() {
    python3 - "$db" "$SESSIONS" "$MESSAGES" <<'PY'
import sqlite3, sys
db, sessions, messages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = sqlite3.connect(db, timeout=30)
account = c.execute("SELECT account_id FROM api_keys LIMIT 1").fetchone()[0]
with c:
    c.executemany("INSERT INTO sessions (id, account_id, created_at) VALUES (?, ?, ?)",
                  [("session_list%08d" % g, account, g) for g in range(1, sessions + 1)])
    c.executemany("INSERT INTO messages (id, session_id, role, content, tokens, created_at)"
                  " VALUES (?, ?, ?, ?, ?, ?)",
                  (("msg_list%d_%d" % (g, r), "session_list%08d" % g,
                    "user" if r % 2 else "assistant", "x" * 200, 40, 1000 * r + g)
                   for r in range(1, messages + 1) for g in range(1, sessions + 1)))
PY
}
sqlite_grow() {
    python3 - "$db" "$SESSIONS" <<'PY'
import sqlite3, sys
db, sessions = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db, timeout=30)
with c:
    c.executemany("INSERT INTO messages (id, session_id, role, content, tokens, created_at)"
                  " VALUES (?, ?, ?, 'one more', 3, ?)",
                  [("msg_list_more%d" % g, "session_list%08d" % g, "user", 10000000 + g)
                   for g in range(1, sessions + 1)])
PY
}
sqlite_before() {
    BEFORE=$BEFORE python3 - "$db" <<'PY'
import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], timeout=30)
start = time.perf_counter()
c.execute(os.environ["BEFORE"]).fetchall()
print("before the summaries, every message summed: %.3f ms" % ((time.perf_counter() - start) * 1e3))
PY
}

lists() {
    local i listed
    for i in $(seq "$LISTS"); do
        listed=$(curl -s -o "$work/list" -w '%{http_code} %{time_total}' -H "Authorization: Bearer $key" "$url/v1/sessions")
        [[ $listed == 200* ]] || { echo "the list failed: $listed" >&2; cat "$work/list" >&2; exit 1; }
        echo "$1, list $i: ${listed#200 } s, $(grep -o '"sessionId"' "$work/list" | wc -l) sessions"
    done
}

echo "# $SESSIONS sessions of $MESSAGES messages"
for store in $STORES; do
    echo "## $store"
    case $store in
        postgres)
            psql -q "$PG/postgres" -c "CREATE DATABASE $name TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
            db=$PG/$name ;;
        sqlite) db=$work/service.db ;;
        *) echo "unknown store $store" >&2; exit 2 ;;
    esac
    serve_on "$db"
    "${store/postgres/pg}_seed"
    lists "as seeded"
    "${store/postgres/pg}_before"
    "${store/postgres/pg}_grow"
    lists "one message more in each"
    "${store/postgres/pg}_before"
    stop
done
