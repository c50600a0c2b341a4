#!/usr/bin/env bash
# CPU time per non-streaming POST of convo serve (builtin engine, pace 0), by thread, from
# /proc/PID/task/*/stat before and after a wrk run like service-post.sh's. Less sensitive to
# what else runs on the machine than POSTs/s: the cost of a POST, not the share of CPU it got.
# CONNECTIONS, THREADS, DURATION, SESSIONS as in service-post.sh.
source "$(dirname "$0")/common.sh"
command -v wrk >/dev/null || { echo "wrk is missing: apt-get update && apt-get install -y wrk" >&2; exit 2; }
dir=$(mktemp -d /tmp/convo-perf-serve.XXXXXX)
key=service_live_perfwrk000000000001
"$BIN" serve --addr 127.0.0.1:0 --db "$dir/service.db" --api-key "$key=enterprise" \
    --jwt-secret perf --engine-pace-ms 0 >"$dir/stdout" 2>"$dir/stderr" &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$dir/stdout" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$dir/stdout")
[[ -n $url ]] || { echo "convo serve did not start:" >&2; cat "$dir/stderr" >&2; exit 1; }
curl -sf -o /dev/null "$url/v1/sessions/session_wrkwarmup0000000/messages" \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d '{"content":"warm up"}'
# utime + stime of every thread, summed by thread name, in clock ticks.
ticks() {
    for t in /proc/$serve/task/*; do
        echo "$(tr ' ' '_' <"$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
    done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
ticks >"$dir/before"
KEY=$key SESSIONS=${SESSIONS:-8000} wrk -t "${THREADS:-2}" -c "${CONNECTIONS:-32}" \
    -d "${DURATION:-10s}" --latency -s scripts/perf/post.lua "$url" >"$dir/wrk.txt"
ticks >"$dir/after"
grep -E '^(requests|latency)' "$dir/wrk.txt"
n=$(sed -n 's/^requests \([0-9]*\) in.*/\1/p' "$dir/wrk.txt")
hz=$(getconf CLK_TCK)
join "$dir/before" "$dir/after" | awk -v n="$n" -v hz="$hz" '
    { us = ($3 - $2) * 1e6 / hz; total += us; if (us > 0) printf "%-18s %7.1f us/POST\n", $1, us / n }
    END { printf "%-18s %7.1f us/POST\n", "all threads", total / n }'
