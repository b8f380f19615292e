/**
 * `harness_image_hash` as upstream forms it (sandbox_harness.py `_pull_sync` at v0.6.31 319e21c):
 * the scenario digests joined with ':' in the LOCAL spec's order (SANDBOX_SCENARIOS) over what this
 * pull brought (`scenario_image_hashes`), `missing` for one whose pull failed — whatever spec the
 * epoch evaluates.
 */
import { describe, expect, it } from "vitest";
import { harnessImageHashOf, PUBLISHED_SPECS, RegistryBench } from "../../src/bench/index.js";
import type { PulledImage } from "../../src/sandbox/index.js";

const bench = new RegistryBench({
  docker: {} as never,
  session: {} as never,
  ref: "ghcr.io/trajectoryrl/sandbox-agent:latest",
  specs: PUBLISHED_SPECS,
  sdk: {} as never,
  verifierNetwork: "bridge",
});

const pulled = (digest: string, fromCache = false): PulledImage => ({
  ref: "r",
  id: `sha256:id-${digest}`,
  digest,
  changed: false,
  isNew: false,
  fromCache,
});

describe("harness_image_hash", () => {
  it("an epoch of an older spec evaluates its own scenarios and joins the local spec's digests, in its order", () => {
    const local = PUBLISHED_SPECS.specs.get(PUBLISHED_SPECS.local)!.scenarios;
    const r = bench.resolve({ specNumber: 25 });
    expect(r.spec).toBe(25);
    expect(r.names).toEqual(PUBLISHED_SPECS.specs.get(25)!.scenarios);
    expect(r.names.length).toBe(26);
    expect(r.hashOrder).toEqual(local);
    expect(r.hashOrder!.length).toBe(20);
    // An explicit list (`eval --scenarios`) has no subnet order to follow: its own.
    expect(bench.resolve({ specNumber: 25, scenarios: ["b", "a"] }).hashOrder).toBeUndefined();
  });

  it("joins the order over what was pulled: a failed pull (served from the cache) and an absent one are `missing`", () => {
    const order = ["c", "a", "b", "d"];
    const got = new Map<string, PulledImage>([
      ["a", pulled("sha256:aa")],
      ["b", pulled("sha256:bb", true)],
      ["c", pulled("sha256:cc")],
      ["e", pulled("sha256:ee")], // pulled for the evaluation, not in the local spec: not joined
    ]);
    expect(harnessImageHashOf(order, got)).toBe("sha256:cc:sha256:aa:missing:missing");
  });
});
