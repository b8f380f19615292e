/**
 * The subnet's benchmark (trajrl-bench) as a bench source, as upstream's validator uses it
 * (sandbox_harness.py `_pull_sync`, `_load_scenario_info`, `_scenario_image_ref`): at the start of
 * every evaluation the bench image is pulled (a failed pull keeps the cached image, with a
 * warning), probed (`scenarios`: version and harness identity), each scenario of the spec probed
 * (`scenario-info`) and its image `{image_repo}:{tag of the bench ref}` pulled. Digests: the bench
 * image's RepoDigest, and the scenario images' joined with ':' in the LOCAL spec's order over what
 * this preparation pulled (`missing` for one whose pull failed, even with a cached copy) — as
 * upstream's `_pull_sync` joins them (sandbox_harness.py at v0.6.31 319e21c: SANDBOX_SCENARIOS over
 * `scenario_image_hashes`), what every verdict and heartbeat carries. A local-spec scenario the
 * evaluated spec lacks is probed and pulled for its digest (upstream pulls every spec's scenarios).
 */
import type { EpisodeImages, EpisodeRuntime, EpisodeScenario, SidecarSdk } from "../episode/index.js";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import {
  type BuiltImage,
  type Docker,
  type PulledImage,
  pullImage,
  type RegistryAuth,
  repositoryOf,
  type SandboxSession,
  tagOf,
} from "../sandbox/index.js";
import { probeScenarioInfo, probeScenarios, type ScenarioInfoProbe, type ScenariosProbe } from "./probes.js";
import { registryAuthFor } from "./registry-auth.js";
import type { BenchProgress, BenchResolution, BenchSource, PreparedBench } from "./source.js";
import { resolveSubnetSpec, type SubnetSpecTable } from "./subnet-specs.js";

export const DEFAULT_BENCH_REPO = "ghcr.io/trajectoryrl/sandbox-agent";
/** Upstream's fallback agent budget when a bench image does not say (sandbox_timeout_per_episode). */
export const DEFAULT_AGENT_TIMEOUT_SEC = 600;

/** BENCH_IMAGE when set, else upstream's `ghcr.io/trajectoryrl/sandbox-agent:{IMAGE_CHANNEL}`. */
export function benchImageRef(benchImage: string | undefined, channel: string): string {
  return benchImage ?? `${DEFAULT_BENCH_REPO}:${channel}`;
}

export interface RegistryBenchOptions {
  docker: Docker;
  session: SandboxSession;
  /** The bench image reference (BENCH_IMAGE / IMAGE_CHANNEL). */
  ref: string;
  specs: SubnetSpecTable;
  sdk: SidecarSdk;
  verifierNetwork: "none" | "bridge";
  credentials?: {
    username?: string | undefined;
    password?: string | undefined;
    dockerConfigDir?: string | undefined;
  };
  log?: Logger;
}

const asBuilt = (p: PulledImage): BuiltImage => ({
  ref: p.ref,
  id: p.id,
  hash: p.digest,
  built: false,
  buildMs: 0,
  // A digest other than the id is the registry's: other engines of the pool can pull exactly it.
  ...(p.digest !== p.id ? { repoDigest: `${repositoryOf(p.ref)}@${p.digest}` } : {}),
});

export class RegistryBench implements BenchSource {
  readonly kind = "registry" as const;
  readonly label: string;
  private readonly log: Logger;
  /** The last probe of the bench image: what heartbeats report between evaluations. */
  lastBench: { image: PulledImage; probe: ScenariosProbe } | undefined;

  constructor(private readonly opts: RegistryBenchOptions) {
    this.log = opts.log ?? silentLogger;
    this.label = `trajrl-bench ${opts.ref}`;
  }

  resolve(req: { specNumber?: unknown; scenarios?: readonly string[] }): BenchResolution {
    const r = resolveSubnetSpec(this.opts.specs, req.specNumber);
    const explicit = req.scenarios !== undefined && req.scenarios.length > 0;
    const names = explicit ? [...(req.scenarios ?? [])] : [...r.scenarios];
    // A subnet spec's verdict joins the digests in the local spec's order; an explicit list (eval) its own.
    const local = this.opts.specs.specs.get(this.opts.specs.local)?.scenarios;
    return {
      spec: r.spec,
      names,
      episodeCapUsd: r.episodeCapUsd,
      ...(r.fellBackFrom !== undefined ? { fellBackFrom: r.fellBackFrom } : {}),
      ...(!explicit && local ? { hashOrder: [...local] } : {}),
    };
  }

  private async auth(ref: string): Promise<RegistryAuth | undefined> {
    return registryAuthFor(ref, this.opts.credentials ?? {});
  }

  private async pull(
    label: string,
    ref: string,
    opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void },
  ): Promise<PulledImage> {
    const t0 = performance.now();
    opts.onProgress?.({ image: label, ref, phase: "pulling" });
    const auth = await this.auth(ref);
    const pulled = await pullImage(this.opts.docker, ref, {
      ...(auth ? { auth } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
      onProgress: (p) =>
        opts.onProgress?.({ image: label, ref, phase: "pulling", bytes: p.bytes, totalBytes: p.totalBytes }),
    });
    const ms = performance.now() - t0;
    if (pulled.fromCache) {
      this.log.warn({ image: ref, err: pulled.pullError }, "bench.pull_failed_using_cached");
      opts.onProgress?.({ image: label, ref, phase: "fallback", ms, note: pulled.pullError ?? "" });
    } else {
      this.log.info(
        { image: ref, digest: pulled.digest, changed: pulled.changed, ms: Math.round(ms) },
        "bench.pulled",
      );
      opts.onProgress?.({ image: label, ref, phase: pulled.isNew ? "ready" : "cached", ms });
    }
    return pulled;
  }

  /** Pull and probe the bench image (also what the heartbeat reports). */
  async refreshBench(opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void } = {}): Promise<{
    image: PulledImage;
    probe: ScenariosProbe;
  }> {
    const image = await this.pull("bench", this.opts.ref, opts);
    const probe = await probeScenarios(this.opts.docker, this.opts.session, this.opts.ref, opts.signal);
    this.lastBench = { image, probe };
    return this.lastBench;
  }

  /**
   * Each scenario's probe (a throw-away container) and then its pull, three at a time: the evaluated
   * ones (a failure fails the preparation), then the hash order's others the bench lists, for their
   * digest only (a failure leaves them `missing`, as upstream's `_pull_sync` does).
   */
  private async pullScenarios(
    r: BenchResolution,
    shipped: ReadonlySet<string>,
    opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void },
  ): Promise<{ infos: Map<string, ScenarioInfoProbe>; pulled: Map<string, PulledImage> }> {
    const tag = tagOf(this.opts.ref);
    const infos = new Map<string, ScenarioInfoProbe>();
    const pulled = new Map<string, PulledImage>();
    const evaluated = new Set(r.names);
    // A hash-only scenario the bench does not list cannot be probed: `missing` without trying.
    const hashOnly = (r.hashOrder ?? []).filter((n) => !evaluated.has(n) && shipped.has(n));
    const queue = [...r.names, ...hashOnly];
    const one = async (n: string) => {
      const info = await probeScenarioInfo(
        this.opts.docker,
        this.opts.session,
        this.opts.ref,
        n,
        opts.signal,
      );
      infos.set(n, info);
      pulled.set(n, await this.pull(`scenario/${n}`, `${info.image_repo}:${tag}`, opts));
    };
    await Promise.all(
      Array.from({ length: 3 }, async () => {
        for (let n = queue.shift(); n; n = queue.shift()) {
          if (evaluated.has(n)) await one(n);
          else
            await one(n).catch((err: unknown) => {
              if (opts.signal?.aborted) throw err;
              this.log.warn(
                { scenario: n, err: (err as Error).message },
                "bench.hash_only_scenario_unavailable",
              );
            });
        }
      }),
    );
    return { infos, pulled };
  }

  async prepare(
    r: BenchResolution,
    opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void } = {},
  ): Promise<PreparedBench> {
    const { image: bench, probe } = await this.refreshBench(opts);
    const shipped = new Set(probe.scenarios);
    const unknown = r.names.filter((n) => !shipped.has(n));
    if (unknown.length)
      this.log.warn({ unknown, bench: this.opts.ref }, "bench.scenarios_not_listed_by_bench");
    const { infos, pulled } = await this.pullScenarios(r, shipped, opts);
    const scenarios: EpisodeScenario[] = r.names.map((n) => {
      const info = infos.get(n)!;
      return {
        name: n,
        dir: "",
        instruction: info.instruction_md,
        task: {
          agent: { timeout_sec: info.agent_timeout_s ?? DEFAULT_AGENT_TIMEOUT_SEC },
          verifier: { timeout_sec: info.verifier_timeout_s, agent_output_path: info.agent_output_path },
        },
        testFiles: Object.fromEntries(
          Object.entries(info.tests_files_b64).map(([f, b64]) => [f, Buffer.from(b64, "base64")]),
        ),
      };
    });
    const benchBuilt = asBuilt(bench);
    const images: EpisodeImages = {
      sidecar: async () => benchBuilt,
      scenario: async (s) => {
        const p = pulled.get(s.name);
        if (!p) throw new InfraError("image_missing", `no image was prepared for scenario ${s.name}`);
        return asBuilt(p);
      },
    };
    const runtime: EpisodeRuntime = {
      kind: "bench",
      sdk: this.opts.sdk,
      verifierNetwork: this.opts.verifierNetwork,
    };
    const scenarioDigests = Object.fromEntries(r.names.map((n) => [n, pulled.get(n)!.digest]));
    return {
      scenarios,
      images,
      runtime,
      provenance: {
        benchImageHash: bench.digest,
        harnessImageHash: harnessImageHashOf(r.hashOrder ?? r.names, pulled),
        benchVersion: probe.version,
        ...(probe.harness_name ? { harnessName: probe.harness_name } : {}),
        ...(probe.harness_version ? { harnessVersion: probe.harness_version } : {}),
        scenarioDigests,
      },
    };
  }
}

/**
 * `harness_image_hash`: the digests of `order`, joined with ':', `missing` for a scenario this
 * preparation did not pull (a failed pull served from the cache included), as upstream's join over
 * `scenario_image_hashes`, which a failed pull leaves without the scenario.
 */
export function harnessImageHashOf(
  order: readonly string[],
  pulled: ReadonlyMap<string, PulledImage>,
): string {
  return order
    .map((n) => {
      const p = pulled.get(n);
      return p && !p.fromCache ? p.digest : "missing";
    })
    .join(":");
}
