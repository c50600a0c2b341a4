#!/usr/bin/env bash
# Instructions per streamed delta and frame (stream/delta/10000's breakdown pass), counted by
# callgrind: repeatable whatever else the machine is doing, unlike the timed benchmarks.
# valgrind is on the development machine (`apt-get install -y valgrind` elsewhere).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v valgrind >/dev/null || { echo "valgrind is missing: apt-get install -y valgrind" >&2; exit 2; }
bench=$(cargo bench --bench render --no-run --message-format=json 2>/dev/null |
    grep '"kind":\["bench"\]' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[[ -x $bench ]] || { echo "could not build the render benchmark" >&2; exit 1; }
out=$(mktemp /tmp/convo-callgrind.XXXXXX)
trap 'rm -f "$out" "$out".*' EXIT
# --dump-before starts a new profile at each of the two passes: $out holds the second one,
# after everything built once (syntect's regexes) was built by the first
deltas=$(RENDER_BENCH_BREAKDOWN_ONLY=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
    --dump-before='render::breakdown_pass' "$bench" --bench stream 2>&1 |
    sed -n 's/.*breakdown over \([0-9]*\) deltas.*/\1/p' | tail -n 1)
[[ -n $deltas ]] || { echo "the benchmark printed no breakdown" >&2; exit 1; }
total=$(callgrind_annotate --auto=no "$out" | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
echo "instructions: $total in all, $((total / deltas)) per delta and frame"
