/**
 * Bad input, packs: mutated packs through the path a challenger's pack takes — fetch (a real HTTP
 * server on loopback) → verify (the published hash) → validate. Every one must end as accepted or
 * as a rejection with upstream's code, and the verdict must be the one upstream's rules give (a
 * line-by-line transcription of github.py / miner_eval.py / extract_policy_files below); none may
 * throw anything but a ValidatorError with a code. An accepted pack's sidecar layout never leaves
 * /policy. Seeds: the real miner packs of the fixtures and the example packs. Seeded, so a failure replays.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ValidatorError } from "../../src/errors.js";
import { sha256Hex } from "../../src/hash.js";
import {
  isPyBlank,
  loadPack,
  MAX_FETCH_BYTES,
  MAX_POLICY_FILES_BYTES,
  type PackResult,
  PLATFORM_MAX_PACK_BYTES,
  type PyValue,
  packHashOf,
  parsePackBytes,
  policyTarEntries,
  pyJsonParse,
  SKILL_MD,
} from "../../src/pack/index.js";
import { obtainPack } from "../../src/platform/pack-fetch.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const SEED = Number(process.env.FUZZ_SEED ?? 20261202);
const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const HTTP_RUNS = Number(process.env.FUZZ_HTTP_RUNS ?? 400);

const REJECTION_CODES = new Set([
  "pack_verify_failed",
  "invalid_pack_structure",
  "missing_skill_md",
  "empty_skill_md",
]);

/**
 * Upstream's verdict, transcribed from its Python (Season 2): github.py `verify_submission` (64 KiB,
 * `resp.text`, `json.loads`, the hash), miner_eval.py `evaluate_miner_s1` (the order of the checks)
 * and policy/__init__.py `extract_policy_files`. Written apart from src/pack so the two can disagree.
 */
function upstreamVerdict(bytes: Buffer, hash: string | undefined): string {
  if (bytes.length > 64 * 1024) return "pack_verify_failed";
  let pack: PyValue;
  try {
    // httpx ≥ 0.25 `resp.text`: bytes.decode("utf-8", "replace"); the utf-8 codec keeps a BOM.
    pack = pyJsonParse(new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes));
  } catch {
    return "pack_verify_failed";
  }
  if (hash !== undefined && packHashOf(pack) !== hash) return "pack_verify_failed";
  if (!(pack instanceof Map)) return "invalid_pack_structure";
  const files = pack.get("files");
  if (!(files instanceof Map)) return "invalid_pack_structure";
  if (!files.has("SKILL.md")) return "missing_skill_md";
  const out: string[] = [];
  for (const [name, content] of files) {
    if (name === "SKILL.md" || typeof content !== "string") continue;
    if (name.startsWith("/") || name.split("/").includes("..")) return "invalid_pack_structure";
    out.push(content);
  }
  let total = 0;
  for (const c of out) {
    if (!c.isWellFormed()) return "invalid_pack_structure"; // str.encode raises UnicodeEncodeError
    total += Buffer.byteLength(c, "utf8");
  }
  if (total > 512 * 1024) return "invalid_pack_structure";
  const skill = files.get("SKILL.md");
  if (typeof skill !== "string" || isPyBlank(skill)) return "empty_skill_md";
  return "ok";
}
/** What fetchPack may throw (src/platform/pack-fetch.ts): every one a ValidatorError with a code. */
const FETCH_CODES = new Set([
  "pack_url_invalid",
  "pack_too_large",
  "pack_fetch_too_many_redirects",
  "pack_fetch_forbidden_redirect",
  "pack_fetch_failed",
  "pack_fetch_timeout",
  "pack_fetch_unreachable",
  "pack_fetch_bad_response",
]);

function seeds(): Buffer[] {
  const out: Buffer[] = [];
  for (const dir of ["test/fixtures/packs", "examples/packs"]) {
    for (const f of readdirSync(join(ROOT, dir)).filter((f) => f.endsWith(".json") && f !== "hashes.json"))
      out.push(readFileSync(join(ROOT, dir, f)));
  }
  return out;
}
const SEEDS = seeds();

// ---------------------------------------------------------------- mutations

const nastyName = fc.oneof(
  fc.constantFrom(
    "../escape.py",
    "a/../../b",
    "/etc/passwd",
    "./policy.py",
    "a//b",
    "a\\b",
    "nul\u0000.py",
    "policy.py\u0000x",
    "..\u0000",
    "\ud800.py",
    "\udcff",
    "a",
    "a/b",
    "sdk",
    "sdk/trajrl_policy.py",
    "POLICY.PY",
    "Policy.py",
    ".",
    "",
    "x".repeat(256),
    "policy.py",
    "policy.json",
    SKILL_MD,
    "dir/",
    "\u202epy.txt",
    "日本語.md",
  ),
  fc.string({ maxLength: 40 }),
);
const nastyText = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.constantFrom(
    "",
    "   \n\t",
    "\u0000",
    "\ud800",
    "x".repeat(PLATFORM_MAX_PACK_BYTES - 80),
    "é".repeat(20_000),
  ),
);
const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  nastyText,
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(null, true, 0, -1, 1.5, 1e308, [], {}, { "SKILL.md": "x" }),
);

type Doc = Record<string, unknown>;
type Mutation = (doc: Doc) => Doc | string;

const structural: fc.Arbitrary<Mutation> = fc.oneof(
  fc.tuple(nastyName, nastyText).map(([n, t]) => (d: Doc) => ({
    ...d,
    files: { ...(d.files as Doc), [n]: t },
  })),
  fc.tuple(nastyName, nastyValue).map(([n, v]) => (d: Doc) => ({
    ...d,
    files: { ...(d.files as Doc), [n]: v },
  })),
  nastyValue.map((v) => (d: Doc) => ({ ...d, files: { ...(d.files as Doc), [SKILL_MD]: v } })),
  fc.constant((d: Doc) => {
    const files = { ...(d.files as Doc) };
    delete files[SKILL_MD];
    return { ...d, files };
  }),
  // A name that only differs in case from one already there (upstream accepts both).
  fc.constant((d: Doc) => {
    const files = { ...(d.files as Doc) };
    for (const k of Object.keys(files)) if (k !== SKILL_MD) files[k.toUpperCase()] = "upper";
    return { ...d, files };
  }),
  nastyValue.map((v) => (d: Doc) => ({ ...d, schema_version: v })),
  nastyValue.map((v) => (d: Doc) => ({ ...d, files: v })),
  fc.tuple(fc.string({ maxLength: 12 }), nastyValue).map(([k, v]) => (d: Doc) => ({ ...d, [k]: v })),
  fc.constant((d: Doc) => {
    const out: Doc = { ...d };
    delete out.files;
    return out;
  }),
  fc.integer({ min: 1, max: 5000 }).map((depth) => (d: Doc) => {
    // Deep nesting as text: a parser that recurses must not blow the stack.
    return `{"schema_version": 1, "files": {"SKILL.md": "x", "deep": ${"[".repeat(depth)}${"]".repeat(depth)}}, "_": ${JSON.stringify(d.schema_version ?? 1)}}`;
  }),
  fc.constantFrom<Mutation>(
    // Duplicate keys (the last wins, as in Python), numbers JSON cannot hold, Python's extensions.
    (d) => JSON.stringify(d).replace(/^\{/, '{"files": {}, '),
    (d) => JSON.stringify(d).replace(/"schema_version": ?1/, '"schema_version": 1e400'),
    (d) => JSON.stringify(d).replace(/"schema_version": ?1/, '"schema_version": NaN'),
    (d) => JSON.stringify(d).replace(/"schema_version": ?1/, '"schema_version": -Infinity'),
    (d) => JSON.stringify(d).replace(/"schema_version": ?1/, '"schema_version": 1.0'),
    (d) => `${JSON.stringify(d)} trailing`,
    (d) => `\ufeff${JSON.stringify(d)}`,
    (d) => JSON.stringify(d, null, "\t"),
  ),
);

const bytewise = fc.oneof(
  fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([at, b]) => (buf: Buffer) => {
    const out = Buffer.from(buf);
    if (out.length > 0) out[at % out.length] = b;
    return out;
  }),
  fc.nat().map((at) => (buf: Buffer) => buf.subarray(0, at % (buf.length + 1))),
  fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 16 })).map(([at, ins]) => (buf: Buffer) => {
    const k = at % (buf.length + 1);
    return Buffer.concat([buf.subarray(0, k), Buffer.from(ins), buf.subarray(k)]);
  }),
  fc.constant((buf: Buffer) => Buffer.concat([buf, Buffer.alloc(MAX_FETCH_BYTES, 0x20)])),
  fc.constant((buf: Buffer) => Buffer.from(buf.toString("latin1"), "utf16le")),
);

interface Candidate {
  bytes: Buffer;
  /** The hash the platform published for it: the seed's, the mutant's own (when it parses), none, or junk. */
  hash: string | undefined;
}

const candidate: fc.Arbitrary<Candidate> = fc
  .record({
    seed: fc.nat({ max: SEEDS.length - 1 }),
    structural: fc.array(structural, { maxLength: 3 }),
    bytewise: fc.array(bytewise, { maxLength: 2 }),
    hashMode: fc.constantFrom("own", "own", "seed", "none", "junk"),
  })
  .map((r) => {
    const seed = SEEDS[r.seed]!;
    let bytes = seed;
    if (r.structural.length > 0) {
      let doc = JSON.parse(seed.toString("utf8")) as Doc;
      let text: string | undefined;
      for (const m of r.structural) {
        const out = m(doc);
        if (typeof out === "string") {
          text = out;
          break;
        }
        doc = out;
      }
      bytes = Buffer.from(text ?? JSON.stringify(doc), "utf8");
    }
    for (const m of r.bytewise) bytes = m(bytes);
    let hash: string | undefined;
    if (r.hashMode === "seed") hash = sha256Hex(seed);
    else if (r.hashMode === "junk") hash = "zz-not-a-hash";
    else if (r.hashMode === "own") {
      const parsed = parsePackBytes(bytes);
      hash = parsed.ok ? packHashOf(parsed.value) : sha256Hex(bytes);
    }
    return { bytes, hash };
  });

// ---------------------------------------------------------------- the property

interface Tally {
  accepted: number;
  rejected: Record<string, number>;
  crashes: number;
  /** Accepted packs with a non-text file skipped, over the platform's 32 KB, moved names, an unwritable sidecar. */
  skipped: number;
  overPlatformCap: number;
  moved: number;
  unwritable: number;
}
const newTally = (): Tally => ({
  accepted: 0,
  rejected: {},
  crashes: 0,
  skipped: 0,
  overPlatformCap: 0,
  moved: 0,
  unwritable: 0,
});

function checkResult(r: PackResult, c: Candidate, tally: Tally): void {
  expect(r.ok ? "ok" : r.rejection.code).toBe(upstreamVerdict(c.bytes, c.hash?.toLowerCase()));
  if (r.ok) {
    tally.accepted++;
    const p = r.pack;
    // An accepted pack is what the published hash says it is, and obeys upstream's rules.
    expect(c.bytes.length).toBeLessThanOrEqual(MAX_FETCH_BYTES);
    const parsed = parsePackBytes(c.bytes);
    expect(parsed.ok).toBe(true);
    if (parsed.ok) expect(packHashOf(parsed.value)).toBe(p.hash);
    if (c.hash !== undefined) expect(p.hash).toBe(c.hash.toLowerCase());
    expect(isPyBlank(p.skillMd)).toBe(false);
    let total = 0;
    for (const name of p.policyFileOrder) {
      expect(name.startsWith("/") || name.split("/").includes(".."), name).toBe(false);
      total += Buffer.byteLength(p.policyFiles[name]!, "utf8");
    }
    expect(total).toBeLessThanOrEqual(MAX_POLICY_FILES_BYTES);
    if (p.skippedFiles.length > 0) tally.skipped++;
    if (p.canonicalBytes > PLATFORM_MAX_PACK_BYTES) tally.overPlatformCap++;
    // The sidecar: either a layout inside /policy, or a policy fault (upstream's sidecar fails too).
    if (p.policyTree.ok) {
      if (p.policyTree.moved.length > 0) tally.moved++;
      for (const f of [...p.policyTree.files.map((f) => f.path), ...p.policyTree.dirs])
        for (const seg of f.split("/")) expect(["", ".", ".."], f).not.toContain(seg);
    } else {
      tally.unwritable++;
      expect(() => policyTarEntries(p)).toThrow(expect.objectContaining({ code: "policy_files_unwritable" }));
    }
  } else {
    expect(REJECTION_CODES.has(r.rejection.code), r.rejection.code).toBe(true);
    expect(r.rejection.message.length).toBeGreaterThan(0);
    tally.rejected[r.rejection.code] = (tally.rejected[r.rejection.code] ?? 0) + 1;
  }
}

function summary(n: number, t: Tally): string {
  const codes = Object.entries(t.rejected)
    .sort()
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const rejected = Object.values(t.rejected).reduce((a, b) => a + b, 0);
  return `${n} fuzzed packs (seed ${SEED}): ${t.accepted} accepted (${t.skipped} skipping a value, ${t.overPlatformCap} over 32 KB, ${t.moved} with moved names, ${t.unwritable} unwritable), ${rejected} rejected {${codes}}, ${t.crashes} crashes`;
}

describe("fuzzed packs: verify → validate", () => {
  it(`${RUNS} mutated packs are each accepted or rejected with a documented code; none throws`, () => {
    const tally = newTally();
    let n = 0;
    fc.assert(
      fc.property(candidate, (c) => {
        n++;
        let r: PackResult;
        try {
          r = loadPack(c.bytes, c.hash);
        } catch (err) {
          tally.crashes++;
          throw err;
        }
        checkResult(r, c, tally);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    console.log(summary(n, tally));
    expect(tally.crashes).toBe(0);
    // The generator must reach every rejection path and some acceptances, or it proves little.
    expect(tally.accepted).toBeGreaterThan(RUNS / 50);
    for (const code of REJECTION_CODES) expect(tally.rejected[code] ?? 0, code).toBeGreaterThan(0);
    for (const k of ["skipped", "overPlatformCap", "moved", "unwritable"] as const)
      expect(tally[k], k).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------- through HTTP

type Serve =
  | { kind: "ok" }
  | { kind: "status"; status: number }
  | { kind: "redirects"; hops: number }
  | { kind: "lie_length"; delta: number }
  | { kind: "slow" }
  | { kind: "endless" };

describe("fuzzed packs: fetch → verify → validate over HTTP", () => {
  let server: Server;
  let base = "";
  const routes = new Map<string, { bytes: Buffer; serve: Serve }>();

  beforeAll(async () => {
    server = createServer((req, res) => {
      const [path, hop] = (req.url ?? "/").split("?hop=");
      const route = routes.get(path ?? "");
      if (!route) {
        res.writeHead(404).end();
        return;
      }
      const { bytes, serve } = route;
      const h = Number(hop ?? 0);
      switch (serve.kind) {
        case "status":
          res.writeHead(serve.status, { "content-type": "text/html" }).end("<html>error</html>");
          return;
        case "redirects":
          if (h < serve.hops) {
            res.writeHead(302, { location: `${path}?hop=${h + 1}` }).end();
            return;
          }
          res.writeHead(200).end(bytes);
          return;
        case "lie_length":
          // Declare a length the body does not have: undici must fail or truncate, never hang.
          res.writeHead(200, { "content-length": String(Math.max(0, bytes.length + serve.delta)) });
          res.end(serve.delta < 0 ? bytes.subarray(0, Math.max(0, bytes.length + serve.delta)) : bytes);
          if (serve.delta > 0) res.socket?.destroy();
          return;
        case "slow": {
          res.writeHead(200);
          res.write(bytes.subarray(0, 10));
          const t = setTimeout(() => res.end(bytes.subarray(10)), 2_000);
          res.on("close", () => clearTimeout(t));
          return;
        }
        case "endless": {
          res.writeHead(200);
          const chunk = Buffer.alloc(16 * 1024, 0x20);
          const pump = () => {
            while (res.write(chunk)) {
              if (res.destroyed) return;
            }
          };
          res.on("drain", pump);
          pump();
          return;
        }
        default:
          res.writeHead(200, { "content-type": "application/json" }).end(bytes);
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const serve: fc.Arbitrary<Serve> = fc.oneof(
    { weight: 6, arbitrary: fc.constant<Serve>({ kind: "ok" }) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(404, 500, 503, 429, 204, 301)
        .map((status) => ({ kind: "status" as const, status })),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 1, max: 25 }).map((hops) => ({ kind: "redirects" as const, hops })),
    },
    { weight: 1, arbitrary: fc.constantFrom(-5, 7).map((delta) => ({ kind: "lie_length" as const, delta })) },
    { weight: 1, arbitrary: fc.constantFrom<Serve>({ kind: "slow" }, { kind: "endless" }) },
  );

  it(`${HTTP_RUNS} mutated packs served badly: a verdict or a coded fetch error, never a crash`, async () => {
    const tally = newTally();
    const fetchErrors: Record<string, number> = {};
    let n = 0;
    await fc.assert(
      fc.asyncProperty(candidate, serve, async (c, s) => {
        n++;
        const path = `/p${n}`;
        routes.set(path, { bytes: c.bytes, serve: s });
        try {
          // The host is on loopback: its redirects are followed only with the tests' explicit allow.
          const got = await obtainPack(`${base}${path}`, c.hash ?? sha256Hex(c.bytes), {
            timeoutMs: 500,
            allowPrivateRedirects: true,
          });
          checkResult(
            got.result,
            { bytes: Buffer.from(got.bytes), hash: c.hash ?? sha256Hex(c.bytes) },
            tally,
          );
          // What arrived is what was served: a lying server cannot get a different pack verified.
          if (got.result.ok) expect(Buffer.from(got.bytes).equals(c.bytes)).toBe(true);
        } catch (err) {
          if (!(err instanceof ValidatorError)) {
            tally.crashes++;
            throw err;
          }
          expect(FETCH_CODES.has(err.code), err.code).toBe(true);
          fetchErrors[err.code] = (fetchErrors[err.code] ?? 0) + 1;
        } finally {
          routes.delete(path);
        }
      }),
      { seed: SEED, numRuns: HTTP_RUNS },
    );
    console.log(`${summary(n, tally)}; fetch errors ${JSON.stringify(fetchErrors)}`);
    expect(tally.crashes).toBe(0);
    expect(tally.accepted).toBeGreaterThan(0);
    expect(Object.keys(fetchErrors).length).toBeGreaterThanOrEqual(3);
  }, 300_000);
});
