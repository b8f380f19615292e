"""Builds the visible damaged database at image build time (fixed seed): a WAL-mode database
whose process died before checkpointing, and whose WAL header was then overwritten with zeros."""

import os
import random
import shutil
import sqlite3
import sys

out_dir = sys.argv[1]
work = out_dir + ".tmp"
os.makedirs(work, exist_ok=True)
os.makedirs(out_dir, exist_ok=True)
rng = random.Random(20240611)

db = os.path.join(work, "inventory.db")
conn = sqlite3.connect(db, isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA wal_autocheckpoint=0")
conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, qty INTEGER NOT NULL, note TEXT)")
conn.execute("BEGIN")
for i in range(400):
    conn.execute(
        "INSERT INTO items (sku, qty, note) VALUES (?, ?, ?)",
        ("SKU-%05d" % i, rng.randrange(0, 500), "batch-1 " + "x" * rng.randrange(0, 120)),
    )
conn.execute("COMMIT")
# Everything so far reaches the database file; the WAL restarts from its first frame.
conn.execute("PRAGMA wal_checkpoint(RESTART)")
conn.execute("CREATE TABLE moves (id INTEGER PRIMARY KEY, item_id INTEGER, delta INTEGER, at TEXT)")
for t in range(6):
    conn.execute("BEGIN")
    for _ in range(40):
        item = rng.randrange(1, 401)
        delta = rng.randrange(-20, 21)
        conn.execute("INSERT INTO moves (item_id, delta, at) VALUES (?, ?, ?)", (item, delta, "2024-06-%02d" % (t + 1)))
        conn.execute("UPDATE items SET qty = qty + ? WHERE id = ?", (delta, item))
    conn.execute("COMMIT")
conn.execute("DELETE FROM items WHERE qty < 10")
counts = {t: conn.execute("SELECT COUNT(*) FROM %s" % t).fetchone()[0] for t in ("items", "moves")}

# Copy while the connection is open: the WAL is not checkpointed, as after a crash.
shutil.copy(db, os.path.join(out_dir, "inventory.db"))
shutil.copy(db + "-wal", os.path.join(out_dir, "inventory.db-wal"))
conn.close()
shutil.rmtree(work)

with open(os.path.join(out_dir, "inventory.db-wal"), "r+b") as f:
    f.write(b"\0" * 32)

with open(os.path.join(out_dir, "EXPECTED.txt"), "w") as f:
    f.write("Row counts a correct recovery of inventory.db must show:\n")
    for t, n in counts.items():
        f.write("  %s: %d\n" % (t, n))
