/**
 * The built-in suite's images, built through the engine's build API from this repository: the
 * agent base, the policy sidecar and one image per scenario (FROM the agent base, passed as the
 * AGENT_BASE build arg with its exact tag), each tagged by the content hash of its context.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { AGENT_BASE_CONTEXT } from "../../agent/contract.js";
import type { ScenarioImageSource } from "../episode/index.js";
import { InfraError } from "../errors.js";
import { exists } from "../fs.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { sidecarBuildContext } from "../policy/index.js";
import {
  type BuiltImage,
  type Docker,
  IMAGE_CHECKOUT_LABEL,
  IMAGE_KIND_LABEL,
  ImageBuilder,
  type ImageSpec,
} from "../sandbox/index.js";

/** Where the project's images come from in the repository. */
export interface ProjectImagesOptions {
  repoRoot: string;
  /** Operator override for the agent base (e.g. a Hermes image); used as-is, never built. */
  agentImage?: string;
  /** Operator override for the sidecar image; used as-is, never built. */
  sidecarImage?: string;
  log?: Logger;
}

const execFileP = promisify(execFile);

/**
 * The project's three kinds of images: the agent base, the policy sidecar and one image per
 * scenario (built FROM the agent base, passed as the AGENT_BASE build arg with its exact tag).
 */
export class ProjectImages {
  readonly builder: ImageBuilder;
  private readonly log: Logger;
  private agentBuild: Promise<void> | undefined;
  private agentChecked = false;

  constructor(
    docker: Docker,
    readonly opts: ProjectImagesOptions,
  ) {
    this.log = opts.log ?? silentLogger;
    this.builder = new ImageBuilder(docker, this.log);
  }

  /**
   * agent/dist/agent.js is a build product: made when missing, refreshed when its sources are
   * newer (once per process; a deployed validator without agent/src just uses the bundle).
   */
  private async ensureAgentBundle(): Promise<string> {
    const root = this.opts.repoRoot;
    const bundle = join(root, AGENT_BASE_CONTEXT.extra[0]?.from ?? "agent/dist/agent.js");
    const present = await exists(bundle);
    const hasSources = await exists(join(root, "agent", "src", "main.ts"));
    if (present && (!hasSources || this.agentChecked)) return bundle;
    this.agentBuild ??= (async () => {
      const script = join(root, "scripts", "build-agent.mjs");
      this.log.info({ script, missing: !present }, "agent.bundle.build");
      try {
        await execFileP(process.execPath, present ? [script, "--if-stale"] : [script], {
          cwd: root,
          timeout: 120_000,
        });
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new InfraError(
          "agent_bundle_failed",
          `agent/dist/agent.js could not be built (\`node scripts/build-agent.mjs\`): ${e.stderr?.trim() || e.message}`,
          { cause: err, retryable: false },
        );
      }
      this.agentChecked = true;
    })();
    try {
      await this.agentBuild;
    } finally {
      this.agentBuild = undefined;
    }
    if (!(await exists(bundle)))
      throw new InfraError("agent_bundle_failed", `scripts/build-agent.mjs did not produce ${bundle}`, {
        retryable: false,
      });
    return bundle;
  }

  private agentBaseSpec(): ImageSpec {
    const root = this.opts.repoRoot;
    return {
      repo: "trajrl/agent-base",
      // The layout the agent module declares: its Dockerfile folder at the root, plus the bundle.
      sources: [
        { from: join(root, AGENT_BASE_CONTEXT.dockerfileDir), to: "" },
        ...AGENT_BASE_CONTEXT.extra.map((e) => ({ from: join(root, e.from), to: e.to })),
      ],
      dockerfile: AGENT_BASE_CONTEXT.dockerfile,
      labels: { [IMAGE_KIND_LABEL]: "agent-base", [IMAGE_CHECKOUT_LABEL]: this.opts.repoRoot },
    };
  }

  private sidecarSpec(): ImageSpec {
    // The sidecar module names its context: the Dockerfile plus the runtime files, repo-relative.
    const ctx = sidecarBuildContext();
    return {
      repo: "trajrl/sidecar",
      sources: ctx.files.map((f) => ({ from: join(ctx.root, f), to: f })),
      dockerfile: ctx.dockerfile,
      labels: { [IMAGE_KIND_LABEL]: "sidecar", [IMAGE_CHECKOUT_LABEL]: this.opts.repoRoot },
    };
  }

  /** The meter relay and engine firewall helper of the pool's remote engines (docker/images/meter-relay). */
  private meterRelaySpec(): ImageSpec {
    const dir = join(this.opts.repoRoot, "docker", "images", "meter-relay");
    return {
      repo: "trajrl/meter-relay",
      sources: [{ from: dir, to: "" }],
      dockerfile: "Dockerfile",
      labels: { [IMAGE_KIND_LABEL]: "meter-relay", [IMAGE_CHECKOUT_LABEL]: this.opts.repoRoot },
    };
  }

  private scenarioSpec(s: ScenarioImageSource, base: { ref: string; id: string }): ImageSpec {
    return {
      repo: `trajrl/scenario-${s.name.toLowerCase().replace(/[^a-z0-9_.-]/g, "-")}`,
      sources: [{ from: join(s.dir, "environment"), to: "" }],
      dockerfile: "Dockerfile",
      buildArgs: { AGENT_BASE: base.ref },
      baseImageIds: [base.id],
      labels: {
        [IMAGE_KIND_LABEL]: "scenario",
        "trajrl.scenario": s.name,
        [IMAGE_CHECKOUT_LABEL]: this.opts.repoRoot,
      },
    };
  }

  async agentBase(signal?: AbortSignal): Promise<BuiltImage> {
    if (this.opts.agentImage) return this.builder.existing(this.opts.agentImage);
    await this.ensureAgentBundle();
    return this.builder.ensure(this.agentBaseSpec(), signal);
  }

  async sidecar(signal?: AbortSignal): Promise<BuiltImage> {
    if (this.opts.sidecarImage) return this.builder.existing(this.opts.sidecarImage);
    return this.builder.ensure(this.sidecarSpec(), signal);
  }

  /** Built on this engine; the pool copies it to the others. */
  async meterRelay(signal?: AbortSignal): Promise<BuiltImage> {
    return this.builder.ensure(this.meterRelaySpec(), signal);
  }

  async scenario(s: ScenarioImageSource, signal?: AbortSignal): Promise<BuiltImage> {
    const base = await this.agentBase(signal);
    return this.builder.ensure(this.scenarioSpec(s, base), signal);
  }

  /**
   * The references this checkout's images have now, built or not: the agent base and the sidecar
   * (or the operator's overrides), and each of `scenarios` FROM the current agent base when that
   * base exists (a scenario image FROM another base is not current). Nothing is built.
   */
  async currentRefs(scenarios: readonly ScenarioImageSource[]): Promise<Set<string>> {
    const keep = new Set<string>();
    let base: { ref: string; id: string } | undefined;
    if (this.opts.agentImage) {
      keep.add(this.opts.agentImage);
      base = await this.builder.existing(this.opts.agentImage).catch(() => undefined);
    } else {
      await this.ensureAgentBundle();
      const { ref, hash } = await this.builder.resolve(this.agentBaseSpec());
      keep.add(ref);
      const id = await this.builder.lookup(ref, hash);
      if (id) base = { ref, id };
    }
    keep.add(this.opts.sidecarImage ?? (await this.builder.resolve(this.sidecarSpec())).ref);
    keep.add((await this.builder.resolve(this.meterRelaySpec())).ref);
    if (base)
      for (const s of scenarios) keep.add((await this.builder.resolve(this.scenarioSpec(s, base))).ref);
    return keep;
  }
}
