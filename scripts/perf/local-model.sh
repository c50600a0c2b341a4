#!/usr/bin/env bash
# The local engine against raw llama.cpp on the same GGUF, side by side in one run
# (crates/service/examples/local_model_bench.rs): first token, tokens/s, turn 7 against turn 1 of
# a conversation, a 2,000-token prompt (raw with f16 and with 8-bit cache cells, against the
# stack), the next turn after a restart, how soon a stop stops the model, and the RSS of raw and
# of `convo serve --engine local`. Then the raw figures of a portable build of the same bench
# (`RUSTFLAGS=` replaces .cargo/config.toml's target-cpu=native; its own target dir), for native
# against portable. Figures: docs/performance.md.
#
#   scripts/perf/local-model.sh [MODEL.gguf] [ROUNDS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
model=${1:-$(scripts/fetch-model.sh --path 2>/dev/null | head -n1)}
rounds=${2:-5}
target=${CARGO_TARGET_DIR:-target}
cargo build --release --bin convo
cargo build --release -p convo-service --example local_model_bench
RUSTFLAGS= CARGO_TARGET_DIR="$target/portable" \
  cargo build --release -p convo-service --example local_model_bench
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## native (the default build)"
CONVO_BIN="$target/release/convo" "$target/release/examples/local_model_bench" "$model" "$rounds"
echo "## portable (RUSTFLAGS=), raw only"
"$target/portable/release/examples/local_model_bench" "$model" "$rounds" --raw-only
