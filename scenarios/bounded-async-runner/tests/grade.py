"""Grader for bounded-async-runner: job files whose jobs report to a shared, flock-protected state
file (probe.py), so concurrency, start order and slot reuse are judged from facts the grader
controls rather than from wall-clock timing. Python 3 standard library only."""

import json
import os
import random
import shutil

from harness import Grader, expect, give_to_agent, run, sweep_agent_processes, workdir

DELIVERABLE = "/app/runner.py"
SEED = 4_040_404


class Case:
    """A job file in a fresh directory owned by the agent user (jobs run as that user)."""

    def __init__(self, k, timeout=20, jobs=None):
        self.dir = workdir("jobs-")
        self.probe = os.path.join(self.dir, "probe.py")
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py"), self.probe)
        self.k = k
        self.timeout = timeout
        self.jobfile = os.path.join(self.dir, "jobs.txt")
        if jobs is not None:
            self.write(jobs)

    def write(self, jobs):
        """jobs: (action, args) for probe.py, ("sh", command) or ("comment", text)."""
        lines = ["# generated job file", ""]
        n = 0
        for kind, args in jobs:
            if kind == "comment":
                lines += ["# " + args, ""]
                continue
            n += 1
            if kind == "sh":
                lines.append(args)
            else:
                rest = " ".join(str(a) for a in args)
                lines.append("python3 %s %s %s %d %s" % (self.probe, self.dir, kind, n, rest))
        with open(self.jobfile, "w") as f:
            f.write("\n".join(lines) + "\n")
        give_to_agent(self.dir)
        return self

    def path(self, name):
        return os.path.join(self.dir, name)

    def go(self, limit=60, cleanup=True):
        res = run(
            ["python3", DELIVERABLE, "-j", str(self.k), "-t", str(self.timeout), self.jobfile],
            timeout=limit,
            cwd=self.dir,
            cleanup=cleanup,
        )
        expect(not res.timed_out, "runner.py " + res.describe())
        return res

    def state(self):
        try:
            with open(self.path("state.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {"active": 0, "max": 0, "starts": [], "ended_at_start": [], "ends": [], "reached": False}


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
    flag = case.path("go.flag")
    # Job 1 can only finish once job 3 has run; with -j 2, job 3 must start as soon as job 2 ends.
    case.write([("waitfile", (flag, 8)), ("run", (0.05, 0)), ("touch", (flag,))])
    res = case.go()
    expect_report(res, ["1 ok 0", "2 ok 0", "3 ok 0"])


@G.test("kills a job at its timeout together with the processes it started")
def t_timeout(state):
    case = Case(k=2, timeout=5)
    pidfile = case.path("child.pid")
    # The second job only succeeds while the first job's child is still alive: a runner that
    # serialises jobs cannot pass by killing the first one before starting the second.
    case.write([("spawn", (pidfile,)), ("alive", (pidfile, 8))])
    try:
        res = case.go(limit=30, cleanup=False)
        expect_report(res, ["1 timeout -", "2 ok 0"])
        expect(res.rc == 1, "runner exit status %s, expected 1 after a timeout" % res.rc)
        expect(res.seconds < 20, "the runner took %.1fs for a 5s timeout" % res.seconds)
        with open(pidfile) as f:
            child = int(f.read().strip())
        expect(not alive(child), "the timed-out job's child process (pid %d) is still running" % child)
    finally:
        sweep_agent_processes()


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
