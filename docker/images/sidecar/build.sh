#!/usr/bin/env bash
# Build the sidecar image by hand with the docker CLI (production builds go through dockerode with
# the same context: src/policy/paths.ts sidecarBuildContext()). Never pulls: FROM is the local
# debian:bookworm-slim (scripts/docker-up.sh makes sure it exists).
#
#   docker/images/sidecar/build.sh [TAG]      default tag: trajrl-sidecar:dev
set -euo pipefail
cd "$(dirname "$0")/../../.."
TAG="${1:-trajrl-sidecar:dev}"
tar -c docker/images/sidecar/Dockerfile sidecar/sdk/trajrl_policy.py \
  | docker build --pull=false -f docker/images/sidecar/Dockerfile -t "$TAG" -
