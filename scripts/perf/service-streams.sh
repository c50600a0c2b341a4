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

key=service_live_perfload00000000001
start_serve "$key" "${LOAD_PACE_MS:-0}"
"$LOAD" --base-url "$url" --api-key "$key" --streams "${COUNT:-200}" --rate "${RATE:-500}" \
    --secs "${SECS:-10}" --drain-secs 30
serve_peak
