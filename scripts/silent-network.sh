#!/usr/bin/env bash
# A replica whose PostgreSQL server goes silent (a network that drops every packet, no reset):
# what its sends get, and that it serves again once the network is back (`SILENT_SERVER`,
# crates/service/src/storage/postgres/mod.rs; docs/deploy.md, "A server that goes silent").
#
# The suite cannot drop packets (its machines have neither a firewall nor `netem`, and its TCP
# proxy's own kernel acknowledges what it holds), so this runs by hand, as root: a network
# namespace for the replica, one for a router, and PostgreSQL (a private cluster of
# crates/testpg/pg-cluster.sh) on this host; the router forwards between them until "the
# network" goes silent (its `ip_forward` turned off: packets dropped without a word), and
# again after. Prints each send's status and time: one send, then eight at once, during the
# silence (each answered 503 `unavailable` within about 30 s), then eight after it (200).
# Everything it made (namespaces, links, route, cluster) is removed at exit.
#
#   sudo scripts/silent-network.sh            (CONVO_BIN: the binary, target/debug/convo)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CONVO_BIN:-target/debug/convo}
[[ $(id -u) == 0 ]] || { echo "run as root: it makes network namespaces" >&2; exit 2; }
[[ -x $BIN ]] || cargo build --bin convo
KEY=service_live_silentnetwork0000
cluster="" serve=""
cleanup() {
    set +e
    # (`ip netns exec` may leave the replica as its child: every process of the namespace goes.)
    ip netns pids convo-replica 2>/dev/null | xargs -r kill 2>/dev/null
    [[ -n $serve ]] && wait "$serve" 2>/dev/null
    ip netns del convo-replica 2>/dev/null
    ip netns del convo-router 2>/dev/null
    ip link del convo-host 2>/dev/null
    ip route del 10.98.1.0/24 2>/dev/null
    [[ -n $cluster ]] && crates/testpg/pg-cluster.sh remove "$cluster"
}
trap cleanup EXIT

# replica 10.98.1.2 -- 10.98.1.1 router 10.98.2.1 -- 10.98.2.2 this host (PostgreSQL)
ip netns add convo-replica
ip netns add convo-router
in_replica() { ip netns exec convo-replica "$@"; }
in_router() { ip netns exec convo-router "$@"; }
ip link add convo-r0 type veth peer name convo-r1
ip link set convo-r0 netns convo-replica
ip link set convo-r1 netns convo-router
ip link add convo-host type veth peer name convo-r2
ip link set convo-r2 netns convo-router
in_replica ip addr add 10.98.1.2/24 dev convo-r0
in_replica ip link set convo-r0 up
in_replica ip link set lo up
in_replica ip route add default via 10.98.1.1
in_router ip addr add 10.98.1.1/24 dev convo-r1
in_router ip link set convo-r1 up
in_router ip addr add 10.98.2.1/24 dev convo-r2
in_router ip link set convo-r2 up
in_router sysctl -qw net.ipv4.ip_forward=1
ip addr add 10.98.2.2/24 dev convo-host
ip link set convo-host up
ip route add 10.98.1.0/24 via 10.98.2.1

out=$(crates/testpg/pg-cluster.sh new $$)
cluster=$(sed -n 's/^dir=//p' <<<"$out")
pg=$(sed -n 's/^url=//p' <<<"$out")
port=${pg##*:}
echo "listen_addresses = '127.0.0.1,10.98.2.2'" >>"$cluster/data/postgresql.conf"
echo "host all all 10.98.1.0/24 trust" >>"$cluster/data/pg_hba.conf"
crates/testpg/pg-cluster.sh restart "$cluster" >/dev/null
psql -q "$pg/postgres" -c 'CREATE DATABASE convo'

in_replica "$BIN" serve --addr 127.0.0.1:8787 --db "postgres://postgres@10.98.2.2:$port/convo" \
    --api-key "$KEY=enterprise" --jwt-secret silent-network-silent-network-0000 \
    --engine builtin --engine-pace-ms 0 >/dev/null 2>"$cluster/serve.log" &
serve=$!
healthy() { in_replica curl -sf -o /dev/null http://127.0.0.1:8787/healthz; }
for _ in $(seq 100); do healthy && break; sleep 0.1; done
healthy || { echo "the replica did not answer /healthz within 10 s:" >&2; cat "$cluster/serve.log" >&2; exit 1; }

# Sends "$2" to session $1 and prints the status and the time it took (000: no answer within
# curl's 120 s).
send() {
    in_replica curl -s -m 120 -o /dev/null -w "  $1: %{http_code} in %{time_total} s\n" \
        -X POST "http://127.0.0.1:8787/v1/sessions/$1/messages" -H "Authorization: Bearer $KEY" \
        -H 'Content-Type: application/json' -d "{\"content\":\"$2\"}" || true
}
session() { printf 'session_silentnetwork%03d' "$1"; }

echo "before:"
send "$(session 0)" before
echo "the network goes silent ($(date -u +%T)); one send:"
in_router sysctl -qw net.ipv4.ip_forward=0
send "$(session 0)" silent
echo "eight at once:"
for i in $(seq 1 8); do send "$(session "$i")" silent & done
wait $(jobs -p | grep -v "^$serve$")
in_router sysctl -qw net.ipv4.ip_forward=1
echo "the network is back ($(date -u +%T)); eight at once:"
for i in $(seq 1 8); do send "$(session "$i")" back & done
wait $(jobs -p | grep -v "^$serve$")
echo "messages stored: $(psql -Atc 'SELECT count(*) FROM messages' "$pg/convo") (before: 2, back: 16, none of the silence)"
