#!/usr/bin/env bash
# Streams under load. First COUNT concurrent streamed replies against `convo serve` (builtin
# engine, pace PACE_MS): each client opens its session's WebSocket, then all POST
# `stream: true` at once and read deltas until `done` (perf_probe streams). Then the
# reliability engineer's load example: COUNT streams held open while RATE POSTs/s are sent for
# SECS s to an in-process service, counting errors and lost messages (examples/load.rs).
source "$(dirname "$0")/common.sh"
"$PROBE" streams --bin "$BIN" --count "${COUNT:-200}" --pace-ms "${PACE_MS:-15}"
"$LOAD" --streams "${COUNT:-200}" --rate "${RATE:-500}" --secs "${SECS:-10}"
