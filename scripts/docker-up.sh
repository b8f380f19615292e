#!/usr/bin/env bash
# Idempotent: make a Docker engine answer on /var/run/docker.sock and make sure the
# project's offline base image (debian:bookworm-slim) exists. Used by the README,
# the tests (globalSetup checks, never skips) and CI.
#
#   scripts/docker-up.sh            engine + base image
#   scripts/docker-up.sh --engine   engine only
set -euo pipefail

BASE_IMAGE="${BASE_IMAGE:-debian:bookworm-slim}"
SUITE="${BASE_SUITE:-bookworm}"
SOCK=/var/run/docker.sock
LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
MIRROR="${DEBIAN_MIRROR:-}"

TAG=docker-up
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

engine_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
socket_answers() { [ -S "$SOCK" ] && engine_answers; }

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 needs root (run as root, or start a Docker engine yourself and re-run)"
}

install_packages() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  [ ${#missing[@]} -eq 0 ] && return 0
  need_root "installing ${missing[*]}"
  say "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed (is Debian's mirror reachable?)"
  # docker.io pulls its own client; keep any newer client already on PATH first.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" iptables >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

start_engine() {
  engine_answers && return 0
  install_packages
  command -v dockerd >/dev/null 2>&1 || die "dockerd not found after install"
  need_root "starting dockerd"
  # A dockerd killed at the end of a session leaves a stale pid file that blocks restarts.
  if [ -f /var/run/docker.pid ]; then
    local pid; pid=$(cat /var/run/docker.pid 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/cmdline" 2>/dev/null; then
      say "dockerd (pid $pid) is running; waiting for it"
    else
      say "removing stale /var/run/docker.pid"
      rm -f /var/run/docker.pid
    fi
  fi
  rm -f /var/run/docker/containerd/containerd.pid 2>/dev/null || true
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    say "starting dockerd (log: $LOG)"
    mkdir -p "$(dirname "$LOG")"
    # The episode networks come from a dedicated pool (see src/sandbox); give the
    # default bridge pools room so hundreds of networks a day never exhaust them.
    nohup dockerd --default-address-pool base=172.80.0.0/12,size=24 >>"$LOG" 2>&1 &
    # This engine is the set-up's own: scripts/runsc-up.sh may register gVisor with it.
    echo "$!" >"${TRAJRL_DOCKERD_MARKER:-/var/run/trajrl-dockerd.pid}"
  fi
  if wait_for 120 0.5 socket_answers; then say "engine up: $(docker version --format '{{.Server.Version}}')"; return 0; fi
  tail -n 30 "$LOG" >&2 || true
  die "dockerd did not answer on $SOCK within 60 s"
}

ensure_base_image() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
  say "$BASE_IMAGE missing; trying to pull"
  if timeout 60 docker pull "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
  say "no registry: building $BASE_IMAGE offline with debootstrap"
  install_packages
  need_root "debootstrap"
  local dir; dir=$(mktemp -d /tmp/trajrl-rootfs.XXXXXX)
  trap 'rm -rf "$dir"' RETURN
  debootstrap --variant=minbase "$SUITE" "$dir" ${MIRROR:+"$MIRROR"} >/tmp/debootstrap.log 2>&1 \
    || { tail -n 30 /tmp/debootstrap.log >&2; die "debootstrap failed"; }
  # Slim like the official image: no docs, apt lists, caches.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/usr/share/doc/* \
         "$dir"/usr/share/man/* "$dir"/usr/share/locale/* 2>/dev/null || true
  local src; src=$(grep -m1 -E '^deb ' "$dir/etc/apt/sources.list" 2>/dev/null | awk '{print $2}')
  src=${src:-http://deb.debian.org/debian}
  cat >"$dir/etc/apt/sources.list" <<SRC
deb $src $SUITE main
deb $src $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
SRC
  tar -C "$dir" -c . | docker import \
      -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' - "$BASE_IMAGE" >/dev/null \
    || die "docker import failed"
  say "imported $BASE_IMAGE"
}

start_engine
[ "${1:-}" = "--engine" ] || ensure_base_image
