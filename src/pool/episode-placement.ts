/** Where one episode runs, as the evaluation sees it: a placement, an engine's loss, the one-sandbox case. */
import type { EpisodeImages, EpisodeResult } from "../episode/index.js";
import { InfraError } from "../errors.js";
import type { Sandbox } from "../sandbox/index.js";

/** Where one episode runs: what runEpisode needs of the engine. */
export interface Placement {
  engine: string;
  sandbox: Sandbox;
  /** The evaluation's signal, and the engine's loss. */
  signal: AbortSignal;
  /** The evaluation's images, placed on this engine before they are used. */
  images(of: EpisodeImages): EpisodeImages;
}

export interface EvaluationPlacement {
  /** Run one attempt of `scenario` on an engine; an engine lost meanwhile makes it `engine_lost` (infra). */
  run(
    scenario: string,
    signal: AbortSignal,
    fn: (p: Placement) => Promise<EpisodeResult>,
    /** The episode's id, for the placement's log line. */
    episode?: string,
  ): Promise<EpisodeResult>;
}

/** An attempt cut short by its engine's loss says nothing of the policy: infra, re-run elsewhere. */
export function engineLost(r: EpisodeResult, engine: string, reason: unknown): EpisodeResult {
  const why = reason instanceof Error ? reason.message : `engine ${engine} went away`;
  return {
    ...r,
    status: "failed",
    quality: 0,
    failure: {
      class: "infra",
      code: "engine_lost",
      message: `${why} during the episode; it runs again (on another engine while one has a free slot)`,
    },
    notes: [...r.notes, "engine_lost"],
  };
}

/** Without a pool (tests that build an environment by hand): every episode on the one sandbox. */
export function singleEngine(sandbox: Sandbox): EvaluationPlacement {
  return {
    run: (_scenario, signal, fn) => fn({ engine: "local", sandbox, signal, images: (of) => of }),
  };
}

/**
 * `episode`, unless its engine is lost and it has not ended `graceMs` later: then it is given up as
 * `engine_lost` (infra: re-run on another engine) whatever it still waits on over there, so an
 * evaluation never stalls on an engine that went away. (`onAbandon` is told; the episode's scope
 * stays live and goes with the engine's last sweep.)
 */
export function unlessStuckAfterLoss<T>(
  episode: Promise<T>,
  lost: AbortSignal,
  graceMs: number,
  onAbandon: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onLost = () => {
      timer = setTimeout(() => {
        onAbandon();
        reject(
          new InfraError(
            "engine_lost",
            `the episode did not end within ${Math.round(graceMs / 1000)} s of its engine's loss and was given up; it runs again`,
          ),
        );
      }, graceMs);
    };
    if (lost.aborted) onLost();
    else lost.addEventListener("abort", onLost, { once: true });
    episode.then(resolve, reject).finally(() => {
      clearTimeout(timer);
      lost.removeEventListener("abort", onLost);
    });
  });
}
