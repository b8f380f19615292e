#!/usr/bin/env bash
# Reference solution: writes /app/rebuild.py.
set -euo pipefail
cat > /app/rebuild.py <<'EOF'
#!/usr/bin/env python3
"""Rebuild a tree from a manifest. Create everything first, then hard links, then metadata:
modes and mtimes go last (deepest first) because creating an entry changes its parent's mtime
and a read-only directory cannot receive new entries."""
import os
import shutil
import sys
from urllib.parse import unquote_to_bytes


def decode(field):
    return os.fsdecode(unquote_to_bytes(field))


def main(manifest, blobs, dest):
    dirs, files, links, hards = [], [], [], []
    with open(manifest, "rb") as f:
        for raw in f.read().split(b"\n"):
            line = raw.decode("ascii", "strict").rstrip("\r")
            if not line.strip(" ") or line.startswith("#"):
                continue
            parts = line.split("\t")
            kind = parts[0]
            if kind == "D":
                dirs.append((decode(parts[3]), int(parts[1], 8), int(parts[2])))
            elif kind == "F":
                files.append((decode(parts[4]), int(parts[1], 8), int(parts[2]), parts[3].lower()))
            elif kind == "L":
                links.append((decode(parts[3]), decode(parts[2]), int(parts[1])))
            elif kind == "H":
                hards.append((decode(parts[2]), decode(parts[1])))
            else:
                sys.exit("unknown entry: %r" % line)

    os.makedirs(dest, exist_ok=True)
    full = lambda p: os.path.join(dest, p)
    for path, _, _ in dirs:
        os.makedirs(full(path), exist_ok=True)
    for path, _, _, digest in files:
        os.makedirs(os.path.dirname(full(path)), exist_ok=True)
        shutil.copyfile(os.path.join(blobs, digest[:2], digest), full(path))
    for path, target, _ in links:
        os.makedirs(os.path.dirname(full(path)), exist_ok=True)
        os.symlink(target, full(path))
    for path, existing in hards:
        os.makedirs(os.path.dirname(full(path)), exist_ok=True)
        os.link(full(existing), full(path))

    for path, mode, mtime, _ in files:
        os.chmod(full(path), mode)
        os.utime(full(path), (mtime, mtime))
    for path, _, mtime in links:
        os.utime(full(path), (mtime, mtime), follow_symlinks=False)
    listed = {p for p, _, _ in dirs}
    # Implicit parents: mode 0755 (umask must not decide).
    for root, subdirs, _ in os.walk(dest):
        for d in subdirs:
            rel = os.path.relpath(os.path.join(root, d), dest)
            if rel not in listed and not os.path.islink(os.path.join(root, d)):
                os.chmod(os.path.join(root, d), 0o755)
    for path, mode, mtime in sorted(dirs, key=lambda d: -d[0].count("/")):
        os.utime(full(path), (mtime, mtime))
        os.chmod(full(path), mode)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: rebuild.py MANIFEST BLOBS DEST")
    main(*sys.argv[1:])
EOF
chmod 0755 /app/rebuild.py
