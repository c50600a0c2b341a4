#!/usr/bin/env bash
# Where the store's writer thread spends a POST run like service-post.sh's (wrk; CONNECTIONS,
# THREADS, DURATION, SESSIONS as there):
# - run and runnable-wait time of every thread (/proc/PID/task/*/schedstat);
# - what the writer is blocked in: its kernel stack, sampled every millisecond while its state
#   is D (needs root to read /proc/PID/task/TID/stack; STACKS=0 leaves it out);
# - the writer's own checkpoints (the debug lines of convo::service::store): frames, time.
# The sampler costs CPU itself, so the POSTs/s of this run are lower than service-post.sh's.
source "$(dirname "$0")/common.sh"
need_wrk
key=service_live_perfwrk000000000001
RUST_LOG=convo=info,convo::service::store=debug,warn start_serve "$key" 0
warm_up "$key"
writer=$(grep -l '^convo-store$' /proc/$serve/task/*/comm | head -1 | xargs dirname)
# Run and wait time (ns) summed by thread name.
sched() {
    for t in /proc/$serve/task/*; do echo "$(tr ' ' '_' <"$t/comm") $(cut -d' ' -f1,2 "$t/schedstat")"; done |
        awk '{r[$1] += $2; w[$1] += $3} END {for (k in r) print k, r[k], w[k]}' | sort
}
sched >"$dir/sched.before"
[[ ${STACKS:-1} == 0 ]] || touch "$dir/running"
(
    while [[ -e $dir/running ]]; do
        read -r _ _ state _ <"$writer/stat"
        if [[ $state == D ]]; then
            awk '{print $2}' "$writer/stack" 2>/dev/null | head -3 | tr '\n' ' '
            echo
        fi
        sleep 0.001
    done >"$dir/stacks"
) &
sampler=$!
post_load "$key" | grep -E '^(requests|latency)'
rm -f "$dir/running"
wait $sampler
sched >"$dir/sched.after"
echo "# time per thread over the run"
join "$dir/sched.before" "$dir/sched.after" |
    awk '{printf "%-18s ran %7.0f ms, waited runnable %7.0f ms\n", $1, ($4 - $2) / 1e6, ($5 - $3) / 1e6}'
if [[ ${STACKS:-1} != 0 ]]; then
    echo "# the writer blocked (D), by top kernel frames: $(wc -l <"$dir/stacks") samples"
    sed -E 's/\+0x[0-9a-f]+\/0x[0-9a-f]+//g' "$dir/stacks" | sort | uniq -c | sort -rn | head -5
fi
echo "# the writer's checkpoints"
grep -E 'the writer finished a checkpoint' "$dir/stderr" | sed 's/.*checkpoint //' || echo "none"
