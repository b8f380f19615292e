#!/usr/bin/env bash
# Builds the visible damaged repository at image build time. Fixed identities and dates make
# the commit hashes identical on every build.
set -euo pipefail
repo=$1
export GIT_AUTHOR_NAME="Dana Whitfield" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Whitfield" GIT_COMMITTER_EMAIL="dana@example.com"
export GIT_CONFIG_NOSYSTEM=1 HOME=/tmp
t=1714000000
at() { t=$((t + $1)); export GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000"; }

git init -q -b main "$repo"
cd "$repo"
mkdir -p src docs
printf 'def total(items):\n    return sum(items)\n' > src/billing.py
printf '# Billing service\n' > README.md
git add . && at 3600 && git commit -qm "Initial billing service"
printf 'def total(items, tax=0):\n    return sum(items) * (1 + tax)\n' > src/billing.py
git add . && at 3600 && git commit -qm "Add tax to totals"
printf 'Usage: total([1, 2], tax=0.2)\n' > docs/usage.md
git add . && at 3600 && git commit -qm "Document usage"

# A feature branch that was abandoned and deleted (older than the lost work).
git checkout -q -b experiment
printf 'def discount(x):\n    return x * 0.9\n' > src/discount.py
git add . && at 3600 && git commit -qm "Try a discount helper"
git checkout -q main
git branch -q -D experiment

# Work in progress that was stashed and then dropped.
printf '\n# TODO: currency rounding\n' >> src/billing.py
at 3600 && git stash push -q
git stash drop -q

# Two commits that were lost with reset --hard.
printf 'def total(items, tax=0):\n    return round(sum(items) * (1 + tax), 2)\n' > src/billing.py
git add . && at 3600 && git commit -qm "Round totals to cents"
printf 'Totals are rounded to cents.\n' >> docs/usage.md
git add . && at 3600 && git commit -qm "Explain rounding"
git reset -q --hard HEAD~2

git reflog expire --expire=now --all
rm -f .git/ORIG_HEAD
