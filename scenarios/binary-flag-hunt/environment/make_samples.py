"""Builds two sample binaries at image build time: copies of system programs with a flag
embedded (plain ASCII in one, UTF-16LE in the other). Fixed seed, fixed offsets."""

import os
import random
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = random.Random(1337)
answers = []
for name, src, encode in (
    ("challenge1", "/bin/ls", lambda f: f),
    ("challenge2", "/usr/bin/sort", lambda f: f.decode().encode("utf-16-le")),
):
    flag = ("FLAG{%s}" % "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(20))).encode()
    data = bytearray(open(src, "rb").read())
    blob = b"\0" + encode(flag) + b"\0"
    at = len(data) // 2 + rng.randrange(1000)
    data[at:at + len(blob)] = blob
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    answers.append("%s: %s" % (name, flag.decode()))
with open(os.path.join(out, "ANSWERS.txt"), "w") as f:
    f.write("\n".join(answers) + "\n")
