#!/usr/bin/env bash
# Proves one scenario with the docker CLI, the way `trajrl-validator scenarios check` does:
#   reference solution -> tests/tests, empty deliverable -> null_floor, partial -> strictly between.
# usage: scenarios/_tools/check-by-hand.sh SCENARIO_DIR [AGENT_BASE_IMAGE] [--keep-image]
# Prints one line: name  reference  empty  partial  verdict. Every container and image it creates
# carries the label trajrl-dev=scenario-check and is removed before it exits.
set -uo pipefail
dir=$(cd "${1:?usage: check-by-hand.sh SCENARIO_DIR [BASE] [--keep-image]}" && pwd)
base=${2:-trajrl/agent-base:latest}
keep=${3:-}
name=$(basename "$dir")
label=trajrl-dev=scenario-check
img="trajrl-dev/scenario-$name:check"
work=$(mktemp -d)
containers=()
cleanup() {
  for c in "${containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1; done
  [ "$keep" = "--keep-image" ] || docker rmi -f "$img" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

out_path=$(sed -n 's/^[[:space:]]*agent_output_path[[:space:]]*=[[:space:]]*"\(.*\)".*/\1/p' "$dir/task.toml" | head -1)
null_floor=$(sed -n 's/^[[:space:]]*null_floor[[:space:]]*=[[:space:]]*\([0-9.]*\).*/\1/p' "$dir/task.toml" | head -1)
vtimeout=$(awk '/^\[verifier\]/{v=1;next} /^\[/{v=0} v && /timeout_sec/{gsub(/[^0-9.]/,"",$0); print; exit}' "$dir/task.toml")

if ! docker build -q --label "$label" --build-arg "AGENT_BASE=$base" -t "$img" "$dir/environment" >"$work/build.log" 2>&1; then
  echo "$name  build failed:"; cat "$work/build.log"; exit 1
fi

# $1 = solution script or "" for the empty deliverable; prints "passed/tests"
grade() {
  local script=$1 tag=$2 a b
  local deliverable="$work/$tag.deliverable"
  if [ -n "$script" ]; then
    a="scen-check-$name-$tag-a-$$"
    containers+=("$a")
    docker create --name "$a" --label "$label" --network none --user 10000:10000 -w /app \
      "$img" bash /tmp/solution.sh >/dev/null
    docker cp "$script" "$a:/tmp/solution.sh" >/dev/null
    timeout 120 docker start -a "$a" >"$work/$tag.solve.log" 2>&1 || { echo "solve-failed"; return; }
    docker cp "$a:$out_path" "$deliverable" >/dev/null 2>&1 || : >"$deliverable"
    docker rm -f "$a" >/dev/null
  else
    : >"$deliverable"
  fi
  chmod 0755 "$deliverable"
  b="scen-check-$name-$tag-b-$$"
  containers+=("$b")
  docker create --name "$b" --label "$label" --network none --user 0:0 "$img" bash /tests/test.sh >/dev/null
  docker cp "$dir/tests" "$b:/tests" >/dev/null
  docker cp "$deliverable" "$b:$out_path" >/dev/null
  timeout "${vtimeout:-300}" docker start -a "$b" >"$work/$tag.grade.log" 2>&1
  if ! docker cp "$b:/logs/verifier/ctrf.json" "$work/$tag.ctrf.json" >/dev/null 2>&1; then
    echo "no-ctrf"; return
  fi
  docker rm -f "$b" >/dev/null
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["results"]["summary"]; print("%d/%d" % (s["passed"], s["tests"]))' "$work/$tag.ctrf.json"
  if [ -n "${VERBOSE:-}" ]; then sed 's/^/    /' "$work/$tag.grade.log" >&2; fi
}

t0=$(date +%s)
ref=$(grade "$dir/solution/solve.sh" ref)
empty=$(grade "" empty)
partial=$(grade "$dir/solution/partial.sh" partial)
secs=$(( $(date +%s) - t0 ))

verdict=$(python3 - "$ref" "$empty" "$partial" "$null_floor" <<'PY'
import sys
ref, empty, partial, floor = sys.argv[1:5]
def frac(s):
    p, n = s.split("/")
    return int(p), int(n)
try:
    rp, rn = frac(ref); ep, en = frac(empty); pp, pn = frac(partial)
except ValueError:
    print("FAIL(unparseable)"); sys.exit()
problems = []
if rp != rn: problems.append("reference<full")
if abs(ep / en - float(floor)) > 1e-3: problems.append("empty!=null_floor(%s)" % floor)
if not (ep / en < pp / pn < 1): problems.append("partial-not-between")
print("OK" if not problems else "FAIL(" + ",".join(problems) + ")")
PY
)
printf '%-28s ref=%-5s empty=%-5s (null_floor %s) partial=%-5s %3ss  %s\n' "$name" "$ref" "$empty" "$null_floor" "$partial" "$secs" "$verdict"
