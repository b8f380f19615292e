#!/usr/bin/env bash
# Reference solution: writes /app/findflag.sh (plain, UTF-16LE at both alignments, base64 runs,
# and all 255 one-byte XOR keys).
set -euo pipefail
cat > /app/findflag.sh <<'EOF'
#!/usr/bin/env bash
set -uo pipefail
file=${1:?usage: findflag.sh FILE}
exec python3 - "$file" <<'PY'
import base64
import binascii
import re
import sys

PATTERN = re.compile(rb"FLAG\{[a-z0-9_]{8,40}\}")
data = open(sys.argv[1], "rb").read()


def find():
    m = PATTERN.search(data)
    if m:
        return m.group(0)
    for align in (0, 1):
        text = data[align:].decode("utf-16-le", "replace").encode("ascii", "replace")
        m = PATTERN.search(text)
        if m:
            return m.group(0)
    for run in re.finditer(rb"[A-Za-z0-9+/]{16,}={0,2}", data):
        chunk = run.group(0)
        for start in range(4):
            piece = chunk[start:]
            piece = piece[: len(piece) - len(piece) % 4] if not piece.endswith(b"=") else piece
            try:
                m = PATTERN.search(base64.b64decode(piece, validate=True))
            except (binascii.Error, ValueError):
                continue
            if m:
                return m.group(0)
    for key in range(1, 256):
        m = PATTERN.search(data.translate(bytes(b ^ key for b in range(256))))
        if m:
            return m.group(0)
    return None


flag = find()
if flag is None:
    sys.exit(1)
sys.stdout.write(flag.decode() + "\n")
PY
EOF
chmod 0755 /app/findflag.sh
