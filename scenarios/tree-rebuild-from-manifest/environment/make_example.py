"""Writes the visible example backup (manifest + blob store) at image build time."""

import hashlib
import os
import sys

root = sys.argv[1]
blobs = os.path.join(root, "blobs")
files = {
    "site/index.html": b"<h1>It works</h1>\n",
    "site/css/main.css": b"body { margin: 0 }\n",
    "site/Read me.txt": b"Restored from the nightly backup.\n",
    "bin/deploy": b"#!/bin/sh\necho deploying\n",
}
lines = ["# trajrl manifest v1 (example)"]
# Children before their parents on purpose; "site/css" is never listed.
lines.append("F\t0644\t1704067200\t%s\tsite/css/main.css" % hashlib.sha256(files["site/css/main.css"]).hexdigest())
lines.append("D\t0755\t1704153600\tsite")
lines.append("F\t0644\t1704067260\t%s\tsite/index.html" % hashlib.sha256(files["site/index.html"]).hexdigest())
lines.append("F\t0600\t1704067320\t%s\tsite/Read%%20me.txt" % hashlib.sha256(files["site/Read me.txt"]).hexdigest())
lines.append("H\tsite/index.html\tsite/default.html")
lines.append("")
lines.append("D\t0555\t1704240000\tbin")
lines.append("F\t0755\t1704067380\t%s\tbin/deploy" % hashlib.sha256(files["bin/deploy"]).hexdigest())
lines.append("L\t1704067440\t..%2Fsite\tbin/site")
lines.append("L\t1704067500\tdeploy\tbin/%C3%A9tape")
with open(os.path.join(root, "manifest.tsv"), "w") as f:
    f.write("\n".join(lines) + "\n")
for data in files.values():
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(blobs, digest[:2]), exist_ok=True)
    with open(os.path.join(blobs, digest[:2], digest), "wb") as f:
        f.write(data)
