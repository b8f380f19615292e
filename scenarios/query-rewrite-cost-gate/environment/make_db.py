"""Builds the visible /app/shop.db at image build time (fixed seed, so identical rows on every
build). Every customer has orders and every order has items here; the hidden databases the
grader uses are not that tidy."""

import random
import sqlite3
import sys

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT);
CREATE TABLE products (id INTEGER PRIMARY KEY, title TEXT NOT NULL, category TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, day INTEGER NOT NULL, status TEXT);
CREATE TABLE order_items (order_id INTEGER NOT NULL, product_id INTEGER NOT NULL, qty INTEGER, unit_cents INTEGER NOT NULL);
"""

rng = random.Random(31337)
conn = sqlite3.connect(sys.argv[1])
conn.executescript(SCHEMA)
for i in range(1, 151):
    conn.execute("INSERT INTO customers VALUES (?, ?, ?)", (i, "customer-%03d" % i, rng.choice(["EU", "UK", "US", "APAC"])))
for p in range(1, 41):
    conn.execute("INSERT INTO products VALUES (?, ?, ?)", (p, "product-%02d" % p, rng.choice(["books", "tools", "toys", "food"])))
oid = 0
for i in range(1, 151):
    for _ in range(rng.randrange(1, 10)):
        oid += 1
        status = rng.choice(["paid", "paid", "paid", "refunded", "pending"])
        conn.execute("INSERT INTO orders VALUES (?, ?, ?, ?)", (oid, i, rng.randrange(1, 366), status))
        for _ in range(rng.randrange(1, 4)):
            conn.execute(
                "INSERT INTO order_items VALUES (?, ?, ?, ?)",
                (oid, rng.randrange(1, 41), rng.randrange(1, 5), rng.randrange(100, 10000)),
            )
conn.commit()
conn.close()
