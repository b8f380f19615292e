#!/usr/bin/env bash
# A plausible half-solution: trusts the reflog, so it only works while reflogs still exist,
# and it never looks for dropped stashes.
set -euo pipefail
cat > /app/recover.sh <<'EOF'
#!/usr/bin/env bash
# Recover the commit HEAD pointed at before the last reset.
repo=${1:?usage: recover.sh REPO}
cd "$repo" || exit 1
prev=$(git rev-parse -q --verify 'HEAD@{1}') || exit 0
if ! git merge-base --is-ancestor "$prev" HEAD; then
  git branch recovered "$prev"
fi
exit 0
EOF
chmod 0755 /app/recover.sh
