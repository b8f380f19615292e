"""Grader for git-lost-commit-recovery: builds hidden damaged repositories with a fixed seed and
checks the branches the deliverable creates. Python 3 standard library and the git CLI only.

Root never runs git on a repository the deliverable could have touched: repository config can make
git run programs (core.fsmonitor, core.hooksPath, filters, diff drivers, ...). Each repository is
built in a directory only root can enter and handed to the agent user just before its own test;
afterwards it is inspected through a root-owned copy of its refs, objects, index and work tree,
with a config the grader wrote and no system, global or repository config of anyone else."""

import os
import random
import shutil
import stat
import subprocess
import tempfile

from harness import Failure, Grader, expect, give_to_agent, read_regular, run

DELIVERABLE = "/app/recover.sh"
SEED = 5_120_731
WORDS = "ledger invoice refund payout audit cache queue retry parser index shard quota token".split()

# Every git the grader runs sees only configuration the grader wrote.
GIT_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_AUTHOR_NAME": "Grader",
    "GIT_AUTHOR_EMAIL": "grader@example.com",
    "GIT_COMMITTER_NAME": "Grader",
    "GIT_COMMITTER_EMAIL": "grader@example.com",
}
# And even that cannot start a program.
NO_PROGRAMS = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false"]
COPY_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n"
# What an inspection copies of .git: data git reads, never configuration, hooks or alternates.
GIT_DATA = ("HEAD", "packed-refs", "index", "refs", "objects")
COPY_BUDGET = 128 * 1024 * 1024
COPY_ENTRIES = 50_000


def git(args, cwd, env=None, timeout=60):
    p = subprocess.run(
        ["git"] + NO_PROGRAMS + list(args),
        cwd=cwd,
        env=env or GIT_ENV,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if p.returncode != 0:
        raise RuntimeError("git %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout.strip()


class Budget:
    def __init__(self):
        self.bytes = COPY_BUDGET
        self.entries = COPY_ENTRIES

    def take(self, size):
        self.bytes -= size
        self.entries -= 1
        if self.bytes < 0 or self.entries < 0:
            raise Failure("the repository is too large to inspect (over %d MiB or %d entries)" % (COPY_BUDGET >> 20, COPY_ENTRIES))


def copy_tree(src, dst, budget, links, skip=()):
    """Directories, regular files and (if `links`) symbolic links as links, never following one;
    FIFOs, devices and sockets are left out."""
    os.mkdir(dst, 0o700)
    for name in sorted(os.listdir(src)):
        if name in skip:
            continue
        s, d = os.path.join(src, name), os.path.join(dst, name)
        st = os.lstat(s)
        budget.take(st.st_size if stat.S_ISREG(st.st_mode) else 0)
        if stat.S_ISDIR(st.st_mode):
            copy_tree(s, d, budget, links)
        elif stat.S_ISREG(st.st_mode):
            data = read_regular(s, COPY_BUDGET)
            fd = os.open(d, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(st.st_mode) & 0o755 | 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        elif stat.S_ISLNK(st.st_mode) and links:
            os.symlink(os.readlink(s), d)


class View:
    """A root-owned copy of a repository's data with a config the grader wrote: safe to run git on."""

    def __init__(self, path):
        st = os.lstat(path)
        expect(stat.S_ISDIR(st.st_mode), "%s is no longer a directory" % path)
        dot = os.path.join(path, ".git")
        expect(stat.S_ISDIR(os.lstat(dot).st_mode), "%s/.git is no longer a directory" % path)
        self.root = tempfile.mkdtemp(prefix="inspect-", dir="/tmp")
        try:
            budget = Budget()
            self.tree = os.path.join(self.root, "tree")
            copy_tree(path, self.tree, budget, links=True, skip=(".git",))
            self.dir = os.path.join(self.tree, ".git")
            os.mkdir(self.dir, 0o700)
            for name in GIT_DATA:
                s = os.path.join(dot, name)
                try:
                    st = os.lstat(s)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    copy_tree(s, os.path.join(self.dir, name), budget, links=False, skip=("info",))
                elif stat.S_ISREG(st.st_mode):
                    with open(os.path.join(self.dir, name), "wb") as f:
                        f.write(read_regular(s, COPY_BUDGET))
            with open(os.path.join(self.dir, "config"), "w") as f:
                f.write(COPY_CONFIG)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def git(self, *args):
        env = dict(GIT_ENV, GIT_DIR=self.dir, GIT_WORK_TREE=self.tree, GIT_CEILING_DIRECTORIES=self.root)
        return git(args, cwd=self.tree, env=env)

    def branch(self, name):
        try:
            return self.git("rev-parse", "-q", "--verify", "refs/heads/" + name)
        except RuntimeError:
            return None

    def snapshot(self):
        refs = self.git("for-each-ref", "--format=%(refname) %(objectname)").splitlines()
        refs = [r for r in refs if r.split()[0] not in ("refs/heads/recovered", "refs/heads/recovered-stash")]
        return {
            "refs": sorted(refs),
            "head": self.git("symbolic-ref", "-q", "HEAD"),
            "head_sha": self.git("rev-parse", "HEAD"),
            "status": self.git("status", "--porcelain", "--untracked-files=all"),
            "index": self.git("ls-files", "-s"),
        }

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Repo:
    """A scratch repository built as root with fixed identities and strictly increasing dates, in a
    directory only root can enter until its test hands it to the agent user."""

    def __init__(self, name, rng):
        self.case = tempfile.mkdtemp(prefix="git-", dir="/tmp")
        os.chmod(self.case, 0o700)
        self.path = os.path.join(self.case, name)
        self.rng = rng
        self.t = 1_720_000_000 + rng.randrange(0, 10**6)
        self.env = dict(GIT_ENV)
        git(["init", "-q", "-b", "main", self.path], cwd=self.case, env=self.env)

    def tick(self):
        self.t += self.rng.randrange(600, 7200)
        d = "@%d +0000" % self.t
        self.env["GIT_AUTHOR_DATE"] = d
        self.env["GIT_COMMITTER_DATE"] = d

    def git(self, *args):
        return git(args, cwd=self.path, env=self.env)

    def edit(self, n=1):
        for _ in range(n):
            name = "%s/%s.txt" % (self.rng.choice(["src", "lib", "docs"]), self.rng.choice(WORDS))
            full = os.path.join(self.path, name)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "a") as f:
                f.write("%s %d\n" % (self.rng.choice(WORDS), self.rng.randrange(10**6)))

    def commit(self, subject=None):
        self.edit(self.rng.randrange(1, 3))
        self.git("add", "-A")
        self.tick()
        words = " ".join(self.rng.sample(WORDS, 3))
        self.git("commit", "-q", "-m", subject or ("Update %s" % words))
        return self.git("rev-parse", "HEAD")

    def stash_and_drop(self):
        self.edit(1)
        # Stash only tracked changes: append to a file that is already committed.
        tracked = self.git("ls-files").splitlines()
        with open(os.path.join(self.path, self.rng.choice(tracked)), "a") as f:
            f.write("work in progress %d\n" % self.rng.randrange(10**6))
        self.git("add", "-A")
        self.tick()
        self.git("stash", "push", "-q")
        sha = self.git("rev-parse", "refs/stash")
        self.git("stash", "drop", "-q")
        return sha

    def view(self):
        return View(self.path)

    def hand_over(self):
        """Only now can the agent user reach this repository (and only this one)."""
        give_to_agent(self.path)
        os.chmod(self.case, 0o755)


def build(name, rng, *, base, lost, stashes=0, deleted_branch=False, expire=True, pack_lost=False):
    repo = Repo(name, rng)
    for _ in range(base):
        repo.commit()
    if deleted_branch:
        repo.git("checkout", "-q", "-b", "spike")
        for _ in range(rng.randrange(1, 3)):
            repo.commit()
        repo.git("checkout", "-q", "main")
        repo.git("branch", "-q", "-D", "spike")
    stash_shas = [repo.stash_and_drop() for _ in range(stashes)]
    lost_tip = None
    if lost:
        for _ in range(lost):
            lost_tip = repo.commit()
        if pack_lost:
            # Pack everything while the lost commits are still reachable: afterwards they live
            # only inside the pack file.
            repo.git("repack", "-a", "-d", "-q")
            repo.git("prune-packed")
        repo.git("reset", "-q", "--hard", "HEAD~%d" % lost)
    if expire:
        repo.git("reflog", "expire", "--expire=now", "--all")
        orig = os.path.join(repo.path, ".git", "ORIG_HEAD")
        if os.path.exists(orig):
            os.remove(orig)
    return repo, lost_tip, (stash_shas[-1] if stash_shas else None)


def recover(repo):
    """Run the deliverable on its repository; the state before, and a safe view of the state after."""
    with repo.view() as v:
        before = v.snapshot()
    repo.hand_over()
    res = run(["bash", DELIVERABLE, repo.path], timeout=60, cwd="/tmp")
    expect(not res.timed_out, "recover.sh " + res.describe())
    expect(res.rc == 0, "recover.sh " + res.describe())
    try:
        return before, repo.view()
    except OSError as e:
        raise Failure("the repository cannot be read any more: %s" % e)


def expect_branch(view, name, want):
    got = view.branch(name)
    if want is None:
        expect(got is None, "branch %s must not exist, points at %s" % (name, got))
    else:
        expect(got is not None, "branch %s was not created" % name)
        expect(got == want, "branch %s points at %s, expected the %s commit" % (name, got[:12], name))


G = Grader("git-lost-commit-recovery")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    state["reflog_intact"] = build("alpha", rng, base=5, lost=2, expire=False)
    state["expired"] = build("beta", rng, base=6, lost=3, deleted_branch=True)
    state["packed"] = build("gamma", rng, base=4, lost=1, deleted_branch=True, pack_lost=True)
    state["stash_only"] = build("delta", rng, base=4, lost=0, stashes=1)
    state["both"] = build("epsilon", rng, base=5, lost=2, stashes=2, deleted_branch=True)
    state["clean"] = build("zeta", rng, base=5, lost=0, expire=False)


@G.test("recovers the tip lost by reset --hard (reflog still present)")
def t_reflog(state):
    repo, tip, _ = state["reflog_intact"]
    _, after = recover(repo)
    with after:
        expect_branch(after, "recovered", tip)


@G.test("recovers the newest lost commit after reflogs expired, ignoring an older deleted branch")
def t_expired(state):
    repo, tip, _ = state["expired"]
    _, after = recover(repo)
    with after:
        expect_branch(after, "recovered", tip)


@G.test("finds a lost commit that lives only in a pack file")
def t_packed(state):
    repo, tip, _ = state["packed"]
    _, after = recover(repo)
    with after:
        expect_branch(after, "recovered", tip)


@G.test("recovers a dropped stash and does not mistake stash helpers for lost work")
def t_stash(state):
    repo, _, stash = state["stash_only"]
    _, after = recover(repo)
    with after:
        expect_branch(after, "recovered-stash", stash)
        expect_branch(after, "recovered", None)


@G.test("recovers lost work and the newest dropped stash together, touching nothing else")
def t_both(state):
    repo, tip, stash = state["both"]
    before, after = recover(repo)
    with after:
        expect_branch(after, "recovered", tip)
        expect_branch(after, "recovered-stash", stash)
        now = after.snapshot()
    for key in ("refs", "head", "head_sha", "status", "index"):
        expect(before[key] == now[key], "the script changed the repository's %s" % key)


@G.test("leaves a repository with nothing lost alone")
def t_clean(state):
    repo, _, _ = state["clean"]
    before, after = recover(repo)
    with after:
        expect_branch(after, "recovered", None)
        expect_branch(after, "recovered-stash", None)
        now = after.snapshot()
    expect(before == now, "the script changed a repository that had nothing to recover")


if __name__ == "__main__":
    raise SystemExit(G.main())
