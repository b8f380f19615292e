/**
 * The engine pool's pure parts: ENGINES, placement, probe back-off, the relay's frames, the remote
 * engine's firewall rules, engine URLs and API versions, and what an engine's loss makes of an episode.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { loadConfig, parseEngineList } from "../../src/config.js";
import type { EpisodeResult } from "../../src/episode/index.js";
import {
  engineLost,
  pickEngine,
  probeDelayMs,
  readDrained,
  setDrained,
  totalSlots,
  unlessStuckAfterLoss,
} from "../../src/pool/index.js";
import {
  apiAtLeast,
  chainRules,
  DockerStreamDemux,
  encodeFrame,
  engineFirewallScript,
  FRAME,
  FrameDecoder,
  parseEngineUrl,
  verifyEngineFirewall,
} from "../../src/sandbox/index.js";

describe("ENGINES", () => {
  it("parses entries separated by ; or new lines, with defaults for the local engine", () => {
    const r = parseEngineList(
      "url=local slots=2; name=b url=tcp://10.0.0.2:2376 slots=4 tls=/etc/e/b\nname=c url=ssh://u@h:2222 slots=1 ssh_key=/k",
    );
    expect(r.problems).toEqual([]);
    expect(r.engines).toEqual([
      { name: "local", url: "local", slots: 2 },
      { name: "b", url: "tcp://10.0.0.2:2376", slots: 4, tlsDir: "/etc/e/b" },
      { name: "c", url: "ssh://u@h:2222", slots: 1, sshKey: "/k" },
    ]);
  });

  it("names every problem of every entry", () => {
    const r = parseEngineList(
      "name=B url=tcp://x:1 slots=99; url=foo://x; name=b url=local slots=1 bogus; name=b url=local slots=1",
    );
    expect(r.problems.join("\n")).toMatchInlineSnapshot(`
      "engine 1 (name=B url=tcp://x:1 slots=99): name=B must be lowercase letters, digits, - or _ (at most 31)
      engine 1 (name=B url=tcp://x:1 slots=99): slots= must be a whole number 0..64 (episodes at once on it)
      engine 1 (name=B url=tcp://x:1 slots=99): a tcp:// engine needs tls=DIR (ca.pem, cert.pem, key.pem): the plain Docker API is root on that host for anyone who reaches it
      engine 2 (url=foo://x): needs name=
      engine 2 (url=foo://x): url=foo://x is not local, unix:///path, tcp://host:port or ssh://[user@]host[:port]
      engine 2 (url=foo://x): slots= must be a whole number 0..64 (episodes at once on it)
      engine 3 (name=b url=local slots=1 bogus): \`bogus\` is not one of name=, url=, slots=, tls=, ssh_key=
      engine 4 (name=b url=local slots=1): name=b is listed twice"
    `);
    expect(parseEngineList("name=a url=local slots=0").problems).toEqual([
      "every engine has slots=0: no episode could run",
    ]);
  });

  it("in the configuration: one message with every bad variable; unset is this host's engine alone", () => {
    expect(() => loadConfig({ ENGINES: "name=b url=tcp://x:2 slots=1; name=c", NETWORK: "x" })).toThrow(
      /NETWORK.*ENGINES: engine 1 .*tls=DIR.*ENGINES: engine 2 .*needs url=/,
    );
    const d = loadConfig({ DOCKER_SOCKET: "/run/d.sock" }).evaluation.engines;
    expect(d.explicit).toBe(false);
    expect(d.list).toEqual([{ name: "local", url: "unix:///run/d.sock", slots: undefined }]);
    const e = loadConfig({ ENGINES: "url=local slots=2; name=b url=tcp://h:2376 slots=3 tls=/t" }).evaluation
      .engines;
    expect(e.explicit).toBe(true);
    expect(e.list.map((x) => [x.name, x.url, x.slots])).toEqual([
      ["local", "unix:///var/run/docker.sock", 2],
      ["b", "tcp://h:2376", 3],
    ]);
  });
});

describe("placement", () => {
  const c = (name: string, free: number, placeable = true) => ({ name, free, placeable });

  it("takes the engine with the most free slots (the longest episodes spread), list order on ties", () => {
    expect(pickEngine([c("a", 1), c("b", 2)], new Set())).toBe("b");
    expect(pickEngine([c("a", 2), c("b", 2)], new Set())).toBe("a");
    expect(pickEngine([c("a", Number.POSITIVE_INFINITY)], new Set())).toBe("a");
  });

  it("never an engine that is down, drained, without images or full", () => {
    expect(pickEngine([c("a", 3, false), c("b", 0)], new Set())).toBeUndefined();
    expect(pickEngine([c("a", 3, false), c("b", 1)], new Set())).toBe("b");
  });

  it("a re-run avoids the engines its scenario failed on while another has a slot", () => {
    expect(pickEngine([c("a", 3), c("b", 1)], new Set(["a"]))).toBe("b");
    expect(pickEngine([c("a", 3), c("b", 0)], new Set(["a"]))).toBe("a");
  });

  it("dispatch over many engines fills every free slot before any waits (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 6 }), (slots) => {
        const free = [...slots];
        let placed = 0;
        for (;;) {
          const name = pickEngine(
            free.map((f, i) => c(String(i), f)),
            new Set(),
          );
          if (name === undefined) break;
          free[Number(name)]!--;
          placed++;
        }
        expect(placed).toBe(slots.reduce((a, b) => a + b, 0));
      }),
    );
  });

  it("slots add up; an engine bounded by the evaluation alone leaves the total open", () => {
    expect(totalSlots([2, 3])).toBe(5);
    expect(totalSlots([2, undefined])).toBeUndefined();
  });

  it("a down engine is probed after 2 s, doubling to 30 s", () => {
    expect([0, 1, 2, 3, 4, 9].map((n) => probeDelayMs(n))).toEqual([2000, 4000, 8000, 16000, 30000, 30000]);
  });

  it("drain flags round-trip through the key-value store", () => {
    const m = new Map<string, unknown>();
    const kv = { get: <T>(k: string) => m.get(k) as T, set: (k: string, v: unknown) => void m.set(k, v) };
    setDrained(kv, "b", true);
    setDrained(kv, "c", true);
    setDrained(kv, "c", false);
    expect(Object.keys(readDrained(kv))).toEqual(["b"]);
    m.set("engines.drained", "garbage");
    expect(readDrained(kv)).toEqual({});
  });

  it("an engine lost mid-episode makes the attempt infra (re-run), whatever it had reached", () => {
    const r = { status: "scored", quality: 1, failure: null, notes: [] } as unknown as EpisodeResult;
    const lost = engineLost(r, "b", new Error("engine b went away: no answer"));
    expect(lost.status).toBe("failed");
    expect(lost.quality).toBe(0);
    expect(lost.failure).toMatchObject({ class: "infra", code: "engine_lost" });
    expect(lost.failure!.message).toContain("engine b went away");
  });

  it("an episode still running a grace period after its engine's loss is given up as engine_lost", async () => {
    const never = new Promise<string>(() => {});
    const later = (ms: number, v: string) => new Promise<string>((r) => setTimeout(() => r(v), ms));
    let told = 0;
    const tell = () => told++;
    // Not lost: the episode's own end, however late, is the answer.
    expect(await unlessStuckAfterLoss(later(60, "done"), new AbortController().signal, 10, tell)).toBe(
      "done",
    );
    // Lost, but the episode ends within the grace period: its own result.
    const a = new AbortController();
    const p = unlessStuckAfterLoss(later(30, "ended"), a.signal, 200, tell);
    a.abort();
    expect(await p).toBe("ended");
    expect(told).toBe(0);
    // Lost (before or after it started), and it never ends: given up once, as infra.
    for (const lostFirst of [true, false]) {
      const c = new AbortController();
      if (lostFirst) c.abort();
      const q = unlessStuckAfterLoss(never, c.signal, 20, tell);
      c.abort();
      const err = await q.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: "engine_lost", failureClass: "infra" });
      expect((err as Error).message).toMatch(/did not end within 0 s of its engine's loss/);
    }
    expect(told).toBe(2);
    // An episode's own failure passes through untouched.
    const boom = new Error("boom");
    await expect(
      unlessStuckAfterLoss(Promise.reject(boom), new AbortController().signal, 10, tell),
    ).rejects.toBe(boom);
  });
});

describe("relay frames", () => {
  it("decode what was encoded, however the bytes are cut (property)", () => {
    const frame = fc.record({
      id: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
      type: fc.constantFrom(...Object.values(FRAME)),
      payload: fc.uint8Array({ maxLength: 300 }),
    });
    fc.assert(
      fc.property(
        fc.array(frame, { maxLength: 20 }),
        fc.array(fc.integer({ min: 1, max: 50 })),
        (frames, cuts) => {
          const bytes = Buffer.concat(frames.map((f) => encodeFrame(f.id, f.type, Buffer.from(f.payload))));
          const d = new FrameDecoder();
          const out: Array<{ id: number; type: number; payload: number[] }> = [];
          let at = 0;
          for (let k = 0; at < bytes.length; k++) {
            const n = cuts.length ? cuts[k % cuts.length]! : bytes.length;
            for (const f of d.push(bytes.subarray(at, at + n)))
              out.push({ id: f.id, type: f.type, payload: [...f.payload] });
            at += n;
          }
          expect(out).toEqual(frames.map((f) => ({ id: f.id, type: f.type, payload: [...f.payload] })));
        },
      ),
    );
  });

  it("refuse a frame larger than the relay ever sends", () => {
    const head = Buffer.alloc(9);
    head.writeUInt32BE(2 ** 21, 5);
    expect(() => new FrameDecoder().push(head)).toThrow(/relay frame/);
  });

  it("Docker's attach stream is split into stdout and stderr, across chunk boundaries", () => {
    const part = (kind: number, text: string) => {
      const h = Buffer.alloc(8);
      h[0] = kind;
      h.writeUInt32BE(Buffer.byteLength(text), 4);
      return Buffer.concat([h, Buffer.from(text)]);
    };
    const all = Buffer.concat([part(1, "frames"), part(2, "oops"), part(1, "more")]);
    const d = new DockerStreamDemux();
    const got = [...d.push(all.subarray(0, 5)), ...d.push(all.subarray(5, 17)), ...d.push(all.subarray(17))];
    expect(got.map((g) => [g.stream, g.data.toString()])).toEqual([
      ["stdout", "frames"],
      ["stderr", "oops"],
      ["stdout", "more"],
    ]);
  });
});

describe("a remote engine's firewall", () => {
  it("closes the meter port too: nothing of ours listens on that host", () => {
    expect(chainRules(4, null)).toEqual([
      "-A TRAJRL-EPISODE -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
      "-A TRAJRL-EPISODE -i tja+ -j DROP",
      "-A TRAJRL-EPISODE -j DROP",
    ]);
    expect(engineFirewallScript()).toContain("iptables-restore -w 10 --noflush");
    expect(engineFirewallScript()).not.toContain("--dport");
  });

  it("is verified from what the helper printed, rule by rule", () => {
    const good = [
      "#chain",
      "-N TRAJRL-EPISODE",
      ...chainRules(4, null),
      "#grader",
      "-N TRAJRL-GRADER",
      "-A TRAJRL-GRADER -j DROP",
      "#input",
      "-P INPUT ACCEPT",
      "-A INPUT -i tjv+ -j TRAJRL-GRADER",
      "-A INPUT -i tjm+ -j TRAJRL-EPISODE",
      "-A INPUT -i tja+ -j TRAJRL-EPISODE",
    ].join("\n");
    expect(verifyEngineFirewall(good)).toEqual([]);
    expect(verifyEngineFirewall(good.replace("-A INPUT -i tja+ -j TRAJRL-EPISODE", ""))).toEqual([
      "INPUT lacks `-i tja+ -j TRAJRL-EPISODE`",
    ]);
    expect(
      verifyEngineFirewall(good.replace("-A TRAJRL-EPISODE -j DROP", "-A TRAJRL-EPISODE -j ACCEPT"))[0],
    ).toMatch(/chain TRAJRL-EPISODE is/);
    expect(verifyEngineFirewall(good.replace("-A TRAJRL-GRADER -j DROP", ""))).toEqual([
      "chain TRAJRL-GRADER is empty",
    ]);
    expect(verifyEngineFirewall(good.replace("-A INPUT -i tjv+ -j TRAJRL-GRADER", ""))).toEqual([
      "INPUT lacks `-i tjv+ -j TRAJRL-GRADER`",
    ]);
    expect(verifyEngineFirewall("")).toEqual(["the firewall helper printed no rules"]);
  });
});

describe("engines", () => {
  it("URLs: unix, tcp and ssh; anything else says what is expected", () => {
    expect(parseEngineUrl("unix:///var/run/docker.sock")).toEqual({
      kind: "unix",
      socketPath: "/var/run/docker.sock",
    });
    expect(parseEngineUrl("tcp://10.0.0.2:2376")).toEqual({ kind: "tcp", host: "10.0.0.2", port: 2376 });
    expect(parseEngineUrl("ssh://trajrl@h")).toEqual({
      kind: "ssh",
      host: "h",
      port: 22,
      username: "trajrl",
    });
    expect(() => parseEngineUrl("http://h:1")).toThrow(/unix:\/\/\/path, tcp:\/\/host:port \(TLS\) or ssh/);
    expect(() => parseEngineUrl("tcp://h")).toThrow(/needs a host and a port/);
  });

  it("API versions compare numerically", () => {
    expect(apiAtLeast("1.41", "1.41")).toBe(true);
    expect(apiAtLeast("1.43", "1.41")).toBe(true);
    expect(apiAtLeast("1.9", "1.41")).toBe(false);
    expect(apiAtLeast("2.0", "1.41")).toBe(true);
    expect(apiAtLeast("x", "1.41")).toBe(false);
  });
});
