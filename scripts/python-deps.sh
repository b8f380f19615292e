#!/usr/bin/env bash
# Idempotent: make Debian's python3 importable with aiohttp and httpx on the host, for the
# sidecar's host-side tests and the miner's inner loop (`trajrl-validator policy serve`).
# The sidecar image installs the same Debian packages, so host and container run the same code.
#
#   scripts/python-deps.sh          (TRAJRL_PYTHON overrides the interpreter that is checked)
set -euo pipefail

PY="${TRAJRL_PYTHON:-/usr/bin/python3}"

TAG=python-deps
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ -x "$PY" ] && "$PY" -c 'import aiohttp, httpx' >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${TRAJRL_PYTHON:-}" ]; then
  die "TRAJRL_PYTHON=$PY cannot import aiohttp and httpx; install them for it, or unset TRAJRL_PYTHON to use Debian's /usr/bin/python3"
fi
[ "$(id -u)" = 0 ] || die "installing python3-aiohttp python3-httpx needs root (or point TRAJRL_PYTHON at a python3 that has them)"
say "installing python3 python3-aiohttp python3-httpx from Debian"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || die "apt-get update failed (is Debian's mirror reachable?)"
apt-get install -y -qq --no-install-recommends python3 python3-aiohttp python3-httpx >/dev/null \
  || die "apt-get install python3-aiohttp python3-httpx failed"
"$PY" -c 'import aiohttp, httpx' || die "$PY still cannot import aiohttp and httpx"
say "ok: $("$PY" -c 'import sys, aiohttp, httpx; print(sys.version.split()[0], "aiohttp", aiohttp.__version__, "httpx", httpx.__version__)')"
