#!/usr/bin/env bash
# The local engine against raw llama.cpp on the same GGUF, side by side in one run
# (crates/service/examples/local_model_bench.rs): first token, tokens/s, turn 7 against turn 1 of a
# conversation, and the RSS of `convo serve --engine local`. Figures: docs/performance.md.
#
#   scripts/perf/local-model.sh [MODEL.gguf] [ROUNDS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
model=${1:-$(scripts/fetch-model.sh --path 2>/dev/null | head -n1)}
cargo build --release --bin convo
cargo build --release -p convo-service --example local_model_bench
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
CONVO_BIN=target/release/convo target/release/examples/local_model_bench "$model" "${2:-5}"
