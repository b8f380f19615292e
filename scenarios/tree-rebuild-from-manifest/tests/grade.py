"""Grader for tree-rebuild-from-manifest: writes hidden manifests and blob stores (fixed seed),
runs the deliverable as the unprivileged agent user and compares the rebuilt tree with lstat.
Python 3 standard library only."""

import os
import random
import stat

from harness import Failure, Grader, expect, give_to_agent, read_regular, run, workdir
from manifest_gen import Tree

DELIVERABLE = "/app/rebuild.py"
SEED = 90_210_77


class Case:
    def __init__(self, tree, **render):
        self.tree = tree
        self.dir = workdir("tree-")
        self.manifest = os.path.join(self.dir, "manifest.tsv")
        self.blobs = os.path.join(self.dir, "blobs")
        tree.write(self.manifest, self.blobs, **render)
        self.dest = os.path.join(self.dir, "out", "restored")
        os.makedirs(os.path.dirname(self.dest))
        give_to_agent(self.dir)
        self.result = None

    def rebuild(self):
        if self.result is None:
            res = run(["python3", DELIVERABLE, self.manifest, self.blobs, self.dest], timeout=60, cwd=self.dir)
            self.result = res
        res = self.result
        expect(not res.timed_out and res.rc == 0, "rebuild.py " + res.describe())
        # lstat: a DEST that is a link to somewhere else is not a rebuilt tree.
        expect(os.path.lexists(self.dest) and stat.S_ISDIR(os.lstat(self.dest).st_mode), "DEST was not created")


def check(case, contents=True, modes=True, file_mtimes=True, dir_mtimes=False, links=True, hardlinks=True):
    case.rebuild()
    entries = case.tree.entries
    found = set()
    for root, dirs, files in os.walk(case.dest):
        for n in dirs + files:
            found.add(os.path.relpath(os.path.join(root, n), case.dest))
    implied = set()
    for p in entries:
        parts = p.split("/")
        implied.update("/".join(parts[:k]) for k in range(1, len(parts)))
    extra = sorted(found - set(entries) - implied)
    missing = sorted(set(entries) - found)
    expect(not missing, "missing: %s" % ", ".join(repr(m) for m in missing[:4]))
    expect(not extra, "unexpected: %s" % ", ".join(repr(m) for m in extra[:4]))
    for p, e in entries.items():
        full = os.path.join(case.dest, p)
        st = os.lstat(full)
        kind = e["kind"]
        if kind == "hard":
            if not hardlinks:
                continue
            other = os.lstat(os.path.join(case.dest, e["link_of"]))
            expect(stat.S_ISREG(st.st_mode), "%r should be a regular file" % p)
            expect((st.st_dev, st.st_ino) == (other.st_dev, other.st_ino), "%r is not a hard link of %r" % (p, e["link_of"]))
            continue
        if kind == "dir":
            expect(stat.S_ISDIR(st.st_mode), "%r should be a directory" % p)
            if modes:
                expect(stat.S_IMODE(st.st_mode) == e["mode"], "%r has mode %o, expected %o" % (p, stat.S_IMODE(st.st_mode), e["mode"]))
            if dir_mtimes:
                expect(int(st.st_mtime) == e["mtime"], "directory %r has mtime %d, expected %d" % (p, st.st_mtime, e["mtime"]))
        elif kind == "file":
            expect(stat.S_ISREG(st.st_mode), "%r should be a regular file" % p)
            if contents:
                expect(read_regular(full, len(e["data"]) + 1) == e["data"], "%r has different content" % p)
            if modes:
                expect(stat.S_IMODE(st.st_mode) == e["mode"], "%r has mode %o, expected %o" % (p, stat.S_IMODE(st.st_mode), e["mode"]))
            if file_mtimes:
                expect(int(st.st_mtime) == e["mtime"], "%r has mtime %d, expected %d" % (p, st.st_mtime, e["mtime"]))
        else:
            expect(stat.S_ISLNK(st.st_mode), "%r should be a symbolic link" % p)
            if links:
                expect(os.readlink(full) == e["target"], "%r points at %r" % (p, os.readlink(full)))
                expect(int(st.st_mtime) == e["mtime"], "link %r has mtime %d, expected %d" % (p, st.st_mtime, e["mtime"]))


def grow(tree, rng, top, depth, breadth):
    """A random subtree under top with files and subdirectories."""
    for i in range(breadth):
        name = "%s/%s-%d" % (top, rng.choice(["cfg", "data", "img", "log", "src"]), i)
        if depth > 0 and rng.random() < 0.35:
            tree.dir(name, mode=rng.choice([0o755, 0o750, 0o700, 0o775]))
            grow(tree, rng, name, depth - 1, rng.randrange(1, 4))
        else:
            tree.file(name, mode=rng.choice([0o644, 0o600, 0o640, 0o755, 0o664]))


G = Grader("tree-rebuild-from-manifest")


@G.setup
def setup(state):
    rng = random.Random(SEED)

    t = Tree(rng)
    for top in ("etc", "srv", "home"):
        t.dir(top)
        grow(t, rng, top, 2, 4)
    t.file("README", data=b"")
    state["basic"] = Case(t, order="parents-first")

    t = Tree(rng)
    t.dir("var")
    grow(t, rng, "var", 3, 5)
    t.dir("var/lib/cache", listed=False)
    t.dir("var/lib", listed=False)
    t.file("var/lib/cache/blob.bin", data=bytes(rng.randrange(256) for _ in range(3000)))
    state["order"] = Case(t, order="children-first")

    t = Tree(rng)
    t.dir("weird names")
    for name in ("with space.txt", "tab\there", "new\nline", "100% done", "ünïcödé.md", "日本語.txt", "-rf", "#hash"):
        t.file("weird names/" + name)
    t.file("plain.txt")
    state["escaped"] = Case(t, order="shuffled", crlf=True, comments=True, force_encode=("plain.txt",))

    t = Tree(rng)
    t.dir("app")
    t.dir("app/releases")
    t.file("app/releases/v1.tar", mode=0o644)
    t.link("app/current", "releases")
    t.link("app/broken", "../nowhere/at all")
    t.link("app/abs", "/etc/hostname")
    t.link("app/later", "zzz-dir")
    t.dir("app/zzz-dir")
    t.file("app/zzz-dir/f")
    state["links"] = Case(t, order="shuffled")

    t = Tree(rng)
    t.dir("store")
    t.file("store/original.dat", mode=0o640)
    t.hard("store/copy-1.dat", "store/original.dat")
    t.dir("mirror")
    t.hard("mirror/copy-2.dat", "store/original.dat")
    t.file("mirror/zz-target")
    t.hard("aa-early", "mirror/zz-target")
    state["hardlinks"] = Case(t, order="parents-first")

    t = Tree(rng)
    for top in ("a", "b"):
        t.dir(top)
        grow(t, rng, top, 3, 4)
    state["dir_mtimes"] = Case(t, order="shuffled")

    t = Tree(rng)
    t.dir("ro", mode=0o555)
    t.dir("ro/inner", mode=0o500)
    t.file("ro/inner/secret", mode=0o400)
    t.file("ro/readme", mode=0o444)
    t.dir("ro/inner/deeper", mode=0o700)
    t.file("ro/inner/deeper/x", mode=0o600)
    t.hard("ro/inner/also-secret", "ro/inner/secret")
    state["readonly"] = Case(t, order="parents-first")


@G.test("rebuilds files and directories with contents, modes and file mtimes")
def t_basic(state):
    check(state["basic"])


@G.test("handles children listed before parents and parents never listed")
def t_order(state):
    check(state["order"])


@G.test("decodes percent-encoded names; tolerates CRLF, comments and blank lines")
def t_escaped(state):
    check(state["escaped"])


@G.test("creates symbolic links verbatim (dangling, absolute, to directories) with their mtimes")
def t_links(state):
    check(state["links"])


@G.test("creates hard links, including to files listed later")
def t_hardlinks(state):
    check(state["hardlinks"])


@G.test("directory mtimes survive the creation of their contents")
def t_dir_mtimes(state):
    check(state["dir_mtimes"], dir_mtimes=True)


@G.test("read-only directories still get their contents")
def t_readonly(state):
    check(state["readonly"])


if __name__ == "__main__":
    raise SystemExit(G.main())
