"""Job helper for the bounded-async-runner grader. A job reports to the grader's collector, a Unix
socket that only root can create or replace; the grader keeps the record in its own memory and
learns from the kernel which process speaks (SO_PEERCRED). A job is running while it is connected:
    probe.py SOCKET ACTION ID [ARGS...]"""

import json
import socket
import subprocess
import sys
import time


def main():
    path, action, job = sys.argv[1], sys.argv[2], int(sys.argv[3])
    args = sys.argv[4:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    f = s.makefile("rwb")

    def ask(op, **kw):
        kw["op"] = op
        f.write((json.dumps(kw) + "\n").encode())
        f.flush()
        line = f.readline()
        if not line:
            sys.exit(98)
        return json.loads(line)

    ask("enter", job=job)
    code = 0
    if action == "run":
        time.sleep(float(args[0]))
        code = int(args[1])
    elif action == "barrier":
        # Succeeds once NEED jobs were connected at the same moment.
        need, deadline = int(args[0]), time.monotonic() + float(args[1])
        while not ask("barrier", need=need)["reached"]:
            if time.monotonic() > deadline:
                code = 99
                break
            time.sleep(0.02)
        time.sleep(0.05)
    elif action == "waitflag":
        deadline = time.monotonic() + float(args[0])
        while not ask("flag?")["set"]:
            if time.monotonic() > deadline:
                code = 99
                break
            time.sleep(0.02)
    elif action == "setflag":
        ask("flag")
    elif action == "spawn":
        child = subprocess.Popen(["sleep", "60"])
        ask("child", pid=child.pid)
        time.sleep(60)
    elif action == "alive":
        # Succeeds only while the child that job OTHER started still lives.
        other, deadline = int(args[0]), time.monotonic() + float(args[1])
        seen = ask("alive?", job=other)
        while not seen["known"] and time.monotonic() < deadline:
            time.sleep(0.02)
            seen = ask("alive?", job=other)
        code = 0 if seen["alive"] else 99
    # Recorded before this process exits, so before the runner can see it end.
    ask("leave")
    sys.exit(code)


main()
