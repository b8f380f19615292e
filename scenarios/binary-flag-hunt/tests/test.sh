#!/usr/bin/env bash
# Hidden grader entry point. Runs as root in a fresh container of the task image with no network,
# the tests in /tests and the one deliverable at the task's agent_output_path (mode 0755).
# Always leaves /logs/verifier/ctrf.json and /logs/verifier/reward.txt behind; the validator of the
# built-in suite reads the grader's signed report from stdout instead (harness.py). stdin carries
# the validator's report key to grade.py: nothing here may read it.
set -u
mkdir -p /logs/verifier
cd /tests || exit 1
python3 -B /tests/grade.py
status=$?
if [ ! -s /logs/verifier/ctrf.json ]; then
  # The grader could not even start: one failed entry keeps the report well-formed.
  printf '{"results":{"tool":{"name":"trajrl-grader"},"summary":{"tests":1,"passed":0,"failed":1,"pending":0,"skipped":0,"other":0},"tests":[{"name":"grader","status":"failed","duration":0,"message":"grader exited %s before writing a report"}]}}\n' "$status" > /logs/verifier/ctrf.json
  echo 0 > /logs/verifier/reward.txt
fi
# The grader's own status: 128+N when a signal killed it, which the validator never takes as a score.
exit "$status"
