/**
 * The specs a verdict and a seat check refer to, resolved without the evaluation pipeline: the
 * subnet's spec table for the registry bench, the built-in suite's size and spec otherwise.
 */
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { benchFor } from "./subnet-rules.js";

/** A spec's maximum score (Σ of per-scenario scores in [0, 1]: its scenario count), for the seat check. */
export async function maxScoreOf(
  config: Config,
  scenarios: readonly string[] | undefined,
  spec: number,
): Promise<number | undefined> {
  if (benchFor(config) === "registry") {
    const { loadSubnetSpecs } = await import("../bench/index.js");
    return (await loadSubnetSpecs(config.evaluation.subnetSpecsFile)).specs.get(spec)?.scenarios.length;
  }
  // The built-in suite (NETWORK=local) runs its set whatever spec the platform names: the set's size.
  if (scenarios) return scenarios.length;
  const { loadCatalogue, resolveSuite } = await import("../scenarios/index.js");
  const catalogue = await loadCatalogue(config.evaluation.scenariosDir);
  return resolveSuite(catalogue, config.evaluation.suite).scenarios.length;
}

/** The spec a verdict made without the pipeline reports: the epoch's if this build knows it, else the default. */
export async function specFor(config: Config, log: Logger, requested: number | null): Promise<number> {
  const want = requested ?? config.evaluation.specNumber;
  try {
    if (benchFor(config) === "registry") {
      const { loadSubnetSpecs, resolveSubnetSpec } = await import("../bench/index.js");
      return resolveSubnetSpec(await loadSubnetSpecs(config.evaluation.subnetSpecsFile), want).spec;
    }
    // The built-in suite never claims a subnet spec.
    const { BUILTIN_SPEC } = await import("../scenarios/index.js");
    return BUILTIN_SPEC;
  } catch (err) {
    log.warn({ err: (err as Error).message }, "daemon.spec_unresolved");
    return want ?? 0;
  }
}
