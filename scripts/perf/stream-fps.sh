#!/usr/bin/env bash
# Frames per second and CPU of the TUI while a reply streams RATE tokens/s
# (fake OpenAI SSE server -> convo serve --engine openai -> the TUI in a pty).
source "$(dirname "$0")/common.sh"
"$PROBE" stream-fps --bin "$BIN" --rate "${RATE:-2000}" --tokens "${TOKENS:-20000}"
