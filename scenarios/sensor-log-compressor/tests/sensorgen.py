"""Sensor CSV generator shared by the grader's hidden inputs (fixed seeds come from grade.py)."""

HEADER = "ts,sensor,temp_c,humidity_pct,pressure_hpa,status"


def sensor_log(rng, rows, sensors, interval, cold=False, quirks=False):
    out = [HEADER]
    ts = 1_717_200_000 + rng.randrange(10**7)
    base_t = (-3, 4) if cold else (15, 25)
    state = [[rng.uniform(*base_t), rng.uniform(30, 60), rng.uniform(990, 1030)] for _ in range(sensors)]
    n = 0
    while n < rows:
        for s in range(sensors):
            if quirks and rng.random() < 0.02:
                continue  # a sensor missed this tick
            v = state[s]
            v[0] += rng.gauss(0, 0.05)
            v[1] += rng.gauss(0, 0.1)
            v[2] += rng.gauss(0, 0.02)
            status = "OK" if rng.random() > 0.01 else rng.choice(["WARN", "ERR"])
            hum = "%.1f" % v[1]
            if quirks and rng.random() < 0.005:
                hum = ""
            out.append("%d,s%02d,%.2f,%s,%.2f,%s" % (ts, s + 1, v[0], hum, v[2], status))
            n += 1
            if quirks and rng.random() < 0.0005:
                out.append(rng.choice(["# sensor s%02d rebooted" % (s + 1), "%d,s%02d,ERR" % (ts, s + 1), ""]))
        ts += interval if not (quirks and rng.random() < 0.01) else interval * rng.randrange(2, 50)
    return ("\n".join(out) + "\n").encode()
