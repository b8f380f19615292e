/**
 * One episode floods the meter with the largest bodies it accepts, many at once: the meter's memory
 * stays within its bounds (request bytes held per token and overall), every call is still answered,
 * and another episode's call is served while the flood goes on. Then one episode asks for large
 * answers and never reads them (issue 36 item 4): the meter holds at most its answer bytes. The
 * meter runs in a process of its own, so its resident memory (VmRSS, VmHWM) is its own.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";

const MiB = 1024 * 1024;
const BODY_MIB = 16;
const FLOOD = 32;
const LIMITS = {
  maxBufferedBytes: 96 * MiB,
  maxBytesPerToken: 64 * MiB,
  maxAnswerBytes: 96 * MiB,
  maxAnswerBytesPerToken: 48 * MiB,
};
const ANSWER_MIB = 16;
const UNREAD = 24;
const dispatcher = new Agent({ connections: 64, bodyTimeout: 120_000, headersTimeout: 120_000 });

function kib(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m![1]);
}

let up: TestUpstream;
let bigUp: TestUpstream;
let child: ChildProcess;
let port: number;
let flood: string;
let neighbour: string;

beforeAll(async () => {
  up = await startTestUpstream({ lean: true, answer: { content: "ok" } });
  bigUp = await startTestUpstream({ lean: true, answer: { content: "y".repeat(ANSWER_MIB * MiB) } });
  child = spawn(
    process.execPath,
    ["--import", "tsx", "test/helpers/meter-child.ts", up.url, JSON.stringify(LIMITS)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (c) => reject(new Error(`meter child exited ${c}`)));
  });
  [port, flood, neighbour] = line.split(" ").map((x, k) => (k === 0 ? Number(x) : x)) as [
    number,
    string,
    string,
  ];
}, 60_000);

afterAll(async () => {
  child?.kill("SIGTERM");
  await up?.close();
  await bigUp?.close();
  await dispatcher.close();
});

async function call(token: string, content: string): Promise<number> {
  const r = await request(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ model: "glm-5.3-flash", messages: [{ role: "user", content }], max_tokens: 64 }),
  });
  await r.body.dump();
  return r.statusCode;
}

describe("the meter under a flood of large bodies", () => {
  it(`${FLOOD} concurrent ${BODY_MIB} MiB bodies from one episode: memory within the bounds, all answered, a neighbour served meanwhile`, async () => {
    const pid = child.pid!;
    // Warm: one call of each size, so the baseline includes what any call needs once.
    expect(await call(flood, "x")).toBe(200);
    const baseline = kib(pid, "VmRSS");
    const content = "7".repeat(BODY_MIB * MiB - 200);
    const done: string[] = [];
    const floodCalls = Array.from({ length: FLOOD }, async () => {
      const s = await call(flood, content);
      done.push("flood");
      return s;
    });
    // The neighbour calls once the flood is under way.
    await new Promise((r) => setTimeout(r, 200));
    const neighbourStatus = await call(neighbour, "hello");
    done.push("neighbour");
    const statuses = await Promise.all(floodCalls);
    const peak = kib(pid, "VmHWM");
    const grewMiB = (peak - baseline) / 1024;
    console.log(
      `flood: ${FLOOD} × ${BODY_MIB} MiB (${FLOOD * BODY_MIB} MiB offered) against ${LIMITS.maxBufferedBytes / MiB} MiB of request bytes overall, ` +
        `${LIMITS.maxBytesPerToken / MiB} MiB per token: meter RSS ${Math.round(baseline / 1024)} MiB at rest, peak ${Math.round(peak / 1024)} MiB (+${Math.round(grewMiB)} MiB); ` +
        `the neighbour's call finished after ${done.indexOf("neighbour")} of the ${FLOOD} flood calls`,
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(neighbourStatus).toBe(200);
    expect(done.indexOf("neighbour")).toBeLessThan(FLOOD);
    // Held request bytes are bounded; the rest is the heap's and the sockets' slack.
    expect(grewMiB).toBeLessThan(LIMITS.maxBufferedBytes / MiB + 96);
  }, 300_000);
});

describe("the meter under answers nobody reads", () => {
  it(`${UNREAD} unread ${ANSWER_MIB} MiB answers on one episode: the meter holds its answer bytes, no more; the rest fail (429)`, async () => {
    // A meter of its own, in front of a provider answering 16 MiB (a long completion with logprobs).
    const meter = spawn(
      process.execPath,
      ["--import", "tsx", "test/helpers/meter-child.ts", bigUp.url, JSON.stringify(LIMITS)],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: meter.stdout! }).once("line", resolve);
        meter.once("exit", (c) => reject(new Error(`meter child exited ${c}`)));
      });
      const [p, token] = line.split(" ") as [string, string];
      const pid = meter.pid!;
      const baseline = kib(pid, "VmRSS");
      const open = () =>
        request(`http://127.0.0.1:${p}/v1/chat/completions`, {
          method: "POST",
          dispatcher,
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
          body: JSON.stringify({
            model: "glm-5.3-flash",
            messages: [{ role: "user", content: "x" }],
            max_tokens: 64,
          }),
        });
      // One after another, none read: each answer waits in the meter for a client that never takes it.
      const unread = [];
      for (let k = 0; k < UNREAD; k++) unread.push(await open());
      const rss = kib(pid, "VmRSS");
      const grewMiB = (rss - baseline) / 1024;
      const statuses = unread.map((r) => r.statusCode);
      const refused = statuses.filter((s) => s === 429).length;
      console.log(
        `${UNREAD} unread ${ANSWER_MIB} MiB answers (${UNREAD * ANSWER_MIB} MiB offered) against ${LIMITS.maxAnswerBytesPerToken / MiB} MiB of answer bytes per token: ` +
          `meter RSS ${Math.round(baseline / 1024)} → ${Math.round(rss / 1024)} MiB (+${Math.round(grewMiB)} MiB); ${refused} calls refused with 429`,
      );
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
      expect(refused).toBeGreaterThan(UNREAD / 2);
      // Before the bound: every unread answer stayed (+300 MiB and more here). The kernel's socket
      // buffers take part of each answer out of the meter's memory; what is left is the bound.
      expect(grewMiB).toBeLessThan(LIMITS.maxAnswerBytesPerToken / MiB + 96);
      for (const r of unread) r.body.on("error", () => undefined).destroy();
    } finally {
      meter.kill("SIGTERM");
    }
  }, 300_000);
});
