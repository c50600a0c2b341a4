#!/usr/bin/env bash
# Launch to first frame of the TUI (embedded service, fresh data dir), median of RUNS.
source "$(dirname "$0")/common.sh"
"$PROBE" first-frame --bin "$BIN" --runs "${RUNS:-10}" --cols 120 --rows 40
