"""Grader for git-lost-commit-recovery: builds hidden damaged repositories with a fixed seed and
checks the branches the deliverable creates. Python 3 standard library and the git CLI only."""

import os
import random
import subprocess

from harness import Failure, Grader, expect, give_to_agent, run, workdir

DELIVERABLE = "/app/recover.sh"
SEED = 5_120_731
WORDS = "ledger invoice refund payout audit cache queue retry parser index shard quota token".split()


class Repo:
    """A scratch repository built with fixed identities and strictly increasing dates."""

    def __init__(self, path, rng):
        self.path = path
        self.rng = rng
        self.t = 1_720_000_000 + rng.randrange(0, 10**6)
        self.env = dict(
            os.environ,
            GIT_AUTHOR_NAME="Grader",
            GIT_AUTHOR_EMAIL="grader@example.com",
            GIT_COMMITTER_NAME="Grader",
            GIT_COMMITTER_EMAIL="grader@example.com",
            GIT_CONFIG_NOSYSTEM="1",
            HOME="/tmp",
        )
        self.git("init", "-q", "-b", "main", cwd_override=os.path.dirname(path), target=path)

    def tick(self):
        self.t += self.rng.randrange(600, 7200)
        d = "@%d +0000" % self.t
        self.env["GIT_AUTHOR_DATE"] = d
        self.env["GIT_COMMITTER_DATE"] = d

    def git(self, *args, cwd_override=None, target=None):
        argv = ["git", "-c", "safe.directory=*"] + list(args) + ([target] if target else [])
        p = subprocess.run(
            argv, cwd=cwd_override or self.path, env=self.env, capture_output=True, text=True, check=False
        )
        if p.returncode != 0:
            raise RuntimeError("git %s: %s" % (" ".join(args), p.stderr.strip()))
        return p.stdout.strip()

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

    def branch(self, name):
        p = subprocess.run(
            ["git", "-c", "safe.directory=*", "rev-parse", "-q", "--verify", "refs/heads/" + name],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
        )
        return p.stdout.strip() if p.returncode == 0 else None


def build(name, rng, *, base, lost, stashes=0, deleted_branch=False, expire=True, pack_lost=False):
    root = workdir("git-")
    repo = Repo(os.path.join(root, name), rng)
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
    give_to_agent(root)
    return repo, lost_tip, (stash_shas[-1] if stash_shas else None)


def recover(repo):
    before = repo.snapshot()
    res = run(["bash", DELIVERABLE, repo.path], timeout=60, cwd="/tmp")
    expect(not res.timed_out, "recover.sh " + res.describe())
    expect(res.rc == 0, "recover.sh " + res.describe())
    return before


def expect_branch(repo, name, want):
    got = repo.branch(name)
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
    recover(repo)
    expect_branch(repo, "recovered", tip)


@G.test("recovers the newest lost commit after reflogs expired, ignoring an older deleted branch")
def t_expired(state):
    repo, tip, _ = state["expired"]
    recover(repo)
    expect_branch(repo, "recovered", tip)


@G.test("finds a lost commit that lives only in a pack file")
def t_packed(state):
    repo, tip, _ = state["packed"]
    recover(repo)
    expect_branch(repo, "recovered", tip)


@G.test("recovers a dropped stash and does not mistake stash helpers for lost work")
def t_stash(state):
    repo, _, stash = state["stash_only"]
    recover(repo)
    expect_branch(repo, "recovered-stash", stash)
    expect_branch(repo, "recovered", None)


@G.test("recovers lost work and the newest dropped stash together, touching nothing else")
def t_both(state):
    repo, tip, stash = state["both"]
    before = recover(repo)
    expect_branch(repo, "recovered", tip)
    expect_branch(repo, "recovered-stash", stash)
    after = repo.snapshot()
    for key in ("refs", "head", "head_sha", "status", "index"):
        expect(before[key] == after[key], "the script changed the repository's %s" % key)


@G.test("leaves a repository with nothing lost alone")
def t_clean(state):
    repo, _, _ = state["clean"]
    before = recover(repo)
    expect_branch(repo, "recovered", None)
    expect_branch(repo, "recovered-stash", None)
    after = repo.snapshot()
    expect(before == after, "the script changed a repository that had nothing to recover")


if __name__ == "__main__":
    raise SystemExit(G.main())
