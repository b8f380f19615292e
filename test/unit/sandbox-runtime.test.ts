/**
 * Which OCI runtime a container gets (src/sandbox/runtime.ts): EPISODE_RUNTIME resolved against an
 * engine's runtimes, and the role of each container deciding between the episode runtime and runc.
 */
import { describe, expect, it } from "vitest";
import { runtimeResult } from "../../src/cli/preflight-runtime.js";
import { loadConfig } from "../../src/config.js";
import { ValidatorError } from "../../src/errors.js";
import { createOptions, SIDECAR_LIMITS } from "../../src/sandbox/container-spec.js";
import type { Docker } from "../../src/sandbox/docker.js";
import { dockerEpisodeEngine } from "../../src/sandbox/episode-engine.js";
import { LABEL, type Role } from "../../src/sandbox/labels.js";
import {
  chooseEpisodeRuntime,
  containerRuntime,
  gvisorProcessBounds,
  pinnedRuntime,
  RUNC_RUNTIME,
  RUNS_EPISODE_CODE,
} from "../../src/sandbox/runtime.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";

const GVISOR = { name: "runsc", gvisor: true };

const withRole = (role: string) => ({ [LABEL.role]: role });

describe("EPISODE_RUNTIME against an engine's runtimes", () => {
  it("auto: gVisor where the engine has it, runc with a reason where it does not", () => {
    expect(chooseEpisodeRuntime("auto", ["runc", "runsc"])).toEqual({
      setting: "auto",
      name: "runsc",
      gvisor: true,
    });
    const fallback = chooseEpisodeRuntime("auto", ["io.containerd.runc.v2", "runc"]);
    expect(fallback).toMatchObject({ setting: "auto", name: "runc", gvisor: false });
    expect(fallback.fallback).toContain("no runtime named runsc (its runtimes: io.containerd.runc.v2, runc)");
  });

  it("runsc on an engine without it: an infra error naming what the engine has and what to change", () => {
    let err: unknown;
    try {
      chooseEpisodeRuntime("runsc", ["runc"]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidatorError);
    expect(err).toMatchObject({ failureClass: "infra", code: "engine_runtime_missing", retryable: false });
    expect((err as Error).message).toMatch(/its runtimes: runc.*daemon\.json.*EPISODE_RUNTIME=auto/);
    expect(chooseEpisodeRuntime("runsc", ["runc", "runsc-kvm", "runsc"]).name).toBe("runsc");
  });

  it("runc is runc whatever the engine has (no gVisor, no warning)", () => {
    expect(chooseEpisodeRuntime("runc", ["runc", "runsc"])).toEqual({
      setting: "runc",
      name: "runc",
      gvisor: false,
    });
  });

  it("the setting: auto by default, the three values, nothing else", () => {
    expect(loadConfig({}).evaluation.episodeRuntime).toBe("auto");
    for (const v of ["runc", "runsc", "auto"] as const)
      expect(loadConfig({ EPISODE_RUNTIME: v }).evaluation.episodeRuntime).toBe(v);
    expect(() => loadConfig({ EPISODE_RUNTIME: "gvisor" })).toThrow(/EPISODE_RUNTIME/);
  });
});

describe("the runtime of each container", () => {
  it("the sidecar, the agent, the verifier and the check's reference run get the episode runtime", () => {
    for (const role of ["sidecar", "agent", "verifier", "check"])
      expect(containerRuntime(withRole(role), GVISOR), role).toEqual(GVISOR);
  });

  it("the validator's own helpers stay on runc: the relay, the firewall helper, the bench's probes", () => {
    for (const role of ["relay", "engine-firewall", "probe"])
      expect(containerRuntime(withRole(role), GVISOR), role).toEqual(RUNC_RUNTIME);
  });

  it("a container of no known role is treated as episode code", () => {
    expect(containerRuntime({}, GVISOR)).toEqual(GVISOR);
    expect(containerRuntime(withRole("something-new"), GVISOR)).toEqual(GVISOR);
  });

  it("an episode pinned to runc (a scenario not for gVisor) runs its code under runc", () => {
    expect(containerRuntime({ ...withRole("verifier"), [LABEL.runtime]: "runc" }, GVISOR)).toEqual(
      RUNC_RUNTIME,
    );
  });

  it("every role is classified", () => {
    const episodeCode = (Object.keys(RUNS_EPISODE_CODE) as Role[]).filter((r) => RUNS_EPISODE_CODE[r]);
    expect(episodeCode.sort()).toEqual(["agent", "check", "sidecar", "verifier"]);
  });

  it("the runtime is always explicit in the create options (an engine's own default changes nothing)", () => {
    const spec = {
      name: "x",
      image: "i",
      labels: {},
      limits: SIDECAR_LIMITS,
      network: { kind: "none" as const },
    };
    expect(createOptions(spec, RUNC_RUNTIME).HostConfig?.Runtime).toBe("runc");
    expect(createOptions(spec, GVISOR).HostConfig?.Runtime).toBe("runsc");
  });

  it("under gVisor the pids limit bounds the guest (RLIMIT_NPROC) and the engine's limit is a backstop on host tasks", () => {
    const spec = {
      name: "x",
      image: "i",
      labels: {},
      limits: SIDECAR_LIMITS,
      network: { kind: "none" as const },
    };
    const runc = createOptions(spec, RUNC_RUNTIME).HostConfig!;
    expect([runc.PidsLimit, runc.Ulimits]).toEqual([256, undefined]);
    const gv = createOptions(spec, GVISOR).HostConfig!;
    expect(gv.Ulimits).toEqual([{ Name: "nproc", Soft: 256, Hard: 256 }]);
    expect(gv.PidsLimit).toBe(gvisorProcessBounds(SIDECAR_LIMITS).hostTasks);
    // Every guest task may cost several host tasks under ptrace: the backstop is far above 256.
    for (const pids of [64, 256, 1024]) {
      const b = gvisorProcessBounds({ pidsLimit: pids });
      expect(b.nproc).toBe(pids);
      expect(b.hostTasks).toBeGreaterThanOrEqual(pids * 8 + 64);
    }
  });

  it("each episode engine carries its own runtime over one shared connection; a helper's role keeps runc", async () => {
    const created: Array<{ name?: string; runtime?: string }> = [];
    const connection = {
      modem: {},
      createContainer: async (o: { name?: string; HostConfig?: { Runtime?: string } }) => {
        created.push({ name: o.name, runtime: o.HostConfig?.Runtime });
        return { id: o.name };
      },
    } as unknown as Docker;
    const spec = (name: string, role: string) => ({
      name,
      image: "i",
      labels: withRole(role),
      limits: SIDECAR_LIMITS,
      network: { kind: "none" as const },
    });
    const gvisor = dockerEpisodeEngine(connection, GVISOR);
    const runc = dockerEpisodeEngine(connection, RUNC_RUNTIME);
    await gvisor.create(spec("a-sidecar", "sidecar"));
    await runc.create(spec("b-sidecar", "sidecar"));
    await gvisor.create(spec("a-relay", "relay"));
    expect(created).toEqual([
      { name: "a-sidecar", runtime: "runsc" },
      { name: "b-sidecar", runtime: "runc" },
      { name: "a-relay", runtime: "runc" },
    ]);
  });

  it("a sandbox not yet started has no episode runtime, so no engine and no scope (never a silent runc)", () => {
    const connection = { modem: { dial: () => undefined } } as unknown as Docker;
    const sb = Sandbox.create({ docker: connection, episodeRuntime: "auto", reapIntervalMs: 0 });
    expect(sb.episodeRuntime).toBeUndefined();
    for (const use of [() => sb.episodeEngine, () => sb.openScope("e", 1000)]) {
      let err: unknown;
      try {
        use();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ValidatorError);
      expect((err as ValidatorError).code).toBe("sandbox_not_started");
    }
  });
});

describe("check's runtime line", () => {
  const gv = { setting: "auto" as const, name: "runsc", gvisor: true };
  const fb = { setting: "auto" as const, name: "runc", gvisor: false, fallback: "no runsc" };

  it("gVisor everywhere: ok", () => {
    const r = runtimeResult([{ name: "local", runtime: gv }], "auto", "finney");
    expect([r.level, r.detail]).toEqual(["ok", "EPISODE_RUNTIME=auto: local runsc (gVisor)"]);
  });

  it("runc on finney or test: a warning naming the engines; on a local chain: ok", () => {
    const engines = [
      { name: "local", runtime: gv },
      { name: "b", runtime: fb },
    ];
    for (const network of ["finney", "test"] as const) {
      const r = runtimeResult(engines, "auto", network);
      expect(r.level).toBe("warn");
      expect(r.detail).toContain(`shares the host's kernel on b (${network})`);
      expect(r.fix).toContain("scripts/runsc-up.sh --print");
    }
    expect(runtimeResult(engines, "auto", "local").level).toBe("ok");
  });

  it("an engine without the runtime asked for: FAIL when it is the first (it builds the images), else a warning", () => {
    const missing = { name: "b", problem: "EPISODE_RUNTIME=runsc but the engine has no runtime named runsc" };
    const first = runtimeResult(
      [missing, { name: "c", runtime: { ...gv, setting: "runsc" } }],
      "runsc",
      "local",
    );
    expect(first.level).toBe("fail");
    expect(first.detail).toContain("b: EPISODE_RUNTIME=runsc but");
    const second = runtimeResult(
      [{ name: "c", runtime: { ...gv, setting: "runsc" } }, missing],
      "runsc",
      "finney",
    );
    expect(second.level).toBe("warn");
  });
});

describe("a scenario that cannot run under gVisor", () => {
  const auto = { setting: "auto" as const, name: "runsc", gvisor: true };
  it("auto: runc; runsc: refused as infra; on runc, or for any other scenario: nothing pinned", () => {
    expect(pinnedRuntime(auto, "s", "why")).toBe("runc");
    expect(() => pinnedRuntime({ ...auto, setting: "runsc" }, "s", "why")).toThrow(
      expect.objectContaining({ code: "scenario_not_for_gvisor", failureClass: "infra" }),
    );
    expect(pinnedRuntime({ setting: "auto", ...RUNC_RUNTIME }, "s", "why")).toBeUndefined();
    expect(pinnedRuntime(auto, "s", undefined)).toBeUndefined();
    expect(pinnedRuntime(undefined, "s", "why")).toBeUndefined();
  });

  it("task.toml says why, and only bounded-async-runner of the built-in suite says it", async () => {
    const { loadCatalogue } = await import("../../src/scenarios/index.js");
    const catalogue = await loadCatalogue(new URL("../../scenarios", import.meta.url).pathname);
    const declared = catalogue.filter((s) => s.task.metadata.not_under_gvisor);
    expect(declared.map((s) => s.name)).toEqual(["bounded-async-runner"]);
    expect(declared[0]!.task.metadata.not_under_gvisor).toMatch(/SO_PEERCRED/);
  });
});
