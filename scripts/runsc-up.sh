#!/usr/bin/env bash
# Idempotent: gVisor for the episode containers (EPISODE_RUNTIME=auto uses it where the engine has
# it; src/sandbox/README.md, "gVisor"). Installs Debian's runsc when missing and registers it with
# the Docker engine as the runtime `runsc`:
#  - an engine this set-up started (scripts/docker-up.sh): a "runtimes" entry merged into its
#    /etc/docker/daemon.json, then a SIGHUP (a reload: running containers keep running, the default
#    runtime stays runc), then one container started under it as a smoke test;
#  - any other engine (systemd's, an operator's): left alone; the script prints what to add to its
#    daemon.json, and episodes run under runc (with an alarm) until someone does.
# Returns at once, printing nothing, when the engine already lists `runsc`.
#
#   scripts/runsc-up.sh            install and register
#   scripts/runsc-up.sh --print    the daemon.json entry alone (what README, "Several hosts", shows)
#
# DOCKERD_CONFIG, DOCKERD_PIDFILE, DOCKERD_LOG and TRAJRL_DOCKERD_MARKER (the pid docker-up.sh
# records) default to where docker-up.sh puts them.
#
# Why `--network=host`: Debian's runsc (release 20221219) refuses its own network stack on kernels
# that show net.core.rmem_default in every network namespace (6.x; google/gvisor#10704, fixed in
# 2024): "cannot run with network enabled in root network namespace". With host networking gVisor
# uses the namespace Docker made for the container, so the bridges, the host firewall chain and the
# embedded DNS apply to it exactly as to a runc container.
set -euo pipefail

BASE_IMAGE="${BASE_IMAGE:-debian:bookworm-slim}"
CONFIG="${DOCKERD_CONFIG:-/etc/docker/daemon.json}"
LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
PIDFILE="${DOCKERD_PIDFILE:-/var/run/docker.pid}"
MARKER="${TRAJRL_DOCKERD_MARKER:-/var/run/trajrl-dockerd.pid}"
ENTRY='{"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]}}'

TAG=runsc-up
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ "${1:-}" = "--print" ]; then
  printf '{ "runtimes": %s }\n' "$ENTRY"
  exit 0
fi

engine_lists_runsc() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

install_runsc() {
  command -v runsc >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || die "installing Debian's runsc (gVisor) needs root; or install it yourself (apt-get install runsc) and register it: $(printf '{ "runtimes": %s }' "$ENTRY") in the engine's daemon.json"
  command -v apt-get >/dev/null 2>&1 || die "no apt-get: install gVisor's runsc (https://gvisor.dev) at /usr/bin/runsc yourself"
  say "installing runsc (gVisor) from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed (is Debian's mirror reachable?)"
  apt-get install -y -qq --no-install-recommends runsc >/dev/null || die "apt-get install runsc failed"
  say "ok: $(runsc --version 2>/dev/null | head -n1)"
}

# The engine's pid when this set-up started it: the pid docker-up.sh recorded, or (engines started
# before it recorded one) a dockerd with exactly docker-up.sh's command line. Empty otherwise.
our_engine_pid() {
  local pid cmd
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  if [ "$(cat "$MARKER" 2>/dev/null || true)" = "$pid" ]; then echo "$pid"; return 0; fi
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  [ "$cmd" = "dockerd --default-address-pool base=172.80.0.0/12,size=24 " ] && echo "$pid"
  return 0
}

# Merge {"runtimes": {"runsc": …}} into the config file, keeping everything else (node: the one
# JSON tool every host of this project has). A file that is not a JSON object is not touched.
merge_config() {
  mkdir -p "$(dirname "$CONFIG")"
  CONFIG="$CONFIG" ENTRY="$ENTRY" node -e '
    const fs = require("node:fs");
    const path = process.env.CONFIG;
    let cfg = {};
    if (fs.existsSync(path)) {
      const text = fs.readFileSync(path, "utf8");
      try { cfg = text.trim() ? JSON.parse(text) : {}; } catch (e) { console.error(`${path}: ${e.message}`); process.exit(2); }
      if (cfg === null || typeof cfg !== "object" || Array.isArray(cfg)) { console.error(`${path}: not a JSON object`); process.exit(2); }
    }
    cfg.runtimes = { ...(cfg.runtimes ?? {}), ...JSON.parse(process.env.ENTRY) };
    fs.writeFileSync(`${path}.trajrl-tmp`, `${JSON.stringify(cfg, null, 2)}\n`);
    fs.renameSync(`${path}.trajrl-tmp`, path);
  ' || die "$CONFIG could not be updated (left as it was)"
}

smoke_test() {
  local name="trajrl-runsc-smoke-$$" out
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || return 0
  if ! out=$(timeout 90 docker run --rm --name "$name" --runtime=runsc --network none "$BASE_IMAGE" true 2>&1); then
    docker rm -f "$name" >/dev/null 2>&1 || true
    die "runsc is registered but a container does not start under it: ${out:-no answer within 90 s}"
  fi
}

install_runsc
engine_lists_runsc && exit 0
pid=$(our_engine_pid)
if [ -z "$pid" ]; then
  say "the Docker engine was not started by this set-up: left alone. For gVisor, add to its daemon.json:"
  say "  \"runtimes\": $ENTRY"
  say "then reload it (systemctl reload docker, or kill -HUP <dockerd's pid>); until then episodes run under runc"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "registering runsc with the engine needs root"
say "registering runsc with the engine (pid $pid): $CONFIG, then a reload"
merge_config
kill -HUP "$pid"
if ! wait_for 40 0.25 engine_lists_runsc; then
  tail -n 10 "$LOG" >&2 2>/dev/null || true
  die "the engine did not take the runtime after a reload (its log above)"
fi
smoke_test
say "ok: episodes run under gVisor (EPISODE_RUNTIME=auto)"
