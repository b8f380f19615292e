"""Grader for bounded-async-runner: job files whose jobs report to a collector the grader holds
(probe.py), so concurrency, start order and slot reuse are judged from facts the grader controls
rather than from wall-clock timing. Python 3 standard library only.

Nothing a test judges by can be written by the deliverable: the collector is a Unix socket in a
directory only root can write, its record lives in this process, the kernel names the process at
the other end (SO_PEERCRED), and a job counts as running exactly while its connection is open. The
job file and probe.py are root's, read-only for the agent user. A deliverable that speaks the
probe's protocol itself is running jobs as far as the record goes: each job may start once, so a
made-up start is either a duplicate or the job's only start."""

import json
import os
import random
import shutil
import socket
import struct
import tempfile
import threading

from harness import AGENT_UID, IS_ROOT, Grader, expect, run, sweep_agent_processes, workdir

DELIVERABLE = "/app/runner.py"
SEED = 4_040_404


def proc_stat(pid):
    """(ppid, start time in ticks, state) of a process, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[19]), fields[0]
    except (OSError, ValueError, IndexError):
        return None


class Collector:
    """The root-held record of what the jobs of one job file did."""

    def __init__(self, jobs):
        self.jobs = jobs
        self.dir = tempfile.mkdtemp(prefix="collector-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "jobs.sock")
        self.lock = threading.Lock()
        self.active = 0
        self.max = 0
        self.starts = []
        self.ended_at_start = []
        self.ends = []
        self.reached = False
        self.flag = False
        self.children = {}
        self.problems = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        os.chmod(self.path, 0o666)
        self.server.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _end(self, job):
        self.active -= 1
        self.ends.append(job)

    def _serve(self, conn):
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        job = None
        ended = False
        f = conn.makefile("rwb")
        try:
            while True:
                line = f.readline(4096)
                if not line:
                    break
                try:
                    msg = json.loads(line)
                    op = msg["op"]
                except (ValueError, KeyError, TypeError):
                    break
                reply = {}
                with self.lock:
                    if op == "enter":
                        j = msg.get("job")
                        if IS_ROOT and uid != AGENT_UID:
                            self.problems.append("a job ran as uid %d" % uid)
                            break
                        if job is not None or not isinstance(j, int) or not 1 <= j <= self.jobs or j in self.starts:
                            self.problems.append("job %r started twice or is not a job of the file" % (j,))
                            break
                        job = j
                        self.active += 1
                        self.max = max(self.max, self.active)
                        self.starts.append(j)
                        # How many jobs had finished when this one began: a runner that starts jobs in
                        # file order with at most K running guarantees ended >= job - K.
                        self.ended_at_start.append(len(self.ends))
                    elif job is None:
                        break
                    elif op == "leave":
                        self._end(job)
                        ended = True
                    elif op == "barrier":
                        if self.active >= int(msg.get("need", 0)):
                            self.reached = True
                        reply["reached"] = self.reached
                    elif op == "flag":
                        self.flag = True
                    elif op == "flag?":
                        reply["set"] = self.flag
                    elif op == "child":
                        child = int(msg.get("pid", 0))
                        st = proc_stat(child) if child > 0 else None
                        # Only the probe's own child counts: the kernel says whose child it is.
                        if st is not None and st[0] == pid:
                            self.children[job] = (child, st[1])
                    elif op == "alive?":
                        known = self.children.get(msg.get("job"))
                        reply["known"] = known is not None
                        reply["alive"] = known is not None and self.child_alive_locked(known)
                f.write((json.dumps(reply) + "\n").encode())
                f.flush()
                if ended:
                    break
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                # Killed before it could say goodbye (a timeout): it ended when its connection did.
                if job is not None and not ended:
                    self._end(job)
            conn.close()

    @staticmethod
    def child_alive_locked(known):
        pid, started = known
        st = proc_stat(pid)
        return st is not None and st[1] == started and st[2] not in ("Z", "X")

    def child_alive(self, job):
        with self.lock:
            known = self.children.get(job)
            return known is not None and self.child_alive_locked(known)

    def knows_child(self, job):
        with self.lock:
            return job in self.children

    def state(self):
        with self.lock:
            return {
                "active": self.active,
                "max": self.max,
                "starts": list(self.starts),
                "ended_at_start": list(self.ended_at_start),
                "ends": list(self.ends),
                "reached": self.reached,
                "problems": list(self.problems),
            }

    def close(self):
        try:
            self.server.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class Case:
    """A job file and probe.py in a root-owned directory (read-only for the agent user), a collector,
    and a scratch directory of the agent user's to run in."""

    def __init__(self, k, timeout=20, jobs=None):
        self.dir = tempfile.mkdtemp(prefix="jobs-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.work = workdir("run-")
        self.probe = os.path.join(self.dir, "probe.py")
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py"), self.probe)
        os.chmod(self.probe, 0o644)
        self.k = k
        self.timeout = timeout
        self.jobfile = os.path.join(self.dir, "jobs.txt")
        self.collector = None
        if jobs is not None:
            self.write(jobs)

    def write(self, jobs):
        """jobs: (action, args) for probe.py, ("sh", command) or ("comment", text)."""
        n = sum(1 for kind, _ in jobs if kind != "comment")
        self.collector = Collector(n)
        lines = ["# generated job file", ""]
        i = 0
        for kind, args in jobs:
            if kind == "comment":
                lines += ["# " + args, ""]
                continue
            i += 1
            if kind == "sh":
                lines.append(args)
            else:
                rest = " ".join(str(a) for a in args)
                lines.append("python3 %s %s %s %d %s" % (self.probe, self.collector.path, kind, i, rest))
        with open(self.jobfile, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(self.jobfile, 0o644)
        return self

    def go(self, limit=60, cleanup=True):
        try:
            res = run(
                ["python3", DELIVERABLE, "-j", str(self.k), "-t", str(self.timeout), self.jobfile],
                timeout=limit,
                cwd=self.work,
                cleanup=cleanup,
            )
        finally:
            # No new connections; the record stays in memory for the checks.
            self.collector.close()
        expect(not res.timed_out, "runner.py " + res.describe())
        return res

    def state(self):
        st = self.collector.state()
        expect(not st["problems"], "; ".join(st["problems"][:3]))
        return st


def report(res):
    return [l.rstrip("\r") for l in res.text().splitlines() if l.strip()]


def expect_report(res, want):
    got = report(res)
    expect(len(got) == len(want), "%d report lines, expected %d: %r" % (len(got), len(want), got[:6]))
    for g, w in zip(got, want):
        expect(g.split() == w.split(), "report line %r, expected %r" % (g, w))


G = Grader("bounded-async-runner")


@G.test("reports every job in file order with its status and exit code")
def t_report(state):
    case = Case(k=2).write(
        [
            ("run", (0.3, 0)),
            ("comment", "a comment and a blank line are not jobs"),
            ("run", (0.05, 3)),
            ("sh", "exit 7"),
            ("run", (0.1, 0)),
        ]
    )
    res = case.go()
    expect_report(res, ["1 ok 0", "2 failed 3", "3 failed 7", "4 ok 0"])
    expect(res.rc == 1, "runner exit status %s, expected 1 when a job failed" % res.rc)
    case.state()


@G.test("never more than K at once; jobs start in file order")
def t_bound(state):
    rng = random.Random(SEED)
    jobs = [("run", (round(rng.uniform(0.05, 0.3), 2), 0)) for _ in range(12)]
    case = Case(k=3, jobs=jobs)
    res = case.go()
    expect_report(res, ["%d ok 0" % i for i in range(1, 13)])
    expect(res.rc == 0, "runner exit status %s, expected 0" % res.rc)
    st = case.state()
    expect(st["max"] <= 3, "%d jobs ran at once with -j 3" % st["max"])
    expect(sorted(st["starts"]) == list(range(1, 13)), "jobs that started: %s" % st["starts"])
    for job, ended in zip(st["starts"], st["ended_at_start"]):
        expect(ended >= job - 3, "job %d began when only %d jobs had ended: not file order" % (job, ended))


@G.test("really runs K jobs at the same time")
def t_parallel(state):
    case = Case(k=3, jobs=[("barrier", (3, 6))] * 3 + [("run", (0.05, 0))] * 2)
    res = case.go()
    expect_report(res, ["%d ok 0" % i for i in range(1, 6)])
    expect(case.state()["max"] == 3, "at most %d jobs ran at once with -j 3" % case.state()["max"])


@G.test("starts the next job as soon as any slot frees (no batching)")
def t_slots(state):
    case = Case(k=2)
    # Job 1 can only finish once job 3 has run; with -j 2, job 3 must start as soon as job 2 ends.
    case.write([("waitflag", (8,)), ("run", (0.05, 0)), ("setflag", ())])
    res = case.go()
    expect_report(res, ["1 ok 0", "2 ok 0", "3 ok 0"])
    st = case.state()
    for job, ended in zip(st["starts"], st["ended_at_start"]):
        expect(ended >= job - 2, "job %d began when only %d jobs had ended: not file order" % (job, ended))


@G.test("kills a job at its timeout together with the processes it started")
def t_timeout(state):
    case = Case(k=2, timeout=5)
    # The second job only succeeds while the first job's child is still alive: a runner that
    # serialises jobs cannot pass by killing the first one before starting the second.
    case.write([("spawn", ()), ("alive", (1, 8))])
    try:
        res = case.go(limit=30, cleanup=False)
        expect_report(res, ["1 timeout -", "2 ok 0"])
        expect(res.rc == 1, "runner exit status %s, expected 1 after a timeout" % res.rc)
        expect(res.seconds < 20, "the runner took %.1fs for a 5s timeout" % res.seconds)
        expect(case.collector.knows_child(1), "the first job never started its child")
        expect(not case.collector.child_alive(1), "the timed-out job's child process is still running")
        case.state()
    finally:
        sweep_agent_processes()


@G.test("-j 1 runs strictly one job at a time; an empty job file prints nothing")
def t_serial(state):
    case = Case(k=1, jobs=[("run", (0.1, 0))] * 4)
    res = case.go()
    expect_report(res, ["%d ok 0" % i for i in range(1, 5)])
    st = case.state()
    expect(st["max"] == 1, "%d jobs ran at once with -j 1" % st["max"])
    expect(st["starts"] == [1, 2, 3, 4] and st["ends"] == [1, 2, 3, 4], "order %s / %s" % (st["starts"], st["ends"]))
    empty = Case(k=3, jobs=[])
    res = empty.go()
    expect(report(res) == [], "output for an empty job file: %r" % report(res)[:3])
    expect(res.rc == 0, "runner exit status %s for an empty job file" % res.rc)


if __name__ == "__main__":
    raise SystemExit(G.main())
