#!/usr/bin/env bash
# Idempotent machine set-up for the demo, the tests and CI: a Docker engine with the offline base
# image and gVisor (Debian's runsc, registered as the engine's `runsc` runtime when this set-up
# started the engine), Debian's python3 with aiohttp/httpx (sidecar host tests), chromium and docker-compose
# (status page and deployment tests), a container registry on 127.0.0.1:5000 (the offline
# trajrl-bench's tests push there). Each step returns at once when its part is already in place.
#
#   bash scripts/setup.sh            (npm test and npm run demo run it first)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/docker-up.sh
bash scripts/runsc-up.sh
bash scripts/python-deps.sh
bash scripts/web-deps.sh
bash scripts/registry-up.sh
