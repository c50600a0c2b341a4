#!/usr/bin/env bash
# Non-streaming POST throughput and latency of convo serve (builtin engine, pace 0), with wrk:
#   apt-get update && apt-get install -y wrk
# CONNECTIONS connections on THREADS wrk threads for DURATION, spread over SESSIONS sessions
# (turns of one session are serialised by design; an enterprise key's quota covers the run).
# Also: REPEAT (runs on the same service).
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
echo "# convo serve at $url (pid $serve), db $dir/service.db"
# One send first: the token tables load on the first count (start-up, not throughput).
curl -sf -o /dev/null "$url/v1/sessions/session_wrkwarmup0000000/messages" \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d '{"content":"warm up"}'
# REPEAT runs against the same service show how a send's cost grows with the month's usage.
for run in $(seq "${REPEAT:-1}"); do
    echo "# run $run"
    KEY=$key SESSIONS=${SESSIONS:-8000} wrk -t "${THREADS:-2}" -c "${CONNECTIONS:-32}" \
        -d "${DURATION:-10s}" --latency -s scripts/perf/post.lua "$url"
done
echo "# convo serve: VmHWM $(awk '/VmHWM/ {print $2/1024 " MB"}' /proc/$serve/status)"
