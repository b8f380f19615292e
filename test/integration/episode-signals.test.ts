/**
 * Process deaths mid-episode. SIGTERM: the process aborts its episode and removes everything
 * before exiting. SIGKILL: nothing can run, so the next sandbox opened on this host removes the
 * dead process's containers and networks at start-up (its owner pid is gone).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL } from "../../src/sandbox/labels.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";
import { countLabelled, openTestSandbox } from "../helpers/sandbox.js";

let docker: Docker;
const children: ChildProcess[] = [];

beforeAll(async () => {
  docker = await requireDocker();
});

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
});

interface Child {
  proc: ChildProcess;
  session: string;
  lines: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
}

async function startChild(): Promise<Child> {
  const proc = spawn(process.execPath, ["--import", "tsx", "test/helpers/episode-child.ts"], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(proc);
  const lines: Array<Record<string, unknown>> = [];
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  const session = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout! });
    rl.on("line", (l) => {
      try {
        const rec = JSON.parse(l) as Record<string, unknown>;
        lines.push(rec);
        if (typeof rec.session === "string") resolve(rec.session);
      } catch {
        // not ours
      }
    });
    proc.on("exit", () => reject(new Error("child exited before it was ready")));
  });
  return { proc, session, lines, exited };
}

async function agentRunning(session: string, timeoutMs = 120_000): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const c = await docker.listContainers({
      filters: { label: [`${LABEL.session}=${session}`, `${LABEL.role}=agent`] },
    });
    if (c.length > 0) return;
    if (performance.now() - t0 > timeoutMs) throw new Error("the child's agent never started");
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("process signals", () => {
  it("SIGTERM mid-episode: the episode is aborted and everything it made is removed", async () => {
    const child = await startChild();
    await agentRunning(child.session);
    const before = await countLabelled(docker, child.session);
    expect(before.containers).toBeGreaterThanOrEqual(2); // sidecar + agent
    expect(before.networks).toBe(2);
    const t0 = performance.now();
    child.proc.kill("SIGTERM");
    expect(await child.exited).toBe(0);
    expect(performance.now() - t0).toBeLessThan(20_000);
    expect(child.lines.find((l) => l.result)).toMatchObject({
      result: { status: "failed", failure: { class: "infra", code: "aborted" } },
    });
    expect(await countLabelled(docker, child.session)).toEqual({ containers: 0, networks: 0 });
  }, 240_000);

  it("SIGKILL mid-episode: the next sandbox on this host reaps the dead process's leftovers", async () => {
    const child = await startChild();
    await agentRunning(child.session);
    child.proc.kill("SIGKILL");
    await child.exited;
    const left = await countLabelled(docker, child.session);
    expect(left.containers).toBeGreaterThanOrEqual(2);
    expect(left.networks).toBe(2);
    const sb = await openTestSandbox(); // its start-up sweep
    try {
      expect(await countLabelled(docker, child.session)).toEqual({ containers: 0, networks: 0 });
    } finally {
      await sb.close();
    }
  }, 240_000);
});
