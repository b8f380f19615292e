/**
 * A whole daemon run's log as an operator pipes it into jq or Loki (issue 35): `trajrl-validator run`
 * as a process with the REAL pipeline (Docker, the meter, the simulator, the built-in suite's quick
 * set) against the fake platform and the subtensor test node, at debug level, with its status page:
 * an epoch evaluated, its verdict posted, weights set, then the chain lost for a while, then SIGTERM.
 * Every line of stdout and stderr must be one JSON object naming each key once; the lost chain is
 * one warning naming its endpoint, however many reconnect attempts follow.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCli } from "../helpers/cli.js";
import { until } from "../helpers/daemon.js";
import { onCleanup, processWorld, runCleanups } from "../helpers/daemon-world.js";
import { requireDocker } from "../helpers/docker.js";
import { badLogLines } from "../helpers/json-lines.js";

const ROOT = join(import.meta.dirname, "../..");

beforeAll(requireDocker);
afterAll(runCleanups);

describe("a daemon run's log", () => {
  it("is JSON lines with each key once, from the first line to the last; a lost chain is one warning with its endpoint", async () => {
    const { subnet, fake, env } = await processWorld({ STATUS_PORT: "0", HEARTBEAT_INTERVAL_S: "2" });
    const pin = await readFile(join(ROOT, "examples/packs/pin.json"));
    const epoch = fake.openEpoch({
      packBytes: pin,
      challengerHotkey: subnet.challenger,
      challengerUid: subnet.uids.challenger,
      specNumber: 27,
    });
    const run = startCli(["run"], { env });
    onCleanup(async () => run.child.kill("SIGKILL"));

    await until(
      () => fake.requests("epoch.score").some((q) => q.status === 200),
      600_000,
      "the verdict posted",
    );
    await until(
      () => subnet.node.received.some((x) => x.call?.method === "setWeights" && x.outcome === "success"),
      60_000,
      "weights",
    );
    await until(() => fake.logs.length >= 1, 60_000, "the log upload");
    expect(fake.scores.get(epoch.challenge_epoch_id)).toBeDefined();

    // The chain lost for good: the client retries every 2.5 s.
    const lostAt = run.stdout().length;
    await subnet.node.stop();
    await until(
      () =>
        (run
          .stdout()
          .slice(lostAt)
          .match(/"msg":"chain\.reconnect_failed"/g)?.length ?? 0) >= 3,
      60_000,
      "three reconnect attempts",
    );
    run.child.kill("SIGTERM");
    expect(await run.exited, run.stderr()).toBe(0);

    const log = `${run.stdout()}\n${run.stderr()}`;
    const lines = log.split("\n").filter((l) => l.trim());
    console.log(`${lines.length} log lines checked`);
    expect(lines.length).toBeGreaterThan(200);
    expect(badLogLines(log)).toEqual([]);

    // The outage: one warning naming the endpoint as configured (and one per @polkadot origin), the
    // attempts after it at debug level.
    const outage = run
      .stdout()
      .slice(lostAt)
      .split("\n")
      .filter((l) => l.trim())
      .map(
        (l) =>
          JSON.parse(l) as { level: string; msg: string; origin?: string; text?: string; endpoint?: string },
      );
    const warnings = outage.filter((l) => l.level === "warn" && /^chain\./.test(l.msg));
    const kinds = warnings.map((l) => `${l.msg}${l.origin ? ` ${l.origin}` : ""}`);
    expect(kinds.filter((k) => k === "chain.disconnected")).toHaveLength(1);
    expect(new Set(kinds).size, kinds.join("\n")).toBe(kinds.length);
    expect(warnings.find((l) => l.msg === "chain.disconnected")!.endpoint).toBe(subnet.node.url);
    expect(warnings.find((l) => l.origin === "API-WS")?.text).toContain(`from ${subnet.node.url}: `);
    expect(outage.filter((l) => l.msg === "chain.reconnect_failed").length).toBeGreaterThanOrEqual(3);
    expect(log).not.toContain("unparseable-url");
  }, 900_000);
});
