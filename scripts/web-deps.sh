#!/usr/bin/env bash
# Idempotent: the Debian packages the operations tests need, from Debian's mirror only.
#   chromium        headless browser for the status page test (test/e2e/web-browser.test.ts drives
#                   it through playwright-core's executablePath; no browser download)
#   docker-compose  v1 (Debian's package; bookworm has no compose v2 plugin) to validate and run
#                   docker/docker-compose.validator.yml (test/integration/web-*.test.ts), plus the
#                   `docker compose` shim (scripts/docker-compose-plugin.sh) so the README's v2
#                   commands work with it
# Used by scripts/setup.sh and .ci/run; safe to re-run. Prints nothing when everything is in place.
#
#   scripts/web-deps.sh           install what is missing
#   scripts/web-deps.sh --check   install nothing; say what is there (exit 1 when something is missing)
#
# Chromium is checked through its binary, /usr/lib/chromium/chromium, never Debian's /usr/bin/chromium
# wrapper: the wrapper sources /etc/chromium.d/dev-shm, whose `[ $shm_avail -lt … ]` breaks when
# /dev/shm is mounted more than once (findmnt prints one line per mount) and prints
# "/usr/bin/chromium: 9: [: …: unexpected operator" (issue 22 item 2). The flags the wrapper adds
# are for desktop use; headless checks and tests need none of them.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM="${CHROMIUM_BIN:-/usr/lib/chromium/chromium}"
PLUGIN_DIR="${DOCKER_CLI_PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}"

TAG=web-deps
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

chromium_version() { "$CHROMIUM" --headless --no-sandbox --disable-gpu --version 2>/dev/null; }
compose_v2() { docker compose version --short 2>/dev/null; }

if [ "${1:-}" = "--check" ]; then
  ok=0
  if v=$(chromium_version); then say "chromium: $v ($CHROMIUM)"; else say "chromium: missing ($CHROMIUM)"; ok=1; fi
  if v=$(docker-compose version --short 2>/dev/null); then say "docker-compose: $v"; else say "docker-compose: missing"; ok=1; fi
  if v=$(compose_v2); then say "docker compose: $v"; else say "docker compose: missing"; ok=1; fi
  exit $ok
fi

missing=()
chromium_version >/dev/null || missing+=(chromium fonts-dejavu-core)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root: sudo apt-get install -y ${missing[*]}"
  say "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed (is Debian's mirror reachable?)"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
  v=$(chromium_version) || die "chromium does not start ($CHROMIUM)"
  say "installed $v"
  v=$(docker-compose version --short 2>/dev/null) || die "docker-compose does not run"
  say "installed docker-compose $v"
fi

# `docker compose …` (v2 syntax, as the README writes it) on a host that has only v1.
if ! compose_v2 >/dev/null; then
  [ "$(id -u)" = 0 ] || die "installing the docker compose shim into $PLUGIN_DIR needs root"
  install -D -m 0755 scripts/docker-compose-plugin.sh "$PLUGIN_DIR/docker-compose"
  compose_v2 >/dev/null || die "docker compose does not run after installing $PLUGIN_DIR/docker-compose"
  say "installed the docker compose shim: $PLUGIN_DIR/docker-compose → docker-compose $(compose_v2)"
fi
