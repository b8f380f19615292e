"""Access-log generator with ground truth: every line is generated together with what a correct
parser must conclude from it, so the grader never parses its own logs."""

import ipaddress

METHODS = ["GET"] * 8 + ["POST"] * 3 + ["PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"]
PATHS = ["/", "/index.html", "/api/items", "/api/items/42", "/api/orders", "/login", "/static/app.js",
         "/static/app.css", "/search", "/health", "/api/v2/users", "/favicon.ico", "/a%20b", "/API/items"]
UAS = ["curl/8.4.0", "Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0", 'Mozilla/5.0 \\"quoted\\" build',
       "python-requests/2.32", "Go-http-client/1.1", "back\\\\slash agent", "-"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun"]


def v6_forms(rng, addr):
    """The same IPv6 address written in different but equivalent notations."""
    ip = ipaddress.IPv6Address(addr)
    forms = [ip.compressed, ip.exploded, ip.compressed.upper(), ip.exploded.replace(":0000:", ":0:")]
    return rng.choice(forms)


class Truth:
    def __init__(self):
        self.requests = 0
        self.malformed = 0
        self.status = {}
        self.bytes = 0
        self.clients = set()
        self.methods = {}
        self.paths = {}
        self.slow = 0

    def result(self):
        top = sorted(self.paths.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:5]
        return {
            "requests": self.requests,
            "malformed": self.malformed,
            "status": dict(sorted(self.status.items())),
            "bytes": self.bytes,
            "clients": len(self.clients),
            "methods": dict(sorted(self.methods.items())),
            "top_paths": [[p, n] for p, n in top],
            "slow": self.slow,
        }


def access_log(rng, lines, hard=False, crlf=False):
    v4 = ["203.0.113.%d" % rng.randrange(1, 255) for _ in range(25)] + ["198.51.100.7", "192.0.2.10"]
    v6 = ["2001:db8::%x" % rng.randrange(1, 4096) for _ in range(8)] + ["2001:db8:0:0:1::1", "fe80::1"]
    truth = Truth()
    out = []
    sec = 0
    for _ in range(lines):
        sec += rng.randrange(0, 5)
        if rng.random() < (0.06 if hard else 0.03):
            out.append(malformed(rng, sec))
            truth.malformed += 1
            continue
        if rng.random() < 0.01:
            out.append("")  # blank lines count for nothing
            continue
        six = rng.random() < 0.25
        base = rng.choice(v6 if six else v4)
        addr = v6_forms(rng, base) if six else base
        truth.clients.add(ipaddress.ip_address(base))
        user = "-" if rng.random() < 0.9 else rng.choice(["alice", "bob"])
        when = "%02d/%s/2024:%02d:%02d:%02d +0000" % (1 + sec // 86400 % 28, rng.choice(MONTHS), sec // 3600 % 24, sec // 60 % 60, sec % 60)
        r = rng.random()
        method = None
        if r < 0.03:
            request, status = "-", 400
        elif r < 0.05:
            request, status = "\\x16\\x03\\x01\\x02\\x00\\x01\\x00", 400
        else:
            method = rng.choice(METHODS)
            path = rng.choice(PATHS)
            target = path
            q = rng.random()
            if q < 0.3:
                target += "?page=%d" % rng.randrange(1, 9)
            elif q < 0.35:
                target += '?q=\\"needle\\"&x=1'
            request = "%s %s HTTP/%s" % (method, target, rng.choice(["1.0", "1.1", "2.0"]))
            status = rng.choice([200] * 12 + [201, 204, 301, 304, 404, 404, 500, 502, 403])
            truth.methods[method] = truth.methods.get(method, 0) + 1
            truth.paths[path] = truth.paths.get(path, 0) + 1
        size = rng.choice([0, rng.randrange(1, 90000), rng.randrange(100, 2000)])
        size_s = "-" if rng.random() < 0.07 else str(size)
        if size_s != "-":
            truth.bytes += size
        ref = rng.choice(["-", "https://example.com/", 'https://example.com/?a=\\"b\\"'])
        ua = rng.choice(UAS)
        if hard and rng.random() < 0.05:
            ua = "bot \udcff\udcfe/1.0"  # invalid UTF-8 bytes in the agent string
        rt = rng.choice(["0.%03d" % rng.randrange(0, 1000), "1.000", "1.001", "%d.%03d" % (rng.randrange(1, 30), rng.randrange(1000))])
        if float(rt) > 1.0:
            truth.slow += 1
        truth.requests += 1
        truth.status[str(status)] = truth.status.get(str(status), 0) + 1
        out.append('%s - %s [%s] "%s" %d %s "%s" "%s" %s' % (addr, user, when, request, status, size_s, ref, ua, rt))
    nl = "\r\n" if crlf else "\n"
    data = (nl.join(out) + nl).encode("utf-8", "surrogateescape")
    return data, truth.result()


def malformed(rng, sec):
    good = '203.0.113.5 - - [01/Mar/2024:00:00:%02d +0000] "GET /x HTTP/1.1" 200 12 "-" "curl/8" 0.010' % (sec % 60)
    kind = rng.randrange(7)
    if kind == 0:
        return good[: rng.randrange(10, good.index('"GET') + 6)]  # cut inside the request
    if kind == 1:
        return good.replace(" 0.010", "")  # no request time
    if kind == 2:
        return good.replace(" 200 ", " 2OO ")
    if kind == 3:
        return '{"level":"info","msg":"not an access log line"}'
    if kind == 4:
        return good.replace("203.0.113.5", "not-an-ip")
    if kind == 5:
        return good.replace('"curl/8"', '"curl/8')  # unterminated quote
    return "999.1.1.1" + good[len("203.0.113.5"):]  # not a valid address
