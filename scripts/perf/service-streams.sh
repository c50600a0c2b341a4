#!/usr/bin/env bash
# COUNT concurrent streamed replies against convo serve (builtin engine).
source "$(dirname "$0")/common.sh"
"$PROBE" streams --bin "$BIN" --count "${COUNT:-200}" --pace-ms "${PACE_MS:-15}"
