/** src/log.ts: secrets are censored at any depth, in lines and in child bindings, without touching the caller's objects. */
import { describe, expect, it } from "vitest";
import { PolicyError } from "../../src/errors.js";
import { createLogger, isSecretKey, redactDeep, safeUrl } from "../../src/log.js";

function capture() {
  const lines: string[] = [];
  const log = createLogger({ level: "debug", destination: { write: (l: string) => void lines.push(l) } });
  return { log, lines, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const SECRETS = [
  "sk-live-123",
  "tok-ep-456",
  "Zm9vOmJhcg",
  "abc.def.ghi",
  "https://h/p.json?X-Amz-Signature=s3cr3t",
  "0xsig",
];

describe("log redaction reaches any depth", () => {
  it("keys naming secrets, nested five levels, in arrays and maps, under any spelling", () => {
    const { log, lines, parsed } = capture();
    const deep = {
      config: { llm: { apiKey: "sk-live-123", baseUrl: "https://api.example/v1" } },
      a: { b: { c: { d: { e: { episode_token: "tok-ep-456" } } } } },
      headers: { Authorization: "Basic Zm9vOmJhcg", "X-Api-Key": "sk-live-123" },
      episodes: [
        { id: "e1", token: "tok-ep-456" },
        { id: "e2", meta: { upstreamApiKey: "sk-live-123" } },
      ],
      epoch: {
        challenger_pack_url: "https://h/p.json?X-Amz-Signature=s3cr3t",
        pack: { packUrl: "https://h/p.json?X-Amz-Signature=s3cr3t" },
      },
      signed: { signature: "0xsig" },
      map: new Map<string, unknown>([
        ["password", "tok-ep-456"],
        ["ok", 1],
      ]),
    };
    log.info(deep, "event");
    const raw = lines.join("");
    for (const s of SECRETS) expect(raw, s).not.toContain(s);
    const line = parsed()[0]!;
    expect(line).toMatchObject({
      config: { llm: { apiKey: "[redacted]", baseUrl: "https://api.example/v1" } },
      a: { b: { c: { d: { e: { episode_token: "[redacted]" } } } } },
      episodes: [
        { id: "e1", token: "[redacted]" },
        { id: "e2", meta: { upstreamApiKey: "[redacted]" } },
      ],
      map: { password: "[redacted]", ok: 1 },
    });
  });

  it("a credential inside a string: Bearer and Basic schemes are cut out", () => {
    const { log, lines } = capture();
    log.warn({ detail: { note: "upstream said: invalid Authorization Bearer abc.def.ghi for key" } }, "e");
    expect(lines[0]).not.toContain("abc.def.ghi");
    expect(lines[0]).toContain("Bearer [redacted]");
  });

  it("child bindings and errors' own fields are censored too", () => {
    const { log, lines } = capture();
    const child = log.child({ episode: "e1", ctx: { deeper: { token: "tok-ep-456" } } });
    child.error(
      {
        err: new PolicyError("policy_crashed", "failed", {
          detail: { request: { headers: { authorization: "Bearer abc.def.ghi" } } },
        }),
      },
      "boom",
    );
    const raw = lines.join("");
    expect(raw).not.toContain("tok-ep-456");
    expect(raw).not.toContain("abc.def.ghi");
    expect(raw).toContain('"episode":"e1"');
    expect(raw).toContain("failed");
  });

  it("counts and other harmless keys pass; the caller's object is not changed; cycles do not hang", () => {
    const { log, parsed } = capture();
    const usage = { tokens: { prompt: 5, completion: 7 }, max_tokens: 100, tokenizer: "x", key: "k1" };
    const cyclic: Record<string, unknown> = { name: "c", apiKey: "sk-live-123" };
    cyclic.self = cyclic;
    log.info({ usage, cyclic }, "e");
    const line = parsed()[0]!;
    expect(line.usage).toEqual(usage);
    expect(line.cyclic).toEqual({ name: "c", apiKey: "[redacted]", self: "[Circular]" });
    expect(cyclic.apiKey).toBe("sk-live-123");
  });

  it("which keys are secret", () => {
    for (const k of [
      "apiKey",
      "API_KEY",
      "llm_api_key",
      "accessToken",
      "refresh-token",
      "pack_url",
      "PackURL",
      "secretSeed",
      "mnemonic",
      "Set-Cookie",
    ])
      expect(isSecretKey(k), k).toBe(true);
    for (const k of [
      "tokens",
      "max_tokens",
      "tokenizer",
      "packHash",
      "pack",
      "url",
      "key",
      "version_key",
      "spentUsd",
    ])
      expect(isSecretKey(k), k).toBe(false);
    expect(redactDeep("plain")).toBe("plain");
    expect(safeUrl("https://u:p@h/x?sig=1")).toBe("https://h/x?[redacted]");
  });
});

describe("a key bound again by a child is written once", () => {
  it("the innermost value wins; the rest of the chain, the level and the redaction stay", async () => {
    const { log, lines } = capture();
    const { duplicateKeys } = await import("../helpers/json-lines.js");
    const pool = log.child({ component: "pool", engine: "local" });
    pool.level = "info";
    const sandbox = pool.child({ component: "sandbox", token: "tok-ep-456" });
    const episode = sandbox.child({ pack: "ab12", episode: "e1" }).child({ pack: "ab12", scenario: "s" });
    sandbox.debug("dropped: the parent's level");
    sandbox.info({ n: 1 }, "sandbox.line");
    episode.info("episode.line");
    expect(lines).toHaveLength(2);
    for (const l of lines) expect(duplicateKeys(l)).toEqual([]);
    const [a, b] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(a).toMatchObject({
      svc: "trajrl-validator",
      component: "sandbox",
      engine: "local",
      token: "[redacted]",
      n: 1,
    });
    expect(b).toMatchObject({
      component: "sandbox",
      engine: "local",
      pack: "ab12",
      episode: "e1",
      scenario: "s",
    });
    expect(lines.join("")).not.toContain("tok-ep-456");
  });
});
