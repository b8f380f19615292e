#!/usr/bin/env bash
# A plausible half-solution: plain LZMA. Always lossless, never close to the ratio gate.
set -euo pipefail
cat > /app/codec.py <<'EOF'
#!/usr/bin/env python3
import lzma
import sys

data = sys.stdin.buffer.read()
if sys.argv[1] == "compress":
    sys.stdout.buffer.write(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
else:
    sys.stdout.buffer.write(lzma.decompress(data))
EOF
chmod 0755 /app/codec.py
