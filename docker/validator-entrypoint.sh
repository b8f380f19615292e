#!/bin/sh
# Entry point of the validator image, and `trajrl-validator` on its PATH (a symlink to this file, so
# `docker compose … exec validator trajrl-validator …` runs like the daemon does). In order:
#   layout    the container's paths and bind address are fixed (DATA_DIR=/data, WALLET_PATH=/wallets,
#             STATUS_HOST=0.0.0.0, STATUS_PORT=8080, …) whatever .env.validator says; when the operator
#             set another value, the daemon's start says so and names the host-side setting instead.
#   identity  user: VALIDATOR_UID, else the owner of the mounted wallets (their key files are usually
#             0600: running as their owner reads them without copying or loosening them), else 10001;
#             group: VALIDATOR_GID, else the wallets' group, else 10001; plus the Docker socket's group
#             (its GID differs per host), so the engine answers without root. A socket that admits only
#             its owner forces root, and the log says so.
#   wallet    before the daemon starts (`run`), and before the rehearsal's localnet (`localnet`, which
#             registers the same hotkey): `trajrl-validator check --only wallet` as that identity.
#             A wallet it cannot use is reported with the fix on the host (WALLETS_DIR, VALIDATOR_UID in
#             docker/.env; WALLET_NAME/WALLET_HOTKEY in .env.validator), written to /run/trajrl/setup-error
#             (the HEALTHCHECK and `status` show it), and re-checked every 30 s: no restart loop, and the
#             command starts by itself once the files are fixed. The daemon holds its own start refusals
#             the same way (src/daemon/hold.ts). An invalid .env.validator is held the same way, with
#             the fix that applies to it (`up -d`: the env file is read at creation only).
# Every line this script writes is a JSON log line, as the daemon's are (`component: entrypoint`).
# docker/README.md, "User, Docker socket, wallets", explains this for operators.
set -eu

CLI=/app/bin/trajrl-validator.js
SETUP_ERROR=/run/trajrl/setup-error
# The compose command the operator started this with (the rehearsal's override names its pair of files).
COMPOSE="${TRAJRL_COMPOSE:-docker compose -f docker/docker-compose.validator.yml}"

# A JSON string's body (quotes, backslashes, tabs and new lines escaped; other controls dropped).
json() { sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' | tr -d '\000-\010\013-\037' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }'; }
# say LEVEL EVENT TEXT: one JSON log line on stderr, shaped like the daemon's pino lines.
say() {
  printf '{"level":"%s","time":"%s","svc":"trajrl-validator","component":"entrypoint","text":"%s","msg":"entrypoint.%s"}\n' \
    "$1" "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$(printf '%s' "$3" | json)" "$2" >&2
}

# Called as `trajrl-validator` (an exec into the running container): quiet, no wallet wait.
case "$(basename "$0")" in trajrl-validator) daemon=0 ;; *) daemon=1 ;; esac
# The wallet gate: the daemon, and the localnet of a rehearsal (it reads the same hotkey).
gate=""
[ "$daemon" = 0 ] || case "${1:-}" in run) gate=daemon ;; localnet) gate=localnet ;; esac
[ "${1:-}" = run ] || daemon=0

# --- layout ---------------------------------------------------------------------------------------
fix() { # NAME VALUE WHY
  eval "have=\${$1-}"
  if [ -n "$have" ] && [ "$have" != "$2" ] && [ "$daemon" = 1 ]; then
    say warn setting_ignored "$1=$have (set in .env.validator) is not used in the container: $3. Using $1=$2."
  fi
  export "$1=$2"
}
fix DATA_DIR /data "the data lives in the volume trajrl-validator-data, mounted at /data"
fix WALLET_PATH /wallets "the host's wallets are mounted at /wallets; choose them with WALLETS_DIR in docker/.env"
fix SCENARIOS_DIR /app/scenarios "the scenarios ship in the image"
fix STATUS_HOST 0.0.0.0 "the page is published on the host's 127.0.0.1 only"
fix STATUS_PORT 8080 "choose the host's port with STATUS_PORT in docker/.env"
fix DOCKER_SOCKET /var/run/docker.sock "the compose file mounts the host's socket there"
case "${DAEMON_IN_CONTAINER:-}" in 1 | true | yes | on) DAEMON_IN_CONTAINER=1 ;; esac
fix DAEMON_IN_CONTAINER 1 "the daemon joins each episode's network as meter"

# Auto-update hands the container to whoever can publish VALIDATOR_IMAGE: say so when that is a
# Docker Hub name (anyone may register one) or a local build (nothing to update from).
if [ "$daemon" = 1 ] && [ "${TRAJRL_AUTO_UPDATE:-false}" = true ]; then
  img="${TRAJRL_IMAGE:-}"
  host=""
  case "$img" in */*) host="${img%%/*}" ;; esac
  case "$host" in
    *.invalid) say warn auto_update "AUTO_UPDATE=true, but VALIDATOR_IMAGE=$img is a local build: Watchtower has nothing to update it from" ;;
    *.* | *:* | localhost) : ;;
    *) say warn auto_update "AUTO_UPDATE=true with VALIDATOR_IMAGE=$img, a Docker Hub name: whoever publishes under it controls this validator (its Docker socket, its hotkey). Use an image in a registry you control (docker/README.md, Updates)." ;;
  esac
fi

run() { exec node "$CLI" "$@"; }
[ "$(id -u)" = 0 ] || run "$@" # already unprivileged (e.g. `user:` in compose): nothing to decide

# --- identity -------------------------------------------------------------------------------------
sock="$DOCKER_SOCKET"
wallets="$WALLET_PATH"
data="$DATA_DIR"

uid="${VALIDATOR_UID:-}"
gid="${VALIDATOR_GID:-}"
if [ -z "$uid" ]; then
  uid=10001
  if [ -d "$wallets" ] && [ "$(stat -c %u "$wallets")" != 0 ]; then
    uid="$(stat -c %u "$wallets")"
    [ -n "$gid" ] || gid="$(stat -c %g "$wallets")"
  fi
fi
[ -n "$gid" ] || gid=10001

groups=""
as_root=0
if [ "$uid" = 0 ]; then
  [ "$daemon" = 0 ] || say info identity "VALIDATOR_UID=0: running as root"
  as_root=1
elif [ -S "$sock" ]; then
  mode="$(stat -c %a "$sock")"
  owner="$(stat -c %u "$sock")"
  sgid="$(stat -c %g "$sock")"
  if [ "$owner" = "$uid" ] || [ $((0$mode & 6)) -eq 6 ]; then
    :
  elif [ $(((0$mode >> 3) & 6)) -eq 6 ]; then
    groups="$sgid"
  else
    [ "$daemon" = 0 ] || say warn identity "$sock (mode $mode, owner $owner:$sgid) admits only its owner: running as root"
    as_root=1
  fi
else
  [ "$daemon" = 0 ] || say warn identity "no Docker socket at $sock (mount it: see docker/docker-compose.validator.yml)"
fi

if [ "$as_root" = 1 ]; then
  as_validator() { "$@"; }
else
  mkdir -p "$data"
  # A data volume written by an earlier identity (or created by Docker as root) is handed over once.
  if [ "$(stat -c %u "$data")" != "$uid" ]; then chown -R "$uid:$gid" "$data"; fi

  # Capabilities: none, except NET_ADMIN when the container was given it (cap_add in compose): the
  # sandbox installs its episode firewall with iptables at start. Kept as an ambient capability so the
  # unprivileged process can use it; iptables' lock file must then be writable by that user.
  caps="-all"
  bnd="$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)"
  if [ $(((0x$bnd >> 12) & 1)) -eq 1 ]; then
    caps="-all,+net_admin"
    touch /run/xtables.lock && chown "$uid:$gid" /run/xtables.lock
  fi
  ambient=""
  [ "$caps" = "-all" ] || ambient="+net_admin"
  if [ -n "$groups" ]; then groupopt="--groups=$groups"; else groupopt="--clear-groups"; fi
  export HOME=/home/validator
  as_validator() {
    setpriv --reuid="$uid" --regid="$gid" "$groupopt" --inh-caps="$caps" ${ambient:+--ambient-caps="$ambient"} \
      --bounding-set="$caps" --no-new-privs "$@"
  }
fi

# --- wallet ---------------------------------------------------------------------------------------
if [ -n "$gate" ]; then
  trap 'exit 143' TERM
  trap 'exit 130' INT
  mkdir -p "$(dirname "$SETUP_ERROR")"
  last=""
  while :; do
    if out="$(as_validator node "$CLI" check --only wallet 2>&1)"; then
      rm -f "$SETUP_ERROR"
      break
    fi
    if [ "$out" != "$last" ]; then
      say error setup_blocked "$(printf '%s\n' "$out" | sed '/^[0-9]* failed/d')"
      case "$out" in
        *"invalid environment"*) say info waiting "fix it in .env.validator, then: $COMPOSE up -d (the container reads .env.validator when it is created: no re-check here sees an edit)" ;;
        *) say info waiting "the $gate starts once this is fixed (checked every 30 s); after changing docker/.env: $COMPOSE up -d" ;;
      esac
      last="$out"
    fi
    printf '%s\n' "$out" | sed -n 's/^FAIL *wallet *//p; s/^ *→ /→ /p' | tr '\n' ' ' >"$SETUP_ERROR"
    sleep 30 &
    wait $! || true
  done
fi

[ "$as_root" = 0 ] || run "$@"
exec setpriv --reuid="$uid" --regid="$gid" "$groupopt" --inh-caps="$caps" ${ambient:+--ambient-caps="$ambient"} \
  --bounding-set="$caps" --no-new-privs node "$CLI" "$@"
