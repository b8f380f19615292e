#!/usr/bin/env bash
# A plausible half-solution: sorted walk and fixed mtimes, but owners and permission bits leak
# through, and tarfile's "w:gz" stamps the gzip header with a file name and the current time.
set -euo pipefail
cat > /app/mktar.py <<'EOF'
#!/usr/bin/env python3
import os
import sys
import tarfile

src, out = sys.argv[1], sys.argv[2]
epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)


def reset(info):
    info.mtime = epoch
    return info


with tarfile.open(out, "w:gz") as tar:
    def walk(rel):
        here = os.path.join(src, rel) if rel else src
        for name in sorted(os.listdir(here)):
            arc = rel + "/" + name if rel else name
            path = os.path.join(src, arc)
            tar.add(path, arcname=arc, recursive=False, filter=reset)
            if os.path.isdir(path) and not os.path.islink(path):
                walk(arc)
    walk("")
EOF
chmod 0755 /app/mktar.py
