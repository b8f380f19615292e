/**
 * The daemon's seam to the evaluation: the three functions it calls, as a value, so tests can hand
 * the daemon a pipeline of their own. The real one (src/environment's composition root and
 * src/evaluation's evaluatePack) is loaded lazily: it pulls in Docker, the meter and the simulator.
 */
import type { Config } from "../config.js";
import type { Environment } from "../environment/index.js";
import { InfraError } from "../errors.js";
import type { EvaluationResult, PackEvaluationRequest, Verdict } from "../evaluation/index.js";
import type { Logger } from "../log.js";
import type { ScoreVerdict } from "../platform/index.js";
import type { LiveStatus } from "../status/index.js";
import type { Db, NetworkId } from "../store/index.js";

export type { PackEvaluationRequest } from "../evaluation/index.js";

export type PackEvaluation = EvaluationResult;

/**
 * What the daemon holds of the environment the pipeline opened: the parts it uses itself, and the
 * evaluation bound to that environment (so no caller hands an environment back in, and src/evaluation's
 * EvaluationEnvironment stays the one type of that name). A test pipeline provides just this.
 */
export interface OpenedEnvironment
  extends Pick<Environment, "config" | "log" | "db" | "live" | "priceTableHash" | "close"> {
  evaluatePack(req: PackEvaluationRequest): Promise<PackEvaluation>;
}

export interface Pipeline {
  openEnvironment(
    config: Config,
    opts: { log: Logger; live?: LiveStatus; db?: Db; bench?: "builtin" | "registry"; network?: NetworkId },
  ): Promise<OpenedEnvironment>;
  toScoreVerdict(v: Verdict): ScoreVerdict;
}

/** The real pipeline. */
export async function loadPipeline(): Promise<Pipeline> {
  try {
    const [environment, evaluation] = await Promise.all([
      import("../environment/index.js"),
      import("../evaluation/index.js"),
    ]);
    const real: Pipeline = {
      openEnvironment: async (config, opts) => {
        const env = await environment.openEnvironment(config, opts);
        const { log, db, live, priceTableHash } = env;
        return {
          config: env.config,
          log,
          db,
          live,
          priceTableHash,
          close: () => env.close(),
          evaluatePack: (req) => evaluation.evaluatePack(env, req),
        };
      },
      toScoreVerdict: evaluation.toScoreVerdict,
    };
    return real;
  } catch (err) {
    throw new InfraError(
      "pipeline_unavailable",
      `cannot load the evaluation pipeline: ${(err as Error).message}`,
      {
        cause: err,
        retryable: false,
      },
    );
  }
}
