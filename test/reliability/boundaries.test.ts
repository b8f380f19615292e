/**
 * Bad input at the edges: what the platform answers is parsed with zod once, at the boundary. A
 * mutated response is either parsed into a value that keeps the types' promises (every number
 * finite, ids integers) or refused with `platform_malformed_response` and a logged reason — never a
 * crash, never a NaN that reaches consensus or the weights. Served by the fake platform over real
 * HTTP to the real client.
 */
import { Writable } from "node:stream";
import { Keyring } from "@polkadot/keyring";
import { cryptoWaitReady } from "@polkadot/util-crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolkadotChainClient } from "../../src/chain/index.js";
import { ValidatorError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import { PlatformClient, type Signer, signerFromPair } from "../../src/platform/index.js";
import { FakePlatform } from "../fakes/platform.js";
import { FakeSubtensorNode, randomAccount } from "../fakes/subtensor-node.js";
import { EPOCH_HIDDEN, WINNER_CURRENT } from "../fixtures/platform-api.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261202);
const RUNS = Number(process.env.FUZZ_BOUNDARY_RUNS ?? 300);

let fake: FakePlatform;
let signer: Signer;
const lines: string[] = [];

beforeAll(async () => {
  await cryptoWaitReady();
  signer = signerFromPair(new Keyring({ type: "sr25519" }).addFromUri("//BoundaryFuzz"));
  fake = await FakePlatform.start({ validators: [signer.ss58] });
});
afterAll(async () => {
  await fake.close();
});

function client(): PlatformClient {
  const log = createLogger({
    level: "warn",
    destination: new Writable({
      write(c, _e, cb) {
        lines.push(String(c));
        cb();
      },
    }),
  });
  return new PlatformClient({ baseUrl: fake.url, signer, version: "0.1.0-test", log });
}

// ---------------------------------------------------------------- mutations of a JSON document

type Path = (string | number)[];

function paths(v: unknown, at: Path = []): Path[] {
  const out: Path[] = [at];
  if (Array.isArray(v)) for (const [k, x] of v.entries()) out.push(...paths(x, [...at, k]));
  else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...at, k]));
  return out;
}

function setAt(doc: unknown, path: Path, value: unknown, remove: boolean): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(doc) as Record<string | number, unknown>;
  let cur = copy;
  for (const k of path.slice(0, -1)) cur = cur[k] as Record<string | number, unknown>;
  const last = path.at(-1)!;
  if (remove) delete cur[last];
  else cur[last] = value;
  return copy;
}

/** Values a buggy or hostile server could put anywhere; "__BIG__"/"__NAN__" become raw JSON text. */
const badValue = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    "",
    "NaN",
    "Infinity",
    "-1",
    "1e400",
    -1,
    -0.5,
    2 ** 53 + 1,
    1e308,
    true,
    [],
    {},
    "__BIG__",
    "__NEG_BIG__",
    "<html>",
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

interface Mutant {
  body: string;
  status: number;
}

function mutants(seed: unknown): fc.Arbitrary<Mutant> {
  const all = paths(seed);
  const structural = fc
    .array(fc.tuple(fc.constantFrom(...all), badValue, fc.boolean()), { minLength: 1, maxLength: 3 })
    .map((edits) => {
      let doc: unknown = seed;
      for (const [path, value, remove] of edits) {
        try {
          doc = setAt(doc, path, value, remove && path.length > 0);
        } catch {
          // a path removed by an earlier edit: skip
        }
      }
      const text = JSON.stringify(doc).replaceAll('"__BIG__"', "1e400").replaceAll('"__NEG_BIG__"', "-1e400");
      return { body: text, status: 200 };
    });
  const raw = fc.constantFrom<Mutant>(
    { body: "<html><body>502 Bad Gateway</body></html>", status: 200 },
    { body: "", status: 200 },
    { body: "null", status: 200 },
    { body: "[]", status: 200 },
    { body: JSON.stringify(seed).slice(0, 40), status: 200 },
    { body: `${JSON.stringify(seed)}garbage`, status: 200 },
    { body: JSON.stringify(seed).replace(/\d+/, "NaN"), status: 200 },
  );
  return fc.oneof({ weight: 9, arbitrary: structural }, { weight: 1, arbitrary: raw });
}

/** Every number in a parsed value is finite: no NaN/Infinity crosses the boundary. */
function assertFinite(v: unknown, where = "$"): void {
  if (typeof v === "number") expect(Number.isFinite(v), where).toBe(true);
  else if (Array.isArray(v)) for (const [k, x] of v.entries()) assertFinite(x, `${where}[${k}]`);
  else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) assertFinite(x, `${where}.${k}`);
}

function isUidLike(n: unknown): boolean {
  return n === null || n === undefined || (Number.isInteger(n) && (n as number) >= 0);
}

describe("platform responses at the zod boundary", () => {
  it.each([
    ["winner.current", WINNER_CURRENT],
    ["epoch.current", EPOCH_HIDDEN],
  ] as const)(
    `${RUNS} mutated %s responses: parsed with the types' promises kept, or refused with a logged reason`,
    async (route, seed) => {
      const c = client();
      let parsed = 0;
      let refused = 0;
      await fc.assert(
        fc.asyncProperty(mutants(seed), async (m) => {
          fake.inject(route, { kind: "malformed", body: m.body, status: m.status });
          lines.length = 0;
          try {
            const r = route === "winner.current" ? await c.getWinnerCurrent() : await c.getEpochCurrent();
            parsed++;
            assertFinite(r);
            if (r && "submissions" in r) {
              expect(isUidLike(r.winner?.uid)).toBe(true);
              for (const s of r.submissions) {
                expect(typeof s.validator_hotkey).toBe("string");
                if (s.validator_stake !== undefined && s.validator_stake !== null)
                  expect(s.validator_stake).toBeGreaterThanOrEqual(0);
              }
            }
            if (r && "epoch" in r && r.epoch) {
              expect(Number.isInteger(r.epoch.challenge_epoch_id)).toBe(true);
              expect(isUidLike(r.winner?.uid)).toBe(true);
            }
          } catch (err) {
            expect(err).toBeInstanceOf(ValidatorError);
            expect((err as ValidatorError).code).toBe("platform_malformed_response");
            // The operator sees why, on one log line naming the endpoint.
            const logged = lines.map(
              (l) => JSON.parse(l) as { msg: string; reason?: string; endpoint?: string },
            );
            const line = logged.find((l) => l.msg === "platform.malformed_response");
            expect(line?.reason, m.body.slice(0, 200)).toBeTruthy();
            expect(line?.endpoint).toBeTruthy();
            refused++;
          }
        }),
        { seed: SEED, numRuns: RUNS },
      );
      console.log(
        `${route}: ${RUNS} mutated responses, ${parsed} parsed (all finite), ${refused} refused with a logged reason, 0 crashes`,
      );
      expect(parsed + refused).toBe(RUNS);
      expect(refused).toBeGreaterThan(0);
    },
    120_000,
  );
});

// ---------------------------------------------------------------- chain data

describe("chain data at the boundary", () => {
  let node: FakeSubtensorNode;
  let chain: PolkadotChainClient;
  const hotkeys = [randomAccount(), randomAccount(), randomAccount(), randomAccount()];

  beforeAll(async () => {
    node = await FakeSubtensorNode.start({
      fixture: "testnet-spec224",
      startBlock: 5_000,
      subnets: [
        {
          netuid: 11,
          ownerColdkey: randomAccount(),
          ownerHotkey: hotkeys[0],
          neurons: hotkeys.map((hotkey, k) => ({
            hotkey,
            stakeRao: BigInt(k + 1) * 1_000_000_000n,
            lastUpdate: 4_000,
          })),
        },
      ],
    });
    chain = new PolkadotChainClient({
      endpoint: node.url,
      network: "test",
      reconnectDelayMs: 150,
      connectTimeoutMs: 15_000,
      log: createLogger({
        level: "warn",
        destination: new Writable({
          write(c, _e, cb) {
            lines.push(String(c));
            cb();
          },
        }),
      }),
    });
    await chain.connect();
  }, 60_000);
  afterAll(async () => {
    await chain?.disconnect();
    await node?.stop();
  });

  const SM = "SubtensorModule";
  async function snapshotWith(item: string, keys: unknown[], hex: string | null): Promise<unknown> {
    node.corruptStorage(SM, item, keys, hex);
    node.produceBlock();
    lines.length = 0;
    try {
      return await chain.snapshot(11);
    } finally {
      node.corruptStorage(SM, item, keys, undefined);
      node.produceBlock();
    }
  }
  const loggedReason = () =>
    lines.map((l) => JSON.parse(l) as { msg: string }).find((l) => l.msg === "chain.malformed_snapshot");

  it("the untouched subnet reads as it is", async () => {
    const snap = await chain.snapshot(11);
    expect(snap.neurons.map((n) => n.hotkey)).toEqual(hotkeys);
  });

  type Case = [string, string, number[] | [number, number], () => string | null];
  it.each<Case>([
    ["a uid without a hotkey (Keys entry missing)", "Keys", [11, 2], () => null],
    ["two uids with one hotkey", "Keys", [11, 3], () => node.runtime.storageValue(SM, "Keys", hotkeys[1])],
    [
      "SubnetworkN larger than the subnet",
      "SubnetworkN",
      [11],
      () => node.runtime.storageValue(SM, "SubnetworkN", 9),
    ],
    [
      "LastUpdate in the future",
      "LastUpdate",
      [11],
      () => node.runtime.storageValue(SM, "LastUpdate", [1, 2, 3, 9_999_999]),
    ],
    [
      "LastUpdate longer than the subnet",
      "LastUpdate",
      [11],
      () => node.runtime.storageValue(SM, "LastUpdate", [1, 2, 3, 4, 5, 6]),
    ],
    ["ValidatorPermit bytes that do not decode", "ValidatorPermit", [11], () => "0xffffffff02"],
  ])("%s: refused as chain_data_malformed with a logged reason", async (_name, item, keys, hex) => {
    await expect(snapshotWith(item, [...keys], hex())).rejects.toMatchObject({
      code: "chain_data_malformed",
    });
    expect(loggedReason()).toBeDefined();
  });

  it("random bytes in the subnet's storage: a consistent snapshot or a coded refusal, never a raw error", async () => {
    const items: Array<[string, unknown[]]> = [
      ["SubnetworkN", [11]],
      ["ValidatorPermit", [11]],
      ["LastUpdate", [11]],
      ["Keys", [11, 1]],
      ["Tempo", [11]],
      ["WeightsVersionKey", [11]],
      ["TotalHotkeyAlpha", [hotkeys[2], 11]],
    ];
    let ok = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: items.length - 1 }),
        fc.uint8Array({ maxLength: 40 }),
        async (k, bytes) => {
          const [item, keys] = items[k]!;
          try {
            await snapshotWith(item, keys, `0x${Buffer.from(bytes).toString("hex")}`);
            ok++;
          } catch (err) {
            expect(err, String(err)).toBeInstanceOf(ValidatorError);
            refused++;
          }
        },
      ),
      { seed: SEED, numRuns: 60 },
    );
    console.log(
      `chain storage: 60 corrupted reads, ${ok} consistent, ${refused} refused with a code, 0 raw errors`,
    );
    expect(refused).toBeGreaterThan(0);
  }, 120_000);
});
