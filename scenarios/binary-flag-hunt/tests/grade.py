"""Grader for binary-flag-hunt: copies of system binaries with a flag hidden in one of the
documented encodings (fixed seed), plus decoys and a flag-free binary.
Python 3 standard library only."""

import base64
import os
import random
import re

from harness import Grader, expect, give_to_agent, run, workdir

DELIVERABLE = "/app/findflag.sh"
SEED = 7_777_001
PATTERN = re.compile(rb"FLAG\{[a-z0-9_]{8,40}\}")
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_"
BASES = ["/usr/bin/sort", "/bin/ls", "/usr/bin/find", "/bin/tar", "/usr/bin/gawk", "/bin/grep", "/usr/bin/git"]


def clean(data):
    """True when the base binary holds no flag in any encoding (so only ours can be found)."""
    if PATTERN.search(data):
        return False
    for align in (0, 1):
        if PATTERN.search(data[align:].decode("utf-16-le", "replace").encode("ascii", "replace")):
            return False
    for k in range(1, 256):
        if PATTERN.search(data.translate(bytes(b ^ k for b in range(256)))):
            return False
    return True


def embed(data, rng, blob):
    at = len(data) // 4 + rng.randrange(len(data) // 2)
    data[at:at + len(blob)] = blob
    return data


G = Grader("binary-flag-hunt")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    d = workdir("bin-")
    bases = []
    for path in BASES:
        with open(path, "rb") as f:
            data = f.read()
        if clean(data):
            bases.append(data)
    if len(bases) < 6:
        raise RuntimeError("only %d flag-free base binaries in this image" % len(bases))

    def flag():
        return ("FLAG{%s}" % "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(10, 36)))).encode()

    cases = {}
    f = flag()
    cases["plain"] = (embed(bytearray(bases[0]), rng, b"\0" + f + b"\0"), f)
    f = flag()
    cases["utf16"] = (embed(bytearray(bases[1]), rng, b"\0\0" + f.decode().encode("utf-16-le") + b"\0\0"), f)
    f = flag()
    cases["base64"] = (embed(bytearray(bases[2]), rng, b"\0" + base64.b64encode(f) + b"\0"), f)
    f = flag()
    key = rng.randrange(1, 256)
    cases["xor"] = (embed(bytearray(bases[3]), rng, b"\0" + bytes(b ^ key for b in f) + b"\0"), f)
    f = flag()
    data = bytearray(bases[4])
    for decoy in (b"FLAG{TODO}", b"FLAG{short}", b"FLAG{unterminated_flag_text", b"flag{lowercase_prefix_here}",
                  b"FLAG{Has_Upper_Case_1}", b"FLAG{" + b"x" * 60 + b"}"):
        data = embed(data, rng, b"\0" + decoy + b"\0")
    cases["decoys"] = (embed(data, rng, b"\0" + f + b"\0"), f)
    cases["none"] = (bytearray(bases[5]), None)
    state["cases"] = {}
    for name, (data, f) in cases.items():
        path = os.path.join(d, "%s.bin" % rng.randrange(10**6))
        with open(path, "wb") as fh:
            fh.write(data)
        state["cases"][name] = (path, f)
    give_to_agent(d)


def check(state, name):
    path, flag = state["cases"][name]
    res = run(["bash", DELIVERABLE, path], timeout=60, cwd=os.path.dirname(path))
    expect(not res.timed_out, "findflag.sh " + res.describe())
    out = res.out.strip()
    if flag is None:
        expect(out == b"", "printed %r for a binary without a flag" % out[:60])
        expect(res.rc == 1, "exit status %s for a binary without a flag, expected 1" % res.rc)
        return
    expect(res.rc == 0, "findflag.sh " + res.describe())
    expect(out == flag, "printed %r" % out[:80])


@G.test("finds a plain ASCII flag")
def t_plain(state):
    check(state, "plain")


@G.test("finds a UTF-16LE flag")
def t_utf16(state):
    check(state, "utf16")


@G.test("finds a base64-encoded flag")
def t_base64(state):
    check(state, "base64")


@G.test("finds a flag XOR-ed with a one-byte key")
def t_xor(state):
    check(state, "xor")


@G.test("ignores decoys that do not match the flag format")
def t_decoys(state):
    check(state, "decoys")


@G.test("prints nothing and exits 1 when there is no flag")
def t_none(state):
    check(state, "none")


if __name__ == "__main__":
    raise SystemExit(G.main())
