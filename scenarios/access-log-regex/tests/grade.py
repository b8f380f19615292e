"""Grader for access-log-regex: hidden logs generated with their ground truth (loggen.py, fixed
seed); the deliverable's JSON report is compared field by field. Python 3 standard library only."""

import json
import os
import random

from harness import Failure, Grader, expect, give_to_agent, run, workdir
from loggen import access_log

DELIVERABLE = "/app/logstats.py"
SEED = 31_415
KEYS = ["requests", "malformed", "status", "bytes", "clients", "methods", "top_paths", "slow"]


def report(state, name):
    cache = state.setdefault("reports", {})
    if name not in cache:
        path = state["files"][name]
        res = run(["python3", DELIVERABLE, path], timeout=60, cwd=os.path.dirname(path))
        try:
            expect(not res.timed_out and res.rc == 0, "logstats.py " + res.describe())
            try:
                value = json.loads(res.text())
            except ValueError:
                raise Failure("output is not JSON: %r" % res.text()[:80])
            expect(isinstance(value, dict), "output is not a JSON object")
            cache[name] = value
        except Failure as e:
            cache[name] = e
    value = cache[name]
    if isinstance(value, Failure):
        raise value
    return value


def same(state, name, keys):
    got = report(state, name)
    want = state["truth"][name]
    for k in keys:
        expect(k in got, "key %r is missing" % k)
        expect(got[k] == want[k], "%s is %s, expected %s" % (k, json.dumps(got[k])[:200], json.dumps(want[k])[:200]))


G = Grader("access-log-regex")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    d = workdir("logs-")
    state["files"] = {"sample": "/app/samples/access_sample.txt"}
    with open("/app/samples/expected.json") as f:
        state["truth"] = {"sample": json.load(f)}
    for name, kw in (("main", dict(lines=3000)), ("hard", dict(lines=2000, hard=True, crlf=True))):
        data, truth = access_log(rng, **kw)
        path = os.path.join(d, name + ".txt")
        with open(path, "wb") as f:
            f.write(data)
        state["files"][name] = path
        state["truth"][name] = truth
    give_to_agent(d)


@G.test("the sample log gives exactly samples/expected.json")
def t_sample(state):
    same(state, "sample", KEYS)


@G.test("counts well-formed and malformed lines")
def t_counts(state):
    same(state, "main", ["requests", "malformed"])


@G.test("status histogram and body bytes ('-' is 0)")
def t_status(state):
    same(state, "main", ["status", "bytes"])


@G.test("distinct clients, IPv6 in any notation")
def t_clients(state):
    same(state, "main", ["clients"])


@G.test("top paths without query strings, ties by path")
def t_paths(state):
    same(state, "main", ["top_paths"])


@G.test("methods (escaped quotes, '-' and binary requests) and slow requests")
def t_methods(state):
    same(state, "main", ["methods", "slow"])


@G.test("CRLF line endings, invalid UTF-8 and more malformed lines")
def t_hard(state):
    same(state, "hard", KEYS)


if __name__ == "__main__":
    raise SystemExit(G.main())
