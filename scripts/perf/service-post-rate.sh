#!/usr/bin/env bash
# Non-streaming POSTs at a fixed rate (open loop), the issue's "5,000 POSTs/s at p99 < 10 ms"
# as it reads: RATE POSTs/s (5000) for DURATION (10s) over CONNECTIONS connections (16), to
# one of 8,000 sessions at random, latency measured from when each request was due
# (--latency-correction: a stalled service is not hidden by requests that were never sent).
# wrk (service-post.sh) measures the most a closed loop gets instead. The load tool is oha,
# built from crates.io:
#   cargo install oha --locked
source "$(dirname "$0")/common.sh"
command -v oha >/dev/null || { echo "oha is missing: cargo install oha --locked" >&2; exit 2; }
key=service_live_perfwrk000000000001
start_serve "$key" 0
echo "# convo serve at $url (pid $serve), db $dir/service.db"
warm_up "$key"
rate=${RATE:-5000}
TIMEFORMAT='oha: %U s user, %S s system'
time oha --no-tui -q "$rate" --latency-correction -c "${CONNECTIONS:-16}" -z "${DURATION:-10s}" \
    -m POST -T application/json -H "Authorization: Bearer $key" \
    -d '{"content":"Hello from oha: how do lifetimes work in Rust?"}' \
    --rand-regex-url "$url/v1/sessions/session_wrk000000000[0-7][0-9]{3}/messages" \
    --output-format json >"$dir/oha.json"
python3 - "$dir/oha.json" "$rate" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s, p = r["summary"], r["latencyPercentiles"]
codes = r.get("statusCodeDistribution", {})
errors = r.get("errorDistribution", {})
ms = lambda x: f"{x * 1000:.2f} ms"
print(f"{sys.argv[2]}/s asked: {s['requestsPerSec']:.0f}/s done, success {s['successRate'] * 100:.2f} %, "
      f"status {codes}, errors {errors}")
print(f"latency p50 {ms(p['p50'])}, p90 {ms(p['p90'])}, p99 {ms(p['p99'])}, p99.9 {ms(p['p99.9'])}, "
      f"max {ms(s['slowest'])}")
PY
serve_peak
