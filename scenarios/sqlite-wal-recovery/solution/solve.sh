#!/usr/bin/env bash
# Reference solution: writes /app/recover.py.
set -euo pipefail
cat > /app/recover.py <<'EOF'
#!/usr/bin/env python3
"""Rebuild a SQLite database from its file and a WAL whose 32-byte header was destroyed.

WAL frame = 24-byte header (page number, db size after commit or 0, salt-1, salt-2, checksum-1,
checksum-2) + one page. The salts of the current generation are those of the first frame; a
frame with other salts is left over from before a checkpoint restarted the log. Pages count
only once a frame with a non-zero "db size" (the commit frame) closes their transaction.
"""
import struct
import sys


def main(db_path, wal_path, out_path):
    with open(db_path, "rb") as f:
        db = bytearray(f.read())
    if len(db) < 100 or not db.startswith(b"SQLite format 3\0"):
        sys.exit("not a SQLite database: " + db_path)
    page_size = struct.unpack(">H", db[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    with open(wal_path, "rb") as f:
        wal = f.read()

    frame = 24 + page_size
    salt = None
    pending = {}
    committed = {}
    db_pages = None
    off = 32
    while off + frame <= len(wal):
        pgno, commit_size = struct.unpack(">II", wal[off:off + 8])
        frame_salt = wal[off + 8:off + 16]
        if salt is None:
            salt = frame_salt
        if frame_salt != salt or pgno == 0:
            break
        pending[pgno] = wal[off + 24:off + frame]
        if commit_size:
            committed.update(pending)
            pending = {}
            db_pages = commit_size
        off += frame

    for pgno, page in committed.items():
        start = (pgno - 1) * page_size
        if len(db) < start:
            db.extend(b"\0" * (start - len(db)))
        db[start:start + page_size] = page
    if db_pages is not None:
        del db[db_pages * page_size:]
    # Rollback-journal mode in the header: the output stands alone, without a WAL.
    db[18] = 1
    db[19] = 1
    with open(out_path, "wb") as f:
        f.write(db)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: recover.py DB WAL OUT")
    main(*sys.argv[1:])
EOF
chmod 0755 /app/recover.py
