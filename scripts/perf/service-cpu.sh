#!/usr/bin/env bash
# CPU time per non-streaming POST of convo serve (builtin engine, pace 0), by thread, from
# /proc/PID/task/*/stat before and after a wrk run like service-post.sh's. Less sensitive to
# what else runs on the machine than POSTs/s: the cost of a POST, not the share of CPU it got.
# Also wrk's own CPU, the machine's idle time over the run (all cores), and what the store's
# writer thread wrote per POST (its `wchar`: WAL frames of page size + 24 bytes, and the pages
# of the checkpoints it runs).
# CONNECTIONS, THREADS, DURATION, SESSIONS as in service-post.sh.
source "$(dirname "$0")/common.sh"
need_wrk
key=service_live_perfwrk000000000001
start_serve "$key" 0
warm_up "$key"
# utime + stime of every thread, summed by thread name, in clock ticks.
ticks() {
    for t in /proc/$serve/task/*; do
        echo "$(tr ' ' '_' <"$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
    done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
# The idle column of /proc/stat's `cpu` line, in clock ticks.
idle() { awk '/^cpu / {print $5}' /proc/stat; }
writer=$(grep -l '^convo-store$' /proc/$serve/task/*/comm | head -1 | xargs dirname)
wchar() { awk '/^wchar/ {print $2}' "$writer/io"; }
ticks >"$dir/before"
wchar0=$(wchar)
idle0=$(idle)
start=$(date +%s%N)
TIMEFORMAT='wrk: %U s user, %S s system'
{ time post_load "$key" >"$dir/wrk.txt"; } 2>"$dir/wrk.time"
idle1=$(idle)
wchar1=$(wchar)
wall_ms=$((($(date +%s%N) - start) / 1000000))
ticks >"$dir/after"
grep -E '^(requests|latency)' "$dir/wrk.txt"
cat "$dir/wrk.time"
hz=$(getconf CLK_TCK)
echo "machine: idle $(((idle1 - idle0) * 1000 / hz)) ms of $((wall_ms * $(nproc))) ms (all cores)"
n=$(sed -n 's/^requests \([0-9]*\) in.*/\1/p' "$dir/wrk.txt")
join "$dir/before" "$dir/after" | awk -v n="$n" -v hz="$hz" '
    { us = ($3 - $2) * 1e6 / hz; total += us; if (us > 0) printf "%-18s %7.1f us/POST\n", $1, us / n }
    END { printf "%-18s %7.1f us/POST\n", "all threads", total / n }'
echo "writer: wrote $(((wchar1 - wchar0) / n)) bytes per POST"
