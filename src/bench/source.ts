/**
 * The seam between an evaluation and where its scenarios come from. Two sources:
 *  - `builtin`: this repository's scenarios/ folder, images built locally (the offline suite);
 *  - `registry`: the subnet's benchmark (trajrl-bench), a bench image and one image per scenario
 *    pulled from a registry, scenarios described by the bench's own probes.
 * An evaluation resolves its spec (no I/O beyond what is loaded), then prepares it (builds or
 * pulls, probes): what comes back is what the episodes run, and the digests the verdict carries.
 */
import type { EpisodeImages, EpisodeRuntime, EpisodeScenario } from "../episode/index.js";

export type BenchKind = "builtin" | "registry";

export interface BenchResolution {
  /** The subnet spec the evaluation is scored under; BUILTIN_SPEC (0, no subnet spec) for the built-in suite. */
  spec: number;
  /** The built-in suite's set that runs (`builtin`, `quick`, … or `custom`); absent for the subnet's benchmark. */
  suite?: string;
  /** Scenario names, in the spec's order. */
  names: readonly string[];
  episodeCapUsd: number;
  /** The spec the caller asked for when it is not known here (evaluated `spec` instead). */
  fellBackFrom?: unknown;
  /**
   * The scenarios whose digests `harnessImageHash` joins, in that order, when not `names`: upstream
   * joins its local spec's (sandbox_harness.py `_pull_sync`: SANDBOX_SCENARIOS over what it pulled).
   */
  hashOrder?: readonly string[];
}

export interface BenchProgress {
  /** What is being prepared: `bench`, `sidecar`, `agent-base`, `scenario/<name>`. */
  image: string;
  ref: string;
  phase: "pulling" | "building" | "copying" | "ready" | "cached" | "fallback";
  /** Another engine of the pool the image is being placed on (copied from the first, or pulled by digest). */
  engine?: string;
  bytes?: number;
  totalBytes?: number;
  ms?: number;
  note?: string;
}

/** Where the images that scored a pack came from, as the platform receives it. */
export interface BenchProvenance {
  /** The bench image's registry digest (registry source). */
  benchImageHash?: string;
  /** Per-scenario image digests joined with ':' in `hashOrder` (`missing` for one not pulled this time). */
  harnessImageHash: string;
  benchVersion?: string;
  harnessName?: string;
  harnessVersion?: string;
  /** Scenario name → image digest (or id for a local build). */
  scenarioDigests: Record<string, string>;
}

export interface PreparedBench {
  scenarios: EpisodeScenario[];
  images: EpisodeImages;
  runtime: EpisodeRuntime;
  provenance: BenchProvenance;
}

export interface BenchSource {
  readonly kind: BenchKind;
  /** A short description for people (`built-in suite`, `bench 127.0.0.1:5000/…:T`). */
  readonly label: string;
  /**
   * `specNumber` names a subnet spec (the registry bench; the built-in suite ignores it), `suite` a
   * set of the built-in suite (the registry bench has none), `scenarios` an explicit list.
   */
  resolve(req: { specNumber?: unknown; suite?: string; scenarios?: readonly string[] }): BenchResolution;
  prepare(
    r: BenchResolution,
    opts?: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void },
  ): Promise<PreparedBench>;
}
