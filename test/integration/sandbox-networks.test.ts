/**
 * The episode address pool on the real engine: allocation from a small pool of our own (outside
 * the default one, so sibling test processes cannot eat into it), exhaustion, release, restarts
 * (a fresh allocator sees what exists) and two allocators racing like two processes would.
 */
import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ValidatorError } from "../../src/errors.js";
import { labelsFor, newSession } from "../../src/sandbox/labels.js";
import { NetworkPool } from "../../src/sandbox/networks.js";
import { gatewayOf, parseCidr } from "../../src/sandbox/subnet.js";
import { requireDocker } from "../helpers/docker.js";
import { countLabelled } from "../helpers/sandbox.js";

const POOL = "10.214.254.0/26"; // four /28 blocks
const session = newSession();
const tag = randomBytes(3).toString("hex");
let docker: Docker;
const made: string[] = [];

function labels(ep = "netpool") {
  return labelsFor(session, "probe", ep, Date.now() / 1000 + 600);
}

beforeAll(async () => {
  docker = await requireDocker();
});

afterAll(async () => {
  for (const n of made)
    await docker
      .getNetwork(n)
      .remove()
      .catch(() => undefined);
  expect(await countLabelled(docker, session.id)).toEqual({ containers: 0, networks: 0 });
});

describe("network pool", () => {
  it("allocates distinct internal /28s with .1 gateways and bridge-name prefixes until the pool is full", async () => {
    const a = new NetworkPool(docker, { poolCidr: POOL });
    const b = new NetworkPool(docker, { poolCidr: POOL }); // a second "process"
    const nets = await Promise.all(
      [a, b, a, b].map((p, i) => {
        const name = `trajrl-test-${tag}-${i}`;
        made.push(name);
        return p.create(i % 2 ? "meter" : "agent", name, labels());
      }),
    );
    const subnets = nets.map((n) => n.subnet).sort();
    expect(new Set(subnets).size).toBe(4);
    expect(subnets).toEqual(["10.214.254.0/28", "10.214.254.16/28", "10.214.254.32/28", "10.214.254.48/28"]);
    for (const n of nets) {
      const info = await docker.getNetwork(n.id).inspect();
      expect(info.Internal).toBe(true);
      expect(info.IPAM?.Config?.[0]?.Gateway).toBe(n.gateway);
      expect(n.gateway).toBe(gatewayOf(parseCidr(n.subnet)));
      expect(n.bridge).toMatch(n.kind === "agent" ? /^tja[0-9a-f]{12}$/ : /^tjm[0-9a-f]{12}$/);
      expect(info.Options?.["com.docker.network.bridge.name"]).toBe(n.bridge);
    }

    // Full: a fifth allocation fails with a stable code (a fresh allocator sees the engine's state).
    const fresh = new NetworkPool(docker, { poolCidr: POOL });
    const err = await fresh.create("agent", `trajrl-test-${tag}-x`, labels()).catch((e) => e);
    expect(err).toBeInstanceOf(ValidatorError);
    expect((err as ValidatorError).code).toBe("subnet_pool_exhausted");
    expect((err as ValidatorError).failureClass).toBe("infra");

    // Release one; the next allocation gets exactly that block back.
    const freed = nets[2]!;
    await fresh.remove(freed.name);
    await fresh.remove(freed.name); // idempotent
    const again = await fresh.create("agent", `trajrl-test-${tag}-again`, labels());
    made.push(again.name);
    expect(again.subnet).toBe(freed.subnet);
  });

  it("skips blocks taken by networks it did not make", async () => {
    for (const n of made.splice(0))
      await docker
        .getNetwork(n)
        .remove()
        .catch(() => undefined);
    // Networks made outside our allocator covering the first three blocks.
    for (const [i, subnet] of ["10.214.254.0/27", "10.214.254.32/28"].entries()) {
      const name = `trajrl-test-${tag}-foreign${i}`;
      made.push(name);
      await docker.createNetwork({
        Name: name,
        Internal: true,
        IPAM: { Config: [{ Subnet: subnet }] },
        Labels: labels(),
      });
    }
    const pool = new NetworkPool(docker, { poolCidr: POOL });
    const n = await pool.create("agent", `trajrl-test-${tag}-last`, labels());
    made.push(n.name);
    expect(n.subnet).toBe("10.214.254.48/28");
  });
});
