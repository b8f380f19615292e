#!/usr/bin/env bash
# A plausible half-solution: a decent regex and address validation, but clients are compared as
# strings (one IPv6 client in three notations counts three times) and query strings stay in the
# paths.
set -euo pipefail
cat > /app/logstats.py <<'EOF'
#!/usr/bin/env python3
import collections
import ipaddress
import json
import re
import sys

Q = r'"((?:[^"\\]|\\.)*)"'
LINE = re.compile(r'(\S+) - (\S+) \[([^\]]*)\] ' + Q + r' (\d{3}) (\d+|-) ' + Q + ' ' + Q + r' (\d+\.\d+)$')
stats = dict(requests=0, malformed=0, bytes=0, slow=0)
status, methods, paths, clients = collections.Counter(), collections.Counter(), collections.Counter(), set()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    line = line.rstrip("\r\n")
    if not line:
        continue
    m = LINE.match(line)
    try:
        ipaddress.ip_address(m.group(1) if m else "")
    except ValueError:
        m = None
    if not m:
        stats["malformed"] += 1
        continue
    stats["requests"] += 1
    clients.add(m.group(1))
    status[m.group(5)] += 1
    stats["bytes"] += 0 if m.group(6) == "-" else int(m.group(6))
    stats["slow"] += float(m.group(9)) > 1.0
    parts = m.group(4).split(" ")
    if len(parts) == 3 and parts[0].isupper():
        methods[parts[0]] += 1
        paths[parts[1]] += 1
top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
print(json.dumps(dict(stats, status=dict(status), clients=len(clients), methods=dict(methods), top_paths=[list(t) for t in top])))
EOF
chmod 0755 /app/logstats.py
