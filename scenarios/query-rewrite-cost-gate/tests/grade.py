"""Grader for query-rewrite-cost-gate: builds hidden shop databases (fixed seed), runs the
deliverable's statement read-only as the agent user in a child process that counts SQLite VM
instructions, and compares rows with a Python oracle of slow.sql's semantics.
Python 3 standard library only."""

import json
import os
import random
import sqlite3

from harness import Grader, expect, give_to_agent, run, workdir

DELIVERABLE = "/app/fast.sql"
SEED = 1_234_567
COLUMNS = ["id", "name", "paid_orders", "revenue_cents", "last_order_day"]
PER_ROW = 40
BASE = 10_000

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT);
CREATE TABLE products (id INTEGER PRIMARY KEY, title TEXT NOT NULL, category TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, day INTEGER NOT NULL, status TEXT);
CREATE TABLE order_items (order_id INTEGER NOT NULL, product_id INTEGER NOT NULL, qty INTEGER, unit_cents INTEGER NOT NULL);
"""

# Runs as the agent user: the statement can neither write nor attach, and cannot see the grader.
RUNNER = r'''
import json, sqlite3, sys
db, sql_path, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
sql = open(sql_path, encoding="utf-8").read()
conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
conn.execute("PRAGMA query_only = ON")
DENY = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_PRAGMA}
conn.set_authorizer(lambda action, *rest: sqlite3.SQLITE_DENY if action in DENY else sqlite3.SQLITE_OK)
calls = [0]
def tick():
    calls[0] += 1
    return 1 if calls[0] * 100 > limit else 0
conn.set_progress_handler(tick, 100)
try:
    cur = conn.execute(sql)
    if cur.description is None:
        print(json.dumps({"error": "not a query (no result columns)"}))
        sys.exit(0)
    rows = cur.fetchall()
    cost = calls[0] * 100
    print(json.dumps({"columns": [d[0] for d in cur.description], "rows": rows, "cost": cost}))
except Exception as e:
    over = calls[0] * 100 > limit
    print(json.dumps({"error": ("cost budget exceeded" if over else "%s: %s" % (type(e).__name__, e))}))
'''


def build(path, rng, customers, max_orders, quirks):
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    regions = ["EU", "UK", "US", "APAC"] + (["eu", None] if quirks else [])
    statuses = ["paid", "paid", "paid", "refunded", "pending"] + (["PAID", "Paid", None] if quirks else [])
    for i in range(1, customers + 1):
        conn.execute("INSERT INTO customers VALUES (?, ?, ?)", (i, "c-%05d" % i, rng.choice(regions)))
    for p in range(1, 61):
        conn.execute("INSERT INTO products VALUES (?, ?, ?)", (p, "p-%02d" % p, rng.choice(["books", "toys"])))
    oid = 0
    items = []
    orders = []
    for i in range(1, customers + 1):
        n = rng.randrange(0 if quirks else 1, max_orders + 1)
        for _ in range(n):
            oid += 1
            orders.append((oid, i, rng.randrange(1, 366), rng.choice(statuses)))
            for _ in range(rng.randrange(0 if quirks else 1, 4)):
                qty = rng.randrange(1, 6)
                if quirks and rng.random() < 0.08:
                    qty = None
                items.append((oid, rng.randrange(1, 61), qty, rng.randrange(50, 20000)))
        if quirks and rng.random() < 0.05:
            # A paid order whose every item has an unknown quantity.
            oid += 1
            orders.append((oid, i, rng.randrange(1, 366), "paid"))
            items.append((oid, 1, None, 999))
    # Insertion order is shuffled so that no query can lean on physical row order.
    rng.shuffle(orders)
    rng.shuffle(items)
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
    conn.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?)", items)
    conn.commit()
    conn.close()


def oracle(path):
    """slow.sql's meaning, computed in Python (slow.sql itself is quadratic)."""
    conn = sqlite3.connect(path)
    customers = conn.execute("SELECT id, name, region FROM customers").fetchall()
    orders = conn.execute("SELECT id, customer_id, day, status FROM orders").fetchall()
    items = conn.execute("SELECT order_id, qty, unit_cents FROM order_items").fetchall()
    total = sum(conn.execute("SELECT COUNT(*) FROM %s" % t).fetchone()[0] for t in ("customers", "products", "orders", "order_items"))
    conn.close()
    paid_of = {}
    last = {}
    order_owner = {}
    for oid, cid, day, status in orders:
        last[cid] = max(last.get(cid, day), day)
        if status == "paid":
            paid_of[cid] = paid_of.get(cid, 0) + 1
            order_owner[oid] = cid
    revenue = {}
    for oid, qty, cents in items:
        cid = order_owner.get(oid)
        if cid is not None and qty is not None:
            revenue[cid] = revenue.get(cid, 0) + qty * cents
    rows = [
        [cid, name, paid_of.get(cid, 0), revenue.get(cid, 0), last.get(cid)]
        for cid, name, region in customers
        if region in ("EU", "UK")
    ]
    rows.sort(key=lambda r: (-r[3], r[0]))
    return rows, total


class Case:
    def __init__(self, name, path=None, rng=None, **kw):
        self.dir = workdir("sql-")
        self.db = os.path.join(self.dir, name + ".db")
        if path:
            with open(path, "rb") as src, open(self.db, "wb") as dst:
                dst.write(src.read())
        else:
            build(self.db, rng, **kw)
        self.expected, self.rows = oracle(self.db)
        self.limit = PER_ROW * self.rows + BASE
        give_to_agent(self.dir)
        os.chmod(self.db, 0o444)
        # The runner stays root's (the agent user may read and run it, not change it).
        self.runner = os.path.join(self.dir, "runner.py")
        with open(self.runner, "w") as f:
            f.write(RUNNER)
        os.chmod(self.runner, 0o644)


def check(case):
    # -I: no user site, no PYTHON* variables: only the grader's code runs in the measuring process.
    res = run(["python3", "-I", case.runner, case.db, DELIVERABLE, str(case.limit)], timeout=90, cwd=case.dir)
    expect(not res.timed_out, "the statement " + res.describe())
    try:
        out = json.loads(res.text().strip().splitlines()[-1])
    except (ValueError, IndexError):
        expect(False, "could not run the statement: " + res.describe())
    expect("error" not in out, "statement failed: %s" % out.get("error"))
    expect(out["columns"] == COLUMNS, "columns are %s, expected %s" % (out["columns"], COLUMNS))
    got = out["rows"]
    expect(len(got) == len(case.expected), "%d rows, expected %d" % (len(got), len(case.expected)))
    for i, (g, w) in enumerate(zip(got, case.expected)):
        expect(g == w, "row %d is %s, expected %s" % (i + 1, g, w))
    expect(out["cost"] <= case.limit, "cost %d > budget %d" % (out["cost"], case.limit))


G = Grader("query-rewrite-cost-gate")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    state["visible"] = Case("shop", path="/app/shop.db")
    state["clean"] = Case("clean", rng=rng, customers=400, max_orders=9, quirks=False)
    state["missing"] = Case("gaps", rng=rng, customers=400, max_orders=6, quirks=True)
    state["nulls"] = Case("nulls", rng=rng, customers=500, max_orders=8, quirks=True)
    state["large"] = Case("large", rng=rng, customers=3500, max_orders=10, quirks=False)
    state["empty"] = Case("empty", rng=rng, customers=0, max_orders=0, quirks=False)


@G.test("same rows as slow.sql on the example database, within budget")
def t_visible(state):
    check(state["visible"])


@G.test("same rows on a hidden database, within budget")
def t_clean(state):
    check(state["clean"])


@G.test("customers without orders and orders without items")
def t_missing(state):
    check(state["missing"])


@G.test("NULL quantities, regions and statuses; other letter cases")
def t_nulls(state):
    check(state["nulls"])


@G.test("stays within budget on ~60k rows")
def t_large(state):
    check(state["large"])


@G.test("an empty database gives no rows and the right columns")
def t_empty(state):
    check(state["empty"])


if __name__ == "__main__":
    raise SystemExit(G.main())
