"""Grader for sqlite-wal-recovery: builds hidden crashed WAL databases with a fixed seed, zeroes
their WAL headers, runs the deliverable and compares its output with what SQLite itself reads
from an undamaged copy of the same files. Python 3 standard library only."""

import os
import random
import shutil
import sqlite3
import stat

from harness import Grader, expect, give_to_agent, run, workdir

DELIVERABLE = "/app/recover.py"
SEED = 77_031_2


def dump(path):
    """Schema and every row of every table, ordered, as SQLite reads it. The deliverable's file is
    read as data: read-only, and nothing in its schema may call a function with side effects."""
    conn = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        schema = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        tables = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
            tables[name] = conn.execute('SELECT * FROM "%s" ORDER BY 1, 2, 3' % name).fetchall()
        check = conn.execute("PRAGMA integrity_check").fetchall()
        return schema, tables, check
    finally:
        conn.close()


class Case:
    """One crashed database: the live connection writes, then the files are copied mid-flight."""

    def __init__(self, name, page_size=4096):
        self.dir = workdir("wal-")
        self.live = os.path.join(self.dir, "live", name + ".db")
        os.makedirs(os.path.dirname(self.live))
        self.conn = sqlite3.connect(self.live, isolation_level=None)
        if page_size != 4096:
            self.conn.execute("PRAGMA page_size=%d" % page_size)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.name = name

    def tx(self, fn):
        self.conn.execute("BEGIN")
        fn(self.conn)
        self.conn.execute("COMMIT")

    def crash(self):
        """Copy db + wal as a crash leaves them, keep an undamaged twin, zero the WAL header."""
        pristine = os.path.join(self.dir, "pristine")
        os.makedirs(pristine)
        self.db = os.path.join(self.dir, self.name + ".db")
        self.wal = os.path.join(self.dir, self.name + ".db-wal")
        for dst in (self.db, os.path.join(pristine, self.name + ".db")):
            shutil.copy(self.live, dst)
        for dst in (self.wal, os.path.join(pristine, self.name + ".db-wal")):
            shutil.copy(self.live + "-wal", dst)
        self.conn.close()
        shutil.rmtree(os.path.dirname(self.live))
        with open(self.wal, "r+b") as f:
            f.write(b"\0" * 32)
        # The oracle: SQLite replaying the intact WAL (committed frames of the current generation).
        self.expected = dump(os.path.join(pristine, self.name + ".db"))
        shutil.rmtree(pristine)
        self.out = os.path.join(self.dir, "out", "recovered.db")
        os.makedirs(os.path.dirname(self.out))
        give_to_agent(self.dir)
        os.chmod(self.db, 0o444)
        os.chmod(self.wal, 0o444)
        return self


def people(conn, rng, n, tag):
    for _ in range(n):
        conn.execute(
            "INSERT INTO people (name, city, score, tag) VALUES (?, ?, ?, ?)",
            (
                "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(4, 12))),
                rng.choice(["Oslo", "Lima", "Pune", "Kyiv", "Accra", "Quito"]),
                rng.randrange(-1000, 1000),
                tag,
            ),
        )


def base(case, rng, rows=300, checkpoint="TRUNCATE"):
    case.conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city TEXT, score INTEGER, tag TEXT)")
    case.tx(lambda c: people(c, rng, rows, "base"))
    case.conn.execute("PRAGMA wal_checkpoint(%s)" % checkpoint)


def build_basic(rng):
    case = Case("basic")
    base(case, rng)
    for i in range(3):
        case.tx(lambda c, i=i: people(c, rng, 60, "wal-%d" % i))
    return case.crash()


def build_updates(rng):
    case = Case("ledger")
    base(case, rng)
    case.conn.execute("CREATE TABLE audit (id INTEGER PRIMARY KEY, who TEXT, what TEXT)")
    case.conn.execute("CREATE INDEX people_city ON people(city)")
    for i in range(5):
        def work(c, i=i):
            c.execute("UPDATE people SET score = score + ? WHERE city = ?", (i + 1, rng.choice(["Oslo", "Lima", "Pune"])))
            c.execute("DELETE FROM people WHERE id % 7 = ?", (i,))
            c.execute("INSERT INTO audit (who, what) VALUES (?, ?)", ("job-%d" % i, "rebalance"))
            people(c, rng, 25, "late-%d" % i)
        case.tx(work)
    return case.crash()


def build_uncommitted(rng):
    case = Case("orders")
    base(case, rng)
    case.tx(lambda c: people(c, rng, 80, "committed"))
    # A small page cache forces SQLite to spill the open transaction's pages into the WAL
    # without a commit frame: exactly what a crash mid-transaction leaves behind.
    case.conn.execute("PRAGMA cache_size=5")
    case.conn.execute("BEGIN")
    for _ in range(30):
        people(case.conn, rng, 20, "never-committed")
        case.conn.execute("UPDATE people SET score = 0 WHERE tag = 'base'")
    return case.crash()


def build_stale(rng):
    case = Case("metrics")
    base(case, rng, rows=50)
    # A long first generation of the WAL...
    for i in range(8):
        case.tx(lambda c, i=i: people(c, rng, 150, "gen1-%d" % i))
    # ...checkpointed and restarted: the next writer starts again at frame 1 with new salts,
    # and the older frames stay in the file behind the new ones.
    case.conn.execute("PRAGMA wal_checkpoint(RESTART)")
    case.tx(lambda c: c.execute("UPDATE people SET score = -score WHERE tag LIKE 'gen1-%'"))
    case.tx(lambda c: people(c, rng, 10, "gen2"))
    return case.crash()


def build_blobs(rng):
    case = Case("attachments")
    case.conn.execute("CREATE TABLE files (id INTEGER PRIMARY KEY, name TEXT, body BLOB)")
    case.tx(lambda c: c.execute("INSERT INTO files (name, body) VALUES ('seed', x'00')"))
    case.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(8):
        def work(c, i=i):
            for j in range(4):
                size = rng.randrange(3000, 20000)
                c.execute(
                    "INSERT INTO files (name, body) VALUES (?, ?)",
                    ("f-%d-%d" % (i, j), bytes(rng.randrange(256) for _ in range(size))),
                )
            if i % 3 == 2:
                c.execute("DELETE FROM files WHERE id = (SELECT MIN(id) FROM files WHERE name LIKE 'f-%')")
        case.tx(work)
    return case.crash()


def build_page_size(rng):
    case = Case("small-pages", page_size=1024)
    base(case, rng)
    for i in range(4):
        case.tx(lambda c, i=i: people(c, rng, 70, "p-%d" % i))
        case.tx(lambda c: c.execute("UPDATE people SET city = 'Bern' WHERE score > 900"))
    return case.crash()


def check(case):
    res = run(["python3", DELIVERABLE, case.db, case.wal, case.out], timeout=60, cwd=case.dir)
    expect(not res.timed_out and res.rc == 0, "recover.py " + res.describe())
    st = os.lstat(case.out) if os.path.lexists(case.out) else None
    expect(st is not None and stat.S_ISREG(st.st_mode) and st.st_size > 0, "OUT was not written (as a regular file)")
    # OUT must stand alone: a WAL the deliverable left next to it is not part of the answer.
    for suffix in ("-wal", "-shm"):
        if os.path.exists(case.out + suffix):
            os.remove(case.out + suffix)
    try:
        schema, tables, integrity = dump(case.out)
    except sqlite3.DatabaseError as e:
        expect(False, "OUT is not a readable SQLite database: %s" % e)
    want_schema, want_tables, _ = case.expected
    expect(integrity == [("ok",)], "integrity_check: %s" % "; ".join(r[0] for r in integrity[:3]))
    expect(schema == want_schema, "schema differs: %d objects, expected %d" % (len(schema), len(want_schema)))
    for name, rows in want_tables.items():
        got = tables.get(name, [])
        expect(len(got) == len(rows), "table %s has %d rows, expected %d" % (name, len(got), len(rows)))
        expect(got == rows, "table %s has the right row count but different content" % name)


G = Grader("sqlite-wal-recovery")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    for key, build in (
        ("basic", build_basic),
        ("updates", build_updates),
        ("uncommitted", build_uncommitted),
        ("stale", build_stale),
        ("blobs", build_blobs),
        ("page_size", build_page_size),
    ):
        state[key] = build(rng)


@G.test("applies the committed transactions of an undamaged-looking log")
def t_basic(state):
    check(state["basic"])


@G.test("replays updates, deletes, a new table and a new index")
def t_updates(state):
    check(state["updates"])


@G.test("ignores the frames of a transaction that never committed")
def t_uncommitted(state):
    check(state["uncommitted"])


@G.test("ignores stale frames from before the WAL was restarted")
def t_stale(state):
    check(state["stale"])


@G.test("restores overflow pages of large blobs")
def t_blobs(state):
    check(state["blobs"])


@G.test("handles a 1024-byte page size")
def t_page_size(state):
    check(state["page_size"])


if __name__ == "__main__":
    raise SystemExit(G.main())
