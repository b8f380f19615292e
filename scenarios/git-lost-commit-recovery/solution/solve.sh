#!/usr/bin/env bash
# Reference solution: writes /app/recover.sh.
set -euo pipefail
cat > /app/recover.sh <<'EOF'
#!/usr/bin/env bash
# Recreate branches for work lost by reset --hard and stash drop.
# fsck --no-reflogs: reflog entries keep commits "reachable" for fsck, but they are not refs.
set -euo pipefail
repo=${1:?usage: recover.sh REPO}
cd "$repo"

work="" work_t=-1 stash="" stash_t=-1
while read -r sha; do
  read -r t parents_count subject < <(git log -1 --format='%ct %P%x09%s' "$sha" |
    awk -F '\t' '{ n = split($1, a, " "); printf "%s %d %s\n", a[1], n - 1, $2 }')
  case "$subject" in
    "index on "* | "untracked files on "*) continue ;;
  esac
  if [ "$parents_count" -ge 2 ] && { [[ "$subject" == "WIP on "* ]] || [[ "$subject" == "On "* ]]; }; then
    if [ "$t" -gt "$stash_t" ]; then stash=$sha stash_t=$t; fi
  elif [ "$t" -gt "$work_t" ]; then
    work=$sha work_t=$t
  fi
done < <(git fsck --unreachable --no-reflogs --no-progress 2>/dev/null | awk '$1 == "unreachable" && $2 == "commit" { print $3 }')

if [ -n "$work" ]; then git branch -f recovered "$work"; fi
if [ -n "$stash" ]; then git branch -f recovered-stash "$stash"; fi
exit 0
EOF
chmod 0755 /app/recover.sh
