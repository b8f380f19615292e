#!/usr/bin/env bash
# Idempotent: a container registry on loopback for the offline trajrl-bench (`trajrl-validator
# bench build --push 127.0.0.1:5000/…`) and the tests that pull from it. Debian's docker-registry
# package (the CNCF distribution registry) is installed when missing; one instance of it serves
# http://127.0.0.1:${TRAJRL_REGISTRY_PORT:-5000} from a folder of ours. Returns at once when a
# registry already answers there. The Docker engine talks plain HTTP to 127.0.0.0/8 registries
# without configuration (its default insecure range).
#
#   scripts/registry-up.sh            start (or find) the registry; prints nothing when it answers
#   scripts/registry-up.sh --stop     stop the instance this script started
#
# TRAJRL_REGISTRY_PORT  port on 127.0.0.1 (default 5000)
# TRAJRL_REGISTRY_DIR   config, log, pid and storage (default /var/lib/trajrl-registry as root,
#                       else ~/.local/share/trajrl-registry); remove its data/ to reclaim the space
set -euo pipefail

PORT="${TRAJRL_REGISTRY_PORT:-5000}"
if [ "$(id -u)" = 0 ]; then DEFAULT_DIR=/var/lib/trajrl-registry; else DEFAULT_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/trajrl-registry"; fi
DIR="${TRAJRL_REGISTRY_DIR:-$DEFAULT_DIR}"
ADDR="127.0.0.1:$PORT"
PIDFILE="$DIR/registry.pid"
LOG="$DIR/registry.log"

TAG=registry-up
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "$PORT" in ''|*[!0-9]*) die "TRAJRL_REGISTRY_PORT=$PORT is not a port number";; esac

# A registry, not just anything on the port: /v2/ answers with the distribution API header.
answers() {
  curl -sS -m 2 -o /dev/null -D - "http://$ADDR/v2/" 2>/dev/null \
    | grep -qi '^docker-distribution-api-version: *registry/2'
}

port_taken() {
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

our_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q docker-registry "/proc/$pid/cmdline" 2>/dev/null; then
    echo "$pid"
  fi
}

if [ "${1:-}" = "--stop" ]; then
  pid=$(our_pid)
  if [ -n "$pid" ]; then kill "$pid"; say "stopped the registry (pid $pid)"; else say "no registry of ours is running"; fi
  rm -f "$PIDFILE"
  exit 0
fi

answers && exit 0

if ! command -v docker-registry >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "docker-registry is not installed and installing it needs root (apt-get install docker-registry), or start a registry on $ADDR yourself"
  say "installing Debian's docker-registry"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed (is Debian's mirror reachable?)"
  apt-get install -y -qq --no-install-recommends docker-registry >/dev/null \
    || die "apt-get install docker-registry failed"
  # The package enables its own service on :5000 of every interface; only our loopback one runs.
  if [ -d /run/systemd/system ]; then
    systemctl disable --now docker-registry >/dev/null 2>&1 || true
  elif [ -x /etc/init.d/docker-registry ]; then
    /etc/init.d/docker-registry stop >/dev/null 2>&1 || true
  fi
  answers && exit 0
fi

pid=$(our_pid)
if [ -z "$pid" ]; then
  port_taken && die "127.0.0.1:$PORT is taken by something that is not a registry; set TRAJRL_REGISTRY_PORT to a free port"
  mkdir -p "$DIR/data" || die "cannot create $DIR (set TRAJRL_REGISTRY_DIR to a writable folder)"
  cat >"$DIR/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/data
  delete:
    enabled: true
http:
  addr: $ADDR
  headers:
    X-Content-Type-Options: [nosniff]
YAML
  say "starting docker-registry on $ADDR (storage $DIR/data, log $LOG)"
  nohup docker-registry serve "$DIR/config.yml" >>"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  pid=$!
fi

# Up, or given up on: the registry answers, or its process is gone.
up_or_gone() { answers || ! kill -0 "$pid" 2>/dev/null; }
wait_for 60 0.25 up_or_gone && answers && { say "registry up on $ADDR"; exit 0; }
tail -n 20 "$LOG" >&2 2>/dev/null || true
die "the registry did not answer on http://$ADDR/v2/ (log: $LOG)"
