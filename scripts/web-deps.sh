#!/usr/bin/env bash
# Idempotent: the Debian packages the operations tests need, from Debian's mirror only.
#   chromium        headless browser for the status page test (test/e2e/web-browser.test.ts drives
#                   /usr/bin/chromium through playwright-core's executablePath; no browser download)
#   docker-compose  v1 (Debian's package; there is no compose v2 plugin here) to validate
#                   docker/docker-compose.validator.yml (test/integration/web-image.test.ts)
# Used by .ci/run; safe to re-run.
set -euo pipefail

say() { printf '[web-deps] %s\n' "$*" >&2; }
die() { printf '[web-deps] ERROR: %s\n' "$*" >&2; exit 1; }

missing=()
/usr/bin/chromium --headless --no-sandbox --disable-gpu --version >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
[ ${#missing[@]} -eq 0 ] && exit 0

[ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root: sudo apt-get install -y ${missing[*]}"
say "installing ${missing[*]} from Debian"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || die "apt-get update failed (is Debian's mirror reachable?)"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
/usr/bin/chromium --headless --no-sandbox --disable-gpu --version >&2 || die "chromium does not start"
docker-compose version --short >&2 || die "docker-compose does not run"
