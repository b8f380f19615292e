"""Writes the visible sample log at image build time (fixed seed)."""

import random
import sys


def main(path):
    rng = random.Random(99)
    lines = ["ts,sensor,temp_c,humidity_pct,pressure_hpa,status"]
    ts = 1_717_000_000
    state = [[rng.uniform(15, 25), rng.uniform(30, 60), rng.uniform(990, 1030)] for _ in range(6)]
    for _ in range(1000):
        for s, v in enumerate(state):
            v[0] += rng.gauss(0, 0.05)
            v[1] += rng.gauss(0, 0.1)
            v[2] += rng.gauss(0, 0.02)
            status = "OK" if rng.random() > 0.01 else rng.choice(["WARN", "ERR"])
            lines.append("%d,s%02d,%.2f,%.1f,%.2f,%s" % (ts, s + 1, v[0], v[1], v[2], status))
        ts += 10
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


main(sys.argv[1])
