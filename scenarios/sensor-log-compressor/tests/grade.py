"""Grader for sensor-log-compressor: hidden logs from a fixed seed plus odd inputs; compress and
decompress run as separate processes of the agent user, and everything that user could have left
behind (files in the places it can write, System V IPC objects, processes) is removed between the
two calls. Python 3 standard library only."""

import lzma
import os
import random
import shutil
import stat

from harness import AGENT_UID, IS_ROOT, Failure, Grader, expect, run, sweep_agent_processes
from sensorgen import sensor_log

DELIVERABLE = "/app/codec.py"
SEED = 60_0601
RATIO = 0.60
SKIP = ("/proc", "/sys", "/tests", "/logs")


def writable_places():
    """Every directory the agent user could write to: world-writable ones and its own trees."""
    places = []
    for root, dirs, files in os.walk("/", topdown=True):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in SKIP]
        try:
            st = os.lstat(root)
        except OSError:
            continue
        if st.st_mode & stat.S_IWOTH or st.st_uid == AGENT_UID:
            places.append(root)
    return places


def world_writable_places():
    """The harness has already given root everything else the agent user owned (lock_down)."""
    if not IS_ROOT:
        return []
    return [p for p in writable_places() if os.lstat(p).st_mode & stat.S_IWOTH]


# Where the kernel lists no System V IPC object (gVisor: no /proc/sysvipc, and SHM_INFO/SHM_STAT
# do not enumerate), `ipcrm --all` removes nothing. There, ids are handed out in increasing order
# from 1, so the agent user creates one object of each kind, removes every id from where the last
# sweep stopped up to it, and the sweep stays proportional to the ids the deliverable used.
IPC_SWEEP = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
rmid = {"shm": lambda i: libc.shmctl(i, 0, None), "msg": lambda i: libc.msgctl(i, 0, None),
        "sem": lambda i: libc.semctl(i, 0, 0)}
new = {"shm": lambda: libc.shmget(0, 1, 0o1600), "msg": lambda: libc.msgget(0, 0o1600),
       "sem": lambda: libc.semget(0, 1, 0o1600)}
for kind, start in zip(("shm", "msg", "sem"), map(int, sys.argv[1:])):
    top = new[kind]()
    if top < 0 or top - start > (1 << 20):
        print(kind, -1)
        continue
    for i in range(start, top + 1):
        rmid[kind](i)
    print(kind, top)
"""
IPC_SWEPT = {"shm": 0, "msg": 0, "sem": 0}


def remove_unlisted_ipc():
    if os.path.exists("/proc/sysvipc/shm"):
        return
    kinds = ("shm", "msg", "sem")
    r = run(["python3", "-c", IPC_SWEEP] + [str(IPC_SWEPT[k]) for k in kinds], timeout=120)
    done = dict(line.split() for line in r.out.decode().splitlines() if line.count(" ") == 1)
    for k in kinds:
        top = int(done.get(k, -1))
        # An id space the sweep cannot cover (or a sweep that did not finish) fails the round trip.
        expect(not r.timed_out and top >= 0, "System V IPC objects left that the grader cannot remove")
        IPC_SWEPT[k] = top


def scrub(places):
    """Delete everything the agent user created since the harness locked the image down."""
    if not IS_ROOT:
        return
    sweep_agent_processes()
    # System V shared memory, semaphores and message queues outlive their creator; only their
    # owner (or CAP_SYS_ADMIN, which the verifier does not have) may remove them.
    run(["ipcrm", "--all"], timeout=10)
    remove_unlisted_ipc()
    for place in places:
        for root, dirs, files in os.walk(place, topdown=False):
            for n in files + dirs:
                p = os.path.join(root, n)
                try:
                    if os.lstat(p).st_uid == AGENT_UID:
                        if os.path.isdir(p) and not os.path.islink(p):
                            shutil.rmtree(p, ignore_errors=True)
                        else:
                            os.unlink(p)
                except OSError:
                    pass


def roundtrip(state, name, data):
    cache = state.setdefault("rt", {})
    if name in cache:
        result = cache[name]
    else:
        result = _roundtrip(state, data)
        cache[name] = result
    if isinstance(result, Failure):
        raise result
    return result


def _roundtrip(state, data):
    try:
        packed = run(["python3", DELIVERABLE, "compress"], timeout=60, stdin_bytes=data)
        expect(not packed.timed_out and packed.rc == 0, "compress " + packed.describe())
        scrub(state["places"])
        back = run(["python3", DELIVERABLE, "decompress"], timeout=60, stdin_bytes=packed.out)
        expect(not back.timed_out and back.rc == 0, "decompress " + back.describe())
        scrub(state["places"])
        if back.out != data:
            n = next((i for i, (a, b) in enumerate(zip(back.out, data)) if a != b), min(len(back.out), len(data)))
            raise Failure("round trip differs at byte %d (%d bytes in, %d out)" % (n, len(data), len(back.out)))
        return len(packed.out)
    except Failure as e:
        return e


G = Grader("sensor-log-compressor")


@G.setup
def setup(state):
    with open("/app/samples/sensors.csv", "rb") as f:
        state["sample"] = f.read()
    state["places"] = world_writable_places()
    rng = random.Random(SEED)
    state["A"] = sensor_log(rng, rows=20000, sensors=8, interval=5)
    state["B"] = sensor_log(rng, rows=18000, sensors=13, interval=60, cold=True, quirks=True)
    state["C"] = sensor_log(rng, rows=2500, sensors=3, interval=1, quirks=True)
    crlf = sensor_log(rng, rows=300, sensors=4, interval=10).replace(b"\n", b"\r\n")
    state["odd"] = {
        "empty": b"",
        "newline": b"\n",
        "header only": b"ts,sensor,temp_c,humidity_pct,pressure_hpa,status",
        "no final newline": sensor_log(rng, rows=200, sensors=2, interval=5).rstrip(b"\n"),
        "crlf": crlf,
        "binary": bytes(rng.randrange(256) for _ in range(40000)),
        "near-misses": b"1,s01,-0.00,1.0,2.00,OK\n1,s01,00.10,1.0,2.00,OK\n1,s1,0.10,1.0,2.00,OK\n"
        b"99999999999999999999,s01,1.00,1.0,1.00,OK\n1,s01,1.00,1.0,1.00,ok\n\xff\xfe,s01\n",
    }


@G.test("round trip is exact on the sample log")
def t_sample(state):
    roundtrip(state, "sample", state["sample"])


@G.test("round trip is exact on three hidden logs")
def t_hidden(state):
    for name in ("A", "B", "C"):
        roundtrip(state, name, state[name])


@G.test("round trip is exact on empty, binary, CRLF and malformed inputs")
def t_odd(state):
    for name, data in state["odd"].items():
        try:
            roundtrip(state, "odd:" + name, data)
        except Failure as e:
            raise Failure("%s: %s" % (name, e))


def ratio(state, name):
    size = roundtrip(state, name, state[name])
    xz = len(lzma.compress(state[name], preset=9))
    expect(size <= RATIO * xz, "%d bytes is %.0f%% of xz -9 (%d); the limit is %.0f%%" % (size, 100.0 * size / xz, xz, RATIO * 100))


@G.test("at most 60% of xz -9 on a hidden log")
def t_ratio_a(state):
    ratio(state, "A")


@G.test("at most 60% of xz -9 on a hidden log with gaps, blanks and sub-zero readings")
def t_ratio_b(state):
    ratio(state, "B")


if __name__ == "__main__":
    raise SystemExit(G.main())
