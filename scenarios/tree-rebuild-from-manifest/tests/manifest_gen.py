"""Generates manifests + blob stores for tree-rebuild-from-manifest (the grader's hidden cases)."""

import hashlib
import os

SAFE = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,+=~/")


def enc(path, rng, force_all=False):
    """Percent-encode the UTF-8 bytes of path: unsafe bytes always, safe ones sometimes."""
    out = []
    for b in path.encode("utf-8"):
        if b not in SAFE or (b != 0x2F and (force_all or rng.random() < 0.04)):
            out.append(("%%%02X" if rng.random() < 0.5 else "%%%02x") % b)
        else:
            out.append(chr(b))
    return "".join(out)


class Tree:
    def __init__(self, rng):
        self.rng = rng
        self.entries = {}  # path -> dict(kind, mode, mtime, data, target, link_of, listed)
        self.blobs = {}
        self.lines = []

    def t(self):
        return 1_600_000_000 + self.rng.randrange(10**8)

    def dir(self, path, mode=0o755, listed=True):
        self.entries[path] = dict(kind="dir", mode=mode, mtime=self.t(), listed=listed)

    def file(self, path, data=None, mode=0o644):
        if data is None:
            data = ("%s\n" % path).encode() * self.rng.randrange(1, 40)
        self.entries[path] = dict(kind="file", mode=mode, mtime=self.t(), data=data, listed=True)

    def link(self, path, target):
        self.entries[path] = dict(kind="link", target=target, mtime=self.t(), listed=True)

    def hard(self, path, of):
        self.entries[path] = dict(kind="hard", link_of=of, listed=True)

    def render(self, order="parents-first", crlf=False, comments=False, force_encode=()):
        rng = self.rng
        paths = [p for p, e in self.entries.items() if e["listed"]]
        if order == "parents-first":
            paths.sort(key=lambda p: (p.count("/"), p))
        elif order == "children-first":
            paths.sort(key=lambda p: (-p.count("/"), p))
        else:
            rng.shuffle(paths)
        lines = ["# trajrl manifest v1"] if comments else []
        for p in paths:
            e = self.entries[p]
            ep = enc(p, rng, force_all=p in force_encode)
            if e["kind"] == "dir":
                lines.append("D\t%04o\t%d\t%s" % (e["mode"], e["mtime"], ep))
            elif e["kind"] == "file":
                digest = hashlib.sha256(e["data"]).hexdigest()
                self.blobs[digest] = e["data"]
                lines.append("F\t%04o\t%d\t%s\t%s" % (e["mode"], e["mtime"], digest, ep))
            elif e["kind"] == "link":
                lines.append("L\t%d\t%s\t%s" % (e["mtime"], enc(e["target"], rng), ep))
            else:
                lines.append("H\t%s\t%s" % (enc(e["link_of"], rng), ep))
            if comments and rng.random() < 0.2:
                lines.append(rng.choice(["", "# checkpoint", "   "]) if rng.random() < 0.5 else "")
        nl = "\r\n" if crlf else "\n"
        return (nl.join(lines) + nl).encode("utf-8")

    def write(self, manifest_path, blob_dir, **kw):
        text = self.render(**kw)
        with open(manifest_path, "wb") as f:
            f.write(text)
        for digest, data in self.blobs.items():
            d = os.path.join(blob_dir, digest[:2])
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, digest), "wb") as f:
                f.write(data)
