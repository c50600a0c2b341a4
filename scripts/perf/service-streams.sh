#!/usr/bin/env bash
# Streams under load, against `convo serve` (builtin engine).
# 1. perf_probe streams: COUNT clients each open their session's WebSocket, then all POST
#    `stream: true` at once and read deltas until `done` (pace PACE_MS between words).
# 2. examples/load.rs (the reliability engineer's): COUNT streams held open while RATE POSTs/s
#    are sent for SECS s to their sessions, counting errors and lost messages. Pace 0 here
#    (LOAD_PACE_MS): turns of one session are serialised, so at pace 15 a session takes at most
#    ~0.6 replies/s and the queue, not the service, would be measured.
NEEDS_LOAD=1 source "$(dirname "$0")/common.sh"
"$PROBE" streams --bin "$BIN" --count "${COUNT:-200}" --pace-ms "${PACE_MS:-15}"

dir=$(mktemp -d /tmp/convo-perf-serve.XXXXXX)
key=service_live_perfload00000000001
"$BIN" serve --addr 127.0.0.1:0 --db "$dir/service.db" --api-key "$key=enterprise" \
    --jwt-secret perf --engine-pace-ms "${LOAD_PACE_MS:-0}" >"$dir/stdout" 2>"$dir/stderr" &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$dir/stdout" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$dir/stdout")
[[ -n $url ]] || { echo "convo serve did not start:" >&2; cat "$dir/stderr" >&2; exit 1; }
"$LOAD" --base-url "$url" --api-key "$key" --streams "${COUNT:-200}" --rate "${RATE:-500}" \
    --secs "${SECS:-10}" --drain-secs 30
echo "# convo serve: VmHWM $(awk '/VmHWM/ {print $2/1024 " MB"}' /proc/$serve/status)"
