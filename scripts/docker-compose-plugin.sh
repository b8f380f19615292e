#!/bin/sh
# `docker compose …` for a host that has only Debian's docker-compose v1 (bookworm ships no v2
# plugin): a Docker CLI plugin that hands every command to docker-compose. scripts/web-deps.sh
# installs it as /usr/local/lib/docker/cli-plugins/docker-compose when `docker compose` is missing.
# The README's commands (build, up -d, exec, logs -f, ps, down, --profile) mean the same in both.
set -eu
if [ "${1:-}" = docker-cli-plugin-metadata ]; then
  v="$(docker-compose version --short 2>/dev/null || echo unknown)"
  printf '{"SchemaVersion":"0.1.0","Vendor":"trajrl-validator (shim for docker-compose v1)","Version":"%s","ShortDescription":"Docker Compose, through docker-compose %s"}\n' "$v" "$v"
  exit 0
fi
[ "${1:-}" = compose ] && shift
exec docker-compose "$@"
