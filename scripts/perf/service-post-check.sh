#!/usr/bin/env bash
# Non-streaming POST throughput and latency as service-post.sh measures them, with a second
# client (scripts/perf/post_client.py, Python 3's standard library) to check wrk's latency
# histogram against. CONNECTIONS (8), DURATION (8 s), SESSIONS (8000).
# SERVE_TMP=/dev/shm puts the database on tmpfs, where fsync costs nothing: not a durable
# set-up, only a way to see how much of the latency tail the disk's fsyncs make.
source "$(dirname "$0")/common.sh"
key=service_live_perfwrk000000000001
start_serve "$key" 0
echo "# convo serve at $url (pid $serve), db $dir/service.db"
warm_up "$key"
python3 scripts/perf/post_client.py "$url" "$key" "${CONNECTIONS:-8}" "${DURATION:-8}" "${SESSIONS:-8000}"
