#!/usr/bin/env node
/**
 * Build the validator image offline (docker/Dockerfile.validator).
 *
 * The image must not depend on a registry: no Node base image, no npm download. So this script
 * stages, into docker/.toolchain/ (gitignored, part of the build context):
 *   node/bin/node, node/include/node/, node/lib/node_modules/npm/   this host's Node (process.execPath,
 *       a glibc build that runs on Debian bookworm), its headers (better-sqlite3 compiles against them:
 *       no header download; OpenSSL's 50 MB of headers are left out, nothing we compile uses them)
 *       and its npm
 *   package.json, package-lock.json   the project's, reduced to what the image builds with: the
 *       production dependencies and the build tools (BUILD_TOOLS; test and lint tools stay out), each
 *       package's registry tarball URL filled in (the lockfile omits them), so `npm ci --offline` can
 *       take every tarball from the cache by integrity without asking the registry for metadata
 *   npm-cache/_cacache  only the tarballs that lockfile names, copied from this host's npm cache
 *       (filled by the host's own `npm ci`)
 * and then runs `docker build` FROM the locally imported debian:bookworm-slim, never pulling.
 * What the build fetches: Debian's packages through apt (python3, make, g++, ca-certificates to
 * compile better-sqlite3; ca-certificates, tini, iptables in the image) from the mirror the base
 * image names. Nothing from the npm registry: the host's own `npm ci` filled the cache this stages,
 * and `stage` checks every tarball is there before writing anything.
 *
 *   node scripts/validator-image.mjs stage              stage only (then `docker compose build` works)
 *   node scripts/validator-image.mjs build [--tag T] [--label k=v]…   stage + docker build (default tags
 *                                                         trajrl.invalid/validator:<version> and :latest)
 *
 * The default name is the compose file's: `.invalid` is a reserved top-level domain (RFC 2606) that
 * never resolves, so no registry — Docker Hub included — can serve an image under it, and nothing
 * (Watchtower, a `docker pull`) can swap someone else's image in under the local build's name.
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, "docker/.toolchain");
const REGISTRY = "https://registry.npmjs.org";
/** The local build's name (docker/docker-compose.validator.yml runs it). */
const LOCAL_IMAGE = "trajrl.invalid/validator";

const say = (m) => process.stderr.write(`[validator-image] ${m}\n`);
function die(m) {
  process.stderr.write(`[validator-image] ERROR: ${m}\n`);
  process.exit(1);
}

/**
 * cp -r that skips files already staged with the same size and mtime (re-staging is cheap), and
 * paths (relative to the top) that `skip` names.
 */
function copyTree(src, dst, skip = () => false, rel = "") {
  if (rel && skip(rel)) return;
  const st = statSync(src);
  if (st.isDirectory()) {
    mkdirSync(dst, { recursive: true });
    for (const name of readdirSync(src))
      copyTree(join(src, name), join(dst, name), skip, rel ? `${rel}/${name}` : name);
    return;
  }
  if (existsSync(dst)) {
    const d = statSync(dst);
    if (d.size === st.size && d.mtimeMs >= st.mtimeMs) return;
  }
  mkdirSync(dirname(dst), { recursive: true });
  copyFileSync(src, dst);
}

/** This host's Node, its headers and its npm, checked before anything is written. */
function hostNode() {
  const node = process.execPath;
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 20 || (major === 20 && minor < 18))
    die(`Node ${process.version} is too old: the validator needs >= 20.18`);
  const prefix = resolve(dirname(node), "..");
  const headers = join(prefix, "include/node");
  if (!existsSync(join(headers, "node_api.h")) || !existsSync(join(headers, "common.gypi")))
    die(`no Node headers at ${headers} (better-sqlite3 compiles against them); install this Node's headers`);
  const npmRoot = execFileSync("npm", ["root", "-g"], { encoding: "utf8" }).trim();
  const npm = join(npmRoot, "npm");
  if (!existsSync(join(npm, "bin/npm-cli.js"))) die(`no npm at ${npm}`);
  return { node, headers, npm };
}

function stageNode({ node, headers, npm }) {
  say(`node ${process.version} from ${node}, npm from ${npm}`);
  copyTree(node, join(OUT, "node/bin/node"));
  rmSync(join(OUT, "node/include/node/openssl"), { recursive: true, force: true });
  copyTree(headers, join(OUT, "node/include/node"), (rel) => rel === "openssl" || rel.startsWith("openssl/"));
  copyTree(npm, join(OUT, "node/lib/node_modules/npm"));
  writeFileSync(join(OUT, "node/VERSION"), `${process.version}\n`);
}

/** registry.npmjs.org/<name>/-/<basename>-<version>.tgz: the registry's fixed tarball layout. */
function tarballUrl(name, version) {
  const base = name.startsWith("@") ? name.split("/")[1] : name;
  return `${REGISTRY}/${name}/-/${base}-${version}.tgz`;
}

/** Development dependencies the image's build runs (npm run build: tsc, the agent bundle's esbuild). */
const BUILD_TOOLS = (name) => name === "typescript" || name === "esbuild" || name.startsWith("@types/");

/**
 * The lockfile's packages reachable from the production dependencies and the build tools (npm's
 * resolution: a dependency is found in the nearest node_modules up the tree). The rest — test
 * runners, linters, browsers' drivers — would only make the build context larger.
 */
function pruneLock(lock, pkg) {
  const packages = lock.packages;
  const resolve = (from, name) => {
    let base = from;
    for (;;) {
      const cand = base ? `${base}/node_modules/${name}` : `node_modules/${name}`;
      if (packages[cand]) return cand;
      if (!base) return undefined;
      const i = base.lastIndexOf("/node_modules/");
      base = i < 0 ? "" : base.slice(0, i);
    }
  };
  const devKept = Object.fromEntries(
    Object.entries(pkg.devDependencies ?? {}).filter(([n]) => BUILD_TOOLS(n)),
  );
  const roots = { ...pkg.dependencies, ...pkg.optionalDependencies, ...devKept };
  const keep = new Set([""]);
  const queue = Object.keys(roots)
    .map((n) => resolve("", n))
    .filter(Boolean);
  while (queue.length) {
    const p = queue.pop();
    if (keep.has(p)) continue;
    keep.add(p);
    const e = packages[p];
    const deps = { ...e.dependencies, ...e.optionalDependencies, ...e.peerDependencies };
    for (const n of Object.keys(deps)) {
      const r = resolve(p, n);
      if (r && !keep.has(r)) queue.push(r);
    }
  }
  const outPkg = { ...pkg, devDependencies: devKept };
  const outLock = { ...lock, packages: {} };
  for (const [p, e] of Object.entries(packages)) if (keep.has(p)) outLock.packages[p] = e;
  outLock.packages[""] = { ...packages[""], devDependencies: devKept };
  return { pkg: outPkg, lock: outLock, dropped: Object.keys(packages).length - keep.size };
}

/**
 * The image's packages (the lockfile pruned to what the build needs), each with its tarball in this
 * host's npm cache, or missing; nothing is written.
 */
function planPackages() {
  const full = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8"));
  const pruned = pruneLock(full, JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")));
  const lock = pruned.lock;
  const cache = join(
    execFileSync("npm", ["config", "get", "cache"], { encoding: "utf8" }).trim(),
    "_cacache",
  );
  const found = [];
  const missing = [];
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (path === "" || entry.link || entry.inBundle || !entry.integrity) continue;
    const name = entry.name ?? path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);
    entry.resolved = tarballUrl(name, entry.version);
    const [algo, b64] = entry.integrity.split(/\s+/)[0].split("-");
    const hex = Buffer.from(b64, "base64").toString("hex");
    const rel = join("content-v2", algo, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
    if (existsSync(join(cache, rel))) found.push(rel);
    else
      missing.push({
        name,
        version: entry.version,
        optional: Boolean(entry.optional),
        os: entry.os,
        cpu: entry.cpu,
        libc: entry.libc,
      });
  }
  // Packages for other platforms are optional and never installed on linux-x64; anything else missing
  // means the host's cache is incomplete: `npm ci` on the host fills it.
  const forThisPlatform = (m) =>
    (!m.os || m.os.includes("linux")) &&
    (!m.cpu || m.cpu.includes("x64")) &&
    (!m.libc || m.libc.includes("glibc"));
  const needed = missing.filter((m) => !m.optional || forThisPlatform(m));
  if (needed.length) {
    // One short line: the count and a few names, not every package of the lockfile.
    const some = needed.slice(0, 3).map((m) => `${m.name}@${m.version}`);
    die(
      `${needed.length} of the image's ${found.length + needed.length} npm packages are not in this host's npm cache (${some.join(", ")}${needed.length > 3 ? ", …" : ""}): run \`npm ci\` in ${ROOT} first`,
    );
  }
  return { cache, found, skipped: missing.length, pruned };
}

function stagePackages({ cache, found, skipped, pruned }) {
  const dst = join(OUT, "npm-cache/_cacache");
  for (const rel of found) copyTree(join(cache, rel), join(dst, rel));
  writeFileSync(join(OUT, "package-lock.json"), `${JSON.stringify(pruned.lock, null, 2)}\n`);
  writeFileSync(join(OUT, "package.json"), `${JSON.stringify(pruned.pkg, null, 2)}\n`);
  say(
    `${found.length} package tarballs staged (${skipped} optional ones for other platforms skipped; ${pruned.dropped} test and lint packages left out)`,
  );
}

/** Everything checked first (Node, headers, npm, every tarball in the cache); then written. */
function stage() {
  const node = hostNode();
  const packages = planPackages();
  mkdirSync(OUT, { recursive: true });
  // Re-staged from scratch each time: a tarball the lockfile no longer names must not linger.
  rmSync(join(OUT, "npm-cache"), { recursive: true, force: true });
  stageNode(node);
  stagePackages(packages);
}

function build(args) {
  const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
  const tags = [];
  const labels = [];
  for (let k = 0; k < args.length; k++) {
    if (args[k] === "--tag") tags.push(args[++k]);
    else if (args[k] === "--label") labels.push(args[++k]);
    else die(`unknown argument ${args[k]}`);
  }
  if (tags.length === 0) tags.push(`${LOCAL_IMAGE}:${version}`, `${LOCAL_IMAGE}:latest`);
  const base = process.env.BASE_IMAGE ?? "debian:bookworm-slim";
  if (spawnSync("docker", ["image", "inspect", base], { stdio: "ignore" }).status !== 0)
    die(`base image ${base} is missing: run bash scripts/docker-up.sh (it imports it offline)`);
  const argv = ["build", "--pull=false", "-f", "docker/Dockerfile.validator", "--build-arg", `BASE=${base}`];
  for (const t of tags) argv.push("-t", t);
  for (const l of labels) argv.push("--label", l);
  argv.push(".");
  say(`docker ${argv.join(" ")}`);
  const r = spawnSync("docker", argv, { cwd: ROOT, stdio: "inherit" });
  if (r.status !== 0) die(`docker build failed (exit ${r.status})`);
  say(`built ${tags.join(", ")}`);
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === "stage") stage();
else if (cmd === "build") {
  stage();
  build(rest);
} else if (cmd === "clean") rmSync(OUT, { recursive: true, force: true });
else die("usage: node scripts/validator-image.mjs stage | build [--tag T] [--label k=v] | clean");
