/**
 * The offline trajrl-bench: this project's scenarios packaged in upstream's image contract, so the
 * registry bench path can be proven here without the subnet's images. `build` makes
 *
 *   REGISTRY/NAMESPACE/sandbox-agent:TAG     FROM the project's agent base: upstream's layout (user
 *                                            hermes uid 10000, /workspace, /app, /opt/data), the
 *                                            scenario trees root-only under /opt/trajrl-bench/scenarios,
 *                                            the trajrl_bench probes, `hermes` running our agent
 *   REGISTRY/NAMESPACE/scenario-<name>:TAG   FROM it, one per scenario (its environment/Dockerfile)
 *
 * and optionally pushes them. Builds are cached by content hash under local `trajrl-bench/…`
 * repositories (outside `trajrl/`, so `images prune` leaves them alone), then tagged with the
 * requested references. See docker/images/sandbox-agent/README.md.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { InfraError, InputError, isAbortError } from "../errors.js";
import { exists } from "../fs.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import {
  type BuiltImage,
  type ContextSource,
  type Docker,
  IMAGE_KIND_LABEL,
  type ImageSpec,
} from "../sandbox/index.js";
import { loadCatalogue, type Scenario, selectScenarios } from "../scenarios/index.js";
import { VERSION } from "../version.js";
import { ProjectImages } from "./project-images.js";
import { registryAuthForHost } from "./registry-auth.js";

/** Where the image's own files are, repository-relative. */
export const SANDBOX_AGENT_DIR = "docker/images/sandbox-agent";
/** The `hermes` bundle (scripts/build-agent.mjs). */
export const HERMES_BUNDLE = "agent/dist/hermes";
/** Local cache repositories: never under `trajrl/` (what `images prune` manages). */
export const BENCH_CACHE_PREFIX = "trajrl-bench/";

// ---- pure: names and references --------------------------------------------------------------

/** `REGISTRY/NAMESPACE`: a registry host (with a dot, a port or `localhost`) and a path. */
export interface BenchTarget {
  /** As given, without a trailing slash: the prefix of every reference. */
  prefix: string;
  registry: string;
  namespace: string;
}

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const HOST = /^(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+(?=:))(?::\d{1,5})?$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

export function parseBenchTarget(raw: string): BenchTarget {
  const prefix = raw.trim().replace(/\/+$/, "");
  const [registry, ...path] = prefix.split("/");
  if (!registry || !HOST.test(registry) || path.length === 0)
    throw new InputError(
      "invalid_bench_target",
      `--push ${JSON.stringify(raw)}: expected REGISTRY/NAMESPACE, e.g. 127.0.0.1:5000/trajectoryrl`,
    );
  const bad = path.find((c) => !PATH_COMPONENT.test(c));
  if (bad !== undefined)
    throw new InputError(
      "invalid_bench_target",
      `--push ${JSON.stringify(raw)}: "${bad}" is not a valid repository path component (lowercase letters, digits, . _ -)`,
    );
  return { prefix, registry, namespace: path.join("/") };
}

export function parseBenchTag(raw: string): string {
  if (!TAG.test(raw))
    throw new InputError("invalid_bench_tag", `--tag ${JSON.stringify(raw)}: not a valid image tag`);
  return raw;
}

/** The references a bench build produces (what upstream's validator pulls). */
export function benchRefs(
  target: BenchTarget,
  tag: string,
  scenarios: readonly string[],
): { base: string; scenarioRepoPrefix: string; scenarios: Record<string, string> } {
  const scenarioRepoPrefix = `${target.prefix}/scenario-`;
  return {
    base: `${target.prefix}/sandbox-agent:${tag}`,
    scenarioRepoPrefix,
    scenarios: Object.fromEntries(scenarios.map((n) => [n, `${scenarioRepoPrefix}${n}:${tag}`])),
  };
}

/** `repo:tag` split at the last colon after the last slash. */
export function splitRef(ref: string): { repo: string; tag: string } {
  const slash = ref.lastIndexOf("/");
  const colon = ref.lastIndexOf(":");
  if (colon > slash) return { repo: ref.slice(0, colon), tag: ref.slice(colon + 1) };
  return { repo: ref, tag: "latest" };
}

/** One push stream's outcome: the registry's digest, or the error the engine reported. */
export function parsePushEvents(lines: readonly string[]): { digest?: string; error?: string } {
  let digest: string | undefined;
  let error: string | undefined;
  for (const raw of lines) {
    let ev: unknown;
    try {
      ev = JSON.parse(raw);
    } catch {
      continue;
    }
    if (typeof ev !== "object" || ev === null) continue;
    const e = ev as {
      error?: unknown;
      errorDetail?: { message?: unknown };
      aux?: { Digest?: unknown };
      status?: unknown;
    };
    if (typeof e.errorDetail?.message === "string") error = e.errorDetail.message;
    else if (typeof e.error === "string") error = e.error;
    if (typeof e.aux?.Digest === "string") digest = e.aux.Digest;
    else if (typeof e.status === "string") {
      const m = /digest: (sha256:[0-9a-f]{64})/.exec(e.status);
      if (m) digest ??= m[1];
    }
  }
  return { ...(digest ? { digest } : {}), ...(error ? { error } : {}) };
}

// ---- registry credentials --------------------------------------------------------------------

/** What the engine's X-Registry-Auth carries (an empty object for an anonymous registry). */
export interface PushAuth {
  username?: string;
  password?: string;
  serveraddress?: string;
}

/**
 * Credentials for `registry`: the explicit pair when given, else the `auths` entry of the Docker
 * config file (`<dir>/config.json`; credential helpers are not consulted), else anonymous.
 */
export async function pushAuthFor(
  registry: string,
  opts: { username?: string; password?: string; dockerConfigDir?: string } = {},
): Promise<PushAuth> {
  return (await registryAuthForHost(registry, opts)) ?? {};
}

// ---- the build -------------------------------------------------------------------------------

export interface OfflineBenchOptions {
  repoRoot: string;
  /** The scenarios directory (default `<repoRoot>/scenarios`). */
  scenariosDir?: string;
  log?: Logger;
  /** One human-readable line per step (the CLI prints them on stderr). */
  progress?: (line: string) => void;
}

export interface BenchBuildRequest {
  /** `REGISTRY/NAMESPACE` of every reference. */
  target: string;
  tag: string;
  /** Scenario names (default: every scenario of the directory). */
  scenarios?: readonly string[];
  push: boolean;
  auth?: PushAuth;
  signal?: AbortSignal;
}

export interface BenchImage {
  /** The requested reference, e.g. 127.0.0.1:5000/trajectoryrl/scenario-x:t. */
  ref: string;
  /** The content-hash reference it was built (or reused) as. */
  cacheRef: string;
  id: string;
  built: boolean;
  buildMs: number;
  /** The registry's manifest digest, when pushed. */
  digest?: string;
}

export interface BenchBuildResult {
  version: string;
  tag: string;
  pushed: boolean;
  base: BenchImage;
  scenarios: Array<BenchImage & { name: string }>;
}

const execFileP = promisify(execFile);

function followStream(stream: NodeJS.ReadableStream): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const lines: string[] = [];
    let buf = "";
    stream.on("data", (chunk: Buffer | string) => {
      buf += chunk.toString();
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        const l = buf.slice(0, nl).trim();
        if (l) lines.push(l);
        buf = buf.slice(nl + 1);
        nl = buf.indexOf("\n");
      }
    });
    stream.on("end", () => {
      if (buf.trim()) lines.push(buf.trim());
      resolve(lines);
    });
    stream.on("error", reject);
  });
}

export class OfflineBench {
  private readonly log: Logger;
  private readonly project: ProjectImages;

  constructor(
    private readonly docker: Docker,
    private readonly opts: OfflineBenchOptions,
  ) {
    this.log = opts.log ?? silentLogger;
    // Always this project's agent base (an AGENT_IMAGE override has no `agent` user to rename).
    this.project = new ProjectImages(docker, { repoRoot: opts.repoRoot, log: this.log });
  }

  private say(line: string): void {
    this.opts.progress?.(line);
  }

  /** The hermes bundle next to agent.js; the agent base build makes both (build-agent.mjs). */
  private async ensureHermes(): Promise<string> {
    const path = join(this.opts.repoRoot, HERMES_BUNDLE);
    if (await exists(join(this.opts.repoRoot, "agent", "src", "hermes.ts"))) {
      try {
        await execFileP(
          process.execPath,
          [join(this.opts.repoRoot, "scripts", "build-agent.mjs"), "--if-stale"],
          {
            cwd: this.opts.repoRoot,
            timeout: 120_000,
          },
        );
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new InfraError(
          "agent_bundle_failed",
          `scripts/build-agent.mjs failed: ${e.stderr?.trim() || e.message}`,
          {
            cause: err,
            retryable: false,
          },
        );
      }
    }
    if (!(await exists(path)))
      throw new InfraError(
        "agent_bundle_failed",
        `${path} is missing (node scripts/build-agent.mjs makes it)`,
        {
          retryable: false,
        },
      );
    return path;
  }

  /** The sandbox-agent image's build: this folder, the hermes bundle, each scenario's tree. */
  sandboxAgentSpec(
    scenarios: readonly Scenario[],
    base: { ref: string; id: string },
    target: BenchTarget,
  ): ImageSpec {
    const root = this.opts.repoRoot;
    const sources: ContextSource[] = [
      { from: join(root, SANDBOX_AGENT_DIR), to: "" },
      { from: join(root, HERMES_BUNDLE), to: "hermes" },
    ];
    for (const s of scenarios) {
      // The solution never ships: only what upstream's bench ships per scenario.
      sources.push(
        { from: s.paths.taskToml, to: `scenarios/${s.name}/task.toml` },
        { from: s.paths.instruction, to: `scenarios/${s.name}/instruction.md` },
        { from: s.paths.tests, to: `scenarios/${s.name}/tests` },
        { from: s.paths.environment, to: `scenarios/${s.name}/environment` },
      );
    }
    return {
      repo: `${BENCH_CACHE_PREFIX}sandbox-agent`,
      sources,
      dockerfile: "Dockerfile",
      exclude: ["README.md"],
      buildArgs: {
        AGENT_BASE: base.ref,
        TRAJRL_BENCH_VERSION: VERSION,
        TRAJRL_SCENARIO_IMAGE_PREFIX: `${target.prefix}/scenario-`,
      },
      baseImageIds: [base.id],
      labels: { [IMAGE_KIND_LABEL]: "bench-sandbox-agent" },
    };
  }

  scenarioSpec(s: Scenario, base: { ref: string; id: string }): ImageSpec {
    return {
      repo: `${BENCH_CACHE_PREFIX}scenario-${s.name}`,
      sources: [{ from: s.paths.environment, to: "" }],
      dockerfile: "Dockerfile",
      buildArgs: { AGENT_BASE: base.ref },
      baseImageIds: [base.id],
      labels: { [IMAGE_KIND_LABEL]: "bench-scenario", "trajrl.scenario": s.name },
    };
  }

  private async tag(built: BuiltImage, ref: string): Promise<void> {
    const { repo, tag } = splitRef(ref);
    try {
      await this.docker.getImage(built.ref).tag({ repo, tag });
    } catch (err) {
      throw new InfraError("image_tag_failed", `tagging ${built.ref} as ${ref}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** Push `ref`; resolves with the registry's digest. */
  async push(ref: string, auth: PushAuth = {}, signal?: AbortSignal): Promise<string> {
    const { repo, tag } = splitRef(ref);
    let lines: string[];
    try {
      // The engine wants an X-Registry-Auth header even for an anonymous registry: {} is that.
      const stream = (await this.docker.getImage(repo).push({
        tag,
        authconfig: auth,
        ...(signal ? { abortSignal: signal } : {}),
      })) as NodeJS.ReadableStream;
      lines = await followStream(stream);
    } catch (err) {
      if (isAbortError(err) || signal?.aborted) throw err;
      throw new InfraError("image_push_failed", `pushing ${ref}: ${(err as Error).message}`, { cause: err });
    }
    const r = parsePushEvents(lines);
    if (r.error || !r.digest)
      throw new InfraError(
        "image_push_failed",
        `pushing ${ref}: ${r.error ?? "the engine reported no digest"}`,
        {
          detail: { ref, tail: lines.slice(-5) },
        },
      );
    return r.digest;
  }

  async build(req: BenchBuildRequest): Promise<BenchBuildResult> {
    const target = parseBenchTarget(req.target);
    const tag = parseBenchTag(req.tag);
    const catalogue = await loadCatalogue(this.opts.scenariosDir ?? join(this.opts.repoRoot, "scenarios"));
    const scenarios = selectScenarios(catalogue, req.scenarios ?? []);
    if (scenarios.length === 0) throw new InputError("no_scenarios", "no scenarios to build");
    const refs = benchRefs(
      target,
      tag,
      scenarios.map((s) => s.name),
    );
    const signal = req.signal;

    const t0 = performance.now();
    const agentBase = await this.project.agentBase(signal);
    this.say(`agent base ${agentBase.ref} ${agentBase.built ? "built" : "cached"}`);
    await this.ensureHermes();

    const baseBuilt = await this.project.builder.ensure(
      this.sandboxAgentSpec(scenarios, agentBase, target),
      signal,
    );
    await this.tag(baseBuilt, refs.base);
    this.say(`${refs.base} ${describe(baseBuilt)}`);
    const base: BenchImage = {
      ref: refs.base,
      cacheRef: baseBuilt.ref,
      id: baseBuilt.id,
      built: baseBuilt.built,
      buildMs: Math.round(baseBuilt.buildMs),
    };

    const out: BenchBuildResult["scenarios"] = [];
    for (const s of scenarios) {
      const b = await this.project.builder.ensure(this.scenarioSpec(s, baseBuilt), signal);
      const ref = refs.scenarios[s.name]!;
      await this.tag(b, ref);
      this.say(`${ref} ${describe(b)}`);
      out.push({
        name: s.name,
        ref,
        cacheRef: b.ref,
        id: b.id,
        built: b.built,
        buildMs: Math.round(b.buildMs),
      });
    }

    if (req.push) {
      // The base last: a validator that pulls the new base must find every scenario image it names.
      for (const img of [...out, base]) {
        const p0 = performance.now();
        img.digest = await this.push(img.ref, req.auth ?? {}, signal);
        this.say(`pushed ${img.ref} ${img.digest} (${((performance.now() - p0) / 1000).toFixed(1)} s)`);
      }
    }
    this.log.info(
      {
        bench: refs.base,
        scenarios: out.length,
        built: [base, ...out].filter((i) => i.built).length,
        pushed: req.push,
        ms: Math.round(performance.now() - t0),
      },
      "bench.build.done",
    );
    return { version: VERSION, tag, pushed: req.push, base, scenarios: out };
  }
}

function describe(b: BuiltImage): string {
  return b.built ? `built in ${(b.buildMs / 1000).toFixed(1)} s (${b.ref})` : `cached (${b.ref})`;
}
