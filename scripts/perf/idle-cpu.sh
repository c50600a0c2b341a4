#!/usr/bin/env bash
# CPU of the TUI over SECS seconds of idling, after start-up has settled.
source "$(dirname "$0")/common.sh"
"$PROBE" idle-cpu --bin "$BIN" --secs "${SECS:-10}" --settle 5
