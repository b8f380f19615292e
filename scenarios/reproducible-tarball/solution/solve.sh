#!/usr/bin/env bash
# Reference solution: writes /app/mktar.py.
set -euo pipefail
cat > /app/mktar.py <<'EOF'
#!/usr/bin/env python3
"""Deterministic tar.gz of a directory: sorted depth-first members, normalised owners, modes and
times, and a gzip header without name or timestamp."""
import gzip
import io
import os
import stat
import sys
import tarfile


def add_tree(tar, src, rel, epoch):
    here = os.path.join(src, rel) if rel else src
    for name in sorted(os.listdir(here), key=os.fsencode):
        arc = rel + "/" + name if rel else name
        path = os.path.join(src, arc)
        st = os.lstat(path)
        info = tarfile.TarInfo(arc)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = epoch
        if stat.S_ISLNK(st.st_mode):
            info.type = tarfile.SYMTYPE
            info.linkname = os.readlink(path)
            info.mode = 0o777
            tar.addfile(info)
        elif stat.S_ISDIR(st.st_mode):
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
            add_tree(tar, src, arc, epoch)
        elif stat.S_ISREG(st.st_mode):
            info.mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
            info.size = st.st_size
            with open(path, "rb") as f:
                tar.addfile(info, f)


def main(src, out):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        add_tree(tar, src, "", epoch)
    with open(out, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as gz:
            gz.write(buf.getvalue())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: mktar.py SRC OUT")
    main(sys.argv[1], sys.argv[2])
EOF
chmod 0755 /app/mktar.py
