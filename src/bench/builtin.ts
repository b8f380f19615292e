/**
 * The built-in suite as a bench source: the scenarios/ catalogue of this repository, its images
 * built locally by content hash, our agent and our sidecar image. The offline suite for CI, the
 * demo and miners without a registry; never the subnet's benchmark. Its sets have names
 * (scenarios/suites.json) and never a subnet spec number: every resolution is spec BUILTIN_SPEC (0)
 * with the suite's name beside it, whatever spec number a caller (a local platform) names.
 */
import { AGENT_VERSION } from "../../agent/contract.js";
import type { EpisodeRuntime } from "../episode/index.js";
import {
  BUILTIN_SPEC,
  type Catalogue,
  CUSTOM_SUITE,
  resolveSuite,
  selectScenarios,
} from "../scenarios/index.js";
import type { ProjectImages } from "./project-images.js";
import type { BenchProgress, BenchResolution, BenchSource, PreparedBench } from "./source.js";

export class BuiltinBench implements BenchSource {
  readonly kind = "builtin" as const;
  readonly label = "built-in suite";
  private readonly runtime: EpisodeRuntime = { kind: "builtin" };

  constructor(
    readonly catalogue: Catalogue,
    readonly images: ProjectImages,
    /** `defaultSuite`: SUITE, else the catalogue's default (suites.json). */
    private readonly opts: { episodeCapUsd: number; defaultSuite?: string | undefined },
  ) {
    // An unknown SUITE is the operator's mistake: said when the environment opens, not per pack.
    if (opts.defaultSuite !== undefined) resolveSuite(catalogue, opts.defaultSuite);
  }

  /** The scenarios to run: an explicit list (suite `custom`), else the named suite, else the default. */
  resolve(req: { specNumber?: unknown; suite?: string; scenarios?: readonly string[] }): BenchResolution {
    if (req.scenarios && req.scenarios.length > 0)
      return {
        spec: BUILTIN_SPEC,
        suite: CUSTOM_SUITE,
        names: selectScenarios(this.catalogue, req.scenarios).map((s) => s.name),
        episodeCapUsd: this.opts.episodeCapUsd,
      };
    const r = resolveSuite(this.catalogue, req.suite ?? this.opts.defaultSuite);
    return {
      spec: BUILTIN_SPEC,
      suite: r.suite,
      names: r.scenarios.map((s) => s.name),
      episodeCapUsd: this.opts.episodeCapUsd,
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
