#!/usr/bin/env bash
# A plausible half-solution: copies every frame of the WAL into the database in file order,
# assuming 4096-byte pages; it ignores salts (stale frames) and commit markers.
set -euo pipefail
cat > /app/recover.py <<'EOF'
#!/usr/bin/env python3
import sys

PAGE = 4096
db_path, wal_path, out_path = sys.argv[1:4]
db = bytearray(open(db_path, "rb").read())
wal = open(wal_path, "rb").read()
off = 32
while off + 24 + PAGE <= len(wal):
    pgno = int.from_bytes(wal[off:off + 4], "big")
    start = (pgno - 1) * PAGE
    if len(db) < start:
        db.extend(b"\0" * (start - len(db)))
    db[start:start + PAGE] = wal[off + 24:off + 24 + PAGE]
    off += 24 + PAGE
db[18] = 1
db[19] = 1
open(out_path, "wb").write(db)
EOF
chmod 0755 /app/recover.py
