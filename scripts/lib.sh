# Sourced by the set-up scripts (never run alone): their log lines and their one wait loop.
#
#   TAG=runsc-up; . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   say "text"                          "[TAG] text" on stderr
#   die "text"                          "[TAG] ERROR: text" on stderr, exit 1
#   wait_for TRIES STEP CMD [ARGS…]     run CMD until it succeeds, at most TRIES times STEP seconds
#                                       apart; status 0 when it did, 1 when it never did

say() { printf '[%s] %s\n' "$TAG" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$TAG" "$*" >&2; exit 1; }

wait_for() {
  local tries=$1 step=$2 _
  shift 2
  for _ in $(seq 1 "$tries"); do
    "$@" && return 0
    sleep "$step"
  done
  return 1
}
