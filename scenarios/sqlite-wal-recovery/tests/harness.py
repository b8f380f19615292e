"""CTRF grading harness shared by every scenario (an identical copy lives in each tests/ folder;
the unit tests keep the copies in step with scenarios/_harness/harness.py).

Guarantees the validator relies on, whatever the deliverable does:
- /logs/verifier/ctrf.json and reward.txt always exist with one entry per declared test: an
  all-failed report is written before anything runs and replaced when the grader finishes.
- The deliverable runs as the unprivileged agent user (uid 10000) in its own process group,
  bounded by a timeout, its output captured to files (children holding a pipe cannot hang us).
- /tests is made unreadable for that user, so a deliverable cannot read the grader or its seeds.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

AGENT_UID = 10000
AGENT_GID = 10000
LOG_DIR = os.environ.get("TRAJRL_VERIFIER_LOG_DIR", "/logs/verifier")
OUTPUT_CAP = 8 * 1024 * 1024
IS_ROOT = os.geteuid() == 0


class Failure(Exception):
    """A test failed for a reason worth one clear line in ctrf.json."""


class Result:
    def __init__(self, rc, out, err, timed_out, seconds):
        self.rc = rc
        self.out = out
        self.err = err
        self.timed_out = timed_out
        self.seconds = seconds

    def text(self):
        return self.out.decode("utf-8", "replace")

    def describe(self):
        if self.timed_out:
            return "timed out after %.1fs" % self.seconds
        tail = self.err.decode("utf-8", "replace").strip().splitlines()[-3:]
        return "exit %s%s" % (self.rc, (": " + " | ".join(tail)) if tail else "")


def expect(cond, message):
    if not cond:
        raise Failure(message)


def give_to_agent(path):
    """Hand a file tree to the agent user so the deliverable can read and write it."""
    if not IS_ROOT:
        return
    for root, dirs, files in os.walk(path):
        os.lchown(root, AGENT_UID, AGENT_GID)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), AGENT_UID, AGENT_GID)


def workdir(prefix="case-"):
    """A fresh directory owned by the agent user."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(d, 0o755)
    give_to_agent(d)
    return d


def sweep_agent_processes():
    """Kill anything the deliverable left behind (this verifier container is ours alone)."""
    if not IS_ROOT:
        return
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            if os.stat("/proc/" + pid).st_uid == AGENT_UID:
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def run(argv, timeout, stdin_bytes=None, cwd=None, env=None, cleanup=True):
    """Run the deliverable (or anything on its behalf) as the agent user with a hard timeout.

    cleanup=False leaves surviving children alone after a normal exit, for tests that inspect
    what the deliverable left running; they must call sweep_agent_processes() themselves."""
    base_env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    if env:
        base_env.update(env)
    extra = {}
    if IS_ROOT:
        extra = {"user": AGENT_UID, "group": AGENT_GID, "extra_groups": []}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin_bytes is not None:
            inp.write(stdin_bytes)
            inp.seek(0)
        started = time.monotonic()
        timed_out = False
        try:
            proc = subprocess.Popen(
                argv,
                stdin=inp if stdin_bytes is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd or "/tmp",
                env=base_env,
                start_new_session=True,
                **extra,
            )
        except OSError as e:
            return Result(127, b"", str(e).encode(), False, 0.0)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            rc = proc.wait()
        seconds = time.monotonic() - started
        if cleanup or timed_out:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            sweep_agent_processes()
        out.seek(0)
        err.seek(0)
        return Result(rc, out.read(OUTPUT_CAP), err.read(65536), timed_out, seconds)


class Grader:
    def __init__(self, tool):
        self.tool = tool
        self.tests = []
        self.setups = []
        self.state = {}

    def setup(self, fn):
        """Runs once before the tests; a failure fails every test with its message."""
        self.setups.append(fn)
        return fn

    def test(self, name):
        def register(fn):
            self.tests.append((name, fn))
            return fn

        return register

    def _write(self, results, started_ms):
        os.makedirs(LOG_DIR, exist_ok=True)
        passed = sum(1 for r in results if r["status"] == "passed")
        total = len(results)
        report = {
            "results": {
                "tool": {"name": self.tool},
                "summary": {
                    "tests": total,
                    "passed": passed,
                    "failed": total - passed,
                    "pending": 0,
                    "skipped": 0,
                    "other": 0,
                    "start": started_ms,
                    "stop": int(time.time() * 1000),
                },
                "tests": results,
            }
        }
        tmp = os.path.join(LOG_DIR, ".ctrf.json.tmp")
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(tmp, os.path.join(LOG_DIR, "ctrf.json"))
        reward = (passed / total) if total else 0.0
        with open(os.path.join(LOG_DIR, "reward.txt"), "w") as f:
            f.write("%.4f\n" % reward)
        return passed, total

    def main(self):
        started_ms = int(time.time() * 1000)
        pending = [
            {"name": n, "status": "failed", "duration": 0, "message": "grader did not finish"} for n, _ in self.tests
        ]
        self._write(pending, started_ms)
        if IS_ROOT and os.path.isdir("/tests"):
            os.chmod("/tests", 0o700)
        setup_error = None
        try:
            for fn in self.setups:
                fn(self.state)
        except Exception as e:  # noqa: BLE001 - reported, never raised
            setup_error = "grader setup failed: %s" % e
            traceback.print_exc()
        results = []
        for name, fn in self.tests:
            t0 = time.monotonic()
            entry = {"name": name, "status": "failed", "duration": 0}
            if setup_error:
                entry["message"] = setup_error
            else:
                try:
                    fn(self.state)
                    entry["status"] = "passed"
                except Failure as e:
                    entry["message"] = str(e)[:600]
                except Exception as e:  # noqa: BLE001 - a crash in a test is a failed test
                    entry["message"] = ("error: %s: %s" % (type(e).__name__, e))[:600]
            entry["duration"] = int((time.monotonic() - t0) * 1000)
            results.append(entry)
            print("%s  %s%s" % (entry["status"].upper(), name, ("  -- " + entry["message"]) if "message" in entry else ""))
        passed, total = self._write(results, started_ms)
        print("%d/%d passed" % (passed, total))
        return 0


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit("harness.py is a library for grade.py")
