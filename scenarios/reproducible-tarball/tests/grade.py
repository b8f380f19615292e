"""Grader for reproducible-tarball: materialises hidden trees twice with different metadata and
creation order, runs the deliverable on both and inspects the archives with tarfile and the raw
gzip header. Python 3 standard library only."""

import gzip
import io
import os
import random
import tarfile

from harness import AGENT_UID, IS_ROOT, Failure, Grader, expect, read_regular, run, workdir

DELIVERABLE = "/app/mktar.py"
SEED = 4_242_017
EPOCH = 1_700_000_000
OTHER_UID = 10001


def random_tree(rng, awkward=False):
    """A list of entries (kind, path, payload, exec) with parents listed before children."""
    entries = []
    dirs = [""]
    # "a", "a-b", "a.txt" and "a/x" are added below at the top level, where their order matters.
    names = ["core", "lib", "docs", "z", "B", "_x", "data", "Zeta", "m.n"]
    if awkward:
        names += ["with space", "ünïcödé", "-dash", "tab\tname", "日本"]
    for i in range(rng.randrange(18, 28)):
        parent = rng.choice(dirs)
        name = rng.choice(names) + ("" if rng.random() < 0.5 else "-%d" % i)
        path = (parent + "/" + name) if parent else name
        if any(e[1] == path for e in entries):
            continue
        r = rng.random()
        if r < 0.25 and path.count("/") < 3:
            entries.append(("dir", path, None, False))
            dirs.append(path)
        elif r < 0.85:
            size = rng.choice([0, 1, 17, 500, 4096, 70000])
            data = bytes(rng.randrange(256) for _ in range(size)) if rng.random() < 0.4 else (
                ("line %d of %s\n" % (i, path)).encode() * (size // 20 + 1)
            )
            entries.append(("file", path, data, rng.random() < 0.3))
        else:
            target = rng.choice(["../x", "core", "does/not/exist", "lib/file"])
            entries.append(("link", path, target, False))
    # Order matters: a/x must sort before a-b and a.txt in depth-first order.
    for kind, path, payload in (("dir", "a", None), ("file", "a/x", b"x\n"), ("file", "a-b", b"ab\n"), ("file", "a.txt", b"t\n")):
        if not any(e[1] == path for e in entries):
            entries.append((kind, path, payload, False))
    if awkward:
        long_dir = "deep/" + "/".join(["segment-%02d-padding" % k for k in range(7)])
        parts = long_dir.split("/")
        for k in range(1, len(parts) + 1):
            entries.append(("dir", "/".join(parts[:k]), None, False))
        entries.append(("file", long_dir + "/" + "long-file-name-" * 4 + ".bin", b"long\n", True))
        entries.append(("dir", "empty dir", None, False))
        entries.append(("file", "empty dir/../empty-file", b"", False))
        entries.append(("link", "link-to-dir", "deep", False))
        entries.append(("link", "dangling", "nowhere/at/all", False))
    # Normalise "x/../y" paths produced above and drop duplicates, keeping the first.
    seen, clean = set(), []
    for kind, path, payload, exe in entries:
        path = os.path.normpath(path)
        if path not in seen:
            seen.add(path)
            clean.append((kind, path, payload, exe))
    return clean


def materialise(entries, root, variant, rng):
    """variant 0: tidy, created in order; variant 1: other owner, shuffled, other bits and times."""
    os.makedirs(root)
    order = list(entries)
    if variant == 1:
        # Parents first is still required to create children, so shuffle within depth levels.
        rng.shuffle(order)
        order.sort(key=lambda e: e[1].count("/"))
    for kind, path, payload, exe in order:
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if kind == "dir":
            os.makedirs(full, exist_ok=True)
        elif kind == "file":
            with open(full, "wb") as f:
                f.write(payload)
        else:
            os.symlink(payload, full)
    for kind, path, payload, exe in entries:
        full = os.path.join(root, path)
        if kind == "link":
            continue
        if kind == "dir":
            mode = 0o755 if variant == 0 else rng.choice([0o775, 0o755, 0o555])
        else:
            if variant == 0:
                mode = 0o755 if exe else 0o644
            else:
                mode = rng.choice([0o775, 0o750 | 0o005, 0o555]) if exe else rng.choice([0o664, 0o444, 0o646])
        os.chmod(full, mode)
    when = 1_500_000_000 if variant == 0 else 1_650_000_000
    for kind, path, payload, exe in sorted(entries, key=lambda e: -e[1].count("/")):
        os.utime(os.path.join(root, path), (when + rng.randrange(10**6), when + rng.randrange(10**6)), follow_symlinks=False)
    os.utime(root, (when, when))
    if IS_ROOT:
        uid = AGENT_UID if variant == 0 else OTHER_UID
        for dirpath, dirnames, filenames in os.walk(root):
            os.lchown(dirpath, uid, uid)
            for n in dirnames + filenames:
                os.lchown(os.path.join(dirpath, n), uid, uid)


def expected_order(entries):
    children = {}
    for kind, path, payload, exe in entries:
        parent = os.path.dirname(path)
        children.setdefault(parent, []).append(path)
    out = []

    def walk(d):
        for p in sorted(children.get(d, []), key=lambda p: os.path.basename(p).encode()):
            out.append(p)
            walk(p)

    walk("")
    return out


class Case:
    def __init__(self, entries, rng, variants=(0, 1)):
        self.entries = entries
        self.dir = workdir("tar-")
        self.trees = {}
        for v in variants:
            root = os.path.join(self.dir, "tree-%d" % v, "src")
            materialise(entries, root, v, rng)
            os.chmod(os.path.dirname(root), 0o755)
            self.trees[v] = root

    def build(self, variant, env=None, tag="out"):
        out = os.path.join(self.dir, "%s-%d.tar.gz" % (tag, variant))
        res = run(["python3", DELIVERABLE, self.trees[variant], out], timeout=60, cwd=self.dir, env=env)
        expect(not res.timed_out and res.rc == 0, "mktar.py " + res.describe())
        expect(os.path.lexists(out), "OUT was not written")
        # Read as data: never through a link, never from a FIFO, bounded.
        return read_regular(out, 64 * 1024 * 1024)


def members(blob):
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            result = []
            for m in tar.getmembers():
                data = tar.extractfile(m).read() if m.isreg() else None
                result.append((m, data))
            return result
    except (tarfile.TarError, OSError, EOFError) as e:
        raise Failure("OUT is not a readable tar.gz: %s" % e)


def check_contents(entries, blob):
    got = members(blob)
    names = [m.name for m, _ in got]
    for n in names:
        expect(not n.startswith("./") and not n.startswith("/") and n not in ("", "."), "bad member name %r" % n)
    want = {e[1]: e for e in entries}
    expect(len(names) == len(set(names)), "duplicate members in the archive")
    missing = sorted(set(want) - set(names))
    extra = sorted(set(names) - set(want))
    expect(not missing, "missing members: %s" % ", ".join(repr(m) for m in missing[:4]))
    expect(not extra, "unexpected members: %s" % ", ".join(repr(m) for m in extra[:4]))
    for m, data in got:
        kind, path, payload, exe = want[m.name]
        if kind == "dir":
            expect(m.isdir(), "%r should be a directory" % path)
        elif kind == "file":
            expect(m.isreg(), "%r should be a regular file" % path)
            expect(data == payload, "%r has different content" % path)
        else:
            expect(m.issym(), "%r should be a symbolic link" % path)
            expect(m.linkname == payload, "%r links to %r, expected %r" % (path, m.linkname, payload))
    return got


def check_metadata(entries, blob, mtime):
    want = {e[1]: e for e in entries}
    for m, _ in members(blob):
        expect(m.uid == 0 and m.gid == 0, "%r has uid/gid %d/%d" % (m.name, m.uid, m.gid))
        expect(m.uname == "" and m.gname == "", "%r has owner names %r/%r" % (m.name, m.uname, m.gname))
        expect(m.mtime == mtime, "%r has mtime %s, expected %d" % (m.name, m.mtime, mtime))
        kind, _, _, exe = want.get(m.name, ("?", None, None, False))
        mode = {"dir": 0o755, "link": 0o777}.get(kind, 0o755 if exe else 0o644)
        expect(m.mode & 0o7777 == mode, "%r has mode %o, expected %o" % (m.name, m.mode & 0o7777, mode))


G = Grader("reproducible-tarball")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    state["plain"] = Case(random_tree(rng), rng)
    state["awkward"] = Case(random_tree(rng, awkward=True), rng)
    env = {"SOURCE_DATE_EPOCH": str(EPOCH)}
    state["env"] = env


def built(state, key, variant):
    cache = state.setdefault("built", {})
    if (key, variant) not in cache:
        try:
            cache[(key, variant)] = state[key].build(variant, env=state["env"])
        except Failure as e:
            cache[(key, variant)] = e
    value = cache[(key, variant)]
    if isinstance(value, Failure):
        raise value
    return value


@G.test("archives exactly the files, directories and symlinks of the tree")
def t_contents(state):
    check_contents(state["plain"].entries, built(state, "plain", 0))


@G.test("identical bytes for the same tree with other owners, modes, times and creation order")
def t_identical(state):
    a = built(state, "plain", 0)
    b = built(state, "plain", 1)
    expect(a == b, "the two archives differ (%d vs %d bytes)" % (len(a), len(b)))
    c = built(state, "awkward", 0)
    d = built(state, "awkward", 1)
    expect(c == d, "the two archives of the awkward tree differ")


@G.test("owners, names, mtimes and modes are normalised")
def t_metadata(state):
    check_metadata(state["plain"].entries, built(state, "plain", 1), EPOCH)


@G.test("members come depth-first in byte order of their names")
def t_order(state):
    got = [m.name for m, _ in members(built(state, "plain", 0))]
    want = expected_order(state["plain"].entries)
    expect(sorted(got) == sorted(want), "member set differs, cannot judge the order")
    if got != want:
        at = next(i for i, (x, y) in enumerate(zip(got, want)) if x != y)
        raise Failure("order differs at position %d: %r where %r belongs" % (at, got[at], want[at]))


@G.test("gzip header carries no timestamp or name; mtime 0 without SOURCE_DATE_EPOCH")
def t_gzip(state):
    blob = state["plain"].build(0, env=None, tag="noepoch")
    expect(blob[:3] == b"\x1f\x8b\x08", "not a deflate gzip stream")
    flags = blob[3]
    expect(not flags & 0x08, "the gzip header records a file name")
    expect(blob[4:8] == b"\0\0\0\0", "the gzip header records a modification time")
    gzip.decompress(blob)
    for m, _ in members(blob):
        expect(m.mtime == 0, "%r has mtime %s without SOURCE_DATE_EPOCH" % (m.name, m.mtime))


@G.test("long, non-ASCII, spaced and dashed names, empty dirs and dangling links")
def t_awkward(state):
    check_contents(state["awkward"].entries, built(state, "awkward", 0))


if __name__ == "__main__":
    raise SystemExit(G.main())
