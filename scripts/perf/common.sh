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

# Starts `convo serve` with the builtin engine at pace $2 (ms) and an enterprise key $1 (its
# quotas cover the runs), its database in a temporary directory (under SERVE_TMP, /tmp by
# default); sets dir, serve (the pid) and url, and stops it and removes the directory on exit.
start_serve() {
    dir=$(mktemp -d "${SERVE_TMP:-/tmp}/convo-perf-serve.XXXXXX")
    "$BIN" serve --addr 127.0.0.1:0 --db "$dir/service.db" --api-key "$1=enterprise" \
        --jwt-secret perf --engine builtin --engine-pace-ms "$2" >"$dir/stdout" 2>"$dir/stderr" &
    serve=$!
    trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$dir"' EXIT
    for _ in $(seq 100); do grep -q '^listening on' "$dir/stdout" 2>/dev/null && break; sleep 0.1; done
    url=$(sed -n 's/^listening on //p' "$dir/stdout")
    [[ -n $url ]] || { echo "convo serve did not start:" >&2; cat "$dir/stderr" >&2; exit 1; }
}

# wrk from Debian, for the POST figures.
need_wrk() {
    command -v wrk >/dev/null || { echo "wrk is missing: apt-get update && apt-get install -y wrk" >&2; exit 2; }
}

# One send with key $1 first: the token tables load on the first count (start-up, not
# throughput).
warm_up() {
    curl -sf -o /dev/null "$url/v1/sessions/session_wrkwarmup0000000/messages" \
        -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d '{"content":"warm up"}'
}

# wrk POSTing with key $1 to one of SESSIONS sessions at random (scripts/perf/post.lua):
# CONNECTIONS connections on THREADS threads (1 by default: one is enough for these rates,
# and a second costs the service CPU on the same cores) for DURATION. LUA replaces the script
# (e.g. an older post.lua from git, to compare).
post_load() {
    KEY=$1 SESSIONS=${SESSIONS:-8000} wrk -t "${THREADS:-1}" -c "${CONNECTIONS:-32}" \
        -d "${DURATION:-10s}" --latency -s "${LUA:-scripts/perf/post.lua}" "$url"
}

# Peak resident memory of the service so far.
serve_peak() {
    echo "# convo serve: VmHWM $(awk '/VmHWM/ {print $2/1024 " MB"}' /proc/$serve/status)"
}
