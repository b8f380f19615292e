#!/bin/bash
# Entrypoint of the offline bench's sandbox-agent image (and of every scenario image FROM it), in
# the role upstream's sandbox-agent-entrypoint.sh plays: pin the agent's model endpoint in the
# harness' config from the container's LLM_BASE_URL / LLM_MODEL / LLM_API_KEY, give the harness
# home to the hermes user, keep SKILL.md / INSTRUCTION.md read-only, then run the command
# (`tail -f /dev/null` by default: the validator drives episodes with `docker exec -u hermes`).
set -e

HERMES_HOME="${HERMES_HOME:-/opt/data}"
mkdir -p "$HERMES_HOME"

if [ -n "${LLM_BASE_URL:-}" ] && [ -n "${LLM_MODEL:-}" ]; then
    # Our `hermes` speaks to any OpenAI-compatible endpoint: always the "custom" provider.
    # The key is the episode's token; the file is the hermes user's alone.
    (
        umask 077
        cat > "$HERMES_HOME/config.yaml" <<EOF
model:
  provider: "custom"
  default: "$LLM_MODEL"
  base_url: "$LLM_BASE_URL"
  api_key: "${LLM_API_KEY:-}"
EOF
    )
fi
chown -R hermes:hermes "$HERMES_HOME"

for f in /workspace/SKILL.md /workspace/INSTRUCTION.md; do
    if [ -f "$f" ]; then
        chown root:hermes "$f"
        chmod 0440 "$f"
    fi
done

exec "$@"
