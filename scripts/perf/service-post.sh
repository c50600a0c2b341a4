#!/usr/bin/env bash
# Non-streaming POST throughput and latency of convo serve (builtin engine, pace 0), with wrk:
#   apt-get update && apt-get install -y wrk
# CONNECTIONS connections on THREADS wrk threads for DURATION, spread over SESSIONS sessions
# (turns of one session are serialised by design; an enterprise key's quota covers the run).
# Also: REPEAT (runs on the same service).
source "$(dirname "$0")/common.sh"
need_wrk
key=service_live_perfwrk000000000001
start_serve "$key" 0
echo "# convo serve at $url (pid $serve), db $dir/service.db"
warm_up "$key"
# REPEAT runs against the same service show how a send's cost grows with the month's usage.
for run in $(seq "${REPEAT:-1}"); do
    echo "# run $run"
    post_load "$key"
done
serve_peak
