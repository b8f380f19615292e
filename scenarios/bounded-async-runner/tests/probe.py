"""Job helper for the bounded-async-runner grader. Every job enters and leaves a shared state
file under an flock, so the grader learns the real concurrency and start order without
trusting clocks:  probe.py STATE_DIR ACTION ID [ARGS...]"""

import fcntl
import json
import os
import subprocess
import sys
import time


def update(state_dir, fn):
    with open(os.path.join(state_dir, "lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(state_dir, "state.json")
        try:
            with open(path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            st = {"active": 0, "max": 0, "starts": [], "ended_at_start": [], "ends": [], "reached": False}
        result = fn(st)
        with open(path + ".tmp", "w") as f:
            json.dump(st, f)
        os.replace(path + ".tmp", path)
        return result


def enter(state_dir, job):
    def fn(st):
        st["active"] += 1
        st["max"] = max(st["max"], st["active"])
        st["starts"].append(job)
        # How many jobs had finished when this one began: a runner that starts jobs in file
        # order with at most K running guarantees ended >= job - K, whatever the scheduling.
        st["ended_at_start"].append(len(st["ends"]))

    update(state_dir, fn)


def leave(state_dir, job):
    def fn(st):
        st["active"] -= 1
        st["ends"].append(job)

    update(state_dir, fn)


def main():
    state_dir, action, job = sys.argv[1], sys.argv[2], int(sys.argv[3])
    args = sys.argv[4:]
    enter(state_dir, job)
    code = 0
    if action == "run":
        time.sleep(float(args[0]))
        code = int(args[1])
    elif action == "barrier":
        need, wait = int(args[0]), float(args[1])
        deadline = time.monotonic() + wait

        def seen(st):
            if st["active"] >= need:
                st["reached"] = True
            return st["reached"]

        while not update(state_dir, seen):
            if time.monotonic() > deadline:
                code = 99
                break
            time.sleep(0.02)
        time.sleep(0.05)
    elif action == "waitfile":
        deadline = time.monotonic() + float(args[1])
        while not os.path.exists(args[0]):
            if time.monotonic() > deadline:
                code = 99
                break
            time.sleep(0.02)
    elif action == "alive":
        # Succeeds only while the process recorded in PIDFILE (another job's child) still lives.
        deadline = time.monotonic() + float(args[1])
        while not os.path.exists(args[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            with open(args[0]) as f:
                os.kill(int(f.read().strip()), 0)
        except (OSError, ValueError):
            code = 99
    elif action == "touch":
        with open(args[0], "w") as f:
            f.write("go\n")
    elif action == "spawn":
        child = subprocess.Popen(["sleep", "60"])
        with open(args[0], "w") as f:
            f.write("%d\n" % child.pid)
        time.sleep(60)
    leave(state_dir, job)
    sys.exit(code)


main()
