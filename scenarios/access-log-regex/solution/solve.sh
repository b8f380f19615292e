#!/usr/bin/env bash
# Reference solution: writes /app/logstats.py.
set -euo pipefail
cat > /app/logstats.py <<'EOF'
#!/usr/bin/env python3
import ipaddress
import json
import re
import sys

Q = r'"((?:[^"\\]|\\.)*)"'
LINE = re.compile(
    r"(\S+) - (\S+) \[([^\]]*)\] " + Q + r" (\d{3}) (\d+|-) " + Q + " " + Q + r" (\d+\.\d+)"
)
REQUEST = re.compile(r"([A-Z]+) (\S+) (\S+)")


def main(path):
    requests = malformed = total_bytes = slow = 0
    status, methods, paths = {}, {}, {}
    clients = set()
    with open(path, "rb") as f:
        raw = f.read()
    for line in raw.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        text = line.decode("latin-1")  # byte-transparent: invalid UTF-8 cannot break parsing
        m = LINE.fullmatch(text)
        addr = None
        if m:
            try:
                addr = ipaddress.ip_address(m.group(1))
            except ValueError:
                addr = None
        if m is None or addr is None:
            malformed += 1
            continue
        requests += 1
        clients.add(addr)
        status[m.group(5)] = status.get(m.group(5), 0) + 1
        if m.group(6) != "-":
            total_bytes += int(m.group(6))
        if float(m.group(9)) > 1.0:
            slow += 1
        r = REQUEST.fullmatch(m.group(4))
        if r:
            methods[r.group(1)] = methods.get(r.group(1), 0) + 1
            p = r.group(2).split("?", 1)[0]
            paths[p] = paths.get(p, 0) + 1
    top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0].encode("latin-1")))[:5]
    json.dump(
        {
            "requests": requests,
            "malformed": malformed,
            "status": dict(sorted(status.items())),
            "bytes": total_bytes,
            "clients": len(clients),
            "methods": dict(sorted(methods.items())),
            "top_paths": [[p, n] for p, n in top],
            "slow": slow,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
EOF
chmod 0755 /app/logstats.py
