#!/usr/bin/env bash
# Resident memory of the TUI with a MESSAGES-message session open, and with an empty store.
source "$(dirname "$0")/common.sh"
seeded=$(mktemp -d /tmp/convo-perf-seed.XXXXXX)
trap 'rm -rf "$seeded"' EXIT
"$PROBE" seed --data-dir "$seeded" --messages "${MESSAGES:-10000}"
"$PROBE" rss --bin "$BIN" --data-dir "$seeded" --settle 5
"$PROBE" rss --bin "$BIN" --settle 5
