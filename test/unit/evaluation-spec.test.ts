/**
 * Upstream's spec fallback as an evaluation meets it (tests/test_spec_resolution.py, b057b1a5): a
 * spec this validator does not know evaluates the local spec, with a warning and an alarm on the
 * status page; a known spec evaluates itself and clears the alarm.
 */
import Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { loadSubnetSpecs, RegistryBench } from "../../src/bench/index.js";
import { resolveRequest } from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { newSession } from "../../src/sandbox/index.js";
import { LiveStatus } from "../../src/status/index.js";

async function env() {
  const bench = new RegistryBench({
    // resolve() reads the spec table only: nothing here talks to an engine.
    docker: new Docker({ socketPath: "/nonexistent.sock" }),
    session: newSession(),
    ref: "ghcr.io/trajectoryrl/sandbox-agent:latest",
    specs: await loadSubnetSpecs(undefined),
    sdk: { entry: "trajrl_policy.py", files: [] },
    verifierNetwork: "bridge",
  });
  const observer = new LiveStatus();
  const settings = { specNumber: undefined } as never;
  return { bench, observer, settings, log: silentLogger };
}

describe("resolveRequest: upstream's fallback to the local spec", () => {
  it.each([99, 3, "99"])(
    "spec %j: the local spec (27, $0.30) with an unknown_spec alarm",
    async (requested) => {
      const e = await env();
      const r = resolveRequest(e, { specNumber: requested as number });
      expect(r).toMatchObject({ spec: 27, episodeCapUsd: 0.3, fellBackFrom: requested });
      expect(r.names).toHaveLength(20);
      expect(e.observer.alarms.get("unknown_spec")?.message).toContain(`spec ${requested} is not known`);
    },
  );

  it("a known spec evaluates itself (26 keeps $1.00) and clears the alarm", async () => {
    const e = await env();
    resolveRequest(e, { specNumber: 99 });
    expect(e.observer.alarms.has("unknown_spec")).toBe(true);
    expect(resolveRequest(e, { specNumber: 26 })).toMatchObject({ spec: 26, episodeCapUsd: 1 });
    expect(e.observer.alarms.has("unknown_spec")).toBe(false);
  });

  it("no spec named: the local spec, no alarm", async () => {
    const e = await env();
    expect(resolveRequest(e, {})).toMatchObject({ spec: 27 });
    expect(e.observer.alarms.has("unknown_spec")).toBe(false);
  });
});
