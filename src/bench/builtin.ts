/**
 * The built-in suite as a bench source: the scenarios/ catalogue of this repository, its images
 * built locally by content hash, our agent and our sidecar image. The offline suite for CI, the
 * demo and miners without a registry; never the subnet's benchmark.
 */
import { AGENT_VERSION } from "../../agent/contract.js";
import type { EpisodeRuntime } from "../episode/index.js";
import { type Catalogue, resolveSpecOrDefault, selectScenarios } from "../scenarios/index.js";
import type { ProjectImages } from "./project-images.js";
import type { BenchProgress, BenchResolution, BenchSource, PreparedBench } from "./source.js";

export class BuiltinBench implements BenchSource {
  readonly kind = "builtin" as const;
  readonly label = "built-in suite";
  private readonly runtime: EpisodeRuntime = { kind: "builtin" };

  constructor(
    readonly catalogue: Catalogue,
    readonly images: ProjectImages,
    private readonly opts: { episodeCapUsd: number; defaultSpec: number | undefined },
  ) {}

  resolve(req: { specNumber?: unknown; scenarios?: readonly string[] }): BenchResolution {
    const asked = typeof req.specNumber === "number" ? req.specNumber : this.opts.defaultSpec;
    const resolved = resolveSpecOrDefault(this.catalogue, asked);
    const names =
      req.scenarios && req.scenarios.length > 0
        ? selectScenarios(this.catalogue, req.scenarios).map((s) => s.name)
        : resolved.scenarios.map((s) => s.name);
    return {
      spec: resolved.spec,
      names,
      episodeCapUsd: this.opts.episodeCapUsd,
      ...(resolved.fellBackFrom !== undefined ? { fellBackFrom: resolved.fellBackFrom } : {}),
    };
  }

  async prepare(
    r: BenchResolution,
    opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void } = {},
  ): Promise<PreparedBench> {
    const scenarios = selectScenarios(this.catalogue, [...r.names]);
    const t0 = performance.now();
    const note = (image: string) => (img: { ref: string; built: boolean }) =>
      opts.onProgress?.({
        image,
        ref: img.ref,
        phase: img.built ? "ready" : "cached",
        ms: performance.now() - t0,
      });
    await Promise.all([
      this.images.agentBase(opts.signal).then(note("agent-base")),
      this.images.sidecar(opts.signal).then(note("sidecar")),
    ]);
    const digests: Record<string, string> = {};
    const queue = [...scenarios];
    await Promise.all(
      Array.from({ length: 2 }, async () => {
        for (let s = queue.shift(); s; s = queue.shift()) {
          const img = await this.images.scenario(s, opts.signal);
          digests[s.name] = img.id;
          note(`scenario/${s.name}`)(img);
        }
      }),
    );
    return {
      scenarios,
      images: this.images,
      runtime: this.runtime,
      provenance: {
        harnessImageHash: r.names.map((n) => digests[n] ?? "missing").join(":"),
        // The built-in suite's agent is ours.
        harnessName: "trajrl-agent",
        harnessVersion: AGENT_VERSION,
        scenarioDigests: digests,
      },
    };
  }
}
