/**
 * What gVisor cannot do here, and what the validator does about it (the `gvisor` test project;
 * needs the engine's `runsc`, which scripts/setup.sh registers).
 * - The reason bounded-async-runner declares `not_under_gvisor`: under Debian's runsc (20221219),
 *   SO_PEERCRED on a Unix socket gives each side its own credentials, not its peer's, so the
 *   grader's collector takes every job for root. When a fixed runsc arrives this test fails: then
 *   the declaration goes (and `scenarios check` under runsc proves the scenario).
 * - A scenario that declares it: its episode containers run under runc with `auto`, carrying the
 *   label that says so, and `runsc` refuses the episode (infra, never a silent 0).
 */
import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkScenario } from "../../src/episode/index.js";
import {
  createContainer,
  type EpisodeScope,
  removeContainer,
  type Sandbox,
  SIDECAR_LIMITS,
  startContainer,
  waitExit,
} from "../../src/sandbox/index.js";
import { LABEL } from "../../src/sandbox/labels.js";
import { BASE_IMAGE, openTestSandbox } from "../helpers/sandbox.js";

const tag = randomBytes(3).toString("hex");
const sandboxes: Sandbox[] = [];
const scopes: EpisodeScope[] = [];

/** A listener as root and a client as uid 10000 on one Unix socket; each prints what SO_PEERCRED says of the other. */
const PEERCRED = `
use strict; use Socket; use POSIX ();
my $path = "/tmp/peer.sock";
socket(my $srv, PF_UNIX, SOCK_STREAM, 0) or die; bind($srv, sockaddr_un($path)) or die; chmod 0666, $path; listen($srv, 1) or die;
my $pid = fork();
if ($pid == 0) { POSIX::setgid(10000); POSIX::setuid(10000); socket(my $c, PF_UNIX, SOCK_STREAM, 0) or die; connect($c, sockaddr_un($path)) or die; sleep 1; exit 0; }
accept(my $conn, $srv) or die;
my ($p, $u, $g) = unpack("iii", getsockopt($conn, SOL_SOCKET, SO_PEERCRED));
print "listener uid $< sees peer uid $u\\n"; waitpid($pid, 0);
`;

async function run(
  sb: Sandbox,
  role: "agent" | "probe",
  name: string,
): Promise<{ runtime: string; out: string }> {
  const scope = sb.openScope(`gvlim-${tag}-${name}`, 300_000);
  scopes.push(scope);
  const full = `trajrl-gvlim-${tag}-${name}`;
  scope.trackContainer(full);
  const c = await createContainer(sb.docker, scope.runtime, {
    name: full,
    image: BASE_IMAGE,
    cmd: ["perl", "-e", PEERCRED],
    labels: scope.labels(role),
    limits: SIDECAR_LIMITS,
    network: { kind: "none" },
  });
  await startContainer(c);
  await waitExit(c, AbortSignal.timeout(120_000));
  const info = await c.inspect();
  const logs = (await c.logs({ stdout: true, stderr: true })).toString("utf8");
  await removeContainer(sb.docker, full);
  return { runtime: info.HostConfig.Runtime ?? "", out: logs };
}

let auto: Sandbox;

beforeAll(async () => {
  auto = await openTestSandbox({ episodeRuntime: "auto", firewall: "off" });
  sandboxes.push(auto);
});

afterAll(async () => {
  for (const s of scopes) await s.dispose();
  for (const sb of sandboxes) await sb.close();
});

describe("SO_PEERCRED under this engine's gVisor", () => {
  it("runc (control): the listener sees its peer's uid; gVisor: it sees its own", async () => {
    expect(auto.episodeRuntime).toMatchObject({ name: "runsc", gvisor: true });
    const control = await run(auto, "probe", "runc");
    expect(control.runtime).toBe("runc");
    expect(control.out).toContain("listener uid 0 sees peer uid 10000");
    const gvisor = await run(auto, "agent", "runsc");
    expect(gvisor.runtime).toBe("runsc");
    expect(gvisor.out).toContain("listener uid 0 sees peer uid 0");
  }, 300_000);
});

describe("a scenario that declares it cannot run under gVisor", () => {
  const declared = {
    name: "needs-runc",
    task: { metadata: { not_under_gvisor: "its grader trusts SO_PEERCRED" } },
  };
  const plain = { name: "plain", task: {} };

  async function runtimeOf(scope: EpisodeScope, name: string): Promise<{ runtime: string; label?: string }> {
    const full = `trajrl-gvlim-${tag}-${name}`;
    scope.trackContainer(full);
    const c: Docker.Container = await createContainer(auto.docker, scope.runtime, {
      name: full,
      image: BASE_IMAGE,
      cmd: ["true"],
      labels: scope.labels("verifier"),
      limits: SIDECAR_LIMITS,
      network: { kind: "none" },
    });
    const info = await c.inspect();
    return { runtime: info.HostConfig.Runtime ?? "", label: info.Config.Labels[LABEL.runtime] };
  }

  it("auto: its episode containers run under runc, labelled so; every other scenario's under gVisor", async () => {
    const pinned = auto.openScope(`gvlim-${tag}-pinned`, 300_000, declared);
    const free = auto.openScope(`gvlim-${tag}-free`, 300_000, plain);
    scopes.push(pinned, free);
    expect(await runtimeOf(pinned, "pinned")).toEqual({ runtime: "runc", label: "runc" });
    expect(await runtimeOf(free, "free")).toEqual({ runtime: "runsc", label: undefined });
    expect(auto.runtimeFor(declared)).toBe("runc");
    expect(auto.runtimeFor(plain)).toBe("runsc");
  }, 120_000);

  it("runsc: the episode is refused as infra, naming the scenario and why", async () => {
    const strict = await openTestSandbox({ episodeRuntime: "runsc", firewall: "off" });
    sandboxes.push(strict);
    expect(() => strict.openScope(`gvlim-${tag}-strict`, 300_000, declared)).toThrow(
      /scenario needs-runc cannot run under gVisor \(its grader trusts SO_PEERCRED\)/,
    );
    try {
      strict.openScope(`gvlim-${tag}-strict2`, 300_000, declared);
    } catch (err) {
      expect(err).toMatchObject({ failureClass: "infra", code: "scenario_not_for_gvisor" });
    }
    // `scenarios check` under runsc: that scenario's row fails naming why, before building anything.
    const task = {
      agent: { timeout_sec: 60 },
      verifier: { timeout_sec: 60, agent_output_path: "/workspace" },
      metadata: declared.task.metadata,
    };
    const images = {
      scenario: () => Promise.reject(new Error("nothing should be built for a refused scenario")),
    };
    const row = await checkScenario(
      { name: declared.name, dir: "", instruction: "", task },
      { sandbox: strict, images, concurrency: 1 },
    );
    expect(row).toMatchObject({ ok: false, runtime: "runsc", image: undefined });
    expect(row.problems).toEqual([
      expect.stringMatching(/^scenario_not_for_gvisor: scenario needs-runc cannot run/),
    ]);
  }, 120_000);
});
