#!/usr/bin/env bash
# Reference solution: writes /app/codec.py (columnar delta coding + per-column LZMA).
set -euo pipefail
cat > /app/codec.py <<'EOF'
#!/usr/bin/env python3
"""Columnar codec for sensor CSV logs.

Every well-formed row becomes small integers: time delta, sensor delta, and per-sensor deltas of
the three readings (fixed-point), plus a kind byte (status, humidity present). Each column is
LZMA-compressed on its own, which is what beats xz on the text. A row that does not re-format to
exactly its own bytes is kept verbatim, and if anything still fails to round-trip the whole
input falls back to plain LZMA: decompress(compress(x)) == x for every input.
"""
import lzma
import re
import sys

MAGIC = b"SLC1"
FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6}]
ROW = re.compile(rb"(\d{1,15}),s(\d\d),(-?\d{1,6}\.\d\d),(-?\d{1,6}\.\d)?,(-?\d{1,6}\.\d\d),(OK|WARN|ERR)")
STATUS = [b"OK", b"WARN", b"ERR"]


def fixed(text):
    return int(text.replace(b".", b""))


def fmt(value, decimals):
    sign = "-" if value < 0 else ""
    a = abs(value)
    return ("%s%d.%0*d" % (sign, a // 10**decimals, decimals, a % 10**decimals)).encode()


def row(ts, sensor, t, h, p, status):
    return b"%d,s%02d,%s,%s,%s,%s" % (ts, sensor, fmt(t, 2), fmt(h, 1) if h is not None else b"", fmt(p, 2), status)


def put(out, n):
    n = (-n << 1) - 1 if n < 0 else n << 1  # zigzag: small magnitudes -> small codes
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def get(buf, pos):
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (-((n + 1) >> 1) if n & 1 else n >> 1), pos


def pack(streams):
    out = bytearray()
    for s in streams:
        c = lzma.compress(bytes(s), format=lzma.FORMAT_RAW, filters=FILTERS)
        put(out, len(c))
        out += c
    return bytes(out)


def unpack(blob, count):
    streams, pos = [], 0
    for _ in range(count):
        n, pos = get(blob, pos)
        streams.append(lzma.decompress(blob[pos:pos + n], format=lzma.FORMAT_RAW, filters=FILTERS))
        pos += n
    return streams


def encode_columns(data):
    kinds, ts_s, sen_s, t_s, h_s, p_s, raw = (bytearray() for _ in range(7))
    prev_ts = prev_sensor = 0
    last = {}
    for line in data.split(b"\n"):
        m = ROW.fullmatch(line)
        if m:
            ts, sensor, status = int(m[1]), int(m[2]), m[6]
            t, p = fixed(m[3]), fixed(m[5])
            h = fixed(m[4]) if m[4] is not None else None
            if row(ts, sensor, t, h, p, status) == line:
                kinds.append(1 + STATUS.index(status) + (3 if h is None else 0))
                lt, lh, lp = last.get(sensor, (0, 0, 0))
                put(ts_s, ts - prev_ts)
                put(sen_s, sensor - prev_sensor)
                put(t_s, t - lt)
                put(p_s, p - lp)
                if h is not None:
                    put(h_s, h - lh)
                    lh = h
                last[sensor] = (t, lh, p)
                prev_ts, prev_sensor = ts, sensor
                continue
        kinds.append(0)
        put(raw, len(line))
        raw += line
    return MAGIC + b"\x01" + pack([kinds, ts_s, sen_s, t_s, h_s, p_s, raw])


def decode_columns(payload):
    kinds, ts_s, sen_s, t_s, h_s, p_s, raw = unpack(payload, 7)
    cur = dict(ts=0, sen=0, t=0, h=0, p=0, raw=0)
    streams = dict(ts=ts_s, sen=sen_s, t=t_s, h=h_s, p=p_s, raw=raw)

    def take(name):
        v, cur[name] = get(streams[name], cur[name])
        return v

    lines = []
    prev_ts = prev_sensor = 0
    last = {}
    for k in kinds:
        if k == 0:
            n = take("raw")
            lines.append(raw[cur["raw"]:cur["raw"] + n])
            cur["raw"] += n
            continue
        status = STATUS[(k - 1) % 3]
        ts = prev_ts + take("ts")
        sensor = prev_sensor + take("sen")
        lt, lh, lp = last.get(sensor, (0, 0, 0))
        t = lt + take("t")
        p = lp + take("p")
        h = None
        if k <= 3:
            h = lh + take("h")
            lh = h
        last[sensor] = (t, lh, p)
        prev_ts, prev_sensor = ts, sensor
        lines.append(row(ts, sensor, t, h, p, status))
    return b"\n".join(lines)


def compress(data):
    fallback = MAGIC + b"\x00" + lzma.compress(data, format=lzma.FORMAT_RAW, filters=FILTERS)
    try:
        blob = encode_columns(data)
        if len(blob) < len(fallback) and decompress(blob) == data:
            return blob
    except Exception:  # noqa: BLE001 - any surprise means: use the safe path
        pass
    return fallback


def decompress(blob):
    if blob[:4] != MAGIC:
        raise ValueError("not an SLC1 stream")
    if blob[4] == 0:
        return lzma.decompress(blob[5:], format=lzma.FORMAT_RAW, filters=FILTERS)
    return decode_columns(blob[5:])


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("compress", "decompress"):
        sys.exit("usage: codec.py compress|decompress < IN > OUT")
    data = sys.stdin.buffer.read()
    sys.stdout.buffer.write(compress(data) if sys.argv[1] == "compress" else decompress(data))


if __name__ == "__main__":
    main()
EOF
chmod 0755 /app/codec.py
