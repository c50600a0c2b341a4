#!/usr/bin/env bash
# Every whole-process and service figure of docs/performance.md, one after the other.
set -euo pipefail
here=$(dirname "$0")
for s in first-frame idle-cpu rss stream-fps service-post service-streams service-pg-throughput session-list; do
    echo "## $s"
    "$here/$s.sh"
done
