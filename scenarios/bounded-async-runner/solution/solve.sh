#!/usr/bin/env bash
# Reference solution: writes /app/runner.py (each job in its own session so a timeout can kill
# its whole process group; a single loop reaps jobs and refills free slots immediately).
set -euo pipefail
cat > /app/runner.py <<'EOF'
#!/usr/bin/env python3
import argparse
import os
import signal
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", type=int, required=True)
    ap.add_argument("-t", type=float, required=True)
    ap.add_argument("jobfile")
    args = ap.parse_args()
    with open(args.jobfile, encoding="utf-8", errors="surrogateescape") as f:
        jobs = [l.rstrip("\r\n") for l in f if l.strip() and not l.lstrip().startswith("#")]
    k = max(1, args.j)
    results = [None] * len(jobs)
    running = {}  # index -> (Popen, deadline)
    nxt = 0
    while nxt < len(jobs) or running:
        while nxt < len(jobs) and len(running) < k:
            p = subprocess.Popen(
                ["/bin/sh", "-c", jobs[nxt]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            running[nxt] = (p, time.monotonic() + args.t)
            nxt += 1
        now = time.monotonic()
        for i, (p, deadline) in list(running.items()):
            rc = p.poll()
            if rc is None and now >= deadline:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
                results[i] = "timeout -"
                del running[i]
            elif rc is not None:
                # The job's leader is gone; anything it left in its group goes too.
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                code = rc if rc >= 0 else 128 - rc
                results[i] = ("ok 0" if code == 0 else "failed %d" % code)
                del running[i]
        if running:
            time.sleep(0.01)
    for i, r in enumerate(results, 1):
        print("%d %s" % (i, r))
    return 0 if all(r == "ok 0" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
EOF
chmod 0755 /app/runner.py
