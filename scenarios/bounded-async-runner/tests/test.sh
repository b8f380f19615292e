#!/usr/bin/env bash
# Hidden grader entry point. Runs as root in a fresh container of the task image with no network,
# the tests in /tests and the one deliverable at the task's agent_output_path (mode 0755).
# Always leaves /logs/verifier/ctrf.json and /logs/verifier/reward.txt behind.
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
exit 0
