#!/usr/bin/env bash
# Resident memory of the TUI with a MESSAGES-message session open, then with an empty store
# (each also after one send and its reply).
# SEEDED=DIR reuses a data dir made by `perf_probe seed` (seeding takes a minute: a
# transaction per message).
source "$(dirname "$0")/common.sh"
seeded=${SEEDED:-}
if [[ -z $seeded ]]; then
    seeded=$(mktemp -d /tmp/convo-perf-seed.XXXXXX)
    trap 'rm -rf "$seeded"' EXIT
    "$PROBE" seed --data-dir "$seeded" --messages "${MESSAGES:-10000}"
fi
"$PROBE" rss --bin "$BIN" --data-dir "$seeded" --settle 5 --send "hello there"
"$PROBE" rss --bin "$BIN" --settle 5 --send "hello there"
"$PROBE" transcript-memory --messages "${MESSAGES:-10000}"
"$PROBE" bpe-memory
