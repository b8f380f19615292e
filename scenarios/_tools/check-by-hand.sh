#!/usr/bin/env bash
# Proves one scenario with the docker CLI, the way `trajrl-validator scenarios check` does:
#   reference solution -> tests/tests, empty deliverable -> null_floor, partial -> strictly between,
#   the hostile probe (_tools/hostile-probe) -> nothing the empty deliverable does not get.
# Grading containers are the validator's built-in verifier: six capabilities, /tmp and /logs on
# tmpfs, a fresh key on stdin, and the report taken from the grader's signed line on stdout.
# usage: scenarios/_tools/check-by-hand.sh SCENARIO_DIR [AGENT_BASE_IMAGE] [--keep-image]
# Prints one line: name  reference  empty  partial  hostile  verdict. Every container and image it
# creates carries the label trajrl-dev=scenario-check and is removed before it exits.
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

# $1 = solution script or "" (then $3 = a deliverable file, or none for the empty deliverable);
# prints "passed/tests"
grade() {
  local script=$1 tag=$2 given=${3:-} a b
  local deliverable="$work/$tag.deliverable"
  if [ -n "$given" ]; then
    cp "$given" "$deliverable"
  elif [ -n "$script" ]; then
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
  docker create -i --name "$b" --label "$label" --network none --user 0:0 --init \
    --cap-drop ALL --cap-add CHOWN --cap-add DAC_OVERRIDE --cap-add FOWNER --cap-add SETUID \
    --cap-add SETGID --cap-add KILL --security-opt no-new-privileges \
    --tmpfs /tmp:rw,nosuid,nodev,exec,size=1g,mode=1777 --tmpfs /logs:rw,nosuid,nodev,noexec,size=16m,mode=0755 \
    "$img" bash /tests/test.sh >/dev/null
  docker cp "$dir/tests" "$b:/tests" >/dev/null
  docker cp "$deliverable" "$b:$out_path" >/dev/null
  local key
  key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$key" | timeout "${vtimeout:-300}" docker start -ai "$b" >"$work/$tag.grade.log" 2>&1
  docker rm -f "$b" >/dev/null
  # The one line signed with this grading's key; anything else on stdout is ignored.
  python3 - "$key" "$work/$tag.grade.log" <<'PY'
import base64, hashlib, hmac, json, sys
key = bytes.fromhex(sys.argv[1])
found = []
for line in open(sys.argv[2], errors="replace").read().splitlines():
    if not line.startswith("@@TRAJRL-REPORT v1 "):
        continue
    try:
        mac, data = line.split(" ")[2], base64.b64decode(line.split(" ")[3])
    except (IndexError, ValueError):
        continue
    if hmac.compare_digest(mac, hmac.new(key, b"trajrl-report v1\n" + data, hashlib.sha256).hexdigest()):
        found.append(json.loads(data)["results"]["summary"])
print("%d/%d" % (found[0]["passed"], found[0]["tests"]) if len(found) == 1 else "no-report")
PY
  if [ -n "${VERBOSE:-}" ]; then sed 's/^/    /' "$work/$tag.grade.log" >&2; fi
}

t0=$(date +%s)
ref=$(grade "$dir/solution/solve.sh" ref)
empty=$(grade "" empty)
partial=$(grade "$dir/solution/partial.sh" partial)
hostile=$(grade "" hostile "$(dirname "$0")/hostile-probe")
secs=$(( $(date +%s) - t0 ))

verdict=$(python3 - "$ref" "$empty" "$partial" "$null_floor" "$hostile" <<'PY'
import sys
ref, empty, partial, floor, hostile = sys.argv[1:6]
def frac(s):
    p, n = s.split("/")
    return int(p), int(n)
try:
    rp, rn = frac(ref); ep, en = frac(empty); pp, pn = frac(partial); hp, hn = frac(hostile)
except ValueError:
    print("FAIL(unparseable)"); sys.exit()
problems = []
if rp != rn: problems.append("reference<full")
if abs(ep / en - float(floor)) > 1e-3: problems.append("empty!=null_floor(%s)" % floor)
if not (ep / en < pp / pn < 1): problems.append("partial-not-between")
if hp > ep: problems.append("hostile>empty")
print("OK" if not problems else "FAIL(" + ",".join(problems) + ")")
PY
)
printf '%-28s ref=%-5s empty=%-5s (null_floor %s) partial=%-5s hostile=%-5s %3ss  %s\n' "$name" "$ref" "$empty" "$null_floor" "$partial" "$hostile" "$secs" "$verdict"
