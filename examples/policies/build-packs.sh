#!/usr/bin/env bash
# Rebuild examples/packs/*.json from examples/policies/<name>/{SKILL.md,policy/} and validate each.
set -euo pipefail
cd "$(dirname "$0")/../.."
for name in pin escalate advisers sdk_custom public_sdk_example; do
  npx tsx src/cli.ts pack build "examples/policies/$name/SKILL.md" --policy "examples/policies/$name/policy" \
    -o "examples/packs/$name.json"
  npx tsx src/cli.ts pack validate "examples/packs/$name.json"
done
