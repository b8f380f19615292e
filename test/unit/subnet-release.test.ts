/**
 * The `version` this validator sends is upstream's release whose rules it implements
 * (src/subnet.ts UPSTREAM_RELEASE): the release's rules must be this build's rules, or the number
 * claims a match that is not there.
 */
import { describe, expect, it } from "vitest";
import { PUBLISHED_SPECS } from "../../src/bench/index.js";
import { loadAllowlist } from "../../src/meter/index.js";
import { UPSTREAM_RELEASE, UPSTREAM_RELEASE_RULES } from "../../src/subnet.js";
import { USER_AGENT, VERSION } from "../../src/version.js";

describe("the upstream release this build votes as", () => {
  it("is a release of upstream's Season 2 line (v0.7.x), never this package's own version", () => {
    expect(UPSTREAM_RELEASE).toMatch(/^0\.7\.(0|[1-9]\d*)$/);
    expect(UPSTREAM_RELEASE).not.toBe(VERSION);
  });

  it("the spec that release evaluates is in this build's table with its scenarios and cap", () => {
    const r = UPSTREAM_RELEASE_RULES;
    const spec = PUBLISHED_SPECS.specs.get(r.spec);
    const base = PUBLISHED_SPECS.specs.get(r.scenariosOfSpec);
    expect(spec).toBeDefined();
    expect(base).toBeDefined();
    expect([...(spec?.scenarios ?? [])]).toEqual([...(base?.scenarios ?? [])]);
    expect(spec?.episodeCapUsd).toBe(r.episodeCapUsd);
    // The later Season-2 specs this build runs come after the release's own.
    expect(PUBLISHED_SPECS.local).toBeGreaterThanOrEqual(r.spec);
  });

  it("the allowlist and price table are the ones frozen for that release's spec", () => {
    const allow = loadAllowlist() as { spec?: number; models: readonly string[] };
    expect(allow.spec).toBe(UPSTREAM_RELEASE_RULES.spec);
    expect(allow.models).toHaveLength(UPSTREAM_RELEASE_RULES.models);
  });

  it("the User-Agent names this implementation and the release it votes as", () => {
    expect(USER_AGENT).toBe(`trajrl-validator-ts/${VERSION} (trajectoryrl/${UPSTREAM_RELEASE})`);
  });
});
