#!/usr/bin/env bash
# Private, throw-away PostgreSQL clusters for the tests: `initdb` + `postgres` from the installed
# binaries on a temporary directory, trust authentication, a free port on 127.0.0.1, no Unix
# socket, fsync off. A watchdog stops the cluster and removes its directory once the process
# that owns it has exited, so a killed test run leaves nothing behind.
#
#   pg-cluster.sh new [OWNER_PID]   start a cluster owned by OWNER_PID (default: the caller);
#                                   prints `url=postgres://postgres@127.0.0.1:PORT` and `dir=DIR`
#   pg-cluster.sh nextest           nextest setup script: a cluster owned by the nextest run,
#                                   its URL exported to the tests as CONVO_TEST_PG_RUN (nothing
#                                   when CONVO_TEST_PG points the tests at a server already)
#   pg-cluster.sh stop DIR          fast shutdown (the cluster and its data stay)
#   pg-cluster.sh start DIR         starts a stopped cluster again, on the same port
#   pg-cluster.sh restart DIR       stop, then start
#   pg-cluster.sh remove DIR        stops it at once and deletes it
#   pg-cluster.sh bindir            prints where the server binaries are (fails if nowhere)
#
# The binaries are found through `pg_config --bindir`, then /usr/lib/postgresql/*/bin (newest
# first), Homebrew's postgresql@*, then PATH; scripts/setup.sh installs them.
set -euo pipefail

say() { echo "pg-cluster: $*" >&2; }
die() {
  say "$*"
  exit 1
}

# "1.23 s" since $1 (an $EPOCHREALTIME, or whole seconds where bash has none).
elapsed() {
  local now="${EPOCHREALTIME:-$SECONDS}"
  awk -v a="$1" -v b="$now" 'BEGIN { printf "%.2f s", b - a }'
}

has_server() { [[ -x "$1/initdb" && -x "$1/postgres" && -x "$1/pg_ctl" ]]; }

find_bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1 && d="$(pg_config --bindir 2>/dev/null)" && has_server "$d"; then
    echo "$d"
    return
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin /opt/homebrew/opt/postgresql@*/bin \
    /usr/local/opt/postgresql@*/bin 2>/dev/null | sort -V -r); do
    if has_server "$d"; then
      echo "$d"
      return
    fi
  done
  if d="$(command -v initdb 2>/dev/null)"; then
    d="$(dirname "$(readlink -f "$d" 2>/dev/null || echo "$d")")"
    if has_server "$d"; then
      echo "$d"
      return
    fi
  fi
  return 1
}

# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (or
# `nobody` where there is none) and its commands run as that user.
as_owner=()
owner_user=""
if [[ "$(id -u)" == 0 ]]; then
  if id -u postgres >/dev/null 2>&1; then owner_user=postgres; else owner_user=nobody; fi
  if command -v runuser >/dev/null 2>&1; then
    as_owner=(runuser -u "$owner_user" --)
  elif command -v setpriv >/dev/null 2>&1; then
    as_owner=(setpriv --reuid "$owner_user" --regid "$(id -g "$owner_user")" --clear-groups --)
  else
    die "running as root, and neither runuser nor setpriv is here to run PostgreSQL as $owner_user"
  fi
fi

# Sets PG_BINDIR (kept when the caller set it), or fails naming scripts/setup.sh.
need_bindir() {
  [[ -n "${PG_BINDIR:-}" ]] && return
  PG_BINDIR="$(find_bindir)" ||
    die "no PostgreSQL server binaries (initdb, postgres, pg_ctl) found; run scripts/setup.sh, which installs them, or set CONVO_TEST_PG=postgres://… to use a running server"
}

bin() { echo "$PG_BINDIR/$1"; }

ctl() {
  local dir="$1"
  shift
  ${as_owner[@]+"${as_owner[@]}"} "$(bin pg_ctl)" -D "$dir/data" -l "$dir/log" "$@"
}

# A port nothing listens on now (a start that loses a race for it tries another).
pick_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "found no free port between 20000 and 32000"
}

new_cluster() {
  local owner="$1"
  local started="${EPOCHREALTIME:-$SECONDS}"
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/convo-testpg.XXXXXX")"
  mkdir "$dir/data"
  touch "$dir/log"
  if [[ -n "$owner_user" ]]; then
    chmod 755 "$dir"
    chown "$owner_user" "$dir/data" "$dir/log"
  fi
  if ! ${as_owner[@]+"${as_owner[@]}"} "$(bin initdb)" -D "$dir/data" -U postgres -A trust -E UTF8 \
    --locale=C -N >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    rm -rf "$dir"
    die "initdb failed"
  fi
  cat >>"$dir/data/postgresql.conf" <<CONF
# convo's test cluster: reached over TCP on 127.0.0.1 only, speed over durability.
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
CONF
  # The watchdog: once the owner has gone (or the directory was removed), the cluster stops and
  # its directory goes. It leaves the caller's output and session, so that nothing waits on it.
  local watch='while kill -0 "$1" 2>/dev/null && [ -d "$2/data" ]; do sleep 1; done
    bash "$0" remove "$2"'
  local setsid=()
  command -v setsid >/dev/null 2>&1 && setsid=(setsid)
  PG_BINDIR="$PG_BINDIR" nohup ${setsid[@]+"${setsid[@]}"} bash -c "$watch" "$0" "$owner" "$dir" \
    </dev/null >/dev/null 2>&1 &
  local port
  for _ in 1 2 3 4 5; do
    port="$(pick_port)"
    echo "port = $port" >>"$dir/data/postgresql.conf"
    if ctl "$dir" start -w -t 60 >/dev/null 2>&1; then
      say "PostgreSQL $("$(bin postgres)" -V | awk '{print $3}') at 127.0.0.1:$port (cluster $dir, started in $(elapsed "$started"))"
      echo "url=postgres://postgres@127.0.0.1:$port"
      echo "dir=$dir"
      return
    fi
  done
  tail -n 20 "$dir/log" >&2
  rm -rf "$dir"
  die "the cluster did not start"
}

case "${1:-}" in
  new | stop | start | restart | bindir) need_bindir ;;
esac

case "${1:-}" in
  new)
    new_cluster "${2:-$PPID}"
    ;;
  nextest)
    if [[ -n "${CONVO_TEST_PG:-}" ]]; then
      say "the tests use CONVO_TEST_PG=$CONVO_TEST_PG"
      exit 0
    fi
    : "${NEXTEST_ENV:?pg-cluster.sh nextest runs as a nextest setup script}"
    need_bindir
    # The owner is the nextest process that runs this script: the cluster lives for the run.
    out="$(new_cluster "$PPID")"
    echo "CONVO_TEST_PG_RUN=$(sed -n 's/^url=//p' <<<"$out")" >>"$NEXTEST_ENV"
    ;;
  stop)
    ctl "${2:?DIR}" stop -m fast -w >/dev/null
    ;;
  start)
    ctl "${2:?DIR}" start -w -t 60 >/dev/null
    ;;
  restart)
    ctl "${2:?DIR}" restart -m fast -w -t 60 >/dev/null
    ;;
  bindir)
    echo "$PG_BINDIR"
    ;;
  remove)
    dir="${2:?DIR}"
    [[ "$(basename "$dir")" == convo-testpg.* ]] || die "not a cluster of pg-cluster.sh: $dir"
    if [[ -f "$dir/data/postmaster.pid" ]] && PG_BINDIR="${PG_BINDIR:-$(find_bindir)}"; then
      ctl "$dir" stop -m immediate -w >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
