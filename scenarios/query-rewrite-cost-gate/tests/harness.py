"""CTRF grading harness shared by every scenario (an identical copy lives in each tests/ folder;
the unit tests keep the copies in step with scenarios/_harness/harness.py).

Guarantees the validator relies on, whatever the deliverable does:
- The report reaches the validator through a channel no process of the deliverable can replace:
  the validator writes a one-line key on stdin, read here before anything else runs and kept
  only in this process's memory (made non-dumpable, so not even a root process without
  CAP_SYS_PTRACE can read it); the final report is printed on stdout as one line
  `@@TRAJRL-REPORT v1 <hmac-sha256 hex> <base64 of ctrf.json>`. Files under /logs/verifier are
  written too (ctrf.json, reward.txt: the docker-CLI proof and humans read them), but the
  validator of the built-in suite ignores them.
- /logs/verifier/ctrf.json and reward.txt always exist with one entry per declared test: an
  all-failed report is written before anything runs and replaced when the grader finishes.
- The deliverable runs as the unprivileged agent user (uid 10000) in its own process group,
  bounded by a timeout, its output captured to files (children holding a pipe cannot hang us).
- /tests is made unreadable for that user, so a deliverable cannot read the grader or its seeds.
- Before the grader sets anything up, every file and directory of the root filesystem that the
  agent user owns or anyone may write is given to root: the agent user can write only under /tmp
  (a sized tmpfs in the verifier), so a deliverable can neither fill the host's disk nor plant
  anything outside /tmp.

What the harness cannot do for a grader is keep root away from data the deliverable wrote: see
"Graders never let root act on what the deliverable controls" in scenarios/README.md.
"""

import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import stat
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
REPORT_PREFIX = "@@TRAJRL-REPORT v1"
# Never locked down: the agent user's scratch space (a sized tmpfs in the verifier) and the
# grader's own trees.
UNLOCKED = ("/proc", "/sys", "/tmp", "/tests", "/logs")

_key = None


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


def _take_key():
    """Read the validator's report key (64 hex digits and a newline) from stdin, then point stdin at
    /dev/null so nothing started later inherits the pipe. No key (the docker-CLI proof): no line."""
    global _key
    buf = b""
    try:
        while b"\n" not in buf and len(buf) < 256:
            chunk = os.read(0, 256 - len(buf))
            if not chunk:
                break
            buf += chunk
    except OSError:
        buf = b""
    line = buf.split(b"\n", 1)[0].strip()
    try:
        _key = bytes.fromhex(line.decode("ascii")) if len(line) == 64 else None
    except ValueError:
        _key = None
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass


def _non_dumpable():
    """PR_SET_DUMPABLE 0: /proc/<pid>/mem, environ, fd/ and ptrace of this process need CAP_SYS_PTRACE."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort; the validator also withholds CAP_SYS_PTRACE
        pass


def _sign(data):
    return hmac.new(_key, b"trajrl-report v1\n" + data, hashlib.sha256).hexdigest()


def _emit(data):
    """The one line the validator reads: the final report, authenticated with the key."""
    if _key is None:
        return
    line = "%s %s %s\n" % (REPORT_PREFIX, _sign(data), base64.b64encode(data).decode("ascii"))
    sys.stdout.write(line)
    sys.stdout.flush()


def lock_down():
    """Give root every file and directory of the root filesystem that the agent user owns or anyone
    may write (outside UNLOCKED): afterwards the agent user writes only under /tmp."""
    if not IS_ROOT:
        return
    rootdev = os.lstat("/").st_dev

    def fix(path, st):
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid == AGENT_UID or st.st_gid == AGENT_GID:
                os.lchown(path, 0, 0)
            return
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid == AGENT_UID or st.st_gid == AGENT_GID:
            # What the agent user could read or traverse as owner or group stays readable by all
            # (an image may keep /app at 0770 hermes:hermes, as trajrl-bench's does); writing goes.
            kept = 0
            if st.st_uid == AGENT_UID:
                kept |= (mode >> 6) & 0o5
            if st.st_gid == AGENT_GID:
                kept |= (mode >> 3) & 0o5
            os.lchown(path, 0, 0)
            # chown cleared any set-uid/set-gid bit: chmod must not set them again (as root's).
            mode = (mode | kept) & ~(stat.S_ISUID | stat.S_ISGID)
        if mode & stat.S_IWOTH:
            mode &= ~stat.S_IWOTH
        if mode != stat.S_IMODE(st.st_mode):
            os.chmod(path, mode)

    for root, dirs, files in os.walk("/"):
        kept = []
        for d in dirs:
            p = os.path.join(root, d)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if p in UNLOCKED or st.st_dev != rootdev or stat.S_ISLNK(st.st_mode):
                continue
            kept.append(d)
        dirs[:] = kept
        for p in [root] + [os.path.join(root, f) for f in files]:
            try:
                fix(p, os.lstat(p))
            except OSError:
                pass


def read_regular(path, cap=OUTPUT_CAP):
    """The bytes of a file the deliverable wrote, read as data: never through a symbolic link, never
    from a FIFO or a device, at most `cap` bytes (a Failure otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise Failure("%s: %s" % (path, e.strerror))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Failure("%s is not a regular file" % path)
        if st.st_size > cap:
            raise Failure("%s is larger than %d bytes" % (path, cap))
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(cap + 1)[:cap]
    finally:
        os.close(fd)


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
    """Kill anything the deliverable left behind (this verifier container is ours alone), round after
    round until none is left: a process forking while we sweep cannot outrun us."""
    if not IS_ROOT:
        return
    me = os.getpid()
    for _ in range(200):
        found = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            try:
                if os.stat("/proc/" + pid).st_uid != AGENT_UID:
                    continue
                with open("/proc/%s/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
                os.kill(int(pid), signal.SIGKILL)
                found = True
            except (OSError, ValueError, IndexError):
                pass
        if not found:
            return
        time.sleep(0.01)


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
        data = json.dumps(report, indent=2).encode("utf-8")
        try:
            tmp = os.path.join(LOG_DIR, ".ctrf.json.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(LOG_DIR, "ctrf.json"))
            reward = (passed / total) if total else 0.0
            with open(os.path.join(LOG_DIR, "reward.txt"), "w") as f:
                f.write("%.4f\n" % reward)
        except OSError:
            # The files are for people and the docker-CLI proof; the signed line is the report.
            traceback.print_exc()
        return passed, total, data

    def main(self):
        _take_key()
        _non_dumpable()
        started_ms = int(time.time() * 1000)
        pending = [
            {"name": n, "status": "failed", "duration": 0, "message": "grader did not finish"} for n, _ in self.tests
        ]
        self._write(pending, started_ms)
        if IS_ROOT and os.path.isdir("/tests"):
            os.chmod("/tests", 0o700)
        setup_error = None
        try:
            lock_down()
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
        passed, total, data = self._write(results, started_ms)
        print("%d/%d passed" % (passed, total))
        sys.stdout.flush()
        _emit(data)
        return 0


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit("harness.py is a library for grade.py")
