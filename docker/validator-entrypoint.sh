#!/bin/sh
# Entry point of the validator image: decides who the validator runs as, then execs it.
# Started as root only for this decision; the validator itself runs unprivileged when it can:
#   user   VALIDATOR_UID, else the owner of the mounted wallets (their key files are usually 0600:
#          running as their owner reads them without copying or loosening them), else 10001.
#   group  VALIDATOR_GID, else the wallets' group, else 10001.
#   extra  the Docker socket's group (its GID differs per host), so the engine answers without root.
# A socket that admits only its owner (no group rw) forces root, and the log says so.
# docker/README.md, "User, Docker socket, wallets", explains this for operators.
set -eu

run() { exec node /app/bin/trajrl-validator.js "$@"; }
say() { printf 'validator-entrypoint: %s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || run "$@"   # already unprivileged (e.g. `user:` in compose): nothing to decide

sock="${DOCKER_SOCKET:-/var/run/docker.sock}"
wallets="${WALLET_PATH:-/wallets}"
data="${DATA_DIR:-/data}"

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
if [ "$uid" = 0 ]; then
  say "VALIDATOR_UID=0: running as root"
  run "$@"
fi

groups=""
if [ -S "$sock" ]; then
  mode="$(stat -c %a "$sock")"
  owner="$(stat -c %u "$sock")"
  sgid="$(stat -c %g "$sock")"
  if [ "$owner" = "$uid" ] || [ $(( 0$mode & 6 )) -eq 6 ]; then
    :
  elif [ $(( (0$mode >> 3) & 6 )) -eq 6 ]; then
    groups="$sgid"
  else
    say "$sock (mode $mode, owner $owner:$sgid) admits only its owner: running as root"
    run "$@"
  fi
else
  say "no Docker socket at $sock (mount it: see docker/docker-compose.validator.yml)"
fi

mkdir -p "$data"
# A data volume written by an earlier identity (or created by Docker as root) is handed over once.
if [ "$(stat -c %u "$data")" != "$uid" ]; then chown -R "$uid:$gid" "$data"; fi

# Capabilities: none, except NET_ADMIN when the container was given it (cap_add in compose): the
# sandbox installs its episode firewall with iptables at start. Kept as an ambient capability so the
# unprivileged process can use it; iptables' lock file must then be writable by that user.
caps="-all"
bnd="$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)"
if [ $(( (0x$bnd >> 12) & 1 )) -eq 1 ]; then
  caps="-all,+net_admin"
  touch /run/xtables.lock && chown "$uid:$gid" /run/xtables.lock
fi
ambient=""
[ "$caps" = "-all" ] || ambient="+net_admin"

if [ -n "$groups" ]; then groupopt="--groups=$groups"; else groupopt="--clear-groups"; fi
export HOME=/home/validator
exec setpriv --reuid="$uid" --regid="$gid" "$groupopt" --inh-caps="$caps" ${ambient:+--ambient-caps="$ambient"} \
  --bounding-set="$caps" --no-new-privs node /app/bin/trajrl-validator.js "$@"
