/**
 * Re-grading an episode of the evidence on this machine's Docker engine, with the episode's own
 * grading code (src/episode gradeDeliverable / gradeBenchDeliverable): the same verifier image (by
 * id when present, else pulled by its registry digest, else — the built-in suite — built from this
 * checkout's sources when their digest is the one recorded), the same tests (the scenario's
 * tests/ under that digest, or the bench image's `tests_files_b64` under theirs), the same
 * deliverable, no model call. What cannot be re-graded says why.
 */
import { join } from "node:path";
import { type ProjectImages, probeScenarioInfo, registryAuthFor } from "../bench/index.js";
import { type GradeResult, gradeBenchDeliverable, gradeDeliverable } from "../episode/index.js";
import { toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { imageIdOf, pullImage, repositoryOf, type Sandbox } from "../sandbox/index.js";
import { type Catalogue, testFilesDigest } from "../scenarios/index.js";
import type { EvidenceEpisode, GradingRecordJson, Manifest } from "./manifest.js";

export type RegradeOutcome =
  | { kind: "graded"; qualities: number[]; failures: Array<string | null>; notes: string[] }
  | { kind: "not_reproducible"; why: string };

/** The seam `verify` re-grades through (a test may hand it another). */
export interface Regrader {
  regrade(
    m: Manifest,
    e: EvidenceEpisode,
    deliverable: Buffer | undefined,
    repeat: number,
    signal?: AbortSignal,
  ): Promise<RegradeOutcome>;
}

export interface DockerRegraderDeps {
  sandbox: Sandbox;
  /** The built-in suite's images (rebuilt from this checkout when the recorded one is gone). */
  images: ProjectImages;
  /** This checkout's scenarios (the built-in suite's tests and image sources). */
  catalogue: Catalogue | undefined;
  /** Re-grade on this network instead of the recorded one (`none`: offline). */
  network?: "none" | "bridge" | undefined;
  credentials?: { username?: string | undefined; password?: string | undefined };
  log: Logger;
}

/** What one grading needs, resolved once per episode. */
interface GraderInputs {
  image: string;
  tests: { dir: string } | { files: Record<string, Buffer> };
  notes: string[];
}

class NotReproducible extends Error {}

export class DockerRegrader implements Regrader {
  constructor(private readonly d: DockerRegraderDeps) {}

  async regrade(
    m: Manifest,
    e: EvidenceEpisode,
    deliverable: Buffer | undefined,
    repeat: number,
    signal?: AbortSignal,
  ): Promise<RegradeOutcome> {
    const g = e.grading;
    if (!g) return { kind: "not_reproducible", why: "the episode left no grading record" };
    try {
      const inputs = await this.inputs(m, e, g, signal);
      const grades: GradeResult[] = [];
      for (let k = 0; k < repeat; k++)
        grades.push(await this.gradeOnce(e, g, inputs, deliverable, k, signal));
      return {
        kind: "graded",
        qualities: grades.map((r) => r.quality),
        failures: grades.map((r) => r.failure?.code ?? null),
        notes: inputs.notes,
      };
    } catch (err) {
      if (err instanceof NotReproducible) return { kind: "not_reproducible", why: err.message };
      if (signal?.aborted) throw err;
      return { kind: "not_reproducible", why: `the re-grade failed: ${toValidatorError(err).message}` };
    }
  }

  private async inputs(
    m: Manifest,
    e: EvidenceEpisode,
    g: GradingRecordJson,
    signal?: AbortSignal,
  ): Promise<GraderInputs> {
    return g.tests.kind === "scenario" ? this.builtinInputs(e, g, signal) : this.benchInputs(m, e, g, signal);
  }

  private async builtinInputs(
    e: EvidenceEpisode,
    g: GradingRecordJson,
    signal?: AbortSignal,
  ): Promise<GraderInputs> {
    const s = this.d.catalogue?.byName(e.scenario);
    if (!s) throw new NotReproducible(`scenario ${e.scenario} is not in this checkout's scenarios/`);
    if (g.tests.digest === null || s.digest !== g.tests.digest)
      throw new NotReproducible(
        `this checkout's scenarios/${e.scenario} (digest ${s.digest.slice(0, 12)}…) is not what graded it (${g.tests.digest?.slice(0, 12) ?? "unknown"}…)`,
      );
    if (await imageIdOf(this.d.sandbox.docker, g.image.id))
      return { image: g.image.id, tests: { dir: join(s.dir, "tests") }, notes: [] };
    const built = await this.d.images.scenario(s, signal);
    const notes =
      built.id === g.image.id
        ? []
        : [
            `image rebuilt from the matching sources (${built.id.slice(7, 19)}, recorded ${g.image.id.slice(7, 19)})`,
          ];
    return { image: built.id, tests: { dir: join(s.dir, "tests") }, notes };
  }

  private async benchInputs(
    m: Manifest,
    e: EvidenceEpisode,
    g: GradingRecordJson,
    signal?: AbortSignal,
  ): Promise<GraderInputs> {
    const image = await this.registryImage(
      g.image.id,
      g.image.repo_digest,
      `scenario ${e.scenario}'s image`,
      signal,
    );
    const bench = m.bench ?? {};
    const benchRef = typeof bench.ref === "string" ? bench.ref : undefined;
    const benchDigest = typeof bench.benchImageHash === "string" ? bench.benchImageHash : undefined;
    if (!benchRef || !benchDigest)
      throw new NotReproducible("the evidence does not name the bench image its tests came from");
    const benchImage = await this.registryImage(
      benchDigest,
      `${repositoryOf(benchRef)}@${benchDigest}`,
      "the bench image",
      signal,
    );
    const info = await probeScenarioInfo(
      this.d.sandbox.docker,
      this.d.sandbox.session,
      benchImage,
      e.scenario,
      signal,
    );
    const files = Object.fromEntries(
      Object.entries(info.tests_files_b64).map(([f, b]) => [f, Buffer.from(b, "base64")]),
    );
    if (testFilesDigest(files) !== g.tests.digest)
      throw new NotReproducible(
        `the bench image's tests of ${e.scenario} are not the ones that graded it (digest differs)`,
      );
    return { image, tests: { files }, notes: [] };
  }

  /** An image by id when present, else by its registry digest: present under it, or pulled. */
  private async registryImage(
    id: string,
    digestRef: string | null,
    what: string,
    signal?: AbortSignal,
  ): Promise<string> {
    const docker = this.d.sandbox.docker;
    if (await imageIdOf(docker, id)) return id;
    if (!digestRef?.includes("@"))
      throw new NotReproducible(
        `${what} (${id.slice(0, 19)}) is not on this host and has no registry digest to pull`,
      );
    const present = await imageIdOf(docker, digestRef);
    if (present) return present;
    const auth = await registryAuthFor(digestRef, this.d.credentials ?? {});
    try {
      const pulled = await pullImage(docker, digestRef, {
        ...(auth ? { auth } : {}),
        ...(signal ? { signal } : {}),
      });
      return pulled.id;
    } catch (err) {
      throw new NotReproducible(`${what} ${digestRef} could not be pulled: ${toValidatorError(err).message}`);
    }
  }

  private async gradeOnce(
    e: EvidenceEpisode,
    g: GradingRecordJson,
    inputs: GraderInputs,
    deliverable: Buffer | undefined,
    k: number,
    signal?: AbortSignal,
  ): Promise<GradeResult> {
    const scope = this.d.sandbox.openScope(`verify-${e.episode_id}-${k}`, g.timeout_ms + 10 * 60_000);
    const common = {
      engine: this.d.sandbox.episodeEngine,
      scope,
      image: inputs.image,
      agentOutputPath: g.agent_output_path,
      timeoutMs: g.timeout_ms,
      ...(signal ? { signal } : {}),
    };
    try {
      if ("files" in inputs.tests)
        return await gradeBenchDeliverable({
          ...common,
          networks: this.d.sandbox.networks,
          testFiles: inputs.tests.files,
          deliverable,
          network: this.d.network ?? g.network,
        });
      return await gradeDeliverable({
        ...common,
        testsDir: inputs.tests.dir,
        deliverable: deliverable ?? Buffer.alloc(0),
        report: { channel: g.grader === "files" ? "files" : "harness", tests: g.declared_tests ?? undefined },
        log: this.d.log,
      });
    } finally {
      await scope.dispose();
    }
  }
}
