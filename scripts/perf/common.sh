# Sourced by the scripts beside it: paths of the release binaries, built when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=${CONVO_BIN:-target/release/convo}
PROBE=${PERF_PROBE:-target/release/examples/perf_probe}
LOAD=${LOAD_EXAMPLE:-target/release/examples/load}
if [[ ! -x $BIN || ! -x $PROBE ]] || [[ ${NEEDS_LOAD:-} && ! -x $LOAD ]]; then
    cargo build --release --bin convo --example perf_probe --example load
fi
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
